"""Benchmark runner: one JSON object per (case, arch, worlds, resolution), side by side with
Drake in the same run.

    python -m bench.run contact --arch cpu,vulkan --drake --out bench/results/contact.json

Each arch runs in its own worker process (Taichi has one backend per process); the parent
also times Drake (optional package `drake`) on the same scenes and adds ratios. Compile time
(first call: kernel compilation or offline-cache load, and pool growth) is kept apart from
the steady-state timing, which repeats the call until 0.5 s have passed (at least 3 calls) and
reports the median. Device sync happens once per call, when the host reads the pool counters.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import taichi_hydro as th
from taichi_hydro.output import append_text, check_output, write_text
from taichi_hydro.progress import progress_bar
from taichi_hydro.types import C_POLYGONS

from . import cases as registry
from . import states
from .machine import describe, machine, pool_cores
from .stage_record import StageRecord, mean_p95_max

ROOT = Path(__file__).resolve().parents[1]


def _median_time(fn, min_time=0.5, min_calls=3, max_calls=200) -> float:
    times = []
    start = time.perf_counter()
    while len(times) < min_calls or (time.perf_counter() - start < min_time and len(times) < max_calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def contact_worker(arch: str, names: list[str], quick: bool, cpu_threads: int | None = None, pin_threads: bool = True) -> None:
    """Time Simulator.collide() (the whole device pipeline, all worlds) per point; print JSON.
    cpu_threads: the cpu backend's threads (1 serialises the loops, backend.SERIAL_LOOPS)."""

    th.init(arch, cpu_threads=cpu_threads, pin_threads=pin_threads)
    device = describe(arch)
    for name in names:
        case = registry.find(name)
        for resolution, worlds in registry.contact_points(case, quick):
            scene = case.scene(resolution)
            sim = th.Simulator(scene, worlds=worlds)
            t0 = time.perf_counter()
            counts = sim.collide()
            first = time.perf_counter() - t0
            query_s = _median_time(sim.collide)
            polygons = int(counts[C_POLYGONS])
            row = {
                "suite": "contact",
                "case": name,
                "arch": arch,
                "device": device,
                "worlds": worlds,
                "resolution": resolution,
                "tets": int(sum(g.tets.tet_count for g in sim.model.host.geometries if g.tets is not None)),
                "compile_s": round(max(first - query_s, 0.0), 4),
                "query_s": query_s,
                "queries_per_s": worlds / query_s,
                "polygons_per_world": polygons / worlds,
                "polygons_per_s": polygons / query_s,
                "pool_passes": sim.collision.passes,
                "cpu_threads": cpu_threads,
                "pool_cores": pool_cores(),
            }
            print(json.dumps(row), flush=True)


def _worlds(case, quick: bool) -> tuple[int, ...]:
    return case.worlds[:2] if quick else case.worlds


