"""Compliant non-convex meshes (geometry/tetrahedralize.py): fTetWild's tets and the distance
field on a torus and an L prism, the on-disk cache, the errors for surfaces that cannot be made
solid, and a compliant torus resting on the floor."""

import importlib.metadata
import math
import warnings

import numpy as np
import pytest
import trimesh

import taichi_hydro as th
from taichi_hydro.model import build_model
from taichi_hydro import diskcache
from taichi_hydro.errors import HydroWarning, MeshError
from taichi_hydro.geometry import meshfile
from taichi_hydro.geometry import tetrahedralize as tz
from taichi_hydro.geometry.build import build_geometry
from taichi_hydro.geometry.mesh import TriMesh, boundary_faces
from taichi_hydro.geometry.selfintersection import crossing_triangles

from conftest import ground, scene

E = 1e5
G = 9.81


@pytest.fixture
def host(arch):
    """Meshing, fields and the cache are host-side NumPy: checked in the cpu run only."""
    if arch != "cpu":
        pytest.skip("host-side: checked in the cpu run")
    return arch


def torus_surface() -> TriMesh:
    """A coarse torus, major radius 50 mm, tube radius 15 mm (256 triangles)."""
    t = trimesh.creation.torus(0.05, 0.015, major_sections=16, minor_sections=8)
    return TriMesh(np.asarray(t.vertices), np.asarray(t.faces))


ELL_OUTLINE = [(0, 0), (2, 0), (2, 1), (1, 1), (1, 2), (0, 2)]


def ell_faces():
    """Triangles of the L-shaped prism over ELL_OUTLINE, z in [0, 1] (vertices: the outline at
    z = 0, then at z = 1), outward."""
    n = len(ELL_OUTLINE)
    faces = []
    for i in range(n):
        j = (i + 1) % n
        faces += [(i, j, n + j), (i, n + j, n + i)]
    cap = [(0, 1, 2), (0, 2, 3), (0, 3, 4), (0, 4, 5)]  # counter-clockwise seen from +z
    return faces + [(a, c, b) for a, b, c in cap] + [(n + a, n + b, n + c) for a, b, c in cap]


def ell_surface() -> TriMesh:
    """The L prism: 2 m legs, 1 m wide and high, volume 3 m^3 (12 vertices, 20 triangles)."""
    v = [(x, y, z) for z in (0.0, 1.0) for x, y in ELL_OUTLINE]
    return TriMesh(np.array(v, dtype=np.float64), np.array(ell_faces()))


SHAPES = {"torus": (torus_surface, 0.015), "ell": (ell_surface, 0.5)}


@pytest.fixture(scope="module")
def meshed():
    """name -> (surface, ExtentMesh at the shape's resolution), built once (the suite's cache)."""
    return {name: (make(), tz.extent_mesh(make(), h)) for name, (make, h) in SHAPES.items()}


def _write_obj(path, surface: TriMesh):
    lines = [f"v {x!r} {y!r} {z!r}" for x, y, z in surface.vertices.tolist()] + [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in surface.triangles]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("name", list(SHAPES))
