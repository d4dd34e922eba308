"""Rigid bodies resting on rigid bodies against the twin's modulus ([sim] rigid_modulus): the
measurements behind scene.RIGID_MODULUS.

    python -m bench.rigid_modulus --arch cpu --out bench/results/rigid_modulus_2core_epyc.json

Every body is rigid; each pair of two rigid geometries goes through the compliant twin of one
side (geometry.twin) with modulus E. Cases: a 10 cm box and a 5 cm sphere (mesh 1 cm, resting
on a face) on a rigid half-space, on a static rigid box table (1 m x 1 m x 0.1 m), the sphere
on the box on the half-space (each other), and the sphere balanced on its bottom vertex on
the half-space (a point contact: the twin's force grows as E d^3 there, not E d). Each case runs two worlds, the dynamic bodies 1 kg and
100 kg (set_parameters), at dt = 1 ms and 10 ms, from the bodies just touching at rest;
`--settle` seconds, then `--window` steps recorded. Per world and contact: the penetration
(how far the upper body sank into the lower one from the start, where they just touched, mean
over the window; a sphere balanced on its vertex that starts to tip over sinks further), the
solved contact
force over the weight it carries (mean, and the largest deviation from 1 in a step), the
jitter (standard deviation of the upper body's height over the window, its largest speed
|v| + reach |w| in a step) and its sideways drift over the window. One JSON line per case,
world and contact."""

from __future__ import annotations

import json
import sys

from taichi_hydro.output import append_text

from . import cli

G = 9.81
BOX, RADIUS = 0.1, 0.05  # m: box edge, sphere radius
MASSES = (1.0, 100.0)  # kg, one world each

GROUND = {"name": "ground", "type": "static", "shape": {"type": "halfspace"}}
TABLE = {"name": "table", "type": "static", "position": [0.0, 0.0, -0.05], "shape": {"type": "box", "size": [1.0, 1.0, 0.1]}}


def box(z: float) -> dict:
    return {"name": "box", "mass": 1.0, "position": [0.0, 0.0, z], "shape": {"type": "box", "size": [BOX, BOX, BOX]}}


FACE_DOWN = [0.8880738339771153, 0.3250575836718682, -0.3250575836718682, 0.0]
"""q_WB turning the body's (1, 1, 1) diagonal onto +z: a sphere mesh (refined octahedron) then
rests on the face at the centre of an octant, whose normal is that diagonal, instead of on
the vertex (0, 0, -1), an unstable rest from which it tips over."""


def sphere(z: float, face_down: bool = True) -> dict:
    """The sphere (mesh 1 cm: 512 faces), on a face (FACE_DOWN) or on its bottom vertex. Its
    lowest point is then the face's plane, R cos(a) below the centre (a: the face's angular
    radius), or the vertex, R below: `z` is the centre's height for the vertex; the face-down
    sphere starts at the height where its face just touches (z - R + R cos(a), see
    face_drop)."""
    body = {"name": "sphere", "mass": 1.0, "position": [0.0, 0.0, z - (face_drop() if face_down else 0.0)],
            "shape": {"type": "sphere", "radius": RADIUS}, "contact": {"resolution": 0.01}}
    if face_down:
        body["orientation"] = FACE_DOWN
    return body


def face_drop() -> float:
    """R minus the distance from the centre to the plane of the sphere mesh's face at the
    centre of an octant [m]."""
    import numpy as np

    from taichi_hydro.geometry.primitives import rigid_sphere

    mesh = rigid_sphere(RADIUS, 0.01)
    x = mesh.vertices[mesh.triangles]
    n = mesh.normals()
    diagonal = np.ones(3) / np.sqrt(3.0)
    face = int(np.argmax(n @ diagonal))
    return RADIUS - float(n[face] @ x[face, 0])


CASES = {  # name: (bodies, contacts as (lower, upper) body names, from the bottom up)
    "box_on_halfspace": ([GROUND, box(0.5 * BOX)], [("ground", "box")]),
    "sphere_on_halfspace": ([GROUND, sphere(RADIUS)], [("ground", "sphere")]),
    "sphere_vertex_on_halfspace": ([GROUND, sphere(RADIUS, face_down=False)], [("ground", "sphere")]),
    "box_on_table": ([TABLE, box(0.5 * BOX)], [("table", "box")]),
    "sphere_on_table": ([TABLE, sphere(RADIUS)], [("table", "sphere")]),
    "sphere_on_box": ([GROUND, box(0.5 * BOX), sphere(BOX + RADIUS)], [("ground", "box"), ("box", "sphere")]),
}


