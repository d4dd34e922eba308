"""Rigid-rigid contact through compliant twins (geometry.twin): in a pair of two rigid
geometries one side is replaced, for that pair, by the compliant mesh of its own shape with
modulus [sim] rigid_modulus, and the pair runs through the compliant-rigid pipeline.

Tolerances at rest (dt, the solver tolerance tol = 1e-6 m/s, float32 positions):
- Vertical velocity: the solver's error plus the float32 position quantum. A height z is held
  to a spacing u = ulp(z) (3.7e-9 m at 5 cm): the rest height is in general not representable,
  the integrator rounds z + dt v to within u/2, and the contact's penetration is computed from
  world coordinates rounded to about u as well, so the body wanders within about 2 u of its
  rest, and each step's velocity sends it back by that: |v_z| <= e + 2 u / dt, e the solver's
  error (next item). Measured: up to 1.6 u / dt (a 100 kg sphere, Newton).
- The solver's error e, in the vertical bound and in the sideways one, |v_xy| + reach |w|
  (solver_error). Gauss-Seidel stops when a sweep changes every body point by less than tol;
  with a contraction rho per sweep the error left is up to tol rho / (1 - rho), and rho
  reaches 0.98 (README, "Time stepping"): 50 tol, in both. Newton stops when a = M^-1 r (r the
  gradient of its cost) would move no point of any body by more than tol (solver/newton.py).
  Its cost is M-strongly convex (Hessian H >= M), so the iterate's error e obeys
  |e|_M <= |r|_M^-1 = |a|_M, and |a_b|_M <= sqrt(m_b) (|a_v| + reach |a_w|) per body b (no
  radius of gyration exceeds the reach): |e|_M <= sqrt(m_total) tol over the world's mobile
  bodies. For body b (mass m, smallest radius of gyration k): |e_v| <= |e_b|_M / sqrt(m) <=
  sqrt(m_total / m) tol vertically, and sideways, by Cauchy-Schwarz, |e_v| + reach |e_w| <=
  sqrt(1 + reach^2 / k^2) sqrt(m_total / m) tol: 2.0 tol for the ring (reach 5.1 cm, k 3.0 cm),
  which rests at up to 1.48 tol sideways over 100 of fTetWild's meshes of it (cpu, 2026-11-27).
  With tol = 1e-9 the same meshes rest at 5e-9 to 2.2e-7 m/s sideways (8 meshes): mostly the
  solver's error, with a floor of up to 0.22 tol on some meshes that this bound does not model.
- Force: the body's momentum over K steps, F_mean - m g = m (v_K - v_0) / (K dt), so
  |F_mean - m g| <= 2 m v_bound / (K dt) with v_bound the vertical bound above; in one step,
  |F - m g| <= 2 m v_bound / dt.
- Drift: sideways, at most K dt times the horizontal bound over K steps.
- A sphere on a face: each contact polygon is one point contact at its centroid (Masterjohn
  2022), and a sphere mesh resting on one face touches with (nearly) one polygon, the whole
  face, sunk delta below the support. Tilting it by less than theta_b = delta / r_in (r_in:
  the face's inradius) keeps the whole face in contact and the centroid where it was: no
  restoring torque inside that band, where the sphere is an inverted pendulum on its contact
  point (height ~R). Falling across the band gives it omega = theta_b sqrt(5 g / (7 R)) (I =
  7/5 m R^2 about the contact point), so its sideways speed |v| + R |w| reaches about
  2 R omega = 2 theta_b sqrt(5 g R / 7): 1.3e-4 m/s for R = 5 cm, r_in = 4.4 mm, delta = 0.5 um.
  The bound allows twice that (the restoring torque grows from zero past the band's edge).
- Tilt of a mesh whose contact vertices lie at scattered body coordinates (fTetWild's twin of
  a surface mesh): each vertex's world height is rounded to about u (first item), and where a
  box's face has all its vertices at one height in the body frame, which round alike, these
  round each their own way: the contact's heights err by up to about u in a pattern that can
  tilt the body. Springs alike at the polygons' centroids answer heights off by delta_i with a
  tilt sum(delta_i rho_i) / sum(rho_i^2) <= max |delta| / rho (Cauchy-Schwarz; rho: the RMS
  distance of the centroids from their mean across the horizontal axis of least spread), so
  the rest tilt wanders within about 2 u / rho and each step's angular velocity sends it back:
  reach |w| <= 2 u reach / (rho dt), added to the sideways bound (tilt_speed). Measured on the
  ring with tol = 1e-9 (cpu): 17 to 201 tol sideways in float32 (3 meshes), 0.9 to 1.2 tol on
  the same meshes in float64 (2026-11-27); the term is 3.4e-6 m/s there.
- Near-rigid regime: past the modulus at which contact.assemble's floor binds (a spring of
  period 2 pi dt / beta per contact), the contact rows and so the rest pose no longer depend
  on E or on the mass: heights equal to the float32 quantum u."""

import math

import numpy as np
import pytest

import taichi_hydro as th
from taichi_hydro.geometry.build import compliant_primitive
from taichi_hydro.geometry.primitives import rigid_box, rigid_capsule, rigid_cylinder, rigid_ellipsoid, rigid_sphere
from taichi_hydro.geometry.twin import NoTwin, Side, choose_twin, slab_thickness, twin_geometry
from taichi_hydro.model import build_model, check_supported
from taichi_hydro.scene import RIGID_MODULUS, GeometrySpec, Shape, Contact
from taichi_hydro.types import HALFSPACE, P_GEOM_A, P_GEOM_B, P_TWIN, P_TYPE, PF_D, PF_MU, TETMESH, PairType