def test_mesh_is_a_solid_with_a_distance_field(host, meshed, name):
    """fTetWild keeps the tet mesh's boundary within the envelope eps = ENVELOPE_REL x the
    bounding-box diagonal of the surface (and, measured in bench/tetrahedralize.py, the surface
    within ~0.6 eps of the boundary; the product refuses 2 eps). Moving every point of a closed
    boundary of area A by at most eps changes the enclosed volume by at most eps A (first order),
    so |V_tets - V_surface| <= eps A. Every tet is positive, none has four boundary vertices (the
    field splits them), p = 0 exactly on the boundary and > 0 inside, max p = E, every tet's
    gradient is non-zero, and the deepest point is no deeper than the shape's half thickness."""
    surface, extent = meshed[name]
    mesh = tz.compliant_from_surface(surface, E, SHAPES[name][1])
    diagonal = float(np.linalg.norm(np.ptp(surface.vertices, axis=0)))
    eps = tz.ENVELOPE_REL * diagonal
    assert abs(mesh.volume() - surface.volume()) <= eps * surface.areas().sum()
    x = mesh.vertices[mesh.tets]
    volumes = np.einsum("ij,ij->i", x[:, 1] - x[:, 0], np.cross(x[:, 2] - x[:, 0], x[:, 3] - x[:, 0])) / 6
    assert volumes.min() > 0
    faces = boundary_faces(mesh.tets)
    on_boundary = np.zeros(len(mesh.vertices), dtype=bool)
    on_boundary[np.unique(faces)] = True
    assert not np.any(np.all(on_boundary[mesh.tets], axis=1))
    assert np.all(mesh.pressure[on_boundary] == 0.0) and np.all(mesh.pressure[~on_boundary] > 0.0)
    assert mesh.pressure.max() == E
    assert np.linalg.norm(mesh.gradients(), axis=1).min() > 0.0
    boundary = mesh.surface()
    out_points = np.vstack([boundary.vertices, boundary.vertices[boundary.triangles].mean(axis=1)])
    in_points = np.vstack([surface.vertices, surface.vertices[surface.triangles].mean(axis=1)])
    assert meshfile.distance_to_surface(out_points, surface.vertices, surface.triangles).max() <= eps
    assert meshfile.distance_to_surface(in_points, boundary.vertices, boundary.triangles).max() <= 2 * eps
    half_thickness = {"torus": 0.015, "ell": 0.5}[name]
    assert 0.0 < extent.depth <= half_thickness + eps


def test_modulus_scales_the_cached_field_and_margin_inflates(host, meshed):
    """One cache entry serves every modulus: p = E e exactly. Margin delta moves the boundary
    out along vertex normals and evaluates the field there: interior pressures unchanged, the
    boundary's p = -E d / d_max with d its distance to the original boundary, d <= delta (delta
    at a convex vertex, where the normal lies in the normal cone; less at a concave one). Each
    boundary triangle moves out along its normal by a blend of its vertices' moves projected on
    it, each between delta (on a face) and delta / sqrt(3) (at a corner of three faces at right
    angles, where the vertex normal is their diagonal), so the volume grows by between
    delta A / sqrt(3) and delta A (A the area; 1 % for the second-order terms, delta^2 x edges)."""
    surface, extent = meshed["ell"]
    one = tz.compliant_from_surface(surface, 1.0, 0.5)
    seven = tz.compliant_from_surface(surface, 7e5, 0.5)
    np.testing.assert_array_equal(seven.pressure, 7e5 * one.pressure)
    delta = 1e-3
    inflated = tz.compliant_from_surface(surface, E, 0.5, margin=delta)
    boundary = np.unique(boundary_faces(one.tets))
    interior = np.setdiff1d(np.arange(len(one.vertices)), boundary)
    np.testing.assert_array_equal(inflated.pressure[interior], E * one.pressure[interior])
    np.testing.assert_array_equal(inflated.vertices[interior], one.vertices[interior])
    p_boundary = inflated.pressure[boundary]
    assert p_boundary.max() < 0 and p_boundary.min() >= -E * delta / extent.depth * (1 + 1e-9)
    moved = np.linalg.norm(inflated.vertices[boundary] - one.vertices[boundary], axis=1)
    np.testing.assert_allclose(moved, delta, rtol=1e-12)
    grown, swept = inflated.volume() - one.volume(), delta * surface.areas().sum()
    assert swept / math.sqrt(3.0) * 0.99 <= grown <= swept * 1.01


@pytest.fixture
def counted_builds(meshed, monkeypatch):
    """tz._build replaced by one returning the L prism's mesh at once, counting its calls (the
    cache tests exercise the cache, not the mesher, which the other tests run)."""
    calls = []
    built = meshed["ell"][1]
    monkeypatch.setattr(tz, "_build", lambda surface, h, what: calls.append(h) or built)
    return calls


