"""Per-world parameters (Simulator.set_parameters / sample_parameters) and partial resets
(Simulator.reset(worlds, state)): a world of a batch behaves as a separate simulation of the
scene with its values, and resetting some worlds leaves the others untouched.

Tolerances. The device computes in float32 (EPS32 = 1.19e-7). A world of a batch and a
one-world simulator run the same arithmetic except (a) the order of a world's contacts, which
atomics assign, so sums over contacts round differently, and (b) a per-world modulus, applied
as a float32 scale of the scene's pressure field instead of a field built from the value in
float64: both are round-off, ~EPS32 relative per step. The solver stops at a velocity change of
`tolerance` (1e-6 m/s) per sweep, so a round-off difference can change its last sweep: velocities
may then differ by up to `tolerance` per step, positions by dt * tolerance per step per step.
Over n steps: |dv| <= n (tolerance + EPS32 V), |dp| <= n EPS32 L + dt tolerance n^2 (L, V: the
scene's size and speeds)."""

import numpy as np
import pytest

import taichi_hydro as th

from conftest import ball, ground, scene, sphere_plane_force

EPS32 = float(np.finfo(np.float32).eps)
G = 9.81
TOL = 1e-6  # SolverSettings.tolerance default [m/s]


def batch_bounds(steps, dt, size, speed, tolerance=TOL):
    """(position [m], velocity [m/s]) bounds on batch-vs-single differences (module docstring)."""
    return steps * EPS32 * size + dt * tolerance * steps**2, steps * (tolerance + EPS32 * speed)


# --------------------------------------------------------------------------- a world = a scene


def sliding_ball(mass=0.5, friction=0.4, dissipation=2.0, modulus=1e5, gravity=(0.0, 0.0, -G)):
    """A compliant ball (R = 5 cm) thrown onto a rigid floor: pressed in by 2 mm, moving down
    at 0.2 m/s, sliding at 0.5 m/s and spinning, so that mass, friction, dissipation, modulus
    and gravity all change its first 20 ms."""
    b = ball(radius=0.05, z=0.048, modulus=modulus, resolution=0.02, contact={"friction": friction, "dissipation": dissipation},
             mass=mass, velocity=[0.5, 0.0, -0.2], angular_velocity=[0.0, 3.0, 1.0])
    return scene([ground(friction=0.5), b], dt=1e-3, gravity=list(gravity))


CHANGES = {  # world -> (parameter, value of the ball), world 0 keeps the scene's values
    1: ("mass", 0.83),
    2: ("friction", 0.17),
    3: ("dissipation", 7.3),
    4: ("modulus", 1.7e5),
    5: ("gravity", (0.3, 0.0, -7.1)),
}


def test_each_world_equals_a_scene_built_with_its_parameters(arch):
    """World w of a batch whose ball has one parameter changed gives what a one-world simulator
    of the scene built with that value gives (batch_bounds over 20 steps; speeds < 1 m/s in a
    0.1 m scene); and every change moves the ball by far more than that bound."""
    steps, W = 20, 1 + len(CHANGES)
    sim = th.Simulator(sliding_ball(), worlds=W)
    values = sim.parameters()
    for w, (name, value) in CHANGES.items():
        if name == "gravity":
            values["gravity"][w] = value
        else:
            values[name][w, 1] = value
    sim.set_parameters(**values)
    sim.step(steps)
    out = sim.get_state()
    atol_p, atol_v = batch_bounds(steps, 1e-3, 0.1, 1.0)
    for w in range(W):
        name, value = CHANGES.get(w, ("mass", 0.5))
        single = th.Simulator(sliding_ball(**{name: value}))
        single.step(steps)
        ref = single.get_state()
        np.testing.assert_allclose(out["position"][w], ref["position"][0], rtol=0, atol=atol_p, err_msg=f"world {w}: {name}")
        np.testing.assert_allclose(out["velocity"][w], ref["velocity"][0], rtol=0, atol=atol_v, err_msg=f"world {w}: {name}")
        np.testing.assert_allclose(out["angular_velocity"][w], ref["angular_velocity"][0], rtol=0, atol=atol_v / 0.05,
                                   err_msg=f"world {w}: {name}")
        if w:
            moved = np.abs(out["velocity"][w, 1] - out["velocity"][0, 1]).max()
            assert moved > 100 * atol_v, f"{name} changed the ball's velocity by {moved} m/s only"


