"""Host geometry: meshes are valid, conforming and carry the field DESIGN §1 defines."""

import math

import numpy as np
import pytest

from taichi_hydro.errors import MeshError
from taichi_hydro.geometry import primitives as prim
from taichi_hydro.geometry.mass import box_props, capsule_props, cylinder_props, surface_props
from taichi_hydro.geometry.mesh import TetMesh, TriMesh, boundary_faces
from taichi_hydro.geometry.meshfile import compliant_convex, distance_field_tetmesh, distance_to_surface
from taichi_hydro.geometry.polytope import polytope_distance

E = 1e5


def boundary_vertex_mask(mesh: TetMesh) -> np.ndarray:
    mask = np.zeros(len(mesh.vertices), dtype=bool)
    mask[np.unique(boundary_faces(mesh.tets))] = True
    return mask


def check_compliant(mesh: TetMesh):
    """Valid tets, a closed manifold boundary, no tet with four boundary vertices (which would
    have a zero gradient), and no zero gradient anywhere."""
    mesh.validate()
    mesh.surface().validate()
    on_boundary = boundary_vertex_mask(mesh)
    assert not np.any(np.all(on_boundary[mesh.tets], axis=1))
    assert np.all(np.linalg.norm(mesh.gradients(), axis=1) > 0)
    return on_boundary


@pytest.mark.parametrize("resolution, level", [(0.04, 2), (0.02, 3), (0.01, 4), (0.005, 5)])
def test_sphere_refinement_matches_drake_counts(resolution, level):
    """Drake's sparse sphere meshes for R = 0.1 m have 8*4^L tets, L = 2, 3, 4, 5 for these
    resolution hints (shared/reference: 128, 512, 2048, 8192 tets)."""
    mesh = prim.compliant_sphere(0.1, E, resolution)
    assert prim.unit_sphere_level(0.1, resolution) == level
    assert mesh.tet_count == 8 * 4**level
    on_boundary = check_compliant(mesh)
    r = np.linalg.norm(mesh.vertices, axis=1)
    np.testing.assert_allclose(r[on_boundary], 0.1, rtol=1e-12)
    np.testing.assert_allclose(mesh.pressure, E * (1 - r / 0.1), atol=1e-9 * E)


def test_sphere_mesh_equals_drake_mesh(reference):
    """Our sphere mesh is Drake's: the same vertex set and pressures (shared/reference)."""
    import json

    from conftest import REFERENCE

    drake = json.loads((REFERENCE / "meshes" / "a_sphere_rigid_halfspace_d5mm__sphere.json").read_text())
    ours = prim.compliant_sphere(0.1, E, 0.02)
    dv = np.array(drake["vertices"])
    assert len(dv) == len(ours.vertices) and len(drake["tets"]) == ours.tet_count
    order_d = np.lexsort(np.round(dv, 12).T)
    order_o = np.lexsort(np.round(ours.vertices, 12).T)
    np.testing.assert_allclose(ours.vertices[order_o], dv[order_d], atol=1e-12)
    np.testing.assert_allclose(ours.pressure[order_o], np.array(drake["pressure_at_vertices"])[order_d], atol=1e-6)


@pytest.mark.parametrize("size", [(0.2, 0.15, 0.08), (0.1, 0.1, 0.1), (0.3, 0.1, 0.1), (1.0, 0.02, 0.5)])
def test_box_field_is_exact_distance(size):
    """The medial-axis box mesh makes the distance field exactly linear per tet: the
    interpolated field equals E * distance / min half-size at random interior points."""
    mesh = prim.compliant_box(size, E)
    check_compliant(mesh)
    assert mesh.volume() == pytest.approx(np.prod(size), rel=1e-12)
    normals, offsets = prim.box_planes(size)
    rng = np.random.default_rng(0)
    tet = rng.integers(0, mesh.tet_count, 500)
    bary = rng.dirichlet(np.ones(4), 500)
    points = np.einsum("ij,ijk->ik", bary, mesh.vertices[mesh.tets[tet]])
    interpolated = np.einsum("ij,ij->i", bary, mesh.pressure[mesh.tets[tet]])
    exact = E * polytope_distance(normals, offsets, points) / (0.5 * min(size))
    np.testing.assert_allclose(interpolated, exact, atol=1e-9 * E)


