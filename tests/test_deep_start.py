"""Deep starts (issue 19, "no silent wrong physics"): a compliant body that starts with its
centre at, or below, the surface of a rigid half-space or a rigid box table is pushed out and
comes to rest at its equilibrium height; it never falls through.

Before collision.depth, every polygon of such a pair had its pressure gradient pointing away
from the rigid side (gA < 0): Drake's face filter and the gA > 0 test of the point-contact
model dropped them all, and the body fell through while the contact query reported a force
of up to E R^2 pushing it out (Drake 1.51 does the same: TAMSI and SAP both let a sphere
whose centre is on a half-space fall through).

One scene per floor holds one body of every compliant shape the scene format has (sphere, a
tall box, a tall cylinder, a lying capsule, an ellipsoid, a convex mesh, a tet mesh with its
own pressure field), far enough apart not to touch; world 0 starts each with its centre on
the surface, world 1 half its height below it. The tall box and cylinder have an elongated
core (medial axis): the pair must stay deep until all of it is out (depth.CORE_POINTS).

Time: with Hunt-Crossley dissipation d the separation speed of a deep contact is at most 1/d
(fn = k (-phi) (1 - d vn)+, and the linearised row keeps fn(vn) <= A p0 (1 - d vn)), so a body
whose centre starts D below its resting height is out after D d at most; after that its
contact oscillation (period 2 pi sqrt(m / k), k = dF/dz at rest: 0.03 s for the box to 0.07 s
for the sphere here, 8 to 16 steps of DT) is damped by d within a few periods.
T = 2 (1.5 h_max) d + 0.3 s covers both with a factor 2 on the first.

Equilibrium: the height z_eq at which the static force of the contact query (sum of A p0 n)
equals m g, with the body in its final pose, found by bisection; delta = h - z_eq is the
static penetration under m g, which must be a shallow rest (0 < delta < h / 4: the body
stands as it started, it did not topple). The body must rest within delta / 10 of z_eq (the
query's force also counts the slivers of gradient in the surface that the point-contact
model skips, O(delta^2); the rest is the solver tolerance), with a vertical speed below
1e-3 m/s (200 times less than the exit speed 1/d), and it must never sink below its start
by more than delta. Motion in the plane is only bounded (|v| + h |w| < 0.05 m/s): the
push-out leaves the faceted lying capsule rolling slowly between its facets and the tall box
rocking by a few 0.01 rad/s, which the dissipation, proportional to the normal speed, damps
slowly."""

import numpy as np
import pytest

import taichi_hydro as th
from taichi_hydro.geometry import primitives as prim

G = 9.81
E = 1e5  # Pa
MASS = 0.3  # kg
D = 5.0  # Hunt-Crossley dissipation [s/m]: deep separation speed <= 1/D = 0.2 m/s
DT = 4e-3  # s
SPACING = 0.3  # m between the bodies of one scene
LYING = [0.7071067811865476, 0.0, 0.7071067811865476, 0.0]  # body z axis along world x
PRISM_R, PRISM_H = 0.05, 0.06  # hexagonal prism (convex mesh): circumradius, height [m]


def prism_obj(path):
    """A hexagonal prism centred on the origin, axis z, as an OBJ (outward triangles)."""
    n, hh = 6, 0.5 * PRISM_H
    v = [(PRISM_R * np.cos(2 * np.pi * i / n), PRISM_R * np.sin(2 * np.pi * i / n), z) for z in (-hh, hh) for i in range(n)]
    f = []
    for i in range(n):
        j = (i + 1) % n
        f += [(i, j, n + j), (i, n + j, n + i)]
    f += [(0, i + 1, i) for i in range(1, n - 1)] + [(n, n + i, n + i + 1) for i in range(1, n - 1)]
    lines = [f"v {float(a)!r} {float(b)!r} {float(c)!r}" for a, b, c in v] + [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in f]
    path.write_text("\n".join(lines) + "\n")


def pad_vtk(path, size=(0.1, 0.08, 0.06)):
    """A compliant box as a tet mesh with its own per-vertex "pressure" array."""
    import meshio

    pad = prim.compliant_box(size, E)
    meshio.write(str(path), meshio.Mesh(pad.vertices, [("tetra", pad.tets)], point_data={"pressure": pad.pressure}))


