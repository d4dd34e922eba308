"""The joints of a scene on the host: their frames on the parent and the child, their degrees of
freedom, and the constraint rows each one contributes to a world's solve (float64 NumPy).

Every joint has a frame J. In the scene's initial state J sits at the joint's `position` with
its z axis along the joint's `axis` (revolute, prismatic; x and y complete it, see
joint_frame_W) or aligned with the world (fixed, ball). J is fixed on the parent (frame Jp) and
on the child (frame Jc); both coincide in the initial state, which is where every joint
position is 0. The solver keeps them together along the constrained directions:

  type       rows that hold it (directions: the axes x, y, z of Jp in the world)
  fixed      3 linear (Jc's origin on Jp's), 3 angular (Jc's orientation on Jp's)
  revolute   3 linear, 2 angular (x, y: the z axes stay aligned)
  prismatic  2 linear (x, y: Jc's origin stays on Jp's z axis), 3 angular
  ball       3 linear

and a revolute or prismatic joint adds rows along its axis (its degree of freedom) for each of
its lower and upper limit, damping, friction and actuator that the scene gives; a ball joint
with damping adds 3 angular damping rows. Rows are scalar (one direction each); their laws are
in joint.kernels. Every world has the same rows in the same order (ROW_* kinds below)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..rotation import quaternion_from_matrix, rotation_matrices
from ..scene import WORLD, Scene
from ..types import UNBOUNDED

__all__ = ["JointLayout", "build_joint_layout", "joint_frame_W", "JOINT_CODES",
           "ROW_LINEAR", "ROW_ANGULAR", "ROW_LIMIT_LOWER", "ROW_LIMIT_UPPER", "ROW_DAMPING", "ROW_FRICTION", "ROW_ACTUATOR",
           "ACT_NONE", "ACT_EFFORT", "ACT_PD", "AXIS_ROWS"]

JOINT_CODES = {"fixed": 0, "revolute": 1, "prismatic": 2, "ball": 3}
FIXED, REVOLUTE, PRISMATIC, BALL = range(4)

# Row kinds (row_info[:, 1]); the third column is the axis k of Jp the row acts along.
ROW_LINEAR, ROW_ANGULAR, ROW_LIMIT_LOWER, ROW_LIMIT_UPPER, ROW_DAMPING, ROW_FRICTION, ROW_ACTUATOR = range(7)
AXIS_ROWS = (ROW_LIMIT_LOWER, ROW_LIMIT_UPPER, ROW_DAMPING, ROW_FRICTION, ROW_ACTUATOR)
"""Rows along a joint's degree of freedom: their impulses are the joint's effort."""

# Actuator kinds (joint_i column J_ACTUATOR).
ACT_NONE, ACT_EFFORT, ACT_PD = range(3)

# joint_i columns: type, parent body (-1: the world), child body, first row (within a world's
# rows), row count, first degree of freedom, dof count, actuator kind.
J_TYPE, J_PARENT, J_CHILD, J_ROW_START, J_ROW_COUNT, J_DOF_START, J_DOF_COUNT, J_ACTUATOR = range(8)
# joint_f columns: lower and upper limit [rad or m] (-+types.UNBOUNDED when none), damping,
# friction, kp, kd, effort limit (types.UNBOUNDED when none).
JF_LOWER, JF_UPPER, JF_DAMPING, JF_FRICTION, JF_KP, JF_KD, JF_EFFORT_LIMIT = range(7)


def joint_frame_W(axis_W) -> np.ndarray:
    """R_WJ: the joint frame's axes (columns) in the world, z along `axis_W` (unit), x the
    projection of the world axis least aligned with z, y = z x x. A fixed or ball joint passes
    (0, 0, 1) and gets the world's axes."""
    z = np.asarray(axis_W, dtype=np.float64)
    z = z / np.linalg.norm(z)
    e = np.eye(3)[int(np.argmin(np.abs(z)))]
    if np.allclose(z, [0.0, 0.0, 1.0]):
        e = np.array([1.0, 0.0, 0.0])
    x = e - z * (z @ e)
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


@dataclass
class JointLayout:
    """Host arrays of the joints of a scene (N joints, D degrees of freedom, Jw rows per world).

    joint_i (N, 8) int32: columns J_* (type code, parent body or -1, child body, rows, dofs,
      actuator kind); joint_f (N, 8) float64: columns JF_*.
    joint_p_PJ, joint_p_CJ (N, 3) [m]: the joint origin in the parent's and the child's body
      frame (the frame the scene places; identity frame of the world for parent -1);
    joint_q_PJ, joint_q_CJ (N, 4): orientation of J in those frames (w, x, y, z).
    row_info (Jw, 4) int32: per row of a world: joint, kind (ROW_*), axis k of Jp, 0.
    dof_joint (D,): the joint of each degree of freedom; dof_names (D,) its name.
    target, target_velocity, effort (D,): the actuators' scene values (0 where none)."""

    names: list[str]
    joint_i: np.ndarray
    joint_f: np.ndarray
    joint_p_PJ: np.ndarray
    joint_q_PJ: np.ndarray
    joint_p_CJ: np.ndarray
    joint_q_CJ: np.ndarray
    row_info: np.ndarray
    dof_joint: np.ndarray
    dof_names: list[str]
    target: np.ndarray
    target_velocity: np.ndarray
    effort: np.ndarray

    @property
    def count(self) -> int:
        return len(self.names)

    @property
    def dof_count(self) -> int:
        return len(self.dof_names)

    @property
    def rows_per_world(self) -> int:
        return len(self.row_info)


