"""Bodies with several geometries ([[body.geometry]]): mass properties of the union, geometries
posed in the body frame, materials per geometry pair, per-world parameters spread over a
body's geometries, surfaces merged per body pair, and bodies without geometry.

Tolerances. Mass properties are float64 sums of a few closed-form terms: 1e-12 relative.
Contact results are float32 on the device (EPS32 = 1.19e-7 relative per operation, world
coordinates of ~0.3 m): a geometry moved into its body frame on the host (float64, then
rounded to float32) against the same shape as its own body differs by round-off of the
vertex coordinates, ~EPS32 x 0.3 m = 4e-8 m, which moves a polygon vertex by the same amount
and an area of ~1e-3 m^2 by ~1e-6 relative: areas and forces to 1e-5 relative (conftest
Tolerances.rel), centroids to tol.pos per metre of scene size."""

import math

import numpy as np
import pytest

import taichi_hydro as th
from taichi_hydro.model import build_model
from taichi_hydro.rotation import rotation_matrices
from taichi_hydro.types import P_GEOM_A, P_GEOM_B, PF_D, PF_MU

from conftest import ground, scene
from test_batch import batch_bounds

G = 9.81


def axis_angle(axis, angle):
    """Unit quaternion (w, x, y, z) of a rotation by `angle` [rad] about `axis`."""
    axis = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    return [math.cos(angle / 2), *(math.sin(angle / 2) * axis)]


def quat_mul(a, b):
    """Hamilton product a b of (w, x, y, z) quaternions (q_WG = q_WB q_BG)."""
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return [w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2]


# --------------------------------------------------------------------------- the dumbbell

R_BALL, HALF_GAP, R_BAR, L_BAR = 0.05, 0.15, 0.015, 0.24  # m; the bar reaches 2 cm into each ball
DENSITY = 1000.0  # kg/m^3


def dumbbell(centre=(0.0, 0.0, 0.0), angle=0.0, modulus=1e6, dissipation=10.0, **body):
    """One body: two compliant balls at centre +- HALF_GAP u, u = (cos angle, sin angle, 0),
    joined by a compliant bar (cylinder, axis u) that overlaps both balls."""
    u = np.array([math.cos(angle), math.sin(angle), 0.0])
    c = np.asarray(centre, dtype=float)
    contact = {"modulus": modulus, "resolution": 0.02, "dissipation": dissipation}
    q_bar = quat_mul(axis_angle([0, 0, 1], angle), axis_angle([0, 1, 0], math.pi / 2))  # body z -> u
    geometries = [
        {"name": "left", "position": list(c - HALF_GAP * u), "shape": {"type": "sphere", "radius": R_BALL}, "contact": contact},
        {"name": "right", "position": list(c + HALF_GAP * u), "shape": {"type": "sphere", "radius": R_BALL}, "contact": contact},
        {"name": "bar", "position": list(c), "orientation": q_bar, "shape": {"type": "cylinder", "radius": R_BAR, "length": L_BAR},
         "contact": {**contact, "resolution": 0.01}},
    ]
    return {"name": "dumbbell", "density": DENSITY, "geometry": geometries, **body}


def dumbbell_closed_form():
    """(mass [kg], inertia about the bar's axis, inertia about a perpendicular axis through the
    centre [kg m^2]): two solid balls (2/5 m R^2 each, moved HALF_GAP by the parallel-axis rule)
    and a solid cylinder (1/2 m r^2 about its axis, m (3 r^2 + L^2) / 12 across it); the
    volume where the bar enters the balls counts twice (the documented union rule)."""
    m_ball = DENSITY * 4.0 / 3.0 * math.pi * R_BALL**3
    m_bar = DENSITY * math.pi * R_BAR**2 * L_BAR
    axial = 2 * 0.4 * m_ball * R_BALL**2 + 0.5 * m_bar * R_BAR**2
    across = 2 * (0.4 * m_ball * R_BALL**2 + m_ball * HALF_GAP**2) + m_bar * (3 * R_BAR**2 + L_BAR**2) / 12
    return 2 * m_ball + m_bar, axial, across


