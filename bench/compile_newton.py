"""Cold compile time of Newton's solve kernels (solver.newton's world kernel, solver.newton_block's
block kernel, solver.newton_cg's world kernel with the CG step: --kernel cg), how many times each ti.func is inlined into it, the size of what Taichi caches for
it, and optionally the run time per Newton iteration on dumped pile steps.

    python -m bench.compile_newton --arch cpu --precision f32 [--real f32] [--kernel world|block|cg] [--timing] [--cfg on|off]

One kernel per process, one JSON line on stdout: kernel, arch, precision (the state's floats),
real (the solve's arithmetic; by default what SolverData picks: f64 on cpu, f32 on vulkan),
cfg_optimization (Taichi's control-flow-graph pass: backend.CFG_OPTIMIZATION, or --cfg),
lp_native_vector_width (Mesa's lavapipe: the SIMD width it compiles a shader for, from the
environment; scripts/test.sh sets 128),
compile_s (the first launch minus a warm launch of the same problem; compile_cpu_s: the same
in CPU time of the process, all threads: less sensitive to other processes on a loaded
machine, but on vulkan it misses the driver's threads, if any), cache_bytes (Taichi's
offline cache after the compile: the kernel's LLVM module on cpu, its SPIR-V on vulkan; a proxy
of the IR size), inlined (ti.func call sites after static unrolling, by function, and their
total: Taichi inlines each one) and, with --timing, us_per_iteration (for each of the six largest dumped
pile steps of shared/reference/solver_prototype, one world on one thread: the least time over
repeats of its solve, less the least time of the same solve capped at one iteration, over the
iterations after the first: the cost of an iteration without the per-solve setup and the host
copies; the least times are those least disturbed by other processes) and us_capped_at_one (that
least time of the solve capped at one iteration: the launch, the per-solve setup, one iteration
and the copies) and us_setup (the least time of the kernel alone, without copies, capped at no
iteration, the previous solution kept: the launch, the ordering of the bodies, the warm start,
the choice of the start, one assembly and the residual; the cost of a solve that stops at its
start), us_setup_no_contacts (the same for the largest step's bodies without their contacts: the
eager launch from Python, which pays for each of the kernel's ndarray arguments, and the
contact-free part of the setup; Simulator.step launches through a compiled graph instead).

Each run is cold: the offline cache and Mesa's shader cache point at fresh empty folders."""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def folder_bytes(path: str) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def least_setup_time(newton_problems, rec, kernel: dict, repeats: int) -> float:
    """The least time [s] over `repeats` launches of the solve kernel alone on `rec` (one world),
    capped at no iteration, after one solve has kept its solution (so that the launches weigh
    it as a start, as a simulator's step does)."""
    zero = newton_problems.solve(dict(rec), iterations=0, timed=True, **kernel)
    zero()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        zero.launch()
        times.append(time.perf_counter() - t0)
    return min(times)


def count_inlines() -> collections.Counter:
    """Count every ti.func call made while a kernel is compiled (one per inlined call site)."""
    from taichi.lang import impl, kernel_impl

    counts = collections.Counter()
    call = kernel_impl.Func.__call__

    def counted(self, *args, **kwargs):
        if impl.inside_kernel():
            counts[self.func.__qualname__.replace(".<locals>", "")] += 1
        return call(self, *args, **kwargs)

    kernel_impl.Func.__call__ = counted
    return counts


