"""Broad phase on the device, all worlds at once (DESIGN §3 step 2).

1. world boxes of the mesh geometries; pair activity per world (box overlap, or box below the
   plane for half-space pairs) and, for mesh-mesh pairs, the intersection box; for planar
   pairs, the plane in the mesh's frame (once per pair, not per element);
2. per geometry, the active mesh-mesh pairs in which it is geometry a and their intersection
   boxes ("region"): its elements outside every box find nothing, and each element's box is
   clamped to the hull of its overlaps with them (a big floor triangle shrinks to the patch it
   can touch);
3. mesh-mesh pairs (find_candidates): one thread per world and element of a geometry that is
   geometry a of such a pair; for each active pair in which it is geometry a, its clamped box,
   taken into the frame of geometry b's mesh, descends b's static tree (geometry.bvh); the
   elements of b whose boxes it meets there, and whose world boxes meet it, become candidates
   (a pair's box is first cut to its bounding balls' lens, lens_box; tet-tet pairs that
   clearly have no polygon, within the skin's moves when there is one, are dropped);
4. planar pairs (find_planar): one thread per world and run of elements (model.PLANAR_CHUNK)
   of a mesh in a mesh-half-space pair, skipped whole when the run's static box misses the
   plane; the elements whose boxes (mesh frame) the plane crosses (a rigid plane) or that reach
   below it (a compliant slab) become candidates, in element order.
Candidates are (world, pair, element of a, element of b), element b = 0 for a planar pair;
the narrow phase clips them all in one launch. With a skin s > 0 (collision.skin), steps 2-4
search only the pairs that moved more than s since their last search (pair_search), with a's
element boxes (or the plane test) widened by s; the other pairs' rows are kept from the last
pass's list (collision.candidates owns the list and how a row is appended).

The trees replace a spatial hash rebuilt every step (append cells, count per bucket, scan,
scatter, look up: five launches and four pools). Every test is conservative: boxes that contain
the elements, queries inflated by TREE_SLACK against rounding.
"""

import taichi as ti

from .. import backend

from ..math3d import finite_pose, quat_to_mat
from ..scan import scan_in_place
from . import skin as skin_rule
from .candidates import SPAN_KEPT, append_candidate
from .clip import clearly_no_polygon
from .narrowphase import tet_local
from ..types import (
    C_CANDIDATES, FROZEN_POSE, G_BODY, G_BVH_ROOT, G_KIND, G_POOL_START, G_QUERY_START, P_GEOM_A, P_GEOM_B, P_TYPE,
    TETMESH, PairType, RealVector, box3, ivec4, ivec8, mat3, nd, tet_vertices, tri_vertices, vec3, vec4,
)

BIG = 1e30
# Boxes kept per (world, geometry) to clamp elements to (one per active pair; past this many,
# their union). More boxes clamp tighter; each costs 24 bytes per world and geometry.
REGION_BOXES = 8
# Relative slack of a tree query (of the query's size and distance from the tree's origin):
# float32 rounding of the change of frame is ~1e-7 of these; a query wider by 1e-5 of them
# never misses an element the exact world-box test would keep.
TREE_SLACK = 1e-5

plane_record = RealVector(5)
"""A planar pair's plane in its mesh's body frame M: (n_M (3,), d [m], |p_WM| [m]), the plane
n_M . x = d with the solid (or slab) on the side n_M . x < d."""


@ti.func
def empty_box() -> box3:
    return box3([[BIG, BIG, BIG], [-BIG, -BIG, -BIG]])


@ti.func
def box_lo(b: box3) -> vec3:
    return vec3(b[0, 0], b[0, 1], b[0, 2])


@ti.func
def box_hi(b: box3) -> vec3:
    return vec3(b[1, 0], b[1, 1], b[1, 2])


@ti.func
def make_box(lo: vec3, hi: vec3) -> box3:
    return box3([[lo[0], lo[1], lo[2]], [hi[0], hi[1], hi[2]]])


@ti.func
def box_valid(b: box3) -> ti.i32:
    return 1 if (b[0, 0] <= b[1, 0] and b[0, 1] <= b[1, 1] and b[0, 2] <= b[1, 2]) else 0


@ti.func
def intersect(a: box3, b: box3) -> box3:
    return make_box(ti.max(box_lo(a), box_lo(b)), ti.min(box_hi(a), box_hi(b)))


@ti.func
def union(a: box3, b: box3) -> box3:
    return make_box(ti.min(box_lo(a), box_lo(b)), ti.max(box_hi(a), box_hi(b)))


@ti.func
def inflated(b: box3, slack: float) -> box3:
    return make_box(box_lo(b) - slack, box_hi(b) + slack)


@ti.func
def box_reach(b: box3) -> float:
    """The largest coordinate of the box in magnitude [m] (the scale of its rounding)."""
    return ti.max(ti.abs(box_lo(b)).max(), ti.abs(box_hi(b)).max())


