"""Device time per Taichi kernel over a run of a dynamics case (Taichi's kernel profiler).

    python -m bench.profile_kernels --arch cuda --case box_stack --worlds 16384 --steps 20

Runs the case once to grow the pools and compile, clears the profiler, runs `steps` more steps
one kernel at a time (no compute graph) and prints Taichi's table, sorted by total time. A case
with a settled start (pile_27_settled, box_stack_held) starts from its saved state, as in
bench.run, so that the profile is of the regime the case names."""

from __future__ import annotations

from . import cases as registry
from . import cli
from . import states


def main(argv=None) -> int:
    p = cli.parser("bench.profile_kernels", __doc__)
    cli.add_case(p, "box_stack", 1)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--schedule", help="solver schedule (default: the backend's)")
    p.add_argument("--method", help="solver method (default: the schedule's)")
    args = p.parse_args(argv)
    import dataclasses

    import taichi as ti

    import taichi_hydro as th

    th.init(args.arch, profiler=True)
    case = registry.find_dynamics(args.case)
    scene = case.scene()
    if args.schedule:
        scene = dataclasses.replace(scene, solver=dataclasses.replace(scene.solver, schedule=args.schedule))
    if args.method:
        scene = dataclasses.replace(scene, solver=dataclasses.replace(scene.solver, method=args.method))
    sim = th.Simulator(scene, worlds=args.worlds, graph=False)
    if case.settle:
        sim.reset(state=states.start_state(case, args.worlds))
    sim.step(case.steps // 2)  # into contact, pools grown, kernels compiled
    sim.world_status()
    ti.profiler.clear_kernel_profiler_info()
    sim.step(args.steps)
    sim.world_status()
    print(f"{args.case}, {args.worlds} worlds, {args.steps} steps, arch {args.arch}, {sim.method}/{sim.schedule}:")
    ti.profiler.print_kernel_profiler_info("count")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
