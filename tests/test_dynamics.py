"""Time stepping against closed form, the papers and Drake's figures (DESIGN §2-3)."""

import dataclasses
import math

import numpy as np
import pytest

import taichi_hydro as th

from conftest import ON_LAVAPIPE_ELSEWHERE, ROOT, ball, ground, scene

G = 9.81
TOLERANCE = th.SolverSettings().tolerance  # the default stopping tolerance [m/s]


def box(name="box", size=(0.2, 0.15, 0.08), mass=0.2, position=(0, 0, 0.04), orientation=(1, 0, 0, 0), **contact):
    return {"name": name, "mass": mass, "position": list(position), "orientation": list(orientation),
            "shape": {"type": "box", "size": list(size)}, "contact": {"modulus": 1e7, "margin": 1e-4, **contact}}


def test_free_fall_is_semi_implicit_euler(arch, tol):
    """No contact: v_n = v0 + n g dt and z_n = z0 + n dt v0 + dt^2 g n (n+1) / 2 exactly (the
    velocity is updated first); float32 rounding grows like n eps."""
    dt, n = 1e-3, 300
    sim = th.Simulator(scene([ball(z=10.0, velocity=[0.3, 0.0, 2.0])], dt=dt, gravity=[0, 0, -G]), worlds=2)
    state = sim.get_state()
    state["velocity"][1, 0] = [-1.0, 0.5, -4.0]
    sim.set_state(velocity=state["velocity"])
    v0 = state["velocity"][:, 0].copy()
    sim.step(n)
    out = sim.get_state()
    g = np.array([0, 0, -G])
    np.testing.assert_allclose(out["velocity"][:, 0], v0 + n * dt * g, atol=n * 1e-7 * 5)
    expected = np.array([0, 0, 10.0]) + n * dt * v0 + dt * dt * g * n * (n + 1) / 2
    np.testing.assert_allclose(out["position"][:, 0], expected, atol=n * 1e-7 * 10)
    assert sim.time == pytest.approx(n * dt)


@pytest.mark.launches(17_000)
def test_torque_free_rotation_conserves_angular_momentum(arch):
    """A box spinning about a tilted axis (not a principal one): the implicit gyroscopic term
    keeps |L| (world frame) within 1% over 1 s at dt = 1 ms (it damps energy a little, never
    adds it)."""
    body = box(position=(0, 0, 5.0), size=(0.3, 0.1, 0.05))
    body["angular_velocity"] = [3.0, 1.0, 8.0]
    sim = th.Simulator(scene([body], dt=1e-3, gravity=[0, 0, 0]))
    inertia = sim.model.host.body_inertia_B[0]

    def momentum_energy():
        s = sim.get_state()
        w, q = s["angular_velocity"][0, 0], s["orientation"][0, 0]
        from oracle import quat_matrix

        R = quat_matrix(q)
        I_W = R @ inertia @ R.T
        return np.linalg.norm(I_W @ w), 0.5 * w @ I_W @ w

    L0, E0 = momentum_energy()
    sim.step(1000)
    L1, E1 = momentum_energy()
    assert abs(L1 / L0 - 1) < 0.01
    assert E1 <= E0 * (1 + 1e-4)


@pytest.mark.parametrize("method", [pytest.param("gauss_seidel", marks=ON_LAVAPIPE_ELSEWHERE), "newton"])
def test_resting_box_carries_its_weight(arch, method):
    """A box at rest on the floor: the solved contact force equals m g (to the solver tolerance
    times m / dt) and the box does not drift."""
    dt = 1e-3
    sim = th.Simulator(scene([ground(), box(position=(0, 0, 0.04))], dt=dt, solver={"iterations": 300, "method": method}))
    sim.step(200)
    p0 = sim.get_state()["position"][0, 1]
    sim.step(300)
    forces = sim.contact_forces()
    f = forces[("ground", "box")]
    tolerance_force = 0.2 * sim.settings.tolerance / dt * 10  # m * tol / dt, for the 10-ish contacts
    assert f[2] == pytest.approx(0.2 * G, abs=tolerance_force + 1e-4 * 0.2 * G)
    assert np.abs(f[:2]).max() < tolerance_force + 1e-4
    drift = np.abs(sim.get_state()["position"][0, 1] - p0).max()
    assert drift < 1e-6


