"""Tier 2: contact surfaces against closed-form answers."""

import math

import numpy as np
import pytest
from scipy.spatial import ConvexHull

import taichi_hydro as th
from taichi_hydro.geometry.primitives import rigid_box, rigid_sphere, unit_sphere_level

from conftest import ball, ground, scene, sphere_plane_force

R, E = 0.1, 1e5


def sphere_force(depth, resolution, **contact):
    sim = th.Simulator(scene([ground(), ball(z=R - depth, resolution=resolution, contact=contact)]))
    (surface,) = sim.contact_surfaces()
    return surface


def test_sphere_on_plane_converges_at_second_order(arch):
    """Compliant sphere pressed d = 5 mm into a rigid plane vs F = 2 pi E [a^2/2 - (R^3-h^3)/(3R)].

    Error model: the mesh is inscribed in the sphere and the field is linear from the centre to
    each flat boundary triangle, so the field acts as if the surface sagged inward by the
    triangle's sag at its centroid, s = R theta^2 / 2 with theta = alpha / sqrt(3) the angle
    from a vertex to the centroid of a triangle whose edges subtend alpha = pi / 2^(L+1). As
    F ~ pi E d^2 for d << R, the relative error is 2 s / d = R alpha^2 / (3 d): second order
    in the mesh size. We check the error is below that bound (+10% for higher-order terms) and
    that the observed order is 2."""
    depth = 0.005
    exact = sphere_plane_force(R, E, depth)
    errors, alphas = [], []
    for h in (0.01, 0.005, 0.0025):
        level = unit_sphere_level(R, h)
        alpha = math.pi / 2 ** (level + 1)
        s = sphere_force(depth, h)
        err = (exact - s.force[2]) / exact
        assert 0 < err <= 1.1 * R * alpha**2 / (3 * depth), (h, err)
        errors.append(err)
        alphas.append(alpha)
    orders = np.diff(np.log(errors)) / np.diff(np.log(alphas))
    print(f"sphere-plane force errors {errors}, observed orders {orders}")
    assert np.all(np.abs(orders - 2.0) < 0.1)


@pytest.mark.parametrize("depth", [0.0005, 0.001, 0.01, 0.03])
@pytest.mark.parametrize("floor", ["halfspace", "table"])
def test_flat_box_matches_exact_integral_of_medial_field(arch, tol, depth, floor):
    """Compliant box a x b x c (H = c/2) whose bottom face is `depth` into a rigid floor: the
    field E * distance / H is exact on the medial-axis mesh, so the force equals
    (E/H)[d(a-2d)(b-2d) + (a+b)d^2 - 8d^3/3] to float32 round-off and the area is a*b."""
    a, b, c = 0.2, 0.15, 0.08
    H = c / 2
    box = {"name": "box", "mass": 0.2, "position": [0.01, -0.02, H - depth], "shape": {"type": "box", "size": [a, b, c]}, "contact": {"modulus": E}}
    if floor == "halfspace":
        floor_body = ground()
    else:
        floor_body = {"name": "table", "type": "static", "position": [0, 0, -0.05], "shape": {"type": "box", "size": [0.5, 0.5, 0.1]}}
    sim = th.Simulator(scene([floor_body, box]))
    (s,) = sim.contact_surfaces()
    d = depth
    exact = E / H * (d * (a - 2 * d) * (b - 2 * d) + (a + b) * d * d - 8 * d**3 / 3)
    assert s.force[2] == pytest.approx(exact, rel=tol.rel)
    assert np.abs(s.force[:2]).max() <= tol.rel * exact
    assert s.area == pytest.approx(a * b, rel=tol.rel)
    np.testing.assert_allclose(s.centroid[:2], [0.01, -0.02], atol=tol.pos)


def submerged_volume(vertices):
    """Volume of the part z <= 0 of the convex hull of `vertices` (float64)."""
    hull = ConvexHull(vertices)
    pts = [v for v in vertices if v[2] <= 0]
    for i, j in {tuple(sorted(e)) for s in hull.simplices for e in ((s[0], s[1]), (s[1], s[2]), (s[0], s[2]))}:
        zi, zj = vertices[i][2], vertices[j][2]
        if (zi < 0) != (zj < 0):
            t = zi / (zi - zj)
            pts.append(vertices[i] + t * (vertices[j] - vertices[i]))
    return ConvexHull(np.array(pts)).volume


