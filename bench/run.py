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
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from . import cases as registry
from .machine import describe, machine

ROOT = Path(__file__).resolve().parents[1]


def _median_time(fn, min_time=0.5, min_calls=3, max_calls=200) -> float:
    times = []
    start = time.perf_counter()
    while len(times) < min_calls or (time.perf_counter() - start < min_time and len(times) < max_calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def contact_worker(arch: str, names: list[str], quick: bool) -> None:
    """Time Simulator.collide() (the whole device pipeline, all worlds) per point; print JSON."""
    import taichi_hydro as th

    th.init(arch)
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
            polygons = int(counts[3])
            row = {
                "suite": "contact",
                "case": name,
                "arch": arch,
                "device": device,
                "worlds": worlds,
                "resolution": resolution,
                "tets": int(sum(g.tets.tet_count for g in sim.data.geometries if g.tets is not None)),
                "compile_s": round(max(first - query_s, 0.0), 4),
                "query_s": query_s,
                "queries_per_s": worlds / query_s,
                "polygons_per_world": polygons / worlds,
                "polygons_per_s": polygons / query_s,
                "pool_passes": sim.collision.passes,
            }
            print(json.dumps(row), flush=True)


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
    """ratio_vs_drake: our queries per second over Drake's, same case and resolution."""
    drake = {(r["case"], r["resolution"]): r for r in rows if r["arch"] == "drake"}
    for r in rows:
        d = drake.get((r["case"], r["resolution"]))
        if r["arch"] != "drake" and d is not None:
            r["ratio_vs_drake"] = r["queries_per_s"] / d["queries_per_s"]


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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suite", choices=["contact"])
    p.add_argument("--arch", default="cpu", help="comma-separated: cpu,vulkan,cuda")
    p.add_argument("--cases", default=",".join(c.name for c in registry.CONTACT_CASES))
    p.add_argument("--drake", action="store_true", help="also time Drake (pip package drake)")
    p.add_argument("--quick", action="store_true", help="a few points only (smoke test)")
    p.add_argument("--out", help="write the JSON lines here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    names = args.cases.split(",")
    if args.worker:
        contact_worker(args.arch, names, args.quick)
        return 0
    rows: list[dict] = []
    for arch in args.arch.split(","):
        cmd = [sys.executable, "-m", "bench.run", args.suite, "--worker", "--arch", arch, "--cases", args.cases]
        if args.quick:
            cmd.append("--quick")
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        if proc.returncode != 0:
            print(f"{arch}: worker failed\n{proc.stderr[-3000:]}", file=sys.stderr)
            continue
        rows += [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if args.drake:
        rows += drake_contact(names, args.quick)
    add_ratios(rows)
    meta = {"suite": args.suite, "machine": machine(), "unix_time": time.time(), "command": " ".join(["python -m bench.run", *(argv or sys.argv[1:])])}
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w") as f:
            f.write(json.dumps({"meta": meta}) + "\n")
            for r in rows:
                f.write(json.dumps(r) + "\n")
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