def dynamics_worker(arch: str, names: list[str], quick: bool, only_worlds: int | None = None, schedule: str | None = None,
                    deterministic: bool = False, method: str | None = None, linear: str | None = None,
                    cpu_threads: int | None = None, presweeps: int | None = None, skin: float | None = None,
                    pin_threads: bool = True) -> None:
    """Time Simulator.step() over each case's interval per world count; print JSON.

    A case with settle steps starts from its saved state (bench/states/<case>.npz, made once
    by bench.states: the same for every method, schedule, world count and run), copied to
    every world with Simulator.reset(state=...), so that each run's first step is solved cold
    (no warm start) alike. The first run (compilation or cache load, pool growth) is timed
    apart as compile_s; the simulator is then reset (to the saved state) and the same
    interval timed again: case.timed_steps(worlds) steps (fewer than case.steps
    at large batches of a case with a world-step budget; the row then has steps_reduced_from
    and steps_note). outcome: the case's probe read after the timed run (_probe).
    iterations_mean_p95_max: the solver iterations per world-step over the same interval,
    stepped again one step at a time (untimed), capped_world_steps: how many of those ended
    unconverged at the iteration cap (StageRecord), and stage_ms: the mean time per step of each
    stage over that same interval (profile_stages: one launch at a time with a sync after each
    stage, so they add up to more than a step takes in the timed run); stage_share: each
    stage's part of their sum. schedule
    overrides the scene's solver schedule ("world", "contact" or "block": one thread block per
    world, method newton on cuda and vulkan; default: the backend's),
    method its method ("jacobi", "accelerated", "gauss_seidel", "newton"; default: the
    schedule's), linear how method newton solves its step ("auto", "cholesky", "cg"; the row's
    linear_solver says which ran, linear_iterations_mean_p95_max its CG iterations per
    world-step), cpu_threads the cpu backend's threads (None: one per core; 1 serialises the
    loops, backend.SERIAL_LOOPS), skin the scene's [collision] skin [m] (the row's skin_m says
    which ran). deterministic: time each
    point twice, the default mode then [solver] deterministic = true (rows say which)."""
    from taichi_hydro.memory import device_bytes

    th.init(arch, cpu_threads=cpu_threads, pin_threads=pin_threads)
    device = describe(arch)
    for name in names:
        case = registry.find_dynamics(name)
        modes = [False, True] if deterministic else [False]
        for worlds, det in [(w, m) for w in ([only_worlds] if only_worlds else _worlds(case, quick)) for m in modes]:
            steps = min(case.timed_steps(worlds), 20) if quick else case.timed_steps(worlds)
            scene = timed_scene(case, det, schedule, method, linear, presweeps, skin)
            start = states.start_state(case, worlds) if case.settle else None
            sim = th.Simulator(scene, worlds=worlds)
            t0 = time.perf_counter()
            sim.reset(state=start)  # the first run (compilation or cache load, pool growth) from the start state
            sim.step(steps)
            sim.world_status()
            first = time.perf_counter() - t0
            growths_first = sim.collision.growths
            sim.reset(state=start)
            sim.world_status()
            p_start = sim.get_state()["position"] if case.probe else None
            t0 = time.perf_counter()
            sim.step(steps)
            diverged = int(np.count_nonzero(sim.world_status()))
            wall = time.perf_counter() - t0
            outcome = _probe(sim, case.probe, p_start) if case.probe else None
            totals = sim.step_totals()  # sums since the reset before the timed run
            iterations, linear_iterations, stages, capped = _profile_run(sim, steps, start)
            row = {
                "suite": "dynamics",
                "case": name,
                "arch": arch,
                "device": device,
                "worlds": worlds,
                "bodies": len(sim.scene.bodies),
                "dt": sim.dt,
                "steps": steps,
                **({"steps_reduced_from": case.steps, "steps_note": f"fewer timed steps at {worlds} worlds: at most "
                    f"{case.world_step_budget} world-steps per timed run"} if steps < case.steps and not quick else {}),
                "compile_s": round(max(first - wall, 0.0), 3),
                "wall_s": wall,
                "world_steps_per_s": worlds * steps / wall,
                "polygons_per_world_step": totals["polygons"] / (worlds * steps),
                "contacts_per_world_step": totals["contacts"] / (worlds * steps),
                "iterations_per_world_step": totals["iterations"] / (worlds * steps),
                "iterations_mean_p95_max": iterations,
                "capped_world_steps": capped,
                **({"linear_solver": sim.linear_solver, "linear_iterations_mean_p95_max": linear_iterations}
                   if sim.linear_solver else {}),
                "settle_steps": case.settle,
                **({"start": f"saved state {states.path_of(case).relative_to(ROOT)}"} if case.settle else {}),
                "stage_ms": {k: v * 1e3 for k, v in stages.items()},
                "stage_share": {k: v / sum(stages.values()) for k, v in stages.items()},
                "diverged_worlds": diverged,
                "pool_overflows": {"first_run": growths_first, "timed_run": sim.collision.growths - growths_first},
                "solver": f"{sim.method}/{sim.schedule}",
                **({"presweeps": sim.options.presweeps} if sim.method == "newton" else {}),
                "cpu_threads": cpu_threads,
                "pool_cores": pool_cores(),
                "skin_m": sim.scene.collision_skin,
                "deterministic": det,
                "pool_capacities": list(sim.collision.caps.as_tuple()),
                "device_bytes_per_world": device_bytes(sim) / worlds,
                **({"outcome": outcome} if outcome else {}),
            }
            print(json.dumps(row), flush=True)