def modulus_scene(slab=1e6, a=1e5, d=8e4, c=1.2e5):
    """Every way the narrow phase reads a pressure field: ball a on a compliant slab
    (tet-slab), ball d on ball a (tet-tet), a rigid box on the slab (slab-triangle) and ball c
    on the box (tet-triangle). Moduli [Pa]; a and d have different dissipations, so their
    pair's d depends on both moduli."""
    floor = {"name": "slab", "type": "static", "shape": {"type": "halfspace"},
             "contact": {"modulus": slab, "slab_thickness": 0.1, "dissipation": 1.0}}
    box = {"name": "box", "mass": 1.0, "position": [0.3, 0.0, 0.049], "shape": {"type": "box", "size": [0.1, 0.1, 0.1]}}
    bodies = [
        floor,
        ball("a", radius=0.05, z=0.047, modulus=a, resolution=0.025, contact={"dissipation": 3.0}),
        ball("d", radius=0.05, z=0.145, modulus=d, resolution=0.025, contact={"dissipation": 0.5}),
        box,
        ball("c", radius=0.04, z=0.137, modulus=c, resolution=0.02, position=[0.3, 0.0, 0.137]),
    ]
    return scene(bodies, dt=1e-3)


def test_per_world_modulus_scales_every_pressure_read(arch):
    """World 1 with every modulus changed (slab, three balls; factors that are not powers of
    two) equals the scene built with those moduli, for every body, over 20 steps; world 0
    equals the original scene. Speeds stay below 1 m/s in a 0.3 m scene."""
    steps = 20
    changed = dict(slab=2.3e6, a=1.3e5, d=2.1e4, c=1.9e5)
    sim = th.Simulator(modulus_scene(), worlds=2)
    modulus = sim.parameters()["modulus"]
    assert np.isnan(modulus[:, 3]).all()  # the rigid box has no modulus
    modulus[1] = [changed["slab"], changed["a"], changed["d"], np.nan, changed["c"]]
    sim.set_parameters(modulus=modulus)
    sim.step(steps)
    assert sim.solver_stats()["contacts"].min() > 10
    out = sim.get_state()
    atol_p, atol_v = batch_bounds(steps, 1e-3, 0.3, 1.0)
    for w, sc in ((0, modulus_scene()), (1, modulus_scene(**changed))):
        single = th.Simulator(sc)
        single.step(steps)
        ref = single.get_state()
        np.testing.assert_allclose(out["position"][w], ref["position"][0], rtol=0, atol=atol_p, err_msg=f"world {w}")
        np.testing.assert_allclose(out["velocity"][w], ref["velocity"][0], rtol=0, atol=atol_v, err_msg=f"world {w}")
    moved = np.abs(out["velocity"][1, 1:] - out["velocity"][0, 1:]).max(axis=1)
    assert np.all(moved > 10 * atol_v), moved


def test_per_world_mass_resting_ball_carries_its_weight(arch):
    """Balls of masses m_w rest on the floor, each placed at its closed-form rest depth
    (sphere_plane_force = m g) and damped (d = 20 s/m: over-critical for these masses): after
    0.3 s the contact force is m_w g to the solver tolerance (m tolerance / dt per contact) and
    float32 sums (1e-5 relative). World 3 (mass 3 kg) falls freely from z = 5 m: the
    semi-implicit Euler closed form z_n = z0 + dt^2 g n (n + 1) / 2, whatever the mass (float32
    rounding: EPS32 |z| per step)."""
    R, E, dt, steps = 0.1, 1e5, 1e-3, 300
    masses = [0.25, 0.5, 1.0, 3.0]
    sim = th.Simulator(scene([ground(), ball(radius=R, modulus=E, contact={"dissipation": 20.0})], dt=dt), worlds=4)
    sim.set_parameters(mass=[[np.nan, m] for m in masses])
    depths = []
    for m in masses[:3]:
        lo, hi = 0.0, R / 2  # bisection for the depth where the pressure force equals m g
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if sphere_plane_force(R, E, mid) < m * G else (lo, mid)
        depths.append(lo)
    position = np.zeros((4, 2, 3))
    position[:, 1, 2] = [R - d for d in depths] + [5.0]
    sim.reset(state={"position": position})
    sim.step(steps)
    contacts = sim.solver_stats()["contacts"]
    for w, m in enumerate(masses[:3]):
        force = sim.contact_forces(w)[("ground", "ball")]
        allowed = m * TOL / dt * contacts[w] + 1e-5 * m * G
        assert force[2] == pytest.approx(m * G, abs=allowed), f"world {w}, mass {m}"
        assert np.abs(force[:2]).max() < allowed
    assert sim.contact_forces(3) == {}
    state = sim.get_state()
    z = 5.0 - G * dt * dt * steps * (steps + 1) / 2
    assert state["position"][3, 1, 2] == pytest.approx(z, abs=steps * EPS32 * 5.0)
    assert state["velocity"][3, 1, 2] == pytest.approx(-G * dt * steps, abs=steps * EPS32 * G * dt * steps)


