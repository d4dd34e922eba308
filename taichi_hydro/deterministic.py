"""Deterministic mode ([solver] deterministic = true): results that do not depend on the order
in which threads run, bit for bit from run to run and world for world (a world of a batch
equals the same world simulated alone).

The polygon pool is filled through an atomic counter, so its order changes from run to run.
Everything downstream that depends on order is made order-free:

1. Contact rows are sorted within each world by the polygon's identity (pair, element of a,
   element of b): count_contacts counts rows per (world, pair) with integer atomics (exact);
   pair_offsets turns the counts into row ranges; scatter_rows puts each polygon in its pair's
   range; rank_rows ranks it there by its elements (O(n^2) per pair, and pairs are small).
   The Gauss-Seidel order of the "world" schedule follows.
2. Float sums run in row order instead of as float atomics: the warm-start weight and the
   total impulse of each pair (sum_pair_rows), and, in the "contact" schedule, every body's
   velocity change M^-1 J^T delta_gamma (gather_impulses: each body walks the rows of its
   pairs instead of each contact adding into its bodies).

Integer atomics, atomic min and max are exact and stay. The cost (extra launches, the O(n^2)
rank, a gather that reads each row twice) is measured by `python -m bench.run dynamics
--deterministic`."""

import taichi as ti

from .model import P_BODY_LO

nd = ti.types.ndarray
vec3 = ti.math.vec3
vec4 = ti.math.vec4
mat3 = ti.math.mat3
ivec4 = ti.types.vector(4, ti.i32)
ivec8 = ti.types.vector(8, ti.i32)


@ti.func
def key_less(a: ivec4, b: ivec4) -> ti.i32:
    """(pair, element of a, element of b) of a before that of b (same world)."""
    less = 0
    if a[1] != b[1]:
        less = 1 if a[1] < b[1] else 0
    elif a[2] != b[2]:
        less = 1 if a[2] < b[2] else 0
    elif a[3] < b[3]:
        less = 1
    return less


@ti.kernel
def pair_offsets(world_start: nd(dtype=ti.i32, ndim=1), pair_rows: nd(dtype=ti.i32, ndim=2), pair_first: nd(dtype=ti.i32, ndim=2),
                 pair_end: nd(dtype=ti.i32, ndim=2)):
    """Rows [pair_first, pair_end) of each (world, pair), in pair order within the world's rows,
    from the row count per pair (pair_rows)."""
    for w in range(pair_rows.shape[0]):
        row = world_start[w]
        for p in range(pair_rows.shape[1]):
            pair_first[w, p] = row
            row += pair_rows[w, p]
            pair_end[w, p] = row


@ti.kernel
def scatter_rows(counts: nd(dtype=ti.i32, ndim=1), poly_i: nd(dtype=ivec4, ndim=1), poly_slot: nd(dtype=ti.i32, ndim=1),
                 pair_first: nd(dtype=ti.i32, ndim=2), row_poly: nd(dtype=ti.i32, ndim=1), n_index: ti.i32):
    """row_poly[row] = polygon index, rows of a pair in arbitrary order (poly_slot holds the
    polygon's arrival order within its pair). n_index: the pool counter's index in counts."""
    n = ti.min(counts[n_index], poly_i.shape[0])
    for k in range(n):
        if poly_slot[k] >= 0:
            row_poly[pair_first[poly_i[k][0], poly_i[k][1]] + poly_slot[k]] = k


@ti.kernel
def rank_rows(world_start: nd(dtype=ti.i32, ndim=1), poly_i: nd(dtype=ivec4, ndim=1), pair_first: nd(dtype=ti.i32, ndim=2),
              pair_end: nd(dtype=ti.i32, ndim=2), row_poly: nd(dtype=ti.i32, ndim=1), poly_slot: nd(dtype=ti.i32, ndim=1)):
    """poly_slot[k] = the polygon's row within its world, in key order (ties, which a valid pool
    does not have, are broken by pool index so that rows never collide)."""
    W = world_start.shape[0] - 1
    for r in range(world_start[W]):
        k = row_poly[r]
        key = poly_i[k]
        w, p = key[0], key[1]
        rank = 0
        for s in range(pair_first[w, p], pair_end[w, p]):
            other = poly_i[row_poly[s]]
            if key_less(other, key) == 1 or (other[2] == key[2] and other[3] == key[3] and row_poly[s] < k):
                rank += 1
        poly_slot[k] = pair_first[w, p] - world_start[w] + rank


