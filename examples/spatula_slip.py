"""Spatula slip control (Masterjohn et al. 2022, §V-C, Fig. 10), with our gripper.

The two-finger gripper of scenes/spatula.toml, welded to the world, holds a rigid spatula
horizontally by its handle between compliant pads. The commanded grasp force (the effort of
each prismatic finger) is a square wave between 16 N and 1 N, period 6 s, 75 % duty cycle (16 N
for 4.5 s, then 1 N for 1.5 s). At 16 N the pads' friction holds the gravity torque m g d cos
(pitch) of the spatula about the grasp axis; at 1 N the patches shrink until their torsional
capacity M_max (ContactSurface.torsional_capacity) falls below it, and the spatula turns within
the grasp until the gravity torque, falling with cos(pitch), is held again.

Runs (all from the same closed grasp):
- the study at the scene's handle resolution (2.5 mm), with the torsional capacity of both
  patches sampled along the way (figure panel 3);
- the same with one point contact per patch ([solver] contact = "point"): no friction torque
  about the contact normal, so the spatula turns at any grasp force;
- the study at the other handle resolutions (--resolutions): how much the pitch trace moves;
- the onset of slip at 1, 2 and 4 N under a slowly growing gravity, against the limit torque
  of the patches (slip_onset, limit_torque).

Writes into --out: spatula_fig10.png (grasp force, pitch, torsional capacity against gravity
torque), spatula_series.json (every series and summary number), spatula.gif (the grasp with the
patches coloured by pressure and both pads' tactile images as insets, over --gif-window) and
spatula_tactile.png (both pads' pressure and shear images at 16 N and at 1 N).

    python examples/spatula_slip.py --out out/spatula                 # about 15 minutes on 2 cores
    python examples/spatula_slip.py --periods 1 --resolutions 0.005 --no-gif --out out/quick
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import tomllib
from pathlib import Path

import numpy as np

import taichi_hydro as th
from taichi_hydro.output import atomic_write
from taichi_hydro.rotation import rotation_matrices

ROOT = Path(__file__).resolve().parents[1]
SCENE = ROOT / "scenes" / "spatula.toml"
HIGH_N, LOW_N, PERIOD_S, DUTY = 16.0, 1.0, 6.0, 0.75
PAD_FACE_X_M = 0.03
"""The pads' inner faces at zero joint positions, world |x| [m] (scenes/robots/gripper/gripper.urdf)."""
FINGERS = ("gripper/left_finger", "gripper/right_finger")
PADS = ("left_pad/pad", "right_pad/pad")
SPATULA = "spatula"


def study_scene(resolution: float | None = None, contact: str = "polygons") -> th.Scene:
    """scenes/spatula.toml, with the handle's mesh resolution [m] (None: the scene's) and the
    contact mode ([solver] contact: "polygons" or "point") given."""
    data = tomllib.loads(SCENE.read_text())
    body = next(b for b in data["body"] if b["name"] == SPATULA)
    handle = next(g for g in body["geometry"] if g["name"] == "handle")
    if resolution is not None:
        handle["contact"]["resolution"] = float(resolution)
    data.setdefault("solver", {})["contact"] = contact
    return th.scene_from_dict(data, str(SCENE), base_dir=SCENE.parent)


def grasp_state(sim: th.Simulator) -> dict:
    """Positions (worlds, bodies, 3) with each finger slid along its joint axis until its pad
    touches the handle (the scene starts open), for Simulator.reset(state=...)."""
    scene = sim.scene
    spatula = scene.bodies[scene.body_index(SPATULA)]
    radius = next(g.shape.radius for g in spatula.geometries if g.name == "handle")
    position = sim.get_state()["position"]
    for joint in scene.joints:
        if joint.type == "prismatic":
            position[:, scene.body_index(joint.child)] += (PAD_FACE_X_M - radius) * np.asarray(joint.axis_W)
    return {"position": position}


def pitch(sim: th.Simulator) -> np.ndarray:
    """(worlds,) the spatula's pitch [rad]: the angle of its handle axis (body y) above the
    horizontal, in the world's y-z plane (negative: blade down)."""
    R = rotation_matrices(sim.get_state()["orientation"][:, sim.scene.body_index(SPATULA)])
    return np.arctan2(R[:, 2, 1], R[:, 1, 1])