@ti.func
def transformed_box(local: box3, R: mat3, p: vec3) -> box3:
    """World box of a body-frame box under the pose (R, p) (exact box of the rotated box)."""
    centre = 0.5 * (box_lo(local) + box_hi(local))
    half = 0.5 * (box_hi(local) - box_lo(local))
    c = R @ centre + p
    e = vec3(0.0)
    for i in ti.static(range(3)):
        for j in ti.static(range(3)):
            e[i] += ti.abs(R[i, j]) * half[j]
    return make_box(c - e, c + e)


@ti.func
def geometry_box(local: box3, ball: vec4, R: mat3, p: vec3) -> box3:
    """World box of a geometry under its body's pose (R, p): the rotated body-frame box cut by
    the box of the bounding ball (the ball's is the tighter one for a round body that turns)."""
    c = R @ vec3(ball[0], ball[1], ball[2]) + p
    return intersect(transformed_box(local, R, p), make_box(c - ball[3], c + ball[3]))


@ti.func
def lens_box(c_a: vec3, r_a: float, c_b: vec3, r_b: float) -> box3:
    """Box of the intersection of the balls (c_a, r_a) and (c_b, r_b) [m] (the lens where two
    bodies' bounding balls overlap: every contact polygon of their meshes lies in it), inflated
    by TREE_SLACK against rounding; empty when the balls are apart. Along the axis n from c_a
    to c_b (d = |c_b - c_a|) the lens spans t in [max(-r_a, d - r_b), min(r_a, d + r_b)];
    across it, a disc of radius at most rho = sqrt(r_a^2 - x^2) when the plane of the balls'
    circle, t = x = (d^2 + r_a^2 - r_b^2) / (2 d), lies between the centres (0 <= x <= d: ball
    b bounds the lens below x, ball a above, each widest at x), else at most min(r_a, r_b).
    The box is that of the cylinder: the axis segment widened by rho sqrt(1 - n_k^2) along
    axis k."""
    slack = TREE_SLACK * (c_a.norm() + c_b.norm() + r_a + r_b)
    m = c_b - c_a
    d = m.norm()
    out = empty_box()
    if d <= r_a + r_b + slack:
        n = vec3(0.0, 0.0, 1.0)
        if d > slack:
            n = m / d
        t0 = ti.max(-r_a, d - r_b)
        t1 = ti.min(r_a, d + r_b)
        rho = ti.min(r_a, r_b)
        if d > slack:
            x = (d * d + r_a * r_a - r_b * r_b) / (2.0 * d)
            if x >= 0.0 and x <= d:
                rho = ti.min(rho, ti.sqrt(ti.max(r_a * r_a - x * x, 0.0)))
        else:  # concentric: the direction is arbitrary, so bound across every axis
            t0, t1 = -rho, rho
        p0 = c_a + t0 * n
        p1 = c_a + t1 * n
        e = vec3(0.0)
        for k in ti.static(range(3)):
            e[k] = rho * ti.sqrt(ti.max(1.0 - n[k] * n[k], 0.0))
        if d <= slack:
            e = vec3(rho)
        out = inflated(make_box(ti.min(p0, p1) - e, ti.max(p0, p1) + e), slack)
    return out


@ti.func
def bounds_apart(t: ti.i32, ball_a: vec4, Ra: mat3, pa: vec3, ball_b: vec4, Rb: mat3, pb: vec3, skin: float) -> ti.i32:
    """1 when a pair of type t is inactive whatever skin up to `skin` [m] it is searched with,
    by the bounding balls alone (geom_ball_G: centre in the body frame, radius): for a mesh-mesh
    pair, the balls (a's widened by the skin) are apart, so their lens is empty (lens_box); for
    a planar pair, the mesh's ball lies above the half-space's plane (through its body's origin,
    normal its z axis) by more than the skin, so no element of the mesh reaches within the skin
    of it. Both with TREE_SLACK of the sizes to spare against rounding. The cheap test that
    pair_activity makes first: most pairs of a batch are far apart."""
    apart = 0
    if t == PairType.TET_TET or t == PairType.TET_TRI:
        c_a = Ra @ vec3(ball_a[0], ball_a[1], ball_a[2]) + pa
        c_b = Rb @ vec3(ball_b[0], ball_b[1], ball_b[2]) + pb
        reach = ball_a[3] + skin + ball_b[3] + 2.0 * TREE_SLACK * (c_a.norm() + c_b.norm() + ball_a[3] + skin + ball_b[3])
        gap = c_b - c_a
        apart = 1 if gap.dot(gap) > reach * reach else 0
    else:
        ball, R_m, p_m, R_h, p_h = ball_a, Ra, pa, Rb, pb
        if t == PairType.SLAB_TRI:
            ball, R_m, p_m, R_h, p_h = ball_b, Rb, pb, Ra, pa
        c = R_m @ vec3(ball[0], ball[1], ball[2]) + p_m
        n = R_h @ vec3(0.0, 0.0, 1.0)
        slack = TREE_SLACK * (c.norm() + p_h.norm() + ball[3])
        apart = 1 if n.dot(c - p_h) - ball[3] > skin + slack else 0
    return apart