def timed_scene(case, deterministic: bool = False, schedule: str | None = None, method: str | None = None,
                linear: str | None = None, presweeps: int | None = None, skin: float | None = None):
    """The case's scene with the solver settings and the collision skin [m] a dynamics run
    overrides (None: the scene's)."""
    scene = case.scene()
    given = {"schedule": schedule, "method": method, "linear": linear, "presweeps": presweeps}
    solver = dataclasses.replace(scene.solver, deterministic=deterministic, **{k: v for k, v in given.items() if v is not None})
    return dataclasses.replace(scene, solver=solver, collision_skin=scene.collision_skin if skin is None else skin)


def _probe(sim, probe, p_start: np.ndarray) -> dict:
    """A case's outcome after its timed run (cases.Probe): the probe body's displacement over the
    run [m] (world 0, and the largest over the worlds) and the pairs' contact forces at its end
    [N, world frame] (world 0)."""
    out = {}
    if probe.body:
        b = sim.scene.body_index(probe.body)
        drift = np.linalg.norm(sim.get_state()["position"][:, b] - p_start[:, b], axis=-1)
        out.update(body=probe.body, drift_m=float(drift[0]), drift_max_m=float(drift.max()))
    if probe.pairs:
        names, forces = sim.pair_forces()
        out["pair_forces_N"] = {f"{a}|{b}": forces[0, names.index((a, b))].tolist() for a, b in probe.pairs}
    return out


def _profile_run(sim, steps: int, start: dict | None) -> tuple[list[float], list[float], dict[str, float], int]:
    """The timed run's interval again from its start (reset to `start`, or to the scene's initial
    state: cold, as the timed run), one step at a time and untimed as a whole (StageRecord):
    [mean, p95, max] of the solver iterations per world-step; the same of the CG iterations
    (0 but for Newton's linear = "cg"); the mean time per step of each stage [s]; and the
    world-steps unconverged at the iteration cap (StageRecord.capped)."""
    sim.reset(state=start)
    record = StageRecord(sim)
    record.step(steps)
    return mean_p95_max(record.iterations), mean_p95_max(record.linear_iterations), record.stage_mean_s(), record.capped


def _drake_build(scene, approximation: str):
    """Drake's discrete plant of a scene: through its URDF files when it has [[robot]] tables
    (drake_robots), else body by body (drake_scene)."""
    if scene.robots:
        from .drake_robots import build as build_robots

        return build_robots(scene, scene.dt, approximation)
    from .drake_scene import build

    return build(scene, time_step=scene.dt, approximation=approximation)


def _drake_start(case) -> tuple[object, int, str]:
    """(the scene Drake is built from, the steps Drake settles before the timed ones, how the
    row's start is described) for a dynamics case. A settled case of free bodies starts from
    its saved state (bench.states), as ours does; a settled case with [[robot]] tables settles
    in Drake (drake_robots builds the robots from their URDF files at their initial joint
    positions, and a saved state of bodies would have to be mapped to joint coordinates)."""
    scene = case.scene()
    if not case.settle:
        return scene, 0, "the scene's initial state"
    if scene.robots:
        return scene, case.settle, f"settled in Drake ({case.settle} steps)"
    return (states.with_start_state(scene, states.start_state(case, 1)), 0,
            f"saved state {states.path_of(case).relative_to(ROOT)}")


def _drake_run(name: str, approximation: str, steps: int) -> tuple[float, dict | None]:
    """(wall time [s] of `steps` Drake steps of a dynamics case from its start (_drake_start),
    its outcome (cases.Probe, read as _probe reads ours) or None); run in a worker process."""
    from .drake_scene import advance

    case = registry.find_dynamics(name)
    scene, settle, _ = _drake_start(case)
    ds = _drake_build(scene, approximation)
    observe = _drake_observer(case.probe, ds) if case.probe else None
    return advance(ds, steps, settle=settle, observe=observe)


