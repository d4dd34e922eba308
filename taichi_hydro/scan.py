"""Exclusive prefix sum of an i32 ndarray in three launches, on every backend (Taichi's own
PrefixSumExecutor works on fields and only on CUDA/Vulkan; this one takes ndarrays anywhere)."""

import taichi as ti

nd = ti.types.ndarray

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


@ti.kernel
def scan_add(x: nd(dtype=ti.i32, ndim=1), copy: nd(dtype=ti.i32, ndim=1), block_sum: nd(dtype=ti.i32, ndim=1), n: ti.i32):
    """x[i] += offset of its block; copy = x; x[n] = total."""
    for i in range(n + 1):
        v = 0
        if i < n:
            v = x[i] + block_sum[i // BLOCK]
        else:
            v = block_sum[(n + BLOCK - 1) // BLOCK]
        x[i] = v
        copy[i] = v


def block_sum_size(n: int) -> int:
    """Length of the scratch array exclusive_scan needs for n items."""
    return (n + BLOCK - 1) // BLOCK + 1


def block_count(n: int) -> int:
    return (n + BLOCK - 1) // BLOCK


def exclusive_scan(x, copy, scratch, n: int) -> None:
    """In place: x[i] = sum(x[:i]) for i <= n (x[n] = total); copy receives the same values.
    x and copy need n + 1 entries, scratch block_sum_size(n)."""
    scan_blocks(x, scratch, n)
    scan_sums(scratch, block_count(n))
    scan_add(x, copy, scratch, n)
