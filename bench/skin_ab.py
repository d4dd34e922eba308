"""Collision kernels per step with and without a skin ([collision] skin, collision.skin),
from the same state, with Taichi's kernel profiler (one launch at a time).

    python -m bench.skin_ab --arch cpu --case pile_27_settled --worlds 64 --skin 1e-4 --steps 48

A settled case starts from its saved state (bench/states/<case>.npz, bench.states: the same
with and without a skin); each run resets to it (Simulator.reset(state=...)), steps 16
untimed steps (compilation, pool growth) and `steps` timed ones, and prints one line: ms per step of each collision
kernel, their sum, all kernels, the most candidates and polygons, and the share of active
pairs searched in the last step. Run it once per skin value (and with PYTHONPATH pointing at
another checkout for that version, which prints without the skin columns)."""

from __future__ import annotations

import collections
import dataclasses
import re

from . import cases as registry
from . import cli
from . import states

COLLIDE = ("clear_counts", "pair_activity", "pair_depth", "geometry_regions", "find_candidates",
           "find_planar", "clip_candidates")


def main(argv=None) -> int:
    p = cli.parser("bench.skin_ab", __doc__)
    cli.add_case(p, "pile_27_settled", 64)
    p.add_argument("--skin", type=float, help="[collision] skin [m]; 0: off (default: the scene's)")
    p.add_argument("--steps", type=int, default=48)
    args = p.parse_args(argv)
    import taichi as ti

    import taichi_hydro as th
    from taichi_hydro.types import C_CANDIDATES, C_POLYGONS

    th.init(args.arch, profiler=True)
    case = registry.find_dynamics(args.case)
    scene = case.scene()
    if args.skin is not None:
        scene = dataclasses.replace(scene, collision_skin=args.skin)
    sim = th.Simulator(scene, worlds=args.worlds, graph=False)
    if case.settle:
        sim.reset(state=states.start_state(case, args.worlds))
    sim.step(16)
    sim.world_status()
    ti.profiler.clear_kernel_profiler_info()
    sim.step(args.steps)
    sim.world_status()
    total = collections.Counter()
    for r in ti.lang.impl.get_runtime().prog.get_kernel_profiler_records():
        total[re.sub(r"_c\d+_\d+_kernel.*", "", r.name)] += r.kernel_time
    ms = {k: total[k] / args.steps for k in COLLIDE if total[k]}
    counts = sim.max_counts.to_numpy()
    line = (f"case={args.case} worlds={args.worlds} skin={scene.collision_skin} steps={args.steps} "
            + " ".join(f"{k}_ms={v:.2f}" for k, v in ms.items())
            + f" collide_ms={sum(ms.values()):.2f} all_kernels_ms={sum(total.values()) / args.steps:.2f}"
            + f" candidates_max={int(counts[C_CANDIDATES])} polygons_max={int(counts[C_POLYGONS])}")
    if hasattr(sim.collision, "pair_stale"):
        active = sim.collision.pair_active.to_numpy()
        line += f" searched_active_pairs={(active * sim.collision.pair_stale.to_numpy()).sum() / max(active.sum(), 1):.3f}"
    print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
