"""Drake reference for taichi_hydro scenes: build a MultibodyPlant + SceneGraph diagram with
hydroelastic contact from a validated `taichi_hydro.Scene`, time Drake's contact-surface query,
and step a Drake Simulator for dynamic benchmarks.

Drake (`pip install drake`) is an optional benchmark dependency; taichi_hydro never imports it.
Units are SI throughout: m, kg, s, N, Pa. Quaternions are (w, x, y, z); z is up.

Mapping of one scene body (see `build`):
- static: geometry registered on Drake's world body at the pose (p_WB, q_WB);
- dynamic: a free RigidBody named like the scene body, geometry at its origin.
- kinematic: Drake has no prescribed-motion free body. A kinematic body at rest becomes a
  RigidBody welded to the world at its pose; in a continuous plant its contact with static and
  other resting kinematic geometry is re-allowed (Drake filters bodies welded together) so the
  contact query sees what ours sees; in a discrete plant it stays filtered, because both sides
  are immobile (no dynamics) and Drake 1.51's discrete solvers crash on such pairs. A moving
  kinematic body becomes a free body with nominal mass properties (`KINEMATIC_DENSITY`): fine
  for the contact query, refused by `simulate`.
- shapes: Sphere, Box (full edge lengths), Cylinder and Capsule (length along z, capsule length
  = cylindrical part), Ellipsoid, HalfSpace (z <= 0 of its frame, as ours); "mesh" -> rigid
  Mesh / compliant Convex; "tetmesh" (.vtk) -> Mesh.

Run `python bench/drake_scene.py [SCENE.toml ...]` to print Drake's contact surfaces for the
bundled scenes next to what `taichi-hydro contact SCENE --json` reports.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
from pydrake.common import MemoryFile
from pydrake.common.eigen_geometry import Quaternion
from pydrake.geometry import (
    AddCompliantHydroelasticProperties,
    AddCompliantHydroelasticPropertiesForHalfSpace,
    AddRigidHydroelasticProperties,
    Box,
    Capsule,
    CollisionFilterDeclaration,
    Convex,
    Cylinder,
    Ellipsoid,
    GeometrySet,
    HalfSpace,
    HydroelasticContactRepresentation,
    InMemoryMesh,
    Mesh,
    ProximityProperties,
    SceneGraph,
    Sphere,
)
from pydrake.math import RigidTransform
from pydrake.multibody.math import SpatialVelocity
from pydrake.multibody.plant import (
    AddMultibodyPlantSceneGraph,
    ContactModel,
    CoulombFriction,
    DiscreteContactApproximation,
    MultibodyPlant,
)
from pydrake.multibody.tree import RigidBody, RotationalInertia, SpatialInertia
from pydrake.systems.analysis import Simulator
from pydrake.systems.framework import Context, Diagram, DiagramBuilder

from taichi_hydro.geometry.mass import (
    UnitMassProperties,
    box_props,
    capsule_props,
    cylinder_props,
    ellipsoid_props,
    sphere_props,
    surface_props,
)
from taichi_hydro.geometry.mesh import TetMesh, TriMesh
from taichi_hydro.geometry.meshfile import is_convex, load_surface, load_tetmesh
from taichi_hydro.scene import Body, Contact, Scene, Shape

__all__ = ["KINEMATIC_DENSITY", "DrakeScene", "advance", "build", "simulate", "time_contact_surfaces"]

KINEMATIC_DENSITY = 1000.0
"""Nominal density of kinematic bodies [kg/m^3] (a scene gives them no mass; Drake needs one for
any RigidBody). A kinematic half-space gets 1 kg and 1 kg m^2 instead."""

_APPROXIMATIONS = {
    None: DiscreteContactApproximation.kTamsi,
    "tamsi": DiscreteContactApproximation.kTamsi,
    "sap": DiscreteContactApproximation.kSap,
    "lagged": DiscreteContactApproximation.kLagged,
    "similar": DiscreteContactApproximation.kSimilar,
}
_REPRESENTATIONS = {
    "polygon": HydroelasticContactRepresentation.kPolygon,
    "triangle": HydroelasticContactRepresentation.kTriangle,
}
_DRAKE_MESH_SUFFIXES = {".obj"}  # surface formats Drake reads for a rigid hydroelastic Mesh
_DRAKE_CONVEX_SUFFIXES = {".obj", ".gltf", ".vtk"}  # formats Drake reads for a Convex


@dataclass
class DrakeScene:
    """A scene converted to Drake.

    diagram: the built Diagram (MultibodyPlant + SceneGraph). plant, scene_graph: its systems.
    context: the diagram's root Context holding the scene's initial state.
    bodies: scene body name -> Drake RigidBody (static bodies map to the world body; resting
    kinematic bodies are welded to it).
    geometry_body: Drake GeometryId -> scene body name. body_order: name -> index in the scene.
    time_step: the plant's period [s] (0 = continuous). representation: contact-surface kind.
    fallback: True when the plant uses kHydroelasticWithFallback (some rigid-rigid pair).
    scene: the source Scene."""

    diagram: Diagram
    plant: MultibodyPlant
    scene_graph: SceneGraph
    context: Context
    bodies: dict[str, RigidBody]
    geometry_body: dict
    body_order: dict[str, int]
    time_step: float
    representation: HydroelasticContactRepresentation
    fallback: bool
    scene: Scene


# --------------------------------------------------------------------------- shapes


def _resolution_hint(shape: Shape, contact: Contact) -> float:
    """Drake's resolution hint [m]: the scene's `resolution`, else the shape's characteristic
    size: its (smallest) radius for round shapes, half the smallest edge of a box, and 1 m for
    shapes Drake does not tessellate (half-space, meshes), where the hint is ignored. (Scenes
    loaded from TOML already default round shapes to half their radius.)"""
    if contact.resolution is not None:
        return float(contact.resolution)
    if shape.type in ("sphere", "cylinder", "capsule", "ellipsoid"):
        return shape.characteristic_radius()
    if shape.type == "box":
        return 0.5 * min(shape.size)
    return 1.0


def _obj_text(surface: TriMesh) -> str:
    """A Wavefront OBJ document of a triangle mesh (1-based face indices)."""
    lines = [f"v {x:.17g} {y:.17g} {z:.17g}" for x, y, z in surface.vertices]
    lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in surface.triangles]
    return "\n".join(lines) + "\n"


def _scaled_surface(shape: Shape) -> TriMesh:
    """The closed surface of a "mesh" shape in its body frame [m], scale applied."""
    surface = load_surface(Path(shape.file))
    return TriMesh(surface.vertices * np.asarray(shape.scale), surface.triangles)


def _mesh_shape(shape: Shape, contact: Contact):
    """A "mesh" shape: rigid -> Drake Mesh (the file itself when Drake reads its format, else
    an in-memory OBJ of the same surface); compliant -> Drake Convex (Drake's compliant field
    on a surface mesh is the convex-hull fan, as ours). A non-convex compliant mesh has no
    Drake equivalent (Drake would silently use its hull)."""
    path, scale = Path(shape.file), np.asarray(shape.scale, dtype=float)
    if not contact.compliant:
        if path.suffix.lower() in _DRAKE_MESH_SUFFIXES:
            return Mesh(str(path), scale)
        text = _obj_text(_scaled_surface(shape))
        return Mesh(InMemoryMesh(mesh_file=MemoryFile(text, ".obj", path.name)), 1.0)
    surface = _scaled_surface(shape)
    if not is_convex(surface):
        raise NotImplementedError(
            f"{path}: a compliant non-convex surface mesh cannot be expressed in Drake (Drake's compliant "
            "Mesh from a surface file uses its convex hull); give a tetrahedral .vtk as a 'tetmesh' shape"
        )
    if path.suffix.lower() in _DRAKE_CONVEX_SUFFIXES:
        return Convex(str(path), scale)
    return Convex(surface.vertices.T.copy(), path.name, 1.0)


def _tetmesh_shape(shape: Shape, contact: Contact):
    """A "tetmesh" shape: Drake Mesh on the legacy .vtk file. Drake builds its own compliant
    field (E times the distance to the boundary over its maximum, like ours without splitting
    all-boundary tets) and cannot take a user-given "pressure" array."""
    path = Path(shape.file)
    if path.suffix.lower() != ".vtk":
        raise NotImplementedError(f"{path}: Drake reads tetrahedral meshes from legacy .vtk files only")
    if contact.compliant:
        _, _, pressure = load_tetmesh(path)
        if pressure is not None:
            raise NotImplementedError(
                f"{path}: Drake cannot use a given per-vertex 'pressure' field; it derives a compliant "
                "mesh's field from the distance to the boundary"
            )
    return Mesh(str(path), np.asarray(shape.scale, dtype=float))


def _drake_shape(shape: Shape, contact: Contact):
    """The Drake Shape of a scene shape, in the body frame (dimensions [m])."""
    t = shape.type
    if t == "sphere":
        return Sphere(shape.radius)
    if t == "box":
        return Box(*shape.size)
    if t == "cylinder":
        return Cylinder(shape.radius, shape.length)
    if t == "capsule":
        return Capsule(shape.radius, shape.length)
    if t == "ellipsoid":
        return Ellipsoid(*shape.radii)
    if t == "halfspace":
        return HalfSpace()
    if t == "mesh":
        return _mesh_shape(shape, contact)
    if t == "tetmesh":
        return _tetmesh_shape(shape, contact)
    raise NotImplementedError(f"shape type {t!r} has no Drake equivalent")


def _proximity_properties(shape: Shape, contact: Contact) -> ProximityProperties:
    """Hydroelastic properties: compliance with modulus E [Pa] (slab thickness H [m] for a
    compliant half-space), resolution hint [m], Coulomb friction mu (static = dynamic),
    Hunt-Crossley dissipation d [s/m] and, when positive, the hydroelastic margin [m]."""
    props = ProximityProperties()
    if not contact.compliant:
        AddRigidHydroelasticProperties(_resolution_hint(shape, contact), props)
    elif shape.type == "halfspace":
        AddCompliantHydroelasticPropertiesForHalfSpace(contact.slab_thickness, contact.modulus, props)
    elif contact.modulus is None:
        raise NotImplementedError("a compliant geometry without a modulus (field given per vertex) cannot be expressed in Drake")
    else:
        AddCompliantHydroelasticProperties(_resolution_hint(shape, contact), contact.modulus, props)
    props.AddProperty("material", "coulomb_friction", CoulombFriction(contact.friction, contact.friction))
    props.AddProperty("material", "hunt_crossley_dissipation", contact.dissipation)
    if contact.margin > 0.0:
        props.AddProperty("hydroelastic", "margin", contact.margin)
    return props


# --------------------------------------------------------------------------- bodies


def _unit_mass(shape: Shape) -> UnitMassProperties | None:
    """Unit-density mass properties of a shape in its body frame (None for a half-space)."""
    t = shape.type
    if t == "sphere":
        return sphere_props(shape.radius)
    if t == "box":
        return box_props(shape.size)
    if t == "cylinder":
        return cylinder_props(shape.radius, shape.length)
    if t == "capsule":
        return capsule_props(shape.radius, shape.length)
    if t == "ellipsoid":
        return ellipsoid_props(shape.radii)
    if t == "mesh":
        return surface_props(_scaled_surface(shape))
    if t == "tetmesh":
        vertices, tets, _ = load_tetmesh(Path(shape.file))
        mesh = TetMesh(vertices * np.asarray(shape.scale), tets, np.zeros(len(vertices)))
        return surface_props(mesh.surface())
    return None


def _spatial_inertia(body: Body) -> SpatialInertia:
    """Spatial inertia of a free body about its origin Bo, expressed in B: the scene's mass
    [kg] (or density [kg/m^3] x volume; `KINEMATIC_DENSITY` for kinematic bodies) and the
    shape's inertia about its centre of mass [kg m^2]."""
    unit = _unit_mass(body.shape)
    if unit is None:  # a kinematic half-space: mass properties never matter
        return SpatialInertia.MakeFromCentralInertia(1.0, np.zeros(3), RotationalInertia(1.0, 1.0, 1.0))
    if body.mass is not None:
        mass = body.mass
    else:
        mass = (body.density if body.density is not None else KINEMATIC_DENSITY) * unit.volume
    I = unit.inertia(mass)
    rot = RotationalInertia(I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2])
    return SpatialInertia.MakeFromCentralInertia(mass, np.asarray(unit.com_G, dtype=float), rot)


