"""Batched state exchanged with external arrays (torch tensors) on the device.

Taichi kernels take torch tensors as ndarray arguments without copying them: a CUDA tensor
with the cuda backend, a CPU tensor with the cpu backend (on Vulkan Taichi stages them through
the host). The kernels here copy between the simulator's state arrays and such tensors inside
one launch, so reading observations or writing actions never goes through NumPy and never
waits for the host. torch is optional: only `as_torch=True` and tensor arguments need it."""


import taichi as ti

from .backend import current_arch
from .errors import SceneError

ext = ti.types.ndarray


def torch_module():
    """The torch module, or a SceneError saying it is missing (pip install torch)."""
    try:
        import torch
    except ImportError as exc:
        raise SceneError("torch tensors need PyTorch (pip install torch)") from exc
    return torch


def is_tensor(value) -> bool:
    """True for a torch tensor (without importing torch when it is not loaded)."""
    return type(value).__module__.startswith("torch") and hasattr(value, "is_cuda")


def torch_device() -> str:
    """The torch device whose tensors the current Taichi backend reads in place."""
    return "cuda" if current_arch() == "cuda" else "cpu"


@ti.kernel
def rows_to_external(src: ext(ndim=2), dst: ext(ndim=3), width: ti.template()):
    """dst[w, b, k] = src[w, b][k] for k < width (src: vector ndarray, dst: scalar array)."""
    for w, b in ti.ndrange(src.shape[0], src.shape[1]):
        v = src[w, b]
        for k in ti.static(range(width)):
            dst[w, b, k] = v[k]


@ti.kernel
def rows_from_external(src: ext(ndim=3), dst: ext(ndim=2), width: ti.template(), normalise: ti.template(),
                       bad: ext(dtype=ti.i32, ndim=1)) -> ti.i32:
    """dst[w, b] = src[w, b, :width], normalised if `normalise`; rows that are not finite (or
    of zero norm when normalising) are left as they were and counted in bad[0]; the first such
    flat row index lands in bad[1] (atomic min). Returns bad[0]."""
    for w, b in ti.ndrange(src.shape[0], src.shape[1]):
        v = dst[w, b]
        ok = True
        norm2 = 0.0
        for k in ti.static(range(width)):
            x = ti.cast(src[w, b, k], float)
            v[k] = x
            norm2 += x * x
            if not (x == x and ti.abs(x) < 3.0e38):
                ok = False
        if ti.static(normalise):
            if norm2 < 1e-24:
                ok = False
            elif ok:
                v = v / ti.sqrt(norm2)
        if ok:
            dst[w, b] = v
        else:
            ti.atomic_add(bad[0], 1)
            ti.atomic_min(bad[1], w * src.shape[1] + b)
    return bad[0]


def check_tensor_shape(name: str, value, shape: tuple[int, ...]) -> None:
    """SceneError unless `value` (a tensor) has `shape` and lives where the backend reads it."""
    if tuple(value.shape) != shape:
        raise SceneError(f"{name} must have shape {shape}, got {tuple(value.shape)}")
    want = torch_device()
    if value.device.type != want:
        raise SceneError(f"{name} is on torch device '{value.device}', the {current_arch()} backend reads '{want}' tensors")
