"""Newton's solve in float64 against float32 on the same backend (cpu): positions and velocities
after the same steps, and iterations per step.

    python -m bench.newton_precision --out bench/results/newton_precision_2core_epyc.json

float32 is the arithmetic the solver uses on Vulkan; here it is forced on the cpu backend (the
solver data picks float32 when it believes the backend is vulkan), so the two runs differ in
the solver's arithmetic only. The pile's first 25 steps are before its contacts turn chaotic;
60 steps include the landing."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import numpy as np

from taichi_hydro.output import write_text

CASES = (("pile_27", 25), ("pile_27", 60), ("coin", 100), ("box_stack", 50))


def run(name: str, steps: int, float32: bool) -> dict:
    import taichi_hydro as th
    import taichi_hydro.solver.data as solver_data

    from .cases import find_dynamics

    if float32:
        solver_data.current_arch = lambda: "vulkan"
    scene = find_dynamics(name).scene()
    scene = dataclasses.replace(scene, solver=dataclasses.replace(scene.solver, method="newton", schedule="world"))
    sim = th.Simulator(scene)
    iterations = []
    for _ in range(steps):
        sim.step(1)
        iterations.append(int(sim.solver_stats()["iterations"][0]))
    state = sim.get_state()
    return {"position": state["position"][0].astype(np.float64), "velocity": state["velocity"][0].astype(np.float64),
            "iterations": float(np.mean(iterations)), "real": str(sim.solver.real)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="write the JSON lines here")
    args = p.parse_args(argv)
    import taichi_hydro as th

    th.init("cpu")
    results = {(n, s): run(n, s, False) for n, s in CASES}
    rows = []
    for (name, steps), f64 in results.items():
        f32 = run(name, steps, True)
        rows.append({"case": name, "steps": steps,
                     "position_difference_m": float(np.abs(f64["position"] - f32["position"]).max()),
                     "velocity_difference_m_s": float(np.abs(f64["velocity"] - f32["velocity"]).max()),
                     "iterations_f64": f64["iterations"], "iterations_f32": f32["iterations"]})
        print(json.dumps(rows[-1]), flush=True)
    if args.out:  # a failed write keeps the old file
        write_text(args.out, "".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