def test_per_world_friction_decelerates_a_sliding_box(arch):
    """A box sliding on the floor at 1 m/s, with mu_w for box and floor (combined: mu_w): over
    steps 20-100 its horizontal velocity drops by mu (g T + dv_z) (Coulomb, with the normal
    impulse taken from the vertical momentum balance, so the first bounces do not matter). The
    solver tolerance bounds the error per step: steps x tolerance x contacts."""
    dt = 1e-3
    box = {"name": "box", "mass": 0.2, "position": [0, 0, 0.04], "velocity": [1.0, 0.0, 0.0],
           "shape": {"type": "box", "size": [0.2, 0.15, 0.08]}, "contact": {"modulus": 1e7, "margin": 1e-4}}
    mus = np.array([0.2, 0.5, 0.8])
    sim = th.Simulator(scene([ground(), box], dt=dt, solver={"iterations": 200}), worlds=3)
    sim.set_parameters(friction=np.column_stack([mus, mus]))
    np.testing.assert_allclose(sim.parameters()["friction"][:, 1], mus)
    sim.step(20)
    v1 = sim.get_state()["velocity"][:, 1]
    sim.step(80)
    v2 = sim.get_state()["velocity"][:, 1]
    contacts = sim.solver_stats()["contacts"]
    T = 80 * dt
    for w, mu in enumerate(mus):
        assert v2[w, 0] > 0.05, "the box must still slide"
        expected = -mu * (G * T + (v2[w, 2] - v1[w, 2]))
        assert v2[w, 0] - v1[w, 0] == pytest.approx(expected, abs=80 * TOL * contacts[w]), f"world {w}, mu {mu}"


def test_per_world_gravity_free_fall(arch):
    """Free fall with g_w per world (one given as a (3,) vector for all, then per world):
    v_n = n g dt, z_n = z0 + dt^2 g n (n + 1) / 2 (float32: EPS32 |x| per step). Parameters
    persist across reset()."""
    dt, n = 1e-3, 100
    sim = th.Simulator(scene([ball(z=10.0)], dt=dt), worlds=3)
    sim.set_parameters(gravity=[0.0, 0.0, -1.0])
    np.testing.assert_array_equal(sim.parameters()["gravity"], [[0.0, 0.0, -1.0]] * 3)
    g = np.array([[0.0, 0.0, -9.81], [1.5, 0.0, -3.0], [0.0, -2.0, -20.0]])
    sim.set_parameters(gravity=g)
    sim.step(n)
    sim.reset()
    sim.step(n)
    out = sim.get_state()
    np.testing.assert_allclose(out["velocity"][:, 0], n * dt * g, rtol=0, atol=n * EPS32 * 2.0)
    expected = np.array([0.0, 0.0, 10.0]) + dt * dt * g * n * (n + 1) / 2
    np.testing.assert_allclose(out["position"][:, 0], expected, rtol=0, atol=n * EPS32 * 10.0)
    np.testing.assert_array_equal(sim.parameters()["gravity"], g)
    sim.reset_parameters()
    np.testing.assert_array_equal(sim.parameters()["gravity"], [[0.0, 0.0, -G]] * 3)


# --------------------------------------------------------------------------- sampling