def rotation(axis, angle):
    axis = np.asarray(axis, dtype=np.float64) / np.linalg.norm(axis)
    q = np.concatenate([[math.cos(angle / 2)], math.sin(angle / 2) * axis])
    w, x, y, z = q
    Rm = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                   [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                   [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    return q, Rm


@pytest.mark.parametrize("shape, angle", [("box", 0.0), ("box", 0.52), ("box", 1.1), ("sphere", 0.3)])
def test_rigid_body_in_compliant_slab_is_buoyancy(arch, tol, shape, angle):
    """A rigid body pushed into a compliant half-space (p = E depth / H) feels
    F = (E/H) V_submerged straight up (divergence theorem), exactly for its mesh."""
    E_slab, H = 1e6, 0.5
    q, Rm = rotation([0.3, 1.0, 0.2], angle)
    p = np.array([0.02, -0.01, 0.015])
    if shape == "box":
        spec = {"type": "box", "size": [0.1, 0.08, 0.06]}
        mesh = rigid_box((0.1, 0.08, 0.06))
    else:
        spec = {"type": "sphere", "radius": 0.04}
        mesh = rigid_sphere(0.04, 0.01)
    body = {"name": "crate", "type": "kinematic", "position": p.tolist(), "orientation": q.tolist(), "shape": spec,
            "contact": {"resolution": 0.01} if shape == "sphere" else {}}
    pool = ground("pool", hydro="compliant", modulus=E_slab, slab_thickness=H)
    (s,) = th.Simulator(scene([pool, body])).contact_surfaces()
    volume = submerged_volume(mesh.vertices @ Rm.T + p)
    expected = E_slab / H * volume
    assert s.force[2] == pytest.approx(expected, rel=tol.rel)
    assert np.abs(s.force[:2]).max() <= 10 * tol.rel * expected


def test_two_equal_spheres_equal_one_sphere_at_half_overlap(arch, tol):
    """Two identical compliant spheres overlapping by 2 delta meet on the bisecting plane, where
    each field equals one sphere's field cut at depth delta: same force as one sphere pressed
    delta into a rigid plane (the mesh is symmetric under z -> -z)."""
    delta = 0.004
    pair = scene([ball("lower", z=-(R - delta)), ball("upper", z=R - delta)])
    (s2,) = th.Simulator(pair).contact_surfaces()
    s1 = sphere_force(delta, 0.02)
    assert s2.force[2] == pytest.approx(s1.force[2], rel=tol.rel)
    assert s2.area == pytest.approx(s1.area, rel=tol.rel)
    assert s2.max_pressure == pytest.approx(s1.max_pressure, rel=tol.rel)
    np.testing.assert_allclose(s2.polygons["normal"], np.tile([0, 0, 1.0], (s2.faces, 1)), atol=1e-6)


def test_swapping_bodies_flips_the_force(arch, tol):
    a = th.Simulator(scene([ground(), ball()])).contact_surfaces()[0]
    b = th.Simulator(scene([ball(), ground()])).contact_surfaces()[0]
    assert (a.body_a, a.body_b) == ("ground", "ball") and (b.body_a, b.body_b) == ("ball", "ground")
    np.testing.assert_allclose(b.force, -a.force, rtol=tol.rel, atol=tol.rel * abs(a.force[2]))
    assert b.area == pytest.approx(a.area, rel=tol.rel)
    np.testing.assert_allclose(b.polygons["normal"].sum(axis=0), -a.polygons["normal"].sum(axis=0), atol=1e-5)


def test_no_contact_and_touching(arch):
    """Above the plane: no surface. Resting exactly on it: nothing with positive pressure."""
    assert th.Simulator(scene([ground(), ball(z=R + 0.01)])).contact_surfaces() == []
    surfaces = th.Simulator(scene([ground(), ball(z=R)])).contact_surfaces()
    assert all(abs(s.force[2]) <= 1e-6 for s in surfaces)


def test_margin_adds_speculative_polygons_only(arch, tol):
    """With margin, polygons appear in the skirt before contact (p < 0) and are excluded from
    the summaries; once in contact, the force is that of the uninflated field."""
    gap = 0.0005
    s = th.Simulator(scene([ground(), ball(z=R + gap, contact={"margin": 1e-3})])).contact_surfaces()
    assert len(s) == 1 and s[0].faces == 0 and np.all(s[0].polygons["pressure"] < 0)
    assert s[0].force[2] == 0.0
    plain = sphere_force(0.005, 0.02)
    # The inflated sphere's field is the same linear-in-r field, meshed 1 mm further out:
    # equal to the plain one up to the (different) chord sag, O(R alpha^2 / d).
    inflated = sphere_force(0.005, 0.02, margin=1e-4)
    assert inflated.force[2] == pytest.approx(plain.force[2], rel=0.02)
