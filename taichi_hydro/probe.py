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
