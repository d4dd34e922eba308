"""Counters a step keeps on the device, read by the host once per chunk of steps."""

import taichi as ti

from .broadphase import C_POLYGONS

nd = ti.types.ndarray


@ti.kernel
def track_counts(
    counts: nd(dtype=ti.i32, ndim=1),
    max_counts: nd(dtype=ti.i32, ndim=1),
    world_start: nd(dtype=ti.i32, ndim=1),
    world_stats: nd(dtype=ti.math.vec4, ndim=1),
    stat_sums: nd(dtype=float, ndim=1),
):
    """max_counts = elementwise max of the pool counters over the chunk (overflow check);
    stat_sums += (steps, polygons, contacts, solver iterations summed over worlds)."""
    for i in counts:
        ti.atomic_max(max_counts[i], counts[i])
    for _ in range(1):
        stat_sums[0] += 1.0
        stat_sums[1] += counts[C_POLYGONS]
        stat_sums[2] += world_start[world_start.shape[0] - 1]
    for w in world_stats:
        stat_sums[3] += world_stats[w][0]