def test_dumbbell_mass_properties_are_the_parallel_axis_closed_form(arch):
    """A dumbbell centred at c in its body frame, along a direction u at 35 degrees from x:
    mass = density x the summed volumes, centre of mass c, inertia I_across (1 - u u^T) +
    I_axial u u^T (off-diagonal entries from the rotated geometries); with `mass` instead of
    `density` the same distribution scaled to that mass; the reach bounds both balls."""
    if arch != "cpu":
        pytest.skip("host-side arithmetic (model building): checked in the cpu session")
    c, angle = np.array([0.01, -0.02, 0.03]), math.radians(35.0)
    data = build_model(scene([ground(), dumbbell(c, angle)]))
    mass, axial, across = dumbbell_closed_form()
    u = np.array([math.cos(angle), math.sin(angle), 0.0])
    inertia = across * (np.eye(3) - np.outer(u, u)) + axial * np.outer(u, u)
    assert data.body_mass[1] == pytest.approx(mass, rel=1e-12)
    np.testing.assert_allclose(data.body_com_B[1], c, rtol=0, atol=1e-15)
    np.testing.assert_allclose(data.body_inertia_B[1], inertia, rtol=0, atol=1e-12 * across)
    assert data.body_reach[1] == pytest.approx(HALF_GAP + R_BALL, rel=1e-12)
    assert data.geom_name == ["geometry0", "left", "right", "bar"]
    assert all(data.geom_body[a] != data.geom_body[b] for a, b in data.pair_i[:, [P_GEOM_A, P_GEOM_B]])  # never within a body
    heavy_body = dumbbell(c, angle, mass=3.0)
    del heavy_body["density"]
    heavy = build_model(scene([ground(), heavy_body]))
    assert heavy.body_mass[1] == 3.0
    np.testing.assert_allclose(heavy.body_inertia_B[1], inertia * 3.0 / mass, rtol=0, atol=1e-12 * across)


def test_dumbbell_surface_is_one_entry_made_of_both_patches(arch, tol):
    """The dumbbell pressed 1 mm into a rigid floor: the floor-dumbbell contact surface is one
    entry (CONTRACT: surfaces per body pair) holding the polygons of both balls, named by
    geometry, on their own sides, with equal forces by symmetry (float32 round-off); its
    totals are the sums over both patches; the bar, 3.5 cm up, touches nothing."""
    sim = th.Simulator(scene([ground(), dumbbell(position=[0.0, 0.0, R_BALL - 1e-3])]))
    (surface,) = sim.contact_surfaces(0)
    poly = surface.polygons
    assert (surface.body_a, surface.body_b) == ("ground", "dumbbell")
    assert set(poly["geometry_a"]) == {"geometry0"} and set(poly["geometry_b"]) == {"left", "right"}
    halves = {}
    for name, side in (("left", -1.0), ("right", 1.0)):
        rows = poly["geometry_b"] == name
        assert np.all(np.sign(poly["centroid"][rows, 0]) == side)
        halves[name] = float((poly["area"][rows] * poly["pressure"][rows] * poly["normal"][rows, 2]).sum())
    assert halves["left"] == pytest.approx(halves["right"], rel=tol.rel) and halves["left"] > 0.0
    assert surface.force[2] == pytest.approx(halves["left"] + halves["right"], rel=tol.rel)
    assert surface.faces == len(poly["area"]) and surface.area == pytest.approx(poly["area"].sum(), rel=1e-12)


def test_dumbbell_rests_on_both_balls(arch, tol):
    """The dumbbell (1.21 kg) dropped 1 mm onto a rigid floor, damped (d = 10 s/m, about
    critical), rests after 0.3 s: the solved contact force is m g to 1e-4 relative (the solver
    stops when a sweep moves a body by less than 1e-6 m/s, an impulse error of m 1e-6 N s per
    step, m 1e-3 N over dt = 1 ms); each ball's patch carries half the weight by symmetry, and
    their static force A p0 is m g to 1e-3 (at rest it differs from the solved force by
    k (dt + tau) |v_n| per patch, with tau = d depth ~ 0.03 s and |v_n| below a few 1e-6 m/s).
    The kernels are those of one-geometry bodies (the geometries are merged on the host):
    stepped in the cpu session only (300 steps take 40 s on lavapipe)."""
    if arch != "cpu":
        pytest.skip("the same kernels as one-geometry bodies: stepped in the cpu session")
    mass, _, _ = dumbbell_closed_form()
    sim = th.Simulator(scene([ground(), dumbbell(position=[0.0, 0.0, R_BALL + 1e-3])], dt=1e-3))
    sim.step(300)
    force = sim.contact_forces(0)[("ground", "dumbbell")]
    np.testing.assert_allclose(force, [0.0, 0.0, mass * G], rtol=0, atol=1e-4 * mass * G)
    (surface,) = sim.contact_surfaces(0)
    poly = surface.polygons
    halves = [float((poly["area"] * poly["pressure"] * poly["normal"][:, 2])[poly["geometry_b"] == name].sum())
              for name in ("left", "right")]
    assert halves[0] == pytest.approx(halves[1], rel=tol.rel)
    assert surface.force[2] == pytest.approx(mass * G, rel=1e-3)


