"""Pure clipping geometry (ti.func only): polygons are up to POLY_MAX vertices stored as rows of
a POLY_MAX x 3 matrix plus a count. Callers pass positions relative to a local origin near the
elements so float32 keeps its digits.

Conventions (Drake's, see DESIGN §1): a point is inside a half-space {x : n.x <= d} when
n.x - d <= 0 (closed); polygons are convex; the equal-pressure plane of two linear fields has
normal along grad pB - grad pA (out of A into B)."""

import taichi as ti

from ..types import POLY_MAX, RealMatrix, poly_vertices, vec3

Poly = poly_vertices
Planes = RealMatrix(4, 4)
"""Up to four half-spaces n.x <= d, one row (n_x, n_y, n_z, d) each."""

# Vertices closer than this fraction of the element size are merged (Drake uses 1e-14 m in
# float64; relative, since positions are float32 here).
MERGE_REL = 1e-6
# Drake keeps a polygon only if the angle between the face normal and the pressure gradient is
# below 5*pi/8 (its IsFaceNormalAlongPressureGradient); cos(5*pi/8):
COS_GRADIENT_LIMIT = -0.38268343236508984
# The broad phase's test that a tet pair has no polygon (clearly_no_polygon) holds only by more
# than this fraction of the distances from the local origin: the narrow phase, another
# kernel, may round the same slice differently (an intersection point t = s_i / (s_i - s_j)
# moves by about EPS32 / SLICE_MARGIN of its edge when |s| >= SLICE_MARGIN |x|).
SLICE_MARGIN = 1e-3


@ti.func
def row(poly: ti.template(), i: ti.i32) -> vec3:
    return vec3(poly[i, 0], poly[i, 1], poly[i, 2])


@ti.func
def set_row(poly: ti.template(), i: ti.i32, v: vec3):
    for k in ti.static(range(3)):
        poly[i, k] = v[k]


@ti.func
def clip_by_halfspace(poly: Poly, count: ti.i32, n: vec3, d: float):
    """Sutherland-Hodgman: keep the part of a convex polygon with n.x <= d. Returns the new
    polygon and count (count + 1 at most, capped at POLY_MAX)."""
    out = Poly(0.0)
    m = 0
    for i in range(count):
        a = row(poly, i)
        b = row(poly, (i + 1) % count)
        da = n.dot(a) - d
        db = n.dot(b) - d
        if da <= 0.0 and m < POLY_MAX:
            set_row(out, m, a)
            m += 1
        if (da <= 0.0) != (db <= 0.0) and m < POLY_MAX:
            t = da / (da - db)
            set_row(out, m, a + t * (b - a))
            m += 1
    return out, m


@ti.func
def remove_duplicates(poly: Poly, count: ti.i32, tol2: float):
    """Merge consecutive vertices (cyclically) closer than sqrt(tol2)."""
    out = Poly(0.0)
    m = 0
    for i in range(count):
        p = row(poly, i)
        # Taichi's `or` does not short-circuit: guard the look-back explicitly (row -1 would be
        # read out of bounds, which crashes lavapipe).
        keep = True
        if m > 0:
            keep = (p - row(out, m - 1)).norm_sqr() > tol2
        if keep:
            set_row(out, m, p)
            m += 1
    while m > 1:
        if (row(out, m - 1) - row(out, 0)).norm_sqr() > tol2:
            break
        m -= 1
    return out, m


@ti.func
def crosses(x0: vec3, x1: vec3, x2: vec3, x3: vec3, n: vec3, d: float) -> ti.i32:
    """1 when the plane n.x = d has tet vertices strictly on both sides of it (or on it)."""
    s0, s1, s2, s3 = n.dot(x0) - d, n.dot(x1) - d, n.dot(x2) - d, n.dot(x3) - d
    return 1 if ti.min(s0, s1, s2, s3) <= 0.0 and ti.max(s0, s1, s2, s3) >= 0.0 else 0