def test_sample_parameters_is_deterministic_and_within_ranges(arch):
    W = 6
    sim = th.Simulator(sliding_ball(), worlds=W)
    ranges = dict(mass=(0.8, 1.2), friction=(0.3, 0.6), dissipation=(0.0, 5.0), modulus=(0.5, 2.0), gravity_z=(-10.0, -9.6))
    a = sim.sample_parameters(0, **ranges)
    applied = sim.parameters()
    for key, value in a.items():
        np.testing.assert_array_equal(applied[key], value)
    assert set(a) == {"mass", "friction", "dissipation", "modulus", "gravity"}
    np.testing.assert_array_equal(sim.sample_parameters(0, **ranges)["mass"], a["mass"])
    b = sim.sample_parameters(1, **ranges)
    assert not np.array_equal(a["friction"], b["friction"])
    # Mass and modulus are factors of the scene's value; NaN where they do not apply.
    assert np.isnan(a["mass"][:, 0]).all() and np.isnan(a["modulus"][:, 0]).all()
    for key, scene_value in (("mass", 0.5), ("modulus", 1e5)):
        factor = a[key][:, 1] / scene_value
        assert factor.min() >= ranges[key][0] and factor.max() <= ranges[key][1]
    for key in ("friction", "dissipation"):
        assert a[key].min() >= ranges[key][0] and a[key].max() <= ranges[key][1]
    assert np.all((a["gravity"][:, 2] >= -10.0) & (a["gravity"][:, 2] <= -9.6))
    np.testing.assert_array_equal(a["gravity"][:, :2], 0.0)
    for key in ("mass", "friction", "modulus"):
        assert len(np.unique(a[key][:, 1])) == W, f"{key} is the same in two worlds"
    # A key's draws do not depend on the other keys asked for.
    np.testing.assert_array_equal(sim.sample_parameters(0, mass=(0.8, 1.2))["mass"], a["mass"])


# --------------------------------------------------------------------------- partial resets


def resting_balls():
    """A ball resting on the floor, sliding slowly (5 cm/s: the same elements stay in contact,
    so a stale warm start would find its keys). The solver runs 2 Jacobi sweeps from its warm
    start (tolerance 1e-12 is never met), so the result depends on the warm start: with the
    stale impulses of a reset world kept (warmstart.forget_worlds skipped), the test below
    measured 6e-5 m/s after 15 steps, 30 times its bound."""
    solver = {"method": "jacobi", "iterations": 2, "tolerance": 1e-12}
    return scene([ground(), ball(z=0.096, velocity=[0.05, 0.0, 0.0])], dt=1e-3, solver=solver)


def steps_like_a_fresh_simulator(sim, world, scene_, n):
    """`world` of `sim`, stepped n times, matches a fresh one-world simulator of `scene_` stepped
    as many: round-off only, n EPS32 L with L = 0.1 m, n EPS32 V with V = 1 m/s."""
    sim.step(n)
    fresh = th.Simulator(scene_)
    fresh.step(n)
    out, ref = sim.get_state(), fresh.get_state()
    for key, scale in (("position", n * EPS32 * 0.1), ("velocity", n * EPS32 * 1.0), ("angular_velocity", n * EPS32 * 1.0 / 0.1)):
        np.testing.assert_allclose(out[key][world], ref[key][0], rtol=0, atol=scale, err_msg=key)


def test_reset_seeds_newtons_start_from_the_new_state(arch):
    """Newton's world kernels may start from the last solution (newton_last); after a reset
    that is the new state's velocities at the centres of mass (solver.newton.seed_solutions),
    as a fresh simulator's first step has it, so a reset world's next steps are a fresh
    simulator's. The resting, sliding ball with Newton capped at 2 iterations and tolerance
    1e-12 (never met: the result depends on the start), 30 steps with a push on world 1, reset
    of world 1: its candidate start is a fresh simulator's bit for bit, world 0 keeps its own
    solution; 15 steps later world 1 matches a fresh simulator to round-off (the bound of
    test_reset_selected_worlds_only)."""
    solver = {"method": "newton", "iterations": 2, "tolerance": 1e-12}
    make = lambda: scene([ground(), ball(z=0.096, velocity=[0.05, 0.0, 0.0])], dt=1e-3, solver=solver)
    sim = th.Simulator(make(), worlds=2)
    force = np.zeros((2, 2, 3))
    force[1, 1, 0] = 0.4
    sim.set_control(force=force)
    sim.step(30)
    sim.reset(worlds=[1])
    fresh = th.Simulator(make(), worlds=1)
    last = sim.solver.newton_last.to_numpy()
    assert sim.solver.newton_kept.to_numpy().tolist() == [1, 2]  # world 0 kept its own solution, world 1 is seeded
    np.testing.assert_array_equal(last[1], fresh.solver.newton_last.to_numpy()[0])
    assert not np.array_equal(last[0], last[1])  # world 0's own solution: its ball has slowed
    steps_like_a_fresh_simulator(sim, 1, make(), 15)