@ti.kernel
def clear_counts(counts: nd(dtype=ti.i32, ndim=1)):
    """Writes counts = 0 (the pools' counters, before a pass appends)."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for i in range(counts.shape[0]):
        counts[i] = 0


@ti.kernel
def pair_activity(
    world_status: nd(dtype=ti.i32, ndim=1),
    body_p: nd(dtype=vec3, ndim=2),
    body_q: nd(dtype=vec4, ndim=2),
    body_v: nd(dtype=vec3, ndim=2),
    body_w: nd(dtype=vec3, ndim=2),
    dt: float,
    geom_i: nd(dtype=ivec8, ndim=1),
    geom_box_G: nd(dtype=box3, ndim=1),
    geom_ball_G: nd(dtype=vec4, ndim=1),
    pair_i: nd(dtype=ivec8, ndim=1),
    skin: float,
    cand_span: nd(dtype=ti.i32, ndim=1),
    candidate_capacity: ti.i32,
    pair_ref: nd(dtype=skin_rule.pair_reference, ndim=2),
    pair_active: nd(dtype=ti.i32, ndim=2),
    pair_stale: nd(dtype=ti.i32, ndim=2),
    pair_search: nd(dtype=ti.i32, ndim=2),
    pair_box: nd(dtype=box3, ndim=2),
    pair_plane: nd(dtype=plane_record, ndim=2),
    counts: nd(dtype=ti.i32, ndim=1),
    cand: nd(dtype=ivec4, ndim=1),
    keep_chunk_row: nd(dtype=ti.i32, ndim=1),
):
    """Reads poses, velocities and geometry boxes. Writes pair_active[w, p] (1 when the
    geometries' boxes, geometry a's inflated by the pair's skin [m], overlap, or the mesh box
    reaches within the pair's skin of a half-space; 0 in a diverged world, and 0 at once,
    without the skin's rule, for a pair whose bounding balls are apart by more than `skin`:
    bounds_apart, and pair_stale = 1 with an invalid reference), pair_box[w, p],
    the box intersection of a mesh-mesh pair, and pair_plane[w, p] of an active planar pair:
    the half-space's plane in the frame of the mesh's body M, n_M . x = d (n_M unit, d [m]),
    and |p_WM| [m] (the scale of the rounding of d), for find_planar. pair_stale[w, p] = 1
    when the pair's candidates must be searched this pass (always without a skin; with one, by
    the rule of collision.skin, which also updates pair_ref: the pose at the last search and
    the pair's skin, `skin` or 0 by skin.search_skin from the bodies' velocities and dt [s]),
    pair_search = pair_active and pair_stale. The pair's skin is 0 without a skin, that of
    its kept list when kept. A pair with a non-finite pose (as a write through a state view
    can leave) is inactive and marks its world diverged, so no later stage of the step works
    on that world. With a skin, once every pair's pair_stale is known (the later loops run
    after the first), the candidate lists turn over (skin.turn_over) and the rows of the pairs
    that are not stale are kept, in their order, at the head of this pass's list:
    counts[C_CANDIDATES] = their number, the searched pairs' rows are appended after them. The
    kept rows per chunk of skin.KEEP_CHUNK rows, each chunk's first row in the new list
    (keep_chunk_row, a prefix sum in one thread), the copy: in this launch rather than one of
    their own."""
    W = body_p.shape[0]
    P = pair_i.shape[0]
    kept = cand_span[SPAN_KEPT]
    kept_whole = 1 if (kept >= 0 and kept <= candidate_capacity) else 0
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, p in ti.ndrange(W, P):
        pr = pair_i[p]
        t = pr[P_TYPE]
        ga, gb = pr[P_GEOM_A], pr[P_GEOM_B]
        active = 0
        stale = 1
        inter = empty_box()
        ba, bb = geom_i[ga][G_BODY], geom_i[gb][G_BODY]
        pair_skin = 0.0
        if world_status[w] != 0 or finite_pose(body_p[w, ba], body_q[w, ba]) == 0 or finite_pose(body_p[w, bb], body_q[w, bb]) == 0:
            if world_status[w] == 0:
                ti.atomic_max(world_status[w], FROZEN_POSE)
            if skin > 0.0:
                pair_ref[w, p] = skin_rule.pair_reference(0.0)  # invalid: search once the world runs again
        else:
            Ra, Rb = quat_to_mat(body_q[w, ba]), quat_to_mat(body_q[w, bb])
            apart = bounds_apart(t, geom_ball_G[ga], Ra, body_p[w, ba], geom_ball_G[gb], Rb, body_p[w, bb], skin)
            if apart == 1:
                # Inactive under any skin up to `skin`: nothing to search, nothing to keep
                # (stale, so any rows of an earlier pass are dropped), and the reference is
                # invalid, so that the pair is searched once it comes near again.
                if skin > 0.0 and pair_ref[w, p][7] != 0.0:
                    pair_ref[w, p] = skin_rule.pair_reference(0.0)
            elif skin > 0.0:
                # F: the frame geometry, M: the moving one (collision.skin).
                f, m = ga, gb
                if t == PairType.TET_PLANE:
                    f, m = gb, ga
                bf, bm = geom_i[f][G_BODY], geom_i[m][G_BODY]
                Rf, Rm = Ra, Rb
                if bf != ba:
                    Rf, Rm = Rb, Ra
                ball = geom_ball_G[m]
                c_F, q_FM = skin_rule.relative_pose(ball, body_p[w, bf], body_q[w, bf], Rf, body_p[w, bm], body_q[w, bm], Rm)
                ref = pair_ref[w, p]
                if kept_whole == 1 and ref[7] > 0.0:
                    delta = skin_rule.moved(ref, c_F, q_FM, ball[3])
                    if delta + TREE_SLACK * (c_F.norm() + ball[3]) <= ref[7]:
                        stale = 0
                        pair_skin = ref[7]
                if stale == 1:
                    rate = skin_rule.motion_rate(ball, Rm, body_p[w, bf], body_v[w, bf], body_w[w, bf], body_p[w, bm],
                                                 body_v[w, bm], body_w[w, bm])
                    pair_skin = skin_rule.search_skin(skin, rate, dt)
                    pair_ref[w, p] = skin_rule.pair_reference(c_F[0], c_F[1], c_F[2], q_FM[0], q_FM[1], q_FM[2], q_FM[3],
                                                              pair_skin)
            if apart == 0 and (t == PairType.TET_TET or t == PairType.TET_TRI):
                box_a = inflated(geometry_box(geom_box_G[ga], geom_ball_G[ga], Ra, body_p[w, ba]), pair_skin)
                box_b = geometry_box(geom_box_G[gb], geom_ball_G[gb], Rb, body_p[w, bb])
                ball_a, ball_b = geom_ball_G[ga], geom_ball_G[gb]
                lens = lens_box(Ra @ vec3(ball_a[0], ball_a[1], ball_a[2]) + body_p[w, ba], ball_a[3] + pair_skin,
                                Rb @ vec3(ball_b[0], ball_b[1], ball_b[2]) + body_p[w, bb], ball_b[3])
                inter = intersect(intersect(box_a, box_b), lens)
                active = box_valid(inter)
            elif apart == 0:
                mesh, plane = ga, gb
                Rm, Rh = Ra, Rb
                if t == PairType.SLAB_TRI:
                    mesh, plane = gb, ga
                    Rm, Rh = Rb, Ra
                bm, bh = geom_i[mesh][G_BODY], geom_i[plane][G_BODY]
                pm = body_p[w, bm]
                box_m = geometry_box(geom_box_G[mesh], geom_ball_G[mesh], Rm, pm)
                n = Rh @ vec3(0.0, 0.0, 1.0)
                # Lowest corner of the box along n, relative to the plane.
                lowest = 0.0
                for k in ti.static(range(3)):
                    lowest += ti.min(n[k] * box_m[0, k], n[k] * box_m[1, k])
                if lowest - n.dot(body_p[w, bh]) <= pair_skin:
                    active = 1
                    n_M = Rm.transpose() @ n
                    pair_plane[w, p] = plane_record(n_M[0], n_M[1], n_M[2], n.dot(body_p[w, bh] - pm), pm.norm())
        pair_active[w, p] = active
        pair_stale[w, p] = stale
        pair_search[w, p] = active * stale
        pair_box[w, p] = inter
    last, first, n = 0, 0, 0
    if skin > 0.0:
        last, first, n = skin_rule.turn_over(cand_span, candidate_capacity)
    chunks = (n + skin_rule.KEEP_CHUNK - 1) // skin_rule.KEEP_CHUNK  # 0 without a skin, or with nothing kept
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for k in range(chunks):
        keep_chunk_row[k] = skin_rule.kept_in_chunk(k, n, last, cand, pair_stale)
    ti.loop_config(serialize=True)
    for _ in range(1):
        if chunks > 0:
            counts[C_CANDIDATES] = scan_in_place(keep_chunk_row, chunks)
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for k in range(chunks):
        skin_rule.copy_kept_chunk(k, n, last, first, cand, pair_stale, keep_chunk_row)


@ti.kernel
def geometry_regions(
    body_p: nd(dtype=vec3, ndim=2),
    body_q: nd(dtype=vec4, ndim=2),
    geom_i: nd(dtype=ivec8, ndim=1),
    geom_pair_start: nd(dtype=ti.i32, ndim=1),
    geom_pair_list: nd(dtype=ti.i32, ndim=1),
    pair_i: nd(dtype=ivec8, ndim=1),
    pair_search: nd(dtype=ti.i32, ndim=2),
    pair_box: nd(dtype=box3, ndim=2),
    geom_region: nd(dtype=box3, ndim=3),
    geom_region_G: nd(dtype=box3, ndim=3),
    geom_region_pair: nd(dtype=ti.i32, ndim=3),
    geom_region_n: nd(dtype=ti.i32, ndim=2),
):
    """Writes the region of geometry g in world w: the intersection boxes of the mesh-mesh
    pairs to search (pair_search) in which g is geometry a (the only pairs whose candidates g's elements look
    for, find_candidates), geom_region[w, g, :n] (world frame) and geom_region_G[w, g, :n] (the
    same boxes taken into g's mesh frame: the boxes of the turned boxes, inflated by
    TREE_SLACK), their pair ids geom_region_pair[w, g, :n], and their number n =
    geom_region_n[w, g] (0: no such pair). With n > REGION_BOXES, slot 0 holds the union of the
    boxes and the pair ids are not kept."""
    W = pair_search.shape[0]
    G = geom_i.shape[0]
    K = geom_region.shape[2]
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, g in ti.ndrange(W, G):
        region = empty_box()
        n = 0
        for k in range(geom_pair_start[g], geom_pair_start[g + 1]):
            p = geom_pair_list[k]
            if pair_search[w, p] == 1 and pair_i[p][P_GEOM_A] == g:
                region = union(region, pair_box[w, p])
                if n < K:
                    geom_region[w, g, n] = pair_box[w, p]
                    geom_region_pair[w, g, n] = p
                n += 1
        if n > K:
            geom_region[w, g, 0] = region
        geom_region_n[w, g] = n
        if n > 0:
            b = geom_i[g][G_BODY]
            Rt = quat_to_mat(body_q[w, b]).transpose()
            p_W = body_p[w, b]
            for k in range(ti.min(n, K) if n <= K else 1):
                local = transformed_box(geom_region[w, g, k], Rt, -(Rt @ p_W))
                geom_region_G[w, g, k] = inflated(local, TREE_SLACK * (box_reach(local) + p_W.norm()))


@ti.func
def points_box(x: ti.template()):
    """(lo, hi) [m] of the four points x (a tet's vertices, tet_local's tuple)."""
    return ti.min(x[0], x[1], x[2], x[3]), ti.max(x[0], x[1], x[2], x[3])


@ti.func
def element_box(geom_kind: ti.i32, idx: ti.i32, tet_X_G: ti.template(), tri_X_G: ti.template(), R: mat3, p: vec3) -> box3:
    """World box of tet or triangle `idx` of the pools under pose (R, p)."""
    lo = vec3(BIG)
    hi = vec3(-BIG)
    if geom_kind == TETMESH:
        lo, hi = points_box(tet_local(tet_X_G[idx], R, p))
    else:
        X = tri_X_G[idx]
        for v in ti.static(range(3)):
            x = R @ vec3(X[v, 0], X[v, 1], X[v, 2]) + p
            lo = ti.min(lo, x)
            hi = ti.max(hi, x)
    return make_box(lo, hi)


@ti.func
def clamped_box(w: ti.i32, g: ti.i32, elem: box3, geom_region: ti.template(), geom_region_n: ti.template()) -> box3:
    """The world box `elem` of an element of geometry g [m] clamped to g's region in world w:
    the hull of its overlaps with the region's boxes (slot 0 alone, the union, when the
    region has more than REGION_BOXES); empty (invalid) when it meets none. Elements of a pair
    can only meet inside the pair's box, so inside the clamped box."""
    n_region = geom_region_n[w, g]
    box = empty_box()
    n_box = n_region if n_region <= geom_region.shape[2] else 1
    for k in range(n_box):
        part = intersect(elem, geom_region[w, g, k])
        if box_valid(part) == 1:
            box = union(box, part)
    return box


