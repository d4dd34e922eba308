"""Command line (CONTRACT.md): `taichi-hydro contact|run|view SCENE ...` and
`taichi-hydro bench SUITE ...` (the benchmark runner of the checkout).

Errors are reported in one line on stderr with exit status 2; no traceback reaches the user
unless --debug is given."""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import time
import warnings

from .checks import INT32_MAX, integer_problem, real_problem
from .errors import ArgumentError

__all__ = ["main"]


def _checked(convert, problem, what: str):
    """argparse type: `convert(text)`, then `problem(value)` (checks.*_problem); argparse reports
    a bad value in one line with exit status 2."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        message = problem(value)
        if message:
            raise argparse.ArgumentTypeError(message)
        return value

    return parse


def _integer_arg(minimum: int, maximum: int = INT32_MAX):
    """An integer in [minimum, maximum]."""
    return _checked(int, lambda v: integer_problem(v, minimum, maximum), "an integer")


def _real_arg(minimum: float, maximum: float = math.inf):
    """A finite real in [minimum, maximum]."""
    return _checked(float, lambda v: real_problem(v, minimum, maximum), "a number")


def _add_cpu_threads(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cpu-threads", type=_integer_arg(1, 4096), default=None,
                   help="threads of the cpu backend (default: 1 for one world, where a loop on the launching thread "
                   "avoids the thread pool's dispatch of every kernel launch, else one per core)")


def cpu_threads(args) -> int | None:
    """The cpu backend's threads for a run or view (backend.init(cpu_threads)): --cpu-threads,
    else 1 for one world on cpu (backend.SERIAL_LOOPS: launches without the thread pool, several
    times faster for a small world), else None (one per core). ArgumentError for --cpu-threads
    on another backend."""
    if args.cpu_threads is not None:
        if args.arch != "cpu":
            raise ArgumentError(f"--cpu-threads {args.cpu_threads} sets threads of the cpu backend; this run uses --arch {args.arch}")
        return args.cpu_threads
    return 1 if args.arch == "cpu" and args.worlds == 1 else None


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("scene", help="scene file (TOML)")
    p.add_argument("--arch", default="cpu", choices=["cpu", "vulkan", "cuda"], help="Taichi backend (default: cpu)")
    p.add_argument("--debug", action="store_true", help="show Python tracebacks")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="taichi-hydro", description="Hydroelastic contact simulation on Taichi.")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("contact", help="compute the contact surfaces of a scene at its initial poses")
    _add_common(c)
    c.add_argument("--json", action="store_true", help="print one JSON object")
    c.add_argument("--world", type=_integer_arg(0), default=0, help=argparse.SUPPRESS)
    r = sub.add_parser("run", help="simulate a scene")
    _add_common(r)
    length = r.add_mutually_exclusive_group()
    length.add_argument("--steps", type=_integer_arg(0), help="number of time steps (default: 1 s of simulated time)")
    length.add_argument("--time", type=_real_arg(0.0), help="simulated time [s]")
    r.add_argument("--worlds", type=_integer_arg(1), default=1, help="copies of the scene stepped together")
    r.add_argument("--out", help="write the trajectory (.npz)")
    r.add_argument("--json", action="store_true", help="print a JSON summary")
    r.add_argument("--summary", help="also write the JSON summary to this file (.json)")
    r.add_argument("--plot", help="write a plot of contact forces, polygons, solver iterations and energy over time (.png)")
    r.add_argument("--record", help="also render world 0 offscreen at 25 frames per simulated second: FILE.gif|.mp4 "
                   "(or .png, the last frame); the run is simulated once")
    r.add_argument("--every", type=_integer_arg(1), default=1, help="record every k-th step in --out (default 1)")
    _add_cpu_threads(r)
    r.add_argument("--quick-compile", action="store_true", help="compile the kernels without Taichi's IR optimisations: "
                   "about 2.7x faster on a cold compile cache, stepping about 1.5x slower (short runs; scripts/main.sh)")
    r.add_argument("--shards", type=_integer_arg(1), help="split the worlds over this many Ray actors, each with its own Taichi "
                   "runtime (pip install 'taichi-hydro[distributed]'); the summary adds per-shard timing")
    r.add_argument("--address", help="with --shards: join the running Ray cluster at HOST:PORT ('auto': the one `ray start` "
                   "made on this machine); default: $RAY_ADDRESS, a cluster started on this machine, else a new local one")
    r.add_argument("--on-fault", choices=["raise", "restart"], default="raise", help="with --shards: when a shard dies, stop "
                   "with an error (default) or restart it from the last checkpoint of its worlds and go on")
    r.add_argument("--checkpoint-every", type=_integer_arg(1), help="with --shards: keep a checkpoint of every world each N "
                   "steps (one transfer of the state each; default: only the initial state and the --out samples)")
    r.add_argument("--cpus-per-shard", type=_real_arg(0.0), help="with --shards: the CPUs Ray reserves for each shard "
                   "(default: an equal share of the cluster's free CPUs; a cpu shard runs as many Taichi threads as whole CPUs)")
    r.add_argument("--gpus-per-shard", type=_real_arg(0.0), help="with --shards: the GPUs Ray reserves for each shard "
                   "(default: one for cuda, one for vulkan when the cluster has one per shard, else none)")
    v = sub.add_parser("view", help="live GGUI window, or headless recording with --record")
    _add_common(v)
    v.add_argument("--record", help="render offscreen and write FILE.png (last frame), .gif or .mp4")
    v.add_argument("--frames", type=_integer_arg(1, 1_000_000), default=120, help="frames to record (default 120)")
    v.add_argument("--world", type=_integer_arg(0), default=0, help="world to show")
    v.add_argument("--worlds", type=_integer_arg(1), default=1, help="copies of the scene stepped together")
    _add_cpu_threads(v)
    v.add_argument("--steps-per-frame", type=_integer_arg(1), default=None, help="time steps between frames (default: 1/30 s)")
    v.add_argument("--no-patches", action="store_true", help="do not draw the contact patches")
    v.add_argument("--normals", action="store_true", help="draw the contact polygons' normals (key n)")
    v.add_argument("--forces", action="store_true", help="draw the net contact force of each body pair as an arrow (key f)")
    v.add_argument("--tets", action="store_true", help="draw the compliant bodies' tet meshes as wireframes (key t)")
    v.add_argument("--joints", action="store_true", help="draw the joint axes at the joint origins (key j)")
    v.add_argument("--size", type=_integer_arg(16, 16384), nargs=2, default=(640, 480), metavar=("W", "H"),
                   help="image size in pixels, each in [16, 16384]")
    v.add_argument("--camera", type=_real_arg(-math.inf), nargs=6, metavar=("PX", "PY", "PZ", "TX", "TY", "TZ"),
                   help="camera position and target [m] (default: the scene's [view], else framed on the bodies)")
    v.add_argument("--tile", type=_integer_arg(1, 64), nargs=2, metavar=("R", "C"),
                   help="show worlds 0 .. R*C-1 side by side in R rows and C columns (needs --worlds >= R*C)")
    b = sub.add_parser("bench", help="benchmarks (source checkout): the options of python -m bench.run, e.g. "
                       "`taichi-hydro bench dynamics --arch cpu,cuda --cases box_stack --worlds 1,64,4096 --drake --out r.json`",
                       add_help=False)
    b.add_argument("bench_args", nargs=argparse.REMAINDER, help="arguments of python -m bench.run (try --help)")
    b.set_defaults(debug=False)
    return parser


def _bench(args) -> int:
    """Run `python -m bench.run` in the source checkout this package was installed from
    (pip install -e): the benchmarks, their cases and the Drake harness are not part of the
    installed package."""
    import subprocess
    from pathlib import Path

    from taichi_hydro.errors import HydroError

    root = Path(__file__).resolve().parents[1]
    if not (root / "bench" / "run.py").is_file():
        raise HydroError("`taichi-hydro bench` needs a source checkout (bench/ beside taichi_hydro/), and this package was "
                         f"installed from {root}, which has none: clone the repository and `pip install -e .` there")
    return subprocess.call([sys.executable, "-m", "bench.run", *args.bench_args], cwd=root)


def _view(args) -> int:
    import taichi_hydro as th
    from taichi_hydro import viewer

    scene = th.load_scene(args.scene)
    if args.record is not None:
        viewer.check_record(args.record)
    elif not viewer.has_display():
        raise viewer.ViewerError("no display here (DISPLAY / WAYLAND_DISPLAY unset): use --record out.png|out.gif|out.mp4")
    if args.world >= args.worlds:
        raise ArgumentError(f"--world {args.world}: there are only {args.worlds} world(s) (--worlds); choose one in "
                            f"[0, {args.worlds - 1}]")
    if args.tile is not None and args.tile[0] * args.tile[1] > args.worlds:
        raise ArgumentError(f"--tile {args.tile[0]} {args.tile[1]} shows {args.tile[0] * args.tile[1]} worlds and there are "
                            f"{args.worlds} (--worlds); use --worlds {args.tile[0] * args.tile[1]} or more")
    camera = (args.camera[:3], args.camera[3:]) if args.camera else (scene.view.camera_position, scene.view.camera_target)
    if camera[0] is not None and camera[1] is not None and list(camera[0]) == list(camera[1]):
        raise ArgumentError(f"--camera: the position {list(camera[0])} is the target; they must differ")
    th.init(args.arch, cpu_threads=cpu_threads(args))
    sim = th.Simulator(scene, worlds=args.worlds)
    per_frame = args.steps_per_frame if args.steps_per_frame is not None else max(1, round(1 / (viewer.RECORD_FPS * scene.dt)))
    if args.record is None:
        viewer.view(sim, world=args.world, steps_per_frame=per_frame, patches=not args.no_patches, normals=args.normals,
                    forces=args.forces, tets=args.tets, joints=args.joints, camera=camera, tile=args.tile)
        return 0
    t0 = time.perf_counter()
    path = viewer.record(sim, args.record, frames=args.frames, steps_per_frame=per_frame, world=args.world,
                         size=tuple(args.size), patches=not args.no_patches, normals=args.normals, forces=args.forces,
                         tets=args.tets, joints=args.joints, camera=camera, tile=args.tile)
    print(f"{path}: {args.frames} frame(s), {per_frame} step(s) per frame, t = {sim.time:.3f} s, "
          f"rendered in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


def _contact(args) -> int:
    import taichi_hydro as th

    scene = th.load_scene(args.scene)
    if args.world != 0:
        raise ArgumentError(f"--world {args.world}: the contact command builds one world (0)")
    th.init(args.arch)
    sim = th.Simulator(scene)
    t0 = time.perf_counter()
    surfaces = sim.contact_surfaces(world=0)
    wall = time.perf_counter() - t0
    out = {"arch": args.arch, "surfaces": [s.summary() for s in surfaces]}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{scene.source}: {len(surfaces)} contact surface(s) on {args.arch} ({wall * 1e3:.1f} ms, compile included)")
    for s in surfaces:
        f = s.force
        print(
            f"  {s.body_a} -> {s.body_b}: {s.faces} faces, area {s.area:.6g} m^2, force on {s.body_b} "
            f"[{f[0]:.6g}, {f[1]:.6g}, {f[2]:.6g}] N, max {s.max_pressure:.6g} Pa, mean {s.mean_pressure:.6g} Pa"
        )
    return 0


def joint_summary(scene, dof_names: list[str], state: dict) -> dict:
    """{joint name: {"position", "velocity", "force"}} of world 0 for the run summary: one entry
    per degree of freedom (none for a fixed joint); force is the effort along it [N m or N]."""
    out = {}
    for joint in scene.joints:
        columns = [dof_names.index(name) for name in joint.dof_names()]
        out[joint.name] = {key: [float(state[column][0, c]) for c in columns]
                           for key, column in (("position", "position"), ("velocity", "velocity"), ("force", "effort"))}
    return out


def _run(args) -> int:
    import taichi_hydro as th
    from taichi_hydro import viewer
    from taichi_hydro.output import check_output
    from taichi_hydro.plot_process import PlotProcess

    started = time.perf_counter()
    scene = th.load_scene(args.scene)
    if args.out is not None:
        check_output(args.out, (".npz",), "--out", create_folder=True)
    if args.summary is not None:
        check_output(args.summary, (".json",), "--summary", create_folder=True)
    if args.plot is not None:
        check_output(args.plot, (".png",), "--plot", create_folder=True)
    if args.record is not None:
        viewer.check_record(args.record)
    steps = args.steps if args.steps is not None else round((args.time if args.time is not None else 1.0) / scene.dt)
    if steps > INT32_MAX:
        raise ArgumentError(f"--time {args.time:g}: {steps:.3g} steps of dt = {scene.dt:g} s; at most {INT32_MAX} steps per run")
    # The plot process imports matplotlib on another core meanwhile (--shards refuses --plot later).
    plot = PlotProcess() if args.plot is not None and args.shards is None else None
    try:
        return _simulate(args, scene, steps, started, plot)
    finally:
        if plot is not None:
            plot.close()


def _simulate(args, scene, steps: int, started: float, plot) -> int:
    """The body of `run` once its arguments are checked: simulate, sample, render, write."""
    import numpy as np

    from taichi_hydro import viewer
    from taichi_hydro.history import History
    from taichi_hydro.output import atomic_write, write_text
    from taichi_hydro.progress import progress_bar

    sim = _simulator(args, scene)
    record = args.out is not None
    frames = {k: [] for k in ("time", "position", "orientation", "velocity", "angular_velocity")}
    if sim.joint_names:
        frames.update(joint_position=[], joint_velocity=[], joint_effort=[])

    def snapshot():
        state = sim.get_state()
        frames["time"].append(sim.time)
        for k in ("position", "orientation", "velocity", "angular_velocity"):
            frames[k].append(state[k])
        if sim.joint_names:
            for k, v in sim.joint_state().items():
                frames[f"joint_{k}"].append(v)

    history = History(sim) if args.plot is not None else None
    images: list = []
    renderer = viewer.Viewer(sim, world=0) if args.record is not None else None
    # What is taken between steps (kind, every how many steps, what): the first sample at step 0.
    samplers = [("sampling", args.every, snapshot)] if record else []
    if history is not None:
        samplers.append(("sampling", max(1, steps // 200), history.record))
    if renderer is not None:
        samplers.append(("rendering", max(1, round(1 / (viewer.RECORD_FPS * scene.dt))), lambda: images.append(renderer.render())))
    samplers.append(("sampling", max(1, min(100, steps // 50 or 1)), lambda: None))  # progress updates
    timing = {"setup_s": time.perf_counter() - started, "rendering": 0.0, "sampling": 0.0}
    t0 = time.perf_counter()
    for _, _, take in samplers:
        take()
    timing["first_frame_s"] = time.perf_counter() - t0  # compiles what sampling and rendering launch
    step_calls = []  # wall time of each step() call [s]
    done = 0
    with progress_bar(steps, "steps") as bar:
        while done < steps:
            # The first call makes one step alone, so that the compilation of the step's kernels is timed apart.
            n = 1 if done == 0 else min(min(every - done % every for _, every, _ in samplers), steps - done)
            t0 = time.perf_counter()
            sim.step(n)
            step_calls.append(time.perf_counter() - t0)
            done += n
            for kind, every, take in samplers:
                if done % every == 0 or done == steps:
                    t0 = time.perf_counter()
                    take()
                    timing[kind] += time.perf_counter() - t0
            bar.update(n)
    wall = sum(step_calls)  # stepping only: sampling and rendering are left out of the speed
    final = sim.get_state()
    totals = sim.step_totals()
    status = sim.world_status()
    t0 = time.perf_counter()
    if history is not None:  # drawn by the plot process while the outputs below are written
        plot.submit(args.plot, history.arrays(), history.pairs, scene.source)
    if record:
        arrays = {"body_names": np.array(sim.body_names), "dt": scene.dt, **{k: np.array(v) for k, v in frames.items()}}
        if sim.joint_names:
            arrays["joint_names"] = np.array(sim.joint_names)
        atomic_write(args.out, lambda tmp: np.savez_compressed(tmp, **arrays))
    if renderer is not None:
        viewer.write_frames(args.record, images)
    timing["write_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if history is not None:
        plot.result()
    timing["plot_s"] = time.perf_counter() - t0  # the wait for the plot process
    summary = {
        "scene": scene.source,
        "arch": args.arch,
        "quick_compile": args.quick_compile,
        "cpu_threads": _threads_used(args),
        "worlds": args.worlds,
        "steps": steps,
        "time": sim.time,
        "wall_s": wall,
        "world_steps_per_s": args.worlds * steps / wall if wall > 0 else None,
        "polygons_mean": totals["polygons"] / max(totals["steps"], 1) / args.worlds,
        "contacts_mean": totals["contacts"] / max(totals["steps"], 1) / args.worlds,
        "solver_iterations_mean": totals["iterations"] / max(totals["steps"], 1) / args.worlds,
        "diverged_worlds": int((status != 0).sum()),
        "frozen_worlds": {str(w): reason for w, reason in sim.frozen_reasons().items()},
        "bodies": {
            name: {
                "position": final["position"][0, i].tolist(),
                "orientation": final["orientation"][0, i].tolist(),
                "velocity": final["velocity"][0, i].tolist(),
                "angular_velocity": final["angular_velocity"][0, i].tolist(),
            }
            for i, name in enumerate(sim.body_names)
        },
        "timing": {
            "setup_s": timing["setup_s"],
            "first_frame_s": timing["first_frame_s"],
            "first_step_s": step_calls[0] if step_calls else 0.0,
            "step_s": sum(step_calls[1:]),
            "render_s": timing["rendering"],
            "sample_s": timing["sampling"],
            "plot_s": timing["plot_s"],
            "write_s": timing["write_s"],
            "total_s": time.perf_counter() - started,
        },
        "frames": len(images),
        "outputs": {key: str(path) for key, path in (("summary", args.summary), ("plot", args.plot), ("record", args.record),
                                                      ("out", args.out)) if path is not None},
    }
    if scene.joints:
        summary["joints"] = joint_summary(scene, sim.joint_names, sim.joint_state())
    if args.shards is not None:
        summary["sharding"] = _sharding_summary(sim, args.address)
        sim.close()
    if args.summary is not None:
        write_text(args.summary, json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary) if args.json else summary_block(summary))
    return 0


def summary_block(summary: dict) -> str:
    """The run summary (the JSON object of `run --json`) as one block of text for a person:
    scene, worlds and simulated time; where the wall time went; contact and solver work per
    world and step; frozen worlds and shards; the files written. Body poses stay in the JSON."""
    s, t = summary, summary["timing"]
    worlds = f"{s['worlds']} world{'s' if s['worlds'] != 1 else ''}"
    dt_ms = 1e3 * s["time"] / s["steps"] if s["steps"] else 0.0
    lines = [f"{s['scene']} on {s['arch']}: {worlds}, {s['steps']} steps of {dt_ms:.4g} ms = {s['time']:.4g} s simulated"]
    rate = (s["steps"] - 1) / t["step_s"] if t["step_s"] > 0 else None
    first = "first frame" if s["frames"] else "first samples"
    later = [f"stepping {t['step_s']:.1f} s"]
    if s["frames"]:
        later.append(f"rendering {t['render_s']:.1f} s ({s['frames']} frames)")
    later.append(f"sampling {t['sample_s']:.1f} s")
    if "plot" in s["outputs"]:
        later.append(f"plot {t['plot_s']:.1f} s")
    later.append(f"writing {t['write_s']:.1f} s")
    lines.append(f"  wall time   {t['total_s']:.1f} s in all: setup {t['setup_s']:.1f} s, {first} {t['first_frame_s']:.1f} s and "
                 f"first step {t['first_step_s']:.1f} s (kernel compilation: Taichi's offline cache keeps it for later runs),")
    lines.append("              " + ", ".join(later))
    if rate is not None:
        lines.append(f"  speed       {rate:.4g} steps/s, {rate * s['worlds']:.4g} world-steps/s after the first step "
                     f"({s['world_steps_per_s']:.4g} world-steps/s with it)")
    lines.append(f"  per step    {s['polygons_mean']:.1f} polygons, {s['contacts_mean']:.1f} contacts, "
                 f"{s['solver_iterations_mean']:.1f} solver iterations (mean per world)")
    lines.append(f"  worlds      {s['diverged_worlds']} diverged")
    for w, reason in s["frozen_worlds"].items():
        lines.append(f"              world {w} frozen: {reason}")
    for shard in s.get("sharding", {}).get("per_shard", []):
        lines.append(f"  shard {shard['shard']}     worlds {shard['first_world']}..{shard['first_world'] + shard['worlds'] - 1} on "
                     f"{shard['host']} (pid {shard['pid']}), stepping {shard['step_s']:.2f} s, {shard['restarts']} restart(s)")
    written = {"summary": "summary written to {}", "plot": "plot written to {}",
               "record": f"{s['frames']} frame(s) written to {{}}", "out": "trajectory written to {}"}
    for key, path in s["outputs"].items():
        lines.append(f"  {written[key].format(path)}")
    return "\n".join(lines)


def _simulator(args, scene):
    """A Simulator, or with --shards a distributed.ShardedSimulator over Ray (the same batch API;
    Ray's worker logs are not echoed here, so that stdout stays the JSON summary)."""
    import taichi_hydro as th

    if args.shards is None:
        for option, value in (("--address", args.address), ("--checkpoint-every", args.checkpoint_every),
                              ("--cpus-per-shard", args.cpus_per_shard), ("--gpus-per-shard", args.gpus_per_shard)):
            if value is not None:
                raise ArgumentError(f"{option} applies to a sharded run and needs --shards")
        th.init(args.arch, optimize=not args.quick_compile, cpu_threads=cpu_threads(args))
        return th.Simulator(scene, worlds=args.worlds)
    for option in ("plot", "record"):
        if getattr(args, option) is not None:
            raise ArgumentError(f"--{option} draws from a simulator in this process and is not available with --shards")
    if args.quick_compile:
        raise ArgumentError("--quick-compile applies to a run in this process and is not available with --shards")
    from taichi_hydro.distributed import ShardedSimulator, connect, shard_ranges

    shard_ranges(args.worlds, args.shards)  # a bad --shards fails before Ray starts
    connect(args.address, log_to_driver=False)
    return ShardedSimulator(scene, worlds=args.worlds, shards=args.shards, arch=args.arch, on_fault=args.on_fault,
                            checkpoint_every=args.checkpoint_every, cpus_per_shard=args.cpus_per_shard,
                            gpus_per_shard=args.gpus_per_shard, cpu_threads=_threads_used(args))


def _threads_used(args):
    """The cpu threads of this run's simulator (cpu_threads), or of each shard: --cpu-threads,
    else "share" (distributed.ShardedSimulator's default)."""
    if args.shards is None:
        return cpu_threads(args)
    return cpu_threads(args) if args.cpu_threads is not None else "share"


def _sharding_summary(sim, address) -> dict:
    """The run summary's "sharding" entry: shards, Ray address, step calls and the overhead Ray
    adds to each, per-shard timing (ShardedSimulator.shard_timings) and faults."""
    return {"shards": sim.shards, "address": address or "local", **sim.shard_timings(),
            "faults": [record.summary() for record in sim.faults]}


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings on the command line: one line each on stderr, without the source line."""
    print(f"taichi-hydro: warning: {message}", file=sys.stderr if file is None else file)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    warnings.showwarning = _show_warning
    if hasattr(signal, "SIGXFSZ"):  # a write past the file-size limit (ulimit -f) fails with an error instead of killing us
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if argv[:1] == ["bench"]:  # every later argument (--help too) belongs to the bench runner
        args = argparse.Namespace(command="bench", bench_args=argv[1:], debug=False)
    else:
        args = _parser().parse_args(argv)
    try:
        return {"contact": _contact, "run": _run, "view": _view, "bench": _bench}[args.command](args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the CLI reports every failure in one line
        if args.debug:
            raise
        from taichi_hydro.errors import HydroError

        kind = "error" if isinstance(exc, HydroError) else f"internal error ({type(exc).__name__})"
        print(f"taichi-hydro: {kind}: {exc}", file=sys.stderr)
        if not isinstance(exc, HydroError):
            print("taichi-hydro: run again with --debug for the traceback", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