from conftest import ON_LAVAPIPE_ELSEWHERE, ground

G = 9.81
TOL = th.SolverSettings().tolerance  # [m/s]
GS_FACTOR = 50.0  # Gauss-Seidel's error over its stopping tolerance (module docstring)
FACE_DOWN = [0.8880738339771153, 0.3250575836718682, -0.3250575836718682, 0.0]
"""q_WB turning the body's (1, 1, 1) diagonal onto +z: a sphere mesh (refined octahedron) then
rests on the face at the centre of an octant instead of its bottom vertex, where it would tip
over (bench/rigid_modulus.py)."""


def make(bodies, dt=1e-3, solver=None, source="<test>", base_dir=None, **sim):
    data = {"sim": {"dt": dt, **sim}, "body": bodies}
    if solver:
        data["solver"] = solver
    return th.scene_from_dict(data, source=source, base_dir=base_dir)


def box(name="box", size=(0.1, 0.1, 0.1), z=None, mass=1.0, **kw):
    """A rigid box resting on z = 0 (its centre at half its height unless `z` is given)."""
    body = {"name": name, "mass": mass, "position": [0.0, 0.0, 0.5 * size[2] if z is None else z],
            "shape": {"type": "box", "size": list(size)}}
    body.update(kw)
    return body


def table(name="table", x=0.0):
    """A static rigid box table (1 m x 1 m x 0.1 m) whose top is z = 0."""
    return {"name": name, "type": "static", "position": [x, 0.0, -0.05], "shape": {"type": "box", "size": [1.0, 1.0, 0.1]}}


def face_drop(radius=0.05, resolution=0.01):
    """R minus the distance from the sphere mesh's centre to its octant-centre face [m]."""
    mesh = rigid_sphere(radius, resolution)
    n = mesh.normals()
    face = int(np.argmax(n @ (np.ones(3) / math.sqrt(3.0))))
    return radius - float(n[face] @ mesh.vertices[mesh.triangles[face, 0]])


def sphere(name="sphere", radius=0.05, z=0.0, mass=1.0):
    """A rigid sphere (mesh 1 cm) resting on a face on the plane z = `z`."""
    return {"name": name, "mass": mass, "position": [0.0, 0.0, z + radius - face_drop(radius)], "orientation": FACE_DOWN,
            "shape": {"type": "sphere", "radius": radius}, "contact": {"resolution": 0.01}}


def float_quantum(z: float) -> float:
    """Spacing of float32 numbers at z [m]."""
    return float(np.spacing(np.float32(abs(z))))


def vertical_bound(sim, body: int, z: float, dt: float, newton: bool = True) -> float:
    """The vertical speed [m/s] of `body` resting at height z (module docstring)."""
    return solver_error(sim, body, newton)[0] + 2.0 * float_quantum(z) / dt


def solver_error(sim, body: int, newton: bool) -> tuple[float, float]:
    """The solver's error [m/s] in `body`'s vertical velocity and in its sideways speed |v_xy| +
    reach |w| (module docstring), from the scene's masses and inertias (the worlds of `resting`
    scale them all alike)."""
    if not newton:
        return GS_FACTOR * TOL, GS_FACTOR * TOL
    host = sim.model.host
    m, reach = host.body_mass[body], host.body_reach[body]
    radii = np.sqrt(np.linalg.eigvalsh(host.body_inertia_B[body]) / m)  # radii of gyration [m]
    assert radii.max() <= reach
    vertical = TOL * math.sqrt(host.body_mass.sum() / m)
    return vertical, vertical * math.sqrt(1.0 + (reach / radii.min()) ** 2)


def record(sim, steps: int, body: int):
    """Per step for `body` of every world: height, |v_z|, |v_xy| + reach |w|, horizontal
    position, and each world's contact forces [N] (worlds, pairs, 3)."""
    reach = sim.model.host.body_reach[body]
    out = {k: [] for k in ("z", "vz", "side", "xy", "force")}
    for _ in range(steps):
        sim.step(1)
        s = sim.get_state()
        out["z"].append(s["position"][:, body, 2])
        out["vz"].append(np.abs(s["velocity"][:, body, 2]))
        out["side"].append(np.linalg.norm(s["velocity"][:, body, :2], axis=1)
                           + reach * np.linalg.norm(s["angular_velocity"][:, body], axis=1))
        out["xy"].append(s["position"][:, body, :2])
        out["force"].append(sim.pair_forces()[1])
    return {k: np.array(v) for k, v in out.items()}


def tilt_speed(sim, body: int, z: float, dt: float) -> float:
    """The rim speed reach |w| [m/s] of `body`, resting at height z on one contact patch in
    every world, whose contact vertices round each their own way (module docstring): 2 u reach /
    (rho dt), rho the least RMS spread across a horizontal axis of the patch's polygon centroids
    in any world."""
    rho = math.inf
    for w in range(sim.worlds):
        (surface,) = sim.contact_surfaces(w)
        xy = surface.polygons["centroid"][:, :2]
        spread = np.cov(xy, rowvar=False, bias=True)
        rho = min(rho, math.sqrt(np.linalg.eigvalsh(spread)[0]))
    return 2.0 * float_quantum(z) * sim.model.host.body_reach[body] / (rho * dt)


def face_inradius(radius=0.05, resolution=0.01) -> float:
    """Inradius [m] of the sphere mesh's octant-centre face (the one FACE_DOWN puts down)."""
    mesh = rigid_sphere(radius, resolution)
    face = int(np.argmax(mesh.normals() @ (np.ones(3) / math.sqrt(3.0))))
    x = mesh.vertices[mesh.triangles[face]]
    edges = [np.linalg.norm(x[(i + 1) % 3] - x[i]) for i in range(3)]
    area = 0.5 * np.linalg.norm(np.cross(x[1] - x[0], x[2] - x[0]))
    return float(2.0 * area / sum(edges))