@ti.func
def slice_tet(x0: vec3, x1: vec3, x2: vec3, x3: vec3, n: vec3, d: float):
    """Polygon where the plane n.x = d cuts the tet (marching tets): a triangle or a quad in
    cyclic order, or count 0. A vertex with n.x - d <= 0 counts as below."""
    s = ti.Vector([n.dot(x0) - d, n.dot(x1) - d, n.dot(x2) - d, n.dot(x3) - d])
    x = ti.Matrix.rows([x0, x1, x2, x3])
    above = 0
    for i in ti.static(range(4)):
        if s[i] > 0.0:
            above += 1
    out = Poly(0.0)
    m = 0
    if above == 1 or above == 3:
        # The lone vertex (above or below) connects to the other three.
        lone = 0
        for i in ti.static(range(4)):
            if (s[i] > 0.0) == (above == 1):
                lone = i
        for k in ti.static(range(1, 4)):
            j = (lone + k) % 4
            t = s[lone] / (s[lone] - s[j])
            a = vec3(x[lone, 0], x[lone, 1], x[lone, 2])
            b = vec3(x[j, 0], x[j, 1], x[j, 2])
            set_row(out, m, a + t * (b - a))
            m += 1
    elif above == 2:
        # Above {a, b}, below {c, e}: crossing edges a-c, a-e, b-e, b-c form a cycle.
        ia, ib, ic, ie = -1, -1, -1, -1
        for i in ti.static(range(4)):
            if s[i] > 0.0:
                if ia < 0:
                    ia = i
                else:
                    ib = i
            else:
                if ic < 0:
                    ic = i
                else:
                    ie = i
        for k in ti.static(range(4)):
            p, q = ia, ic
            if ti.static(k == 1):
                p, q = ia, ie
            elif ti.static(k == 2):
                p, q = ib, ie
            elif ti.static(k == 3):
                p, q = ib, ic
            t = s[p] / (s[p] - s[q])
            a = vec3(x[p, 0], x[p, 1], x[p, 2])
            b = vec3(x[q, 0], x[q, 1], x[q, 2])
            set_row(out, m, a + t * (b - a))
            m += 1
    return out, m


@ti.func
def tet_face_plane(a: vec3, b: vec3, c: vec3, opposite: vec3):
    """Outward unit normal and offset (n, d) of the tet face (a, b, c), the fourth vertex being
    `opposite`: the tet lies in n.x <= d."""
    n = (b - a).cross(c - a).normalized()
    if n.dot(opposite - a) > 0.0:
        n = -n
    return n, n.dot(a)


@ti.func
def tet_face_planes(x0: vec3, x1: vec3, x2: vec3, x3: vec3) -> Planes:
    """The tet's four faces as outward half-spaces, one (n, d) row each (face k opposite vertex
    k): the tet is the set where n_k.x <= d_k for every k."""
    n0, d0 = tet_face_plane(x1, x2, x3, x0)
    n1, d1 = tet_face_plane(x0, x3, x2, x1)
    n2, d2 = tet_face_plane(x0, x1, x3, x2)
    n3, d3 = tet_face_plane(x0, x2, x1, x3)
    return Planes([[n0[0], n0[1], n0[2], d0], [n1[0], n1[1], n1[2], d1], [n2[0], n2[1], n2[2], d2], [n3[0], n3[1], n3[2], d3]])


@ti.func
def clip_by_planes(poly: Poly, count: ti.i32, planes: Planes, n_planes: ti.i32):
    """Clip a convex polygon by the half-spaces of the first n_planes rows of `planes` in turn
    (a runtime loop, so that one copy of the clipping code serves a tet's four faces and a
    single plane alike); stops early once nothing is left."""
    for k in range(n_planes):
        if count > 0:
            poly, count = clip_by_halfspace(poly, count, vec3(planes[k, 0], planes[k, 1], planes[k, 2]), planes[k, 3])
    return poly, count


@ti.func
def polygon_area_centroid(poly: Poly, count: ti.i32, n: vec3):
    """Signed area about unit normal n (positive when counter-clockwise about n) [m^2] and the
    area centroid, by a fan from vertex 0. Returns (0, vertex 0) for a degenerate polygon."""
    p0 = row(poly, 0)
    area2 = 0.0
    weighted = vec3(0.0)
    for i in range(1, count - 1):
        a = row(poly, i) - p0
        b = row(poly, i + 1) - p0
        w = a.cross(b).dot(n)
        area2 += w
        weighted += w * (a + b) / 3.0
    centroid = p0
    if area2 != 0.0:
        centroid = p0 + weighted / area2
    return 0.5 * area2, centroid


@ti.func
def reverse(poly: Poly, count: ti.i32) -> Poly:
    out = Poly(0.0)
    for i in range(count):
        set_row(out, i, row(poly, count - 1 - i))
    return out


