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


def host_available_bytes() -> int | None:
    """MemAvailable of /proc/meminfo [bytes] (None where there is no such file)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cuda_total_bytes() -> int | None:
    """Total memory of CUDA device 0 [bytes], through the driver API (None without one)."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        total = ctypes.c_size_t(0)
        if cuda.cuInit(0) != 0:
            return None
        device = ctypes.c_int(0)
        if cuda.cuDeviceGet(ctypes.byref(device), 0) != 0 or cuda.cuDeviceTotalMem_v2(ctypes.byref(total), device) != 0:
            return None
        return int(total.value)
    except (OSError, AttributeError):
        return None


def backend_capacity_bytes(arch: str) -> int | None:
    """What `arch` can hold [bytes]: the host's available memory on cpu (and on a Vulkan device
    that is the CPU, lavapipe), the device's memory on cuda and on a Vulkan GPU (its largest
    device-local heap). None when unknown (no check is made then)."""
    if arch == "cuda":
        return _cuda_total_bytes()
    if arch == "vulkan":
        from .vulkan_info import vulkan_devices

        devices = vulkan_devices()
        if devices and not devices[0].is_cpu and devices[0].local_heap_bytes > 0:
            return devices[0].local_heap_bytes
    return host_available_bytes()
