"""Backend selection over ti.init: one explicit choice, never a silent fallback."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import warnings

from . import affinity, frontend
from .errors import BackendError, LaunchBudgetError

__all__ = ["init", "is_initialized", "current_arch", "require_init", "require_generation", "generation", "spend_launches",
           "pinned_threads", "shutdown", "ARCHES", "LAUNCH_BUDGET", "SERIAL_LOOPS", "WORLD_SPREAD"]

ARCHES = ("cpu", "vulkan", "cuda")


_state: dict = {"arch": None, "precision": None, "launch_budget": None, "launches": 0, "generation": 0}

# Taichi 1.7.4 on Mesa's lavapipe (25.0.7, the Vulkan driver of GPU-less machines) segfaults
# inside vkAllocateDescriptorSets after 2**16 descriptor sets on one Taichi runtime, freed or
# not; every offloaded task of every kernel launch takes one. Our kernels average about 2.1 tasks
# per launch (measured: the box-on-floor step crashes after ~2050 steps of 15 launches), so a
# runtime on lavapipe may make LAUNCH_BUDGET launches: past it we raise instead of crashing.
# init() with other arguments ends the runtime (ti.reset) and its count starts again from zero.
LAUNCH_BUDGET = 24000

SERIAL_LOOPS = False
"""True while the cpu backend runs on one thread (init(cpu_threads=1)): every kernel's top-level
loops are then serialised (ti.loop_config(serialize=...) reads this flag when a kernel
compiles), so they run on the launching thread instead of going through Taichi's thread pool,
whose dispatch costs about 130 us per launch on a 2-core machine against about 5 us serialised
(bench.launch_cost). One thread loses no parallelism, so it only gains; one small world, where
launches dominate the step, is its use (README, "Launch cost"). Compiled variants are cached
apart (the loop's setting is part of the kernel's IR)."""

POOL_SLOTS = 1024
"""Loop indices per thread of the cpu pool that a loop needs for Taichi 1.7's pool to give
every thread a share (WORLD_SPREAD)."""

WORLD_SPREAD = 0
"""The range of the world schedule's loops on the cpu backend's thread pool (0 on one thread
and on the GPU backends, whose loops take one world per index): Taichi 1.7's pool runs an
outer range-for of fewer than about 1024 iterations on one thread (README, "Stopping on the
residual": 64 or 512 iterations of equal work took the same time on one thread as on two,
1024 half) and gives each thread a fixed share of the range, so those kernels loop over
range(WORLD_SPREAD), POOL_SLOTS per thread, and the first index of each thread's share claims
worlds from a queue (solver.world_schedule.world_slots)."""


CFG_OPTIMIZATION = {"cpu": False, "vulkan": False, "cuda": True}
"""Taichi's control-flow-graph optimisation (its cfg_optimization: store-to-load forwarding and
dead-store elimination over a kernel's control-flow graph), by arch. Its reaching-definition
analysis, rerun at every simplification round, grows with the kernel's loads times the stores
that reach them, and made most of the cold compile of Newton's solve kernels on cpu, where LLVM
forwards and eliminates the same locals after it and the kernels stepped no slower without it,
and a quarter of it on vulkan (lavapipe's own compile is the rest): off there. On cuda it stays
Taichi's default until it is measured there (bench/gpu_session.sh). README, "The cold compile"."""


def init(arch: str = "cpu", *, precision: str = "f32", debug: bool = False, cache_dir: str | None = None, quiet: bool = True,
         profiler: bool = False, cpu_threads: int | None = None, optimize: bool = True, pin_threads: bool = True) -> str:
    """Start Taichi on `arch` ("cpu", "vulkan" or "cuda"). Raises BackendError if that backend
    is not available; never falls back to another one. Calling init again with the same
    arguments is a no-op; with different ones it restarts Taichi (every Simulator made before
    becomes invalid).

    precision: "f32" (default, every backend) or "f64" (cpu and cuda; Vulkan has no f64
    transcendentals). cache_dir: Taichi offline-cache folder (default $TI_OFFLINE_CACHE_FILE_PATH
    or Taichi's own). profiler: Taichi's kernel profiler (device time per kernel, see
    bench/profile_kernels.py). cpu_threads: threads of the cpu backend (default: one per core;
    a process that shares the machine with others, such as a shard of
    distributed.ShardedSimulator, takes its share); 1 also serialises every kernel's loops
    (SERIAL_LOOPS: no thread-pool dispatch per launch, the fastest setting for one small
    world). optimize: Taichi's IR optimisation passes
    (its advanced_optimization); False compiled the pile's step kernels 2.7x faster on a cold
    cache (21 s instead of 58 s) and stepped 1.55x slower (README, "The main job"): for short
    runs on a cold cache, such as the main job. pin_threads: on cpu with a thread pool, pin the
    pool's threads to cores of their own (affinity.pin_pool; Linux; pinned_threads() says what
    was done): Taichi's pool otherwise sometimes runs a launch on one core while the other idles
    (README, "Pool threads on cores of their own"). Returns the arch name."""
    import taichi as ti

    if arch not in ARCHES:
        raise BackendError(f"unknown arch {arch!r}; choose one of {list(ARCHES)}")
    if precision not in ("f32", "f64"):
        raise BackendError(f"unknown precision {precision!r}; choose 'f32' or 'f64'")
    if precision == "f64" and arch == "vulkan":
        raise BackendError("precision 'f64' is not available on vulkan; use 'f32'")
    if cpu_threads is not None and (isinstance(cpu_threads, bool) or not isinstance(cpu_threads, int) or cpu_threads < 1):
        raise BackendError(f"cpu_threads must be a positive integer or None, got {cpu_threads!r}")
    if not isinstance(optimize, bool):
        raise BackendError(f"optimize must be True or False, got {optimize!r}")
    if not isinstance(pin_threads, bool):
        raise BackendError(f"pin_threads must be True or False, got {pin_threads!r}")
    if (_state["arch"] == arch and _state["precision"] == precision and _state.get("profiler", False) == profiler
            and _state.get("cpu_threads") == cpu_threads and _state.get("optimize", True) == optimize
            and _state.get("pin_threads", True) == pin_threads):
        return arch
    if _state["arch"] is not None:
        _end_runtime()
    kwargs = dict(
        arch={"cpu": ti.cpu, "vulkan": ti.vulkan, "cuda": ti.cuda}[arch],
        enable_fallback=False,
        default_fp=ti.f64 if precision == "f64" else ti.f32,
        default_ip=ti.i32,
        offline_cache=True,
        debug=debug,
        kernel_profiler=profiler,
        log_level=ti.WARN if quiet else ti.INFO,
        advanced_optimization=optimize,
        cfg_optimization=CFG_OPTIMIZATION[arch],
    )
    if cpu_threads is not None:
        kwargs["cpu_max_num_threads"] = cpu_threads
    if cache_dir:  # otherwise Taichi reads $TI_OFFLINE_CACHE_FILE_PATH itself
        kwargs["offline_cache_file_path"] = cache_dir
    frontend.install()
    global SERIAL_LOOPS, WORLD_SPREAD
    SERIAL_LOOPS = arch == "cpu" and cpu_threads == 1
    WORLD_SPREAD = POOL_SLOTS * (cpu_threads or os.cpu_count() or 1) if arch == "cpu" and not SERIAL_LOOPS else 0
    threads_before = affinity.thread_ids()
    try:
        # ti.init prints "Starting on arch=..." on stdout: send it to stderr.
        with contextlib.redirect_stdout(sys.stderr if quiet else sys.stdout):
            ti.init(**kwargs)
    except Exception as exc:  # taichi raises RuntimeError for a missing backend
        _state.update(arch=None, precision=None)
        raise BackendError(f"taichi backend {arch!r} is not available here: {exc}") from exc
    got = ti.lang.impl.current_cfg().arch
    expected = {"cpu": (ti.x64, ti.arm64), "vulkan": (ti.vulkan,), "cuda": (ti.cuda,)}[arch]
    if got not in expected:
        ti.reset()
        _state.update(arch=None, precision=None)
        raise BackendError(f"taichi started on {got} instead of {arch!r}")
    _state.update(arch=arch, precision=precision, profiler=profiler, cpu_threads=cpu_threads, optimize=optimize,
                  pin_threads=pin_threads, launch_budget=None, launches=0, generation=_state["generation"] + 1,
                  pinned="no thread pool (not cpu, or one serial thread)" if pin_threads else "not asked (pin_threads=False)",
                  settings=dict(arch=arch, precision=precision, debug=debug, cache_dir=cache_dir, quiet=quiet, profiler=profiler,
                                cpu_threads=cpu_threads, optimize=optimize, pin_threads=pin_threads))
    if pin_threads and arch == "cpu" and not SERIAL_LOOPS:
        _state["pinned"] = affinity.pin_pool(affinity.thread_ids() - threads_before, cpu_threads or os.cpu_count() or 1,
                                             _spread_probe)
    if arch == "vulkan":
        _probe_loop_atomics()
        from .vulkan_info import vulkan_devices

        devices = vulkan_devices()
        if devices and all(d.is_cpu for d in devices):
            _state["launch_budget"] = LAUNCH_BUDGET
    return arch


def restart() -> str:
    """End the current Taichi runtime and start a new one with the same settings: every
    Simulator made before becomes invalid, and the new runtime starts with the whole launch
    budget of a CPU Vulkan driver (LAUNCH_BUDGET: the driver's limit is per runtime). Compiled
    kernels come back from the offline cache. Returns the arch name."""
    require_init()
    settings = _state["settings"]
    _end_runtime()
    return init(**settings)


# Device-array handles (and compiled graphs) of ended runtimes, kept from being finalised.
_stale_handles: list = []
# Called, then forgotten, just before the current runtime ends (on_runtime_end).
_end_hooks: list = []


def shutdown() -> None:
    """End the current Taichi runtime, if any (init starts a new one). Taichi writes the kernels
    a runtime compiled to its offline cache only when the runtime ends (ti.reset or a normal
    interpreter exit): a process about to be ended from outside (a shard's Ray actor, killed by
    its driver) calls this first, so that the next processes on the machine read those kernels
    instead of compiling them again."""
    if is_initialized():
        _end_runtime()


def on_runtime_end(hook) -> None:
    """Call `hook()` once, just before the current Taichi runtime ends (restart, init with other
    arguments): for objects that must be released while their runtime's device exists (the
    viewer's hidden GGUI window: destroyed after its device it segfaults, and finalised at
    interpreter exit it does too)."""
    if hook not in _end_hooks:
        _end_hooks.append(hook)


def _end_runtime() -> None:
    """ti.reset(), made safe for the Python objects of the ending runtime. Taichi's Ndarray.__del__
    asks the *current* program to free its C++ object by address; once a new runtime has reused
    that address, a late __del__ could free a live array of the new one. So objects that are
    already garbage are collected while their runtime exists, and those still referenced (an
    old Simulator) are pinned here and never finalised."""
    import taichi as ti

    hooks = list(_end_hooks)
    _end_hooks.clear()
    for hook in hooks:
        hook()
    gc.collect()
    handle_types = (ti.lang._ndarray.Ndarray, ti.graph.Graph)
    with warnings.catch_warnings():  # isinstance on every live object also touches deprecated aliases (torch's)
        warnings.simplefilter("ignore")
        _stale_handles.extend(o for o in gc.get_objects() if isinstance(o, handle_types))
    ti.reset()
    _state.update(arch=None, precision=None)


def generation() -> int:
    """Counts the Taichi runtimes started by init(); objects holding device arrays record it when
    made (require_generation)."""
    return _state["generation"]


def require_generation(made_in: int, what: str) -> None:
    """Raise BackendError if the runtime that `what` was made in has ended (init with other
    arguments); its device arrays are gone."""
    require_init()
    if made_in != _state["generation"]:
        raise BackendError(f"{what} was made before Taichi was restarted (taichi_hydro.init with other arguments, or restart); "
                           "its device arrays are gone: make a new one")


def launch_budget() -> int | None:
    """Kernel launches the current runtime may make (LAUNCH_BUDGET on lavapipe), else None."""
    return _state["launch_budget"]


def launches_made() -> int:
    """Kernel launches the current Taichi runtime has accounted for (spend_launches)."""
    return _state["launches"]


def spend_launches(count: int, *, check_only: bool = False) -> None:
    """Account for `count` kernel launches about to be made (check_only: only check that they
    would fit). On a CPU Vulkan implementation (lavapipe) raises LaunchBudgetError, without
    counting them, if they would take the process past LAUNCH_BUDGET, before the driver would
    crash; elsewhere it only counts."""
    budget = _state["launch_budget"]
    if budget is not None and _state["launches"] + count > budget:
        raise LaunchBudgetError(
            f"{count} more kernel launches would take this process past {budget} on a CPU Vulkan driver "
            f"(Mesa lavapipe; {_state['launches']} made so far), which crashes Taichi 1.7.4 after about 2**16 "
            "descriptor sets: start a new process, or use arch 'cpu' for long runs on a machine without a GPU"
        )
    if not check_only:
        _state["launches"] += count


def pinned_threads() -> dict[int, int] | str:
    """The cpu pool's thread -> core map that init applied (pin_threads), or why none was."""
    require_init()
    return _state["pinned"]


def _spread_probe() -> None:
    """A launch over the whole cpu pool, for affinity.pin_pool to find its threads by: 4096
    items of 300 dependent sines, a few milliseconds on two cores."""
    import taichi as ti

    from .probe import spread_work

    out = ti.ndarray(ti.f32, 4096)
    spread_work(out, 300)
    ti.sync()


def _probe_loop_atomics() -> None:
    """Integer atomics inside a loop with a run-time trip count: Mesa's lavapipe before 23
    executes only the first two iterations (seen with Mesa 22.3.6; fixed in 25.0). Our broad
    phase and pools rely on that pattern, so refuse such a driver instead of dropping contacts."""
    import numpy as np
    import taichi as ti

    from .probe import loop_atomics

    out = ti.ndarray(ti.i32, 8)
    out.fill(0)
    loop_atomics(out, 6)
    got = out.to_numpy()
    if not np.array_equal(got, [1, 1, 1, 1, 1, 1, 0, 0]):
        ti.reset()
        _state.update(arch=None, precision=None)
        raise BackendError(
            "this Vulkan driver miscompiles integer atomics inside loops (Mesa lavapipe < 23 does); "
            f"probe wrote {got.tolist()}. Upgrade Mesa (e.g. Debian bookworm-backports mesa-vulkan-drivers)"
        )


def is_initialized() -> bool:
    return _state["arch"] is not None


def current_arch() -> str:
    require_init()
    return _state["arch"]


def current_precision() -> str:
    require_init()
    return _state["precision"]


def require_init() -> None:
    if _state["arch"] is None:
        raise BackendError("call taichi_hydro.init('cpu' | 'vulkan' | 'cuda') first")
