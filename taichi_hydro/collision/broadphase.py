"""Broad phase on the device, all worlds at once (DESIGN §3 step 2).

1. world boxes of the mesh geometries; pair activity per world (box overlap, or box below the
   plane for half-space pairs) and, for hashed pairs, the intersection box;
2. per geometry, its active pairs and their intersection boxes ("region"): elements outside
   every box cannot touch anything, and each element's box is clamped to the hull of its
   overlaps with them (a big floor triangle shrinks to the patch it can touch);
3. a spatial hash keyed by (world, geometry, cell): elements append their cells, count per
   bucket -> exclusive scan -> scatter;
4. for every entry of an active pair's geometry a, the entries of geometry b in the same cell
   (one bucket lookup) whose boxes overlap, reported once (only in the cell holding the
   minimum corner of their box intersection). Keying by geometry means elements of one body
   are never compared with each other. A sphere's tets all meet at its centre: with (world,
   cell) keys a quarter of a landed pile's pair tests compared tets of one sphere, and a
   third were hash collisions between different cells.
"""

import taichi as ti

from .. import hashing
from ..math3d import finite_pose, quat_to_mat
from ..types import (
    C_ACTIVE, C_CANDIDATES, C_ENTRIES, FROZEN_POSE, G_BODY, G_HASH_START, G_KIND, G_POOL_START, P_GEOM_A, P_GEOM_B, P_TYPE,
    TETMESH, PairType, box3, ivec4, ivec8, mat3, nd, tet_vertices, tri_vertices, vec3, vec4,
)

BIG = 1e30
# Boxes kept per (world, geometry) to clamp elements to (one per active pair; past this many,
# their union). More boxes clamp tighter; each costs 24 bytes per world and geometry.
REGION_BOXES = 8


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
def hash_cell(w: ti.i32, g: ti.i32, ix: ti.i32, iy: ti.i32, iz: ti.i32, mask: ti.i32) -> ti.i32:
    """Bucket of geometry g's entries in cell (ix, iy, iz) of world w."""
    h = ti.u32(0x811C9DC5)
    h = hashing.combine(h, w)
    h = hashing.combine(h, g)
    h = hashing.combine(h, ix)
    h = hashing.combine(h, iy)
    h = hashing.combine(h, iz)
    return hashing.slot(h, mask)


@ti.func
def cell_of(x: vec3, inv_cell: float) -> ti.math.ivec3:
    return ti.cast(ti.floor(x * inv_cell), ti.i32)


@ti.kernel
def clear_hash(counts: nd(dtype=ti.i32, ndim=1), bucket_start: nd(dtype=ti.i32, ndim=1)):
    """Writes counts = 0 and bucket_start = 0 (the per-bucket counts before the scan)."""
    for i in range(counts.shape[0]):
        counts[i] = 0
    for b in range(bucket_start.shape[0]):
        bucket_start[b] = 0


