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
   total impulse of each pair (sum_pair_weights, sum_pair_impulses), and, in the "contact"
   schedule, every body's velocity change M^-1 J^T delta_gamma
   (solver.contact_schedule.gather_impulses: each body walks the rows of its pairs instead of
   each contact adding into its bodies).

Integer atomics, atomic min and max are exact and stay. The cost (extra launches, the O(n^2)
rank, a gather that reads each row twice) is measured by `python -m bench.run dynamics
--deterministic`."""

import taichi as ti

from .. import backend

from ..types import C_POLYGONS, K_ELEM_A, K_ELEM_B, K_PAIR, K_WORLD, M_FORCE0, ivec4, mat3, nd, vec3, vec4


@ti.func
def key_less(a: ivec4, b: ivec4) -> ti.i32:
    """(pair, element of a, element of b) of a before that of b (same world)."""
    less = 0
    if a[K_PAIR] != b[K_PAIR]:
        less = 1 if a[K_PAIR] < b[K_PAIR] else 0
    elif a[K_ELEM_A] != b[K_ELEM_A]:
        less = 1 if a[K_ELEM_A] < b[K_ELEM_A] else 0
    elif a[K_ELEM_B] < b[K_ELEM_B]:
        less = 1
    return less


@ti.kernel
def pair_offsets(world_start: nd(dtype=ti.i32, ndim=1), pair_rows: nd(dtype=ti.i32, ndim=2), pair_first: nd(dtype=ti.i32, ndim=2),
                 pair_end: nd(dtype=ti.i32, ndim=2)):
    """Rows [pair_first, pair_end) of each (world, pair), in pair order within the world's rows,
    from the row count per pair (pair_rows)."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w in range(pair_rows.shape[0]):
        row = world_start[w]
        for p in range(pair_rows.shape[1]):
            pair_first[w, p] = row
            row += pair_rows[w, p]
            pair_end[w, p] = row


@ti.kernel
def scatter_rows(counts: nd(dtype=ti.i32, ndim=1), poly_i: nd(dtype=ivec4, ndim=1), poly_slot: nd(dtype=ti.i32, ndim=1),
                 pair_first: nd(dtype=ti.i32, ndim=2), row_poly: nd(dtype=ti.i32, ndim=1)):
    """row_poly[row] = polygon index, rows of a pair in arbitrary order (poly_slot holds the
    polygon's arrival order within its pair)."""
    n = ti.min(counts[C_POLYGONS], poly_i.shape[0])
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for k in range(n):
        if poly_slot[k] >= 0:
            row_poly[pair_first[poly_i[k][K_WORLD], poly_i[k][K_PAIR]] + poly_slot[k]] = k


@ti.kernel
def rank_rows(world_start: nd(dtype=ti.i32, ndim=1), poly_i: nd(dtype=ivec4, ndim=1), pair_first: nd(dtype=ti.i32, ndim=2),
              pair_end: nd(dtype=ti.i32, ndim=2), row_poly: nd(dtype=ti.i32, ndim=1), poly_slot: nd(dtype=ti.i32, ndim=1)):
    """poly_slot[k] = the polygon's row within its world, in key order (ties, which a valid pool
    does not have, are broken by pool index so that rows never collide)."""
    W = world_start.shape[0] - 1
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for r in range(world_start[W]):
        k = row_poly[r]
        key = poly_i[k]
        w, p = key[K_WORLD], key[K_PAIR]
        rank = 0
        for s in range(pair_first[w, p], pair_end[w, p]):
            other = poly_i[row_poly[s]]
            same = other[K_ELEM_A] == key[K_ELEM_A] and other[K_ELEM_B] == key[K_ELEM_B]
            if key_less(other, key) == 1 or (same and row_poly[s] < k):
                rank += 1
        poly_slot[k] = pair_first[w, p] - world_start[w] + rank


@ti.kernel
def sum_pair_weights(pair_first: nd(dtype=ti.i32, ndim=2), pair_end: nd(dtype=ti.i32, ndim=2), c_model: nd(dtype=vec4, ndim=1),
                     pair_weight: nd(dtype=float, ndim=2)):
    """pair_weight = sum of (A p0)+ [N] over each (world, pair)'s rows, in row order (the
    warm-start weights)."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, p in ti.ndrange(pair_first.shape[0], pair_first.shape[1]):
        total = 0.0
        for c in range(pair_first[w, p], pair_end[w, p]):
            total += ti.max(c_model[c][M_FORCE0], 0.0)
        pair_weight[w, p] = total


@ti.kernel
def sum_pair_impulses(pair_first: nd(dtype=ti.i32, ndim=2), pair_end: nd(dtype=ti.i32, ndim=2), c_frame: nd(dtype=mat3, ndim=1),
                      c_gamma: nd(dtype=vec3, ndim=1), pair_impulse: nd(dtype=vec3, ndim=2)):
    """pair_impulse = sum of the impulses on each (world, pair)'s higher body, world frame
    [N s], in row order."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, p in ti.ndrange(pair_first.shape[0], pair_first.shape[1]):
        total = vec3(0.0)
        for c in range(pair_first[w, p], pair_end[w, p]):
            total += c_frame[c].transpose() @ c_gamma[c]
        pair_impulse[w, p] = total
