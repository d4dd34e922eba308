"""Tiny kernels that check a backend does what our kernels rely on."""

import taichi as ti

from . import backend


@ti.kernel
def loop_atomics(out: ti.types.ndarray(dtype=ti.i32, ndim=1), n: ti.i32):
    """out[k] += 1 for k < n, by integer atomics in a loop with a run-time trip count."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for _ in range(1):
        for k in range(n):
            ti.atomic_add(out[k], 1)


@ti.kernel
def spread_work(out: ti.types.ndarray(dtype=ti.f32, ndim=1), rounds: ti.i32):
    """out[i] = a chain of `rounds` sines from i: equal work per item, in a loop the cpu
    backend's pool spreads over all its threads (affinity.pin_pool's probe)."""
    for i in range(out.shape[0]):
        x = ti.cast(i, ti.f32) * 1e-3
        for _ in range(rounds):
            x = ti.sin(x)
        out[i] = x