@pytest.mark.parametrize("damage", ["garbage", "truncated", "tampered"])
def test_cache_hit_is_bit_identical_and_a_bad_entry_is_rebuilt(host, tmp_path, monkeypatch, counted_builds, damage):
    """The second build loads the entry without building and returns the same bits; an entry
    that is not an npz file, is cut short, or holds a field the loader's check refuses is warned
    about, rebuilt and written again."""
    monkeypatch.setenv(diskcache.ENV, str(tmp_path))
    surface = ell_surface()
    first = tz.extent_mesh(surface, 0.5)
    (entry,) = tmp_path.glob("tetmesh-*.npz")
    second = tz.extent_mesh(surface, 0.5)
    assert counted_builds == [0.5]
    for name in ("vertices", "tets", "pressure"):
        np.testing.assert_array_equal(getattr(second.mesh, name), getattr(first.mesh, name))
    assert (second.depth, second.split) == (first.depth, first.split)
    data = entry.read_bytes()
    if damage == "garbage":
        entry.write_bytes(b"not an npz file" * 10)
    elif damage == "truncated":
        entry.write_bytes(data[: len(data) // 2])
    else:
        with np.load(entry) as z:
            arrays = dict(z)
        arrays["extent"] = arrays["extent"] * 2.0  # max 2: not an extent field
        with open(entry, "wb") as f:
            np.savez(f, **arrays)
    with pytest.warns(HydroWarning, match="unusable.*rebuilding"):
        tz.extent_mesh(surface, 0.5)
    assert counted_builds == [0.5, 0.5]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = tz.extent_mesh(surface, 0.5)  # the rewritten entry loads cleanly
    np.testing.assert_array_equal(again.mesh.tets, first.mesh.tets)
    assert counted_builds == [0.5, 0.5]


def test_cache_key_and_an_unwritable_cache(host, tmp_path, monkeypatch, counted_builds):
    """Another resolution or scale is another entry, the same ones hit; a cache folder that
    cannot be created (a file is in the way) means no caching and no error."""
    monkeypatch.setenv(diskcache.ENV, str(tmp_path))
    surface = ell_surface()
    for h, scale in ((0.5, 1.0), (0.6, 1.0), (0.5, 1.5), (0.5, 1.0), (0.6, 1.0)):
        tz.extent_mesh(TriMesh(surface.vertices * scale, surface.triangles), h)
    assert len(list(tmp_path.glob("tetmesh-*.npz"))) == 3 and len(counted_builds) == 3
    blocker = tmp_path / "a_file"
    blocker.write_text("in the way")
    monkeypatch.setenv(diskcache.ENV, str(blocker / "cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tz.extent_mesh(surface, 0.5)
        tz.extent_mesh(surface, 0.5)
    assert len(counted_builds) == 5 and blocker.read_text() == "in the way"


def test_cache_keys_tell_their_parts_apart(host):
    """Keys differ when the parts differ only by where one ends, by dtype or shape of the same
    bytes, or by the last bit of a float; equal parts give equal keys."""
    a = np.arange(6, dtype=np.float64)
    assert diskcache.digest("ab", "c") != diskcache.digest("a", "bc")
    assert diskcache.digest(a) != diskcache.digest(a.reshape(2, 3)) != diskcache.digest(a.view(np.int64))
    assert diskcache.digest(0.1) != diskcache.digest(np.nextafter(0.1, 1.0))
    assert diskcache.digest("tetmesh", 1, a, 0.5) == diskcache.digest("tetmesh", 1, a.copy(), 0.5)
    with pytest.raises(TypeError):
        diskcache.digest(object())


def test_surfaces_that_cannot_be_made_solid(host, monkeypatch):
    """Inverted (clockwise), degenerate (flat), crossing itself, too fine a resolution, a mesher
    that fails or returns another solid, and a missing mesher: each a MeshError naming the
    surface and the reason."""
    ell = ell_surface()
    with pytest.raises(MeshError, match="part: inverted"):
        tz.compliant_from_surface(TriMesh(ell.vertices, ell.triangles[:, ::-1]), E, 0.5, what="part")
    flat = TriMesh(np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0.0]]), np.array([[0, 2, 1], [1, 2, 3], [0, 1, 3], [0, 3, 2]]))
    with pytest.raises(MeshError, match="part: degenerate"):
        tz.compliant_from_surface(flat, E, 0.5, what="part")
    shifted = TriMesh(ell.vertices + [0.5, 0.3, 0.2], ell.triangles)
    both = TriMesh(np.vstack([ell.vertices, shifted.vertices]), np.vstack([ell.triangles, shifted.triangles + len(ell.vertices)]))
    with pytest.raises(MeshError, match="part: self-intersecting: triangles"):
        tz.compliant_from_surface(both, E, 0.5, what="part")
    with pytest.raises(MeshError, match=r"part: resolution 0.001 m would fill .* use resolution >= 0\.0"):
        tz.compliant_from_surface(ell, E, 1e-3, what="part")
    with pytest.raises(MeshError, match="part: resolution"):
        tz.compliant_from_surface(ell, E, -1.0, what="part")
    good = tz.tetwild

    def shrunken(*args, **kwargs):
        v, t = good(*args, **kwargs)
        return 0.95 * v + 0.05 * v.mean(axis=0), t

    monkeypatch.setattr(tz, "tetwild", shrunken)
    with pytest.raises(MeshError, match="part: mesher failure: .* from the other"):
        tz.extent_mesh(ell, 0.55, what="part", cache=False)
    monkeypatch.setattr(tz, "tetwild", lambda *a, **k: (np.zeros((0, 3)), np.zeros((0, 4), dtype=np.int64)))
    with pytest.raises(MeshError, match="part: fTetWild .* produced no tets"):
        tz.extent_mesh(ell, 0.55, what="part", cache=False)

    def absent(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", absent)
    with pytest.raises(MeshError, match=r"pip install \"taichi-hydro\[mesh\]\" \(or pip install \"pytetwild"):
        tz.extent_mesh(ell, 0.55, what="part", cache=False)


@pytest.mark.parametrize("child, reason", [("import os; os.abort()", r"it crashed \(SIGABRT\)"),
                                           ("raise RuntimeError('Parameters initialization failed')",
                                            "RuntimeError: Parameters initialization failed")])
def test_a_mesher_that_dies_is_a_mesh_error(host, monkeypatch, tmp_path, child, reason):
    """fTetWild runs in a child process: an abort inside it, or an exception it raises, is a
    MeshError with the cause; the caller's process and working folder are untouched."""
    from taichi_hydro.geometry import tetwild

    monkeypatch.setattr(tetwild, "_CHILD", child)
    monkeypatch.chdir(tmp_path)
    ell = ell_surface()
    with pytest.raises(MeshError, match=r"fTetWild \(pytetwild .*\) failed: " + reason):
        tetwild.tetwild(ell.vertices, ell.triangles, 0.5, 1e-3)
    assert list(tmp_path.iterdir()) == []


def test_scene_errors_name_the_file(host, tmp_path):
    """Through a scene file: an open non-convex mesh and one made of two interpenetrating L
    prisms are SceneErrors naming the file, the body and the key."""
    ell = ell_surface()
    _write_obj(tmp_path / "open.obj", TriMesh(ell.vertices, ell.triangles[1:]))
    shifted = ell.vertices + [0.5, 0.3, 0.2]
    _write_obj(tmp_path / "crossed.obj", TriMesh(np.vstack([ell.vertices, shifted]),
                                                 np.vstack([ell.triangles, ell.triangles + len(ell.vertices)])))
    for file, reason in (("open.obj", "open mesh"), ("crossed.obj", "self-intersecting")):
        body = {"name": "part", "mass": 1.0, "position": [0, 0, 2.0], "shape": {"type": "mesh", "file": str(tmp_path / file)},
                "contact": {"modulus": E}}
        s = th.scene_from_dict({"body": [ground(), body]}, source="scene.toml")
        with pytest.raises(th.SceneError) as err:
            build_model(s)
        msg = str(err.value)
        assert "scene.toml" in msg and "body 'part'" in msg and "'shape.file'" in msg and file in msg and reason in msg


def test_convex_meshes_keep_the_fan_and_non_convex_ones_are_tetrahedralised(host, tmp_path, monkeypatch):
    """A compliant convex mesh still gets the centroid fan, bit for bit; the non-convex L prism
    from a file gets compliant_from_surface's mesh (the same cache entry) at the default
    resolution, a quarter of its smallest bounding-box side."""
    cube = trimesh.creation.box((0.1, 0.2, 0.3))
    cube_file = _write_obj(tmp_path / "cube.obj", TriMesh(np.asarray(cube.vertices), np.asarray(cube.faces)))
    ell_file = _write_obj(tmp_path / "ell.obj", ell_surface())
    bodies = [{"name": n, "mass": 1.0, "position": [3.0 * k, 0, 2.0], "shape": {"type": "mesh", "file": str(f)},
               "contact": {"modulus": E, "margin": 1e-4}} for k, (n, f) in enumerate((("cube", cube_file), ("ell", ell_file)))]
    s = scene([ground(), *bodies])
    cube_geometry = build_geometry(s.bodies[1].geometries[0], "scene.toml")
    fan = meshfile.compliant_convex(meshfile.load_surface(cube_file), E, 1e-4)
    np.testing.assert_array_equal(cube_geometry.tets.vertices, fan.vertices)
    np.testing.assert_array_equal(cube_geometry.tets.tets, fan.tets)
    np.testing.assert_array_equal(cube_geometry.tets.pressure, fan.pressure)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    ell_geometry = build_geometry(s.bodies[2].geometries[0], "scene.toml")
    assert list(work.iterdir()) == []  # fTetWild's debug file stays in its scratch folder
    surface = meshfile.load_surface(ell_file)
    assert tz.default_resolution(surface) == 0.25
    expected = tz.compliant_from_surface(surface, E, None, 1e-4)
    np.testing.assert_array_equal(ell_geometry.tets.tets, expected.tets)
    np.testing.assert_array_equal(ell_geometry.tets.pressure, expected.pressure)
    assert ell_geometry.margin == 1e-4 and ell_geometry.mass.volume == pytest.approx(3.0, rel=1e-12)


def test_tets_on_a_ridge_of_the_field_are_split(host):
    """A slab 1 m thick with four inner vertices at z = +-0.1, all 0.4 m from the boundary: the
    tet they form would have a zero gradient, so it is split at its centroid (0.5 m deep); the
    tets with four boundary vertices are split too, and every tet then has a gradient."""
    from scipy.spatial import Delaunay

    from taichi_hydro.geometry import primitives as prim
    from taichi_hydro.geometry.mesh import tet_signed_volumes

    inner = np.array([[0.1, 0.1, -0.1], [0.3, -0.1, -0.1], [0.1, -0.1, 0.1], [0.25, 0.15, 0.1]])
    points = np.vstack([prim.rigid_box((4.0, 4.0, 1.0)).vertices, inner])
    tets = Delaunay(points).simplices
    volumes = tet_signed_volumes(points, tets)
    tets = tets[np.abs(volumes) > 1e-9]  # Delaunay's flat tets between coplanar box corners
    tets[tet_signed_volumes(points, tets) < 0] = tets[tet_signed_volumes(points, tets) < 0][:, [0, 2, 1, 3]]
    assert any(set(t) == {8, 9, 10, 11} for t in tets.tolist())
    on_boundary = np.zeros(len(points), dtype=bool)
    on_boundary[np.unique(boundary_faces(tets))] = True
    four_boundary = int(np.sum(np.all(on_boundary[tets], axis=1)))
    mesh, depth, split = meshfile.distance_extent(points, tets)
    assert split == four_boundary and mesh.tet_count == len(tets) + 3 * (four_boundary + 1)
    assert depth == pytest.approx(0.5, abs=1e-12)
    assert np.linalg.norm(mesh.gradients(), axis=1).min() > 0.1


def test_crossing_triangles(host):
    """Clean closed surfaces have no crossing pair; two interpenetrating spheres have, in general
    position and placed symmetrically (where the crossing edges pass exactly through vertices
    and edges of the other shell); so does a sphere with one vertex pushed through its far side."""
    assert len(crossing_triangles(torus_surface(), limit=10)) == 0
    assert len(crossing_triangles(ell_surface(), limit=10)) == 0
    sphere = trimesh.creation.icosphere(2)
    v, f = np.asarray(sphere.vertices), np.asarray(sphere.faces)

    def pair(offset):
        return TriMesh(np.vstack([v, v + offset]), np.vstack([f, f + len(v)]))

    assert len(crossing_triangles(pair([2.5, 0, 0]), limit=10)) == 0
    assert len(crossing_triangles(pair([1.0, 0, 0]), limit=10)) == 10
    found = crossing_triangles(pair([0.9, 0.05, 0.01]), limit=10)
    assert len(found) == 10 and np.all(found[:, 0] < len(f)) and np.all(found[:, 1] >= len(f))
    folded = v.copy()
    top = int(np.argmax(v[:, 2]))
    folded[top] = [0.0, 0.0, -1.3]
    crossing = crossing_triangles(TriMesh(folded, f), limit=10)
    assert len(crossing) > 0 and np.any(np.isin(f[crossing.ravel()], top))


def test_distance_to_surface_matches_brute_force(host, monkeypatch):
    """The pruned search returns exactly the brute-force minimum over all triangles, also when it
    works in small chunks."""
    surface = torus_surface()
    rng = np.random.default_rng(3)
    points = np.vstack([rng.uniform(-0.08, 0.08, (400, 3)), surface.vertices[:20], [[0, 0, 0], [1.0, 2.0, 3.0]]])
    a, b, c = (surface.vertices[surface.triangles[:, k]] for k in range(3))
    closest = meshfile._closest_on_triangles(points[:, None], a, b, c, b - a, c - a, c - b)
    brute = np.sqrt(((points[:, None] - closest) ** 2).sum(axis=2).min(axis=1))
    np.testing.assert_array_equal(meshfile.distance_to_surface(points, surface.vertices, surface.triangles), brute)
    monkeypatch.setattr(meshfile, "_PAIRS_PER_CHUNK", 50)
    np.testing.assert_array_equal(meshfile.distance_to_surface(points, surface.vertices, surface.triangles), brute)


def test_coarse_resolution_for_a_thin_body_warns(host):
    """A 0.1 m slab of the L outline meshed at 0.5 m: nearly every tet has four boundary
    vertices, which the warning names with the thickness and a resolution to use."""
    ell = ell_surface()
    thin = TriMesh(ell.vertices * [1.0, 1.0, 0.1], ell.triangles)
    with pytest.warns(HydroWarning, match=r"all four vertices on the boundary at resolution 0.5 m .* use a resolution <="):
        tz.extent_mesh(thin, 0.5)


def test_compliant_torus_rests_on_the_floor(arch, tmp_path):
    """A compliant torus (coarse, tetrahedralised) lying flat on a rigid floor settles and carries
    its weight. Momentum over one step of semi-implicit Euler, m (v1 - v0) = (f - m g) dt: once
    the torus' velocity changes by less than the solver tolerance tol per step (checked), the
    solved force is m g to m tol / dt (plus float32 rounding of the impulse sums, 1e-5 m g);
    sideways forces are as small, and the torus moves by less than 1 um over the last 50 steps."""
    dt, m = 1e-3, 0.2
    file = _write_obj(tmp_path / "torus.obj", torus_surface())
    torus = {"name": "torus", "mass": m, "position": [0.0, 0.0, 0.0149],
             "shape": {"type": "mesh", "file": str(file)},
             "contact": {"modulus": 1e6, "resolution": 0.015, "dissipation": 20.0}}
    sim = th.Simulator(scene([ground(), torus], dt=dt, solver={"iterations": 300}))
    assert sim.model.host.geometries[1].tets.tet_count > 100  # tetrahedralised, not a fan of the hull
    sim.step(100)
    p0 = sim.get_state()["position"][0, 1].copy()
    sim.step(49)
    v0 = sim.get_state()["velocity"][0, 1].copy()
    sim.step(1)
    dv = sim.get_state()["velocity"][0, 1] - v0
    tol = sim.settings.tolerance
    assert np.abs(dv).max() < tol
    f = sim.contact_forces()[("ground", "torus")]
    allowed = m * tol / dt + 1e-5 * m * G
    assert f[2] == pytest.approx(m * G, abs=allowed)
    assert np.abs(f[:2]).max() < allowed
    assert np.abs(sim.get_state()["position"][0, 1] - p0).max() < 1e-6
