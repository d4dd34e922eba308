"""Narrow phase kernels: element pairs -> contact polygons in the flat polygon pool
(DESIGN §1, §3 step 3). Geometry work is in clip.py; this module reads the model and pools.

Each polygon is computed in role order (a, b) of its pair -- a is the compliant mesh for
tet-triangle and tet-half-space pairs, the slab for slab-triangle pairs -- relative to a local
origin at a vertex of the element of a, so float32 keeps its digits. It is stored with its
normal pointing from the body with the lower scene index to the higher one (flipped when
role a belongs to the higher body, with gA and gB swapped accordingly).

Pool columns: poly_i = (world, pair, element of a, element of b); poly_g = (area [m^2],
pressure at the centroid p0 [Pa], gA [Pa/m], gB [Pa/m], |grad pA| [Pa/m], |grad pB| [Pa/m], 0, 0)
with g = |grad p| = inf on a rigid side;
poly_c centroid in W [m]; poly_n unit normal in W; poly_nv vertex count; poly_v vertices in W
[m]; poly_vp pressure at each vertex [Pa].

Per-world moduli: geom_scale[w % geom_scale.shape[0], g] = E_world / E_scene multiplies the
pressure field of geometry g in world w (its vertex pressures and gradients, or a slab's E/H)
wherever it is read here. The field is proportional to E, so this is the field of the scene
built with E_world; every pressure downstream (p0, gA, gB, vertex pressures) comes from here."""

import taichi as ti

from .. import backend

from ..math3d import quat_to_mat
from ..types import (
    C_POLYGONS, G_BODY, G_POOL_START, K_ELEM_A, K_ELEM_B, K_PAIR, K_WORLD, P_FLIP, P_GEOM_A, P_GEOM_B, P_TYPE,
    PairType, ivec4, ivec8, mat3, nd,
    poly_record, poly_vertex_values, poly_vertices, tet_vertices, tri_vertices, vec3, vec4,
)
from . import clip
from .candidates import candidate, candidate_count, record_length
from .clip import Poly, row, set_row

INF = ti.math.inf


@ti.func
def tet_local(X, R: mat3, offset: vec3):
    """The 4 vertices R X_i + offset of a pool tet (X is 4x3, body frame)."""
    x0 = R @ vec3(X[0, 0], X[0, 1], X[0, 2]) + offset
    x1 = R @ vec3(X[1, 0], X[1, 1], X[1, 2]) + offset
    x2 = R @ vec3(X[2, 0], X[2, 1], X[2, 2]) + offset
    x3 = R @ vec3(X[3, 0], X[3, 1], X[3, 2]) + offset
    return x0, x1, x2, x3


@ti.func
def emit(
    w: ti.i32,
    pair: ti.i32,
    ea: ti.i32,
    eb: ti.i32,
    poly: Poly,
    count: ti.i32,
    n: vec3,
    origin_W: vec3,
    grad_a: vec3,
    p_a: float,
    g_a: float,
    g_b: float,
    grad_norm_b: float,
    flip: ti.i32,
    merge_tol2: float,
    counts: ti.template(),
    poly_i: ti.template(),
    poly_g: ti.template(),
    poly_c: ti.template(),
    poly_n: ti.template(),
    poly_nv: ti.template(),
    poly_v: ti.template(),
    poly_vp: ti.template(),
):
    """Append a clipped polygon (local coordinates, normal n out of a into b, pressure field of a
    p(x) = p_a + grad_a.x) to the pool unless it is degenerate (< 3 distinct vertices)."""
    poly, count = clip.remove_duplicates(poly, count, merge_tol2)
    if count >= 3:
        area, centroid = clip.polygon_area_centroid(poly, count, n)
        if area < 0.0:
            poly = clip.reverse(poly, count)
            area = -area
        if area > 0.0:
            k = ti.atomic_add(counts[C_POLYGONS], 1)
            if k < poly_i.shape[0]:
                nrm, ga, gb, na, nb = n, g_a, g_b, grad_a.norm(), grad_norm_b
                if flip == 1:
                    nrm, ga, gb, na, nb = -n, g_b, g_a, grad_norm_b, grad_a.norm()
                verts = Poly(0.0)
                vp = poly_vertex_values(0.0)
                for i in range(count):
                    # Counter-clockwise about the stored normal: reversed when it is flipped.
                    x = row(poly, i)
                    j = i
                    if flip == 1:
                        j = count - 1 - i
                    set_row(verts, j, x + origin_W)
                    vp[j] = p_a + grad_a.dot(x)
                poly_i[k] = ivec4(w, pair, ea, eb)
                poly_g[k] = poly_record(area, p_a + grad_a.dot(centroid), ga, gb, na, nb, 0.0, 0.0)  # columns POLY_*
                poly_c[k] = centroid + origin_W
                poly_n[k] = nrm
                poly_nv[k] = count
                poly_v[k] = verts
                poly_vp[k] = vp


@ti.func
def tet_row(X, i: ti.template()) -> vec3:
    return vec3(X[i, 0], X[i, 1], X[i, 2])


