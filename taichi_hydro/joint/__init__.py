"""Joints between bodies (fixed, revolute, prismatic, ball), their limits, damping, friction and
actuators, solved with the contacts as bilateral rows of the Newton solver: layout (host
frames and rows), data (device arrays), kernels (rows before the solve, measurements after)."""

from .data import Joints
from .layout import JointLayout, build_joint_layout

__all__ = ["Joints", "JointLayout", "build_joint_layout"]
