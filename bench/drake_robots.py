"""Drake reference for scenes with [[robot]] tables: each robot's URDF loaded by Drake's own
Parser into the MultibodyPlant, next to the scene's other bodies (bench/drake_scene.py), with
the scene's contact materials, collision filters and PD actuators, for the articulated-robot
benchmarks (bench/cases.py: gripper_hold, arm7_table).

What carries over, and how:
- Links, inertias, joints, limits, joint damping and collision shapes: from the URDF, read by
  Drake's parser (not by ours), so a difference in how the two read a file shows up as a
  difference in the outcome. The base: welded at the root link's pose (fixed_base), else a
  free body posed there.
- Contact: every collision geometry of link L gets the hydroelastic properties of the scene
  geometry made from the same <collision> (Robot.geometries[L], in file order): compliant or
  rigid, modulus, resolution hint, Hunt-Crossley dissipation, friction (static = dynamic).
- Collision filters: every [[collision_filter]] of the scene (a robot's own bodies among them
  unless self_collision) and every scene joint's parent and child are excluded in Drake's
  SceneGraph, geometry by geometry.
- Actuators: one JointActuator per actuated joint with the scene's effort limit and
  PdControllerGains(kp, kd); the desired state (target, target_velocity) and the feed-forward
  effort are fixed inputs. Drake evaluates this PD law implicitly inside its SAP-family solvers
  (SAP, Lagged, Similar), as we do; TAMSI has no PD actuators and is refused.

Refused with NotImplementedError (the benchmark reports it): hand-written [[joint]] tables
(only robot joints are mapped), joint friction (Drake's discrete plant has none), effort
actuators, and a collision shape whose type differs between the two parsers.
"""

from __future__ import annotations

import math

import numpy as np
from pydrake.geometry import CollisionFilterDeclaration, GeometrySet, RoleAssign
from pydrake.multibody.parsing import Parser
from pydrake.multibody.plant import AddMultibodyPlantSceneGraph, ContactModel
from pydrake.multibody.tree import PdControllerGains
from pydrake.systems.framework import Context, DiagramBuilder

from taichi_hydro.robot.urdf import read_urdf
from taichi_hydro.scene import Scene

from .drake_scene import (
    _APPROXIMATIONS,
    _REPRESENTATIONS,
    DrakeScene,
    _add_body,
    _pose,
    _proximity_properties,
)

__all__ = ["build", "pair_forces", "body_position"]

_PD_APPROXIMATIONS = ("sap", "lagged", "similar")
"""Drake's discrete approximations solved by SAP, the ones that take PD-controlled actuators."""

_DRAKE_SHAPES = {"box": "Box", "sphere": "Sphere", "cylinder": "Cylinder", "capsule": "Capsule", "mesh": "Mesh"}
"""Our shape type -> the class name of the Drake shape its URDF element becomes."""


def _robot_bodies(scene: Scene) -> set[str]:
    return {body for robot in scene.robots for body in robot.links.values()}


def _check(scene: Scene, approximation: str) -> None:
    """NotImplementedError for what this harness cannot give Drake (module docstring)."""
    if approximation not in _PD_APPROXIMATIONS:
        raise NotImplementedError(f"{scene.source}: Drake's PD-controlled actuators need a SAP-family discrete "
                                  f"approximation ({', '.join(_PD_APPROXIMATIONS)}), got {approximation!r}")
    robot_joints = {j for robot in scene.robots for j in robot.joints.values() if j is not None}
    robot_joints |= {f"{robot.name}/fixed_base" for robot in scene.robots if robot.fixed_base}
    for joint in scene.joints:
        if joint.name not in robot_joints:
            raise NotImplementedError(f"{scene.source}: joint '{joint.name}': only the joints of [[robot]] tables are "
                                      "mapped to Drake")
        if joint.friction > 0.0:
            raise NotImplementedError(f"{scene.source}: joint '{joint.name}': joint friction has no counterpart in "
                                      "Drake's discrete plant")
        if joint.actuator is not None and joint.actuator.type != "pd":
            raise NotImplementedError(f"{scene.source}: joint '{joint.name}': only PD actuators are mapped to Drake")


