"""hostcopy: NumPy <-> ndarray copies give what Taichi's own from_numpy / to_numpy give, for
every element kind the package stores (scalars, vectors, matrices; f32/f64/i32), and a wrong
shape is refused. On cpu they go through the array's memory (no copy kernel); elsewhere they
are Taichi's copies, so the same test checks both paths."""

import numpy as np
import pytest
import taichi as ti

from taichi_hydro import hostcopy


@pytest.mark.parametrize("make, shape", [
    (lambda: ti.ndarray(ti.f32, (5, 3)), (5, 3)),
    (lambda: ti.ndarray(ti.types.vector(3, ti.f32), (4, 2)), (4, 2, 3)),
    (lambda: ti.ndarray(ti.types.matrix(4, 3, ti.f32), 6), (6, 4, 3)),
    (lambda: ti.ndarray(ti.types.vector(8, ti.i32), 7), (7, 8)),
    (lambda: ti.ndarray(ti.i32, 9), (9,)),
])
def test_round_trip_matches_taichi(arch, make, shape):
    arr = make()
    dtype = np.int32 if "i32" in str(arr.arr.element_data_type()) else np.float32
    values = (np.arange(np.prod(shape)).reshape(shape) * 3 - 7).astype(dtype)
    hostcopy.from_numpy(arr, values)
    np.testing.assert_array_equal(arr.to_numpy(), values)  # Taichi reads what we wrote
    other = values[::-1].copy()
    arr.from_numpy(other)  # Taichi writes, we read
    got = hostcopy.to_numpy(arr)
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_array_equal(got, other)
    got[...] = 0  # a copy, not a view
    np.testing.assert_array_equal(arr.to_numpy(), other)


def test_reads_after_a_kernel_and_refuses_another_shape(arch):
    arr = ti.ndarray(ti.types.vector(3, ti.f32), 4)

    @ti.kernel
    def fill(a: ti.types.ndarray()):
        for i in a:
            a[i] = ti.Vector([i, 2 * i, 3 * i])

    fill(arr)
    np.testing.assert_array_equal(hostcopy.to_numpy(arr), np.arange(4)[:, None] * [1, 2, 3])
    with pytest.raises(ValueError, match=r"\(4, 3\)"):
        hostcopy.from_numpy(arr, np.zeros((3, 3), np.float32))


def test_copy_between_ndarrays(arch):
    """copy(dst, src) = dst.copy_from(src), including the joints' scalar arrays and int tables."""
    for dtype, shape in ((ti.types.vector(3, ti.f32), (3, 2)), (ti.i32, (5,))):
        src, dst = ti.ndarray(dtype, shape), ti.ndarray(dtype, shape)
        values = np.arange(np.prod(src.to_numpy().shape)).reshape(src.to_numpy().shape)
        src.from_numpy(values.astype(src.to_numpy().dtype))
        hostcopy.copy(dst, src)
        np.testing.assert_array_equal(dst.to_numpy(), src.to_numpy())