def incline_scene(angle, mu, dt=1e-3, schedule="auto"):
    """A box on a plane tilted by `angle` [deg] about y. schedule: "auto", "world", "contact",
    or a method of the world schedule ("gauss_seidel", "newton")."""
    method = "auto"
    if schedule in ("gauss_seidel", "newton"):
        schedule, method = "world", schedule
    a = math.radians(angle)
    q = [math.cos(a / 2), 0.0, math.sin(a / 2), 0.0]
    n = np.array([math.sin(a), 0.0, math.cos(a)])
    plane = {"name": "incline", "type": "static", "orientation": q, "shape": {"type": "halfspace"}, "contact": {"friction": mu}}
    return scene([plane, box(position=(0.04 * n).tolist(), orientation=q, friction=mu)], dt=dt,
                 solver={"iterations": 200, "schedule": schedule, "method": method})


# The incline tests run Gauss-Seidel and Newton (the default) on the world schedule, and the
# contact schedule (the GPU default: accelerated Jacobi) on the CPU backend. Not on lavapipe: 200 sweeps of two launches for each of 300-500 steps are past its
# launch budget (tests/conftest.py); the schedules are compared on Vulkan in
# test_simulation.py::test_world_and_contact_schedules_agree.
SCHEDULES = [pytest.param("gauss_seidel", marks=ON_LAVAPIPE_ELSEWHERE), pytest.param("contact", marks=pytest.mark.launches(230_000)), "newton"]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_incline_sticks_below_the_friction_angle(arch, schedule):
    """tan 20 deg = 0.364 < mu = 0.5: the box stays. Displacement over 0.5 s below 20 um: the
    settling (~ g dt^2 per step) plus creep at the solver tolerance."""
    sim = th.Simulator(incline_scene(20.0, 0.5, schedule=schedule))
    p0 = sim.get_state()["position"][0, 1]
    sim.step(500)
    moved = np.linalg.norm(sim.get_state()["position"][0, 1] - p0)
    print(f"incline 20 deg, mu 0.5: moved {moved * 1e6:.2f} um in 0.5 s")
    assert moved < 2e-5


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_incline_slides_with_coulomb_acceleration(arch, schedule):
    """tan 20 deg > mu = 0.2: a = g (sin t - mu cos t) along the slope, measured from the
    velocity gained between 0.1 s and 0.4 s. Each step the solver meets its tolerance, so the
    error on a is below tolerance / dt per step: we allow 1%."""
    angle, mu = 20.0, 0.2
    sim = th.Simulator(incline_scene(angle, mu, schedule=schedule))
    sim.step(100)
    v1 = sim.get_state()["velocity"][0, 1]
    sim.step(300)
    v2 = sim.get_state()["velocity"][0, 1]
    a = math.radians(angle)
    down = np.array([math.cos(a), 0.0, -math.sin(a)])
    measured = (v2 - v1) @ down / 0.3
    expected = G * (math.sin(a) - mu * math.cos(a))
    print(f"incline 20 deg, mu 0.2: a = {measured:.5f} m/s^2, expected {expected:.5f}")
    assert measured == pytest.approx(expected, rel=0.01)
    # No hopping: the normal velocity stays at the solver tolerance level.
    assert abs(v2 @ np.array([math.sin(a), 0.0, math.cos(a)])) < 1e-3


COIN_R = 0.01213
COIN_TOLERANCE = 1e-7  # the coin's stopping tolerance [m/s]


def coin_scene(mode="coulomb", resolution=0.0005, dt=1e-3, tolerance=COIN_TOLERANCE, method="auto", deterministic=False):
    data = {
        "sim": {"dt": dt},
        "solver": {"mode": mode, "tolerance": tolerance, "iterations": 300, "method": method,
                   "deterministic": deterministic},
        "body": [
            ground(friction=0.2),
            {"name": "coin", "mass": 0.00567, "position": [0, 0, 0.000875],
             "shape": {"type": "cylinder", "radius": COIN_R, "length": 0.00175},
             "contact": {"modulus": 1e9, "resolution": resolution, "friction": 0.2}},
        ],
    }
    return th.scene_from_dict(data, source="coin")