def _pose(p_WB, q_WB) -> RigidTransform:
    """X_WB from a position [m] and a (w, x, y, z) quaternion (normalised here)."""
    q = np.asarray(q_WB, dtype=float)
    q = q / np.linalg.norm(q)
    return RigidTransform(Quaternion(q[0], q[1], q[2], q[3]), np.asarray(p_WB, dtype=float))


def _is_welded(body: Body) -> bool:
    """A kinematic body at rest: Drake expresses it as a body welded to the world."""
    return body.type == "kinematic" and not any(body.v_WB) and not any(body.w_WB)


def _add_body(plant: MultibodyPlant, body: Body):
    """Add one scene body to the plant; returns (Drake body, GeometryId of its geometry)."""
    shape = _drake_shape(body.shape, body.contact)
    props = _proximity_properties(body.shape, body.contact)
    X_WB = _pose(body.p_WB, body.q_WB)
    if body.type == "static":
        return plant.world_body(), plant.RegisterCollisionGeometry(plant.world_body(), X_WB, shape, body.name, props)
    drake_body = plant.AddRigidBody(body.name, _spatial_inertia(body))
    if _is_welded(body):
        plant.WeldFrames(plant.world_frame(), drake_body.body_frame(), X_WB)
    else:
        plant.SetDefaultFloatingBaseBodyPose(drake_body, X_WB)
    return drake_body, plant.RegisterCollisionGeometry(drake_body, RigidTransform(), shape, body.name, props)


