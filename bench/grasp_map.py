"""Where the spatula grasp holds (the study of examples/spatula_slip.py, batched): one batch of
worlds sweeps the grasp force, the friction coefficient and the pads' modulus, and maps
whether the spatula holds when the force drops from 16 N to the world's own.

    python -m bench.grasp_map --out bench/results/grasp_map_2core_epyc.json --plot docs/grasp_map.png

Batch A (the paper's square-wave step, gravity on): every world closes on the handle at 16 N
for 0.2 s, then its force drops to F (set_joint_control, per world) and it runs --hold-s more;
it slipped when the pitch moved by more than 3 deg. The stepping after the drop is timed
(world-steps/s; compile and the settling steps are not).
Batch B (the prediction, gravity off): the same worlds settle at 16 N, come down to F within
0.1 s and rest 0.1 s; from each world's contact polygons, the limit torque of its patches with
the spatula's weight carried too (spatula_slip.limit_torque) and the pure torsional capacity
M_max; predicted to hold when m g d stays below the limit.
Friction (pads and spatula alike) and modulus (the pads': set on the finger bodies, which take
it by ratio) go through set_parameters. One JSON object: every world's values, the agreement
of A and B, the throughput and the machine."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from taichi_hydro.types import C_POLYGONS

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import spatula_slip as study  # noqa: E402

SLIP_DEG = 3.0


def sweep(forces, frictions, moduli) -> dict:
    """The worlds' parameters, force fastest: arrays of shape (W,)."""
    E, M, F = np.meshgrid(moduli, frictions, forces, indexing="ij")
    return {"force": F.ravel(), "friction": M.ravel(), "modulus_factor": E.ravel()}


def configured(scene, grid: dict, gravity: bool):
    """A simulator of `scene` over the sweep's worlds with their friction and pad modulus."""
    import taichi_hydro as th

    W = len(grid["force"])
    sim = th.Simulator(scene, worlds=W)
    params = sim.parameters()
    friction, modulus = params["friction"].copy(), params["modulus"].copy()
    for name in (*study.FINGERS, study.SPATULA):
        friction[:, scene.body_index(name)] = grid["friction"]
    for name in study.FINGERS:
        b = scene.body_index(name)
        modulus[:, b] *= grid["modulus_factor"]  # the finger body's first compliant geometry; its pad follows by ratio
    sim.set_parameters(friction=friction, modulus=modulus, gravity=None if gravity else [0.0, 0.0, 0.0])
    sim.reset(state=study.grasp_state(sim))
    return sim


def efforts(sim, force) -> None:
    sim.set_joint_control(effort=np.repeat(np.asarray(force, dtype=np.float64).reshape(-1, 1), len(sim.joint_names), axis=1))


def batch_drop(scene, grid: dict, hold_s: float) -> dict:
    """Batch A: pitch change after the drop, and the timed throughput."""
    sim = configured(scene, grid, gravity=True)
    efforts(sim, np.full(len(grid["force"]), study.HIGH_N))
    sim.step(int(round(0.2 / sim.dt)))
    start = study.pitch(sim)
    efforts(sim, grid["force"])
    steps = int(round(hold_s / sim.dt))
    sim.step(1)  # any recompilation for the new controls outside the timing
    t0 = time.perf_counter()
    sim.step(steps - 1)
    wall = time.perf_counter() - t0
    turned = np.degrees(study.pitch(sim) - start)
    totals = sim.step_totals()
    return {"turned_deg": turned, "wall_s": wall, "world_steps_per_s": len(start) * (steps - 1) / wall,
            "contacts_per_world_step": totals["contacts"] / max(totals["steps"], 1) / len(start),
            "frozen": int((sim.world_status() != 0).sum())}


def batch_capacity(scene, grid: dict) -> dict:
    """Batch B: per world, M_max and the limit torque with the weight, at its force, at rest."""
    from taichi_hydro.collision.surfaces import group_surfaces

    W = len(grid["force"])
    sim = configured(scene, grid, gravity=False)
    efforts(sim, np.full(W, study.HIGH_N))
    sim.step(int(round(0.2 / sim.dt)))
    for k in range(10):
        efforts(sim, study.HIGH_N + (grid["force"] - study.HIGH_N) * (k + 1) / 10)
        sim.step(int(round(0.01 / sim.dt)))
    sim.step(int(round(0.1 / sim.dt)))
    counts = sim.collide()
    pool = sim.collision.pool.to_numpy(int(counts[C_POLYGONS]))
    deep = sim.collision.pair_deep.to_numpy()
    b = scene.body_index(study.SPATULA)
    m, d = float(scene.bodies[b].mass), float(sim.model.host.body_com_B[b][1])
    capacity, limit = np.zeros(W), np.zeros(W)
    for w in range(W):
        grip = [s for s in group_surfaces(pool, w, sim.model.host, deep[w]) if study.SPATULA in (s.body_a, s.body_b)]
        mu = study.pair_friction(sim, w)
        capacity[w] = sum(s.torsional_capacity(mu) for s in grip)
        centre = np.mean([s.pressure_center() for s in grip], axis=0)
        limit[w] = study.limit_torque(grip, mu, [1.0, 0.0, 0.0], centre, [0.0, 0.0, m * 9.81])
    return {"capacity_Nm": capacity, "limit_Nm": limit, "m_g_d_Nm": m * 9.81 * d}