def spin_coin(sim, eps0, speed):
    """Start world k with eps = v / (w R) = eps0[k] and v^2 + (w R)^2 = speed^2; run until all
    stop; return eps at the last step before each stops, and the largest height change."""
    state = sim.get_state()
    for k, e in enumerate(eps0):
        wr = speed / math.hypot(e, 1.0)
        state["velocity"][k, 1] = [e * wr, 0, 0]
        state["angular_velocity"][k, 1] = [0, 0, wr / COIN_R]
    sim.set_state(velocity=state["velocity"], angular_velocity=state["angular_velocity"])
    last = np.full(len(eps0), np.nan)
    rise = np.zeros(len(eps0))
    stop_speed = 0.2 * G * sim.dt  # one step of friction deceleration: below this it stops
    for _ in range(int(2 * speed / (0.2 * G) / sim.dt)):
        sim.step(1)
        s = sim.get_state()
        v = np.linalg.norm(s["velocity"][:, 1, :2], axis=1)
        wr = np.abs(s["angular_velocity"][:, 1, 2]) * COIN_R
        moving = np.hypot(v, wr) > stop_speed
        last = np.where(moving, v / np.maximum(wr, 1e-12), last)
        rise = np.maximum(rise, np.abs(s["position"][:, 1, 2] - 0.000875))
        if not moving.any():
            break
    return last, rise


@pytest.mark.launches(6_000)
def test_spinning_disk_slows_at_its_torsional_friction(arch):
    """A compliant disk (1 kg, radius 5 cm, 2 cm thick, E = 1e6 Pa, mu = 0.5) settled on a rigid
    floor and set spinning at 5 rad/s about its axis: every polygon slides (its slip, omega
    rho, is far above the stiction band mu gamma_n R_t), so each step removes omega by
    dt mu sum_i gamma_n,i rho_i / I_z, with gamma_n,i / dt = F_n A_i p0_i / sum_j A_j p0_j (the
    solved normal force F_n shared as the static pressures; rho_i the distance of polygon i's
    centroid from the axis: ContactSurface.torsional_capacity). This is the twist through
    centimetre lever arms that per-contact iterations remove slowly. Error allowed over n
    steps: n x the stopping tolerance over the rim radius (no point of the disk is off by more
    than the tolerance after a solve), plus float32 rounding of omega each step."""
    mass, radius, mu, dt, n, omega0 = 1.0, 0.05, 0.5, 1e-3, 20, 5.0
    disk = {"name": "disk", "mass": mass, "position": [0.0, 0.0, 0.01 - 2e-4],
            "shape": {"type": "cylinder", "radius": radius, "length": 0.02},
            "contact": {"hydro": "compliant", "modulus": 1e6, "friction": mu}}
    sim = th.Simulator(scene([ground(friction=mu), disk], dt=dt, gravity=[0, 0, -G]))
    sim.step(100)
    spin = sim.get_state()["angular_velocity"]
    spin[0, 1] = [0.0, 0.0, omega0]
    sim.set_state(angular_velocity=spin)
    surface = sim.contact_surfaces()[0]
    poly = surface.polygons
    static = (poly["area"] * poly["pressure"])[(poly["pressure"] > 0) & poly["contact"]].sum()
    capacity = surface.torsional_capacity(mu)  # sum_i mu A_i p0_i rho_i [N m]
    inertia_z = mass * radius**2 / 2
    omega, expected = [omega0], omega0
    for _ in range(n):
        sim.step(1)
        normal = sim.contact_forces()[("ground", "disk")][2]
        expected -= dt * capacity * normal / static / inertia_z
        omega.append(float(sim.get_state()["angular_velocity"][0, 1, 2]))
    lost = omega0 - omega[-1]
    print(f"spin-down: lost {lost:.7g} rad/s in {n} steps, expected {omega0 - expected:.7g} "
          f"(static torque {capacity:.5g} N m, {surface.faces} polygons)")
    assert np.all(np.diff(omega) < 0) and omega[-1] > 0  # sliding throughout
    allowed = n * TOLERANCE / radius + n * omega0 * float(np.finfo(np.float32).eps)
    assert lost == pytest.approx(omega0 - expected, abs=allowed)
    assert lost > 100 * allowed  # the torque is measured, not lost in the allowance


