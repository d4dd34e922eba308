"""World-steps/s of a batch on one Simulator and sharded over 1 and 2 Ray actors
(taichi_hydro.distributed.ShardedSimulator), the overhead Ray adds to a step call, and what that
overhead means for K separate devices.

    python -m bench.sharding --cases box_stack:64,pile_27:16 --out bench/results/sharding_2core_epyc.json

Per case and configuration (one Simulator in this process; 1 shard with every CPU; 2 shards with
half the CPUs each), from the scene's initial state: a warm-up step call (compilation or cache
load, pool growth), then the same sequence of step calls for every configuration, 1 step per call
and then `--long` steps per call. Each row: world-steps/s, wall time per call and, sharded, the
overhead per step call (the driver's wall time minus the slowest shard's own stepping time,
ShardedSimulator.shard_timings), the round trip of a call that does no work (world_status) and
get_state's time. On one machine the shards share its cores, so sharding cannot gain here.

The last row of a run (suite "sharding_estimate") applies the measured overhead to K devices
that each step W/K worlds as fast as one device steps them: a step call of n steps takes
n (W/K) / R + o instead of n W / R (R: one device's world-steps/s, o: the overhead per call), so
sharding over K pays once n W > o R K / (K - 1), and runs at a fraction n (W/K) / R / (n (W/K) / R + o)
of K times one device. For 8 GPUs on 2 nodes it takes R from the single-H100 figures of
bench/results/dynamics_h100.json and adds the time to move the state of the remote node's
worlds to the driver when the call also gathers the state (RL: observations every call), at an
assumed network bandwidth (--network-gbps) and latency (--network-ms): a paper estimate, not
a measurement."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

from taichi_hydro.output import check_output

from . import cases as registry
from . import cli
from .machine import machine
from .rows import emit

ROOT = Path(__file__).resolve().parents[1]


def _calls(sim, steps: int, calls: int) -> float:
    """Seconds for `calls` step calls of `steps` steps."""
    t0 = time.perf_counter()
    for _ in range(calls):
        sim.step(steps)
    return time.perf_counter() - t0


def _median(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(sim, name: str, config: str, worlds: int, warmup: int, long: int, total: int) -> list[dict]:
    """Rows of one configuration: the warm-up call, then `total` steps as 1-step calls and as
    `long`-step calls."""
    sharded = hasattr(sim, "shard_timings")
    t0 = time.perf_counter()
    sim.step(warmup)
    sim.world_status()
    first_s = time.perf_counter() - t0
    rows = []
    for per_call in (1, long):
        calls = max(1, total // per_call)
        before = sim.shard_timings() if sharded else None
        wall = _calls(sim, per_call, calls)
        row = {"suite": "sharding", "case": name, "config": config, "worlds": worlds, "steps_per_call": per_call, "calls": calls,
               "first_call_s": first_s, "wall_s_per_call": wall / calls, "world_steps_per_s": worlds * per_call * calls / wall}
        if sharded:
            after = sim.shard_timings()
            n = after["calls"] - before["calls"]
            wall, slowest = (after[k] - before[k] for k in ("wall_s", "slowest_shard_s"))
            row["overhead_s_per_call"] = (wall - slowest) / n
            row["shard_step_s_per_call"] = [(a["step_s"] - b["step_s"]) / n
                                            for a, b in zip(after["per_shard"], before["per_shard"])]
        rows.append(row)
    rows[-1]["empty_call_s"] = _median(sim.world_status, 20)
    rows[-1]["get_state_s"] = _median(sim.get_state, 5)
    return rows


def estimate(rows: list[dict], h100: Path, gpus: int, nodes: int, network_gbps: float, network_ms: float) -> dict:
    """The paper estimate of the module docstring, from the 2-shard overhead measured here."""
    overhead = statistics.median(r["overhead_s_per_call"] for r in rows if r["config"] == "2 shards")
    best: dict = {}
    for line in h100.read_text().splitlines():
        r = json.loads(line)
        if r.get("case") in ("box_stack", "pile_27") and r.get("world_steps_per_s"):
            if r["world_steps_per_s"] > best.get(r["case"], {}).get("world_steps_per_s", 0):
                best[r["case"]] = r
    out = {"suite": "sharding_estimate", "gpus": gpus, "nodes": nodes, "overhead_s_per_call": overhead,
           "assumed_network_gbps": network_gbps, "assumed_network_latency_ms": network_ms, "cases": {}}
    for case, r in best.items():
        per_gpu, rate = r["worlds"], r["world_steps_per_s"]
        bodies = r.get("bodies") or 0
        call_o = overhead + network_ms * 1e-3
        remote_bytes = per_gpu * gpus * (nodes - 1) / nodes * bodies * 13 * 4  # float32 position, quaternion, velocities
        gather_s = remote_bytes * 8 / (network_gbps * 1e9)
        points = {}
        for n in (1, 10, 100):
            compute = n * per_gpu / rate
            points[n] = {"efficiency": compute / (compute + call_o), "world_steps_per_s": gpus * n * per_gpu / (compute + call_o),
                         "efficiency_with_state_each_call": compute / (compute + call_o + gather_s)}
        out["cases"][case] = {"single_gpu_worlds": per_gpu, "single_gpu_world_steps_per_s": rate, "device": r.get("device"),
                              "worlds": per_gpu * gpus, "pays_above_world_steps_per_call": call_o * rate * gpus / (gpus - 1),
                              "state_gather_s": gather_s, "steps_per_call": points}
    return out


def main(argv=None) -> int:
    p = cli.parser("bench.sharding", __doc__)
    p.add_argument("--cases", default="box_stack:64,pile_27:16", help="case:worlds, comma-separated (bench/cases.py)")
    p.add_argument("--warmup", type=int, default=4, help="steps of the first (compiling) call")
    p.add_argument("--long", type=int, default=16, help="steps per call of the second series")
    p.add_argument("--total", type=int, default=32, help="steps of each series")
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--network-gbps", type=float, default=10.0)
    p.add_argument("--network-ms", type=float, default=0.2)
    p.add_argument("--h100", default=str(ROOT / "bench" / "results" / "dynamics_h100.json"))
    p.add_argument("--out", help="append the JSON lines to this file")
    args = p.parse_args(argv)
    if args.out:
        check_output(args.out, (".json",), "--out", create_folder=True)
    import taichi_hydro as th
    from taichi_hydro.distributed import ShardedSimulator
    from taichi_hydro.distributed.cluster import connect

    cores = os.cpu_count() or 1
    th.init("cpu")
    connect(num_cpus=cores, include_dashboard=False, log_to_driver=False)
    rows: list[dict] = [{"meta": {"suite": "sharding", "machine": machine(), "unix_time": time.time(),
                                  "command": "python -m bench.sharding " + " ".join(argv if argv is not None else sys.argv[1:])}}]
    for item in args.cases.split(","):
        name, worlds = item.split(":")
        worlds = int(worlds)
        scene = registry.find_dynamics(name).scene()
        configs = [("1 simulator", lambda: th.Simulator(scene, worlds=worlds)),
                   ("1 shard", lambda: ShardedSimulator(scene, worlds=worlds, shards=1, cpus_per_shard=cores)),
                   ("2 shards", lambda: ShardedSimulator(scene, worlds=worlds, shards=2, cpus_per_shard=cores / 2))]
        for config, make in configs:
            sim = make()
            rows += measure(sim, name, config, worlds, args.warmup, args.long, args.total)
            if hasattr(sim, "close"):
                sim.close()
            for r in rows[-2:]:
                extra = f", overhead {r['overhead_s_per_call'] * 1e3:.2f} ms/call" if "overhead_s_per_call" in r else ""
                print(f"{name} x {worlds}, {config}, {r['steps_per_call']} step(s)/call: {r['world_steps_per_s']:.4g} "
                      f"world-steps/s{extra}", file=sys.stderr)
    rows.append(estimate(rows[1:], Path(args.h100), args.gpus, args.nodes, args.network_gbps, args.network_ms))
    emit(rows, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