# --------------------------------------------------------------------------- a posed geometry

BOX = [0.1, 0.06, 0.04]  # m
X_WB = ([0.02, -0.01, 0.0], axis_angle([1, 2, 3], 0.4))
X_BG = ([0.05, -0.03, 0.02], axis_angle([0.3, -1, 0.5], 0.7))


def posed_box_scenes(depth=4e-3):
    """(a kinematic body whose one box geometry is posed by X_BG, a kinematic box body placed at
    X_WG = X_WB X_BG), both with the box's lowest corner `depth` [m] below a rigid floor."""
    R_WB, R_BG = rotation_matrices(X_WB[1]), rotation_matrices(X_BG[1])
    corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * np.array(BOX) / 2
    lowest = (corners @ (R_WB @ R_BG).T + R_WB @ X_BG[0]).min(axis=0)[2]
    p_WB = np.array(X_WB[0]) + [0.0, 0.0, -depth - lowest]
    p_WG = p_WB + R_WB @ X_BG[0]
    contact = {"modulus": 1e6}
    posed = {"name": "tool", "type": "kinematic", "position": list(p_WB), "orientation": X_WB[1],
             "geometry": [{"name": "block", "position": X_BG[0], "orientation": X_BG[1],
                           "shape": {"type": "box", "size": BOX}, "contact": contact}]}
    single = {"name": "tool", "type": "kinematic", "position": list(p_WG), "orientation": quat_mul(X_WB[1], X_BG[1]),
              "shape": {"type": "box", "size": BOX}, "contact": contact}
    return scene([ground(), posed]), scene([ground(), single])


def test_posed_geometry_gives_the_surface_of_the_same_shape_placed_in_the_world(arch, tol):
    """A box geometry rotated and offset in its body (the body itself tilted) makes the same
    contact surface with the floor as a box body placed at the composed pose X_WB X_BG: the
    same number of polygons, area, force and centroid to float32 round-off (module
    docstring); the surface is a real one (4 mm deep at a corner)."""
    posed, single = (th.Simulator(s).contact_surfaces(0) for s in posed_box_scenes())
    (a,), (b,) = posed, single
    assert a.faces == b.faces > 3
    assert a.area == pytest.approx(b.area, rel=tol.rel) and a.area > 1e-5
    np.testing.assert_allclose(a.force, b.force, rtol=0, atol=tol.rel * np.linalg.norm(b.force))
    np.testing.assert_allclose(a.centroid, b.centroid, rtol=0, atol=tol.pos * 0.3)
    assert a.max_pressure == pytest.approx(b.max_pressure, rel=tol.rel)