def shapes(folder):
    """name -> (shape table, contact extras, orientation, half-height h along world z [m])."""
    prism_obj(folder / "prism.obj")
    pad_vtk(folder / "pad.vtk")
    up = [1.0, 0.0, 0.0, 0.0]
    return {
        "sphere": ({"type": "sphere", "radius": 0.05}, {"resolution": 0.025}, up, 0.05),
        "box": ({"type": "box", "size": [0.06, 0.05, 0.16]}, {}, up, 0.08),
        "cylinder": ({"type": "cylinder", "radius": 0.03, "length": 0.12}, {"resolution": 0.015}, up, 0.06),
        "capsule": ({"type": "capsule", "radius": 0.03, "length": 0.06}, {"resolution": 0.015}, LYING, 0.03),
        "ellipsoid": ({"type": "ellipsoid", "radii": [0.06, 0.045, 0.035]}, {"resolution": 0.02}, up, 0.035),
        "mesh": ({"type": "mesh", "file": str(folder / "prism.obj")}, {}, up, 0.5 * PRISM_H),
        "tetmesh": ({"type": "tetmesh", "file": str(folder / "pad.vtk")}, {"hydro": "compliant"}, up, 0.03),
    }


def deep_scene(floor, table, dt=DT, gravity=G, method="auto"):
    """The floor (a rigid half-space, or a rigid box table whose top is z = 0) and one body
    per shape at x = SPACING i, centre at z = 0; time step dt [s], gravity [m/s^2] along -z,
    solver method."""
    n = len(table)
    if floor == "halfspace":
        bodies = [{"name": "floor", "type": "static", "shape": {"type": "halfspace"}}]
    else:
        width = SPACING * n
        bodies = [{"name": "floor", "type": "static", "position": [0.5 * SPACING * (n - 1), 0.0, -0.15],
                   "shape": {"type": "box", "size": [width, 0.6, 0.3]}}]
    for i, (name, (shape, contact, q, _)) in enumerate(table.items()):
        bodies.append({"name": name, "mass": MASS, "position": [SPACING * i, 0.0, 0.0], "orientation": q, "shape": shape,
                       "contact": {"modulus": E, "dissipation": D, "friction": 0.5, **contact}})
    sim = {"dt": dt, "gravity": [0.0, 0.0, -gravity]}
    return th.scene_from_dict({"body": bodies, "sim": sim, "solver": {"method": method}}, source=f"<deep start on {floor}>")


def equilibrium_heights(sim, table, iterations=30):
    """(worlds, shapes) z_eq [m]: per world and body, the height at which the contact query's
    vertical force on the body is m g, keeping its current x, y and orientation (bisection
    on every body and world at once; the bodies do not touch each other)."""
    names = list(table)
    h = np.array([table[k][3] for k in names])
    state = sim.get_state()
    pos = state["position"].copy()
    lo = np.tile(0.5 * h, (sim.worlds, 1))  # half sunk: the force is far above m g
    hi = np.tile(1.05 * h, (sim.worlds, 1))  # clear of the floor: no force
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        pos[:, 1:, 2] = mid
        sim.set_state(position=pos, velocity=np.zeros_like(pos), angular_velocity=np.zeros_like(pos))
        for w in range(sim.worlds):
            force = dict.fromkeys(names, 0.0)
            for s in sim.contact_surfaces(world=w):
                force[s.body_b] += s.force[2]
            up = np.array([force[k] > MASS * G for k in names])
            lo[w] = np.where(up, mid[w], lo[w])
            hi[w] = np.where(up, hi[w], mid[w])
    sim.set_state(position=state["position"], velocity=state["velocity"], angular_velocity=state["angular_velocity"])
    return 0.5 * (lo + hi)



