"""Counters a step keeps on the device, read by the host once per chunk of steps."""

import taichi as ti

from . import backend

from .types import C_POLYGONS, S_CONTACTS, S_ITERATIONS, S_POLYGONS, S_STEPS, nd


@ti.kernel
def track_counts(
    counts: nd(dtype=ti.i32, ndim=1),
    max_counts: nd(dtype=ti.i32, ndim=1),
    world_start: nd(dtype=ti.i32, ndim=1),
    world_iterations: nd(dtype=ti.i32, ndim=1),
    stat_sums: nd(dtype=float, ndim=1),
):
    """max_counts = elementwise max of the pool counters over the chunk (overflow check);
    stat_sums += (steps, polygons, contacts, solver iterations summed over worlds) of the step
    before (slots types.S_*)."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for i in range(counts.shape[0]):
        ti.atomic_max(max_counts[i], counts[i])
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for _ in range(1):
        stat_sums[S_STEPS] += 1.0
        stat_sums[S_POLYGONS] += counts[C_POLYGONS]
        stat_sums[S_CONTACTS] += world_start[world_start.shape[0] - 1]
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w in range(world_iterations.shape[0]):
        stat_sums[S_ITERATIONS] += world_iterations[w]
