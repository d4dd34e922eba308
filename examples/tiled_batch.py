"""A batch tiled side by side: the compliant box of scenes/box_on_incline.toml (a 20 degree
incline, tan 20 = 0.364) in four worlds whose Coulomb friction differs, 0.1, 0.25, 0.4 and
0.6, after 0.5 s: the boxes with mu < 0.364 slide, the others stick. Each panel is labelled
with its world and its friction (the parameter that differs). Writes docs/incline_tiles.png:

    .venv/bin/python examples/tiled_batch.py [OUT.png|.gif|.mp4]
"""

import sys
from pathlib import Path

import numpy as np

import taichi_hydro as th
from taichi_hydro import viewer

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "incline_tiles.png"
    th.init("cpu")
    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "box_on_incline.toml"), worlds=4)
    # Friction per (world, body); a pair combines its two bodies' values (2 mu_a mu_b / (mu_a + mu_b)).
    sim.set_parameters(friction=np.repeat([[0.1], [0.25], [0.4], [0.6]], 2, axis=1))
    path = viewer.record(sim, out, frames=16, steps_per_frame=33, size=(960, 640), tile=(2, 2))
    print(f"{path}: t = {sim.time:.3f} s")