def test_cylinder_prism_field_is_exact_distance():
    mesh = prim.compliant_cylinder(0.05, 0.2, E, 0.02)
    check_compliant(mesh)
    n = prim.circle_segments(0.05, 0.02)
    normals, offsets = prim.prism_planes(0.05, 0.2, n)
    centroids = mesh.vertices[mesh.tets].mean(axis=1)
    depth = polytope_distance(normals, offsets, centroids)
    np.testing.assert_allclose(mesh.pressure[mesh.tets].mean(axis=1), E * depth / (0.05 * math.cos(math.pi / n)), atol=1e-9 * E)
    assert mesh.pressure.max() == pytest.approx(E)


def test_capsule_and_ellipsoid_fields():
    cap = prim.compliant_capsule(0.05, 0.2, E, 0.02)
    on_boundary = check_compliant(cap)
    z = np.clip(cap.vertices[:, 2], -0.1, 0.1)
    r = np.linalg.norm(cap.vertices - np.column_stack([0 * z, 0 * z, z]), axis=1)
    np.testing.assert_allclose(r[on_boundary], 0.05, rtol=1e-12)
    np.testing.assert_allclose(cap.pressure, E * (1 - r / 0.05), atol=1e-9 * E)
    ell = prim.compliant_ellipsoid([0.1, 0.05, 0.03], E, 0.01)
    on_boundary = check_compliant(ell)
    q = np.linalg.norm(ell.vertices / [0.1, 0.05, 0.03], axis=1)
    np.testing.assert_allclose(q[on_boundary], 1.0, rtol=1e-12)
    assert ell.pressure.max() == E


@pytest.mark.parametrize("make", [
    lambda d: prim.compliant_sphere(0.1, E, 0.02, d),
    lambda d: prim.compliant_box((0.2, 0.15, 0.08), E, d),
    lambda d: prim.compliant_capsule(0.05, 0.2, E, 0.02, d),
    lambda d: prim.compliant_cylinder(0.05, 0.2, E, 0.02, d),
    lambda d: prim.compliant_ellipsoid((0.1, 0.05, 0.03), E, 0.01, d),
])
def test_margin_inflates_and_keeps_zero_on_the_original_surface(make):
    """Margin delta: boundary vertices move out by about delta and get p < 0 (the skirt); the
    interpolated field vanishes on the original surface (checked on the original mesh's
    boundary vertices, which lie inside the inflated mesh)."""
    delta = 1e-3
    plain, inflated = make(0.0), make(delta)
    on_b = check_compliant(inflated)
    assert np.all(inflated.pressure[on_b] < 0)
    assert inflated.pressure.max() == pytest.approx(E)
    # The inflated mesh's boundary sits ~delta beyond the original boundary.
    d = distance_to_surface(inflated.vertices[on_b][:50], plain.surface().vertices, plain.surface().triangles)
    assert np.all(d > 0.3 * delta) and np.all(d < 3 * delta)


def test_rigid_surfaces_closed_and_volumes_converge():
    for surface, exact in [
        (prim.rigid_box((1, 2, 3)), 6.0),
        (prim.rigid_sphere(0.1, 0.005), 4 / 3 * math.pi * 1e-3),
        (prim.rigid_cylinder(0.05, 0.2, 0.005), math.pi * 0.05**2 * 0.2),
        (prim.rigid_capsule(0.05, 0.2, 0.005), math.pi * 0.05**2 * 0.2 + 4 / 3 * math.pi * 0.05**3),
    ]:
        surface.validate()
        # An inscribed polygonal surface loses volume like the chord sag: (edge/R)^2 ~ 1e-2.
        assert surface.volume() == pytest.approx(exact, rel=1.5e-2)


def test_mass_properties_of_meshes_match_closed_form():
    box = surface_props(prim.rigid_box((0.2, 0.15, 0.08)))
    np.testing.assert_allclose(box.inertia_unit, box_props((0.2, 0.15, 0.08)).inertia_unit, rtol=1e-12, atol=1e-18)
    cyl = surface_props(prim.rigid_cylinder(0.05, 0.2, 0.001))
    np.testing.assert_allclose(np.diag(cyl.inertia_unit), np.diag(cylinder_props(0.05, 0.2).inertia_unit), rtol=2e-3)
    cap = surface_props(prim.rigid_capsule(0.05, 0.2, 0.001))
    np.testing.assert_allclose(np.diag(cap.inertia_unit), np.diag(capsule_props(0.05, 0.2).inertia_unit), rtol=2e-3)