def _rows(joint) -> list[tuple[int, int]]:
    """(kind, axis k) of the rows of `joint` (scene.Joint), in order."""
    kind = joint.type
    if kind == "fixed":
        return [(ROW_LINEAR, k) for k in range(3)] + [(ROW_ANGULAR, k) for k in range(3)]
    if kind == "ball":
        return [(ROW_LINEAR, k) for k in range(3)] + ([(ROW_DAMPING, k) for k in range(3)] if joint.damping > 0 else [])
    rows = ([(ROW_LINEAR, k) for k in range(3)] + [(ROW_ANGULAR, k) for k in range(2)] if kind == "revolute" else
            [(ROW_LINEAR, k) for k in range(2)] + [(ROW_ANGULAR, k) for k in range(3)])
    if joint.limits is not None:
        rows += [(ROW_LIMIT_LOWER, 2), (ROW_LIMIT_UPPER, 2)]
    if joint.damping > 0:
        rows.append((ROW_DAMPING, 2))
    if joint.friction > 0:
        rows.append((ROW_FRICTION, 2))
    if joint.actuator is not None:
        rows.append((ROW_ACTUATOR, 2))
    return rows


def build_joint_layout(scene: Scene) -> JointLayout:
    """The JointLayout of `scene`'s joints, with frames from the scene's initial poses."""
    index = {b.name: i for i, b in enumerate(scene.bodies)}
    N = len(scene.joints)
    joint_i = np.zeros((N, 8), dtype=np.int32)
    joint_f = np.zeros((N, 8), dtype=np.float64)
    frames = np.zeros((4, N, 4))
    row_info, dof_joint, dof_names, target, target_velocity, effort = [], [], [], [], [], []
    for j, joint in enumerate(scene.joints):
        parent = -1 if joint.parent == WORLD else index[joint.parent]
        child = index[joint.child]
        R_WJ = joint_frame_W(joint.axis_W if joint.type in ("revolute", "prismatic") else (0.0, 0.0, 1.0))
        p_WJ = np.asarray(joint.p_WJ, dtype=np.float64)
        for slot, body in ((0, parent), (2, child)):
            if body < 0:
                p_WB, R_WB = np.zeros(3), np.eye(3)
            else:
                p_WB, R_WB = np.asarray(scene.bodies[body].p_WB, np.float64), rotation_matrices(scene.bodies[body].q_WB)
            frames[slot, j, :3] = R_WB.T @ (p_WJ - p_WB)
            frames[slot + 1, j] = quaternion_from_matrix(R_WB.T @ R_WJ)
        rows = _rows(joint)
        actuator = joint.actuator
        joint_i[j] = (JOINT_CODES[joint.type], parent, child, len(row_info), len(rows), len(dof_names), joint.dofs,
                      ACT_NONE if actuator is None else (ACT_EFFORT if actuator.type == "effort" else ACT_PD))
        lower, upper = joint.limits if joint.limits is not None else (-UNBOUNDED, UNBOUNDED)
        joint_f[j, :7] = (lower, upper, joint.damping, joint.friction, actuator.kp if actuator else 0.0,
                          actuator.kd if actuator else 0.0, min(actuator.effort_limit if actuator else np.inf, UNBOUNDED))
        row_info += [(j, kind, k, 0) for kind, k in rows]
        for name in joint.dof_names():
            dof_joint.append(j)
            dof_names.append(name)
            target.append(actuator.target if actuator else 0.0)
            target_velocity.append(actuator.target_velocity if actuator else 0.0)
            effort.append(actuator.effort if actuator else 0.0)
    return JointLayout(
        names=[j.name for j in scene.joints], joint_i=joint_i, joint_f=joint_f,
        joint_p_PJ=frames[0, :, :3].copy(), joint_q_PJ=frames[1].copy(),
        joint_p_CJ=frames[2, :, :3].copy(), joint_q_CJ=frames[3].copy(),
        row_info=np.array(row_info, dtype=np.int32).reshape(-1, 4), dof_joint=np.array(dof_joint, dtype=np.int32),
        dof_names=dof_names, target=np.array(target, dtype=np.float64),
        target_velocity=np.array(target_velocity, dtype=np.float64), effort=np.array(effort, dtype=np.float64))