def wobble_speed(radius: float, penetration: float) -> float:
    """Twice the sideways speed [m/s] of a sphere mesh wobbling in its band of no restoring
    torque on a face (module docstring)."""
    theta = penetration / face_inradius(radius)
    return 2.0 * 2.0 * theta * math.sqrt(5.0 * G * radius / 7.0)


def assert_rests(sim, body, rec, masses, dt, z_rest, newton: bool, pair: int = 0, wobble: float = 0.0):
    """The bounds of the module docstring over a window of `body` recorded in `sim` (record):
    the body of mass masses[w] in world w rests on `pair`, which carries its weight; `wobble`
    [m/s] is added to the sideways bound (a sphere on a face, a mesh's tilt)."""
    K = len(rec["z"])
    v_z = vertical_bound(sim, body, z_rest, dt, newton)
    v_side = solver_error(sim, body, newton)[1] + wobble
    assert rec["vz"].max() <= v_z, f"vertical speed {rec['vz'].max():.3g} m/s above {v_z:.3g}"
    assert rec["side"].max() <= v_side, f"sideways speed {rec['side'].max():.3g} m/s above {v_side:.3g}"
    drift = np.linalg.norm(rec["xy"][-1] - rec["xy"][0], axis=1)
    assert drift.max() <= K * dt * v_side
    for w, m in enumerate(masses):
        fz = rec["force"][:, w, pair, 2]
        assert abs(fz.mean() - m * G) <= 2.0 * m * v_z / (K * dt), f"world {w}: mean force {fz.mean()} N for {m * G} N"
        assert np.abs(fz - m * G).max() <= 2.0 * m * v_z / dt
        sideways = np.linalg.norm(rec["force"][:, w, pair, :2].mean(axis=0))
        assert sideways <= 2.0 * m * v_side / (K * dt)


# --------------------------------------------------------------------------- the twin and the rules


@pytest.mark.parametrize("shape, resolution, rigid", [
    (Shape("sphere", radius=0.05), 0.01, rigid_sphere(0.05, 0.01)),
    (Shape("box", size=(0.1, 0.2, 0.3)), None, rigid_box((0.1, 0.2, 0.3))),
    (Shape("cylinder", radius=0.05, length=0.2), 0.01, rigid_cylinder(0.05, 0.2, 0.01)),
    (Shape("capsule", radius=0.05, length=0.2), 0.01, rigid_capsule(0.05, 0.2, 0.01)),
    (Shape("ellipsoid", radii=(0.05, 0.1, 0.07)), 0.01, rigid_ellipsoid((0.05, 0.1, 0.07), 0.01)),
], ids=lambda v: getattr(v, "type", ""))
def test_a_primitives_twin_has_its_rigid_surface(arch, shape, resolution, rigid):
    """The twin of a rigid primitive is the compliant mesh of the same shape: its boundary has
    the rigid surface's vertices (1e-12 m) and volume (1e-12 relative), its pressure is
    rigid_modulus on the medial axis and 0 on the boundary; posed in the body frame, it moves
    with the geometry's pose; it has no mass of its own."""
    if arch != "cpu":
        pytest.skip("host-side meshing: checked in the cpu session")
    E = 1e12
    spec = GeometrySpec("g", shape, Contact(resolution=resolution), (0.01, -0.02, 0.03), (math.cos(0.3), 0.0, math.sin(0.3), 0.0))
    twin = twin_geometry(Side(0, spec, None, "body 'b'"), E)
    assert twin.kind == TETMESH and twin.compliant and twin.modulus == E and twin.mass is None
    R = np.array([[math.cos(0.6), 0.0, math.sin(0.6)], [0.0, 1.0, 0.0], [-math.sin(0.6), 0.0, math.cos(0.6)]])
    expected = np.unique(np.round(rigid.vertices @ R.T + spec.p_BG, 12), axis=0)
    surface = twin.tets.surface()
    np.testing.assert_allclose(np.unique(np.round(surface.vertices, 12), axis=0), expected, rtol=0, atol=1e-12)
    assert surface.volume() == pytest.approx(rigid.volume(), rel=1e-12)
    p = twin.tets.pressure
    assert p.max() == pytest.approx(E, rel=1e-12) and p.min() == 0.0
    unposed = compliant_primitive(shape, E, resolution, 0.0)
    np.testing.assert_array_equal(unposed.pressure, p)


