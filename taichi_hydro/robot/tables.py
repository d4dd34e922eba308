"""One [[robot]] table of a scene file and its URDF turned into the scene's own [[body]],
[[joint]] and [[collision_filter]] tables, which scene_from_dict then validates like any
hand-written ones (so every rule and message is shared).

The [[robot]] table (README "Robots"):

  name            required, unique: bodies are named ROBOT/LINK, joints ROBOT/JOINT
  urdf            required: the URDF file, relative to the scene file
  position        p_WR [m], where the root link's frame is placed (default 0)
  orientation     q_WR (w, x, y, z) (default identity)
  fixed_base      [false]: true welds the root link to the world at that pose
  self_collision  [false]: false filters every pair of the robot's own bodies (true filters only
                  the pairs a joint joins, as for hand-written joints)
  [robot.contact.LINK]    the [body.contact] keys for every collision shape of that link
                  (links not named: rigid, friction 0.5)
  [robot.actuator.JOINT]  the [joint.actuator] keys for that (revolute, continuous or
                  prismatic) joint; effort_limit defaults to the URDF's <limit effort>
  [robot.actuators]       the same keys for every revolute, continuous and prismatic joint of
                  the robot; a [robot.actuator.JOINT] table overrides them key by key

What each URDF part becomes, with the robot at its zero configuration placed at the base pose:

- A link with mass: a dynamic body at its link frame, with the inertial's mass, its centre of
  mass (center_of_mass) and its inertia turned into the link's axes (inertia), and one
  [[body.geometry]] per <collision> posed by the collision's origin.
- A massless link (no <inertial>, or mass 0) on a fixed joint: no body of its own; its
  collision shapes join the body of the link it is fixed to, posed through the joint (a tool
  frame, a sensor mount, a pad). The root link, when massless: a static body if fixed_base
  (nothing there to weld), else an error (a free body needs mass). A massless link on any
  other joint is refused: a moving body needs mass.
- Joints: revolute and continuous (revolute without limits) -> revolute; prismatic ->
  prismatic; fixed -> fixed (between two bodies); floating -> no joint (the child is free).
  The joint sits at the child link's origin, its axis is the URDF axis turned into the world,
  its limits, damping and friction are the URDF's. fixed_base with a root that has mass: a
  fixed joint ROBOT/fixed_base from the world to the root."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SceneError
from ..rotation import quaternion_from_matrix, rotation_matrices
from .urdf import UrdfModel, read_urdf

__all__ = ["Robot", "RobotTables", "robot_tables", "link_frames", "link_owners", "FIXED_BASE_JOINT"]

FIXED_BASE_JOINT = "fixed_base"
"""The name (after ROBOT/) of the joint that welds a fixed-base robot's root link to the world."""


@dataclass(frozen=True)
class Robot:
    """A robot of a scene: its name, its URDF file (absolute path), the body of each link
    (link name -> body name; a massless link merged into another body maps to that body), the
    scene joint of each URDF joint (joint name -> scene joint name; None for a floating
    joint, or a fixed joint whose child was merged into its parent) and the geometries of each
    link (link name -> the names, within its body, of the geometries made from its <collision>
    elements, in file order: what another engine that loads the same URDF needs to give each
    of its shapes the scene's contact material)."""

    name: str
    urdf: str
    links: dict[str, str]
    joints: dict[str, str | None]
    fixed_base: bool
    geometries: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass
class RobotTables:
    """What one [[robot]] adds to a scene: body, joint and collision_filter tables (scene file
    layout) and the Robot record."""

    bodies: list[dict]
    joints: list[dict]
    filters: list[dict]
    robot: Robot


def _pose_table(t) -> tuple[np.ndarray, np.ndarray]:
    """(p_WR, R_WR) from the table's position and orientation keys."""
    from ..scene import _unit_quaternion

    p = np.array(t.vector("position", 3, (0.0, 0.0, 0.0)), dtype=np.float64)
    return p, rotation_matrices(_unit_quaternion(t, "orientation"))


def _named_tables(t, key: str) -> dict[str, dict]:
    """The sub-tables of [robot.KEY] by name (an empty dict when absent)."""
    raw = t.raw(key, {})
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise t.error(key, f"must hold one table per name ([robot.{key}.NAME]), got {raw!r}")
    return raw