# eps* of the Newton solve (COIN_TOLERANCE) for eps0 = 0.3, 1, 3, 10 on cpu.
COIN_EPS_NEWTON = [0.6442, 0.6442, 0.6441, 0.6461]
# eps* of Gauss-Seidel as recorded when Newton was specified (issue 17: Newton within 0.005 of them).
COIN_EPS_GAUSS_SEIDEL_RECORDED = [0.6426, 0.6430, 0.6437, 0.6471]
COIN_EPS0 = [0.3, 1.0, 3.0, 10.0]


def coin_eps_error(tolerance, speed):
    """Bound on eps = v / (w R) read at a step whose solve met `tolerance` [m/s] on v and w R, at
    `speed` = hypot(v, w R) [m/s] near eps* ~ 0.65: d eps = tol (1 + eps) / (w R), w R = speed /
    sqrt(1 + eps^2); one step's error, which the attractor damps instead of accumulating."""
    eps = 0.653
    return tolerance * (1 + eps) * math.sqrt(1 + eps**2) / speed


def spin_coin_batch(method, deterministic=False):
    """(simulator, eps*, height change) of one batch of coins, one per COIN_EPS0, started at
    2 m/s with `method` (spin_coin); prints eps* and the largest height change."""
    sim = th.Simulator(coin_scene(method=method, deterministic=deterministic), worlds=len(COIN_EPS0))
    eps, rise = spin_coin(sim, COIN_EPS0, speed=2.0)
    print(f"coin ({method}) eps* for eps0 {COIN_EPS0}: {np.round(eps, 4).tolist()}, max height change {rise.max():.2e} m")
    return sim, eps, rise


@pytest.mark.launches(24_000)
def test_coin_reaches_farkas_ratio_without_hopping(arch):
    """Masterjohn 2022 §V-A: eps = v / (w R) just before the coin stops is 0.653 (Farkas 2003)
    for any eps0; the paper finds 0.644 on its 152-sided mesh (1.4 % low: we allow 2 %). We
    start from eps0 = 0.3 ... 10 (four worlds, one batch) at a speed 1000 x the stopping
    threshold mu g dt, so the slow approach to the attractor has room; the coin must stay on the
    ground (Coulomb-exact: no separating velocity while sliding). Newton solves each step to its
    tolerance whatever the order of the rows, so eps* must also match the values recorded above
    to ten times one step's tolerance error at the stopping speed (coin_eps_error), and the
    Gauss-Seidel values recorded when it was specified to 0.005, as issue 17 asks (what
    Gauss-Seidel reaches now moves with its row order: the next test)."""
    sim, eps, rise = spin_coin_batch("newton")
    np.testing.assert_allclose(eps, 0.653, rtol=0.02)
    allowed = 10 * coin_eps_error(COIN_TOLERANCE, 0.2 * G * sim.dt)
    assert allowed < 2e-3  # the check is finer than the 2 % band above
    np.testing.assert_allclose(eps, COIN_EPS_NEWTON, atol=allowed)
    np.testing.assert_allclose(eps, COIN_EPS_GAUSS_SEIDEL_RECORDED, atol=0.005)  # the spread of eps* over eps0
    # Never leaves the ground: the height changes only by the coin's static sink under its
    # weight (observed 3e-9 m); the bound is 1e-8 m (the bound before it, g dt^2 =
    # 1e-5 m, would have passed a coin rising a few mm/s).
    assert rise.max() <= 1e-8


@pytest.mark.launches(24_000)
def test_gauss_seidel_coin_stops_sliding_and_spinning_together(arch):
    """Gauss-Seidel does not converge on the sliding coin (README, Validation: after 24 000
    sweeps its residual is still 1e-3 m/s), so the eps* it reaches depends on the order of its
    rows: 0.640 to 0.648 from run to run with the default, timing-dependent order (eps0 = 3).
    In deterministic mode the order is fixed, so the run repeats. What holds whatever the
    order is Farkas's law itself, that translation and spin stop together (decoupled or
    point-contact friction stops one first: eps* 0 or unbounded) near 0.653, here within 5 %,
    and the Coulomb-exact projection: the coin never leaves the ground."""
    _, eps, rise = spin_coin_batch("gauss_seidel", deterministic=True)
    np.testing.assert_allclose(eps, 0.653, rtol=0.05)
    assert rise.max() <= 1e-8


