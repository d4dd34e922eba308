"""Copies between NumPy arrays and Taichi ndarrays.

Taichi's Ndarray.from_numpy and to_numpy each run a copy kernel templated on the array's element
type and shape, so every distinct type compiles its own kernels on first use (0.1 to 0.3 s each
on a cold cache on a 2-core machine: the main job's set-up and first samples compiled about
twenty of them, README "The main job") and every copy is a launch. On the cpu backend an
ndarray is one flat block of host memory at a known address (interop.ndarray_address; the
torch views rely on the same layout), so a NumPy view over it copies with one memcpy and
compiles nothing. Other backends keep Taichi's copies."""

from __future__ import annotations

import ctypes

import numpy as np
import taichi as ti

from .backend import current_arch
from .interop import ndarray_address

__all__ = ["to_numpy", "from_numpy", "copy"]

_DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "u32": np.uint32, "i64": np.int64, "u8": np.uint8,
           "i8": np.int8}


def _host_view(arr) -> np.ndarray | None:
    """A NumPy view of the memory of ndarray `arr` (shape arr.shape + element shape), or None
    where there is none (not the cpu backend, not an ndarray, or an element type outside _DTYPES). Valid only
    while `arr` lives: used at once and dropped."""
    if current_arch() != "cpu" or not isinstance(arr, ti.Ndarray):
        return None
    dtype = _DTYPES.get(str(arr.arr.element_data_type()))
    if dtype is None:
        return None
    shape = tuple(arr.arr.total_shape())
    address = ndarray_address(arr)
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return np.frombuffer((ctypes.c_char * nbytes).from_address(address), dtype=dtype).reshape(shape)


def to_numpy(arr) -> np.ndarray:
    """A NumPy copy of ndarray `arr`, as arr.to_numpy() gives it (after the device's pending work)."""
    view = _host_view(arr)
    if view is None:
        return arr.to_numpy()
    ti.sync()
    return view.copy()


def from_numpy(arr, values) -> None:
    """Write `values` (shape arr.shape + element shape; cast to the element type) into ndarray
    `arr`, as arr.from_numpy does. ValueError on another shape."""
    view = _host_view(arr)
    if view is None:
        arr.from_numpy(values)
        return
    values = np.asarray(values)
    if values.shape != view.shape:
        raise ValueError(f"cannot copy an array of shape {values.shape} into an ndarray of shape {view.shape}")
    ti.sync()  # kernels still reading the old contents finish first
    view[...] = values


def copy(dst, src) -> None:
    """dst.copy_from(src) for two ndarrays of one type and shape (on cpu, one memcpy)."""
    target, source = _host_view(dst), _host_view(src)
    if target is None or source is None or target.shape != source.shape or target.dtype != source.dtype:
        dst.copy_from(src)
        return
    ti.sync()
    target[...] = source
