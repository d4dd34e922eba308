"""Tier 3: Drake's own hydroelastic meshes (shared/reference/meshes, exported from Drake 1.51.1),
loaded as tet meshes with their given pressures, reproduce Drake's ComputeContactSurfaces:
face count, area and force to 1e-5 relative."""

import json

import meshio
import numpy as np
import pytest

import taichi_hydro as th

from conftest import REFERENCE

SCENES = [
    "a_sphere_rigid_halfspace_d1mm",
    "a_sphere_rigid_halfspace_d2mm",
    "a_sphere_rigid_halfspace_d5mm",
    "a_sphere_rigid_halfspace_d10mm",
    "a_sphere_rigid_halfspace_d20mm",
    "a_sphere_rigid_halfspace_d5mm_rh0.04",
    "a_sphere_rigid_halfspace_d5mm_rh0.01",
    "a_sphere_rigid_halfspace_d5mm_rh0.005",
    "a_sphere_rigid_halfspace_d5mm_rotated",
    "c_box_on_rigid_box_flat",
]


def reference_scene(spec, mesh_files, tmp_path):
    """Our scene for one of Drake's: every geometry becomes a body posed like it."""
    bodies = []
    for g in spec["spec"]["geometries"]:
        body = {
            "name": g["name"],
            "type": "static" if g["body"] == "world" else "kinematic",
            "position": g["pose"]["xyz"],
            "orientation": g["pose"]["quat_wxyz"],
        }
        mesh = mesh_files.get(g["name"])
        if g["shape"]["type"] == "halfspace" and mesh is None:
            body["shape"] = {"type": "halfspace"}
        elif g["compliance"] == "compliant":
            data = json.loads((REFERENCE / mesh["file"]).read_text())
            path = tmp_path / f"{g['name']}.vtk"
            meshio.write(str(path), meshio.Mesh(np.array(data["vertices"]), [("tetra", np.array(data["tets"]))],
                                                point_data={"pressure": np.array(data["pressure_at_vertices"])}))
            body["shape"] = {"type": "tetmesh", "file": str(path)}
            body["contact"] = {"hydro": "compliant", "modulus": g["hydroelastic_modulus"]}
        else:
            data = json.loads((REFERENCE / mesh["file"]).read_text())
            path = tmp_path / f"{g['name']}.obj"
            lines = [f"v {x!r} {y!r} {z!r}" for x, y, z in data["vertices"]]
            lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in data["triangles"]]
            path.write_text("\n".join(lines) + "\n")
            body["shape"] = {"type": "mesh", "file": str(path)}
        bodies.append(body)
    return th.scene_from_dict({"body": bodies}, source=spec["name"])


@pytest.mark.parametrize("name", SCENES)
def test_drake_meshes_reproduce_drake_surfaces(arch, tol, reference, tmp_path, name):
    spec = next(s for s in reference["static_scenes"] if s["name"] == name)
    mesh_files = {k: v for k, v in spec["hydroelastic_meshes"].items() if v is not None}
    sim = th.Simulator(reference_scene(spec, mesh_files, tmp_path))
    (ours,) = sim.contact_surfaces()
    (drake,) = spec["results"]["polygon"]["surfaces"]
    assert ours.faces == drake["num_faces"]
    assert ours.area == pytest.approx(drake["total_area"], rel=tol.rel)
    force = np.array(drake["force_by_name"][ours.body_b])
    np.testing.assert_allclose(ours.force, force, rtol=tol.rel, atol=tol.rel * np.abs(force).max())
    # A vertex pressure is grad p . x with x rounded to float32: relative error ~ (position
    # rounding) / (penetration depth).
    scale = max(np.abs(g.tets.vertices).max() for g in sim.model.host.geometries if g.tets is not None)
    depth = spec["spec"]["penetration_or_overlap_m"]
    rel_p = tol.rel + tol.pos * scale / depth
    assert ours.max_pressure == pytest.approx(drake["max_pressure_vertex"], rel=rel_p)
    assert ours.mean_pressure == pytest.approx(drake["mean_pressure_area_weighted"], rel=rel_p)
    np.testing.assert_allclose(ours.centroid, drake["centroid_area_weighted"], atol=10 * tol.pos * scale)