@ti.func
def equal_pressure_plane(grad_a: vec3, p_a: float, grad_b: vec3, p_b: float):
    """Plane where two linear fields agree, pA(x) = p_a + grad_a.x and pB(x) = p_b + grad_b.x
    (both written about the same local origin): returns (unit normal along grad_b - grad_a,
    offset d with n.x = d, ok). Not ok when the gradients agree to 1e-6 relative."""
    m = grad_b - grad_a
    norm = m.norm()
    scale = ti.max(grad_a.norm(), grad_b.norm())
    ok = norm > 1e-6 * scale
    n = vec3(0.0, 0.0, 1.0)
    d = 0.0
    if ok:
        n = m / norm
        d = (p_a - p_b) / norm
    return n, d, ok


@ti.func
def gradient_along(grad: vec3, direction: vec3) -> ti.i32:
    """Drake's filter: 1 when the angle between grad and direction is below 5*pi/8."""
    g = grad.norm()
    return 1 if grad.dot(direction) > COS_GRADIENT_LIMIT * g else 0


@ti.func
def meeting_plane(grad_a: vec3, p_a: float, grad_b: vec3, p_b: float):
    """Where compliant a and b (linear fields p_a + grad_a.x and p_b + grad_b.x, about the same
    local origin) meet: (unit normal out of a into b, offset d with n.x = d, use). use = 0 when
    the gradients agree or either fails Drake's 5*pi/8 angle test. The polygon is a's slice by
    this plane, clipped by b (a tet's faces, or the half-space of a slab)."""
    n, d, ok = equal_pressure_plane(grad_a, p_a, grad_b, p_b)
    use = 0
    if ok and gradient_along(grad_b, n) == 1 and gradient_along(grad_a, -n) == 1:
        use = 1
    return n, d, use


@ti.func
def reach(x0: vec3, x1: vec3, x2: vec3, x3: vec3) -> float:
    """The largest distance of the four points from the local origin [m] (one square root)."""
    return ti.sqrt(ti.max(x0.norm_sqr(), x1.norm_sqr(), x2.norm_sqr(), x3.norm_sqr()))


@ti.func
def clearly_apart(x0: vec3, x1: vec3, x2: vec3, x3: vec3, n: vec3, d: float, r: float, gap: float) -> ti.i32:
    """1 when every tet vertex lies on one side of the plane n.x = d by more than gap [m] plus
    1e-4 of the vertices' and the plane's distances from the local origin (r: the vertices'
    reach): a conservative form of `1 - crosses`, which another kernel (other rounding) may
    apply to the same plane, and, with gap > 0, to every plane within gap of it."""
    s0, s1, s2, s3 = n.dot(x0) - d, n.dot(x1) - d, n.dot(x2) - d, n.dot(x3) - d
    eps = gap + 1e-4 * (r + ti.abs(d))
    return 1 if ti.min(s0, s1, s2, s3) > eps or ti.max(s0, s1, s2, s3) < -eps else 0


@ti.func
def polygon_clearly_outside(poly: Poly, count: ti.i32, planes: Planes, r: float) -> ti.i32:
    """1 when every vertex of the polygon (all within distance r of the local origin) lies
    outside one of the four half-spaces n.x <= d of `planes` (unit normals) by more than
    SLICE_MARGIN of r and the plane's distance from the local origin: a conservative form of
    "clip_by_planes leaves nothing", which holds in any clipping order (the part of the
    polygon that earlier planes keep lies in its hull, still outside that half-space)."""
    out = 0
    for k in ti.static(range(4)):
        n, d = vec3(planes[k, 0], planes[k, 1], planes[k, 2]), planes[k, 3]
        if lowest_height(poly, count, n, d, ti.math.inf) > SLICE_MARGIN * (r + ti.abs(d)):
            out = 1
    return out


@ti.func
def lowest_height(poly: Poly, count: ti.i32, n: vec3, d: float, least: float) -> float:
    """The least of `least` and n.x - d over the polygon's vertices x [m]."""
    for i in range(count):
        least = ti.min(least, n.dot(row(poly, i)) - d)
    return least


@ti.func
def clearly_off(x0: vec3, x1: vec3, x2: vec3, x3: vec3, n: vec3, d: float, r: float) -> ti.i32:
    """1 when no tet vertex lies within SLICE_MARGIN of the vertices' reach r and the plane's
    distance from the local origin of the plane n.x = d: the tet's slice by the plane then has
    the same vertices in any kernel, up to rounding (which vertex lies on which side decides
    them)."""
    out = 1
    for x in ti.static([x0, x1, x2, x3]):
        if ti.abs(n.dot(x) - d) <= SLICE_MARGIN * (r + ti.abs(d)):
            out = 0
    return out


