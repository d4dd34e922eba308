"""Joints: the device arrays of a scene's joints (static, shared by every world) and of their
per-world controls and measurements. Layout: joint.layout; kernels: joint.kernels."""

from __future__ import annotations

import taichi as ti

from ..model import _upload
from ..types import ivec4, ivec8, vec3, vec4, vec8
from .layout import JointLayout

__all__ = ["Joints"]


class Joints:
    """Static (N joints, Jw rows per world, D degrees of freedom; at least 1 each on the device):
    joint_i (N,) ivec8, joint_f (N,) vec8: joint.layout's J_* and JF_* columns;
    joint_p_PJ, joint_p_CJ (N,) [m], joint_q_PJ, joint_q_CJ (N,): the joint frame on the parent
      and on the child, in their body frames;
    joint_row_info (Jw,) ivec4: joint, row kind, axis of each row of a world;
    joint_target0, joint_target_velocity0, joint_effort0 (D,): the actuators' scene values.
    Per world (W, D) [rad or m, rad/s or m/s, N m or N]: controls joint_target,
    joint_target_velocity, joint_effort_command (set_joint_control; reset restores the scene's);
    measurements after each step (joint.kernels.joint_state): joint_q, joint_qd, joint_effort;
    per (world, joint), world frame: joint_force [N], joint_torque [N m] on the child at the
    joint origin; joint_fresh (W,): 1 while a world's joint positions are to be measured
    afresh (after a reset)."""

    def __init__(self, layout: JointLayout, worlds: int):
        self.layout = layout
        W, N, D = worlds, max(layout.count, 1), max(layout.dof_count, 1)
        self.joint_i = _upload(ivec8, layout.joint_i)
        self.joint_f = _upload(vec8, layout.joint_f)
        self.joint_p_PJ = _upload(vec3, layout.joint_p_PJ)
        self.joint_q_PJ = _upload(vec4, layout.joint_q_PJ)
        self.joint_p_CJ = _upload(vec3, layout.joint_p_CJ)
        self.joint_q_CJ = _upload(vec4, layout.joint_q_CJ)
        self.joint_row_info = _upload(ivec4, layout.row_info)
        self.joint_target0 = _upload(float, layout.target)
        self.joint_target_velocity0 = _upload(float, layout.target_velocity)
        self.joint_effort0 = _upload(float, layout.effort)
        for name in ("joint_target", "joint_target_velocity", "joint_effort_command", "joint_q", "joint_qd", "joint_effort"):
            setattr(self, name, ti.ndarray(float, (W, D)))
            getattr(self, name).fill(0.0)
        self.joint_force = ti.ndarray(vec3, (W, N))
        self.joint_torque = ti.ndarray(vec3, (W, N))
        self.joint_fresh = ti.ndarray(ti.i32, W)
        self.joint_fresh.fill(1)

    @property
    def controls(self) -> dict:
        """set_joint_control's keys and their arrays."""
        return {"target": self.joint_target, "target_velocity": self.joint_target_velocity, "effort": self.joint_effort_command}

    def arrays(self) -> dict:
        return {k: v for k, v in vars(self).items() if isinstance(v, ti.Ndarray)}
