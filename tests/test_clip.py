"""Tier 1: the pure clipping functions the narrow phase uses, run in a one-thread kernel on the
device, against polygons written down by hand."""

import numpy as np
import pytest
import taichi as ti

from taichi_hydro.collision import clip

vec3 = ti.math.vec3
nd = ti.types.ndarray

# Tet A: its slice by z = 0 is the square [-1/2, 1/2]^2 (midpoints of the 4 crossing edges).
TET_A = np.array([[1, 0, -1], [-1, 0, -1], [0, 1, 1], [0, -1, 1]], dtype=np.float64)
# Tet B: A turned 45 degrees about z and widened: its z = 0 slice is the diamond |x|+|y| <= 3/4.
_k = 0.75 * np.sqrt(2.0)
_c, _s = np.cos(np.pi / 4), np.sin(np.pi / 4)
TET_B = np.array([[_c * x * _k - _s * y * _k, _s * x * _k + _c * y * _k, z] for x, y, z in TET_A])
# Fields: pA = 1 - z (decreasing into B), pB = 1 + z: the equal-pressure plane is z = 0.
OCTAGON = np.array([[0.5, -0.25], [0.5, 0.25], [0.25, 0.5], [-0.25, 0.5], [-0.5, 0.25], [-0.5, -0.25], [-0.25, -0.5], [0.25, -0.5]])

# Tet C: its slice by z = 0 is the square [-1, 1]^2; triangle T in z = 0 cuts three of its
# corners, leaving a heptagon.
TET_C = np.array([[2, 0, -1], [-2, 0, -1], [0, 2, 1], [0, -2, 1]], dtype=np.float64)
TRIANGLE = np.array([[0, 1.5, 0], [5 / 3, -1 / 6, 0], [-5, -3.5, 0]])
HEPTAGON = np.array([[-1, -1], [0, -1], [1, -0.5], [1, 0.5], [0.5, 1], [-0.5, 1], [-1, 0.5]])


@ti.kernel
def _tet_tet(a: nd(dtype=vec3, ndim=1), b: nd(dtype=vec3, ndim=1), fields: nd(dtype=ti.math.vec4, ndim=1),
             out: nd(dtype=vec3, ndim=1), info: nd(dtype=float, ndim=1)):
    for _ in range(1):
        ga = vec3(fields[0][0], fields[0][1], fields[0][2])
        gb = vec3(fields[1][0], fields[1][1], fields[1][2])
        # As the narrow phase composes them: a's slice by the plane where the fields meet,
        # clipped by b's four faces.
        n, d, use = clip.meeting_plane(ga, fields[0][3], gb, fields[1][3])
        use = use * clip.crosses(b[0], b[1], b[2], b[3], n, d)
        poly = clip.Poly(0.0)
        count = 0
        if use == 1:
            poly, count = clip.slice_tet(a[0], a[1], a[2], a[3], n, d)
        if count >= 3:
            poly, count = clip.clip_by_planes(poly, count, clip.tet_face_planes(b[0], b[1], b[2], b[3]), 4)
        for i in range(count):
            out[i] = clip.row(poly, i)
        area = 0.0
        if count >= 3:
            area, _c = clip.polygon_area_centroid(poly, count, n)
        info[0] = count
        info[1] = area
        info[2], info[3], info[4] = n[0], n[1], n[2]


@ti.kernel
def _tri_tet(t: nd(dtype=vec3, ndim=1), a: nd(dtype=vec3, ndim=1), out: nd(dtype=vec3, ndim=1), info: nd(dtype=float, ndim=1)):
    for _ in range(1):
        poly = clip.Poly(0.0)
        for v in ti.static(range(3)):
            clip.set_row(poly, v, t[v])
        poly, count = clip.clip_by_planes(poly, 3, clip.tet_face_planes(a[0], a[1], a[2], a[3]), 4)
        poly, count = clip.remove_duplicates(poly, count, 1e-12)
        for i in range(count):
            out[i] = clip.row(poly, i)
        area = 0.0
        if count >= 3:
            area, _c = clip.polygon_area_centroid(poly, count, vec3(0.0, 0.0, 1.0))
        info[0] = count
        info[1] = area


def _nd(array):
    a = ti.ndarray(vec3, len(array))
    a.from_numpy(np.asarray(array, dtype=np.float32))
    return a