def test_set_state_seeds_newtons_start_at_the_centre_of_mass(arch, tmp_path):
    """set_state writes velocities at the body origin; Newton's candidate start
    (newton_last) becomes the velocities at the centre of mass, v + w x (R c), the solve's
    unknowns. A mesh cube whose centre of mass is 0.1 m off its origin along x, set spinning
    about z."""
    corners = [(x, y, z) for x in (0.05, 0.15) for y in (-0.05, 0.05) for z in (-0.05, 0.05)]
    faces = [(0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1), (2, 3, 7), (2, 7, 6), (0, 2, 6), (0, 6, 4),
             (1, 5, 7), (1, 7, 3)]
    obj = tmp_path / "cube.obj"
    obj.write_text("".join(f"v {x} {y} {z}\n" for x, y, z in corners) + "".join(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in faces))
    box = {"name": "box", "mass": 1.0, "position": [0.0, 0.0, 0.5], "shape": {"type": "mesh", "file": str(obj)}}
    sim = th.Simulator(th.scene_from_dict({"body": [box], "solver": {"method": "newton"}}, source="<set_state seed>"))
    v, w = np.array([[[0.3, -0.2, 0.1]]]), np.array([[[0.0, 0.0, 2.0]]])
    sim.set_state(velocity=v, angular_velocity=w)
    last = sim.solver.newton_last.to_numpy()[0, :6]
    np.testing.assert_allclose(last, [0.3, -0.2 + 2.0 * 0.1, 0.1, 0.0, 0.0, 2.0], rtol=0, atol=1e-6)


def assert_state_equal(a, b, world_a, world_b=None):
    world_b = world_a if world_b is None else world_b
    for key in a:
        np.testing.assert_array_equal(a[key][world_a], b[key][world_b], err_msg=f"{key} of world {world_a}")


def test_reset_selected_worlds_only(arch):
    """reset(worlds=[1]) puts world 1 back to the initial state bit for bit and leaves worlds 0
    and 2 (state, controls) untouched; then world 1 steps exactly as a fresh simulator (no stale
    warm start, no control): round-off only, n EPS32 L with L = 0.1 m, n EPS32 V with V = 1 m/s
    (the solver runs a fixed number of sweeps, so no tolerance term). Masks, explicit states,
    the divergence flag, world_steps and the global clock too."""
    W = 3
    sim = th.Simulator(resting_balls(), worlds=W)
    initial = sim.get_state()
    force = np.zeros((W, 2, 3))
    force[:, 1, 0] = [0.2, 0.4, 0.6]
    sim.set_control(force=force)
    sim.step(30)
    before = sim.get_state()
    assert not np.array_equal(before["position"][1], initial["position"][1])
    sim.reset(worlds=[1])
    after = sim.get_state()
    assert_state_equal(after, initial, 1)
    for w in (0, 2):
        assert_state_equal(after, before, w)
    controls = sim.control.body_force.to_numpy()
    np.testing.assert_array_equal(controls[:, 1, 0], np.float32([0.2, 0.0, 0.6]))
    assert sim.world_steps().tolist() == [30, 0, 30] and sim.step_count == 30

    steps_like_a_fresh_simulator(sim, 1, resting_balls(), 15)
    assert sim.world_steps().tolist() == [45, 15, 45]

    # A boolean mask, and a given state (rows in the order of the selection).
    before = sim.get_state()
    sim.reset(np.array([False, False, True]))
    after = sim.get_state()
    assert_state_equal(after, initial, 2)
    assert_state_equal(after, before, 0)
    assert_state_equal(after, before, 1)
    position = np.array([[[0.0, 0.0, 0.0], [0.1, 0.2, 0.3]], [[0.0, 0.0, 0.0], [-0.1, 0.0, 0.5]]])
    velocity = np.zeros((2, 2, 3))
    velocity[0, 1] = [0.0, 1.0, 0.0]
    sim.reset(worlds=[2, 0], state={"position": position, "velocity": velocity})
    got = sim.get_state()
    np.testing.assert_array_equal(got["position"][[2, 0]], position.astype(np.float32))
    np.testing.assert_array_equal(got["velocity"][[2, 0]], velocity.astype(np.float32))
    np.testing.assert_array_equal(got["orientation"][[2, 0]], initial["orientation"][[2, 0]])
    assert_state_equal(got, after, 1)
    assert sim.world_steps().tolist() == [0, 15, 0]

    # A diverged world comes back running; a full reset restarts the clock.
    state = sim.get_state()
    state["velocity"][0, 1] = [0.0, 0.0, -5e4]
    sim.set_state(velocity=state["velocity"])
    sim.step(2)
    assert sim.world_status().tolist() == [1, 0, 0]
    sim.reset(worlds=0)
    assert sim.world_status().tolist() == [0, 0, 0]
    sim.reset()
    assert sim.step_count == 0 and sim.time == 0.0 and sim.world_steps().tolist() == [0, 0, 0]
    assert sim.step_totals()["steps"] == 0
    for w in range(W):
        assert_state_equal(sim.get_state(), initial, w)