@pytest.mark.launches(11_500)
def test_convex_mode_coin_hydroplanes(arch):
    """Anitescu's convex relaxation lifts a sliding coin (separating velocity mu |v_t|): it
    leaves the ground by far more than the contact compliance allows."""
    sim = th.Simulator(coin_scene(mode="convex"))
    _, rise = spin_coin(sim, [1.0], speed=0.5)
    print(f"convex mode: the coin rose {rise[0]:.3e} m")
    assert rise[0] > 100 * G * sim.dt**2


def bounce_restitution(dt, dissipation=0.0, bounces=1):
    """Ball of Drake's reference (r 5 cm, E 100 kPa, 0.5 kg, dropped 0.2 m): restitution from
    the apex heights of the bottom above the floor, e = sqrt(h1 / h0)."""
    body = ball(radius=0.05, z=0.25, resolution=0.01, contact={"dissipation": dissipation, "friction": 0.0})
    sim = th.Simulator(scene([ground(friction=0.0), body], dt=dt))
    heights, z_prev, v_prev = [0.2], None, None
    steps_per_check = max(1, int(1e-3 / dt))
    for _ in range(int(0.45 * (bounces + 1) / dt / steps_per_check)):
        sim.step(steps_per_check)
        s = sim.get_state()
        z, v = s["position"][0, 1, 2], s["velocity"][0, 1, 2]
        if v_prev is not None and v_prev > 0 >= v:
            heights.append(max(z_prev, z) - 0.05)
            if len(heights) > bounces:
                break
        z_prev, v_prev = z, v
    return [math.sqrt(max(h1, 0) / h0) for h0, h1 in zip(heights, heights[1:])]


@pytest.mark.launches(100_000)
def test_restitution_matches_drake(arch, reference):
    """Frictionless ball, d = 0: restitution >= 0.83 at dt = 1 ms and >= 0.98 at 0.1 ms (Drake's
    discrete solvers: 0.829 and 0.981); Hunt-Crossley d = 1 s/m lowers it (Drake TAMSI 0.29)."""
    e1 = bounce_restitution(1e-3)[0]
    e01 = bounce_restitution(1e-4)[0]
    ed = bounce_restitution(1e-3, dissipation=1.0)
    drake = {(r["approximation"], r["time_step"], r["hunt_crossley_dissipation"]): r["restitution_from_apex_heights"]
             for r in reference["dynamic_scenes"]["j_ball_drop"]["runs"]}
    print(f"restitution: {e1:.4f} at 1 ms (Drake TAMSI {drake[('tamsi', 0.001, 0.0)][0]:.4f}), {e01:.4f} at 0.1 ms "
          f"(Drake {drake[('tamsi', 0.0001, 0.0)][0]:.4f}), d = 1: {ed[0] if ed else 0:.4f} (Drake {drake[('tamsi', 0.001, 1.0)][0]:.4f})")
    assert e1 >= 0.83 - 0.005
    assert e01 >= 0.98
    assert (ed[0] if ed else 0.0) < 0.5 * e1


@pytest.mark.launches(55_000)
def test_first_order_convergence_in_time_step(arch):
    """Semi-implicit Euler with the linearised contact is first order: the error of the ball's
    height during the first bounce (vs dt = 0.125 ms) halves with dt."""
    t_end = 0.25  # inside the first contact (impact at ~0.2 s)
    heights = {}
    for dt in (2e-3, 1e-3, 5e-4, 1.25e-4):
        sim = th.Simulator(scene([ground(friction=0.0), ball(radius=0.05, z=0.25, resolution=0.01, contact={"friction": 0.0})], dt=dt))
        zs = []
        for _ in range(int(round(t_end / 0.01))):
            sim.step(int(round(0.01 / dt)))
            zs.append(sim.get_state()["position"][0, 1, 2])
        heights[dt] = np.array(zs)
    ref = heights[1.25e-4]
    errors = [np.abs(heights[dt] - ref).max() for dt in (2e-3, 1e-3, 5e-4)]
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    print(f"dt convergence: errors {errors}, orders {orders}")
    assert np.all(orders > 0.8)