def _geometry_names(model: UrdfModel, members: list[str], merged: set[str]) -> dict[tuple[str, int], str]:
    """A geometry name, unique within its body, for each collision (link, index) of the links
    that make one body: the collision's name or "collision<i>", prefixed by "LINK/" for a
    merged link; a repeated name gets "#<k>"."""
    out, used = {}, set()
    for link in members:
        for i, c in enumerate(model.links[link].collisions):
            name = c.name or f"collision{i}"
            if link in merged:
                name = f"{link}/{name}"
            base, k = name, 1
            while name in used:
                name, k = f"{base}#{k}", k + 1
            used.add(name)
            out[(link, i)] = name
    return out


def robot_tables(data: Any, index: int, source: str, base_dir: Path | None) -> RobotTables:
    """The tables of the index-th [[robot]] of scene file `source` (module docstring). Raises
    SceneError naming the scene file, the robot and the key, or the URDF file, link and joint."""
    from ..scene import named_table

    t, name, label = named_table(data, "robot", index, source)
    if "/" in name:
        raise t.error("name", f"must be a non-empty name without '/' (bodies are named ROBOT/LINK), got {name!r}")
    urdf_name = t.string("urdf", required=True)
    urdf_path = Path(urdf_name)
    if not urdf_path.is_absolute() and base_dir is not None:
        urdf_path = base_dir / urdf_path
    if not urdf_path.is_file():
        raise t.error("urdf", f"URDF file not found: {urdf_path}")
    try:
        model = read_urdf(urdf_path)
    except SceneError as exc:
        raise SceneError(f"{source}: {label}: {exc}") from exc
    p_WR, R_WR = _pose_table(t)
    fixed_base = t.boolean("fixed_base", False)
    self_collision = t.boolean("self_collision", False)
    contacts = _named_tables(t, "contact")
    actuators = _named_tables(t, "actuator")
    defaults = t.raw("actuators")
    if defaults is not None and not isinstance(defaults, dict):
        raise t.error("actuators", f"must be a table of [joint.actuator] keys ([robot.actuators]), got {defaults!r}")
    t.finish()
    where = f"{source}: {label} ({model.path})"

    for link in contacts:
        if link not in model.links:
            raise SceneError(f"{where}: [robot.contact.{link}]: no link named {link!r} in the URDF (links: {list(model.links)})")
        if not model.links[link].collisions:
            raise SceneError(f"{where}: [robot.contact.{link}]: link {link!r} has no <collision> shape to set the contact of")
    by_name = {j.name: j for j in model.joints}
    for joint in actuators:
        if joint not in by_name:
            raise SceneError(f"{where}: [robot.actuator.{joint}]: no joint named {joint!r} in the URDF "
                             f"(joints: {list(by_name)})")
        if not by_name[joint].moves:
            raise SceneError(f"{where}: [robot.actuator.{joint}]: joint {joint!r} is {by_name[joint].type}; actuators drive "
                             "revolute, continuous and prismatic joints")
    if fixed_base and FIXED_BASE_JOINT in by_name:
        raise SceneError(f"{where}: joint '{FIXED_BASE_JOINT}': the name is taken by the weld of fixed_base = true; rename "
                         "the URDF joint")

    X_W = link_frames(model, p_WR, R_WR)
    owner = link_owners(model, fixed_base, where)

    bodies, geometries = _body_tables(name, model, X_W, owner, contacts)
    joints, joint_names = _joint_tables(name, model, X_W, owner, actuators, defaults)
    if fixed_base and not model.links[model.root].massless:
        joints.insert(0, {"name": f"{name}/{FIXED_BASE_JOINT}", "type": "fixed", "parent": "world",
                          "child": f"{name}/{model.root}", "position": p_WR.tolist()})
    filters = []
    if not self_collision and len(bodies) > 1:
        filters.append({"bodies": [b["name"] for b in bodies]})
    robot = Robot(name=name, urdf=model.path, links={link: f"{name}/{owner[link]}" for link in model.tree_order},
                  joints=joint_names, fixed_base=fixed_base, geometries=geometries)
    return RobotTables(bodies, joints, filters, robot)


