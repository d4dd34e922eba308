"""Tetrahedral meshers from PyPI on non-convex closed surfaces: time, size, element quality,
volume and boundary fidelity, so that the mesher behind compliant non-convex meshes is chosen by
measurement (taichi_hydro/geometry/tetwild.py uses the winner).

    python -m bench.tetrahedralize --out bench/results/tetrahedralize_2core_epyc.json
    python -m bench.tetrahedralize --summary bench/results/tetrahedralize_2core_epyc.json

pytetwild is a dependency of taichi-hydro; the others are measured only, installed by hand
(pip install tetgen wildmeshing gmsh): their licences rule them out as dependencies of a
BSD-3-Clause package, except wildmeshing, which has no aarch64 wheel.

Meshers (each single-threaded, each run in a fresh process with a time limit):
  pytetwild    fTetWild through taichi_hydro.geometry.tetwild (MPL-2.0), envelope 1e-3 x the
               bounding-box diagonal (fTetWild's default)
  pytetwild_fine  the same with an envelope of 2.5e-4 x the diagonal
  wildmeshing  fTetWild through the wildmeshing wheel (MPL-2.0)
  tetgen       TetGen 1.6 through the tetgen wheel (wrapper MIT, TetGen AGPL-3.0), -pq1.414/10 with
               a volume bound of a regular tet of the target edge (-a)
  gmsh         gmsh 4 (GPL-2.0+), the input triangles kept as the boundary, Delaunay inside with
               Mesh.MeshSizeMax = target edge
  gmsh_remesh  the same after gmsh classified, reparametrised and remeshed the surface at that size
Shapes (trimesh, metres): a torus, a cup (thin wall, long input triangles), a five-point star
prism, a thin L bracket (3 mm). Target edge lengths: the bounding-box diagonal over 8, 16, 32.

Per run: wall time, vertices, tets; quality as the minimum dihedral angle (its minimum and 1st
percentile over tets, the share of slivers: tets whose minimum dihedral angle is below 10 deg)
and the radius ratio 3 r_in / r_circ (1 for a regular tet; minimum and mean); relative volume
error against the surface's enclosed volume; the boundary's distance from the input surface both
ways (a Hausdorff distance estimated at vertices and triangle centroids), relative to the
diagonal; the share of tets whose four vertices lie on the boundary (the distance field splits
them); whether the boundary is a closed manifold, and every tet is non-degenerate with one
orientation. pytetwild runs twice per case to see whether it repeats itself.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import sys
import time
import traceback

import numpy as np

from taichi_hydro.output import write_text

TIME_LIMIT_S = 300.0
EDGE_DIVISORS = (8, 16, 32)
MESHERS = ("pytetwild", "pytetwild_fine", "wildmeshing", "tetgen", "gmsh", "gmsh_remesh")


# ---------------------------------------------------------------- shapes

def _prism(outline: np.ndarray, cap: np.ndarray, height: float):
    """A closed prism over a 2D outline (n, 2) whose cap triangulation (k, 3) is counter-clockwise."""
    import trimesh

    return trimesh.creation.extrude_triangulation(outline, cap, height)


def shapes() -> dict:
    """name -> trimesh.Trimesh, closed and outward."""
    import trimesh

    out = {"torus": trimesh.creation.torus(0.05, 0.015)}
    # Cup: a revolved profile (outer radius 40 mm, height 90 mm, wall 4 mm, floor 6 mm).
    profile = np.array([[0.0, 0.0], [0.040, 0.0], [0.040, 0.090], [0.036, 0.090], [0.036, 0.006], [0.0, 0.006]])
    out["cup"] = trimesh.creation.revolve(profile, sections=64)
    # Five-point star prism: tips at 50 mm, notches at 20 mm, 30 mm high.
    k = np.arange(10)
    r = np.where(k % 2 == 0, 0.050, 0.020)
    star = np.column_stack([r * np.cos(k * math.pi / 5), r * np.sin(k * math.pi / 5)])
    outline = np.vstack([[0.0, 0.0], star])
    cap = np.array([[0, 1 + i, 1 + (i + 1) % 10] for i in range(10)])
    out["star"] = _prism(outline, cap, 0.030)
    # L bracket: legs 60 mm, 3 mm thick, 40 mm deep (fan from the inner corner's opposite vertex).
    ell = np.array([[0, 0], [0.060, 0], [0.060, 0.003], [0.003, 0.003], [0.003, 0.060], [0, 0.060]])
    out["bracket"] = _prism(ell, np.array([[0, 1, 2], [0, 2, 3], [0, 3, 4], [0, 4, 5]]), 0.040)
    for name, mesh in out.items():
        assert mesh.is_watertight and mesh.volume > 0, name
    return out


# ---------------------------------------------------------------- meshers

def _pytetwild(v, f, h, envelope_rel):
    from taichi_hydro.geometry.tetwild import tetwild

    return tetwild(v, f, h, envelope_rel * np.linalg.norm(np.ptp(v, axis=0)))


def _wildmeshing(v, f, h):
    import wildmeshing

    diagonal = float(np.linalg.norm(np.ptp(v, axis=0)))
    t = wildmeshing.Tetrahedralizer(stop_quality=10, max_its=80, max_threads=1, epsilon=1e-3, edge_length_r=h / diagonal,
                                    coarsen=False)
    t.set_log_level(6)
    t.set_mesh(v, f.astype(np.int32))
    t.tetrahedralize()
    out = t.get_tet_mesh()
    return out[0], out[1]


def _tetgen(v, f, h):
    import tetgen

    g = tetgen.TetGen(v, f.astype(np.int32))
    out = g.tetrahedralize(quality=True, minratio=1.414, mindihedral=10.0, fixedvolume=True,
                           maxvolume=h**3 / (6.0 * math.sqrt(2.0)))  # the bound applies only with fixedvolume (-a)
    return out[0], out[1]


def _gmsh(v, f, h, remesh: bool):
    """remesh False: the input triangles are the boundary; True: the surface is classified
    (40 deg feature angle), reparametrised and remeshed at the target size too."""
    import gmsh

    gmsh.initialize(["-noenv"], readConfigFiles=False)
    try:
        gmsh.option.setNumber("General.Terminal", 0)
        gmsh.option.setNumber("General.NumThreads", 1)
        gmsh.model.add("solid")
        s = gmsh.model.addDiscreteEntity(2)
        gmsh.model.mesh.addNodes(2, s, np.arange(1, len(v) + 1), v.ravel())
        gmsh.model.mesh.addElementsByType(s, 2, [], (f + 1).ravel())
        surfaces = [s]
        if remesh:
            gmsh.model.mesh.classifySurfaces(math.radians(40.0), True, True, math.pi)
            gmsh.model.mesh.createGeometry()
            surfaces = [e[1] for e in gmsh.model.getEntities(2)]
        gmsh.model.geo.addVolume([gmsh.model.geo.addSurfaceLoop(surfaces)])
        gmsh.model.geo.synchronize()
        gmsh.option.setNumber("Mesh.MeshSizeMax", h)
        gmsh.option.setNumber("Mesh.Optimize", 1)
        gmsh.model.mesh.generate(3)
        tags, coords, _ = gmsh.model.mesh.getNodes()
        _, nodes = gmsh.model.mesh.getElementsByType(4)
        index = np.empty(int(tags.max()) + 1, dtype=np.int64)
        index[tags.astype(np.int64)] = np.arange(len(tags))
        return coords.reshape(-1, 3), index[nodes.astype(np.int64).reshape(-1, 4)]
    finally:
        gmsh.finalize()


def run_mesher(name: str, v: np.ndarray, f: np.ndarray, h: float):
    return {
        "pytetwild": lambda: _pytetwild(v, f, h, 1e-3),
        "pytetwild_fine": lambda: _pytetwild(v, f, h, 2.5e-4),
        "wildmeshing": lambda: _wildmeshing(v, f, h),
        "tetgen": lambda: _tetgen(v, f, h),
        "gmsh": lambda: _gmsh(v, f, h, remesh=False),
        "gmsh_remesh": lambda: _gmsh(v, f, h, remesh=True),
    }[name]()


def library_info() -> dict:
    """Installed version and licence of each mesher's distribution."""
    import importlib.metadata as md

    licences = {"pytetwild": "MPL-2.0", "wildmeshing": "MPL-2.0 (bundles LGPL parts of geogram)",
                "tetgen": "wrapper MIT; TetGen AGPL-3.0 (or commercial)", "gmsh": "GPL-2.0-or-later"}
    out = {}
    for dist, licence in licences.items():
        try:
            out[dist] = {"version": md.version(dist), "license": licence}
        except md.PackageNotFoundError:
            out[dist] = {"version": None, "license": licence}
    return out


