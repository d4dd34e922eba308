"""taichi_hydro: batched hydroelastic (pressure field) contact simulation in Taichi.

Importing this package starts nothing and allocates nothing: call init() first."""

import os as _os

# Taichi prints a banner on stdout when imported; keep stdout for our own output (JSON).
_os.environ.setdefault("ENABLE_TAICHI_HEADER_PRINT", "False")

from .backend import ARCHES, current_arch, init, is_initialized
from .errors import (ArgumentError, BackendError, CapacityError, HydroError, HydroWarning, LaunchBudgetError, MeshError, OutputError,
                     SceneError, ShardError, ShardWarning)
from .scene import Body, Contact, GeometrySpec, Scene, Shape, SolverSettings, load_scene, scene_from_dict
from .sim import Simulator
from .collision.surfaces import ContactSurface
from .types import FROZEN_POSE, FROZEN_REASONS, FROZEN_SPEED, FROZEN_SPIN

__all__ = [
    "ARCHES",
    "init",
    "is_initialized",
    "current_arch",
    "load_scene",
    "scene_from_dict",
    "Scene",
    "Body",
    "GeometrySpec",
    "Shape",
    "Contact",
    "SolverSettings",
    "Simulator",
    "ContactSurface",
    "HydroError",
    "LaunchBudgetError",
    "SceneError",
    "MeshError",
    "CapacityError",
    "BackendError",
    "ArgumentError",
    "OutputError",
    "ShardError",
    "HydroWarning",
    "ShardWarning",
    "FROZEN_SPEED",
    "FROZEN_SPIN",
    "FROZEN_POSE",
    "FROZEN_REASONS",
]

__version__ = "0.1.0"