@ti.func
def boxes_meet(a: box3, b: box3) -> ti.i32:
    return box_valid(intersect(a, b))


@ti.func
def box_meets_ball(b: box3, c: vec3, r: float) -> ti.i32:
    """1 when the box b and the ball (centre c, radius r) [m] share a point, up to TREE_SLACK of
    their sizes (the box's nearest point to c is within r)."""
    gap = c - ti.min(ti.max(c, box_lo(b)), box_hi(b))
    reach = r + TREE_SLACK * (box_reach(b) + c.norm() + r)
    return 1 if gap.dot(gap) <= reach * reach else 0


@ti.kernel
def find_candidates(
    body_p: nd(dtype=vec3, ndim=2),
    body_q: nd(dtype=vec4, ndim=2),
    geom_i: nd(dtype=ivec8, ndim=1),
    query_elem_geom: nd(dtype=ti.i32, ndim=1),
    query_count: ti.i32,
    tet_X_G: nd(dtype=tet_vertices, ndim=1),
    tet_p: nd(dtype=vec4, ndim=1),
    tet_grad_G: nd(dtype=vec3, ndim=1),
    geom_scale: nd(dtype=float, ndim=2),
    tri_X_G: nd(dtype=tri_vertices, ndim=1),
    geom_region: nd(dtype=box3, ndim=3),
    geom_region_G: nd(dtype=box3, ndim=3),
    geom_region_pair: nd(dtype=ti.i32, ndim=3),
    geom_region_n: nd(dtype=ti.i32, ndim=2),
    geom_pair_start: nd(dtype=ti.i32, ndim=1),
    geom_pair_list: nd(dtype=ti.i32, ndim=1),
    pair_i: nd(dtype=ivec8, ndim=1),
    pair_search: nd(dtype=ti.i32, ndim=2),
    skin: float,
    pair_ref: nd(dtype=skin_rule.pair_reference, ndim=2),
    geom_ball_G: nd(dtype=vec4, ndim=1),
    bvh_box_G: nd(dtype=box3, ndim=1),
    bvh_node: nd(dtype=ivec4, ndim=1),
    bvh_elem: nd(dtype=ti.i32, ndim=1),
    bvh_elem_box_G: nd(dtype=box3, ndim=1),
    counts: nd(dtype=ti.i32, ndim=1),
    cand: nd(dtype=ivec4, ndim=1),
    cand_span: nd(dtype=ti.i32, ndim=1),
    candidate_capacity: ti.i32,
):
    """Appends the candidates of the mesh-mesh pairs to search (pair_search), each once (found
    from a's side only): (world, pair, element of a, element of b) where b's element box meets
    a's element box inflated by the pair's skin [m] (pair_ref: `skin` or 0, see pair_activity)
    and clamped to a's region, both in the world frame, b's elements found through its tree
    (their boxes in b's mesh frame against the clamped box taken into that frame, and against
    a's element's own box in that frame widened by the pair's skin, tighter where the bodies
    are turned), unless a's box misses b's bounding ball (geom_ball_G: b's elements all lie in
    it). A tet-tet pair that clearly has no polygon (clip.clearly_no_polygon: the
    equal-pressure plane misses a tet, or a's slice by it lies outside a face of b; both tets
    taken about a's vertex 0 as the narrow phase takes them, b's rounded otherwise, which the
    tests' margins cover) is not listed; with the pair's skin, only one that has none in any
    pose the kept list must cover (b moved by at most that skin relative to a). Elements
    within the pair's skin of each other are inside the pair's box, so inside the clamped
    box: no such pair is missed."""
    W = body_p.shape[0]
    K = geom_region_pair.shape[2]
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, h in ti.ndrange(W, query_count):
        g = query_elem_geom[h]
        n_pairs = geom_region_n[w, g]
        if n_pairs > 0:
            gi = geom_i[g]
            ba = gi[G_BODY]
            la = h - gi[G_QUERY_START]
            # Most elements lie outside the region: find out in the mesh's frame, untransformed.
            local = inflated(element_box(gi[G_KIND], gi[G_POOL_START] + la, tet_X_G, tri_X_G, ti.Matrix.identity(float, 3), vec3(0.0)),
                             skin)
            near = 0
            for k in range(n_pairs if n_pairs <= K else 1):
                near |= boxes_meet(local, geom_region_G[w, g, k])
            box_a, box_tight = empty_box(), empty_box()  # inflated by the skin, and not (for pairs searched without)
            ia = gi[G_POOL_START] + la
            Ra, p_Wa = ti.Matrix.identity(float, 3), vec3(0.0)  # a's pose
            if near == 1:
                Ra, p_Wa = quat_to_mat(body_q[w, ba]), body_p[w, ba]
                elem = element_box(gi[G_KIND], ia, tet_X_G, tri_X_G, Ra, p_Wa)
                box_a = clamped_box(w, g, inflated(elem, skin), geom_region, geom_region_n)
                box_tight = box_a
                if skin > 0.0:
                    box_tight = clamped_box(w, g, elem, geom_region, geom_region_n)
            # a's tet about a local origin at its vertex 0, as the narrow phase takes it, for
            # the equal-pressure plane test of tet-tet pairs (with a skin, one that holds for
            # every pose within the skin: a kept list must, and the plane moves with the bodies).
            origin, a0, a1, a2, a3, grad_a, p_a = vec3(0.0), vec3(0.0), vec3(0.0), vec3(0.0), vec3(0.0), vec3(0.0), 0.0
            plane_test = box_valid(box_a) == 1 and gi[G_KIND] == TETMESH
            if plane_test:
                s_a = geom_scale[w % geom_scale.shape[0], g]
                Xa = tet_X_G[ia]
                origin = Ra @ vec3(Xa[0, 0], Xa[0, 1], Xa[0, 2]) + p_Wa
                a0, a1, a2, a3 = tet_local(Xa, Ra, p_Wa - origin)
                grad_a = Ra @ (s_a * tet_grad_G[ia])
                p_a = (s_a * tet_p[ia])[0]
            if box_valid(box_a) == 1:
                listed = n_pairs <= K  # else scan g's pair list
                n_scan = n_pairs if listed else geom_pair_start[g + 1] - geom_pair_start[g]
                for k in range(n_scan):
                    p = -1
                    if listed:
                        p = geom_region_pair[w, g, k]
                    else:
                        q = geom_pair_list[geom_pair_start[g] + k]
                        if pair_search[w, q] == 1 and pair_i[q][P_GEOM_A] == g:
                            p = q
                    s_p = 0.0
                    if p >= 0 and skin > 0.0:
                        s_p = pair_ref[w, p][7]
                    box_p = box_a if s_p > 0.0 else box_tight
                    if p >= 0 and box_valid(box_p) == 1:
                        gb = pair_i[p][P_GEOM_B]
                        gib = geom_i[gb]
                        bb = gib[G_BODY]
                        Rb, pb = quat_to_mat(body_q[w, bb]), body_p[w, bb]
                        # The query: box_p in the frame of b's mesh (the box of the turned box).
                        Rt = Rb.transpose()
                        query = transformed_box(box_p, Rt, -(Rt @ pb))
                        query = inflated(query, TREE_SLACK * (box_reach(query) + pb.norm()))
                        # a's element itself in b's frame, widened by the pair's skin: a tighter
                        # bound than the turned box wherever the bodies are turned.
                        own = element_box(gi[G_KIND], ia, tet_X_G, tri_X_G, Rt @ Ra, Rt @ (p_Wa - pb))
                        own_slack = TREE_SLACK * (box_reach(own) + p_Wa.norm() + pb.norm())
                        own = inflated(own, (skin if s_p > 0.0 else 0.0) + own_slack)
                        query = intersect(query, own)
                        node = gib[G_BVH_ROOT]
                        end = bvh_node[node][0]
                        ball = geom_ball_G[gb]
                        if box_meets_ball(box_p, Rb @ vec3(ball[0], ball[1], ball[2]) + pb, ball[3]) == 0:
                            node = end  # a's element is outside b's bounding ball: no element of b reaches it
                        while node < end:
                            nd_ = bvh_node[node]
                            if boxes_meet(query, bvh_box_G[node]) == 1:
                                for j in range(nd_[1], nd_[1] + nd_[2]):  # a leaf's elements
                                    if boxes_meet(query, bvh_elem_box_G[j]) == 1:
                                        lb = bvh_elem[j]
                                        ib = gib[G_POOL_START] + lb
                                        tets = plane_test and pair_i[p][P_TYPE] == PairType.TET_TET
                                        x0, x1, x2, x3 = vec3(0.0), vec3(0.0), vec3(0.0), vec3(0.0)
                                        box_b = empty_box()
                                        if tets:  # b's vertices in the world frame once, for its box and the plane test
                                            x0, x1, x2, x3 = tet_local(tet_X_G[ib], Rb, pb)
                                            lo, hi = points_box((x0, x1, x2, x3))
                                            box_b = make_box(lo, hi)
                                        else:
                                            box_b = element_box(gib[G_KIND], ib, tet_X_G, tri_X_G, Rb, pb)
                                        keep = boxes_meet(box_p, box_b)
                                        if keep == 1 and tets:
                                            s_b = geom_scale[w % geom_scale.shape[0], gb]
                                            b0, b1, b2, b3 = x0 - origin, x1 - origin, x2 - origin, x3 - origin
                                            grad_b = Rb @ (s_b * tet_grad_G[ib])
                                            p_b = (s_b * tet_p[ib])[0] - grad_b.dot(b0)
                                            no_polygon = clearly_no_polygon(a0, a1, a2, a3, grad_a, p_a, b0, b1, b2, b3, grad_b,
                                                                            p_b, s_p)
                                            keep = 1 - no_polygon
                                        if keep == 1:
                                            append_candidate(ivec4(w, p, la, lb), counts, cand, cand_span, candidate_capacity)
                                node += 1
                            else:
                                node = nd_[0]