def test_core_points_span_the_medial_axis(tmp_path):
    """collision.depth's core of each shape (host only): the vertices of largest pressure,
    thinned to at most CORE_POINTS, reach both ends of an elongated medial axis along the body
    z axis (the tall box's medial rectangle |z| <= 0.08 - 0.025, the tall cylinder's axis
    |z| <= 0.06 - a, a = R cos(pi / n) the apothem of its n-sided prism, the capsule's segment
    |z| <= 0.03) and are the centre of the others."""
    from taichi_hydro.collision import depth
    from taichi_hydro.model import build_model
    from taichi_hydro.types import G_BODY

    table = shapes(tmp_path)
    host = build_model(deep_scene("halfspace", table))
    points, count = depth.geometry_cores(host)
    sides = prim.circle_segments(0.03, table["cylinder"][1]["resolution"])
    half_span = {"box": 0.055, "cylinder": 0.06 - 0.03 * np.cos(np.pi / sides), "capsule": 0.03}
    for g in range(len(host.geom_i)):
        b = host.geom_i[g, G_BODY]
        if b == 0:
            assert count[g] == 0  # the rigid floor has no core
            continue
        name = list(table)[b - 1]
        core = points[g, : count[g]]
        assert 1 <= count[g] <= depth.CORE_POINTS, name
        z = half_span.get(name, 0.0)
        np.testing.assert_allclose([core[:, 2].min(), core[:, 2].max()], [-z, z], atol=1e-9, err_msg=name)
        assert np.all(np.abs(core[:, :2]) <= 0.02 + 1e-9), name

@pytest.mark.launches(11_500)
@pytest.mark.parametrize("floor, method", [("halfspace", "auto"), ("table", "auto"), ("halfspace", "newton")])
def test_deep_start_pushes_out_to_rest(arch, tmp_path, floor, method):
    """Module docstring; the deep rows are ordinary rows to every solver (method "newton": the
    same rest)."""
    if arch == "vulkan" and (floor, method) != ("halfspace", "auto"):
        pytest.skip("each variant needs a fresh lavapipe process (launch budget): the half-space one covers the device "
                    "path on vulkan, all three run on cpu")
    table = shapes(tmp_path)
    names = list(table)
    h = np.array([table[k][3] for k in names])
    sim = th.Simulator(deep_scene(floor, table, method=method), worlds=2)
    pos = sim.get_state()["position"].copy()
    pos[1, 1:, 2] = -0.5 * h  # world 1: centre half its height below the surface
    sim.set_state(position=pos)
    z0 = pos[:, 1:, 2].copy()
    duration = 2.0 * (1.5 * h.max()) * D + 0.3
    chunk = 10
    z_min = z0.copy()
    for _ in range(int(np.ceil(duration / DT / chunk))):
        sim.step(chunk)
        z_min = np.minimum(z_min, sim.get_state()["position"][:, 1:, 2])
    end = sim.get_state()
    z = end["position"][:, 1:, 2]
    vz = np.abs(end["velocity"][:, 1:, 2])
    speed = np.linalg.norm(end["velocity"][:, 1:], axis=2) + h * np.linalg.norm(end["angular_velocity"][:, 1:], axis=2)
    z_eq = equilibrium_heights(sim, table)
    delta = h - z_eq  # static penetration under m g
    problems = []
    for w in range(sim.worlds):
        for i, name in enumerate(names):
            where = f"{name} (world {w}, start z = {z0[w, i]:+.4f} m)"
            if not 0.0 < delta[w, i] < 0.25 * h[i]:
                problems.append(f"{where}: static penetration under m g {delta[w, i]:.3g} m is not a shallow rest "
                                f"(half-height {h[i]} m)")
            if abs(z[w, i] - z_eq[w, i]) > 0.1 * delta[w, i]:
                problems.append(f"{where}: rests at z = {z[w, i]:.6f} m, equilibrium {z_eq[w, i]:.6f} m "
                                f"(tolerance {0.1 * delta[w, i]:.2g} m)")
            if z_min[w, i] < z0[w, i] - delta[w, i]:
                problems.append(f"{where}: sank to z = {z_min[w, i]:.4f} m")
            if vz[w, i] > 1e-3:
                problems.append(f"{where}: not at rest, vertical speed {vz[w, i]:.3g} m/s")
            if speed[w, i] > 0.05:
                problems.append(f"{where}: still moving, |v| + h |w| = {speed[w, i]:.3g} m/s")
    assert not problems, f"after {duration:.2f} s on a rigid {floor} ({method}):\n" + "\n".join(problems)


