"""Stress test of the offscreen viewer: many renders of one fixed state, across several Viewer
objects, image sizes and with the tactile insets, counting the frames that differ from the
others of their configuration.

A fixed state drawn with fixed settings must give the same picture every time. Each
configuration's reference is the pixel-wise median of all its frames (robust to a minority of bad
frames, and needing no frame to be trusted); a frame is bad when more than `--tolerance` pixels
differ from it by more than 60 (sum over RGB of 0..255 levels). Before the fix in
viewer._Buffer.draw (GGUI's uninitialised instance-transform buffer), 68 of 120 renders were
bad on the loaded 2-core machine (main at d406b50, `--frames 120`): whole draw calls missing,
the shaded bodies and floor (some 37 000 of 76 800 pixels at 320 x 240) or the patches (50 to
500 pixels).

    PYTHONPATH=$PWD python bench/viewer_stress.py --frames 300

Prints one line per configuration and a JSON summary line; exit status 1 when a frame is bad."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = (  # (width, height), tactile insets
    ((320, 240), False),
    ((320, 240), True),
    ((256, 192), False),
    ((400, 300), True),
)


def bad_pixels(image: np.ndarray, reference: np.ndarray) -> int:
    """Pixels of `image` that differ from `reference` by more than 60 levels (RGB sum)."""
    return int(np.count_nonzero(np.abs(image.astype(int) - reference.astype(int)).sum(axis=2) > 60))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=300, help="renders in all (default 300)")
    parser.add_argument("--per-viewer", type=int, default=5, help="renders of each Viewer object before a new one")
    parser.add_argument("--tolerance", type=int, default=20, help="pixels a frame may differ from its configuration's median")
    parser.add_argument("--arch", default="cpu")
    args = parser.parse_args(argv)

    import taichi_hydro as th
    from taichi_hydro import viewer

    th.init(args.arch)
    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "gripper.toml"))
    sensor = sim.tactile_sensor("gripper/left_finger", geometry="left_pad/pad", grid=(12, 8))
    sim.step(60)
    frames = {k: [] for k in range(len(CONFIGS))}
    start = time.perf_counter()
    done, viewers, k = 0, 0, 0
    while done < args.frames:
        size, tactile = CONFIGS[k % len(CONFIGS)]
        v = viewer.Viewer(sim, size=size, tactile=[sensor] if tactile else ())
        viewers += 1
        for _ in range(min(args.per_viewer, args.frames - done)):
            frames[k % len(CONFIGS)].append(v.render())
            done += 1
        k += 1
    seconds = time.perf_counter() - start
    bad_total = 0
    summary = []
    for c, images in frames.items():
        if not images:
            continue
        reference = np.median(np.stack(images), axis=0)
        counts = [bad_pixels(im, reference) for im in images]
        bad = [n for n in counts if n > args.tolerance]
        bad_total += len(bad)
        size, tactile = CONFIGS[c]
        print(f"{size[0]}x{size[1]} tactile={tactile}: {len(images)} frames, {len(bad)} bad"
              f" (pixels off: max {max(counts)}, bad ones {sorted(bad)[:8]})")
        summary.append({"size": list(size), "tactile": tactile, "frames": len(images), "bad": len(bad), "max_pixels_off": max(counts)})
    print(json.dumps({"frames": done, "viewers": viewers, "bad_frames": bad_total, "render_s": round(seconds, 2),
                      "configs": summary}))
    return 1 if bad_total else 0


if __name__ == "__main__":
    sys.exit(main())
