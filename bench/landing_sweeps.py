"""Solver sweeps per step while one compliant sphere lands on a rigid floor: the smallest scene
that shows why the 27-sphere pile needs tens of Gauss-Seidel sweeps per step.

    python -m bench.landing_sweeps --arch cpu --out bench/results/landing_sweeps_2core_epyc.json

The sphere (r = 2 cm, 40 g, mesh 1 cm) starts `--gap` above the floor at rest; each variant
runs `--steps` steps of 2 ms with method gauss_seidel (pinned: the default on cpu and vulkan is
newton, whose iterations are not sweeps) and a sweep cap high enough never to be reached, and
prints the sweeps of every step with contact (and the contacts in it). Variants: friction 0 and
0.4 for each modulus. One JSON line per variant."""

from __future__ import annotations

import json
import sys

from taichi_hydro.output import append_text

from . import cli


def landing_scene(friction: float, modulus_pa: float, gap_m: float, iterations: int):
    import taichi_hydro as th

    radius_m = 0.02
    return th.scene_from_dict({
        "sim": {"dt": 2e-3},
        "solver": {"method": "gauss_seidel", "iterations": iterations},
        "body": [
            {"name": "floor", "type": "static", "shape": {"type": "halfspace"}, "contact": {"friction": friction}},
            {"name": "ball", "mass": 0.04, "position": [0.0, 0.0, radius_m + gap_m], "shape": {"type": "sphere", "radius": radius_m},
             "contact": {"modulus": modulus_pa, "resolution": 0.01, "friction": friction}},
        ],
    }, source="landing")


def main(argv=None) -> int:
    p = cli.parser("bench.landing_sweeps", __doc__)
    p.add_argument("--arch", default="cpu")
    p.add_argument("--moduli", default="1e5,1e6,1e7", help="hydroelastic moduli [Pa], comma-separated")
    p.add_argument("--gap", type=float, default=0.01, help="initial height of the sphere's bottom above the floor [m]")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--iterations", type=int, default=5000, help="sweep cap")
    p.add_argument("--out", help="append the JSON lines to this file")
    args = p.parse_args(argv)
    import numpy as np

    import taichi_hydro as th

    th.init(args.arch)
    rows = []
    for modulus in (float(m) for m in args.moduli.split(",")):
        for friction in (0.0, 0.4):
            sim = th.Simulator(landing_scene(friction, modulus, args.gap, args.iterations))
            sweeps, contacts = [], []
            for _ in range(args.steps):
                sim.step(1)
                stats = sim.solver_stats()
                if stats["contacts"][0] > 0:
                    sweeps.append(int(stats["iterations"][0]))
                    contacts.append(int(stats["contacts"][0]))
            row = {"case": "landing_sphere", "arch": args.arch, "modulus_pa": modulus, "friction": friction,
                   "tolerance_m_s": sim.settings.tolerance, "sweeps_per_contact_step": sweeps, "contacts": contacts,
                   "mean_sweeps": float(np.mean(sweeps)) if sweeps else 0.0, "max_sweeps": max(sweeps, default=0)}
            rows.append(row)
            print(f"E = {modulus:.0e} Pa, mu = {friction}: mean {row['mean_sweeps']:.1f}, max {row['max_sweeps']} sweeps "
                  f"over {len(sweeps)} steps in contact; first steps {sweeps[:8]}", file=sys.stderr)
    if args.out:
        append_text(args.out, "".join(json.dumps(row) + "\n" for row in rows))
    else:
        for row in rows:
            print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