@pytest.mark.parametrize("floor", ["halfspace", "table"])
def test_deep_contact_applies_the_force_it_reports(arch, tmp_path, floor):
    """The symptom of the issue, directly: a sphere with its centre on the surface (world 0;
    R/10 below the table's top: exactly on it, the sphere mesh's equatorial tet faces lie in
    the top face, both tets of each face clip the same polygon and the surface is counted twice,
    as Drake 1.51 also reports it) or R/2 below it (world 1), no gravity. The contact query
    reports an upward static force F
    (sum of A p0 n); the first step must apply it. The implicit step applies
    fn = k (-phi0 - dt vn) per polygon, with vn = O(dt F / m) after the step: the applied mean
    force is F (1 - O(K dt^2 / m)), K = sum k <= |grad p| A_total = (E / R) A_total
    (p = E (1 - r / R)); the tolerance is twice that."""
    R = 0.05
    table = {"sphere": ({"type": "sphere", "radius": R}, {"resolution": 0.025, "dissipation": 0.0}, [1.0, 0.0, 0.0, 0.0], R)}
    dt = 1e-4
    sim = th.Simulator(deep_scene(floor, table, dt=dt, gravity=0.0), worlds=2)
    pos = sim.get_state()["position"].copy()
    pos[0, 1, 2] = 0.0 if floor == "halfspace" else -0.1 * R
    pos[1, 1, 2] = -0.5 * R
    sim.set_state(position=pos)
    reported = [sum((s.force for s in sim.contact_surfaces(world=w)), np.zeros(3)) for w in range(2)]
    areas = [sum(s.area for s in sim.contact_surfaces(world=w)) for w in range(2)]
    sim.step(1)
    for w in range(2):
        applied = sim.contact_forces(world=w).get(("floor", "sphere"), np.zeros(3))
        assert reported[w][2] > 100.0  # ~ E R^2: a deep contact
        rel = 2.0 * (E / R) * areas[w] * dt * dt / MASS
        np.testing.assert_allclose(applied, reported[w], rtol=rel, atol=rel * reported[w][2],
                                   err_msg=f"world {w}: the step applies {applied} N, the query reports {reported[w]} N")



@pytest.mark.launches(3_200)
def test_thin_plate_still_holds_a_ball(arch):
    """The deep rule must not undo Drake's filter where it matters: a ball (R = 5 cm) resting on
    a rigid plate thinner (2 mm) than its static penetration reaches through the plate, and the
    plate's underside faces the ball's field the wrong way (gA < 0). Its centre stays above the
    plate, so the pair is not deep: those faces are dropped and the plate holds the ball at the
    height of the same ball on a thick table beside it, whose top face makes the same polygons
    (within delta / 100, delta its penetration; the two agree to round-off, while keeping the
    underside, as a deep pair would, sinks the ball by delta / 10 more)."""
    R, thickness, duration = 0.05, 0.002, 0.5
    ball = {"mass": MASS, "shape": {"type": "sphere", "radius": R},
            "contact": {"modulus": E, "dissipation": D, "resolution": 0.025}}
    bodies = [{"name": "plate", "type": "static", "position": [0.0, 0.0, -0.5 * thickness],
               "shape": {"type": "box", "size": [0.3, 0.3, thickness]}},
              {"name": "table", "type": "static", "position": [0.5, 0.0, -0.1],
               "shape": {"type": "box", "size": [0.3, 0.3, 0.2]}},
              {"name": "on_plate", "position": [0.0, 0.0, R], **ball},
              {"name": "on_table", "position": [0.5, 0.0, R], **ball}]
    sim = th.Simulator(th.scene_from_dict({"body": bodies, "sim": {"dt": DT, "gravity": [0.0, 0.0, -G]}}, source="<plate>"))
    sim.step(int(round(duration / DT)))
    end = sim.get_state()
    z, vz = end["position"][0, 2:, 2], end["velocity"][0, 2:, 2]
    delta = R - z[1]  # static penetration on the thick table
    assert thickness < delta < 0.25 * R
    assert np.all(np.abs(vz) < 1e-3)
    assert abs(z[0] - z[1]) < 0.01 * delta, f"ball on the {thickness} m plate at z = {z[0]:.5f} m, on the table {z[1]:.5f} m"