@ti.kernel
def pair_activity(
    world_status: nd(dtype=ti.i32, ndim=1),
    body_p: nd(dtype=vec3, ndim=2),
    body_q: nd(dtype=vec4, ndim=2),
    geom_i: nd(dtype=ivec8, ndim=1),
    geom_box_G: nd(dtype=box3, ndim=1),
    geom_ball_G: nd(dtype=vec4, ndim=1),
    pair_i: nd(dtype=ivec8, ndim=1),
    pair_active: nd(dtype=ti.i32, ndim=2),
    pair_box: nd(dtype=box3, ndim=2),
):
    """Reads poses and geometry boxes. Writes pair_active[w, p] (1 when the geometries' boxes
    overlap, or the mesh box reaches below a half-space; 0 in a diverged world) and
    pair_box[w, p], the box intersection of a hashed pair. A pair with a non-finite pose (as a
    write through a state view can leave) is inactive and marks its world diverged, so no
    later stage of the step works on that world."""
    W = body_p.shape[0]
    P = pair_i.shape[0]
    for w, p in ti.ndrange(W, P):
        pr = pair_i[p]
        t = pr[P_TYPE]
        ga, gb = pr[P_GEOM_A], pr[P_GEOM_B]
        active = 0
        inter = empty_box()
        ba, bb = geom_i[ga][G_BODY], geom_i[gb][G_BODY]
        if world_status[w] != 0:
            active = 0
        elif finite_pose(body_p[w, ba], body_q[w, ba]) == 0 or finite_pose(body_p[w, bb], body_q[w, bb]) == 0:
            ti.atomic_max(world_status[w], FROZEN_POSE)
            active = 0
        elif t == PairType.TET_TET or t == PairType.TET_TRI:
            box_a = geometry_box(geom_box_G[ga], geom_ball_G[ga], quat_to_mat(body_q[w, ba]), body_p[w, ba])
            box_b = geometry_box(geom_box_G[gb], geom_ball_G[gb], quat_to_mat(body_q[w, bb]), body_p[w, bb])
            inter = intersect(box_a, box_b)
            active = box_valid(inter)
        else:
            mesh, plane = ga, gb
            if t == PairType.SLAB_TRI:
                mesh, plane = gb, ga
            bm, bh = geom_i[mesh][G_BODY], geom_i[plane][G_BODY]
            box_m = geometry_box(geom_box_G[mesh], geom_ball_G[mesh], quat_to_mat(body_q[w, bm]), body_p[w, bm])
            n = quat_to_mat(body_q[w, bh]) @ vec3(0.0, 0.0, 1.0)
            # Lowest corner of the box along n, relative to the plane.
            lowest = 0.0
            for k in ti.static(range(3)):
                lowest += ti.min(n[k] * box_m[0, k], n[k] * box_m[1, k])
            if lowest - n.dot(body_p[w, bh]) <= 0.0:
                active = 1
        pair_active[w, p] = active
        pair_box[w, p] = inter


@ti.kernel
def geometry_regions(
    geom_i: nd(dtype=ivec8, ndim=1),
    geom_pair_start: nd(dtype=ti.i32, ndim=1),
    geom_pair_list: nd(dtype=ti.i32, ndim=1),
    pair_active: nd(dtype=ti.i32, ndim=2),
    pair_box: nd(dtype=box3, ndim=2),
    geom_region: nd(dtype=box3, ndim=3),
    geom_region_pair: nd(dtype=ti.i32, ndim=3),
    geom_region_n: nd(dtype=ti.i32, ndim=2),
):
    """Writes the region of geometry g in world w: the intersection boxes of g's active hashed
    pairs, geom_region[w, g, :n], their pair ids geom_region_pair[w, g, :n], and their number
    n = geom_region_n[w, g] (0: no active pair). With n > REGION_BOXES, slot 0 holds the union
    of the boxes and the pair ids are not kept."""
    W = pair_active.shape[0]
    G = geom_i.shape[0]
    K = geom_region.shape[2]
    for w, g in ti.ndrange(W, G):
        region = empty_box()
        n = 0
        for k in range(geom_pair_start[g], geom_pair_start[g + 1]):
            p = geom_pair_list[k]
            if pair_active[w, p] == 1:
                region = union(region, pair_box[w, p])
                if n < K:
                    geom_region[w, g, n] = pair_box[w, p]
                    geom_region_pair[w, g, n] = p
                n += 1
        if n > K:
            geom_region[w, g, 0] = region
        geom_region_n[w, g] = n


@ti.func
def element_box(geom_kind: ti.i32, idx: ti.i32, tet_X_G: ti.template(), tri_X_G: ti.template(), R: mat3, p: vec3) -> box3:
    """World box of tet or triangle `idx` of the pools under pose (R, p)."""
    lo = vec3(BIG)
    hi = vec3(-BIG)
    if geom_kind == TETMESH:
        X = tet_X_G[idx]
        for v in ti.static(range(4)):
            x = R @ vec3(X[v, 0], X[v, 1], X[v, 2]) + p
            lo = ti.min(lo, x)
            hi = ti.max(hi, x)
    else:
        X = tri_X_G[idx]
        for v in ti.static(range(3)):
            x = R @ vec3(X[v, 0], X[v, 1], X[v, 2]) + p
            lo = ti.min(lo, x)
            hi = ti.max(hi, x)
    return make_box(lo, hi)