@ti.func
def extent_reaches_plane(lowest: float, highest: float, plane: plane_record, skin: float, crossing: ti.i32) -> ti.i32:
    """1 when a set whose extent along the normal n of a planar pair's plane n . x = d
    (plane_record, mesh frame) is [lowest, highest] reaches within the skin [m] of the plane
    on its solid side, and, when `crossing`, also within the skin of its other side (the plane
    crosses it: crossing = 1), up to TREE_SLACK of the sizes (the narrow phase takes the plane
    in another frame: plane[4], the mesh body's distance from the world origin, bounds that
    rounding). Monotone in the extent: a set that fails fails for every subset."""
    slack = TREE_SLACK * (highest - lowest + ti.abs(plane[3]) + plane[4])
    return 1 if lowest <= plane[3] + slack + skin and (crossing == 0 or highest >= plane[3] - slack - skin) else 0


@ti.func
def box_reaches_plane(b: box3, plane: plane_record, skin: float, crossing: ti.i32) -> ti.i32:
    """extent_reaches_plane for the box b (mesh frame): its corners' extent along n."""
    n = vec3(plane[0], plane[1], plane[2])
    lowest, highest = 0.0, 0.0  # of the box along n
    for c in ti.static(range(3)):
        lowest += ti.min(n[c] * b[0, c], n[c] * b[1, c])
        highest += ti.max(n[c] * b[0, c], n[c] * b[1, c])
    return extent_reaches_plane(lowest, highest, plane, skin, crossing)