def link_frames(model: UrdfModel, p_WR: np.ndarray, R_WR: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """X_WL = (p_WL [m], R_WL) of every link at the zero configuration, the root link's frame at
    (p_WR, R_WR): a child link's frame is its joint's frame, X_WC = X_WP X_PJ."""
    X_W = {model.root: (p_WR, R_WR)}
    for link in model.tree_order[1:]:
        joint = model.parent_joint(link)
        p_WP, R_WP = X_W[joint.parent]
        X_W[link] = (p_WP + R_WP @ joint.p_PJ, R_WP @ joint.R_PJ)
    return X_W


def link_owners(model: UrdfModel, fixed_base: bool, where: str) -> dict[str, str]:
    """The link whose body each link belongs to: itself, or for a massless link on a fixed joint
    the owner of its parent (module docstring). SceneError for a massless root of a free robot
    and a massless link on a joint that moves."""
    owner: dict[str, str] = {}
    for link in model.tree_order:
        joint = model.parent_joint(link)
        massless = model.links[link].massless
        if joint is None and massless and not fixed_base:
            raise SceneError(f"{where}: link '{link}': the root link has no mass (no <inertial>, or mass 0), so it "
                             "cannot move freely: give it an <inertial>, or set fixed_base = true")
        if joint is not None and massless:
            if joint.type != "fixed":
                raise SceneError(f"{where}: joint '{joint.name}': its child link '{link}' has no mass (no <inertial>, or "
                                 f"mass 0) but the joint is {joint.type}: a moving link needs mass and inertia")
            owner[link] = owner[joint.parent]
        else:
            owner[link] = link
    return owner


def _body_tables(robot: str, model: UrdfModel, X_W: dict, owner: dict[str, str],
                 contacts: dict[str, dict]) -> tuple[list[dict], dict[str, tuple[str, ...]]]:
    """One [[body]] table (named ROBOT/LINK) per owning link: pose, mass properties (static when
    massless: a fixed-base root) and the collision shapes of every link it owns, posed in its
    frame; and the geometry names of each link's collision shapes (Robot.geometries)."""
    merged = {link for link, o in owner.items() if o != link}
    members: dict[str, list[str]] = {}
    for link in model.tree_order:
        members.setdefault(owner[link], []).append(link)
    bodies, link_geometries = [], {}
    for link, group in members.items():
        p_WB, R_WB = X_W[link]
        geometry_names = _geometry_names(model, group, merged)
        for member in group:
            link_geometries[member] = tuple(geometry_names[(member, i)] for i in range(len(model.links[member].collisions)))
        geometries = []
        for member in group:
            p_WL, R_WL = X_W[member]
            R_BL, p_BL = R_WB.T @ R_WL, R_WB.T @ (p_WL - p_WB)
            for i, c in enumerate(model.links[member].collisions):
                geometry = {"name": geometry_names[(member, i)], "position": (p_BL + R_BL @ c.p_LG).tolist(),
                            "orientation": quaternion_from_matrix(R_BL @ c.R_LG).tolist(), "shape": c.shape.table()}
                if member in contacts:
                    geometry["contact"] = dict(contacts[member])
                geometries.append(geometry)
        body = {"name": f"{robot}/{link}", "position": p_WB.tolist(), "orientation": quaternion_from_matrix(R_WB).tolist(),
                "geometry": geometries}
        inertial = model.links[link].inertial
        if model.links[link].massless:
            body["type"] = "static"
        else:
            I = inertial.inertia_L()
            body.update(type="dynamic", mass=inertial.mass, center_of_mass=inertial.p_LC.tolist(),
                        inertia=[I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]])
        bodies.append(body)
    return bodies, link_geometries


def _joint_tables(robot: str, model: UrdfModel, X_W: dict, owner: dict[str, str], actuators: dict[str, dict],
                  defaults: dict | None) -> tuple[list[dict], dict[str, str | None]]:
    """The [[joint]] tables of the URDF's joints (none for a floating joint or a merged link's
    fixed joint) at their child link's origin, and the scene joint name of each URDF joint."""
    joints, names = [], {}
    for joint in model.joints:
        if owner[joint.child] != joint.child or joint.type == "floating":
            names[joint.name] = None
            continue
        p_WC, R_WC = X_W[joint.child]
        table = {"name": f"{robot}/{joint.name}", "type": {"continuous": "revolute"}.get(joint.type, joint.type),
                 "parent": f"{robot}/{owner[joint.parent]}", "child": f"{robot}/{joint.child}", "position": p_WC.tolist()}
        if joint.moves:
            table["axis"] = (R_WC @ joint.axis_J).tolist()
            if joint.lower is not None:
                table["limits"] = [joint.lower, joint.upper]
            if joint.damping > 0:
                table["damping"] = joint.damping
            if joint.friction > 0:
                table["friction"] = joint.friction
            if joint.name in actuators or defaults is not None:
                actuator = {**(defaults or {}), **actuators.get(joint.name, {})}
                if joint.effort is not None:
                    actuator.setdefault("effort_limit", joint.effort)
                table["actuator"] = actuator
        joints.append(table)
        names[joint.name] = table["name"]
    return joints, names