def commanded_force(t: float) -> float:
    """The square wave of the study [N]: 16 N for the first 75 % of each 6 s period, else 1 N."""
    return HIGH_N if (t % PERIOD_S) < DUTY * PERIOD_S else LOW_N


def gravity_torque(sim: th.Simulator, theta: np.ndarray) -> np.ndarray:
    """m g d cos(pitch) [N m] per world: the spatula's weight about the grasp axis (d: its centre
    of mass ahead of the grasp point, along the handle)."""
    b = sim.scene.body_index(SPATULA)
    d = float(sim.model.host.body_com_B[b][1])
    g = np.linalg.norm(sim.parameters()["gravity"], axis=1)
    return sim.parameters()["mass"][:, b] * g * d * np.cos(theta)


def torsional_capacity(sim: th.Simulator, world: int = 0) -> tuple[float, int]:
    """(M_max [N m], polygons): the friction torque both pads' patches can resist, each about
    its own pressure centre (ContactSurface.torsional_capacity), at the pair's friction."""
    mu = pair_friction(sim, world)
    total, polygons = 0.0, 0
    for surface in sim.contact_surfaces(world):
        if SPATULA in (surface.body_a, surface.body_b):
            total += surface.torsional_capacity(mu)
            polygons += surface.faces
    return total, polygons


def pair_friction(sim: th.Simulator, world: int = 0) -> float:
    """Coulomb mu of a pad against the handle in `world`: 2 mu_a mu_b / (mu_a + mu_b)."""
    mu = sim.parameters()["friction"][world]
    a, b = mu[sim.scene.body_index(FINGERS[0])], mu[sim.scene.body_index(SPATULA)]
    return 2 * a * b / (a + b)