def test_mesh_twins_are_the_fan_and_the_files_own_tets(arch, tmp_path):
    """A rigid convex mesh's twin is Drake's convex field, the fan of tets from its centroid
    (p = rigid_modulus there, 0 on its surface, which is the rigid one); a rigid tet mesh's
    twin is its own tets with the distance-to-boundary field (a pressure array in the file is
    not used): the same boundary, 0 on it and rigid_modulus at the deepest vertex. Both are
    posed with the body."""
    if arch != "cpu":
        pytest.skip("host-side meshing: checked in the cpu session")
    import meshio
    import trimesh

    E = 1e12
    trimesh.creation.icosphere(subdivisions=1, radius=0.05).export(tmp_path / "ball.obj")
    box_mesh = compliant_primitive(Shape("box", size=(0.1, 0.06, 0.04)), 1.0, None, 0.0)
    meshio.write(str(tmp_path / "brick.vtk"), meshio.Mesh(box_mesh.vertices, [("tetra", box_mesh.tets)],
                                                        point_data={"pressure": np.full(len(box_mesh.vertices), 7.0)}))
    bodies = [{"name": "ball", "mass": 1.0, "position": [0.0, 0.0, 0.3], "shape": {"type": "mesh", "file": "ball.obj"}},
              {"name": "brick", "mass": 1.0, "position": [0.0, 0.0, 0.1],
               "geometry": [{"name": "b", "position": [0.01, 0.0, 0.0], "shape": {"type": "tetmesh", "file": "brick.vtk"}}]}]
    data = build_model(make([ground(), *bodies], base_dir=tmp_path))
    for g in (1, 2):
        body = data.scene.bodies[g]
        twin = twin_geometry(Side(g, body.geometries[0], data.geometries[g], f"body '{body.name}'"), E)
        rigid = data.geometries[g].surface
        assert twin.kind == TETMESH and twin.compliant and twin.mass is None
        boundary = twin.tets.surface()
        np.testing.assert_allclose(np.unique(np.round(boundary.vertices, 12), axis=0),
                                   np.unique(np.round(rigid.vertices, 12), axis=0), rtol=0, atol=1e-12)
        p = twin.tets.pressure
        on_surface = np.array([np.all(np.isclose(rigid.vertices, x, rtol=0, atol=1e-12), axis=1).any()
                               for x in twin.tets.vertices])
        assert p.max() == pytest.approx(E, rel=1e-12) and np.all(p[on_surface] == 0.0) and np.all(p[~on_surface] > 0.0)
    fan = twin_geometry(Side(1, data.scene.bodies[1].geometries[0], data.geometries[1], "body 'ball'"), E).tets
    assert fan.tet_count == data.geometries[1].surface.triangle_count  # one tet per hull face


def annulus_file(tmp_path, name="ring.obj"):
    """A closed, non-convex ring (radii 3 and 5 cm, 2 cm high, 24 sections) as an OBJ file."""
    import trimesh

    path = tmp_path / name
    trimesh.creation.annulus(r_min=0.03, r_max=0.05, height=0.02, sections=24).export(path)
    return path


def fail_to_fill(monkeypatch):
    """Make every non-convex twin fail, as a surface the tetrahedraliser cannot fill would."""
    from taichi_hydro.geometry import twin
    from taichi_hydro.errors import MeshError

    def refuse(surface, modulus, resolution):
        raise MeshError("fTetWild failed (a stand-in for a surface it cannot fill)")

    monkeypatch.setattr(twin, "nonconvex_twin", refuse)
    twin._surface_twin.cache_clear()  # twins built before in this process


def twin_pairs(data):
    """{(body, body) sorted: (PairType, the body whose geometry stands in as a twin, the twin)}."""
    names = [b.name for b in data.scene.bodies]
    out = {}
    for row in data.pair_i:
        a, b = int(row[P_GEOM_A]), int(row[P_GEOM_B])
        twin = next(g for g in (a, b) if data.geom_twin_of[g] >= 0)
        key = tuple(sorted((names[data.geom_body[a]], names[data.geom_body[b]])))
        out[key] = (int(row[P_TYPE]), names[data.geom_body[twin]], data.geometries[twin])
    return out


def test_which_side_takes_the_twin(arch, tmp_path, monkeypatch):
    """The rules of geometry.twin: a box on a half-space gets the twin (tet-half-space pair); a
    sphere on a larger box table, the sphere (the smaller bounding ball; tet-triangle); a
    non-convex ring on a half-space takes one (tetrahedralised; tet-half-space), and one that
    cannot (its tetrahedralisation failing) leaves the half-space to become a slab of the
    ring's smallest half extent (1 cm; slab-triangle); a ring under a sphere larger than it
    takes the twin (the smaller ball). In a stack (sphere on box on half-space) one twin per
    geometry serves all its pairs (the sphere's, against the box and the half-space), and the
    box keeps its rigid surface for the sphere; twins carry their geometry's name, add no mass
    and no reach, and a twin pair's dissipation is the mean of the two rigid sides' (Drake's
    modulus-weighted rule with equal moduli)."""
    if arch != "cpu":
        pytest.skip("host-side model building: checked in the cpu session")
    ring = {"name": "ring", "mass": 0.1, "position": [0.0, 0.0, 0.01], "shape": {"type": "mesh", "file": str(annulus_file(tmp_path))}}
    cases = [([ground(), box()], ("box", "ground"), PairType.TET_PLANE, "box"),
             ([table(), sphere()], ("sphere", "table"), PairType.TET_TRI, "sphere"),
             ([ground(), ring], ("ground", "ring"), PairType.TET_PLANE, "ring"),
             ([{**ring, "type": "static", "mass": None}, {**sphere(z=0.02, radius=0.1), "name": "big"}], ("big", "ring"),
              PairType.TET_TRI, "ring")]
    for bodies, pair, kind, twin_body in cases:
        bodies = [{k: v for k, v in b.items() if v is not None} for b in bodies]
        data = build_model(make(bodies))
        check_supported(data)
        (found,) = twin_pairs(data).items()
        assert found[0] == pair and found[1][:2] == (kind, twin_body), found
    fail_to_fill(monkeypatch)
    kind, twin_body, slab = twin_pairs(build_model(make([ground(), ring])))[("ground", "ring")]
    assert (kind, twin_body) == (PairType.SLAB_TRI, "ground")
    assert slab.kind == HALFSPACE and slab.slab_gradient == pytest.approx(RIGID_MODULUS / 0.01, rel=1e-12)

    data = build_model(make([ground(dissipation=2.0), box(contact={"dissipation": 1.0}), sphere(z=0.1)]))
    pairs = twin_pairs(data)
    assert {k: v[:2] for k, v in pairs.items()} == {("box", "ground"): (PairType.TET_PLANE, "box"),
                                                     ("ground", "sphere"): (PairType.TET_PLANE, "sphere"),
                                                     ("box", "sphere"): (PairType.TET_TRI, "sphere")}
    assert pairs[("ground", "sphere")][2] is pairs[("box", "sphere")][2]
    assert data.scene_geom_count == 3 and len(data.geometries) == 5 and list(data.geom_twin_of) == [-1, -1, -1, 1, 2]
    assert data.geom_name == ["geometry0"] * 5 and (data.pair_i[:, P_TWIN] == 1).all()
    box_rows = data.pair_i[(data.pair_i[:, P_GEOM_A] == 1) | (data.pair_i[:, P_GEOM_B] == 1)]
    assert len(box_rows) == 1 and box_rows[0, P_TYPE] == PairType.TET_TRI  # the box's rigid surface, under the sphere
    assert list(data.body_mass) == [0.0, 1.0, 1.0]
    assert data.body_reach[1] == pytest.approx(math.sqrt(3) * 0.05, rel=1e-12)
    assert data.body_reach[2] == pytest.approx(0.05, rel=1e-12)
    d = {k: data.pair_f[p, PF_D] for p, k in enumerate(twin_pairs(data))}
    assert d == {("box", "ground"): 1.5, ("ground", "sphere"): 1.0, ("box", "sphere"): 0.5}