@ti.func
def clip_candidate(
    key: ivec4, body_p: ti.template(), body_q: ti.template(), geom_i: ti.template(),
    geom_slab_gradient: ti.template(), pair_i: ti.template(), tet_X_G: ti.template(), tet_p: ti.template(),
    tet_grad_G: ti.template(), tri_X_G: ti.template(), tri_n_G: ti.template(), geom_scale: ti.template(), merge_rel,
    pair_deep: ti.template(), counts: ti.template(), poly_i: ti.template(), poly_g: ti.template(), poly_c: ti.template(),
    poly_n: ti.template(), poly_nv: ti.template(), poly_v: ti.template(), poly_vp: ti.template(),
):
    """The polygon of candidate c, appended to the pool. Every pair type takes the same three
    steps, so that each piece of clipping code appears once in the kernel (Taichi inlines a
    ti.func at every call site: one call each keeps compilation short):
      - the starting polygon: the mesh element's slice by a plane (tet-tet: the equal-pressure
        plane; tet-half-space: the rigid plane; tet-slab: the equal-pressure plane with the
        slab's field), or a rigid triangle (tet-triangle, slab-triangle);
      - clipped by up to four half-spaces (tet-tet: b's faces; tet-triangle: a's faces; tet-slab
        and slab-triangle: the slab's half-space; tet-half-space: none);
      - emitted with the pressure field of role a (a tet's, or the slab's for slab-triangle).
    The mesh element belongs to geometry a, except for slab-triangle (the triangle is b's)."""
    w, pair, la, lb = key[K_WORLD], key[K_PAIR], key[K_ELEM_A], key[K_ELEM_B]
    pr = pair_i[pair]
    t = pr[P_TYPE]
    mesh, other = pr[P_GEOM_A], pr[P_GEOM_B]
    if t == PairType.SLAB_TRI:
        mesh, other = other, mesh
    bm, bo = geom_i[mesh][G_BODY], geom_i[other][G_BODY]
    Rm, pm = quat_to_mat(body_q[w, bm]), body_p[w, bm]
    Ro, po = quat_to_mat(body_q[w, bo]), body_p[w, bo]
    idx = geom_i[mesh][G_POOL_START] + la
    ws = w % geom_scale.shape[0]
    s_mesh, s_other = geom_scale[ws, mesh], geom_scale[ws, other]
    n_plane = Ro @ vec3(0.0, 0.0, 1.0)  # planar pairs: the half-space body's plane z = 0 (solid below)
    slab = s_other * geom_slab_gradient[other]  # E/H of a compliant half-space [Pa/m]

    # Role a's element, relative to a local origin at its vertex 0 (float32 keeps its digits).
    poly = Poly(0.0)
    count = 0
    origin = vec3(0.0)
    a0, a1, a2, a3 = vec3(0.0), vec3(0.0), vec3(0.0), vec3(0.0)
    grad_a = vec3(0.0)
    p_a = 0.0
    size = 0.0
    if t == PairType.SLAB_TRI:
        X = tri_X_G[idx]
        origin = Rm @ tet_row(X, 0) + pm
        for v in ti.static(range(3)):
            set_row(poly, v, Rm @ tet_row(X, v) + (pm - origin))
        count = 3
        size = (row(poly, 1) - row(poly, 0)).norm()
    else:
        X = tet_X_G[idx]
        origin = Rm @ tet_row(X, 0) + pm
        a0, a1, a2, a3 = tet_local(X, Rm, pm - origin)
        grad_a = Rm @ (s_mesh * tet_grad_G[idx])
        p_a = (s_mesh * tet_p[idx])[0]  # field of a at the local origin (its vertex 0)
        size = ti.max((a1 - a0).norm(), (a2 - a0).norm(), (a3 - a0).norm())
    d_plane = n_plane.dot(po - origin)  # planar pairs: the plane n_plane.x = d_plane, local

    # The starting polygon and the half-spaces that clip it.
    n = vec3(0.0)  # the polygon's normal, out of a into b
    g_a, g_b, grad_norm_b = 0.0, INF, INF
    slice_n, slice_d, use = vec3(0.0), 0.0, 0
    planes = clip.Planes(0.0)
    n_planes = 0  # 4: a tet's faces (tet-tet, tet-triangle); 1: the slab's half-space, row 0
    planes[0, 0] = n_plane[0]
    planes[0, 1] = n_plane[1]
    planes[0, 2] = n_plane[2]
    planes[0, 3] = d_plane
    c0, c1, c2, c3 = a0, a1, a2, a3  # the tet whose faces clip (n_planes = 4): a, or b for tet-tet
    ea, eb = la, lb
    if t == PairType.TET_TET:
        ib = geom_i[other][G_POOL_START] + lb
        b0, b1, b2, b3 = tet_local(tet_X_G[ib], Ro, po - origin)
        grad_b = Ro @ (s_other * tet_grad_G[ib])
        p_b = (s_other * tet_p[ib])[0] - grad_b.dot(b0)  # field of b at the local origin
        slice_n, slice_d, use = clip.meeting_plane(grad_a, p_a, grad_b, p_b)
        use = use * clip.crosses(b0, b1, b2, b3, slice_n, slice_d)
        c0, c1, c2, c3 = b0, b1, b2, b3
        n_planes = 4
        n = slice_n
        g_a, g_b, grad_norm_b = -grad_a.dot(n), grad_b.dot(n), grad_b.norm()
    elif t == PairType.TET_TRI:
        n_tri = Ro @ tri_n_G[geom_i[other][G_POOL_START] + lb]
        # Drake's gradient-angle filter, unless the pair overlaps deeply (the core of a is
        # inside b, see depth.py): then every face of b inside a is part of the surface.
        if pair_deep[w, pair] == 1 or clip.gradient_along(grad_a, n_tri) == 1:
            Xt = tri_X_G[geom_i[other][G_POOL_START] + lb]
            for v in ti.static(range(3)):
                set_row(poly, v, Ro @ tet_row(Xt, v) + (po - origin))
            count = 3
        n_planes = 4
        n = -n_tri
        g_a = -grad_a.dot(n)
    elif t == PairType.TET_PLANE:
        slice_n, slice_d, use = n_plane, d_plane, 1
        n = -n_plane  # out of the tet (a) into the half-space (b)
        g_a = grad_a.dot(n_plane)
    elif t == PairType.TET_SLAB:
        grad_b = -slab * n_plane
        slice_n, slice_d, use = clip.meeting_plane(grad_a, p_a, grad_b, slab * d_plane)
        n_planes = 1
        n = slice_n
        g_a, g_b, grad_norm_b = -grad_a.dot(n), -slab * n_plane.dot(n), slab
    else:  # SLAB_TRI: the slab is a; the rigid triangle, clipped to the slab's half-space, is b
        # No gradient-angle filter here (Drake has one): the slab's field is linear everywhere,
        # and keeping every submerged face makes the force exact buoyancy.
        grad_a = -slab * n_plane
        p_a = slab * d_plane
        n_planes = 1
        n = -(Rm @ tri_n_G[idx])
        g_a = -grad_a.dot(n)
        ea, eb = 0, la

    if use == 1:
        poly, count = clip.slice_tet(a0, a1, a2, a3, slice_n, slice_d)
    if count >= 3:
        if n_planes == 4:
            planes = clip.tet_face_planes(c0, c1, c2, c3)
        poly, count = clip.clip_by_planes(poly, count, planes, n_planes)
    if count >= 3:
        emit(w, pair, ea, eb, poly, count, n, origin, grad_a, p_a, g_a, g_b, grad_norm_b, pr[P_FLIP], (merge_rel * size) ** 2,
             counts, poly_i, poly_g, poly_c, poly_n, poly_nv, poly_v, poly_vp)


