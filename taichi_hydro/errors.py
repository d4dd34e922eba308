"""Exceptions raised by taichi_hydro. Every message names the offending value."""

__all__ = ["HydroError", "SceneError", "MeshError", "CapacityError", "BackendError", "LaunchBudgetError", "BindingError",
           "ArgumentError", "OutputError", "ShardError", "HydroWarning", "ShardWarning"]


class HydroError(Exception):
    """Base class of every error taichi_hydro raises on purpose."""


class SceneError(HydroError, ValueError):
    """A scene description is invalid (unknown key, wrong type, impossible value)."""


class MeshError(HydroError, ValueError):
    """A mesh is unusable: open, non-manifold, inverted or degenerate elements."""


class CapacityError(HydroError, RuntimeError):
    """A device pool is too small and may not grow (the message names the capacity to raise), or
    a batch would need more memory than the backend holds (the message gives the estimate)."""


class BackendError(HydroError, RuntimeError):
    """The requested Taichi backend is unavailable, or taichi_hydro was used before init()."""


class LaunchBudgetError(BackendError):
    """The process is about to pass the kernel-launch count its Vulkan driver survives
    (backend.LAUNCH_BUDGET); the state is as it was before the refused call."""


class BindingError(HydroError, TypeError):
    """A kernel parameter of a launch plan names no array, or an array of the wrong kind
    (plan.Plan checks every binding when the plan is built)."""


class ArgumentError(HydroError, TypeError, ValueError):
    """An argument of the public API or the command line has the wrong type or lies outside its
    range (a TypeError and a ValueError too, so callers catching either still catch it)."""


class OutputError(HydroError, OSError):
    """An output file cannot be written where it was asked for (missing folder, a directory in the
    way, no permission, disk full, file-size limit); the previous file at that path is intact."""


class ShardError(HydroError, RuntimeError):
    """A shard of a distributed.ShardedSimulator died (its process was killed, ran out of memory,
    its node left) or did not answer within its timeout; the message names the shard, the worlds
    it held and the cause. `shard`, `worlds` (first, stop) and `cause` hold the same."""

    def __init__(self, message: str, shard: int | None = None, worlds: tuple[int, int] | None = None, cause: str = ""):
        super().__init__(message)
        self.shard, self.worlds, self.cause = shard, worlds, cause

    def __reduce__(self):  # pickled across processes (Ray) with its fields
        return type(self), (str(self), self.shard, self.worlds, self.cause)


class HydroWarning(UserWarning):
    """A setting is legal but almost surely not meant (a time step that lets bodies sink through
    each other, positions too far out for float32, a relaxation too small to converge); each
    warning names the rule it applies (see taichi_hydro.advice)."""


class ShardWarning(UserWarning):
    """A shard of a distributed.ShardedSimulator died and was restarted from the driver's last
    checkpoint of its worlds; the warning names the worlds and the steps they lost (also kept in
    ShardedSimulator.faults)."""
