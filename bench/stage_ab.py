"""Stage times per step (collide / assemble / solve / integrate, Simulator.profile_stages) of a
dynamics case, for whichever checkout of taichi_hydro is imported, so that two versions are
compared from the same start:

    cd /tmp && PYTHONPATH=<folder holding only this bench package>:<checkout> \\
        python -m bench.stage_ab --case pile_27_settled --worlds 64 --steps 20

A settled case starts from its saved state (bench/states/<case>.npz, the same arrays in every
world) written straight into the state arrays (body_p, body_q, body_v, body_w), which every
version since the spatial hash has, then 16 untimed steps; another case starts from its
initial state and runs `--warmup` steps (default 150) first. One line per run: the checkout's
folder, the case and ms per step of each stage (one launch at a time with a sync after each,
so they sum to more than a step takes). Alternate versions run after run: this machine's
speed moves with its load."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import cli

STATES = Path(__file__).resolve().parent / "states"


def main(argv=None) -> int:
    p = cli.parser("bench.stage_ab", __doc__)
    cli.add_case(p, "pile_27_settled", 64)
    p.add_argument("--steps", type=int, default=20, help="profiled steps")
    p.add_argument("--warmup", type=int, default=150, help="steps before profiling (cases without a saved state)")
    args = p.parse_args(argv)
    import taichi_hydro as th

    from . import cases as registry

    th.init(args.arch)
    case = registry.find_dynamics(args.case)
    sim = th.Simulator(case.scene(), worlds=args.worlds)
    if case.settle:
        saved = np.load(STATES / f"{case.name}.npz")
        for name, key in (("body_p", "position"), ("body_q", "orientation"), ("body_v", "velocity"),
                          ("body_w", "angular_velocity")):
            array = getattr(sim.state, name)
            array.from_numpy(np.repeat(saved[key], args.worlds, axis=0).astype(array.to_numpy().dtype))
        sim.step(16)
    else:
        sim.step(args.warmup)
    stages = sim.profile_stages(args.steps)
    print(Path(th.__file__).resolve().parents[1].name, args.case, f"worlds={args.worlds}",
          " ".join(f"{k}={v * 1e3:.1f}" for k, v in stages.items()), "ms/step", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
