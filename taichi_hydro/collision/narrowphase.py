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

from ..math3d import quat_to_mat
from ..types import (
    C_CANDIDATES, C_POLYGONS, G_BODY, G_POOL_START, K_ELEM_A, K_ELEM_B, K_PAIR, K_WORLD, P_FLIP, P_GEOM_A, P_GEOM_B, P_TYPE,
    PairType, ivec4, ivec8, mat3, nd,
    poly_record, poly_vertex_values, poly_vertices, tet_vertices, tri_vertices, vec3, vec4,
)
from . import clip
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
def tet_tet(
    w, pair, ea, eb, flip, Ra, pa, Rb, pb, Xa, Pa, Ga, Xb, Pb, Gb, merge_rel, counts: ti.template(),
    poly_i: ti.template(), poly_g: ti.template(), poly_c: ti.template(), poly_n: ti.template(),
    poly_nv: ti.template(), poly_v: ti.template(), poly_vp: ti.template(),
):
    """Compliant tet a vs compliant tet b: slice a by the equal-pressure plane, clip by b."""
    origin = Ra @ vec3(Xa[0, 0], Xa[0, 1], Xa[0, 2]) + pa
    a0, a1, a2, a3 = tet_local(Xa, Ra, pa - origin)
    b0, b1, b2, b3 = tet_local(Xb, Rb, pb - origin)
    grad_a = Ra @ Ga
    grad_b = Rb @ Gb
    p_a = Pa[0]  # field of a at the local origin (its vertex 0)
    p_b = Pb[0] - grad_b.dot(b0)  # field of b at the local origin
    poly, count, n = clip.tet_tet_polygon(a0, a1, a2, a3, grad_a, p_a, b0, b1, b2, b3, grad_b, p_b)
    if count >= 3:
        size = ti.max((a1 - a0).norm(), (a2 - a0).norm(), (a3 - a0).norm())
        emit(w, pair, ea, eb, poly, count, n, origin, grad_a, p_a, -grad_a.dot(n), grad_b.dot(n), grad_b.norm(), flip,
             (merge_rel * size) ** 2, counts, poly_i, poly_g, poly_c, poly_n, poly_nv, poly_v, poly_vp)


@ti.func
def tet_tri(
    w, pair, ea, eb, flip, Ra, pa, Rb, pb, Xa, Pa, Ga, Xt, Nt, merge_rel, deep, counts: ti.template(),
    poly_i: ti.template(), poly_g: ti.template(), poly_c: ti.template(), poly_n: ti.template(),
    poly_nv: ti.template(), poly_v: ti.template(), poly_vp: ti.template(),
):
    """Compliant tet a vs rigid triangle b: clip the triangle by the tet; n = -triangle normal.
    Drake's gradient-angle filter applies unless the pair overlaps deeply (deep = 1: the core
    of a is inside b, see depth.py), where every face of b inside a is part of the surface."""
    origin = Ra @ vec3(Xa[0, 0], Xa[0, 1], Xa[0, 2]) + pa
    a0, a1, a2, a3 = tet_local(Xa, Ra, pa - origin)
    grad_a = Ra @ Ga
    n_tri = Rb @ Nt
    if deep == 1 or clip.gradient_along(grad_a, n_tri) == 1:
        offset = pb - origin
        t0 = Rb @ vec3(Xt[0, 0], Xt[0, 1], Xt[0, 2]) + offset
        t1 = Rb @ vec3(Xt[1, 0], Xt[1, 1], Xt[1, 2]) + offset
        t2 = Rb @ vec3(Xt[2, 0], Xt[2, 1], Xt[2, 2]) + offset
        poly, count = clip.tri_tet_polygon(t0, t1, t2, a0, a1, a2, a3)
        if count >= 3:
            size = ti.max((a1 - a0).norm(), (a2 - a0).norm(), (a3 - a0).norm())
            n = -n_tri
            emit(w, pair, ea, eb, poly, count, n, origin, grad_a, Pa[0], -grad_a.dot(n), INF, INF, flip,
                 (merge_rel * size) ** 2, counts, poly_i, poly_g, poly_c, poly_n, poly_nv, poly_v, poly_vp)


