"""Exceptions raised by taichi_hydro. Every message names the offending value."""

__all__ = ["HydroError", "SceneError", "MeshError", "CapacityError", "BackendError", "LaunchBudgetError", "BindingError"]


class HydroError(Exception):
    """Base class of every error taichi_hydro raises on purpose."""


class SceneError(HydroError, ValueError):
    """A scene description is invalid (unknown key, wrong type, impossible value)."""


class MeshError(HydroError, ValueError):
    """A mesh is unusable: open, non-manifold, inverted or degenerate elements."""


class CapacityError(HydroError, RuntimeError):
    """A device pool is too small and may not grow; the message names the capacity to raise."""


class BackendError(HydroError, RuntimeError):
    """The requested Taichi backend is unavailable, or taichi_hydro was used before init()."""


class LaunchBudgetError(BackendError):
    """The process is about to pass the kernel-launch count its Vulkan driver survives
    (backend.LAUNCH_BUDGET); the state is as it was before the refused call."""


class BindingError(HydroError, TypeError):
    """A kernel parameter of a launch plan names no array, or an array of the wrong kind
    (plan.Plan checks every binding when the plan is built)."""