@ti.func
def element_reaches_plane(geom_kind: ti.i32, idx: ti.i32, tet_X_G: ti.template(), tri_X_G: ti.template(),
                          plane: plane_record, skin: float, crossing: ti.i32) -> ti.i32:
    """extent_reaches_plane for tet or triangle `idx` of the pools (mesh frame): its vertices'
    extent along n, within its box's (a tet whose box the plane crosses may lie wholly on one
    side of it: no slice, no polygon)."""
    n = vec3(plane[0], plane[1], plane[2])
    lowest, highest = BIG, -BIG
    if geom_kind == TETMESH:
        X = tet_X_G[idx]
        for v in ti.static(range(4)):
            h = n.dot(vec3(X[v, 0], X[v, 1], X[v, 2]))
            lowest, highest = ti.min(lowest, h), ti.max(highest, h)
    else:
        X = tri_X_G[idx]
        for v in ti.static(range(3)):
            h = n.dot(vec3(X[v, 0], X[v, 1], X[v, 2]))
            lowest, highest = ti.min(lowest, h), ti.max(highest, h)
    return extent_reaches_plane(lowest, highest, plane, skin, crossing)


@ti.kernel
def find_planar(
    planar_task: nd(dtype=ti.math.ivec3, ndim=1),
    planar_task_box_G: nd(dtype=box3, ndim=1),
    planar_task_count: ti.i32,
    pair_search: nd(dtype=ti.i32, ndim=2),
    pair_plane: nd(dtype=plane_record, ndim=2),
    skin: float,
    pair_ref: nd(dtype=skin_rule.pair_reference, ndim=2),
    geom_i: nd(dtype=ivec8, ndim=1),
    pair_i: nd(dtype=ivec8, ndim=1),
    tet_X_G: nd(dtype=tet_vertices, ndim=1),
    tri_X_G: nd(dtype=tri_vertices, ndim=1),
    counts: nd(dtype=ti.i32, ndim=1),
    cand: nd(dtype=ivec4, ndim=1),
    cand_span: nd(dtype=ti.i32, ndim=1),
    candidate_capacity: ti.i32,
):
    """Appends the candidates of the planar pairs to search (pair_search), one thread per
    world and planar task (a pair and a run of its mesh's elements, model.PLANAR_CHUNK at
    most): (world, pair, element, 0) for the elements whose
    vertices (mesh frame) reach within the pair's skin [m] (pair_ref: `skin` or 0, see
    pair_activity) of the plane z = 0 of the half-space body
    (solid below): those the plane crosses when the half-space is rigid (an element wholly
    inside or outside it has no slice), those that reach below it when it is a compliant slab (the equal-pressure surface of a submerged tet,
    or a submerged triangle, is a polygon too). Candidates come in element order, as the
    elements were clipped before the trees: Gauss-Seidel's sweeps follow the rows' order, and
    a tree's spatial order (one side of a resting ring after the other) left a stiff ring
    rocking (tests/test_rigid_contact.py)."""
    W = pair_search.shape[0]
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, k in ti.ndrange(W, planar_task_count):
        task = planar_task[k]
        pair = task[0]
        if pair_search[w, pair] == 1:
            pr = pair_i[pair]
            t = pr[P_TYPE]
            gm = geom_i[pr[P_GEOM_B] if t == PairType.SLAB_TRI else pr[P_GEOM_A]]  # the mesh
            plane = pair_plane[w, pair]
            crossing = 1 if t == PairType.TET_PLANE else 0
            s_p = 0.0
            if skin > 0.0:  # (pair_ref is a placeholder without a skin)
                s_p = pair_ref[w, pair][7]
            if box_reaches_plane(planar_task_box_G[k], plane, s_p, crossing) == 1:
                for e in range(task[1], task[1] + task[2]):
                    if element_reaches_plane(gm[G_KIND], gm[G_POOL_START] + e, tet_X_G, tri_X_G, plane, s_p, crossing) == 1:
                        append_candidate(ivec4(w, pair, e, 0), counts, cand, cand_span, candidate_capacity)
