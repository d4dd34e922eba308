"""Exclusive prefix sum of an i32 ndarray in three launches (scan_blocks, scan_sums, scan_add),
on every backend (Taichi's own PrefixSumExecutor works on fields and only on CUDA/Vulkan; this
one takes ndarrays anywhere)."""

import taichi as ti

from .types import nd

BLOCK = 1024


@ti.kernel
def scan_blocks(x: nd(dtype=ti.i32, ndim=1), block_sum: nd(dtype=ti.i32, ndim=1), n: ti.i32):
    """Reads/writes x[0:n] (exclusive scan within each block); writes block_sum."""
    for b in range((n + BLOCK - 1) // BLOCK):
        total = 0
        for k in range(BLOCK):
            i = b * BLOCK + k
            if i < n:
                v = x[i]
                x[i] = total
                total += v
        block_sum[b] = total


@ti.kernel
def scan_sums(block_sum: nd(dtype=ti.i32, ndim=1), nblocks: ti.i32):
    """Exclusive scan of the block sums in one thread."""
    ti.loop_config(serialize=True)
    for _ in range(1):
        total = 0
        for b in range(nblocks):
            v = block_sum[b]
            block_sum[b] = total
            total += v
        block_sum[nblocks] = total


@ti.func
def scanned(x: ti.template(), block_sum: ti.template(), n: ti.i32, i: ti.i32) -> ti.i32:
    """x[i] plus the offset of its block; for i = n the total."""
    v = 0
    if i < n:
        v = x[i] + block_sum[i // BLOCK]
    else:
        v = block_sum[(n + BLOCK - 1) // BLOCK]
    return v


@ti.kernel
def scan_add(x: nd(dtype=ti.i32, ndim=1), block_sum: nd(dtype=ti.i32, ndim=1), n: ti.i32):
    """x[i] += offset of its block; x[n] = total."""
    for i in range(n + 1):
        x[i] = scanned(x, block_sum, n, i)


@ti.kernel
def scan_add_copy(x: nd(dtype=ti.i32, ndim=1), copy: nd(dtype=ti.i32, ndim=1), block_sum: nd(dtype=ti.i32, ndim=1), n: ti.i32):
    """scan_add, and copy = x (a cursor array for a scatter that follows)."""
    for i in range(n + 1):
        v = scanned(x, block_sum, n, i)
        x[i] = v
        copy[i] = v


def block_sum_size(n: int) -> int:
    """Length of the scratch array (block sums) a scan of n items needs."""
    return (n + BLOCK - 1) // BLOCK + 1


def block_count(n: int) -> int:
    """Blocks of BLOCK items in n items."""
    return (n + BLOCK - 1) // BLOCK
