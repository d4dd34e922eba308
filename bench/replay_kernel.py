"""One kernel of the step, replayed alone on the cpu backend: how its time changes with the pool's
threads when nothing else runs between its launches (its inputs stay in the caches of the cores
that last ran it), against its time inside the step (bench.profile_kernels).

    python -m bench.replay_kernel --case pile_27_settled --kernel clip_candidates --threads 1,2

Each thread count runs in a process of its own: the case's start state (its saved state for a
settled case), `steps` steps, then `launches` launches back to back of the step plan's first
launch of `kernel`, with the arguments the step gives it, each after the collision's counters
are restored to the step's (the narrow phase appends from them; one small launch). One thread runs the pool's loops, as
two do (not the serialised loops that th.init(cpu_threads=1) compiles), so that the two compare
the same code. Printed and written per thread count: ms per launch, the process's CPU time over
wall time (2 when two threads work throughout) and the idle time of each core (/proc/stat).
By default (`--restore counts`) replays only mean something for kernels whose outputs do not
feed their own inputs otherwise (the narrow phase, the assembly). With `--restore arguments`
every array the launch takes, or with a list of names only those, is put back as the step left
it before each launch (copies made once, after the `steps` steps), so that a kernel that
changes its own inputs, such as a solve, solves the same problem each time; the restores are
timed alone as well and their time is subtracted (`restore_s_per_launch`), and the restored
inputs are then warm in the caches of the thread that copied them, not of the one that reads
them. `same_outputs` says whether every array argument ended the last launch as it ended
the first (a replay of one problem: True). For Newton's world kernel the inputs it changes are the free velocities it overwrites
with the solution, the warm-start impulses and the last solution:

    python -m bench.replay_kernel --case pile_27 --steps 300 --kernel solve_newton --threads 2 \
        --restore body_vc,body_wc,c_gamma,b_gamma,newton_last,newton_kept --into-step

With `--into-step` the copies are taken after the next step's launches before the kernel's: the
solve's inputs as that step gives them (the free velocities, the warm-start impulses). Without
it they are the arrays as the last step left them, the solved velocities among them: a solve
from there applies the contact impulses a second time, a harder problem than any step's
(the settled pile's solve, 64 worlds, one thread: 214 ms per launch without it, 21-24 ms with it).

Two checkouts step a chaotic case to different states (their round-off differs), so they
replay different problems. `--save-state FILE` writes the state after the steps; `--state FILE
--steps 2` then starts both from it (the first step from a set state has no warm start, the
second has), and both replay the same problem."""

import argparse
import copy
import json
import os
import resource
import sys
import time

import numpy as np

from . import cli
from .machine import describe
from .worker import run_one, write_rows


def _idle_ticks() -> list[int]:
    """Idle clock ticks of each core so far (/proc/stat; none where there is no such file)."""
    if not os.path.exists("/proc/stat"):
        return []
    with open("/proc/stat") as f:
        return [int(line.split()[4]) for line in f if line.startswith("cpu") and line[3] != " "]


def save_batch_state(path: str, case_name: str, state: dict) -> None:
    """Write a batch's state (Simulator.get_state's arrays) and its case's name to `path`
    (.npz, atomically), for --state."""
    from taichi_hydro.output import atomic_write
    from taichi_hydro.state import STATE_FIELDS

    arrays = {name: state[name] for name, _ in STATE_FIELDS}
    atomic_write(path, lambda tmp: np.savez(tmp, case=np.array(case_name), **arrays))


def load_batch_state(path: str, case_name: str, worlds: int) -> dict:
    """The state that save_batch_state wrote to `path`, checked to be of case `case_name` and of
    `worlds` worlds (SystemExit naming the file otherwise)."""
    from taichi_hydro.state import STATE_FIELDS

    try:
        with np.load(path) as f:
            data = {k: f[k] for k in f.files}
    except (OSError, ValueError) as exc:
        raise SystemExit(f"--state {path}: not a saved batch state: {exc}") from None
    names = [name for name, _ in STATE_FIELDS]
    if "case" not in data or any(n not in data for n in names):
        raise SystemExit(f"--state {path}: not a batch state written by --save-state")
    if str(data["case"]) != case_name or data[names[0]].shape[0] != worlds:
        raise SystemExit(f"--state {path}: a state of case '{data['case']}' with {data[names[0]].shape[0]} worlds, not "
                         f"'{case_name}' with {worlds} worlds")
    return {n: data[n] for n in names}


