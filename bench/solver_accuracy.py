"""Work against accuracy of the solver's methods in the contact-rich regime: per step, the solve
stage's time and how far its velocities are from the converged solution of the same problem.

    python -m bench.solver_accuracy --out bench/results/solver_accuracy_2core_epyc.json

Every method stops on the same test (the largest body-velocity change of a sweep or a Newton
step below [solver] tolerance), but that test says different things about the error that is
left: Gauss-Seidel's per-sweep change is small when it contracts slowly (a settled pile, a
spinning patch), Newton's is small near the solution. So a speed comparison at the same
tolerance compares unequal answers; this bench prices each answer by its error.

Per case (bench.cases, from its settled start state where it has one) and configuration
(method, iteration cap, tolerance), a batch of `worlds` worlds steps from the same state; at
each step the solve stage's launches run alone between two syncs (timed) and every world's
solved velocities are compared with the reference: method newton in float64 to tolerance 1e-10
m/s on the same problem (the same contact rows, warm start and free velocities), which agrees
with Gauss-Seidel converged to 1e-12 (tests/test_newton.py). The error of a world is the largest
over its bodies of |dv| + reach |dw| (solver.cone.body_change: the most any point of the body
moves wrongly) [m/s]; rows give its median, 95th percentile and maximum over worlds and steps.
The trajectories are each configuration's own (the error of a step is measured on the problem
its own previous steps made)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

import numpy as np

from .stage_record import mean_p95_max

REFERENCE_TOLERANCE = 1e-10  # [m/s]
REFERENCE_ITERATIONS = 200
# (method, iteration cap, tolerance [m/s]; None: the scene's).
CONFIGS = (
    ("newton", None, None),
    ("gauss_seidel", None, None),
    ("gauss_seidel", 30, 1e-12),
    ("gauss_seidel", 100, 1e-12),
    ("gauss_seidel", 300, 1e-12),
    ("accelerated", None, None),
)
CASES = ("pile_27_settled", "box_stack_held", "coin")


def body_errors(v: np.ndarray, w: np.ndarray, v_ref: np.ndarray, w_ref: np.ndarray, reach: np.ndarray) -> np.ndarray:
    """Per world, the largest |dv| + reach |dw| over its bodies [m/s] (solver.cone.body_change);
    v, w, v_ref, w_ref (W, B, 3), reach (B,)."""
    return (np.linalg.norm(v - v_ref, axis=-1) + reach * np.linalg.norm(w - w_ref, axis=-1)).max(axis=1)


class Reference:
    """Method newton in float64 on a simulator's assembled problem: a SolverData of its own
    (velocities, Newton scratch; the free velocities and Newton's candidate start, the previous
    solution, copied from the simulator's) and the simulator's contact rows, whose warm-start
    impulses it overwrites (the caller restores them)."""

    def __init__(self, sim, rows: int):
        import taichi_hydro as th
        from taichi_hydro.backend import current_arch
        from taichi_hydro.plan import kernel_parameters
        from taichi_hydro.solver import SolverData, SolverOptions
        from taichi_hydro.solver.newton import newton_solver

        settings = th.SolverSettings(method="newton", iterations=REFERENCE_ITERATIONS, tolerance=REFERENCE_TOLERANCE,
                                     linear="cholesky")
        options = SolverOptions.resolve(settings, current_arch())
        self.data = SolverData(options, sim.worlds, len(sim.scene.bodies), rows)
        self.kernel = newton_solver(self.data.real)
        self.names = list(kernel_parameters(self.kernel))
        self.options = options

    def solve(self, sim, args: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The reference velocities (W, B, 3) linear and angular, its iterations (W,) and
        residuals [m/s] (W,) (the stopping test's: tolerance unless the iterations ran out), of
        the problem the simulator has assembled (args: its bindings)."""
        from taichi_hydro import hostcopy

        own = self.data.arrays()
        shared = ("body_vc", "body_wc", "body_inv_inertia_W", "newton_last", "newton_kept")
        for name in shared:  # the free velocities and Newton's candidate start: the simulator's
            if name in args:
                hostcopy.copy(own[name], args[name])
        values = {**args, **own, "iterations": self.options.iterations, "tolerance": self.options.tolerance,
                  "omega": self.options.relaxation, "presweeps": 0}
        self.kernel(*(values[n] for n in self.names))
        return (hostcopy.to_numpy(own["body_vc"]).astype(np.float64), hostcopy.to_numpy(own["body_wc"]).astype(np.float64),
                hostcopy.to_numpy(own["world_iterations"]), hostcopy.to_numpy(own["world_residual"]))


def measure(case_name: str, method: str, cap: int | None, tolerance: float | None, worlds: int, steps: int, skip: int) -> dict:
    """One configuration on one case: solve time per step and error against the reference, over
    `steps` steps after `skip` unmeasured ones (the first step from a saved state has no warm
    start: the state keeps no impulses)."""
    import taichi as ti

    import taichi_hydro as th
    from taichi_hydro import hostcopy

    from . import cases as registry
    from . import states

    case = registry.find_dynamics(case_name)
    scene = case.scene()
    given = {"method": method, "schedule": "world", **({"iterations": cap} if cap else {}),
             **({"tolerance": tolerance} if tolerance else {})}
    scene = dataclasses.replace(scene, solver=dataclasses.replace(scene.solver, **given))
    start = states.start_state(case, worlds) if case.settle else None
    sim = th.Simulator(scene, worlds=worlds)
    sim.reset(state=start)
    sim.step(skip + steps)  # pools grow to what these steps need; compilation
    sim.reset(state=start)
    sim.step(skip)
    args = {**sim.bindings(), **sim.step_plan.constants}
    reference = Reference(sim, args["c_gamma"].shape[0])
    launches = sim.step_plan.launches
    ends = dict(sim.stages)
    names = [n for n, _ in sim.stages]
    solve_start = ends[names[names.index("solve") - 1]]
    solve_end = ends["solve"]
    written = [n for n in ("c_gamma", "b_gamma") if n in args]  # the warm start, which the reference overwrites
    reach = hostcopy.to_numpy(args["body_reach"]).astype(np.float64)
    solve_s, errors, iterations, reference_iterations, reference_residuals = [], [], [], [], []

    def run(first, last):
        for kernel, keys in launches[first:last]:
            kernel(*(args[k] for k in keys))

    sim.max_counts.fill(0)
    for _ in range(steps):
        run(0, solve_start)
        saved = {n: hostcopy.to_numpy(args[n]) for n in written}
        v_ref, w_ref, ref_its, ref_residuals = reference.solve(sim, args)
        for n, values in saved.items():
            hostcopy.from_numpy(args[n], values)
        ti.sync()
        t0 = time.perf_counter()
        run(solve_start, solve_end)
        ti.sync()
        solve_s.append(time.perf_counter() - t0)
        v = hostcopy.to_numpy(args["body_vc"]).astype(np.float64)
        w = hostcopy.to_numpy(args["body_wc"]).astype(np.float64)
        errors.append(body_errors(v, w, v_ref, w_ref, reach))
        iterations.append(hostcopy.to_numpy(args["world_iterations"]))
        reference_iterations.append(ref_its)
        reference_residuals.append(ref_residuals)
        run(solve_end, len(launches))
    if sim.collision.overflow(hostcopy.to_numpy(sim.max_counts)) is not None:
        raise RuntimeError(f"{case_name}: a pool overflowed in the measured steps")
    errors, iterations = np.concatenate(errors), np.concatenate(iterations)
    return {
        "suite": "solver_accuracy", "case": case_name, "worlds": worlds, "steps": steps, "after_steps": skip,
        "method": method, "iterations_cap": sim.options.iterations, "tolerance": sim.options.tolerance,
        "solve_ms_per_step": 1e3 * float(np.mean(solve_s)),
        "iterations_mean_p95_max": mean_p95_max([iterations]),
        "error_m_s_median_p95_max": [float(np.median(errors)), float(np.percentile(errors, 95)), float(errors.max())],
        "reference_iterations_mean_max": [float(np.mean(reference_iterations)), int(np.max(reference_iterations))],
        "reference_residual_max_m_s": float(np.max(reference_residuals)),
    }


def main(argv=None) -> int:
    from taichi_hydro.output import write_text

    from .machine import describe, machine

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated dynamics cases")
    p.add_argument("--worlds", type=int, default=64)
    p.add_argument("--steps", type=int, default=20, help="measured steps")
    p.add_argument("--skip", type=int, default=5, help="steps from the start state before the measured ones")
    p.add_argument("--out", help="write the JSON lines here (a failed run keeps the old file)")
    args = p.parse_args(argv)
    import taichi_hydro as th

    th.init("cpu")
    meta = {"suite": "solver_accuracy", "machine": machine(), "device": describe("cpu"), "unix_time": time.time(),
            "command": " ".join(["python -m bench.solver_accuracy", *(argv if argv is not None else sys.argv[1:])])}
    rows = []
    for name in args.cases.split(","):
        for method, cap, tolerance in CONFIGS:
            rows.append(measure(name, method, cap, tolerance, args.worlds, args.steps, args.skip))
            print(json.dumps(rows[-1]), flush=True)
    if args.out:
        write_text(args.out, "".join(json.dumps(r) + "\n" for r in [{"meta": meta}, *rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