def test_convex_mesh_fan_field():
    hull = prim.rigid_cylinder(0.05, 0.1, 0.02)
    mesh = compliant_convex(hull, E)
    check_compliant(mesh)
    assert mesh.pressure[0] == E and np.all(mesh.pressure[1:] == 0)
    assert mesh.volume() == pytest.approx(hull.volume(), rel=1e-12)
    inflated = compliant_convex(hull, E, 1e-3)
    assert np.all(inflated.pressure[1:] < 0)


def test_distance_field_splits_all_boundary_tets():
    """A lone tet has four boundary vertices: the distance field splits it at its centroid."""
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]])
    mesh = distance_field_tetmesh(v, np.array([[0, 1, 2, 3]]), E)
    check_compliant(mesh)
    assert mesh.tet_count == 4 and mesh.pressure.max() == E


def test_distance_to_surface_against_brute_force():
    s = prim.rigid_box((2.0, 2.0, 2.0))
    pts = np.array([[0, 0, 0], [0.5, 0.2, -0.1], [3, 0, 0], [2, 2, 2.0]])
    np.testing.assert_allclose(distance_to_surface(pts, s.vertices, s.triangles), [1.0, 0.5, 2.0, math.sqrt(3)], rtol=1e-12)


def test_tet_validation_names_the_problem():
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]])
    with pytest.raises(MeshError, match="inverted tet"):
        TetMesh(v, np.array([[0, 2, 1, 3]]), np.zeros(4)).validate()
    with pytest.raises(MeshError, match="degenerate tet"):
        TetMesh(np.vstack([v[:3], [[0.5, 0.5, 0]]]), np.array([[0, 1, 2, 3]]), np.zeros(4)).validate()
    with pytest.raises(MeshError, match="not finite"):
        TetMesh(v, np.array([[0, 1, 2, 3]]), np.array([0, 0, np.nan, 0])).validate()


def test_surface_validation_names_the_problem():
    box = prim.rigid_box((1, 1, 1))
    with pytest.raises(MeshError, match="open mesh"):
        TriMesh(box.vertices, box.triangles[:-1]).validate()
    with pytest.raises(MeshError, match="counter-clockwise"):
        TriMesh(box.vertices, box.triangles[:, ::-1]).validate()
    doubled = np.vstack([box.triangles, box.triangles[:2]])
    with pytest.raises(MeshError, match="non-manifold"):
        TriMesh(box.vertices, doubled).validate()


def test_device_bytes_counts_each_array_once(arch):
    import taichi as ti

    from taichi_hydro.memory import device_bytes, ndarray_bytes

    vec = ti.ndarray(ti.math.vec3, (10, 2))
    mat = ti.ndarray(ti.types.matrix(4, 3, ti.f32), 5)
    ints = ti.ndarray(ti.i32, 7)
    assert (ndarray_bytes(vec), ndarray_bytes(mat), ndarray_bytes(ints)) == (10 * 2 * 3 * 4, 5 * 12 * 4, 7 * 4)
    holder = {"a": vec, "again": vec, "nested": [mat, (ints,)]}
    assert device_bytes(holder) == 240 + 240 + 28


def test_body_reach_bounds_every_point_of_the_body():
    """body_reach (the solver's stopping test: |dv| + reach |dw| per body) is at least the
    distance from the centre of mass to every vertex, and at most the bounding ball's diameter;
    0 for a half-space."""
    from conftest import ground, scene

    from taichi_hydro.model import build_model

    box = {"name": "box", "mass": 1.0, "shape": {"type": "box", "size": [0.2, 0.1, 0.4]}}
    data = build_model(scene([ground(), box]))
    reach = data.body_reach
    assert reach[0] == 0.0
    half_diagonal = 0.5 * math.sqrt(0.2**2 + 0.1**2 + 0.4**2)
    assert half_diagonal - 1e-12 <= reach[1] <= 2 * half_diagonal
    vertices = np.concatenate([data.tet_X_G.reshape(-1, 3), data.tri_X_G.reshape(-1, 3)])  # the box's, rigid or compliant
    assert len(vertices) > 0
    assert np.linalg.norm(vertices - data.body_com_B[1], axis=1).max() <= reach[1] + 1e-12