def _allow_welded_contacts(scene_graph: SceneGraph, scene: Scene, geometry_ids: dict) -> None:
    """Undo Drake's filter between geometries welded to the world (resting kinematic bodies)
    and the rest, as our engine only skips static-static pairs. Continuous plants only."""
    welded = [geometry_ids[b.name] for b in scene.bodies if _is_welded(b)]
    if welded:
        declaration = CollisionFilterDeclaration().AllowBetween(GeometrySet(welded), GeometrySet(list(geometry_ids.values())))
        scene_graph.collision_filter_manager().Apply(declaration)


def _needs_fallback(scene: Scene) -> bool:
    """True when two rigid geometries on different Drake bodies may touch: strict
    hydroelastic contact throws on such a pair, so the plant needs kHydroelasticWithFallback
    (point contact for that pair). Static bodies all live on the world body and are filtered."""
    rigid = [b for b in scene.bodies if not b.contact.compliant]
    return any(a.type != "static" or b.type != "static" for i, a in enumerate(rigid) for b in rigid[i + 1 :])


def _configure_plant(plant: MultibodyPlant, scene: Scene, time_step: float, approximation, hydro_representation: str) -> bool:
    """Contact model, surface representation, gravity [m/s^2] and discrete approximation
    (before Finalize). Returns whether the fallback contact model is used."""
    fallback = _needs_fallback(scene)
    plant.set_contact_model(ContactModel.kHydroelasticWithFallback if fallback else ContactModel.kHydroelastic)
    plant.set_contact_surface_representation(_REPRESENTATIONS[hydro_representation])
    plant.mutable_gravity_field().set_gravity_vector(np.asarray(scene.gravity, dtype=float))
    if time_step > 0.0:
        plant.set_discrete_contact_approximation(_APPROXIMATIONS[approximation])
    return fallback