def time_phases() -> dict:
    """Seconds spent in Taichi's Python frontend (Kernel.materialize: the AST transform that
    inlines the ti.funcs and unrolls the static loops), summed over the kernels compiled; the
    rest of compile_s is Taichi's C++ passes and the backend (--passes breaks it down)."""
    from taichi.lang import kernel_impl

    spent = {"frontend_s": 0.0}
    materialize = kernel_impl.Kernel.materialize

    def timed(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return materialize(self, *args, **kwargs)
        finally:
            spent["frontend_s"] += time.perf_counter() - t0

    kernel_impl.Kernel.materialize = timed
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", default="cpu", choices=("cpu", "vulkan", "cuda"))
    parser.add_argument("--precision", default="f32", choices=("f32", "f64"))
    parser.add_argument("--real", default=None, choices=("f32", "f64"), help="the solve's arithmetic (default: SolverData's)")
    parser.add_argument("--kernel", default="world", choices=("world", "block", "cg"))
    parser.add_argument("--timing", action="store_true", help="also time iterations on six dumped pile steps")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--print-ir", action="store_true", help="Taichi's print_ir: the CHI IR after each pass, on stdout")
    parser.add_argument("--cfg", choices=("on", "off"), default=None,
                        help="Taichi's cfg_optimization forced on or off (default: backend.CFG_OPTIMIZATION's for the arch)")
    parser.add_argument("--passes", action="store_true", help="print Taichi's scoped profiler (time per compiler pass)")
    args = parser.parse_args()

    cache = tempfile.mkdtemp(prefix="ti_cold_")
    mesa = tempfile.mkdtemp(prefix="mesa_cold_")
    os.environ["MESA_SHADER_CACHE_DIR"] = mesa
    os.environ["MESA_SHADER_CACHE_DISABLE"] = "true"
    sys.path.insert(0, str(ROOT / "tests"))
    import taichi as ti

    import taichi_hydro as th
    import taichi_hydro.solver.data as solver_data

    if args.print_ir:
        init = ti.init
        ti.init = lambda **kw: init(print_ir=True, **kw)
    th.init(args.arch, precision=args.precision, cache_dir=cache)
    if args.real is not None:  # what SolverData picks follows the arch it believes it runs on
        solver_data.current_arch = lambda: "vulkan" if args.real == "f32" else "cpu"
    counts = count_inlines()
    spent = time_phases()
    if args.cfg is not None:  # read when a kernel compiles (and part of its offline-cache key)
        ti.lang.impl.current_cfg().cfg_optimization = args.cfg == "on"
    import newton_problems

    recs = sorted(newton_problems.problems("pile"), key=lambda r: -r["n"])[:6]
    kernel = {"schedule": "block" if args.kernel == "block" else "world", "linear": "cg" if args.kernel == "cg" else "auto"}
    t0, c0 = time.perf_counter(), time.process_time()
    again = newton_problems.solve(dict(recs[0]), timed=True, **kernel)
    ti.sync()  # vulkan: the driver may finish building the pipeline with the launch
    first, first_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    again()
    warm, warm_cpu = time.perf_counter() - t0, time.process_time() - c0
    if args.passes:
        ti.profiler.print_scoped_profiler_info()
        print(flush=True)  # the profiler's last line ends without a newline
    out = dict(kernel=args.kernel, arch=args.arch, precision=args.precision,
               real=args.real or ("f32" if args.arch == "vulkan" else "f64"), compile_s=round(first - warm, 2),
               compile_cpu_s=round(first_cpu - warm_cpu, 2), cfg_optimization=bool(ti.lang.impl.current_cfg().cfg_optimization),
               lp_native_vector_width=os.environ.get("LP_NATIVE_VECTOR_WIDTH", "driver default"),
               frontend_s=round(spent["frontend_s"], 2),
               inlined_total=sum(counts.values()),
               inlined=dict(counts.most_common()))
    if args.timing:
        per_iteration, capped, setup = [], [], []
        for rec in recs:  # the full solve against one capped at one iteration: the same setup and copies
            full = newton_problems.solve(dict(rec), timed=True, **kernel)
            one = newton_problems.solve(dict(rec), iterations=1, timed=True, **kernel)
            t_full, t_one = [], []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                its, _updates = full()
                t1 = time.perf_counter()
                one()
                t_full.append(t1 - t0)
                t_one.append(time.perf_counter() - t1)
            # the least of each: the runs least disturbed by other processes
            per_iteration.append((min(t_full) - min(t_one)) / (its - 1))
            capped.append(min(t_one))
            setup.append(least_setup_time(newton_problems, rec, kernel, args.repeats))
        out["us_per_iteration"] = [round(1e6 * x, 1) for x in per_iteration]
        out["us_capped_at_one"] = [round(1e6 * x, 1) for x in capped]
        out["us_per_iteration_mean"] = round(1e6 * sum(per_iteration) / len(per_iteration), 1)
        out["us_setup"] = [round(1e6 * x, 1) for x in setup]
        # The same launch for the largest step's bodies without a contact: the launch's own
        # cost (eager, from Python: its ndarray arguments) and the contact-free setup.
        empty = {**recs[0], **{k: np.asarray(recs[0][k])[:0] for k in ("ids", "frame", "ra", "rb", "reg", "gamma0")}}
        out["us_setup_no_contacts"] = round(1e6 * least_setup_time(newton_problems, empty, kernel, args.repeats), 1)
        out["contacts"] = [int(r["n"]) for r in recs]
    ti.reset()  # writes the offline cache
    out["cache_bytes"] = folder_bytes(cache)
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(mesa, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
