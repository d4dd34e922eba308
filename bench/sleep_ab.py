"""Gauss-Seidel with and without sleep (skipping the contacts of bodies that settled within a
step, taichi_hydro.solver), side by side in one process.

    python -m bench.sleep_ab --arch cpu --cases pile_27:64,pile_64:16,box_stack:64,coin:64 --out bench/results/sleep_ab_2core_epyc.json

Two simulators of a case, both with `[solver] method = "gauss_seidel"` on the world schedule
(sleep is that method's option; the cpu and vulkan default is newton, cuda's the contact
schedule), one with `sleep = false`, run the case's steps
once to grow their pools and compile, are reset, then step in alternating chunks of 10 steps
(the order flips every chunk) so that both see the same machine load. One JSON line per case:
world-steps/s of each, their ratio, the mean height of the bodies at the end (the runs differ
only within the solver tolerance), and contact updates per world-step (solver_stats, counted in
a second, untimed pass step by step)."""

from __future__ import annotations

import dataclasses
import sys
import time

from . import cases as registry
from . import cli
from .rows import emit
from .machine import machine


def measure(case_name: str, worlds: int, chunk: int = 10) -> dict:
    import numpy as np

    import taichi_hydro as th

    case = registry.find_dynamics(case_name)
    sims, seconds, updates = {}, {}, {}
    for sleep in (0, 1):
        scene = case.scene()
        solver = dataclasses.replace(scene.solver, method="gauss_seidel", schedule="world", sleep=bool(sleep))
        sim = th.Simulator(dataclasses.replace(scene, solver=solver), worlds=worlds)
        sim.step(case.steps)
        sim.reset()
        sim.world_status()
        sims[sleep], seconds[sleep], updates[sleep] = sim, 0.0, 0.0
    for k in range(case.steps // chunk):
        for sleep in ((0, 1) if k % 2 == 0 else (1, 0)):
            start = time.perf_counter()
            sims[sleep].step(chunk)
            sims[sleep].world_status()
            seconds[sleep] += time.perf_counter() - start
    steps = chunk * (case.steps // chunk)
    rate = {s: worlds * steps / seconds[s] for s in (0, 1)}
    height = {s: float(np.mean(sims[s].get_state()["position"][:, :, 2])) for s in (0, 1)}
    for sleep, sim in sims.items():  # untimed: the same steps again, one at a time, counting updates
        sim.reset()
        for _ in range(steps):
            sim.step(1)
            updates[sleep] += float(sim.solver_stats()["updates"].mean()) / steps
    return {"suite": "sleep_ab", "case": case_name, "arch": th.current_arch(), "worlds": worlds, "steps": steps,
            "world_steps_per_s": {"sleep_off": rate[0], "sleep_on": rate[1]}, "ratio_on_off": rate[1] / rate[0],
            "contact_updates_per_world_step": {"sleep_off": updates[0], "sleep_on": updates[1]},
            "mean_height_m": {"sleep_off": height[0], "sleep_on": height[1]}}


def main(argv=None) -> int:
    p = cli.parser("bench.sleep_ab", __doc__)
    p.add_argument("--arch", default="cpu")
    p.add_argument("--cases", default="pile_27:64,pile_64:16,box_stack:64,coin:64", help="case:worlds, comma-separated")
    p.add_argument("--out", help="append the JSON lines to this file")
    args = p.parse_args(argv)
    import taichi_hydro as th

    th.init(args.arch)
    rows = [{"meta": {"suite": "sleep_ab", "machine": machine(), "command": "python -m bench.sleep_ab " + " ".join(argv or sys.argv[1:])}}]
    for item in args.cases.split(","):
        name, worlds = item.split(":")
        rows.append(measure(name, int(worlds)))
        r = rows[-1]
        print(f"{name} x {worlds}: {r['world_steps_per_s']['sleep_off']:.1f} -> {r['world_steps_per_s']['sleep_on']:.1f} world-steps/s "
              f"({r['ratio_on_off']:.3f}x)", file=sys.stderr)
    emit(rows, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