def _add_robot(plant, scene_graph, scene: Scene, robot) -> tuple[object, dict[str, list], list]:
    """Parse one robot's URDF into the plant, place its base, give its collision geometries the
    scene's proximity properties and add its actuators. Returns (model instance, scene body
    name -> Drake GeometryIds, [(Drake actuator, scene Joint)])."""
    model = read_urdf(robot.urdf)
    instance = Parser(plant, robot.name).AddModels(robot.urdf)[0]
    root_body = scene.bodies[scene.body_index(robot.links[model.root])]
    root = plant.GetBodyByName(model.root, instance)
    X_WR = _pose(root_body.p_WB, root_body.q_WB)
    if robot.fixed_base:
        plant.WeldFrames(plant.world_frame(), root.body_frame(), X_WR)
    else:
        plant.SetDefaultFreeBodyPose(root, X_WR)
    inspector = scene_graph.model_inspector()
    geometry_ids: dict[str, list] = {}
    for link, body_name in robot.links.items():
        ids = plant.GetCollisionGeometriesForBody(plant.GetBodyByName(link, instance))
        names = robot.geometries.get(link, ())
        if len(ids) != len(names):
            raise NotImplementedError(f"{robot.urdf}: link '{link}': Drake made {len(ids)} collision geometries, "
                                      f"we made {len(names)}")
        specs = {g.name: g for g in scene.bodies[scene.body_index(body_name)].geometries}
        for gid, name in zip(ids, names):
            spec = specs[name]
            drake_type = inspector.GetShape(gid).__class__.__name__
            if _DRAKE_SHAPES.get(spec.shape.type) != drake_type and not (spec.shape.type == "mesh" and drake_type == "Convex"):
                raise NotImplementedError(f"{robot.urdf}: link '{link}': collision '{name}' is a {spec.shape.type} for us "
                                          f"and a {drake_type} for Drake")
            props = _proximity_properties(spec.shape, spec.contact)
            scene_graph.AssignRole(plant.get_source_id(), gid, props, RoleAssign.kReplace)
            geometry_ids.setdefault(body_name, []).append(gid)
    actuators = []
    by_name = {j.name: j for j in scene.joints}
    for urdf_joint, scene_joint in robot.joints.items():
        joint = by_name.get(scene_joint) if scene_joint else None
        if joint is None:
            continue
        drake_joint = plant.GetJointByName(urdf_joint, instance)
        damping = np.atleast_1d(drake_joint.default_damping_vector()) if drake_joint.num_velocities() else np.zeros(0)
        if drake_joint.num_velocities() and not np.allclose(damping, joint.damping):
            raise NotImplementedError(f"{robot.urdf}: joint '{urdf_joint}': Drake read damping {damping}, we read "
                                      f"{joint.damping}")
        if joint.actuator is None:
            continue
        limit = joint.actuator.effort_limit
        actuator = plant.AddJointActuator(urdf_joint, drake_joint, limit if math.isfinite(limit) else math.inf)
        actuator.set_controller_gains(PdControllerGains(p=joint.actuator.kp, d=joint.actuator.kd))
        actuators.append((actuator, joint))
    return instance, geometry_ids, actuators


def _apply_filters(scene_graph, scene: Scene, geometry_ids: dict[str, list]) -> None:
    """Exclude, geometry by geometry, what the scene filters: every [[collision_filter]] and
    every joint's parent-child pair."""
    manager = scene_graph.collision_filter_manager()
    for bodies in scene.collision_filters:
        ids = [g for b in bodies for g in geometry_ids.get(b, [])]
        if ids:
            manager.Apply(CollisionFilterDeclaration().ExcludeWithin(GeometrySet(ids)))
    for joint in scene.joints:
        a, b = geometry_ids.get(joint.parent, []), geometry_ids.get(joint.child, [])
        if a and b:
            manager.Apply(CollisionFilterDeclaration().ExcludeBetween(GeometrySet(a), GeometrySet(b)))


def _fix_inputs(plant, plant_context: Context, instances: list) -> None:
    """Desired state (targets [rad or m], target velocities) and feed-forward efforts of every
    robot's actuators, in Drake's actuator order within each model instance."""
    for instance, actuators in instances:
        if not actuators:
            continue
        by_index = {a.index(): joint for a, joint in actuators}
        order = [by_index[i] for i in plant.GetJointActuatorIndices(instance)]
        desired = [j.actuator.target for j in order] + [j.actuator.target_velocity for j in order]
        plant.get_desired_state_input_port(instance).FixValue(plant_context, np.array(desired))
        plant.get_actuation_input_port(instance).FixValue(plant_context, np.array([j.actuator.effort for j in order]))


