"""Stage times of two solver methods on the same case in one process, interleaved, so that the
ratio of their solve stages does not move with this shared machine's load between two runs:

    python -m bench.method_ab --case pile_27_1s --worlds 64 --out bench/results/method_ab.json

One simulator per method (default: newton and gauss_seidel on the world schedule) starts from
the case's start (its saved state for a settled case), compiles and grows its pools over a
first run of the interval, is reset to the start, and then the two step the case's interval
in alternating chunks of `--chunk` steps, each chunk through Simulator.profile_stages (one
launch at a time with a sync after each stage, so a stage's time includes no other's). Row
per method: the mean ms per step of each stage over the whole interval, its iterations
(sweeps) per world-step (mean / p95 / max, from solver_stats after every step), and the other
method's solve and step time over this one's; one JSON list at --out."""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np

from . import cases as registry
from . import states
from .machine import describe, pool_cores
from .worker import write_rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.method_ab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="cpu")
    p.add_argument("--case", default="pile_27_1s")
    p.add_argument("--worlds", type=int, default=64)
    p.add_argument("--methods", default="newton,gauss_seidel", help="two comma-separated [solver] methods")
    p.add_argument("--schedule", default="world")
    p.add_argument("--chunk", type=int, default=10, help="steps of one method before the other's")
    p.add_argument("--steps", type=int, help="steps of the interval (default: the case's)")
    p.add_argument("--out", help="write the rows as JSON here")
    args = p.parse_args(argv)
    methods = args.methods.split(",")
    if len(methods) != 2:
        p.error(f"--methods takes two methods, got {args.methods!r}")
    import taichi_hydro as th

    th.init(args.arch)
    case = registry.find_dynamics(args.case)
    steps = args.steps or case.steps
    start = states.start_state(case, args.worlds) if case.settle else None
    sims, compile_s = {}, {}
    for method in methods:
        scene = case.scene()
        scene = dataclasses.replace(scene, solver=dataclasses.replace(scene.solver, method=method, schedule=args.schedule))
        sim = th.Simulator(scene, worlds=args.worlds)
        t0 = time.perf_counter()
        sim.reset(state=start)
        sim.step(steps)  # compilation and pool growth, kept out of the interleaved run
        sim.world_status()
        compile_s[method] = time.perf_counter() - t0
        sim.reset(state=start)
        sims[method] = sim
    stage_s = {m: dict.fromkeys((name for name, _ in sims[m].stages), 0.0) for m in methods}
    iterations = {m: [] for m in methods}
    done = 0
    while done < steps:
        chunk = min(args.chunk, steps - done)
        for m in methods:
            sim = sims[m]
            for _ in range(chunk):
                for name, t in sim.profile_stages(1).items():
                    stage_s[m][name] += t
                iterations[m].append(sim.solver_stats()["iterations"].copy())
        done += chunk
    rows = []
    for m in methods:
        its = np.concatenate(iterations[m])
        stage_ms = {name: t / steps * 1e3 for name, t in stage_s[m].items()}
        rows.append({"case": args.case, "arch": args.arch, "device": describe(args.arch), "worlds": args.worlds,
                     "steps": steps, "chunk": args.chunk, "solver": f"{sims[m].method}/{sims[m].schedule}",
                     "first_run_s": round(compile_s[m], 3), "stage_ms": stage_ms, "step_ms": sum(stage_ms.values()),
                     "iterations_mean_p95_max": [float(its.mean()), float(np.percentile(its, 95)), int(its.max())],
                     "diverged_worlds": int(np.count_nonzero(sims[m].world_status())), "pool_cores": pool_cores()})
    for row, other in ((rows[0], rows[1]), (rows[1], rows[0])):
        row["other_solve_over_this"] = other["stage_ms"]["solve"] / row["stage_ms"]["solve"]
        row["other_step_over_this"] = other["step_ms"] / row["step_ms"]
    for r in rows:
        print(json.dumps(r), flush=True)
    print(f"{args.case}, {args.worlds} worlds, {steps} steps: solve {rows[1]['stage_ms']['solve']:.2f} ms ({methods[1]}) / "
          f"{rows[0]['stage_ms']['solve']:.2f} ms ({methods[0]}) = {rows[0]['other_solve_over_this']:.2f}x; whole step "
          f"{rows[0]['other_step_over_this']:.2f}x")
    write_rows(args.out, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
