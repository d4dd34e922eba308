"""How Taichi's cpu backend shares one parallel loop between its pool's threads, measured on
loops whose cost per item changes along the index: the same items (a chain of dependent
arithmetic, `work` rounds each), with the first `heavy` fraction of them `ratio` times as
costly as the rest, four ways:

  uniform   every item costs the same (the total matches `skewed`);
  skewed    the costly items first, as in the narrow phase's candidate list (tet-tet rows,
            clipped by four planes, before the planar rows);
  striped   the skewed items visited in 16 stripes of runs of 64 (slot i takes run i // 64 of
            stripe (i // 64) % 16): any stretch of the loop then holds both kinds;
  queued    the skewed items in runs of 64 claimed one run at a time from the world
            schedule's queue (solver.world_schedule.world_slots: what its solvers do with
            worlds), so that a thread that finishes its runs early takes more.

    python -m bench.loop_balance --threads 1,2 --out bench/results/loop_balance.json

Each thread count runs in a process of its own (th.init, the pool's threads pinned as in a run;
loops not serialised); a row gives the median wall time of `reps` launches after one that
compiles, and the process's CPU time over wall time across them (2 on two threads when both
work throughout)."""

import argparse
import json
import resource
import statistics
import sys
import time

from . import cli
from .machine import describe
from .worker import run_one, write_rows

STRIPES, RUN = 16, 64


def measure(threads: int, items: int, work: int, heavy: float, ratio: int, reps: int) -> dict:
    """Wall time and CPU over wall of each way, on a cpu pool of `threads` threads (this process)."""
    import taichi as ti

    import taichi_hydro as th
    from taichi_hydro import backend
    from taichi_hydro.solver.world_schedule import first_world, next_world, open_queue, world_slots

    th.init("cpu", cpu_threads=threads)  # these loops ask for no serialisation: one thread runs the pool's loop
    out = ti.ndarray(ti.f32, items)
    n_heavy = int(heavy * items)
    light_total = items - n_heavy
    uniform_rounds = (n_heavy * ratio * work + light_total * work) // items

    @ti.func
    def chain(c: ti.i32, rounds: ti.i32) -> ti.f32:
        x = 1e-3 * ti.cast(c % 97, ti.f32)
        for _ in range(rounds):
            x = ti.sin(x) * 0.9 + 0.1
        return x

    @ti.kernel
    def uniform(out: ti.types.ndarray(dtype=ti.f32, ndim=1)):
        for c in range(items):
            out[c] = chain(c, uniform_rounds)

    @ti.kernel
    def skewed(out: ti.types.ndarray(dtype=ti.f32, ndim=1)):
        for c in range(items):
            out[c] = chain(c, work * ratio if c < n_heavy else work)

    runs = (items + RUN - 1) // RUN
    per_stripe = (runs + STRIPES - 1) // STRIPES

    @ti.kernel
    def striped(out: ti.types.ndarray(dtype=ti.f32, ndim=1)):
        for i in range(per_stripe * STRIPES * RUN):
            j = i // RUN
            c = ((j % STRIPES) * per_stripe + j // STRIPES) * RUN + i % RUN
            if c < items:
                out[c] = chain(c, work * ratio if c < n_heavy else work)

    queue = ti.ndarray(ti.i32, 1)

    @ti.kernel
    def queued(out: ti.types.ndarray(dtype=ti.f32, ndim=1), queue: ti.types.ndarray(dtype=ti.i32, ndim=1)):
        open_queue(queue)
        for slot in range(world_slots(runs)):
            j = first_world(slot, runs, queue)
            while j >= 0:
                for i in range(RUN):
                    c = j * RUN + i
                    if c < items:
                        out[c] = chain(c, work * ratio if c < n_heavy else work)
                j = next_world(runs, queue)

    rows = {}
    for kernel in (uniform, skewed, striped, queued):
        args = (out, queue) if kernel is queued else (out,)
        kernel(*args)  # compiles
        ti.sync()
        times = []
        r0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for _ in range(reps):
            t0 = time.perf_counter()
            kernel(*args)
            ti.sync()
            times.append(time.perf_counter() - t0)
        r1, w1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        rows[kernel.__name__] = {"s_per_launch": statistics.median(times), "cpu_over_wall": cpu / (w1 - w0)}
    pinned = backend.pinned_threads()
    return {"threads": threads, "items": items, "work": work, "heavy": heavy, "ratio": ratio, "reps": reps,
            "device": describe("cpu"), "pool_cores": sorted(pinned.values()) if isinstance(pinned, dict) else pinned,
            "ways": rows}


def main(argv=None) -> int:
    p = cli.parser("bench.loop_balance", __doc__)
    p.add_argument("--threads", default="1,2", help="comma-separated pool sizes, one process each")
    p.add_argument("--items", type=int, default=65536)
    p.add_argument("--work", type=int, default=20, help="rounds of the chain per light item")
    p.add_argument("--heavy", type=float, default=0.5, help="fraction of the items, first in the loop, that are costly")
    p.add_argument("--ratio", type=int, default=4, help="how many times a light item's rounds a costly item takes")
    p.add_argument("--reps", type=int, default=51)
    p.add_argument("--out", help="write the rows as JSON here")
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)  # measure this pool size in this process
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args.items, args.work, args.heavy, args.ratio, args.reps)))
        return 0
    rows = []
    for threads in args.threads.split(","):
        row = run_one("bench.loop_balance", [threads, "--items", str(args.items), "--work", str(args.work), "--heavy",
                                             str(args.heavy), "--ratio", str(args.ratio), "--reps", str(args.reps)],
                      f"{threads} threads")
        if row is not None:
            rows.append(row)
    for r in rows:
        print(f"{r['threads']} thread(s): " + "   ".join(
            f"{k} {v['s_per_launch'] * 1e3:6.3f} ms (cpu/wall {v['cpu_over_wall']:.2f})" for k, v in r["ways"].items())
            + f"   (pool on cores {r['pool_cores']}; {r['device']})")
    write_rows(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