def test_posed_geometry_moves_the_mass_properties(arch):
    """A dynamic body of one posed box: centre of mass p_BG, inertia R_BG I_box R_BG^T (the box
    body's own inertia turned into the body axes), the same mass and reach."""
    if arch != "cpu":
        pytest.skip("host-side arithmetic (model building): checked in the cpu session")
    box = {"type": "box", "size": BOX}
    posed = build_model(scene([{"name": "b", "mass": 0.7, "geometry": [{"position": X_BG[0], "orientation": X_BG[1], "shape": box}]}]))
    single = build_model(scene([{"name": "b", "mass": 0.7, "shape": box}]))
    R = rotation_matrices(X_BG[1])
    np.testing.assert_allclose(posed.body_com_B[0], X_BG[0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(posed.body_inertia_B[0], R @ single.body_inertia_B[0] @ R.T, rtol=0, atol=1e-15)
    assert posed.body_mass[0] == single.body_mass[0] == 0.7
    assert posed.body_reach[0] == pytest.approx(single.body_reach[0], rel=1e-12)


# --------------------------------------------------------------------------- materials per geometry

PAD = {"modulus": 2e5, "friction": 0.3, "dissipation": 2.0, "relaxation_time": 1e-3, "resolution": 0.01}


def finger(depth=3e-3, pad_first=False):
    """A kinematic finger: a rigid nail (box, friction 0.8, d 5 s/m) and a compliant pad (ball
    of 3 cm, materials PAD) 5 cm below the body origin, pressed `depth` [m] into the floor."""
    nail = {"name": "nail", "position": [0.05, 0.0, 0.04], "shape": {"type": "box", "size": [0.02, 0.02, 0.04]},
            "contact": {"hydro": "rigid", "friction": 0.8, "dissipation": 5.0}}
    pad = {"name": "pad", "position": [0.0, 0.0, -0.05], "shape": {"type": "sphere", "radius": 0.03}, "contact": PAD}
    return {"name": "finger", "type": "kinematic", "position": [0.0, 0.0, 0.08 - depth],
            "geometry": [pad, nail] if pad_first else [nail, pad]}


def pad_alone(depth=3e-3):
    """The pad as a body of its own at the same world pose."""
    return {"name": "finger", "type": "kinematic", "position": [0.0, 0.0, 0.03 - depth],
            "shape": {"type": "sphere", "radius": 0.03}, "contact": PAD}


def test_pad_patch_uses_the_pad_material(arch, tol):
    """A finger with a rigid nail listed first and a compliant pad: the pad-floor patch is the
    one a body made of the pad alone makes (same polygons, area, force, centroid: float32
    round-off), its pair carries the pad's friction, dissipation and relaxation time combined
    with the floor's (not the nail's, nor the body's first geometry's), and the nail, rigid
    against a rigid floor, makes no pair. A per-world modulus of 2 E_pad doubles the pad's
    pressures exactly (a float32 scale by 2 is exact)."""
    floor = ground(friction=0.5)
    sims = [th.Simulator(scene([floor, body]), worlds=2) for body in (finger(), pad_alone())]
    (a,), (b,) = (sim.contact_surfaces(0) for sim in sims)
    assert a.faces == b.faces > 3 and set(a.polygons["geometry_b"]) == {"pad"}
    assert a.area == pytest.approx(b.area, rel=tol.rel)
    np.testing.assert_allclose(a.force, b.force, rtol=0, atol=tol.rel * np.linalg.norm(b.force))
    np.testing.assert_allclose(a.centroid, b.centroid, rtol=0, atol=tol.pos * 0.1)
    host = sims[0].model.host
    assert host.pair_count == 1 and host.geom_name[host.pair_i[0, P_GEOM_A]] == "pad"
    mu = 2 * 0.5 * 0.3 / (0.5 + 0.3)
    np.testing.assert_allclose(host.pair_f[0, :3], [mu, 2.0, 1e-3], rtol=1e-15)
    np.testing.assert_array_equal(host.pair_f, sims[1].model.host.pair_f)
    sims[0].set_parameters(modulus=[[np.nan, 2e5], [np.nan, 4e5]])
    stiff = sims[0].contact_surfaces(1)[0]
    assert stiff.area == a.area and stiff.force[2] == pytest.approx(2.0 * a.force[2], rel=1e-6)


def sled(frictions=(0.4, 0.2), dissipations=(1.0, 3.0), moduli=(1e5, 3e5)):
    """A sled of two compliant feet (balls of 5 cm, 0.3 m apart along y) each with its own
    friction, dissipation and modulus, pressed 2 mm into a rigid floor and sliding along x at
    0.5 m/s; and a puck whose first geometry is frictionless."""
    feet = [{"name": f"foot{i}", "position": [0.0, 0.15 * (2 * i - 1), 0.0], "shape": {"type": "sphere", "radius": 0.05},
             "contact": {"modulus": moduli[i], "resolution": 0.025, "friction": frictions[i], "dissipation": dissipations[i]}}
            for i in range(2)]
    puck = [{"name": f"half{i}", "position": [0.04 * (2 * i - 1), 0.0, 0.0], "shape": {"type": "box", "size": [0.08, 0.1, 0.02]},
             "contact": {"modulus": 1e6, "friction": 0.3 * i}} for i in range(2)]
    return scene([ground(friction=0.5),
                  {"name": "sled", "mass": 1.0, "position": [0.0, 0.0, 0.048], "velocity": [0.5, 0.0, 0.0], "geometry": feet},
                  {"name": "puck", "mass": 0.2, "position": [1.0, 0.0, 0.0098], "geometry": puck}], dt=1e-3)


def test_per_world_materials_keep_the_ratios_between_a_bodys_geometries(arch):
    """set_parameters gives a body one value v per world; each of its geometries g gets
    value_g (v / value_ref) (ref: its first geometry, its first compliant one for modulus), or v
    when value_ref is 0 (the puck's frictionless first half), except v = 0, which keeps the
    scene's values. So world 1 of the sled, with friction 0.6, dissipation 2 and modulus 2e5,
    equals the scene whose feet have (0.6, 0.3), (2, 6) and (2e5, 6e5), within the batch
    bounds of test_batch over 20 steps; world 0, set to parameters(), keeps the scene's pair
    rows bit for bit; parameters() returns the body values given; the device's pair rows hold
    the combined values."""
    steps = 20
    sim = th.Simulator(sled(), worlds=2)
    values = sim.parameters()
    np.testing.assert_array_equal(values["friction"][0], [0.5, 0.4, 0.0])  # the first geometry's
    values["friction"][1, 1:] = [0.6, 0.45]
    values["dissipation"][1, 1] = 2.0
    values["modulus"][1, 1] = 2e5
    sim.set_parameters(**values)
    np.testing.assert_array_equal(sim.parameters()["friction"][1], [0.5, 0.6, 0.45])
    host = sim.model.host
    pair_f = sim.params.pair_f.to_numpy()
    np.testing.assert_array_equal(pair_f[0], host.pair_f.astype(pair_f.dtype))
    for p, (ga, gb) in enumerate(host.pair_i[:, [P_GEOM_A, P_GEOM_B]]):
        if 0 not in host.geom_body[[ga, gb]]:
            continue  # a sled-puck pair
        name = host.geom_name[ga if host.geom_body[ga] else gb]
        mu = {"foot0": 0.6, "foot1": 0.3, "half0": 0.45, "half1": 0.45}[name]
        assert pair_f[1, p, PF_MU] == pytest.approx(2 * 0.5 * mu / (0.5 + mu), rel=1e-7), name
    d_foot1 = next(pair_f[1, p, PF_D] for p, g in enumerate(host.pair_i[:, P_GEOM_A]) if host.geom_name[g] == "foot1")
    assert d_foot1 == pytest.approx(6.0, rel=1e-7)  # rigid floor: the compliant side's d
    sim.step(steps)
    out = sim.get_state()
    single = th.Simulator(sled(frictions=(0.6, 0.3), dissipations=(2.0, 6.0), moduli=(2e5, 6e5)))
    single.step(steps)
    ref = single.get_state()
    atol_p, atol_v = batch_bounds(steps, 1e-3, 1.0, 0.5)
    np.testing.assert_allclose(out["position"][1, 1], ref["position"][0, 1], rtol=0, atol=atol_p)
    np.testing.assert_allclose(out["velocity"][1, 1], ref["velocity"][0, 1], rtol=0, atol=atol_v)
    moved = np.abs(out["velocity"][1, 1] - out["velocity"][0, 1]).max()
    assert moved > 100 * atol_v, f"the changed materials moved the sled by {moved} m/s only"


# --------------------------------------------------------------------------- no geometry


def test_body_without_geometry_falls_and_spins_freely(arch, tol):
    """A dynamic body with mass and inertia but no geometry (a URDF link without collision
    shapes), alone in its scene or beside a floor: semi-implicit Euler free fall,
    z_n = z_0 - g dt^2 n (n + 1) / 2, and a spin about a principal axis that stays constant;
    its reach is the radius of the uniform ball of its mass and trace of inertia,
    sqrt(5 trace / (6 m)); friction and modulus do not apply to it (NaN, and a value given
    for it is refused); a per-world mass (3 kg) leaves free fall and spin as they are."""
    free = {"name": "free", "mass": 2.0, "inertia": [0.1, 0.2, 0.25, 0.0, 0.0, 0.0], "center_of_mass": [0.0, 0.0, 0.1],
            "position": [0.0, 0.0, 1.0], "angular_velocity": [0.0, 0.0, 1.5], "geometry": []}
    n, dt = 50, 1e-3
    for bodies in ([free], [ground(), free]):
        sim = th.Simulator(scene(bodies, dt=dt))
        b = len(bodies) - 1
        assert sim.model.host.body_reach[b] == pytest.approx(math.sqrt(5 * 0.55 / 12), rel=1e-12)
        assert np.isnan(sim.parameters()["friction"][0, b]) and np.isnan(sim.parameters()["modulus"][0, b])
        friction = np.full(len(bodies), np.nan)
        friction[b] = 0.5
        with pytest.raises(th.SceneError, match="friction of body 'free' in world 0: a body without geometry has no friction"):
            sim.set_parameters(friction=friction)
        sim.set_parameters(friction=np.nan if b == 0 else [0.4, np.nan], modulus=np.nan, mass=3.0)
        sim.step(n)
        state = sim.get_state()
        com = state["position"][0, b] + rotation_matrices(state["orientation"][0, b]) @ [0.0, 0.0, 0.1]
        assert com[2] == pytest.approx(1.1 - G * dt * dt * n * (n + 1) / 2, abs=tol.pos * 1.1)
        np.testing.assert_allclose(state["angular_velocity"][0, b], [0.0, 0.0, 1.5], rtol=0, atol=1e-6)
