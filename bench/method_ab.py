"""Stage times of solver variants on the same case in one process, interleaved, so that the
ratios of their solve stages do not move with this shared machine's load between two runs:

    python -m bench.method_ab --case pile_27_1s --worlds 64 --variants newton,newton:presweeps=4,gauss_seidel \
        --out bench/results/method_ab.json

A variant is a [solver] method with optional [solver] settings, `method:key=value:...`
(default: newton and gauss_seidel, both on the world schedule). One simulator per variant
starts from the case's start (its saved state for a settled case), compiles and grows its
pools over a first run of the interval, is reset to the start, and then they step the case's
interval in turn, `--chunk` steps each, each chunk through Simulator.profile_stages (one
launch at a time with a sync after each stage, so a stage's time includes no other's). Row
per variant: the mean ms per step of each stage over the whole interval, its iterations
(sweeps) per world-step (mean / p95 / max, from solver_stats after every step), and the
first variant's solve and step time over this one's; one JSON list at --out."""

from __future__ import annotations

import dataclasses
import json
import time

import numpy as np

from . import cases as registry
from . import cli
from . import states
from .machine import describe, pool_cores
from .stage_record import StageRecord, mean_p95_max
from .worker import write_rows


def solver_settings(variant: str) -> dict:
    """[solver] settings of a variant `method:key=value:...` (values: int, float or text)."""
    method, *pairs = variant.split(":")
    out: dict = {"method": method}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"variant {variant!r}: {pair!r} is not key=value")
        for kind in (int, float, str):
            try:
                out[key] = kind(text)
                break
            except ValueError:
                continue
    return out


def main(argv=None) -> int:
    p = cli.parser("bench.method_ab", __doc__)
    cli.add_case(p, "pile_27_1s", 64)
    p.add_argument("--variants", default="newton,gauss_seidel",
                   help="comma-separated method[:key=value...] ([solver] settings), at least two")
    p.add_argument("--schedule", default="world")
    p.add_argument("--chunk", type=int, default=10, help="steps of one method before the other's")
    p.add_argument("--steps", type=int, help="steps of the interval (default: the case's)")
    p.add_argument("--out", help="write the rows as JSON here")
    args = p.parse_args(argv)
    variants = args.variants.split(",")
    if len(variants) < 2 or len(set(variants)) < len(variants):
        p.error(f"--variants takes two or more different variants, got {args.variants!r}")
    import taichi_hydro as th

    th.init(args.arch)
    case = registry.find_dynamics(args.case)
    steps = args.steps or case.steps
    start = states.start_state(case, args.worlds) if case.settle else None
    settings = {}
    for variant in variants:  # every variant checked before any compiles
        try:
            settings[variant] = solver_settings(variant)
        except ValueError as e:
            p.error(str(e))
        unknown = set(settings[variant]) - {f.name for f in dataclasses.fields(th.SolverSettings)}
        if unknown:
            p.error(f"variant {variant!r}: {sorted(unknown)[0]!r} is not a [solver] setting")
    sims, compile_s = {}, {}
    for variant in variants:
        scene = case.scene()
        scene = dataclasses.replace(scene, solver=dataclasses.replace(scene.solver, schedule=args.schedule,
                                                                      **settings[variant]))
        sim = th.Simulator(scene, worlds=args.worlds)
        t0 = time.perf_counter()
        sim.reset(state=start)
        sim.step(steps)  # compilation and pool growth, kept out of the interleaved run
        sim.world_status()
        compile_s[variant] = time.perf_counter() - t0
        sim.reset(state=start)
        sims[variant] = sim
    records = {m: StageRecord(sims[m]) for m in variants}
    done = 0
    while done < steps:
        chunk = min(args.chunk, steps - done)
        for m in variants:
            records[m].step(chunk)
        done += chunk
    rows = []
    for m in variants:
        stage_ms = {name: t * 1e3 for name, t in records[m].stage_mean_s().items()}
        rows.append({"case": args.case, "arch": args.arch, "device": describe(args.arch), "worlds": args.worlds,
                     "steps": steps, "chunk": args.chunk, "variant": m, "solver": f"{sims[m].method}/{sims[m].schedule}",
                     "presweeps": sims[m].options.presweeps,
                     "first_run_s": round(compile_s[m], 3), "stage_ms": stage_ms, "step_ms": sum(stage_ms.values()),
                     "iterations_mean_p95_max": mean_p95_max(records[m].iterations),
                     "capped_world_steps": records[m].capped,
                     "diverged_worlds": int(np.count_nonzero(sims[m].world_status())), "pool_cores": pool_cores()})
    for row in rows:
        row["this_solve_over_first"] = row["stage_ms"]["solve"] / rows[0]["stage_ms"]["solve"]
        row["this_step_over_first"] = row["step_ms"] / rows[0]["step_ms"]
        print(json.dumps(row), flush=True)
    print(f"{args.case}, {args.worlds} worlds, {steps} steps; solve and whole step against {variants[0]}'s "
          f"({rows[0]['stage_ms']['solve']:.2f} and {rows[0]['step_ms']:.2f} ms):")
    for row in rows[1:]:
        print(f"  {row['variant']}: solve {row['stage_ms']['solve']:.2f} ms ({row['this_solve_over_first']:.2f}x), "
              f"whole step {row['step_ms']:.2f} ms ({row['this_step_over_first']:.2f}x)")
    write_rows(args.out, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