def _set_initial_state(plant: MultibodyPlant, plant_context: Context, scene: Scene, bodies: dict) -> None:
    """Free-body poses and spatial velocities (w_WB [rad/s], v_WB [m/s] of Bo, in W)."""
    for body in scene.bodies:
        if body.type == "static" or _is_welded(body):
            continue
        drake_body = bodies[body.name]
        plant.SetFreeBodyPose(plant_context, drake_body, _pose(body.p_WB, body.q_WB))
        V_WB = SpatialVelocity(w=np.asarray(body.w_WB, dtype=float), v=np.asarray(body.v_WB, dtype=float))
        plant.SetFreeBodySpatialVelocity(plant_context, drake_body, V_WB)


def _check_options(time_step: float, approximation, hydro_representation: str) -> None:
    if time_step < 0.0:
        raise ValueError(f"time_step must be >= 0 s, got {time_step}")
    if approximation not in _APPROXIMATIONS:
        raise ValueError(f"approximation must be one of {list(_APPROXIMATIONS)}, got {approximation!r}")
    if approximation is not None and time_step == 0.0:
        raise ValueError("a discrete contact approximation needs a discrete plant (time_step > 0)")
    if hydro_representation not in _REPRESENTATIONS:
        raise ValueError(f"hydro_representation must be one of {list(_REPRESENTATIONS)}, got {hydro_representation!r}")


def _refuse_several_geometries(scene: Scene) -> None:
    """This harness maps a body to one Drake geometry at its origin, with the mass properties
    of that shape: NotImplementedError for a body with another number of geometries, a posed
    geometry or given inertia / centre of mass."""
    for body in scene.bodies:
        if len(body.geometries) != 1 or body.geometries[0].posed or body.inertia is not None \
                or body.center_of_mass is not None:
            raise NotImplementedError(f"{scene.source}: body '{body.name}': the Drake harness takes one shape at the body "
                                      "origin per body ([body.shape]), without inertia or center_of_mass")