def test_checkpoint_and_restore(arch):
    """restore(checkpoint()) puts state, frozen flags (a world frozen by an absurd speed, one
    given a NaN pose) and step counts back bit for bit, with the given controls, and restarts
    the clock; two simulators restored from one checkpoint then step alike bit for bit
    (deterministic mode; both start cold). A bad checkpoint or control is refused before
    anything is written."""
    W = 3

    def make():
        return th.Simulator(scene([ground(friction=0.5), ball(radius=0.05, z=0.048, velocity=[0.5, 0.0, -0.2])],
                                  solver={"deterministic": True}, dt=1e-3), worlds=W)

    a = make()
    state = a.get_state()
    state["velocity"][1, 1] = [0.0, 0.0, -5e4]
    a.set_state(velocity=state["velocity"])
    a.step(10)
    cp = a.checkpoint()
    assert cp["world_status"].tolist() == [0, th.FROZEN_SPEED, 0] and cp["world_steps"].tolist() == [10] * W
    cp["position"][2, 1] = np.nan
    cp["world_status"][2] = th.FROZEN_POSE
    a.step(5)
    force = np.zeros((W, 2, 3))
    force[0, 1] = [0.3, 0.0, 0.0]
    a.restore(cp, force=force)
    got = a.checkpoint()
    for key in cp:
        assert np.array_equal(got[key], cp[key], equal_nan=True), key
    assert a.time == 0.0 and a.step_count == 0
    b = make()
    b.restore(cp, force=force)
    a.step(5)
    b.step(5)
    sa, sb = a.checkpoint(), b.checkpoint()
    for key in cp:
        assert np.array_equal(sa[key], sb[key], equal_nan=True), key
    assert sa["world_status"].tolist() == [0, th.FROZEN_SPEED, th.FROZEN_POSE] and sa["world_steps"].tolist() == [15] * W
    assert not np.array_equal(sa["position"][0], cp["position"][0])
    for bad, match in [({**cp, "world_steps": cp["world_steps"][:2]}, r"world_steps must be an integer array of shape \(3,\)"),
                       ({k: v for k, v in cp.items() if k != "velocity"}, "missing 'velocity'"),
                       ({**cp, "world_status": np.array([0, 0, 9])}, "world_status of world 2 is 9")]:
        with pytest.raises(th.SceneError, match=match):
            b.restore(bad)
    with pytest.raises(th.SceneError, match="restore: force of body 'ground' in world 0 is not finite"):
        b.restore(cp, force=np.full((W, 2, 3), np.nan))
    for key, value in b.checkpoint().items():
        assert np.array_equal(value, sb[key], equal_nan=True), f"{key} changed by a refused restore"


# --------------------------------------------------------------------------- bad inputs