def _drake_observer(probe, ds):
    """The outcome of a Drake run read as _probe reads ours: a function of the start and end
    contexts giving the probed body's drift [m] and the probed pairs' forces [N]."""
    from .drake_robots import body_position, pair_forces

    def observe(start, end):
        out = {}
        if probe.body:
            drift = float(np.linalg.norm(body_position(ds, end, probe.body) - body_position(ds, start, probe.body)))
            out.update(body=probe.body, drift_m=drift)
        if probe.pairs:
            forces = pair_forces(ds, end, probe.pairs)
            out["pair_forces_N"] = {f"{a}|{b}": f.tolist() for (a, b), f in zip(probe.pairs, forces)}
        return out
    return observe


def drake_dynamics(names: list[str], quick: bool, processes: int = 1) -> list[dict]:
    """Drake's discrete plant (Lagged and SAP) over the same interval: one world per process,
    `processes` processes at once (one per core: Drake's CPU throughput for a batch of worlds).
    world_steps_per_s = processes * steps / (the slowest process's simulate() time). A scene
    Drake cannot express gives a row with the reason in "error"."""
    try:
        importlib.import_module(".drake_scene", __package__)
    except ImportError as exc:
        print(f"drake unavailable ({exc}); skipping the Drake baseline", file=sys.stderr)
        return []
    from concurrent.futures import ProcessPoolExecutor
    from importlib.metadata import version

    rows = []
    for name in names:
        case = registry.find_dynamics(name)
        steps = min(case.steps, 20) if quick else case.steps
        for approximation in ("lagged", "sap"):
            outcome = None
            try:
                if processes == 1:
                    wall, outcome = _drake_run(name, approximation, steps)
                else:
                    with ProcessPoolExecutor(processes) as pool:
                        runs = list(pool.map(_drake_run, [name] * processes, [approximation] * processes, [steps] * processes))
                    wall, outcome = max(r[0] for r in runs), runs[0][1]
                failed = None
            except (RuntimeError, NotImplementedError) as exc:  # Drake's solvers can fail to converge
                wall, failed = float("nan"), str(exc).splitlines()[0][:200]
            rows.append({
                "suite": "dynamics",
                "case": name,
                "arch": f"drake-{approximation}",
                "device": f"{describe('cpu')} ({processes} process{'es' if processes > 1 else ''}, 1 thread each)",
                "drake_version": version("drake"),
                "worlds": processes,
                "bodies": len(case.scene().bodies),
                "dt": case.scene().dt,
                "steps": steps,
                "settle_steps": case.settle,
                **({"start": _drake_start(case)[2]} if case.settle else {}),
                "wall_s": wall,
                "world_steps_per_s": processes * steps / wall,
                **({"outcome": outcome} if outcome else {}),
                **({"error": failed} if failed else {}),
            })
    return rows


def drake_contact(names: list[str], quick: bool) -> list[dict]:
    """Drake's ComputeContactSurfaces (polygons) on the same scenes: one world at a time."""
    try:
        from .drake_scene import build, time_contact_surfaces
    except ImportError as exc:
        print(f"drake unavailable ({exc}); skipping the Drake baseline", file=sys.stderr)
        return []
    from importlib.metadata import version

    rows = []
    for name in names:
        case = registry.find(name)
        for resolution in sorted({r for r, _ in registry.contact_points(case, quick)}, reverse=True):
            ds = build(case.scene(resolution))
            result = time_contact_surfaces(ds, repeats=20 if quick else 100)
            faces = sum(s["faces"] for s in result["surfaces"])
            rows.append({
                "suite": "contact",
                "case": name,
                "arch": "drake",
                "device": f"{describe('cpu')} (1 thread)",
                "drake_version": version("drake"),
                "worlds": 1,
                "resolution": resolution,
                "query_s": result["query_s"],
                "queries_per_s": 1.0 / result["query_s"],
                "polygons_per_world": faces,
                "polygons_per_s": faces / result["query_s"],
            })
    return rows