def build(
    scene: Scene, time_step: float = 0.0, approximation: str | None = None, hydro_representation: str = "polygon"
) -> DrakeScene:
    """Convert a validated scene to a Drake diagram with hydroelastic contact.

    time_step [s]: 0 gives a continuous plant (enough for the static contact query); > 0 a
    discrete plant whose contact approximation is `approximation` in {None (= "tamsi"),
    "tamsi", "sap", "lagged", "similar"}. hydro_representation: "polygon" or "triangle".
    Raises NotImplementedError for what Drake cannot express (see the module docstring) and
    for bodies of several geometries (not mapped yet)."""
    _check_options(time_step, approximation, hydro_representation)
    _refuse_several_geometries(scene)
    builder = DiagramBuilder()
    plant, scene_graph = AddMultibodyPlantSceneGraph(builder, time_step)
    bodies, geometry_ids = {}, {}
    for body in scene.bodies:
        bodies[body.name], geometry_ids[body.name] = _add_body(plant, body)
    fallback = _configure_plant(plant, scene, time_step, approximation, hydro_representation)
    plant.Finalize()
    if time_step == 0.0:
        _allow_welded_contacts(scene_graph, scene, geometry_ids)
    diagram = builder.Build()
    context = diagram.CreateDefaultContext()
    _set_initial_state(plant, plant.GetMyMutableContextFromRoot(context), scene, bodies)
    return DrakeScene(
        diagram=diagram,
        plant=plant,
        scene_graph=scene_graph,
        context=context,
        bodies=bodies,
        geometry_body={g: name for name, g in geometry_ids.items()},
        body_order={b.name: i for i, b in enumerate(scene.bodies)},
        time_step=time_step,
        representation=_REPRESENTATIONS[hydro_representation],
        fallback=fallback,
        scene=scene,
    )


# --------------------------------------------------------------------------- simulation


def _refuse_moving_kinematic(scene: Scene) -> None:
    """Drake cannot prescribe a free body's motion: refuse a kinematic body with a velocity."""
    for body in scene.bodies:
        if body.type == "kinematic" and not _is_welded(body):
            raise NotImplementedError(
                f"body '{body.name}': a kinematic body with a prescribed nonzero velocity cannot be expressed in Drake"
            )


def advance(ds: DrakeScene, steps: int, settle: int = 0, observe=None) -> tuple[float, object]:
    """Advance a Drake Simulator from the scene's initial state by (settle + steps) *
    time_step [s] of simulated time; returns (the wall time of the last `steps` steps [s],
    construction, initialisation and the settling excluded; whatever observe(start, context)
    returns, or None). observe gets a copy of the context after the settling and the context
    at the end. Works on a copy of the context, so it can be called repeatedly."""
    if ds.time_step <= 0.0:
        raise ValueError("simulate needs a discrete plant: build(scene, time_step > 0, ...)")
    _refuse_moving_kinematic(ds.scene)
    context = ds.context.Clone()
    simulator = Simulator(ds.diagram, context)
    simulator.Initialize()
    if settle:
        simulator.AdvanceTo(context.get_time() + settle * ds.time_step)
    start_context = context.Clone() if observe is not None else None
    start = time.perf_counter()
    simulator.AdvanceTo(context.get_time() + steps * ds.time_step)
    wall = time.perf_counter() - start
    return wall, (observe(start_context, context) if observe is not None else None)


def simulate(ds: DrakeScene, steps: int, settle: int = 0) -> float:
    """The wall time [s] of `steps` steps after `settle` steps from the scene's initial state
    (advance without an observer)."""
    return advance(ds, steps, settle)[0]


# --------------------------------------------------------------------------- contact query


def _face_integrals(mesh, field, face: int) -> tuple[float, float, float]:
    """(area [m^2], integral of p over the face [N], largest vertex pressure [Pa]) of one
    planar face, exact for the linear field: fan triangles from vertex 0, each contributing
    area x mean of its vertex pressures."""
    element = mesh.element(face)
    ids = [element.vertex(k) for k in range(element.num_vertices())]
    x = np.array([mesh.vertex(v) for v in ids])
    p = np.array([field.EvaluateAtVertex(v) for v in ids])
    area = integral = 0.0
    for k in range(1, len(ids) - 1):
        a = 0.5 * np.linalg.norm(np.cross(x[k] - x[0], x[k + 1] - x[0]))
        area += a
        integral += a * (p[0] + p[k] + p[k + 1]) / 3.0
    return float(area), float(integral), float(p.max())


