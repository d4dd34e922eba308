"""Device memory held by an object graph of Taichi ndarrays (simulator, model, pools)."""

from __future__ import annotations

import numpy as np
import taichi as ti

_SCALAR_BYTES = {ti.f16: 2, ti.f32: 4, ti.f64: 8, ti.i8: 1, ti.i16: 2, ti.i32: 4, ti.i64: 8, ti.u8: 1, ti.u16: 2, ti.u32: 4, ti.u64: 8}


def ndarray_bytes(arr: ti.Ndarray) -> int:
    """Bytes of one ndarray: element count x element size (vector/matrix elements included)."""
    width = int(np.prod(arr.element_shape)) if arr.element_shape else 1
    return int(np.prod(arr.shape)) * width * _SCALAR_BYTES[arr.dtype]


def device_bytes(root, _seen: set[int] | None = None) -> int:
    """Sum of ndarray_bytes over every ti.Ndarray reachable from `root` through attributes,
    dicts, lists and tuples (each array counted once) [bytes]."""
    seen = set() if _seen is None else _seen
    if id(root) in seen:
        return 0
    seen.add(id(root))
    if isinstance(root, ti.Ndarray):
        return ndarray_bytes(root)
    if isinstance(root, dict):
        children = list(root.values())
    elif isinstance(root, (list, tuple)):
        children = list(root)
    elif hasattr(root, "__dict__") and type(root).__module__.startswith(("taichi_hydro", "bench", "tests")):
        children = list(vars(root).values())
    else:
        return 0
    return sum(device_bytes(c, seen) for c in children)