@ti.func
def slab_clearly_outside(a0: vec3, a1: vec3, a2: vec3, a3: vec3, n: vec3, d: float, half: float, planes: Planes, r: float,
                         gap: float) -> ti.i32:
    """1 when the part of tet a within `half` [m] of the plane n.x = d (the slab: a's slices by
    the planes n.x = d +- half and a's vertices between them span it) lies outside one of the
    four half-spaces n_k.x <= d_k of `planes` (unit normals) by more than gap [m] plus
    SLICE_MARGIN of r (a's reach from the local origin) and the face's distance from it. The
    slab holds a's slice by every plane within `half` of n.x = d, each rounded any way: no
    such slice meets the half-space widened by gap."""
    hi, n_hi = slice_tet(a0, a1, a2, a3, n, d + half)
    lo, n_lo = slice_tet(a0, a1, a2, a3, n, d - half)
    out = 0
    for k in ti.static(range(4)):
        nk, dk = vec3(planes[k, 0], planes[k, 1], planes[k, 2]), planes[k, 3]
        least = lowest_height(lo, n_lo, nk, dk, lowest_height(hi, n_hi, nk, dk, ti.math.inf))
        for x in ti.static([a0, a1, a2, a3]):
            if ti.abs(n.dot(x) - d) <= half:
                least = ti.min(least, nk.dot(x) - dk)
        if least > gap + SLICE_MARGIN * (r + ti.abs(dk)):
            out = 1
    return out


@ti.func
def clearly_no_polygon(a0: vec3, a1: vec3, a2: vec3, a3: vec3, grad_a: vec3, p_a: float, b0: vec3, b1: vec3, b2: vec3,
                       b3: vec3, grad_b: vec3, p_b: float, skin: float) -> ti.i32:
    """1 when tets a and b (vertices and linear fields p + grad.x about one local origin, as the
    narrow phase computes them) clearly have no contact polygon: their equal-pressure plane
    misses one of them (clearly_apart), or a's slice by it lies outside a face of b
    (polygon_clearly_outside: what most box-overlapping pairs of two spheres' meshes come to
    in the narrow phase), the slice taken only where no vertex of a is near the plane
    (clearly_off: a box's tet whose face lies in the plane has a sliver slice whose vertices
    depend on the rounding); 0 when the polygon may exist, or the gradients agree (no plane:
    the narrow phase decides). The broad phase drops such pairs before they are listed. The
    margins scale with the tets' reaches from the local origin (the slice lies in a, within
    a's), each one square root.

    With a skin s > 0 [m] (collision.skin) the answer holds for every later pose in which no
    point of b has moved by more than s relative to a, so that a kept list stays complete.
    Such a move changes b's field at a point of a by at most |grad_b| s and a's field at a
    point of b by at most |grad_a| s, and keeps b within s of where it was. With f = pA - pB
    = |grad_b - grad_a| (d - n.x), the polygon then lies in the slab of a where
    |n.x - d| <= h_a = |grad_b| s / |grad_b - grad_a|, within s of b: the pair has none when
    a lies off the plane by more than h_a, b by more than h_b = |grad_a| s / |grad_b -
    grad_a|, or the slab (widened by the slice margin, so that it holds every rounded
    slice: slab_clearly_outside) lies outside a face of b by more than s."""
    n, d, ok = equal_pressure_plane(grad_a, p_a, grad_b, p_b)
    out = 0
    if ok:
        ra, rb = reach(a0, a1, a2, a3), reach(b0, b1, b2, b3)
        across = (grad_b - grad_a).norm()
        h_a, h_b = grad_b.norm() * skin / across, grad_a.norm() * skin / across
        out = clearly_apart(a0, a1, a2, a3, n, d, ra, h_a) | clearly_apart(b0, b1, b2, b3, n, d, rb, h_b)
        if out == 0:
            if skin == 0.0:
                if clearly_off(a0, a1, a2, a3, n, d, ra) == 1:
                    poly, count = slice_tet(a0, a1, a2, a3, n, d)
                    if count >= 3:
                        out = polygon_clearly_outside(poly, count, tet_face_planes(b0, b1, b2, b3), ra)
            else:
                half = h_a + SLICE_MARGIN * (ra + ti.abs(d))
                out = slab_clearly_outside(a0, a1, a2, a3, n, d, half, tet_face_planes(b0, b1, b2, b3), ra, skin)
    return out
