"""The cost of one empty kernel launch on each backend, launched one by one from Python and
from a Taichi compute graph (ti.graph, as Simulator.step dispatches its plans), and what that
puts under a step of one world (the step's launches times the graph's cost per launch); the
same for a kernel whose loop is serialised (ti.loop_config(serialize=True): on cpu it runs on
the launching thread, without the thread pool's dispatch).

    python -m bench.launch_cost --arch cpu,vulkan --out bench/results/launch_cost.json

Each backend runs in a process of its own (Taichi has one runtime per process). The kernel
takes one ndarray and writes one element, so that the launch is not optimised away; the
device is synchronised once after the timed launches, so the figure is the launch's own cost
(host overhead and, on a GPU, the queue), not a round trip per launch."""

import argparse
import json
import sys
import time

from . import cli
from .machine import describe
from .worker import run_one, write_rows

EAGER_LAUNCHES = 2000
GRAPH_LAUNCHES = 20
GRAPH_RUNS = 100  # Mesa's lavapipe allows about 24000 launches per runtime (backend.LAUNCH_BUDGET): 4000 here


def measure(arch: str) -> dict:
    """Seconds per launch, eager and in a graph, on `arch` (this process)."""
    import taichi as ti

    import taichi_hydro as th
    from taichi_hydro.sim import Simulator

    th.init(arch)

    @ti.kernel
    def empty(x: ti.types.ndarray(dtype=ti.i32, ndim=1)):
        for i in range(1):
            x[i] = i

    @ti.kernel
    def empty_serial(x: ti.types.ndarray(dtype=ti.i32, ndim=1)):
        ti.loop_config(serialize=True)  # run on the launching thread: no parallel dispatch
        for i in range(1):
            x[i] = i

    x = ti.ndarray(ti.i32, 1)
    eager, in_graph = {}, {}
    for name, kernel in (("parallel", empty), ("serial", empty_serial)):
        kernel(x)  # compile
        ti.sync()
        t0 = time.perf_counter()
        for _ in range(EAGER_LAUNCHES):
            kernel(x)
        ti.sync()
        eager[name] = (time.perf_counter() - t0) / EAGER_LAUNCHES

        sym = ti.graph.Arg(ti.graph.ArgKind.NDARRAY, "x", dtype=ti.i32, ndim=1)
        builder = ti.graph.GraphBuilder()
        for _ in range(GRAPH_LAUNCHES):
            builder.dispatch(kernel, sym)
        graph = builder.compile()
        graph.run({"x": x})
        ti.sync()
        t0 = time.perf_counter()
        for _ in range(GRAPH_RUNS):
            graph.run({"x": x})
        ti.sync()
        in_graph[name] = (time.perf_counter() - t0) / (GRAPH_RUNS * GRAPH_LAUNCHES)

    steps = {}
    for name in ("pile", "box_stack", "sphere_on_plane"):
        sim = Simulator(th.load_scene(f"scenes/{name}.toml"))
        steps[name] = len(sim._build_step_plan().launches)
    return {"arch": arch, "device": describe(arch), "eager_s_per_launch": eager["parallel"],
            "graph_s_per_launch": in_graph["parallel"],
            "serial_eager_s_per_launch": eager["serial"], "serial_graph_s_per_launch": in_graph["serial"],
            "launches_per_step": steps,
            "empty_step_s": {name: n * in_graph["parallel"] for name, n in steps.items()}}


def main(argv=None) -> int:
    p = cli.parser("bench.launch_cost", __doc__)
    p.add_argument("--arch", default="cpu,vulkan")
    p.add_argument("--out", help="write the rows as JSON here")
    p.add_argument("--one", help=argparse.SUPPRESS)  # run one backend in this process
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one)))
        return 0
    rows = [r for r in (run_one("bench.launch_cost", [arch], arch) for arch in args.arch.split(",")) if r is not None]
    for r in rows:
        print(f"{r['arch']:7s} eager {r['eager_s_per_launch'] * 1e6:8.2f} us/launch   graph {r['graph_s_per_launch'] * 1e6:8.2f} "
              f"us/launch   serial loop: eager {r['serial_eager_s_per_launch'] * 1e6:8.2f}, graph "
              f"{r['serial_graph_s_per_launch'] * 1e6:8.2f} us/launch   launches per step {r['launches_per_step']}   ({r['device']})")
    write_rows(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