@pytest.mark.parametrize("method", [pytest.param("gauss_seidel", marks=ON_LAVAPIPE_ELSEWHERE), "newton"])
@pytest.mark.parametrize("modulus", [1e8, 1e9])
def test_box_stack_stays_with_margin(arch, modulus, method):
    """Drake's margin case: two boxes 0.2 x 0.15 x 0.08 m, 0.2 kg, dropped 1 mm at dt = 10 ms.
    With margin 1e-4 m the stack stays for 3 s: the upper box within 1 cm of its place and
    level within 1 degree."""
    data = th.load_scene(ROOT / "scenes" / "box_stack.toml")
    bodies = []
    for b in data.bodies:
        body = {"name": b.name, "type": b.type, "position": list(b.p_WB), "shape": {"type": b.shape.type}}
        if b.shape.type == "box":
            body.update(mass=b.mass, shape={"type": "box", "size": list(b.shape.size)},
                        contact={"modulus": modulus, "margin": 1e-4, "friction": 0.5})
        else:
            body["contact"] = {"friction": 0.5}
        bodies.append(body)
    sim = th.Simulator(scene(bodies, dt=0.01, solver={"method": method}))
    sim.step(300)
    s = sim.get_state()
    upper = s["position"][0, 2]
    assert (sim.world_status() == 0).all()
    assert abs(upper[2] - 0.12) < 0.01 and np.abs(upper[:2]).max() < 0.01
    from oracle import quat_matrix

    tilt = math.degrees(math.acos(min(1.0, quat_matrix(s["orientation"][0, 2])[2, 2])))
    assert tilt < 1.0


@pytest.mark.launches(93_000)
def test_coin_ratio_converges_with_mesh_refinement(arch):
    """eps* on n-gon coins, n = 20, 39, 77 against n = 153: the differences shrink roughly like
    1/n^2 (the coin's faces are fans of n triangles; Masterjohn 2022 Fig. 6 finds second order
    in the grid size). The limit is the fan's one-point quadrature value, 0.644 (the paper:
    0.64426 on its 152-triangle fan), 1.4% under the smooth disk's 0.653."""
    results = {}
    for resolution in (0.004, 0.002, 0.001, 0.0005):
        sim = th.Simulator(coin_scene(resolution=resolution), worlds=1)
        eps, _ = spin_coin(sim, [1.0], speed=2.0)
        results[math.ceil(2 * math.pi * COIN_R / resolution)] = float(eps[0])
    sides = sorted(results)
    finest = results[sides[-1]]
    diffs = np.array([abs(results[n] - finest) for n in sides[:-1]])
    orders = np.log(diffs[:-1] / np.maximum(diffs[1:], 1e-12)) / np.log(np.array(sides[1:-1]) / np.array(sides[:-2]))
    print(f"coin eps* by sides {results}; |eps - eps(153)| {diffs}, orders {orders}")
    assert diffs[-1] < diffs[0] / 4
    assert abs(finest - 0.653) < 0.02 * 0.653


