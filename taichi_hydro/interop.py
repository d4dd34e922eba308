"""Batched state exchanged with external arrays (torch tensors) on the device.

Two ways, torch being optional (only tensor arguments and results need it):
- views (`tensor_view`): a torch tensor over the very memory of a Taichi ndarray: reading and
  writing it needs no copy and no launch (making one checks it once, check_view). The LLVM
  backends (cpu, cuda) keep an ndarray in one flat allocation at a physical address (host
  memory on cpu, device memory on cuda), which a tensor can wrap; Vulkan buffers have no such
  address, so there are no views on vulkan.
- copies: Taichi kernels take torch tensors as ndarray arguments without copying them (a CUDA
  tensor with the cuda backend, a CPU tensor otherwise; on Vulkan Taichi stages them through
  the host). The kernels here copy between the simulator's state arrays and such tensors in
  one launch, checking what comes in, so reading observations or writing actions never goes
  through NumPy."""

import numpy as np
import taichi as ti

from . import backend

from .backend import current_arch
from .errors import SceneError
from .math3d import finite

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
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
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
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, b in ti.ndrange(src.shape[0], src.shape[1]):
        v = dst[w, b]
        ok = True
        norm2 = 0.0
        for k in ti.static(range(width)):
            x = ti.cast(src[w, b, k], float)
            v[k] = x
            norm2 += x * x
            if finite(x) == 0:
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


class _Memory:
    """A flat typed block of memory at `address`, described by the array-interface protocol
    (NumPy's for host memory, CUDA's for device memory). It holds `owner` (the Taichi ndarray)
    so that the memory lives as long as any tensor made over it."""

    def __init__(self, owner, address: int, shape: tuple[int, ...], typestr: str, device: str):
        self.owner = owner
        interface = {"shape": shape, "typestr": typestr, "data": (address, False), "strides": None, "version": 3 if device == "cpu" else 2}
        if device == "cpu":
            self.__array_interface__ = interface
        else:
            self.__cuda_array_interface__ = interface


def ndarray_address(arr) -> int:
    """The address of a Taichi ndarray's memory (host on cpu, device on cuda), 0 on backends
    whose buffers have none (vulkan)."""
    if current_arch() not in ("cpu", "cuda"):
        return 0
    return int(ti.lang.impl.get_runtime().prog.get_ndarray_data_ptr_as_int(arr.arr))


def tensor_view(arr):
    """A torch tensor sharing memory with the Taichi ndarray `arr`: shape arr.shape + the element
    shape (a (W, B) vec3 ndarray gives (W, B, 3)), dtype float32/float64/int32 as the element.
    Writes through it change `arr` and kernels' writes to `arr` show in it, with no copy or
    launch. cpu and cuda backends only (SceneError on vulkan). The tensor keeps `arr` alive,
    but not the Taichi runtime: after th.init restarts Taichi it points at freed memory.

    Each view is checked once when made (check_view): a probe written through Taichi must read
    back through the tensor, so a view that reads other memory is an error, not silently wrong
    data (an address outside any allocation could still crash the process). This checks the
    address, dtype and layout, not the ordering of torch's and Taichi's work in later use."""
    arch = current_arch()
    address = ndarray_address(arr)
    if address == 0:  # before torch: installing it would not help
        raise SceneError(f"tensor views need the cpu or cuda backend (an ndarray on {arch} has no address a tensor can "
                         "wrap); use get_state(as_torch=True) and set_state/set_control with tensors, which copy on the device")
    torch = torch_module()
    if arch == "cuda" and not torch.cuda.is_available():
        raise SceneError(f"tensor views on the cuda backend need a torch built with CUDA (this torch {torch.__version__} has none)")
    typestr = {"f32": "<f4", "f64": "<f8", "i32": "<i4"}[str(arr.arr.element_data_type())]
    memory = _Memory(arr, address, tuple(arr.arr.total_shape()), typestr, torch_device())
    if torch_device() == "cpu":
        view = torch.from_numpy(np.asarray(memory))
    else:
        view = torch.as_tensor(memory, device="cuda")
    check_view(arr, view)
    return view


def check_view(arr, view) -> None:
    """SceneError unless `view` reads `arr`'s memory: writes a probe (distinct values) into
    `arr` with Taichi, reads it through the tensor, and puts `arr`'s contents back."""
    saved = arr.to_numpy()
    probe = (np.arange(saved.size) % 8_388_593 + 1).reshape(saved.shape).astype(saved.dtype)
    arr.from_numpy(probe)
    ti.sync()
    try:
        seen = view.cpu().numpy().copy()  # on cuda, .cpu() waits for the stream; on cpu it would share the memory
    except RuntimeError as exc:  # torch refusing the pointer (another CUDA context, say)
        raise SceneError(f"a tensor view on {current_arch()} could not be read ({exc}): use get_state(as_torch=True), "
                         "which copies") from exc
    finally:
        arr.from_numpy(saved)
        ti.sync()
    if seen.shape != probe.shape or not np.array_equal(seen, probe):
        raise SceneError(f"a tensor view of a {arr.arr.element_data_type()} ndarray of shape {tuple(arr.arr.total_shape())} "
                         f"on {current_arch()} does not read the array's memory (a probe written by Taichi did not read back): "
                         "use get_state(as_torch=True), which copies")


def check_tensor_shape(name: str, value, shape: tuple[int, ...]) -> None:
    """SceneError unless `value` (a tensor) has `shape` and lives where the backend reads it."""
    if tuple(value.shape) != shape:
        raise SceneError(f"{name} must have shape {shape}, got {tuple(value.shape)}")
    want = torch_device()
    if value.device.type != want:
        raise SceneError(f"{name} is on torch device '{value.device}', the {current_arch()} backend reads '{want}' tensors")
