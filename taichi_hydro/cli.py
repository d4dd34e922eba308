"""Command line: `taichi-hydro contact SCENE [--arch A] [--json]` (CONTRACT.md).

Errors are reported in one line on stderr with exit status 2; no traceback reaches the user
unless --debug is given."""

from __future__ import annotations

import argparse
import json
import sys
import time

__all__ = ["main"]


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
    c.add_argument("--world", type=int, default=0, help=argparse.SUPPRESS)
    return parser


def _contact(args) -> int:
    import taichi_hydro as th

    scene = th.load_scene(args.scene)
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


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return {"contact": _contact}[args.command](args)
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
