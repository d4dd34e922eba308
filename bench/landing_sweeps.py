"""Solver iterations per step while one compliant sphere lands on a rigid floor: the smallest
scene that shows why the 27-sphere pile needs tens of Gauss-Seidel sweeps per step, and the
landing sphere of issue 17's iteration targets for Newton.

    python -m bench.landing_sweeps --arch cpu --methods gauss_seidel,newton --out FILE.json

The sphere (r = 2 cm, 40 g, mesh 1 cm) starts `--gap` above the floor at rest; each variant
runs `--steps` steps of 2 ms with one method (`--methods`: Gauss-Seidel's iterations are
sweeps, Newton's are factorisations) and an iteration cap high enough never to be reached, and
prints the iterations of every step with contact (and the contacts in it). Variants: each
method, friction 0 and 0.4, each modulus. One JSON line per variant (rows written before
`method` existed are Gauss-Seidel's, with sweeps_per_contact_step / mean_sweeps / max_sweeps)."""

from __future__ import annotations

import json
import sys

from taichi_hydro.output import append_text

from . import cli
from .machine import describe


def landing_scene(friction: float, modulus_pa: float, gap_m: float, iterations: int, method: str = "gauss_seidel"):
    import taichi_hydro as th

    radius_m = 0.02
    return th.scene_from_dict({
        "sim": {"dt": 2e-3},
        "solver": {"method": method, "iterations": iterations},
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
    p.add_argument("--iterations", type=int, default=5000, help="iteration cap")
    p.add_argument("--methods", default="gauss_seidel", help="solver methods, comma-separated (gauss_seidel, newton, ...)")
    p.add_argument("--out", help="append the JSON lines to this file")
    args = p.parse_args(argv)
    import numpy as np

    import taichi_hydro as th

    th.init(args.arch)
    rows = []
    for method in args.methods.split(","):
        for modulus in (float(m) for m in args.moduli.split(",")):
            for friction in (0.0, 0.4):
                sim = th.Simulator(landing_scene(friction, modulus, args.gap, args.iterations, method))
                iterations, contacts = [], []
                for _ in range(args.steps):
                    sim.step(1)
                    stats = sim.solver_stats()
                    if stats["contacts"][0] > 0:
                        iterations.append(int(stats["iterations"][0]))
                        contacts.append(int(stats["contacts"][0]))
                row = {"case": "landing_sphere", "arch": args.arch, "device": describe(args.arch), "method": sim.method,
                       "modulus_pa": modulus, "friction": friction, "tolerance_m_s": sim.settings.tolerance,
                       "iterations_per_contact_step": iterations, "contacts": contacts,
                       "mean_iterations": float(np.mean(iterations)) if iterations else 0.0,
                       "p95_iterations": float(np.percentile(iterations, 95)) if iterations else 0.0,
                       "max_iterations": max(iterations, default=0)}
                rows.append(row)
                print(f"{sim.method}, E = {modulus:.0e} Pa, mu = {friction}: mean {row['mean_iterations']:.2f}, "
                      f"p95 {row['p95_iterations']:.0f}, max {row['max_iterations']} iterations over {len(iterations)} "
                      f"steps in contact; first steps {iterations[:8]}", file=sys.stderr)
    if args.out:
        append_text(args.out, "".join(json.dumps(row) + "\n" for row in rows))
    else:
        for row in rows:
            print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
