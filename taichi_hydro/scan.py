"""Exclusive prefix sum of an i32 ndarray on every backend (Taichi's own PrefixSumExecutor
works on fields and only on CUDA/Vulkan; this one takes ndarrays anywhere): one launch
(scan_serial) for up to BLOCK items, such as the worlds of most batches, else three
(scan_blocks, scan_serial over the block sums, scan_add). add_scan picks them when a plan is built."""

import taichi as ti

from . import backend

from .types import nd

BLOCK = 1024


@ti.kernel
def scan_blocks(x: nd(dtype=ti.i32, ndim=1), block_sum: nd(dtype=ti.i32, ndim=1), n: ti.i32):
    """Reads/writes x[0:n] (exclusive scan within each block); writes block_sum."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for b in range((n + BLOCK - 1) // BLOCK):
        total = 0
        for k in range(BLOCK):
            i = b * BLOCK + k
            if i < n:
                v = x[i]
                x[i] = total
                total += v
        block_sum[b] = total


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
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for i in range(n + 1):
        x[i] = scanned(x, block_sum, n, i)


@ti.func
def scan_in_place(x: ti.template(), n: ti.i32) -> ti.i32:
    """x[0:n] -> its exclusive scan, x[n] = total, in the calling thread; returns the total."""
    total = 0
    for i in range(n):
        v = x[i]
        x[i] = total
        total += v
    x[n] = total
    return total


@ti.kernel
def scan_serial(x: nd(dtype=ti.i32, ndim=1), n: ti.i32):
    """x[0:n] -> its exclusive scan in one thread, x[n] = total (n <= BLOCK: the work of one
    scan_blocks thread, without the two launches that join the blocks)."""
    ti.loop_config(serialize=True)
    for _ in range(1):
        scan_in_place(x, n)


def add_scan(plan, x: str, scratch: str, count: str, blocks: str, n: int) -> None:
    """Append to `plan` the exclusive scan of the array named x over its first n items (the
    scalar named count), with x[n] = total: one launch when n <= BLOCK, else three (scratch:
    an array of block_sum_size(n) items; blocks: the scalar block_count(n)). n is fixed when
    the plan is built (a Simulator's worlds)."""
    if n <= BLOCK:
        plan.add(scan_serial, x=x, n=count)
        return
    plan.add(scan_blocks, x=x, block_sum=scratch, n=count)
    plan.add(scan_serial, x=scratch, n=blocks)  # the block sums -> each block's offset
    plan.add(scan_add, x=x, block_sum=scratch, n=count)


def block_sum_size(n: int) -> int:
    """Length of the scratch array (block sums) a scan of n items needs."""
    return (n + BLOCK - 1) // BLOCK + 1


def block_count(n: int) -> int:
    """Blocks of BLOCK items in n items."""
    return (n + BLOCK - 1) // BLOCK