@ti.kernel
def clip_candidates(
    counts: nd(dtype=ti.i32, ndim=1),
    cand: nd(dtype=ivec4, ndim=1),
    cand_span: nd(dtype=ti.i32, ndim=1),
    candidate_capacity: ti.i32,
    body_p: nd(dtype=vec3, ndim=2),
    body_q: nd(dtype=vec4, ndim=2),
    geom_i: nd(dtype=ivec8, ndim=1),
    geom_slab_gradient: nd(dtype=float, ndim=1),
    pair_i: nd(dtype=ivec8, ndim=1),
    tet_X_G: nd(dtype=tet_vertices, ndim=1),
    tet_p: nd(dtype=vec4, ndim=1),
    tet_grad_G: nd(dtype=vec3, ndim=1),
    tri_X_G: nd(dtype=tri_vertices, ndim=1),
    tri_n_G: nd(dtype=vec3, ndim=1),
    geom_scale: nd(dtype=float, ndim=2),
    merge_rel: float,
    pair_deep: nd(dtype=ti.i32, ndim=2),
    poly_i: nd(dtype=ivec4, ndim=1),
    poly_g: nd(dtype=poly_record, ndim=1),
    poly_c: nd(dtype=vec3, ndim=1),
    poly_n: nd(dtype=vec3, ndim=1),
    poly_nv: nd(dtype=ti.i32, ndim=1),
    poly_v: nd(dtype=poly_vertices, ndim=1),
    poly_vp: nd(dtype=poly_vertex_values, ndim=1),
):
    """Reads the candidates of the broad phase (mesh-mesh and planar pairs) and pair_deep
    (depth.pair_depth); appends their polygons, and records the list's length for the next
    pass (candidates.record_length)."""
    record_length(counts, cand_span)
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for c in range(candidate_count(counts, candidate_capacity)):
        clip_candidate(candidate(c, cand, cand_span), body_p, body_q, geom_i, geom_slab_gradient, pair_i, tet_X_G, tet_p, tet_grad_G, tri_X_G, tri_n_G,
                       geom_scale, merge_rel, pair_deep, counts, poly_i, poly_g, poly_c, poly_n, poly_nv, poly_v, poly_vp)