def test_slab_thickness_is_the_smallest_half_extent(arch):
    if arch != "cpu":
        pytest.skip("host-side arithmetic: checked in the cpu session")
    from taichi_hydro.geometry.build import Geometry
    from taichi_hydro.types import TRIMESH

    plate = Geometry(TRIMESH, False, None, rigid_box((0.4, 0.3, 0.02)), 0.0, 0.0, 0.0, None)
    assert slab_thickness(plate) == pytest.approx(0.01, rel=1e-15)


def test_per_world_materials_reach_the_twin_pair(arch):
    """A body's per-world friction and dissipation apply to its twin pairs as to its other
    pairs: mu by Drake's harmonic rule, d the mean of the two rigid sides'; per-world moduli
    do not scale a twin (its modulus is rigid_modulus)."""
    if arch != "cpu":
        pytest.skip("host-side parameters: checked in the cpu session")
    from taichi_hydro.params import pair_parameters, pressure_scale, scene_parameters

    data = build_model(make([ground(friction=0.4), box(contact={"friction": 0.5, "dissipation": 1.0}),
                             {"name": "pad", "mass": 1.0, "position": [1.0, 0.0, 0.05], "shape": {"type": "sphere", "radius": 0.05},
                              "contact": {"modulus": 1e6}}]))
    params = scene_parameters(data, 2)
    params.friction[1, 1], params.dissipation[1, 1] = 0.8, 3.0
    params.modulus[1, 2] = 2e6
    rows = pair_parameters(data, params)
    p = int(np.flatnonzero(data.pair_i[:, P_TWIN] == 1)[0])
    assert rows[0, p, PF_MU] == pytest.approx(2 * 0.4 * 0.5 / 0.9, rel=1e-15) and rows[0, p, PF_D] == 0.5
    assert rows[1, p, PF_MU] == pytest.approx(2 * 0.4 * 0.8 / 1.2, rel=1e-15) and rows[1, p, PF_D] == 1.5
    scale = pressure_scale(data, params.modulus)
    twins = data.geom_twin_of >= 0
    assert (scale[:, twins] == 1.0).all() and scale[1, 2] == 2.0


def test_rigid_pairs_that_cannot_work_name_both_bodies(arch, tmp_path, monkeypatch):
    """Two non-convex rigid meshes that can touch make a pair (one takes a tetrahedralised
    twin); when neither can take a twin (the tetrahedraliser failing on both), the scene is
    refused naming both bodies, the key and what to do; a collision filter lifts it. A rigid_modulus that is not a positive number, or one
    whose twin's pressure gradient float32 cannot square, is refused naming the key."""
    if arch != "cpu":
        pytest.skip("host-side validation: checked in the cpu session")
    path = annulus_file(tmp_path)
    rings = [{"name": "lower", "type": "static", "shape": {"type": "mesh", "file": path.name}},
             {"name": "upper", "mass": 0.1, "position": [0.0, 0.0, 0.02], "shape": {"type": "mesh", "file": path.name}}]
    check_supported(build_model(make(rings, source="rings.toml", base_dir=tmp_path)))
    fail_to_fill(monkeypatch)
    with pytest.raises(th.SceneError) as err:
        check_supported(build_model(make(rings, source="rings.toml", base_dir=tmp_path)))
    msg = str(err.value)
    for fragment in ("rings.toml", "body 'lower'", "body 'upper'", "both rigid", "non-convex", "'contact.hydro'", "tetmesh",
                     "collision_filter"):
        assert fragment in msg, msg
    filtered = th.scene_from_dict({"body": rings, "collision_filter": [{"bodies": ["lower", "upper"]}]}, base_dir=tmp_path)
    check_supported(build_model(filtered))
    for value in (0.0, -1e12, "stiff", math.inf):
        with pytest.raises(th.SceneError, match=r"\[sim\].*'rigid_modulus'"):
            make([ground(), box()], rigid_modulus=value)
    with pytest.raises(th.SceneError, match=r"'rigid_modulus'.*1e\+30 Pa.*body 'box'.*smaller rigid_modulus"):
        check_supported(build_model(make([ground(), box()], rigid_modulus=1e30)))