@ti.kernel
def sum_pair_rows(pair_first: nd(dtype=ti.i32, ndim=2), pair_end: nd(dtype=ti.i32, ndim=2), c_frame: nd(dtype=mat3, ndim=1),
                  c_gamma: nd(dtype=vec3, ndim=1), c_model: nd(dtype=vec4, ndim=1), pair_weight: nd(dtype=float, ndim=2),
                  pair_impulse: nd(dtype=vec3, ndim=2), impulse: ti.i32):
    """In row order, per (world, pair): impulse == 0: pair_weight = sum of (A p0)+ [N] (the
    warm-start weights); impulse == 1: pair_impulse = sum of the impulses on the pair's higher
    body, world frame [N s]."""
    for w, p in pair_first:
        if impulse == 0:
            total = 0.0
            for c in range(pair_first[w, p], pair_end[w, p]):
                total += ti.max(c_model[c][3], 0.0)
            pair_weight[w, p] = total
        else:
            total = vec3(0.0)
            for c in range(pair_first[w, p], pair_end[w, p]):
                total += c_frame[c].transpose() @ c_gamma[c]
            pair_impulse[w, p] = total


@ti.kernel
def gather_impulses(
    world_status: nd(dtype=ti.i32, ndim=1),
    world_stats: nd(dtype=vec4, ndim=1),
    body_pair_start: nd(dtype=ti.i32, ndim=1),
    body_pairs: nd(dtype=ti.i32, ndim=1),
    pair_i: nd(dtype=ivec8, ndim=1),
    pair_first: nd(dtype=ti.i32, ndim=2),
    pair_end: nd(dtype=ti.i32, ndim=2),
    c_frame: nd(dtype=mat3, ndim=1),
    c_ra: nd(dtype=vec3, ndim=1),
    c_rb: nd(dtype=vec3, ndim=1),
    source: nd(dtype=vec3, ndim=1),
    body_vc: nd(dtype=vec3, ndim=2),
    body_w: nd(dtype=vec3, ndim=2),
    body_inv_mass: nd(dtype=float, ndim=2),
    body_inv_inertia_W: nd(dtype=mat3, ndim=2),
    sweep: ti.i32,
):
    """v += M^-1 J^T source for every dynamic body, each body summing the rows of its pairs in
    order (source: contact-frame impulses, the warm start c_gamma or a sweep's changes). With
    sweep == 1 only worlds still iterating (world_stats[w][3] == 0) are updated."""
    for w, b in body_vc:
        wm = w % body_inv_mass.shape[0]
        if world_status[w] == 0 and body_inv_mass[wm, b] > 0.0 and (sweep == 0 or world_stats[w][3] == 0.0):
            dv = vec3(0.0)
            dl = vec3(0.0)  # sum of r x impulse, mapped by the inverse inertia once at the end
            for j in range(body_pair_start[b], body_pair_start[b + 1]):
                p = body_pairs[j]
                sign = 1.0
                if pair_i[p][P_BODY_LO] == b:
                    sign = -1.0
                for c in range(pair_first[w, p], pair_end[w, p]):
                    impulse = sign * (c_frame[c].transpose() @ source[c])
                    dv += impulse
                    r = c_rb[c]
                    if sign < 0.0:
                        r = c_ra[c]
                    dl += r.cross(impulse)
            body_vc[w, b] += body_inv_mass[wm, b] * dv
            body_w[w, b] += body_inv_inertia_W[w, b] @ dl