def _surface_summary(ds: DrakeScene, surface) -> dict:
    """One contact surface in our CLI's terms. body_a / body_b are ordered as in the scene;
    Drake's face normals point out of N into M, so the normal from a into b is +n when b is M
    and -n otherwise. force_on_b = sum over faces of n_ab * integral of p [N, world frame].
    Speculative faces (mean pressure < 0, margin only) are counted apart and left out."""
    name_m, name_n = ds.geometry_body[surface.id_M()], ds.geometry_body[surface.id_N()]
    a, b = sorted((name_m, name_n), key=ds.body_order.__getitem__)
    sign = 1.0 if b == name_m else -1.0
    mesh = surface.tri_mesh_W() if surface.is_triangle() else surface.poly_mesh_W()
    field = surface.tri_e_MN() if surface.is_triangle() else surface.poly_e_MN()
    faces = speculative = 0
    area_sum, force, max_pressure = 0.0, np.zeros(3), 0.0
    for f in range(mesh.num_elements()):
        area, integral, p_max = _face_integrals(mesh, field, f)
        if integral < 0.0:
            speculative += 1
            continue
        faces += 1
        area_sum += area
        force += sign * integral * np.asarray(mesh.face_normal(f))
        max_pressure = max(max_pressure, p_max)
    return {
        "body_a": a,
        "body_b": b,
        "faces": faces,
        "speculative_faces": speculative,
        "area": float(area_sum),
        "force_on_b": force.tolist(),
        "max_pressure": max_pressure,
    }


def _median_call_s(call, repeats: int, warmup: int = 2) -> float:
    """Median wall time of `call()` [s] over `repeats` calls after `warmup` calls."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_contact_surfaces(ds: DrakeScene, repeats: int = 50) -> dict:
    """Time Drake's hydroelastic query on the scene's initial state and summarise it.

    Returns {"query_s": median wall seconds of one QueryObject.ComputeContactSurfaces call
    (ComputeContactSurfacesWithFallback when ds.fallback) with ds.representation (polygons by
    default), over `repeats` calls after 2 warm-up calls (poses are cached, so this is the
    contact query alone); "surfaces": [per-pair dict, see _surface_summary], ordered by the
    scene order of (body_a, body_b); "point_pairs": rigid-rigid point contacts (fallback only)}."""
    sg_context = ds.scene_graph.GetMyContextFromRoot(ds.context)
    query = ds.scene_graph.get_query_output_port().Eval(sg_context)
    if ds.fallback:
        call = partial(query.ComputeContactSurfacesWithFallback, ds.representation)
    else:
        call = partial(query.ComputeContactSurfaces, ds.representation)
    query_s = _median_call_s(call, repeats)
    result = call()
    surfaces, point_pairs = result if ds.fallback else (result, [])
    summaries = [_surface_summary(ds, s) for s in surfaces]
    summaries.sort(key=lambda s: (ds.body_order[s["body_a"]], ds.body_order[s["body_b"]]))
    out = {"query_s": query_s, "surfaces": summaries}
    if ds.fallback:
        out["point_pairs"] = len(point_pairs)
    return out


# --------------------------------------------------------------------------- command line


def _print_scene(path: Path) -> None:
    """Build one scene file, query its contact surfaces and print them."""
    from taichi_hydro import load_scene

    try:
        report = time_contact_surfaces(build(load_scene(path)))
    except (NotImplementedError, RuntimeError) as exc:
        print(f"{path.name}: Drake cannot run this scene: {exc}")
        return
    print(f"{path.name}: query {report['query_s'] * 1e6:.1f} us (median), {len(report['surfaces'])} surface(s)")
    for s in report["surfaces"]:
        fx, fy, fz = s["force_on_b"]
        print(
            f"  {s['body_a']} -> {s['body_b']}: faces {s['faces']}, area {s['area']:.6g} m^2, "
            f"force on {s['body_b']} [{fx:.6g}, {fy:.6g}, {fz:.6g}] N, max pressure {s['max_pressure']:.6g} Pa"
        )
    if "point_pairs" in report:
        print(f"  rigid-rigid point pairs: {report['point_pairs']}")


def main(argv: list[str]) -> None:
    """Print Drake's contact surfaces for the given scene files (default: scenes/*.toml)."""
    from importlib.metadata import version

    paths = [Path(a) for a in argv] or sorted((Path(__file__).resolve().parent.parent / "scenes").glob("*.toml"))
    print(f"drake {version('drake')}")
    for path in paths:
        _print_scene(path)


if __name__ == "__main__":
    main(sys.argv[1:])