def limit_torque(surfaces, mu: float, axis, point, load) -> float:
    """The largest torque [N m] about the grasp axis (unit `axis` through `point`, world) that
    the friction of the patches `surfaces` can resist while it also carries the force `load`
    [N] (in the plane normal to the axis; the weight it holds up, as a force on the body): the
    limit surface of a parallel-jaw grasp, each polygon i a point contact that slides at its
    limit mu A_i p0_i. At the onset of slip the body turns about some centre q on the plane
    (through `point`, normal to the axis); polygon i then slides along axis x (x_i - q) and its
    friction opposes that; q is where the friction forces sum to the load, and the torque they
    then make about `point` is the limit. Zero load gives the patches' pure torsional capacity
    (sum mu A_i p0_i |x_i - c| about the pressure centres, for patches on a common axis)."""
    from scipy.optimize import least_squares

    a = np.asarray(axis, dtype=np.float64)
    a /= np.linalg.norm(a)
    e1 = np.cross(a, [1.0, 0.0, 0.0] if abs(a[0]) < 0.9 else [0.0, 1.0, 0.0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(a, e1)
    x, w = [], []
    for s in surfaces:
        keep = (s.polygons["pressure"] > 0) & s.polygons["contact"]
        x.append(s.polygons["centroid"][keep])
        w.append(mu * (s.polygons["area"] * s.polygons["pressure"])[keep])
    x, w = np.concatenate(x) - np.asarray(point, dtype=np.float64), np.concatenate(w)
    xy = np.stack([x @ e1, x @ e2], axis=1)  # polygon points in the plane, from the axis
    target = np.array([np.dot(load, e1), np.dot(load, e2)])

    def friction(q):
        """Net friction force (plane coordinates) and torque about the axis when turning (+a)
        about q: polygon velocity a x (x - q) = perp(x - q); friction opposes it."""
        r = xy - q
        direction = np.stack([-r[:, 1], r[:, 0]], axis=1)
        direction /= np.maximum(np.linalg.norm(direction, axis=1, keepdims=True), 1e-15)
        f = -w[:, None] * direction
        return f.sum(axis=0), float((xy[:, 0] * f[:, 1] - xy[:, 1] * f[:, 0]).sum())

    if np.linalg.norm(target) >= w.sum():
        return 0.0  # the load alone takes all the friction
    fit = least_squares(lambda q: (friction(q)[0] - target) / w.sum(), x0=np.zeros(2), x_scale=0.01)
    return abs(friction(fit.x)[1])


def closed_grasp(scene: th.Scene, worlds: int = 1, settle_s: float = 0.2) -> th.Simulator:
    """A simulator of `scene` with the fingers closed on the handle and `settle_s` simulated at
    16 N (the patch forms, the spatula settles in the grasp)."""
    sim = th.Simulator(scene, worlds=worlds)
    sim.reset(state=grasp_state(sim))
    sim.set_joint_control(effort=np.full((worlds, len(sim.joint_names)), HIGH_N))
    sim.step(int(round(settle_s / sim.dt)))
    return sim


def run_study(scene: th.Scene, duration_s: float, sample_s: float = 0.01, capacity_every: int = 0, frame=None,
              label: str = "") -> dict:
    """The force schedule on a closed grasp for `duration_s` (the clock starts after the 0.2 s
    settling at 16 N). Returns series sampled every `sample_s`: time [s], force [N], pitch
    [rad], contacts; with capacity_every = k, the torsional capacity [N m] and the gravity
    torque [N m] every k-th sample. frame(sim, t): called after every sample (GIF frames)."""
    sim = closed_grasp(scene)
    steps = int(round(sample_s / sim.dt))
    n = int(round(duration_s / sample_s))
    out = {"time": [], "force": [], "pitch": [], "contacts": [], "capacity_time": [], "capacity": [], "gravity_torque": []}
    start = time.perf_counter()
    for k in range(n + 1):
        t = k * sample_s
        theta = float(pitch(sim)[0])
        out["time"].append(t)
        out["force"].append(commanded_force(t))
        out["pitch"].append(theta)
        out["contacts"].append(int(sim.solver_stats()["contacts"][0]))
        if capacity_every and k % capacity_every == 0:
            out["capacity_time"].append(t)
            out["capacity"].append(torsional_capacity(sim)[0])
            out["gravity_torque"].append(float(gravity_torque(sim, np.array([theta]))[0]))
        if frame is not None:
            frame(sim, t)
        if k == n:
            break
        sim.set_joint_control(effort=np.full((1, len(sim.joint_names)), commanded_force(t)))
        sim.step(steps)
    out["wall_s"] = time.perf_counter() - start
    out["steps_per_s"] = n * steps / out["wall_s"]
    print(f"{label}: {n * steps} steps in {out['wall_s']:.1f} s ({out['steps_per_s']:.0f} steps/s), "
          f"final pitch {math.degrees(out['pitch'][-1]):.2f} deg", flush=True)
    return out


def slip_onset(scene: th.Scene, forces=(1.0, 2.0, 4.0), g_rate: float = 20.0, g_max: float = 60.0, sample_s: float = 0.005,
               spin_rad_s: float = 0.02) -> dict:
    """The onset of slip against the patches' torsional capacity, one world per grasp force
    (N, `forces`): the grasp closes at 16 N without gravity, comes down to its force within
    0.1 s and rests 0.1 s there; M_max of both patches is read then (torsional_capacity); then
    gravity grows from 0 at `g_rate` [m/s^2 per s] (slowly against the grasp's ~10 ms response),
    so the gravity torque m g d grows until the patches let go. The onset is the first sample
    (every `sample_s`) where the spatula's pitch rate exceeds `spin_rad_s`. Returns, per world,
    the force, M_max, the gravity torque at the onset and their ratio (None where it held up
    to `g_max`), the tangential load ratio f = m g / (2 mu F) there, the limit torque of the
    patches with the weight carried too (limit_torque: the onset it predicts, m g d = limit) and
    the onset torque over it, and the pitch series."""
    forces = np.asarray(forces, dtype=np.float64)
    W = len(forces)
    sim = th.Simulator(scene, worlds=W)
    sim.set_parameters(gravity=[0.0, 0.0, 0.0])
    sim.reset(state=grasp_state(sim))
    b = sim.scene.body_index(SPATULA)

    def effort(f):
        sim.set_joint_control(effort=np.repeat(np.asarray(f, dtype=np.float64).reshape(-1, 1), len(sim.joint_names), axis=1))

    effort(np.full(W, HIGH_N))
    sim.step(int(round(0.2 / sim.dt)))
    for k in range(10):  # 16 N -> each world's force in 0.1 s
        effort(HIGH_N + (forces - HIGH_N) * (k + 1) / 10)
        sim.step(int(round(0.01 / sim.dt)))
    sim.step(int(round(0.1 / sim.dt)))
    capacity = np.array([torsional_capacity(sim, w)[0] for w in range(W)])
    mass = sim.parameters()["mass"][:, b]
    d = float(sim.model.host.body_com_B[b][1])
    mu = np.array([pair_friction(sim, w) for w in range(W)])
    grip = [[s for s in sim.contact_surfaces(w) if SPATULA in (s.body_a, s.body_b)] for w in range(W)]

    def limit_gravity(w):
        """The gravity at which m g d meets the limit torque with the weight m g carried too."""
        from scipy.optimize import brentq

        centre = np.mean([s.pressure_center() for s in grip[w]], axis=0)

        def excess(g):
            return limit_torque(grip[w], mu[w], [1.0, 0.0, 0.0], centre, [0.0, 0.0, mass[w] * g]) - mass[w] * g * d

        return brentq(excess, 0.0, 2.0 * mu[w] * forces[w] / mass[w])

    predicted_g = np.array([limit_gravity(w) for w in range(W)])
    steps = int(round(sample_s / sim.dt))
    onset_g = np.full(W, np.nan)
    series = {"time": [], "gravity": [], "pitch": []}
    t = 0.0
    while np.isnan(onset_g).any() and g_rate * t < g_max:
        g = g_rate * t
        rate = -sim.get_state()["angular_velocity"][:, b, 0]  # pitch rate (pitch grows against +x spin)
        fresh = np.isnan(onset_g) & (np.abs(rate) > spin_rad_s)
        onset_g[fresh] = g
        series["time"].append(t)
        series["gravity"].append(g)
        series["pitch"].append(pitch(sim).tolist())
        t += sample_s
        sim.set_parameters(gravity=[0.0, 0.0, -g_rate * t])
        sim.step(steps)
    torque = mass * onset_g * d
    worlds = []
    for w in range(W):
        held = bool(np.isnan(onset_g[w]))
        worlds.append({"force_N": float(forces[w]), "capacity_Nm": float(capacity[w]), "mu": float(mu[w]),
                       "limit_torque_with_weight_Nm": float(mass[w] * predicted_g[w] * d),
                       "onset_gravity_m_s2": None if held else float(onset_g[w]),
                       "onset_torque_Nm": None if held else float(torque[w]),
                       "torque_over_capacity": None if held else float(torque[w] / capacity[w]),
                       "torque_over_limit": None if held else float(torque[w] / (mass[w] * predicted_g[w] * d)),
                       "load_ratio_f": None if held else float(mass[w] * onset_g[w] / (2 * mu[w] * forces[w]))})
    return {"worlds": worlds, "g_rate_m_s2_per_s": g_rate, "sample_s": sample_s, "spin_threshold_rad_s": spin_rad_s,
            "lever_d_m": d, "series": series}


def phase_summary(series: dict) -> list[dict]:
    """Per constant-force phase: its force, start and end [s], pitch at both ends and its
    change [deg]."""
    t, f, p = np.asarray(series["time"]), np.asarray(series["force"]), np.degrees(series["pitch"])
    edges = [0] + [i for i in range(1, len(f)) if f[i] != f[i - 1]] + [len(f)]
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        out.append({"force_N": float(f[a]), "start_s": float(t[a]), "end_s": float(t[b - 1]), "pitch_start_deg": float(p[a]),
                    "pitch_end_deg": float(p[b - 1]), "change_deg": float(p[b - 1] - p[a])})
    return out


def tactile_snapshots(scene: th.Scene, grid=(20, 30)) -> dict:
    """Both pads' pressure and shear images [Pa] held at 16 N (after settling) and 0.3 s after
    the force drops to 1 N (the spatula turned and held again)."""
    sim = th.Simulator(scene)
    sensors = [sim.tactile_sensor(finger, grid=grid, geometry=pad) for finger, pad in zip(FINGERS, PADS)]
    sim.reset(state=grasp_state(sim))
    out = {}
    for force, seconds in ((HIGH_N, 0.3), (LOW_N, 0.6)):
        sim.set_joint_control(effort=np.full((1, 2), force))
        sim.step(int(round(seconds / sim.dt)))
        out[force] = [{"pressure": s.pressure()[0], "shear": s.shear()[0], "sensor": s} for s in sensors]
    return out


def plot_study(path: Path, runs: dict, mgd: float) -> None:
    """Fig. 10 of the paper (commanded force, spatula pitch) and a third panel: the torsional
    capacity of the patches against the gravity torque."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    main = runs["main"]
    fig, ax = plt.subplots(1, 3, figsize=(14, 3.8))
    ax[0].step(main["time"], main["force"], where="post", color="k")
    ax[0].set(xlabel="time [s]", ylabel="commanded grasp force [N]", title="grasp force (per finger)")
    for name, series in runs.items():
        style = {"main": dict(color="C0", lw=2.5, zorder=3), "point": dict(color="C3", lw=0.6, alpha=0.45, zorder=1)}
        ax[1].plot(series["time"], np.degrees(series["pitch"]), label=series["label"], **style.get(name, dict(lw=1, zorder=4)))
    ax[1].set(xlabel="time [s]", ylabel="spatula pitch [deg]", title="spatula pitch")
    ax[1].legend(fontsize=7, loc="lower left")
    ax[2].plot(main["capacity_time"], main["capacity"], label="torsional capacity M_max of both patches")
    ax[2].plot(main["capacity_time"], main["gravity_torque"], label="gravity torque m g d cos(pitch)")
    ax[2].axhline(mgd, color="0.6", lw=0.8, ls=":", label=f"m g d = {mgd:.4f} N m")
    ax[2].set_yscale("log")
    ax[2].set(xlabel="time [s]", ylabel="torque [N m]", title="slip when gravity torque > M_max")
    ax[2].legend(fontsize=7)
    for a in ax:
        a.grid(alpha=0.3)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)


def plot_tactile(path: Path, shots: dict) -> None:
    """A 2 x 2 grid: each pad (columns) at 16 N and at 1 N (rows), pressure as colour, shear as
    arrows, in the pad's face coordinates."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(8, 6.4))
    for r, force in enumerate(sorted(shots, reverse=True)):
        for c, shot in enumerate(shots[force]):
            sensor = shot["sensor"]
            w, h = sensor.face.size
            u, v = sensor.pixel_centers()
            ax = axes[r, c]
            im = ax.imshow(shot["pressure"] / 1e3, origin="lower", extent=[-w / 2 * 1e3, w / 2 * 1e3, -h / 2 * 1e3, h / 2 * 1e3],
                           cmap="inferno")
            shear = shot["shear"]
            ax.quiver(u * 1e3, v * 1e3, shear[..., 0], shear[..., 1], color="c", scale=None, width=0.004)
            total = shot["pressure"].sum() * sensor.pixel_area
            ax.set(title=f"{sensor.face.label}\n{force:g} N commanded: {total:.2f} N of pressure", xlabel="u [mm]",
                   ylabel="v [mm]")
            fig.colorbar(im, ax=ax, label="pressure [kPa]")
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=100, format="png"))
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="cpu", choices=["cpu", "vulkan", "cuda"])
    p.add_argument("--out", default="out/spatula", help="output folder")
    p.add_argument("--periods", type=float, default=3.0, help="periods of the 6 s square wave to simulate")
    p.add_argument("--resolutions", default="0.005,0.00125",
                   help="other handle resolutions [m] for the mesh study (the scene's 2.5 mm is the main run); '' for none")
    p.add_argument("--no-point", action="store_true", help="skip the point-contact comparison")
    p.add_argument("--no-gif", action="store_true")
    p.add_argument("--no-tactile", action="store_true", help="skip the tactile snapshot figure")
    p.add_argument("--no-onset", action="store_true", help="skip the slip-onset measurement (slip_onset)")
    p.add_argument("--gif-window", default="4.3,6.3", help="start,end [s] of the GIF")
    p.add_argument("--gif-fps", type=int, default=25)
    p.add_argument("--gif-camera", default="0.12,0.16,-0.06,0.0,0.0,-0.01",
                   help="camera eye and target [m], 6 numbers, relative to the spatula's origin at the first frame")
    args = p.parse_args(argv)
    th.init(args.arch)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    duration = args.periods * PERIOD_S

    frames: list = []
    viewer = None
    gif_from, gif_to = (float(x) for x in args.gif_window.split(","))
    camera = np.array([float(x) for x in args.gif_camera.split(",")])
    if camera.shape != (6,):
        p.error(f"--gif-camera {args.gif_camera!r}: 6 numbers (eye x, y, z, target x, y, z)")

    def frame(sim, t):
        nonlocal viewer
        if args.no_gif or not gif_from <= t <= gif_to or round(t / 0.01) % max(1, round(1 / (args.gif_fps * 0.01))):
            return
        if viewer is None:
            from taichi_hydro.viewer import Viewer

            sensors = [sim.tactile_sensor(f, grid=(20, 30), geometry=pad) for f, pad in zip(FINGERS, PADS)]
            viewer = Viewer(sim, size=(560, 400), tactile=sensors)
            grasp = sim.get_state()["position"][0, sim.scene.body_index(SPATULA)]
            viewer.look(grasp + camera[:3], grasp + camera[3:])
        frames.append(viewer.render())

    scene = study_scene()
    handle = next(g for g in scene.bodies[scene.body_index(SPATULA)].geometries if g.name == "handle")
    main_res = handle.contact.resolution
    runs = {"main": run_study(scene, duration, capacity_every=5, frame=frame, label=f"polygons, {main_res * 1e3:g} mm")}
    runs["main"]["label"] = f"polygons, handle mesh {main_res * 1e3:g} mm"
    if not args.no_point:
        runs["point"] = run_study(study_scene(contact="point"), duration, label="one point contact per patch")
        runs["point"]["label"] = "one point contact per patch"
    for res in [float(x) for x in args.resolutions.split(",") if x.strip()]:
        key = f"res_{res * 1e3:g}mm"
        runs[key] = run_study(study_scene(resolution=res), duration, label=f"polygons, {res * 1e3:g} mm")
        runs[key]["label"] = f"polygons, handle mesh {res * 1e3:g} mm"

    probe = closed_grasp(scene)
    mgd = float(gravity_torque(probe, np.zeros(1))[0])
    summary = {"m_g_d_Nm": mgd, "phases": phase_summary(runs["main"])}
    mesh = {}
    for key, series in runs.items():
        if key.startswith("res_"):
            diff = np.abs(np.degrees(np.asarray(series["pitch"]) - np.asarray(runs["main"]["pitch"])))
            mesh[key] = {"max_abs_pitch_difference_deg": float(diff.max()), "final_pitch_deg": float(np.degrees(series["pitch"][-1])),
                         "mean_contacts": float(np.mean(series["contacts"])), "steps_per_s": series["steps_per_s"]}
    summary["mesh_sensitivity_vs_main"] = mesh
    if not args.no_onset:
        onset = slip_onset(scene)
        summary["slip_onset"] = {k: v for k, v in onset.items() if k != "series"}
    if "point" in runs:
        high = [i for i, f in enumerate(runs["point"]["force"]) if f == HIGH_N and runs["point"]["time"][i] < DUTY * PERIOD_S]
        summary["point_contact"] = {"pitch_after_first_high_phase_deg": float(np.degrees(runs["point"]["pitch"][high[-1]])),
                                    "min_pitch_deg": float(np.degrees(np.min(runs["point"]["pitch"])))}
    print(json.dumps(summary, indent=1))

    plot_study(out / "spatula_fig10.png", runs, mgd)
    record = {"scene": str(SCENE.relative_to(ROOT)), "dt_s": scene.dt, "schedule": {"high_N": HIGH_N, "low_N": LOW_N,
              "period_s": PERIOD_S, "duty": DUTY}, "summary": summary,
              "runs": {k: {kk: vv for kk, vv in v.items()} for k, v in runs.items()}}
    atomic_write(out / "spatula_series.json", lambda tmp: tmp.write_text(json.dumps(record)))
    if frames:
        from taichi_hydro.viewer import write_frames

        write_frames(out / "spatula.gif", frames, fps=args.gif_fps)
    if not args.no_tactile:
        plot_tactile(out / "spatula_tactile.png", tactile_snapshots(scene))
    print(f"wrote {', '.join(sorted(x.name for x in out.iterdir()))} in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