def measure(case_name: str, worlds: int, kernel: str, threads: int, steps: int, launches: int, restore: str = "counts",
            state: str | None = None, save_state: str | None = None, into_step: bool = False) -> dict:
    """The replay of `kernel` on a pool of `threads` threads (this process); restore: what is put
    back before each launch besides the collision's counters ("counts": nothing else;
    "arguments": every array argument; or a comma-separated list of array arguments). state:
    start from this file (save_batch_state's) instead of the case's start; save_state: write the
    state reached after the steps there; into_step: then run the next step's launches before the
    kernel's, so that the arrays restored are the inputs the kernel gets in that step."""
    import taichi as ti

    import taichi_hydro as th
    from taichi_hydro import backend

    from . import cases as registry
    from . import states

    th.init("cpu", cpu_threads=threads)
    if threads == 1:  # the pool's loops on one thread (set before any kernel compiles)
        backend.SERIAL_LOOPS = False
        backend.WORLD_SPREAD = backend.POOL_SLOTS
    case = registry.find_dynamics(case_name)
    sim = th.Simulator(case.scene(), worlds=worlds, graph=False)
    if state:
        sim.reset(state=load_batch_state(state, case_name, worlds))
    elif case.settle:
        sim.reset(state=states.start_state(case, worlds))
    sim.step(steps)
    if save_state:
        save_batch_state(save_state, case_name, sim.get_state())
    plan, args = sim.step_plan, sim.bindings()
    found = [i for i, (k, _) in enumerate(plan.launches) if k.__name__ == kernel]
    if not found:
        raise SystemExit(f"no launch of {kernel!r} in the step; kernels: {sorted({k.__name__ for k, _ in plan.launches})}")
    launch, names = plan.launches[found[0]]
    values = [args[n] for n in names]
    if into_step:  # the next step up to the kernel: its inputs as that step gives them
        for k, launch_names in plan.launches[:found[0]]:
            k(*[args[n] for n in launch_names])
    # the narrow phase appends from the collision's counts: each launch starts from the step's
    kept = [sim.collision.counts]
    arrays = {n: v for n, v in zip(names, values) if isinstance(v, ti.Ndarray)}
    if restore != "counts":
        chosen = list(arrays) if restore == "arguments" else restore.split(",")
        unknown = [n for n in chosen if n not in arrays]
        if unknown:
            raise SystemExit(f"--restore {restore}: {unknown} are not array arguments of {kernel}; its arrays: {list(arrays)}")
        kept += [arrays[n] for n in chosen if all(arrays[n] is not k for k in kept)]
    saved = [copy.deepcopy(arr) for arr in kept]

    def put_back():
        for arr, value in zip(kept, saved):
            arr.copy_from(value)

    for _ in range(3):  # the first compiles
        put_back()
        launch(*values)
    ti.sync()
    first = [a.to_numpy() for a in arrays.values()]
    w0 = time.perf_counter()
    for _ in range(launches):
        put_back()
    ti.sync()
    restore_s = (time.perf_counter() - w0) / launches
    idle0, r0, w0 = _idle_ticks(), resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(launches):
        put_back()
        launch(*values)
    ti.sync()
    w1, r1, idle1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF), _idle_ticks()
    same = all(np.array_equal(a.to_numpy(), x, equal_nan=True) for a, x in zip(arrays.values(), first))
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    tick = os.sysconf("SC_CLK_TCK")
    return {"case": case_name, "worlds": worlds, "kernel": kernel, "threads": threads, "steps": steps, "launches": launches,
            "restore": restore, "into_step": into_step, "arrays_restored": len(kept), "restore_s_per_launch": restore_s, "same_outputs": same,
            "device": describe("cpu"), "s_per_launch": (w1 - w0) / launches - restore_s, "cpu_over_wall": cpu / (w1 - w0),
            "core_idle_fraction": [(b - a) / tick / (w1 - w0) for a, b in zip(idle0, idle1)]}


def main(argv=None) -> int:
    p = cli.parser("bench.replay_kernel", __doc__)
    cli.add_case(p, "pile_27_settled", 64, arch=False)
    p.add_argument("--kernel", default="clip_candidates")
    p.add_argument("--threads", default="1,2", help="comma-separated pool sizes, one process each")
    p.add_argument("--steps", type=int, default=20, help="steps before the replay")
    p.add_argument("--launches", type=int, default=100)
    p.add_argument("--restore", default="counts",
                   help="what is put back before each launch: \"counts\" (the collision's counters), \"arguments\" (every "
                        "array argument too) or a comma-separated list of the kernel's array arguments (and the counters)")
    p.add_argument("--state", help="start from this batch state (written by --save-state) instead of the case's start")
    p.add_argument("--save-state", help="write the state reached after --steps here (.npz): two code versions replayed "
                                        "from one such file solve the same problem")
    p.add_argument("--into-step", action="store_true",
                   help="after the steps, run the next step's launches before the kernel's, so that the replay (with "
                        "--restore) solves the problem that step gives the kernel")
    p.add_argument("--out", help="write the rows as JSON here")
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)  # measure this pool size in this process
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.case, args.worlds, args.kernel, args.one, args.steps, args.launches, args.restore,
                                 args.state, args.save_state, args.into_step)))
        return 0
    rows = []
    for threads in args.threads.split(","):
        extra = [*(["--state", args.state] if args.state else []), *(["--save-state", args.save_state] if args.save_state else []),
                 *(["--into-step"] if args.into_step else [])]
        row = run_one("bench.replay_kernel", [threads, "--case", args.case, "--worlds", str(args.worlds), "--kernel",
                                              args.kernel, "--steps", str(args.steps), "--launches", str(args.launches),
                                              "--restore", args.restore, *extra],
                      f"{threads} threads")
        if row is None:
            return 1
        rows.append(row)
    for r in rows:
        idle = ", ".join(f"{x:.0%}" for x in r["core_idle_fraction"])
        print(f"{r['case']} x{r['worlds']}, {r['kernel']}, {r['threads']} thread(s): {r['s_per_launch'] * 1e3:.3f} ms per "
              f"launch (restores of {r['arrays_restored']} arrays {r['restore_s_per_launch'] * 1e3:.3f} ms, not counted; "
              f"{'every launch left the same arrays' if r['same_outputs'] else 'the launches left different arrays'}), "
              f"CPU/wall {r['cpu_over_wall']:.2f}, cores idle {idle}   ({r['device']})")
    write_rows(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
