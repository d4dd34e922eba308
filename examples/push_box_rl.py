"""An RL-style loop over many worlds: push a box across a table to a target line.

Each world holds a compliant box (0.2 kg, 10 x 10 x 5 cm) on a rigid floor, with its own
friction coefficient drawn once (domain randomisation). Every control step the "policy" (here
a proportional-derivative law standing in for a network) reads the observations of all worlds
at once, writes a horizontal force for each, and the simulator advances all worlds together.
An episode ends when the box reaches the target line x = 0.3 m or after `--horizon` control
steps; only the worlds whose episode ended are reset, to a random start, while the others go
on untouched.

    python examples/push_box_rl.py --arch cpu --worlds 256 --iterations 300
    python examples/push_box_rl.py --arch cuda --worlds 4096 --torch   # observations and actions as CUDA tensors
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import taichi_hydro as th

TARGET_X_M = 0.3


def push_box_scene() -> th.Scene:
    """A rigid floor and a compliant box resting on it (the margin keeps the flat contact calm)."""
    return th.scene_from_dict({
        "sim": {"dt": 2e-3},
        "body": [
            {"name": "floor", "type": "static", "shape": {"type": "halfspace"}, "contact": {"friction": 0.5}},
            {"name": "box", "mass": 0.2, "position": [0.0, 0.0, 0.025],
             "shape": {"type": "box", "size": [0.1, 0.1, 0.05]},
             "contact": {"modulus": 1e7, "margin": 1e-4, "friction": 0.5}},
        ],
    }, source="push_box")


def policy(x_m, vx_m_s):
    """Horizontal force [N] for box positions x [m] and velocities vx [m/s] (PD to the target,
    clipped to +-3 N)."""
    return (30.0 * (TARGET_X_M + 0.05 - x_m) - 2.0 * vx_m_s).clip(-3.0, 3.0)  # NumPy arrays or torch tensors


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="cpu", choices=["cpu", "vulkan", "cuda"])
    p.add_argument("--worlds", type=int, default=256)
    p.add_argument("--iterations", type=int, default=300, help="control steps")
    p.add_argument("--substeps", type=int, default=5, help="simulation steps per control step")
    p.add_argument("--horizon", type=int, default=200, help="control steps per episode at most")
    p.add_argument("--torch", action="store_true",
                   help="observations and actions as zero-copy torch tensor views (cpu and cuda backends)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    th.init(args.arch)
    sim = th.Simulator(push_box_scene(), worlds=args.worlds)
    W, B = sim.worlds, len(sim.body_names)
    box = sim.body_names.index("box")
    friction = sim.sample_parameters(seed=args.seed, friction=(0.2, 0.6))["friction"][:, box]
    rng = np.random.default_rng(args.seed)
    episode_steps = np.zeros(W, dtype=int)
    finished, reached = 0, 0
    force = np.zeros((W, B, 3))
    initial_pos = np.array([body.p_WB for body in sim.scene.bodies])  # (B, 3) [m]
    if args.torch:  # zero-copy views: observations and actions stay where the simulator keeps them
        obs, act = sim.state_tensors(), sim.control_tensors()
    t0 = time.perf_counter()
    for _ in range(args.iterations):
        if args.torch:  # live views: they always show the current state, resets included
            x, vx = obs["position"][:, box, 0], obs["velocity"][:, box, 0]
            reached_now = (x >= TARGET_X_M).cpu().numpy()
        else:
            state = sim.get_state()
            x, vx = state["position"][:, box, 0], state["velocity"][:, box, 0]
            reached_now = x >= TARGET_X_M
        done = reached_now | (episode_steps >= args.horizon) | (sim.world_status() != 0)
        if done.any():
            finished += int(done.sum())
            reached += int(reached_now[done].sum())
            n = int(done.sum())
            start_pos = np.repeat(initial_pos[None], n, axis=0)
            start_pos[:, box, 0] = rng.uniform(-0.1, 0.1, n)
            sim.reset(worlds=done, state={"position": start_pos})
            episode_steps[done] = 0
            if not args.torch:
                x[done] = start_pos[:, box, 0]
                vx[done] = 0.0
        if args.torch:
            act["force"][:, box, 0] = policy(x, vx)
        else:
            force[:, box, 0] = policy(x, vx)
            sim.set_control(force=force)
        sim.step(args.substeps)
        episode_steps += 1
    wall = time.perf_counter() - t0
    steps = args.iterations * args.substeps * W
    print(f"{W} worlds x {args.iterations} control steps ({args.substeps} substeps) on {args.arch}: "
          f"{steps / wall:.4g} world-steps/s including observation, policy and resets")
    print(f"episodes finished: {finished}, reached the target: {reached}; friction drawn in "
          f"[{friction.min():.3f}, {friction.max():.3f}]; diverged worlds: {int(np.count_nonzero(sim.world_status()))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