# ---------------------------------------------------------------- measures

_FACES = np.array([[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]])  # face k opposite vertex k, outward


def tet_quality(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(minimum dihedral angle [deg], radius ratio 3 r_in / r_circ) of each positive tet (m, 4, 3)."""
    faces = x[:, _FACES]  # (m, 4, 3, 3)
    n = np.cross(faces[:, :, 1] - faces[:, :, 0], faces[:, :, 2] - faces[:, :, 0])
    area = 0.5 * np.linalg.norm(n, axis=2)
    n = n / np.linalg.norm(n, axis=2, keepdims=True)
    pairs = [(a, b) for a in range(4) for b in range(a + 1, 4)]
    cos = np.stack([np.einsum("ij,ij->i", n[:, a], n[:, b]) for a, b in pairs], axis=1)
    dihedral = np.degrees(np.pi - np.arccos(np.clip(cos, -1.0, 1.0))).min(axis=1)
    vol = np.einsum("ij,ij->i", x[:, 1] - x[:, 0], np.cross(x[:, 2] - x[:, 0], x[:, 3] - x[:, 0])) / 6.0
    r_in = 3.0 * vol / area.sum(axis=1)
    length = lambda i, j: np.linalg.norm(x[:, i] - x[:, j], axis=1)  # noqa: E731
    aA, bB, cC = length(0, 1) * length(2, 3), length(0, 2) * length(1, 3), length(0, 3) * length(1, 2)
    product = (aA + bB + cC) * (aA + bB - cC) * (aA - bB + cC) * (-aA + bB + cC)
    r_circ = np.sqrt(np.maximum(product, 0.0)) / (24.0 * vol)
    return dihedral, 3.0 * r_in / r_circ


def measure(surface_v, surface_f, v, t) -> dict:
    from taichi_hydro.errors import MeshError
    from taichi_hydro.geometry.mesh import TriMesh, boundary_faces, tet_signed_volumes
    from taichi_hydro.geometry.meshfile import distance_to_surface

    v = np.asarray(v, dtype=np.float64)
    t = np.asarray(t, dtype=np.int64)
    diagonal = float(np.linalg.norm(np.ptp(surface_v, axis=0)))
    vol = tet_signed_volumes(v, t)
    sign = 1.0 if np.sum(vol > 0) >= np.sum(vol < 0) else -1.0
    tiny = 1e-12 * diagonal**3
    out = {"vertices": len(v), "tets": len(t), "one_orientation": bool(np.all(sign * vol > tiny)),
           "degenerate_tets": int(np.sum(np.abs(vol) <= tiny))}
    t = np.where((vol < 0)[:, None], t[:, [0, 2, 1, 3]], t)  # every tet positive: fTetWild writes them negative
    dihedral, ratio = tet_quality(v[t])
    out.update(min_dihedral_deg=float(dihedral.min()), p01_dihedral_deg=float(np.percentile(dihedral, 1)),
               sliver_share=float(np.mean(dihedral < 10.0)), min_radius_ratio=float(ratio.min()),
               mean_radius_ratio=float(ratio.mean()))
    surface_volume = TriMesh(surface_v, surface_f).volume()
    out["volume_rel_error"] = float(abs(np.abs(vol).sum() - surface_volume) / surface_volume)
    try:
        faces = boundary_faces(t)
    except MeshError as exc:  # recorded in the row instead of stopping the measure
        faces, out["boundary_closed_manifold"] = np.zeros((0, 3), dtype=np.int64), f"no: {exc}"
    else:
        try:
            TriMesh(v, faces).validate("boundary")
            out["boundary_closed_manifold"] = True
        except MeshError as exc:
            out["boundary_closed_manifold"] = f"no: {exc}"
    on_boundary = np.zeros(len(v), dtype=bool)
    on_boundary[np.unique(faces)] = True
    out["all_boundary_tet_share"] = float(np.mean(np.all(on_boundary[t], axis=1)))
    if len(faces):
        out_points = np.vstack([v[np.unique(faces)], v[faces].mean(axis=1)])
        in_points = np.vstack([surface_v, surface_v[surface_f].mean(axis=1)])
        d_out = distance_to_surface(out_points, surface_v, surface_f).max()
        d_in = distance_to_surface(in_points, v, faces).max()
        out.update(boundary_to_input_rel=float(d_out / diagonal), input_to_boundary_rel=float(d_in / diagonal),
                   hausdorff_m=float(max(d_out, d_in)))
    edges = np.linalg.norm(v[t[:, [1, 2, 3, 2, 3, 3]]] - v[t[:, [0, 0, 0, 1, 1, 2]]], axis=2)
    out["mean_edge_m"] = float(edges.mean())
    return out


# ---------------------------------------------------------------- runner

def _child(conn, mesher, v, f, h):
    import os

    import tempfile

    null = os.open(os.devnull, os.O_WRONLY)  # the meshers' own logs would bury the rows
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.chdir(tempfile.mkdtemp(prefix="bench_tetrahedralize_"))  # wildmeshing writes __tracked_surface.stl here
    try:
        t0 = time.perf_counter()
        mv, mt = run_mesher(mesher, v, f, h)
        conn.send(("ok", time.perf_counter() - t0, np.asarray(mv), np.asarray(mt)))
    except BaseException as exc:  # reported in the row, not raised
        conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=3), None))
    finally:
        conn.close()


def timed_run(mesher: str, v: np.ndarray, f: np.ndarray, h: float) -> tuple:
    """(status, seconds or message, vertices, tets) from a fresh process, killed after TIME_LIMIT_S."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(child, mesher, v, f, h))
    p.start()
    child.close()
    if not parent.poll(TIME_LIMIT_S):
        p.kill()
        p.join()
        return ("timeout", TIME_LIMIT_S, None, None)
    try:
        result = parent.recv()
    except EOFError:
        result = ("crashed", f"exit code {p.exitcode}", None, None)
    p.join()
    return result


def summary(path: str) -> str:
    """Markdown tables of a results file: each mesher over all cases (time range, the worst of
    each measure), then every case (first runs)."""
    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    runs = [r for r in rows if "shape" in r]
    out = ["| mesher | licence | runs ok | time [s] | min dihedral [deg] | slivers (< 10 deg), worst | "
           "boundary distance [mm], worst | volume error, worst |", "|---|---|---|---|---|---|---|---|"]
    licences = rows[0].get("libraries", {})
    for mesher in dict.fromkeys(r["mesher"] for r in runs):
        ok = [r for r in runs if r["mesher"] == mesher and r["status"] == "ok"]
        dist = mesher.split("_")[0]
        if not ok:
            out.append(f"| {mesher} | {licences.get(dist, {}).get('license', '')} | 0 of {sum(r['mesher'] == mesher for r in runs)} | | | | | |")
            continue
        out.append(f"| {mesher} | {licences.get(dist, {}).get('license', '')} | {len(ok)} of {sum(r['mesher'] == mesher for r in runs)} | "
                   f"{min(r['seconds'] for r in ok):.2f}-{max(r['seconds'] for r in ok):.2f} | "
                   f"{min(r['min_dihedral_deg'] for r in ok):.1f} | {100 * max(r['sliver_share'] for r in ok):.2f} % | "
                   f"{1000 * max(r.get('hausdorff_m', math.nan) for r in ok):.3f} | "
                   f"{max(r['volume_rel_error'] for r in ok):.1e} |")
    out += ["", "| shape | target edge [mm] | mesher | time [s] | tets | min dihedral [deg] | slivers (< 10 deg) | "
            "mean radius ratio | volume error | boundary distance [mm] |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        if r.get("repeat", 0) != 0:
            continue
        head = f"| {r['shape']} | {1000 * r['target_edge_m']:.1f} | {r['mesher']} |"
        if r["status"] != "ok":
            out.append(f"{head} {r['status']} | | | | | | |")
            continue
        out.append(f"{head} {r['seconds']:.2f} | {r['tets']} | {r['min_dihedral_deg']:.1f} | {100 * r['sliver_share']:.2f} % | "
                   f"{r['mean_radius_ratio']:.2f} | {r['volume_rel_error']:.1e} | {1000 * r.get('hausdorff_m', math.nan):.3f} |")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="write one JSON object per line here (atomically)")
    p.add_argument("--summary", metavar="RESULTS", help="print a Markdown table of a results file and stop")
    p.add_argument("--meshers", default=",".join(MESHERS))
    p.add_argument("--shapes", default="torus,cup,star,bracket")
    p.add_argument("--divisors", default=",".join(map(str, EDGE_DIVISORS)), help="target edge = diagonal / each")
    args = p.parse_args(argv)
    if args.summary:
        print(summary(args.summary))
        return 0
    from bench.machine import machine

    rows = [{"machine": machine(), "libraries": library_info(), "time_limit_s": TIME_LIMIT_S}]
    print(json.dumps(rows[0]), flush=True)
    all_shapes = shapes()
    for shape in args.shapes.split(","):
        mesh = all_shapes[shape]
        v, f = np.asarray(mesh.vertices, dtype=np.float64), np.asarray(mesh.faces, dtype=np.int64)
        diagonal = float(np.linalg.norm(np.ptp(v, axis=0)))
        for divisor in map(int, args.divisors.split(",")):
            h = diagonal / divisor
            for mesher in args.meshers.split(","):
                repeats = 2 if mesher == "pytetwild" else 1
                previous = None
                for repeat in range(repeats):
                    status, seconds, mv, mt = timed_run(mesher, v, f, h)
                    row = {"shape": shape, "input_triangles": len(f), "diagonal_m": diagonal, "target_edge_m": h,
                           "mesher": mesher, "repeat": repeat, "status": status}
                    if status == "ok":
                        row["seconds"] = seconds
                        row.update(measure(v, f, mv, mt))
                        if previous is not None:
                            row["same_as_first_run"] = bool(previous[0].shape == mv.shape and previous[1].shape == mt.shape
                                                            and np.array_equal(previous[0], mv) and np.array_equal(previous[1], mt))
                        previous = (mv, mt)
                    else:
                        row["detail"] = seconds
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    if args.out:
        write_text(args.out, "".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