def add_ratios(rows: list[dict]) -> None:
    """contact: ratio_vs_drake = our queries/s over Drake's, same case and resolution.
    dynamics: ratio_vs_drake_<approximation> = our world-steps/s over Drake's, same case;
    deterministic rows: deterministic_slowdown = the default mode's world-steps/s over theirs
    (same case, backend, worlds, solver)."""
    drake = {(r["case"], r["resolution"]): r for r in rows if r["arch"] == "drake"}
    for r in rows:
        d = drake.get((r["case"], r.get("resolution")))
        if r["arch"] != "drake" and d is not None:
            r["ratio_vs_drake"] = r["queries_per_s"] / d["queries_per_s"]
    for r in rows:
        if r["suite"] != "dynamics" or r["arch"].startswith("drake"):
            continue
        for d in rows:
            if d["case"] == r["case"] and d["arch"].startswith("drake-") and np.isfinite(d["world_steps_per_s"]):
                r["ratio_vs_" + d["arch"].replace("-", "_")] = r["world_steps_per_s"] / d["world_steps_per_s"]
        if r.get("deterministic"):
            for d in rows:
                if (not d.get("deterministic", True) and all(d.get(k) == r[k] for k in ("case", "arch", "worlds", "solver"))):
                    r["deterministic_slowdown"] = d["world_steps_per_s"] / r["world_steps_per_s"]


def markdown(rows: list[dict]) -> str:
    """README table: queries/s and polygons/s per backend and world count."""
    lines = [
        "| case | resolution [m] | polygons/world | backend | worlds | queries/s | polygons/s | vs Drake |",
        "|---|---|---|---|---|---|---|---|",
    ]
    order = {"drake": 0, "cpu": 1, "vulkan": 2, "cuda": 3}
    for r in sorted(rows, key=lambda r: (r["case"], -r["resolution"], order.get(r["arch"], 9), r["worlds"])):
        ratio = f"{r['ratio_vs_drake']:.2f}x" if "ratio_vs_drake" in r else "1x" if r["arch"] == "drake" else "-"
        lines.append(
            f"| {r['case']} | {r['resolution']:g} | {r['polygons_per_world']:.0f} | {r['arch']} | {r['worlds']} | "
            f"{r['queries_per_s']:.4g} | {r['polygons_per_s']:.4g} | {ratio} |"
        )
    return "\n".join(lines)