def test_solver_methods_agree(arch):
    """Jacobi (with mass splitting), accelerated Jacobi and Gauss-Seidel solve the same cone
    complementarity problem: from the same state of a box sticking on an incline (22 contacts
    on one body), one cold-started step with each gives the velocities of a converged solve
    (Gauss-Seidel to round-off: 20 000 sweeps, tolerance 0) to 1e-6 m/s, 1e-4 of the 1e-2 m/s
    the box would gain in one step of free fall (observed: plain Jacobi 4.5e-8 m/s after 5000
    sweeps; accelerated Jacobi 2.7e-7 m/s, stopping at 1e-7 m/s per sweep after 81 sweeps).
    The stopping test (no body point changes velocity by more than the tolerance over a
    sweep) leaves an error of the order of the tolerance: Gauss-Seidel at the default 1e-6 m/s
    must be within 10x of it (observed: 1.0e-6 m/s after 25 sweeps). The momentum must pay:
    after 100 sweeps accelerated Jacobi is at least 10x closer to the converged velocities
    than plain Jacobi (observed: 1.6e-7 against 1.6e-4 m/s). Newton solves the same problem:
    run to a zero step (100 iterations at most) within 1e-6 m/s, and at the default tolerance
    within the tolerance, stopping by the test (observed: 2.1e-10 m/s after 11 and after 8
    iterations; from the cold start the friction bound is zero in the first iteration)."""
    settle = th.Simulator(incline_scene(20.0, 0.5))
    settle.step(100)
    state = settle.get_state()

    def one_step(method, iterations, tolerance):
        s = incline_scene(20.0, 0.5)
        s = dataclasses.replace(s, solver=dataclasses.replace(s.solver, method=method, schedule="world", iterations=iterations,
                                                               tolerance=tolerance))
        sim = th.Simulator(s)
        sim.set_state(**state)
        sim.step(1)
        return (sim.get_state()["velocity"][0, 1], sim.get_state()["angular_velocity"][0, 1],
                int(sim.solver_stats()["iterations"][0]), int(sim.solver_stats()["contacts"][0]))

    vg, wg, _, cg = one_step("gauss_seidel", 20000, 0.0)
    out = {"jacobi": one_step("jacobi", 5000, 0.0), "accelerated": one_step("accelerated", 5000, 1e-7),
           "gauss_seidel": one_step("gauss_seidel", 5000, TOLERANCE), "newton": one_step("newton", 100, 0.0)}
    print("incline:", {m: f"{o[3]} contacts, {o[2]} sweeps, |dv| {np.abs(o[0] - vg).max():.2e} m/s" for m, o in out.items()})
    assert cg > 10
    for method in ("jacobi", "accelerated", "newton"):
        v, w, _, c = out[method]
        assert c == cg
        np.testing.assert_allclose(v, vg, atol=1e-6, err_msg=method)
        np.testing.assert_allclose(w, wg, atol=1e-6 / 0.1, err_msg=method)
    assert out["accelerated"][2] < 5000
    v, w, it, _ = one_step("newton", 100, TOLERANCE)
    print(f"newton at the default tolerance: {it} iterations, |dv| {np.abs(v - vg).max():.2e} m/s")
    assert it < 100
    np.testing.assert_allclose(v, vg, atol=TOLERANCE)
    v, w, it, _ = out["gauss_seidel"]
    assert it < 5000
    np.testing.assert_allclose(v, vg, atol=10 * TOLERANCE)
    error = {m: np.abs(one_step(m, 100, 0.0)[0] - vg).max() for m in ("jacobi", "accelerated")}
    print(f"after 100 sweeps: |v - v_converged| {error}")
    assert error["accelerated"] < error["jacobi"] / 10