def make_scene(case: str, dt: float, modulus: float):
    import taichi_hydro as th

    bodies, _ = CASES[case]
    return th.scene_from_dict({"sim": {"dt": dt, "rigid_modulus": modulus}, "body": bodies}, source=case)


def run_case(case: str, dt: float, modulus: float, settle_s: float, window: int) -> list[dict]:
    """One simulator of two worlds (1 kg and 100 kg bodies); rows per world and contact."""
    import warnings

    import numpy as np

    import taichi_hydro as th

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", th.HydroWarning)  # the sinking advice at the lowest moduli
        sim = th.Simulator(make_scene(case, dt, modulus), worlds=len(MASSES))
    names = sim.body_names
    dynamic = np.array([sim.model.host.body_kind[b] == 0 for b in range(len(names))])
    mass = np.where(dynamic[None, :], np.array(MASSES)[:, None], np.nan)
    sim.set_parameters(mass=mass)
    z0 = sim.get_state()["position"][:, :, 2].copy()
    sim.step(max(1, round(settle_s / dt)))
    pair_names, _ = sim.pair_forces()
    z, speed, xy, force, iterations = [], [], [], [], []
    reach = sim.model.host.body_reach
    for _ in range(window):
        sim.step(1)
        s = sim.get_state()
        z.append(s["position"][:, :, 2])
        xy.append(s["position"][:, :, :2])
        speed.append(np.linalg.norm(s["velocity"], axis=2) + reach[None] * np.linalg.norm(s["angular_velocity"], axis=2))
        force.append(sim.pair_forces()[1][:, :, 2])
        iterations.append(sim.solver_stats()["iterations"])
    z, speed, xy, force, iterations = map(np.array, (z, speed, xy, force, iterations))
    status = sim.world_status()
    rows = []
    for w, m in enumerate(MASSES):
        for lower, upper in CASES[case][1]:
            lo, up = names.index(lower), names.index(upper)
            column = pair_names.index((lower, upper))
            carried = m * G * sum(1 for b in range(up, len(names)) if dynamic[b])  # the bodies above, stacked
            sink_up = z0[w, up] - z[:, w, up]
            sink_lo = (z0[w, lo] - z[:, w, lo]) if dynamic[lo] else 0.0
            ratio = force[:, w, column] / carried
            rows.append({
                "case": case, "contact": f"{lower}-{upper}", "dt_s": dt, "rigid_modulus_pa": modulus, "mass_kg": m,
                "world_status": int(status[w]),
                "penetration_m": float(np.mean(sink_up - sink_lo)),
                "force_over_weight_mean": float(np.mean(ratio)),
                "force_over_weight_max_dev": float(np.max(np.abs(ratio - 1.0))),
                "height_std_m": float(np.std(z[:, w, up])),
                "speed_max_m_s": float(speed[:, w, up].max()),
                "drift_xy_m": float(np.linalg.norm(xy[-1, w, up] - xy[0, w, up])),
                "iterations_mean": float(iterations[:, w].mean()),
            })
    return rows


def main(argv=None) -> int:
    p = cli.parser("bench.rigid_modulus", __doc__)
    p.add_argument("--arch", default="cpu")
    p.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {list(CASES)}")
    p.add_argument("--moduli", default="1e6,1e7,1e8,1e9,1e10,1e11,1e12,1e13,1e14", help="rigid_modulus values [Pa]")
    p.add_argument("--dts", default="1e-3,1e-2", help="time steps [s]")
    p.add_argument("--settle", type=float, default=0.5, help="simulated seconds before the window [s]")
    p.add_argument("--window", type=int, default=200, help="steps recorded")
    p.add_argument("--out", help="append the JSON lines to this file")
    args = p.parse_args(argv)
    import taichi_hydro as th

    th.init(args.arch)
    rows = []
    for case in args.cases.split(","):
        for dt in (float(x) for x in args.dts.split(",")):
            for modulus in (float(x) for x in args.moduli.split(",")):
                for row in run_case(case, dt, modulus, args.settle, args.window):
                    rows.append(row)
                    print(f"{case:20s} {row['contact']:14s} dt {dt:.0e} E {modulus:.0e} m {row['mass_kg']:5.0f}: "
                          f"pen {row['penetration_m']:.3e} m, F/W {row['force_over_weight_mean']:.6f} "
                          f"(max dev {row['force_over_weight_max_dev']:.1e}), z std {row['height_std_m']:.1e} m, "
                          f"|v| max {row['speed_max_m_s']:.1e} m/s, drift {row['drift_xy_m']:.1e} m, "
                          f"it {row['iterations_mean']:.1f}, status {row['world_status']}", file=sys.stderr)
    text = "".join(json.dumps(row) + "\n" for row in rows)
    if args.out:
        append_text(args.out, text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