def test_a_non_convex_mesh_twin_is_tetrahedralised(arch, tmp_path, monkeypatch):
    """A rigid non-convex ring's twin comes from the tetrahedraliser (geometry.twin.
    nonconvex_twin): tets filling its volume, with pressure E on the deepest vertex; when the
    tetrahedraliser fails, NoTwin says why, for each side."""
    if arch != "cpu":
        pytest.skip("host-side meshing: checked in the cpu session")
    data = build_model(make([{"name": "ring", "type": "static", "shape": {"type": "mesh", "file": str(annulus_file(tmp_path))}}]))
    side = Side(0, data.scene.bodies[0].geometries[0], data.geometries[0], "body 'ring'")
    twin = twin_geometry(side, 1e12)
    assert twin.tets.volume() == pytest.approx(data.geometries[0].mass.volume, rel=2e-3)  # within fTetWild's envelope
    assert twin.tets.pressure.max() == pytest.approx(1e12) and twin.tets.pressure.min() >= 0.0
    fail_to_fill(monkeypatch)
    with pytest.raises(NoTwin, match="twin cannot be built.*fTetWild failed"):
        twin_geometry(side, 1e12)
    with pytest.raises(NoTwin, match="body 'ring'.*body 'ring'"):
        choose_twin(side, side, 1e12)


# --------------------------------------------------------------------------- at rest


MASSES = (1.0, 100.0)


def resting(bodies, dt, solver=None, worlds_masses=MASSES, **sim):
    """A simulator of one world per mass (every dynamic body that mass)."""
    s = th.Simulator(make(bodies, dt=dt, solver=solver, **sim), worlds=len(worlds_masses))
    dynamic = s.model.host.body_kind == 0
    s.set_parameters(mass=np.where(dynamic[None, :], np.array(worlds_masses)[:, None], np.nan))
    return s


@pytest.mark.launches(6_100)
@pytest.mark.parametrize("support, method", [
    ("halfspace", "gauss_seidel"), pytest.param("table", "gauss_seidel", marks=ON_LAVAPIPE_ELSEWHERE), ("table", "newton")])
def test_box_rests_on_a_rigid_half_space_and_a_rigid_table(arch, support, method):
    """A rigid 10 cm box of 1 kg and of 100 kg (one world each) on a rigid half-space or a
    static rigid box table, dt = 1 ms: after 0.1 s, 60 steps within the bounds of the module
    docstring (force = m g, no jitter, no drift). The contact is in the near-rigid regime: the
    100 kg box rests at the height of the 1 kg one, and (on the half-space) the same boxes with
    rigid_modulus 10x larger at the same height, to the float32 quantum of the height; the
    height is below the touching one by less than 1 um."""
    dt, lower = 1e-3, ground() if support == "halfspace" else table()
    sim = resting([lower, box()], dt, {"method": method})
    sim.step(100)
    rec = record(sim, 60, 1)
    assert_rests(sim, 1, rec, MASSES, dt, 0.05, newton=method == "newton")
    heights = rec["z"][-1]
    u = float_quantum(0.05)
    assert abs(heights[1] - heights[0]) <= u
    assert 0.0 < 0.05 - heights.max() and 0.05 - heights.min() < 1e-6
    if support == "halfspace":
        stiffer = resting([lower, box()], dt, {"method": method}, rigid_modulus=10.0 * RIGID_MODULUS)
        stiffer.step(160)
        np.testing.assert_allclose(stiffer.get_state()["position"][:, 1, 2], heights, rtol=0, atol=u)


@pytest.mark.launches(4_300)
@pytest.mark.parametrize("method", [pytest.param("gauss_seidel", marks=ON_LAVAPIPE_ELSEWHERE), "newton"])
def test_sphere_rests_on_a_rigid_box(arch, method):
    """A rigid sphere (5 cm, mesh 1 cm) of 1 kg and 100 kg resting on a face on a static rigid
    box, dt = 1 ms: the bounds of the module docstring over 60 steps after 0.1 s, the
    sideways one widened by the wobble of a sphere on a face; it sinks by less than 1 um."""
    dt = 1e-3
    sim = resting([table(), sphere()], dt, {"method": method})
    z0 = sim.get_state()["position"][0, 1, 2]
    sim.step(100)
    rec = record(sim, 60, 1)
    sunk = z0 - rec["z"].min()
    assert 0.0 < sunk < 1e-6
    assert_rests(sim, 1, rec, MASSES, dt, 0.05, newton=method == "newton", wobble=wobble_speed(0.05, sunk))


@pytest.mark.launches(4_500)
def test_sphere_on_a_box_on_a_half_space(arch):
    """Rigid on rigid on rigid: the sphere on the box on the half-space, both 1 kg and both
    100 kg (Newton, dt = 1 ms). The lower contact carries both weights, the upper one the
    sphere's, within the bounds of the module docstring for the sphere's height (15 cm; it
    sinks by less than 2 um, both contacts together); the
    sphere's twin serves its pair with the box, whose rigid surface it rests on, while the
    box's twin serves the box's pair with the half-space."""
    dt = 1e-3
    sim = resting([ground(), box(), sphere(z=0.1)], dt, {"method": "newton"})
    z0 = sim.get_state()["position"][0, 2, 2]
    sim.step(100)
    rec = record(sim, 60, 2)
    names = sim.pair_forces()[0]
    lower, upper = names.index(("ground", "box")), names.index(("box", "sphere"))
    sunk = z0 - rec["z"].min()
    assert 0.0 < sunk < 2e-6
    assert_rests(sim, 2, rec, MASSES, dt, 0.15, newton=True, pair=upper, wobble=wobble_speed(0.05, sunk))
    for w, m in enumerate(MASSES):
        fz = rec["force"][:, w, lower, 2]
        v_z = vertical_bound(sim, 2, 0.15, dt)
        assert abs(fz.mean() - 2 * m * G) <= 2 * 2 * m * v_z / (len(fz) * dt)