@ti.func
def mesh_plane(
    w, pair, e, pr, body_p: ti.template(), body_q: ti.template(), geom_i: ti.template(), geom_slab_gradient: ti.template(),
    tet_X_G: ti.template(), tet_p: ti.template(), tet_grad_G: ti.template(), tri_X_G: ti.template(), tri_n_G: ti.template(),
    geom_scale: ti.template(), merge_rel, counts: ti.template(), poly_i: ti.template(), poly_g: ti.template(),
    poly_c: ti.template(), poly_n: ti.template(), poly_nv: ti.template(), poly_v: ti.template(), poly_vp: ti.template(),
):
    """Element e of the mesh of planar pair `pair` (pr = pair_i[pair]) against the plane z = 0
    of the half-space body (solid below): a tet's slice by a rigid plane, a tet's
    equal-pressure slice with a compliant slab clipped to the slab, a rigid triangle clipped
    by a slab."""
    t = pr[P_TYPE]
    flip = pr[P_FLIP]
    ga, gb = pr[P_GEOM_A], pr[P_GEOM_B]
    mesh, half = ga, gb
    if t == PairType.SLAB_TRI:
        mesh, half = gb, ga
    bm, bh = geom_i[mesh][G_BODY], geom_i[half][G_BODY]
    Rm, pm = quat_to_mat(body_q[w, bm]), body_p[w, bm]
    n_plane = quat_to_mat(body_q[w, bh]) @ vec3(0.0, 0.0, 1.0)
    idx = geom_i[mesh][G_POOL_START] + e
    ws = w % geom_scale.shape[0]
    s_mesh, s_half = geom_scale[ws, mesh], geom_scale[ws, half]
    if t == PairType.SLAB_TRI:
        X = tri_X_G[idx]
        origin = Rm @ vec3(X[0, 0], X[0, 1], X[0, 2]) + pm
        d_plane = n_plane.dot(body_p[w, bh] - origin)  # plane n.x = d_plane, local
        poly = Poly(0.0)
        for v in ti.static(range(3)):
            set_row(poly, v, Rm @ vec3(X[v, 0], X[v, 1], X[v, 2]) + (pm - origin))
        n_tri = Rm @ tri_n_G[idx]
        slab = s_half * geom_slab_gradient[half]  # E/H
        grad_a = -slab * n_plane
        # No gradient-angle filter here (Drake has one): the slab's field is linear
        # everywhere, and keeping every submerged face makes the force exact buoyancy.
        size = (row(poly, 1) - row(poly, 0)).norm()
        poly, count = clip.clip_by_halfspace(poly, 3, n_plane, d_plane)
        if count >= 3:
            n = -n_tri
            emit(w, pair, 0, e, poly, count, n, origin, grad_a, slab * d_plane, -grad_a.dot(n), INF, INF, flip,
                 (merge_rel * size) ** 2, counts, poly_i, poly_g, poly_c, poly_n, poly_nv, poly_v, poly_vp)
    else:
        X = tet_X_G[idx]
        Pa = s_mesh * tet_p[idx]
        origin = Rm @ vec3(X[0, 0], X[0, 1], X[0, 2]) + pm
        a0, a1, a2, a3 = tet_local(X, Rm, pm - origin)
        d_plane = n_plane.dot(body_p[w, bh] - origin)
        grad_a = Rm @ (s_mesh * tet_grad_G[idx])
        size = ti.max((a1 - a0).norm(), (a2 - a0).norm(), (a3 - a0).norm())
        if t == PairType.TET_PLANE:
            poly, count = clip.slice_tet(a0, a1, a2, a3, n_plane, d_plane)
            if count >= 3:
                # Out of the tet (a) into the half-space (b): against the plane normal.
                emit(w, pair, e, 0, poly, count, -n_plane, origin, grad_a, Pa[0], grad_a.dot(n_plane), INF, INF, flip,
                     (merge_rel * size) ** 2, counts, poly_i, poly_g, poly_c, poly_n, poly_nv, poly_v, poly_vp)
        else:
            slab = s_half * geom_slab_gradient[half]
            poly, count, n = clip.tet_slab_polygon(a0, a1, a2, a3, grad_a, Pa[0], n_plane, d_plane, slab)
            if count >= 3:
                emit(w, pair, e, 0, poly, count, n, origin, grad_a, Pa[0], -grad_a.dot(n), -slab * n_plane.dot(n), slab, flip,
                     (merge_rel * size) ** 2, counts, poly_i, poly_g, poly_c, poly_n, poly_nv, poly_v, poly_vp)


@ti.kernel
def clip_candidates(
    counts: nd(dtype=ti.i32, ndim=1),
    cand: nd(dtype=ivec4, ndim=1),
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
    (depth.pair_depth); appends their polygons."""
    n_cand = ti.min(counts[C_CANDIDATES], cand.shape[0])
    for c in range(n_cand):
        key = cand[c]
        w, pair, la, lb = key[K_WORLD], key[K_PAIR], key[K_ELEM_A], key[K_ELEM_B]
        pr = pair_i[pair]
        t = pr[P_TYPE]
        if t != PairType.TET_TET and t != PairType.TET_TRI:
            mesh_plane(w, pair, la, pr, body_p, body_q, geom_i, geom_slab_gradient, tet_X_G, tet_p, tet_grad_G, tri_X_G, tri_n_G,
                       geom_scale, merge_rel, counts, poly_i, poly_g, poly_c, poly_n, poly_nv, poly_v, poly_vp)
        else:
            ga, gb = pr[P_GEOM_A], pr[P_GEOM_B]
            ba, bb = geom_i[ga][G_BODY], geom_i[gb][G_BODY]
            Ra, pa = quat_to_mat(body_q[w, ba]), body_p[w, ba]
            Rb, pb = quat_to_mat(body_q[w, bb]), body_p[w, bb]
            ta = geom_i[ga][G_POOL_START] + la
            ib = geom_i[gb][G_POOL_START] + lb
            ws = w % geom_scale.shape[0]
            sa = geom_scale[ws, ga]
            if t == PairType.TET_TET:
                sb = geom_scale[ws, gb]
                tet_tet(w, pair, la, lb, pr[P_FLIP], Ra, pa, Rb, pb, tet_X_G[ta], sa * tet_p[ta], sa * tet_grad_G[ta],
                        tet_X_G[ib], sb * tet_p[ib], sb * tet_grad_G[ib], merge_rel, counts,
                        poly_i, poly_g, poly_c, poly_n, poly_nv, poly_v, poly_vp)
            else:
                tet_tri(w, pair, la, lb, pr[P_FLIP], Ra, pa, Rb, pb, tet_X_G[ta], sa * tet_p[ta], sa * tet_grad_G[ta],
                        tri_X_G[ib], tri_n_G[ib], merge_rel, pair_deep[w, pair], counts,
                        poly_i, poly_g, poly_c, poly_n, poly_nv, poly_v, poly_vp)