def run_tet_tet(a, b, grad_a=(0, 0, -1), p_a=None, grad_b=(0, 0, 1), p_b=None):
    """p_a, p_b: field values at the origin (default: pA = 1 - z, pB = 1 + z)."""
    fields = ti.ndarray(ti.math.vec4, 2)
    fields.from_numpy(np.array([[*grad_a, 1.0 if p_a is None else p_a], [*grad_b, 1.0 if p_b is None else p_b]], dtype=np.float32))
    out = ti.ndarray(vec3, 8)
    info = ti.ndarray(float, 5)
    _tet_tet(_nd(a), _nd(b), fields, out, info)
    i = info.to_numpy()
    return out.to_numpy()[: int(i[0])], i[1], i[2:5]


def run_tri_tet(t, a):
    out = ti.ndarray(vec3, 8)
    info = ti.ndarray(float, 2)
    _tri_tet(_nd(t), _nd(a), out, info)
    i = info.to_numpy()
    return out.to_numpy()[: int(i[0])], i[1]


def same_cycle(got, expected, atol):
    """Polygons equal up to the starting vertex (orientation fixed)."""
    assert len(got) == len(expected), f"{len(got)} vertices, expected {len(expected)}"
    start = int(np.argmin(np.linalg.norm(got - expected[0], axis=1)))
    np.testing.assert_allclose(np.roll(got, -start, axis=0), expected, atol=atol)


def test_tet_tet_octagon(arch):
    poly, area, n = run_tet_tet(TET_A, TET_B)
    np.testing.assert_allclose(n, [0, 0, 1], atol=1e-7)
    assert np.all(np.abs(poly[:, 2]) < 1e-7)
    same_cycle(poly[:, :2], OCTAGON, atol=1e-6)
    assert area == pytest.approx(0.875, rel=1e-6)


def test_tet_tet_swapped_roles_reverse_the_normal(arch):
    poly, area, n = run_tet_tet(TET_B, TET_A, grad_a=(0, 0, 1), grad_b=(0, 0, -1))
    np.testing.assert_allclose(n, [0, 0, -1], atol=1e-7)
    assert len(poly) == 8 and area == pytest.approx(0.875, rel=1e-6)


def test_tet_tet_empty_and_touching(arch):
    # Far apart: the plane z = 0 slices A, but B is 10 m away.
    poly, area, _ = run_tet_tet(TET_A, TET_B + [10, 0, 0])
    assert len(poly) == 0
    # The equal-pressure plane through A's top edge only (z = 1): a degenerate slice.
    poly, area, _ = run_tet_tet(TET_A, TET_B, p_a=2.0, p_b=0.0)  # pA = 2 - z, pB = z: plane z = 1
    assert len(poly) < 3 or area == pytest.approx(0.0, abs=1e-7)
    # Equal gradients: no plane.
    poly, _, _ = run_tet_tet(TET_A, TET_B, grad_a=(0, 0, 1), grad_b=(0, 0, 1))
    assert len(poly) == 0
    # Parallel gradients of different size: the normal is +z but grad pA points along it
    # (angle pi > 5 pi / 8 from -n): Drake's filter rejects the polygon.
    poly, _, _ = run_tet_tet(TET_A, TET_B, grad_a=(0, 0, 1), grad_b=(0, 0, 2))
    assert len(poly) == 0


def test_triangle_tet_heptagon(arch):
    poly, area = run_tri_tet(TRIANGLE, TET_C)
    assert np.all(np.abs(poly[:, 2]) < 1e-6)
    expected = HEPTAGON if area > 0 else HEPTAGON[::-1]
    same_cycle(poly[:, :2], expected, atol=1e-6)
    assert abs(area) == pytest.approx(3.5, rel=1e-6)


def test_triangle_tet_empty_and_touching(arch):
    poly, _ = run_tri_tet(TRIANGLE + [0, 0, 2.0], TET_C)
    assert len(poly) == 0
    # A triangle touching the tet only at the apex (0, 2, 1): nothing of positive area.
    touch = np.array([[0, 2, 1], [3, 3, 1], [-3, 3, 1]], dtype=np.float64)
    poly, area = run_tri_tet(touch, TET_C)
    assert len(poly) < 3 or area == pytest.approx(0.0, abs=1e-7)