# --------------------------------------------------------------------------- sliding


@pytest.mark.launches(4_400)
@pytest.mark.parametrize("method", [pytest.param("gauss_seidel", marks=ON_LAVAPIPE_ELSEWHERE), "newton"])
def test_box_slides_to_a_stop_at_mu_g(arch, method):
    """A rigid box (10 x 10 x 4 cm, 1 kg) launched at v0 = 0.5 m/s on a rigid table, mu = 0.5:
    while it slides, every polygon's friction impulse is mu times its normal impulse (the
    solver is Coulomb-exact) and the normals are vertical, so the vertical momentum balance
    gives, step by step, v_x + mu v_z = v0 - mu g n dt, to the solver's tolerance per step
    (n tol). It stops after v0 / (mu g) = 0.102 s, having gone dt sum_n (v0 - mu g n dt)+
    (the discrete closed form) to within dt v0 (the last, partial step), and stays where it
    stopped (to 1e-5 m over 0.1 s). The box is flat enough that the table holds its friction
    moment without tipping: mu h/2 = 1 cm < L/6 = 1.67 cm, the lever of a box face's two
    triangles. After the stop it rocks about the line through their centroids, the soft mode
    of a box face (README, Known limits), by ~1 um (v ~ 1.5 mm/s, undamped at d = 0): not
    checked here."""
    dt, mu, v0 = 1e-3, 0.5, 0.5
    sim = th.Simulator(make([table(), box(size=(0.1, 0.1, 0.04), position=[-0.3, 0.0, 0.02], velocity=[v0, 0.0, 0.0])], dt,
                            {"method": method}))
    x0 = sim.get_state()["position"][0, 1, 0]
    v, x = [], []
    for _ in range(150):
        sim.step(1)
        s = sim.get_state()
        v.append(s["velocity"][0, 1].copy())
        x.append(s["position"][0, 1].copy())
    v, x = np.array(v), np.array(x)
    n = np.arange(1, len(v) + 1)
    exact = v0 - mu * G * n * dt
    sliding = exact > 0.05
    err = np.abs(v[sliding, 0] + mu * v[sliding, 2] - exact[sliding])
    assert (err <= n[sliding] * TOL).all(), f"largest deviation {err.max():.3g} m/s"
    stop = int(v0 / (mu * G * dt)) + 10
    assert x[stop, 0] - x0 == pytest.approx(dt * np.clip(exact, 0.0, None).sum(), abs=dt * v0)
    assert np.abs(x[stop:] - x[stop]).max() < 1e-5


# --------------------------------------------------------------------------- twin = compliant


@pytest.mark.launches(7_100)
@pytest.mark.parametrize("case", ["box_on_halfspace", "sphere_on_table"])
def test_the_twin_is_the_compliant_declaration(arch, case):
    """The same scene with the twin side declared compliant with modulus rigid_modulus (and the
    two sides' dissipation equal, so that both pair rules give it) runs the same polygons
    through the same kernels: the same trajectory and forces over 120 steps of a 1 cm drop
    and rest, bit for bit in the deterministic mode."""
    d = 3.0
    if case == "box_on_halfspace":
        lower, upper = ground(dissipation=d), box(z=0.06, contact={"dissipation": d})
    else:
        lower, upper = {**table(), "contact": {"dissipation": d}}, {**sphere(), "contact": {"resolution": 0.01, "dissipation": d}}
        upper["position"][2] += 0.01
    twin_up = {**upper, "contact": {**upper["contact"], "hydro": "compliant", "modulus": RIGID_MODULUS}}
    runs = []
    for bodies in ([lower, upper], [lower, twin_up]):
        sim = th.Simulator(make(bodies, solver={"deterministic": True}))
        states, forces = [], []
        for _ in range(6):
            sim.step(20)
            s = sim.get_state()
            states.append(np.concatenate([s["position"][0, 1], s["orientation"][0, 1], s["velocity"][0, 1]]))
            forces.append(sim.pair_forces()[1][0, 0])
        runs.append((np.array(states), np.array(forces)))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    assert runs[0][1][-1, 2] == pytest.approx(G, rel=1e-3)


# --------------------------------------------------------------------------- joints


