"""Robots from URDF files: urdf (the file read into validated data) and tables (a scene's
[[robot]] table and its URDF turned into the scene's own body, joint and filter tables)."""

from .tables import Robot, RobotTables, robot_tables
from .urdf import UrdfModel, read_urdf

__all__ = ["Robot", "RobotTables", "robot_tables", "UrdfModel", "read_urdf"]