def test_parameter_shapes_and_bad_inputs(arch):
    """A scalar sets every body a parameter applies to in every world (NaN elsewhere), a
    (bodies,) row every world; bad values, shapes and selections raise SceneError naming the
    parameter, body, world and value, and change nothing."""
    W = 3
    sim = th.Simulator(sliding_ball(), worlds=W)
    sim.set_parameters(mass=2.0, friction=0.3, dissipation=[1.0, 4.0])
    got = sim.parameters()
    np.testing.assert_array_equal(got["mass"], [[np.nan, 2.0]] * W)
    np.testing.assert_array_equal(got["friction"], np.full((W, 2), 0.3))
    np.testing.assert_array_equal(got["dissipation"], [[1.0, 4.0]] * W)
    good = sim.parameters()
    cases = [
        (dict(mass=np.ones((2, 2))), r"mass must be .* \(3, 2\).* got shape \(2, 2\)"),
        (dict(mass=[np.nan, -1.0]), r"mass of body 'ball' in world 0 must be finite and positive \[kg\], got -1.0"),
        (dict(mass=[1.0, 1.0]), r"mass of body 'ground' in world 0: a static body has no mass; give NaN, got 1.0"),
        (dict(friction=[[0.5, 0.5], [0.5, np.nan], [0.5, 0.5]]), r"friction of body 'ball' in world 1 .* got nan"),
        (dict(dissipation=[0.0, -2.0]), r"dissipation of body 'ball' in world 0 must be finite and >= 0 \[s/m\], got -2.0"),
        (dict(modulus=[5e5, 1e5]), r"modulus of body 'ground' in world 0: a rigid geometry has no modulus"),
        (dict(modulus=0.0), r"modulus of body 'ball' in world 0 must be finite and positive \[Pa\], got 0.0"),
        (dict(gravity=[0.0, -9.81]), r"gravity must have shape \(3,\) or \(3, 3\).* got shape \(2,\)"),
        (dict(gravity=[[0, 0, -9.81], [0, 0, np.inf], [0, 0, -9.81]]), r"gravity in world 1 is not finite"),
        (dict(friction="high"), r"friction must be numeric, got 'high'"),
    ]
    for kwargs, match in cases:
        if "mass" not in kwargs:
            kwargs = dict(kwargs, mass=[np.nan, 2.0])  # a valid value beside the bad one
        with pytest.raises(th.SceneError, match=match):
            sim.set_parameters(**kwargs)
    for key, value in sim.parameters().items():  # every value is checked before any is applied
        np.testing.assert_array_equal(value, good[key])

    for worlds, match in [
        ([3], r"world index 3 is out of range \[0, 3\)"),
        ([-1], r"world index -1 is out of range"),
        ([1, 1], r"world index 1 is given more than once"),
        (np.array([True, False]), r"boolean world mask must have shape \(3,\), got shape \(2,\)"),
        (np.array([0.0, 1.0, 1.0]), r"worlds must be None, a boolean mask .* integer world indices"),
    ]:
        with pytest.raises(th.SceneError, match=match):
            sim.reset(worlds=worlds)
    with pytest.raises(th.SceneError, match=r"position must have shape \(1, 2, 3\), got \(2, 3\)"):
        sim.reset(worlds=[0], state={"position": np.zeros((2, 3))})
    with pytest.raises(th.SceneError, match=r"velocity of body 'ball' in world 2 is not finite"):
        sim.reset(worlds=[2], state={"velocity": [[[0, 0, 0], [np.nan, 0, 0]]]})
    with pytest.raises(th.SceneError, match=r"unknown state key 'pos'"):
        sim.reset(worlds=[0], state={"pos": np.zeros((1, 2, 3))})
    with pytest.raises(th.SceneError, match=r"unknown parameter 'mas'"):
        sim.sample_parameters(0, mas=(0.8, 1.2))
    with pytest.raises(th.SceneError, match=r"mass is a factor .* must be positive, got \(0.0, 1.2\)"):
        sim.sample_parameters(0, mass=(0.0, 1.2))
    with pytest.raises(th.SceneError, match=r"friction range must be finite with low <= high, got \(0.6, 0.3\)"):
        sim.sample_parameters(0, friction=(0.6, 0.3))