@ti.kernel
def insert_elements(
    body_p: nd(dtype=vec3, ndim=2),
    body_q: nd(dtype=vec4, ndim=2),
    geom_i: nd(dtype=ivec8, ndim=1),
    hash_elem_geom: nd(dtype=ti.i32, ndim=1),
    tet_X_G: nd(dtype=tet_vertices, ndim=1),
    tri_X_G: nd(dtype=tri_vertices, ndim=1),
    geom_region: nd(dtype=box3, ndim=3),
    geom_region_n: nd(dtype=ti.i32, ndim=2),
    inv_cell: float,
    hash_count: ti.i32,
    counts: nd(dtype=ti.i32, ndim=1),
    act_we: nd(dtype=ti.math.ivec2, ndim=1),
    act_box: nd(dtype=box3, ndim=1),
    ent_key: nd(dtype=ivec4, ndim=1),
    ent_act: nd(dtype=ti.i32, ndim=1),
    ent_bucket: nd(dtype=ti.i32, ndim=1),
    bucket_start: nd(dtype=ti.i32, ndim=1),
):
    """Every hashed element that meets its geometry's region: appends an active record (world,
    element, box clamped to the region: the hull of its overlaps with the region's boxes) and
    one entry per cell it covers, and counts entries per bucket. Overflowing appends are
    counted but not written.

    Clamping keeps every candidate: elements of a pair can only overlap inside the pair's
    box, so the overlap of two clamped boxes equals the overlap of the element boxes."""
    W = body_p.shape[0]
    act_cap = act_box.shape[0]
    ent_cap = ent_key.shape[0]
    mask = bucket_start.shape[0] - 2  # bucket_start has 2^k + 1 slots (counts here, offsets after the scan)
    for w, h in ti.ndrange(W, hash_count):
        g = hash_elem_geom[h]
        n_region = geom_region_n[w, g]
        if n_region > 0:
            gi = geom_i[g]
            b = gi[G_BODY]
            idx = gi[G_POOL_START] + h - gi[G_HASH_START]
            elem = element_box(gi[G_KIND], idx, tet_X_G, tri_X_G, quat_to_mat(body_q[w, b]), body_p[w, b])
            box = empty_box()
            n_box = n_region if n_region <= geom_region.shape[2] else 1  # else slot 0: the union
            for k in range(n_box):
                part = intersect(elem, geom_region[w, g, k])
                if box_valid(part) == 1:
                    box = union(box, part)
            if box_valid(box) == 1:
                a = ti.atomic_add(counts[C_ACTIVE], 1)
                if a < act_cap:
                    act_we[a] = ti.math.ivec2(w, h)
                    act_box[a] = box
                    lo = cell_of(box_lo(box), inv_cell)
                    hi = cell_of(box_hi(box), inv_cell)
                    span = hi - lo + 1
                    ncell = span[0] * span[1] * span[2]
                    e0 = ti.atomic_add(counts[C_ENTRIES], ncell)
                    for k in range(ncell):
                        e = e0 + k
                        if e < ent_cap:
                            ix = lo[0] + k % span[0]
                            iy = lo[1] + (k // span[0]) % span[1]
                            iz = lo[2] + k // (span[0] * span[1])
                            bucket = hash_cell(w, g, ix, iy, iz, mask)
                            ent_key[e] = ivec4(w, ix, iy, iz)
                            ent_act[e] = a
                            ent_bucket[e] = bucket
                            ti.atomic_add(bucket_start[bucket], 1)


@ti.kernel
def scatter_entries(
    counts: nd(dtype=ti.i32, ndim=1),
    ent_bucket: nd(dtype=ti.i32, ndim=1),
    bucket_cursor: nd(dtype=ti.i32, ndim=1),
    sorted_ent: nd(dtype=ti.i32, ndim=1),
):
    """Writes sorted_ent: entry ids grouped by bucket (bucket_cursor starts at each bucket's
    first slot and is consumed)."""
    n = ti.min(counts[C_ENTRIES], sorted_ent.shape[0])
    for e in range(n):
        pos = ti.atomic_add(bucket_cursor[ent_bucket[e]], 1)
        sorted_ent[pos] = e


@ti.kernel
def find_candidates(
    counts: nd(dtype=ti.i32, ndim=1),
    sorted_ent: nd(dtype=ti.i32, ndim=1),
    ent_key: nd(dtype=ivec4, ndim=1),
    ent_act: nd(dtype=ti.i32, ndim=1),
    bucket_start: nd(dtype=ti.i32, ndim=1),
    act_we: nd(dtype=ti.math.ivec2, ndim=1),
    act_box: nd(dtype=box3, ndim=1),
    hash_elem_geom: nd(dtype=ti.i32, ndim=1),
    geom_i: nd(dtype=ivec8, ndim=1),
    geom_pair_start: nd(dtype=ti.i32, ndim=1),
    geom_pair_list: nd(dtype=ti.i32, ndim=1),
    geom_region_pair: nd(dtype=ti.i32, ndim=3),
    geom_region_n: nd(dtype=ti.i32, ndim=2),
    pair_i: nd(dtype=ivec8, ndim=1),
    pair_active: nd(dtype=ti.i32, ndim=2),
    inv_cell: float,
    cand: nd(dtype=ivec4, ndim=1),
):
    """Appends candidates (world, pair, element of geometry a, element of geometry b): element
    pairs of an active hashed pair that share a cell and whose boxes overlap, each once. Each
    entry of a pair's geometry a looks up the bucket of geometry b in its cell (buckets are
    keyed by geometry, so elements of the same body are never compared), and a pair is
    reported only in the cell that holds the minimum corner of the boxes' overlap."""
    n = ti.min(counts[C_ENTRIES], sorted_ent.shape[0])
    cap = cand.shape[0]
    mask = bucket_start.shape[0] - 2
    K = geom_region_pair.shape[2]
    for e in range(n):
        key = ent_key[e]
        w = key[0]
        ai = ent_act[e]
        h = act_we[ai][1]
        g = hash_elem_geom[h]
        box_e = act_box[ai]
        n_pairs = geom_region_n[w, g]
        listed = n_pairs <= K  # else scan g's pair list
        n_scan = n_pairs if listed else geom_pair_start[g + 1] - geom_pair_start[g]
        for k in range(n_scan):
            p = -1
            if listed:
                p = geom_region_pair[w, g, k]
            else:
                q = geom_pair_list[geom_pair_start[g] + k]
                if pair_active[w, q] == 1:
                    p = q
            if p >= 0 and pair_i[p][P_GEOM_A] == g:
                gb = pair_i[p][P_GEOM_B]
                bucket = hash_cell(w, gb, key[1], key[2], key[3], mask)
                for j in range(bucket_start[bucket], bucket_start[bucket + 1]):
                    e2 = sorted_ent[j]
                    if hashing.same_key(ent_key[e2], key) == 1:
                        aj = ent_act[e2]
                        h2 = act_we[aj][1]
                        if hash_elem_geom[h2] == gb:
                            inter = intersect(box_e, act_box[aj])
                            if box_valid(inter) == 1:
                                c = cell_of(box_lo(inter), inv_cell)
                                if c[0] == key[1] and c[1] == key[2] and c[2] == key[3]:
                                    k_out = ti.atomic_add(counts[C_CANDIDATES], 1)
                                    if k_out < cap:
                                        cand[k_out] = ivec4(w, p, h - geom_i[g][G_HASH_START], h2 - geom_i[gb][G_HASH_START])