@pytest.mark.launches(4_600)
def test_hinged_link_comes_to_rest_on_a_rigid_table(arch):
    """A rigid link (30 x 4 x 4 cm, 1 kg) on a revolute joint at its end, 10 cm above a rigid
    table, held up by an effort of 0.5 N m, starts 2 mm above its rest (turned by 0.265 rad)
    and falls until its tip rests on the table. At rest the tip's speed, joint speed times L,
    is within the solver's error plus two float32 quanta of the link's pose per step (module
    docstring): 2 (u + L u_q) / dt, u the spacing of its largest coordinate (0.15 m) and u_q =
    1.2e-7 rad the angle of one spacing of a unit quaternion's components (2 x 2^-24 x 2). The
    joint effort and the contact's
    torque about the hinge balance gravity's, and the joint's and the contact's forces balance
    the weight: over the last K = 40 steps the residuals are the link's momentum change over
    the window, 2 m v / (K dt) (v that bound), and its angular momentum's about the hinge,
    2 I v / (L K dt) (I = m (L^2 + w^2) / 3 about the hinge, L = 0.3 m), plus, for the torque,
    the contact force times the spread of its polygons' centroids (where in the patch the
    solved force acts)."""
    dt, effort, K, L, theta = 1e-3, -0.5, 40, 0.3, 0.265
    hinge = np.array([0.0, 0.0, 0.1])
    centre = hinge + 0.5 * L * np.array([math.cos(theta), 0.0, -math.sin(theta)])  # turned about +y: the tip goes down
    link = {"name": "link", "mass": 1.0, "position": list(centre), "orientation": [math.cos(theta / 2), 0.0, math.sin(theta / 2), 0.0],
            "shape": {"type": "box", "size": [L, 0.04, 0.04]}}
    joint = {"name": "hinge", "type": "revolute", "parent": "world", "child": "link", "position": list(hinge),
             "axis": [0.0, 1.0, 0.0], "actuator": {"type": "effort", "effort": effort}}
    sim = th.Simulator(th.scene_from_dict({"sim": {"dt": dt}, "body": [table(x=0.3), link], "joint": [joint]}, source="<test>"))
    sim.step(120)
    joint_force, contact_force, speed = [], [], []
    for _ in range(K):
        sim.step(1)
        joint_force.append(sim.joint_forces()["force"][0, 0])
        contact_force.append(sim.pair_forces()[1][0, 0])
        speed.append(abs(sim.joint_state()["velocity"][0, 0]))
    state, js = sim.get_state(), sim.joint_state()
    u_q = 2.0 * 2.0 * 2.0**-24
    v_bound = TOL + 2.0 * (float_quantum(0.15) + L * u_q) / dt
    assert max(speed) * L <= v_bound
    assert js["effort"][0, 0] == pytest.approx(effort, rel=1e-6)
    assert 0.0 < js["position"][0, 0] < 0.01  # it fell (by < 0.01 rad) onto the table
    force = np.mean(contact_force, axis=0)
    np.testing.assert_allclose(np.mean(joint_force, axis=0) + force + [0.0, 0.0, -G], 0.0, atol=2.0 * v_bound / (K * dt))
    (surface,) = sim.contact_surfaces(0)
    spread = float(np.ptp(surface.polygons["centroid"], axis=0).max())
    com = state["position"][0, 1]  # a box's centre of mass is its frame origin
    axis = np.array([0.0, 1.0, 0.0])
    torque = effort + np.cross(surface.centroid - hinge, force) @ axis + np.cross(com - hinge, [0.0, 0.0, -G]) @ axis
    inertia = (L**2 + 0.04**2) / 3.0
    assert abs(torque) <= 2.0 * inertia * v_bound / (L * K * dt) + np.linalg.norm(force) * spread
    assert force[2] > 0.25 * G  # the tip carries a real share of the weight


# --------------------------------------------------------------------------- slab


@pytest.mark.launches(4_400)
@pytest.mark.parametrize("fill", ["tets", "slab"])
def test_non_convex_mesh_rests_on_a_rigid_half_space(arch, tmp_path, monkeypatch, fill):
    """A rigid non-convex ring (0.1 kg and 10 kg) on a rigid half-space rests within the bounds
    of the module docstring (dt = 1 ms), through its tetrahedralised twin (tet-half-space pair,
    method newton), and through a slab (slab-triangle pair, Gauss-Seidel) when the
    tetrahedraliser cannot fill it.
    Why Newton for the twin: the twin is fTetWild's, whose output differs from run to run (the
    suite tetrahedralises afresh in each session), and on some of its meshes Gauss-Seidel pops
    the ring once in the window (0.1-10 mm/s vertical for two steps), on either backend: 7 of
    97 meshes on cpu and 2 of 75 on vulkan (2026-11-26); a mesh that pops does so in every run
    on its backend (deterministic mode: the rows are in key order whatever order the candidates
    arrive in, tested by reversing them). Gauss-Seidel contracts slowly on the ring's ~650 stiff
    rows (rho ~ 0.998 per sweep, so its stop can leave ~500 tol, not the 50 tol of the module
    docstring); a tilt rate of ~6e-4 rad/s left by one solve moves the rim by ~30 nm in a
    step, more than the few nm of near-rigid penetration, the contact set flips and the ring
    drops ~2 um and rebounds (README, Known limits). Newton rests on those meshes without a pop
    and is held to its tighter bounds here: Newton's sideways error on the ring is up to 2.0 tol
    (module docstring), and the float32 tilt of a mesh whose vertices round each their own way
    adds up to 3.4 tol (tilt_speed); over fresh meshes it rested at up to 1.48 tol on cpu (100
    meshes) and 1.36 tol on vulkan (25 meshes); 36 % of them on each passed 1 tol
    (2026-11-27), and one CI mesh rested at 2.50 tol on vulkan, past the solver's 2.0 alone."""
    newton = fill == "tets"
    dt = 1e-3
    if fill == "slab":
        fail_to_fill(monkeypatch)
    ring = {"name": "ring", "mass": 0.1, "position": [0.0, 0.0, 0.01], "shape": {"type": "mesh", "file": str(annulus_file(tmp_path))}}
    # Deterministic mode: the rows in (pair, element) order, so one mesh gives one result. In the
    # default mode they come in arrival order, and Gauss-Seidel's result follows it: on one mesh
    # that pops, 4 of 6 runs popped (cpu), on a quiet one none of 10 (README, Known limits).
    sim = resting([ground(), ring], dt, {"deterministic": True, "method": "newton" if newton else "gauss_seidel"},
                  worlds_masses=(0.1, 10.0))
    assert sim.model.host.pair_i[0, P_TYPE] == (PairType.SLAB_TRI if fill == "slab" else PairType.TET_PLANE)
    sim.step(100)
    rec = record(sim, 60, 1)
    assert_rests(sim, 1, rec, (0.1, 10.0), dt, 0.01, newton=newton, wobble=tilt_speed(sim, 1, 0.01, dt))