def test_gauss_seidel_sleep_skips_settled_bodies_at_no_cost_in_accuracy(arch):
    """Gauss-Seidel skips the contacts of bodies that have settled within a step, and wakes
    them when their neighbours move them (solver module docstring). In scenes/pile.toml (27
    spheres) after 46 steps, while spheres land on others, the next step's solve is run from
    the same warm-started state with sleep off and on (sweep cap raised so that both stop by
    the tolerance) and against a converged solve (tolerance 0, 20 000 sweeps).
    - Sleep skips contacts (observed in the deterministic mode: 66 254 updates in 115 sweeps of
      578 contacts, against 65 314 in 113 sweeps without sleep). Spheres fall asleep and are
      woken again: counted with a one-off probe, about 4000 wakes over the pile's first 150
      steps, 141 in this step.
    - Sweeps: a sphere that is never woken again keeps a drift the stopping test counts, so
      the solve would run to the cap (5000 sweeps); allowed: 25 % more than without sleep.
    - Accuracy: the slow friction modes leave both solves tens of tolerances from the
      converged velocities (observed: worst 4.9e-5 m/s at a sphere's rim, with sleep and
      without), and sleep only changes the sweep at which each sphere stops by the same test;
      so the worst errors must agree to within a factor 2 (plus the tolerance)."""
    from taichi_hydro.solver.world_schedule import world_solver

    pile = th.load_scene(ROOT / "scenes" / "pile.toml")
    # Deterministic mode: the same problem at every run (rows appended by the threads of the
    # candidate search come in a timing-dependent order otherwise, and Gauss-Seidel's sweeps,
    # the trajectory to step 46 and both errors with them change from run to run).
    solver = dataclasses.replace(pile.solver, schedule="world", method="gauss_seidel", deterministic=True)
    sim = th.Simulator(dataclasses.replace(pile, solver=solver))
    sim.step(46)
    plan, args = sim.step_plan, sim.bindings()
    k = next(i for i, (kernel, _) in enumerate(plan.launches) if kernel is world_solver(True, False, True, True))
    for kernel, names in plan.launches[:k]:  # the next step up to its solve
        kernel(*(args[n] for n in names))
    start = {n: args[n].to_numpy() for n in ("c_gamma", "body_vc", "body_wc")}
    reach = sim.model.body_reach.to_numpy()[:, None]

    def solve(sleep=1, **over):
        for n, value in start.items():
            args[n].from_numpy(value)
        world_solver(True, False, sleep == 1, True)(*({**args, "iterations": 5000, **over}[n] for n in plan.launches[k][1]))
        stats = [args[n].to_numpy()[0] for n in ("world_iterations", "world_residual", "world_contacts", "world_updates")]
        return args["body_vc"].to_numpy()[0], reach * args["body_wc"].to_numpy()[0], stats

    v_ref, w_ref, _ = solve(tolerance=0.0, iterations=20000, sleep=0)
    (v0, w0, s0), (v1, w1, s1) = solve(sleep=0), solve(sleep=1)
    print(f"sweeps {int(s0[0])} / {int(s1[0])}, updates {int(s0[3])} / {int(s1[3])} of {int(s1[2])} contacts")
    e = [np.abs(x - r).max(axis=1) for x, r in ((v0, v_ref), (v1, v_ref), (w0, w_ref), (w1, w_ref))]
    print("worst |v - v_ref| without / with sleep", [x.max() for x in e])
    assert int(s0[3]) == int(s0[0]) * int(s0[2])
    assert int(s1[3]) < int(s1[0]) * int(s1[2])  # contacts were skipped
    assert int(s1[0]) <= 1.25 * int(s0[0])  # and the sweeps did not stall
    assert e[1].max() <= 2 * e[0].max() + TOLERANCE and e[3].max() <= 2 * e[2].max() + TOLERANCE
    off = th.Simulator(dataclasses.replace(pile, solver=dataclasses.replace(sim.settings, sleep=False)))  # the scene key
    off.step(46)
    stats = off.solver_stats()
    assert stats["updates"][0] == stats["iterations"][0] * stats["contacts"][0] > 0


@pytest.mark.launches(11_000)  # Newton's run (the vulkan pass); the cpu pass adds Gauss-Seidel's
def test_newton_holds_the_box_stack_without_creep(arch):
    """scenes/box_stack.toml (Drake's margin case, dt = 10 ms) held for 3 s: each step's solve
    stops within the tolerance (1e-6 m/s) of its solution, so a stack at rest may drift by
    at most tolerance x time = 3 um. Newton converges superlinearly and the upper box stays
    put (observed: < 0.1 um); Gauss-Seidel, whose sweeps stop on their own change while the
    slow modes are still unsolved, let it creep by 20 um over the same 3 s (printed, not
    checked; cpu only, to spare lavapipe's launch budget). Both carry the weights exactly
    (m g per box)."""
    drift = {}
    for method in ("gauss_seidel", "newton") if arch == "cpu" else ("newton",):
        s = th.load_scene(ROOT / "scenes" / "box_stack.toml")
        sim = th.Simulator(dataclasses.replace(s, solver=dataclasses.replace(s.solver, method=method, schedule="world")))
        sim.step(100)
        start = sim.get_state()["position"][0, 2, :2].copy()
        sim.step(300)
        drift[method] = float(np.linalg.norm(sim.get_state()["position"][0, 2, :2] - start))
        forces = sim.contact_forces()
        assert forces[("box_lower", "box_upper")][2] == pytest.approx(0.2 * G, rel=1e-4)
    print(f"box stack, upper box drift over 3 s: {drift}")
    assert drift["newton"] <= TOLERANCE * 3.0