def plot(path: Path, grid: dict, drop: dict, cap: dict, forces, frictions, moduli, hold_s: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    from taichi_hydro.output import atomic_write

    nE, nM, nF = len(moduli), len(frictions), len(forces)
    turned = np.abs(drop["turned_deg"]).reshape(nE, nM, nF)
    limit = cap["limit_Nm"].reshape(nE, nM, nF)
    fig, axes = plt.subplots(1, nE, figsize=(4.6 * nE, 4.2), sharey=True)
    axes = np.atleast_1d(axes)
    for k, ax in enumerate(axes):
        im = ax.pcolormesh(np.arange(nF + 1), np.arange(nM + 1), np.clip(turned[k], 1e-3, 180), norm=LogNorm(1e-3, 180),
                           cmap="viridis", shading="flat")
        slipped = turned[k] > SLIP_DEG
        jj, ii = np.meshgrid(np.arange(nF), np.arange(nM))
        ax.scatter(jj[slipped] + 0.5, ii[slipped] + 0.5, marker="x", color="w", s=14, lw=0.8, label="slipped (> 3 deg)")
        predicted = limit[k] < cap["m_g_d_Nm"]
        ax.contour(np.arange(nF) + 0.5, np.arange(nM) + 0.5, predicted.astype(float), levels=[0.5], colors="r", linewidths=1.5)
        ax.set_xticks(np.arange(nF) + 0.5, [f"{f:.2g}" for f in forces], rotation=90, fontsize=7)
        ax.set_yticks(np.arange(nM) + 0.5, [f"{m:.2g}" for m in frictions], fontsize=7)
        ax.set(xlabel="grasp force after the drop [N]", title=f"pad modulus {moduli[k] * 1e5:.3g} Pa")
        if k == 0:
            ax.set_ylabel("friction coefficient")
            ax.legend(loc="upper right", fontsize=7)
    fig.colorbar(im, ax=axes.tolist(), label=f"|pitch change| {hold_s:g} s after the drop [deg]")
    fig.suptitle("spatula held (no x) or slipped (x) after the force drops from 16 N; red: m g d = limit torque of the "
                 "patches (predicted boundary)", fontsize=9)
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=100, format="png"))
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="cpu", choices=["cpu", "vulkan", "cuda"])
    p.add_argument("--forces", type=int, default=16, help="grasp forces, log-spaced from 0.5 to 16 N")
    p.add_argument("--frictions", default="0.3,0.45,0.6,0.8,1.0,1.25,1.6,2.0")
    p.add_argument("--moduli", default="0.3,1,3", help="pad modulus factors of the scene's 1e5 Pa")
    p.add_argument("--hold-s", type=float, default=0.6)
    p.add_argument("--out", required=True, help="JSON file")
    p.add_argument("--plot", help="PNG of the map")
    args = p.parse_args(argv)
    import taichi_hydro as th
    from taichi_hydro.output import atomic_write

    from .machine import machine

    th.init(args.arch)
    forces = np.geomspace(0.5, 16.0, args.forces)
    frictions = np.array([float(x) for x in args.frictions.split(",")])
    moduli = np.array([float(x) for x in args.moduli.split(",")])
    grid = sweep(forces, frictions, moduli)
    scene = study.study_scene()
    print(f"{len(grid['force'])} worlds", flush=True)
    t0 = time.perf_counter()
    drop = batch_drop(scene, grid, args.hold_s)
    print(f"batch A: {drop['world_steps_per_s']:.0f} world-steps/s ({time.perf_counter() - t0:.0f} s)", flush=True)
    cap = batch_capacity(scene, grid)
    slipped = np.abs(drop["turned_deg"]) > SLIP_DEG
    predicted = cap["limit_Nm"] < cap["m_g_d_Nm"]
    by_torsion = cap["capacity_Nm"] < cap["m_g_d_Nm"]
    record = {
        "case": "spatula grasp map", "arch": args.arch, "worlds": len(grid["force"]), "hold_s": args.hold_s, "dt_s": scene.dt,
        "slip_threshold_deg": SLIP_DEG, "m_g_d_Nm": cap["m_g_d_Nm"],
        "world_steps_per_s": drop["world_steps_per_s"], "timed_wall_s": drop["wall_s"],
        "contacts_per_world_step": drop["contacts_per_world_step"], "frozen_worlds": drop["frozen"],
        "agreement_limit": float((slipped == predicted).mean()), "agreement_pure_torsion": float((slipped == by_torsion).mean()),
        "slipped_but_predicted_to_hold": int((slipped & ~predicted).sum()), "held_but_predicted_to_slip": int((~slipped & predicted).sum()),
        "total_wall_s": time.perf_counter() - t0, "machine": machine(),
        "worlds_data": {"force_N": grid["force"].tolist(), "friction": grid["friction"].tolist(),
                        "modulus_Pa": (grid["modulus_factor"] * 1e5).tolist(), "turned_deg": drop["turned_deg"].tolist(),
                        "capacity_Nm": cap["capacity_Nm"].tolist(), "limit_Nm": cap["limit_Nm"].tolist()},
    }
    atomic_write(args.out, lambda tmp: tmp.write_text(json.dumps(record) + "\n"))
    print(json.dumps({k: v for k, v in record.items() if k not in ("worlds_data", "machine")}, indent=1))
    if args.plot:
        plot(Path(args.plot), grid, drop, cap, forces, frictions, moduli, args.hold_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