def build(scene: Scene, time_step: float, approximation: str = "sap", hydro_representation: str = "polygon") -> DrakeScene:
    """A discrete Drake plant (period time_step [s], SAP-family `approximation`) of a scene
    with [[robot]] tables; the scene's other bodies go through drake_scene (one geometry at
    their origin each). Raises NotImplementedError for what cannot be matched (module
    docstring)."""
    if time_step <= 0.0:
        raise ValueError(f"time_step must be > 0 s (PD actuators need a discrete plant), got {time_step}")
    _check(scene, approximation)
    builder = DiagramBuilder()
    plant, scene_graph = AddMultibodyPlantSceneGraph(builder, time_step)
    instances, geometry_ids, bodies = [], {}, {}
    in_robots = _robot_bodies(scene)
    for body in scene.bodies:  # first: _add_body adds to the default model instance
        if body.name in in_robots:
            continue
        if len(body.geometries) != 1 or body.geometries[0].posed or body.inertia is not None or body.center_of_mass is not None:
            raise NotImplementedError(f"{scene.source}: body '{body.name}': the Drake harness takes one shape at the body "
                                      "origin per body outside robots")
        bodies[body.name], gid = _add_body(plant, body)
        geometry_ids[body.name] = [gid]
    for robot in scene.robots:
        instance, ids, actuators = _add_robot(plant, scene_graph, scene, robot)
        instances.append((instance, actuators))
        geometry_ids.update(ids)
        for link, body_name in robot.links.items():
            if body_name == f"{robot.name}/{link}":
                bodies[body_name] = plant.GetBodyByName(link, instance)
    plant.set_contact_model(ContactModel.kHydroelastic)  # the scene loader refuses unfiltered rigid-rigid pairs
    plant.set_contact_surface_representation(_REPRESENTATIONS[hydro_representation])
    plant.mutable_gravity_field().set_gravity_vector(np.asarray(scene.gravity, dtype=float))
    plant.set_discrete_contact_approximation(_APPROXIMATIONS[approximation])
    plant.Finalize()
    _apply_filters(scene_graph, scene, geometry_ids)
    diagram = builder.Build()
    context = diagram.CreateDefaultContext()
    plant_context = plant.GetMyMutableContextFromRoot(context)
    _fix_inputs(plant, plant_context, instances)
    for body in scene.bodies:
        if body.name not in in_robots and body.type == "dynamic":
            plant.SetFreeBodyPose(plant_context, bodies[body.name], _pose(body.p_WB, body.q_WB))
    return DrakeScene(
        diagram=diagram, plant=plant, scene_graph=scene_graph, context=context, bodies=bodies,
        geometry_body={g: name for name, ids in geometry_ids.items() for g in ids},
        body_order={b.name: i for i, b in enumerate(scene.bodies)}, time_step=time_step,
        representation=_REPRESENTATIONS[hydro_representation], fallback=False, scene=scene,
    )


def body_position(ds: DrakeScene, context: Context, name: str) -> np.ndarray:
    """p_WB [m] of scene body `name` (a robot body: its link frame) in a diagram context."""
    plant_context = ds.plant.GetMyContextFromRoot(context)
    return np.asarray(ds.plant.EvalBodyPoseInWorld(plant_context, ds.bodies[name]).translation(), dtype=float)


def pair_forces(ds: DrakeScene, context: Context, pairs) -> list[np.ndarray]:
    """For each scene body pair (a, b): the hydroelastic contact force on b from a [N, world
    frame], summed over the contact surfaces between their geometries (Drake's F_Ac_W acts on
    the body of geometry M, its opposite on N's)."""
    results = ds.plant.get_contact_results_output_port().Eval(ds.plant.GetMyContextFromRoot(context))
    out = [np.zeros(3) for _ in pairs]
    for i in range(results.num_hydroelastic_contacts()):
        info = results.hydroelastic_contact_info(i)
        m = ds.geometry_body[info.contact_surface().id_M()]
        n = ds.geometry_body[info.contact_surface().id_N()]
        f_M = np.asarray(info.F_Ac_W().translational(), dtype=float)
        for k, (a, b) in enumerate(pairs):
            if {a, b} == {m, n}:
                out[k] += f_M if b == m else -f_M
    return out
