"""The exclusive prefix sum (taichi_hydro.scan) against NumPy, on both of its paths: one
launch up to BLOCK items, three above (the boundary and a partial last block included)."""

import numpy as np
import pytest
import taichi as ti

from taichi_hydro.plan import Plan
from taichi_hydro.scan import BLOCK, add_scan, block_count, block_sum_size


@pytest.mark.parametrize("n", [0, 1, 7, BLOCK, BLOCK + 1, 3 * BLOCK + 5])
def test_exclusive_scan_matches_numpy(arch, n):
    rng = np.random.default_rng(n)
    values = rng.integers(0, 1000, n + 1).astype(np.int32)
    values[n] = -12345  # overwritten with the total
    x = ti.ndarray(ti.i32, n + 1)
    x.from_numpy(values)
    args = {"x": x, "scratch": ti.ndarray(ti.i32, block_sum_size(n)), "count": n, "blocks": block_count(n)}
    plan = Plan("scan", args)
    add_scan(plan, "x", "scratch", "count", "blocks", n)
    assert len(plan.launches) == (1 if n <= BLOCK else 3)
    plan.run(args)
    expected = np.concatenate([[0], np.cumsum(values[:n], dtype=np.int64)]).astype(np.int32)
    np.testing.assert_array_equal(x.to_numpy(), expected)