def markdown_dynamics(rows: list[dict]) -> str:
    """README table: world-steps/s, per-step work and stage split per backend and world count."""
    lines = [
        "| case | bodies | backend | worlds | world-steps/s | vs Drake Lagged | vs Drake SAP | polygons | iterations | collide / assemble / solve / integrate [ms] |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    order = {"drake-lagged": 0, "drake-sap": 1, "cpu": 2, "vulkan": 3, "cuda": 4}
    names = [c.name for c in registry.DYNAMICS_CASES]
    for r in sorted(rows, key=lambda r: (names.index(r["case"]) if r["case"] in names else 99, order.get(r["arch"], 9), r["worlds"],
                                         r.get("deterministic", False))):
        backend = r["arch"]
        if r.get("linear_solver"):
            backend += f" newton/{r['linear_solver']}"
            if r["linear_solver"] == "cg":
                backend += f" ({r['linear_iterations_mean_p95_max'][0]:.0f} CG iterations per world-step)"
        if r.get("deterministic"):
            backend += (f" deterministic ({1 / r['deterministic_slowdown']:.2f}x the default's speed)" if "deterministic_slowdown" in r
                        else " deterministic")
        ratio = lambda k: f"{r[k]:.2f}x" if k in r else "-"  # noqa: E731
        stage = " / ".join(f"{v:.3g}" for v in r["stage_ms"].values()) if "stage_ms" in r else "-"
        if "stage_share" in r:
            stage += " (" + " / ".join(f"{100 * v:.0f}" for v in r["stage_share"].values()) + " %)"
        work = lambda k: f"{r[k]:.1f}" if k in r else "-"  # noqa: E731
        iterations = work("iterations_per_world_step") + (f" ({r['capped_world_steps']} capped)" if r.get("capped_world_steps") else "")
        speed = f"{r['world_steps_per_s']:.4g}" if np.isfinite(r["world_steps_per_s"]) else f"failed: {r.get('error', '')}"
        lines.append(
            f"| {r['case']} | {r['bodies']} | {backend} | {r['worlds']} | {speed} | {ratio('ratio_vs_drake_lagged')} | "
            f"{ratio('ratio_vs_drake_sap')} | {work('polygons_per_world_step')} | {iterations} | {stage} |"
        )
    return "\n".join(lines)


def markdown_outcomes(rows: list[dict]) -> str:
    """README table of the cases with a probe: the probe body's drift over the timed interval
    and the pairs' contact forces at its end, ours (world 0 of each batch) next to Drake's."""
    lines = ["| case | backend | worlds | steps | drift [m] (largest over the worlds) | contact forces [N] |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        o = r.get("outcome")
        if not o:
            continue
        drift = "-"
        if "drift_m" in o:
            drift = f"{o['drift_m']:.2e}" + (f" ({o['drift_max_m']:.2e})" if "drift_max_m" in o else "")
        forces = "; ".join(f"on {pair.split('|')[1]} from {pair.split('|')[0]}: ({', '.join(f'{x:.3f}' for x in f)})"
                           for pair, f in o.get("pair_forces_N", {}).items())
        lines.append(f"| {r['case']} | {r['arch']} | {r['worlds']} | {r['steps']} | {drift} | {forces} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="taichi-hydro bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suite", choices=["contact", "dynamics"])
    p.add_argument("--arch", default="cpu", help="comma-separated: cpu,vulkan,cuda")
    p.add_argument("--cases", help="comma-separated case names (default: all of the suite)")
    p.add_argument("--drake", action="store_true", help="also time Drake (pip package drake)")
    p.add_argument("--quick", action="store_true", help="a few points only (smoke test)")
    p.add_argument("--out", help="write the JSON lines here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--worker-worlds", type=int, help=argparse.SUPPRESS)
    p.add_argument("--worlds", help="dynamics: comma-separated world counts (default: each case's own list)")
    p.add_argument("--max-worlds", type=int, help="dynamics: skip world counts above this")
    p.add_argument("--schedule", choices=["world", "contact", "block"],
                   help="dynamics: solver schedule (default: the backend's; block: method newton, cuda/vulkan)")
    p.add_argument("--method", choices=["jacobi", "accelerated", "gauss_seidel", "newton"], help="dynamics: solver method (default: the schedule's)")
    p.add_argument("--linear", choices=["auto", "cholesky", "cg"],
                   help="dynamics: how method newton solves its step (default: the scene's, auto)")
    p.add_argument("--presweeps", type=int, help="dynamics: [solver] presweeps (method newton's Gauss-Seidel sweeps "
                   "before its iterations; default: the scene's)")
    p.add_argument("--skin", type=float, help="dynamics: [collision] skin [m] (default: the scene's)")
    p.add_argument("--deterministic", action="store_true",
                   help="dynamics: time every point in the default and in the deterministic mode (cost of the mode)")
    p.add_argument("--drake-processes", type=int, default=1,
                   help="dynamics: run Drake in this many processes at once (one per core) and report their total world-steps/s")
    p.add_argument("--cpu-threads", type=int, help="threads of the cpu backend (default: one per core; 1 serialises every "
                   "kernel's loops: no thread-pool dispatch per launch, the setting for one world)")
    p.add_argument("--no-pin-threads", action="store_true", help="leave the cpu pool's threads to the scheduler "
                   "(backend.init(pin_threads=False); default: each on a core of its own)")
    p.add_argument("--append", action="store_true", help="add to --out instead of replacing it (one meta line per run)")
    args = p.parse_args(argv)
    arches = args.arch.split(",")
    bad = [a for a in arches if a not in th.ARCHES]
    if bad:
        p.error(f"--arch: unknown backend(s) {bad}; choose from {list(th.ARCHES)} (comma-separated)")
    for option in ("worker_worlds", "max_worlds", "drake_processes"):
        value = getattr(args, option)
        if value is not None and value < 1:
            p.error(f"--{option.replace('_', '-')} must be >= 1, got {value}")
    try:
        wanted = [int(w) for w in args.worlds.split(",")] if args.worlds else None
    except ValueError:
        p.error(f"--worlds must be comma-separated integers, got {args.worlds!r}")
    if args.cpu_threads is not None and (args.cpu_threads < 1 or set(arches) != {"cpu"}):
        p.error(f"--cpu-threads {args.cpu_threads}: threads of the cpu backend, a positive integer with --arch cpu only")
    if wanted and min(wanted) < 1:
        p.error(f"--worlds must be >= 1, got {args.worlds!r}")
    if args.out:
        try:
            check_output(args.out, (".json", ".jsonl"), "--out", create_folder=True)
        except th.HydroError as exc:
            p.error(str(exc))
    suite_cases = registry.CONTACT_CASES if args.suite == "contact" else registry.DYNAMICS_CASES
    names = args.cases.split(",") if args.cases else [c.name for c in suite_cases]
    unknown = [n for n in names if n not in {c.name for c in suite_cases}]
    if unknown:
        p.error(f"unknown case(s) {unknown} for the {args.suite} suite; cases: {[c.name for c in suite_cases]}")
    if args.worker:
        try:
            if args.suite == "contact":
                contact_worker(args.arch, names, args.quick, args.cpu_threads, not args.no_pin_threads)
            else:
                dynamics_worker(args.arch, names, args.quick, args.worker_worlds, args.schedule, args.deterministic, args.method,
                                args.linear, args.cpu_threads, args.presweeps, args.skin, not args.no_pin_threads)
        except th.HydroError as exc:  # one line for the parent to show
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    rows: list[dict] = []
    # One worker process per case (and per world count for dynamics): Taichi has one backend per
    # process, and Mesa's lavapipe limits the kernel launches of a process (backend.LAUNCH_BUDGET).
    jobs = [(name, None) for name in names]
    failed = 0
    if args.suite == "dynamics":
        jobs = [(name, w) for name in names for w in (wanted or _worlds(registry.find_dynamics(name), args.quick))
                if args.max_worlds is None or w <= args.max_worlds]
    bar = progress_bar(len(arches) * len(jobs), "job", "bench")
    for arch in arches:
        for name, worlds in jobs:
            cmd = [sys.executable, "-m", "bench.run", args.suite, "--worker", "--arch", arch, "--cases", name]
            if worlds is not None:
                cmd += ["--worker-worlds", str(worlds)]
            if args.schedule:
                cmd += ["--schedule", args.schedule]
            if args.method:
                cmd += ["--method", args.method]
            if args.linear:
                cmd += ["--linear", args.linear]
            if args.presweeps is not None:
                cmd += ["--presweeps", str(args.presweeps)]
            if args.skin is not None:
                cmd += ["--skin", repr(args.skin)]
            if args.deterministic:
                cmd.append("--deterministic")
            if args.cpu_threads is not None:
                cmd += ["--cpu-threads", str(args.cpu_threads)]
            if args.no_pin_threads:
                cmd.append("--no-pin-threads")
            if args.quick:
                cmd.append("--quick")
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
            if proc.returncode != 0:
                failed += 1
                print(f"{arch} {name} {worlds or ''}: worker failed\n{proc.stderr[-3000:]}", file=sys.stderr)
            new = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
            rows += new
            if args.out:  # rows are kept as they come, so an interrupted run loses nothing
                append_text(str(args.out) + ".partial", "".join(json.dumps(r) + "\n" for r in new))
            bar.update(1)
    bar.close()
    if args.drake:
        rows += drake_contact(names, args.quick) if args.suite == "contact" else drake_dynamics(names, args.quick, args.drake_processes)
    add_ratios(rows)
    meta = {"suite": args.suite, "machine": machine(), "unix_time": time.time(), "command": " ".join(["python -m bench.run", *(argv or sys.argv[1:])])}
    if args.out:
        text = json.dumps({"meta": meta}) + "\n" + "".join(json.dumps(r) + "\n" for r in rows)
        (append_text if args.append else write_text)(args.out, text)
        Path(str(args.out) + ".partial").unlink(missing_ok=True)
    print(markdown(rows) if args.suite == "contact" else markdown_dynamics(rows))
    if args.suite == "dynamics" and markdown_outcomes(rows):
        print("\n" + markdown_outcomes(rows))
    if failed:
        print(f"bench: {failed} worker(s) failed (see above)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
