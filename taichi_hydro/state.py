"""The changing state of every world and the controls applied to it: State and Control own
their device arrays; host-side selection and checking of state rows; the reset kernel."""


import numpy as np
import taichi as ti

from . import backend

from .checks import range_problem, unrepresentable
from .errors import SceneError
from .types import FROZEN_REASONS, nd, vec3, vec4

__all__ = ["State", "Control", "STATE_FIELDS", "CHECKPOINT_KEYS", "select_worlds", "checked_state", "checked_reset_state",
           "checked_checkpoint", "reset_worlds"]

STATE_FIELDS = (("position", 3), ("orientation", 4), ("velocity", 3), ("angular_velocity", 3))
"""get_state / set_state keys and their widths, in the order of State.BODY_ARRAYS."""

CHECKPOINT_KEYS = (*(name for name, _ in STATE_FIELDS), "world_status", "world_steps")
"""Keys of Simulator.checkpoint()."""


class State:
    """Per-world state, shape (worlds, bodies) unless noted, world frame, for the body frame
    origin as the scene places it (not the centre of mass):

    body_p [m] position; body_q (w, x, y, z) unit quaternion; body_v [m/s] linear velocity;
    body_w [rad/s] angular velocity;
    world_status (worlds,) i32: 0 running, else frozen; the code names the check that tripped
      (types.FROZEN_*)."""

    BODY_ARRAYS = ("body_p", "body_q", "body_v", "body_w")

    def __init__(self, worlds: int, bodies: int):
        self.body_p = ti.ndarray(vec3, (worlds, bodies))
        self.body_q = ti.ndarray(vec4, (worlds, bodies))
        self.body_v = ti.ndarray(vec3, (worlds, bodies))
        self.body_w = ti.ndarray(vec3, (worlds, bodies))
        self.world_status = ti.ndarray(ti.i32, worlds)

    def fields(self) -> dict:
        """The body arrays keyed as get_state / set_state name them."""
        return {name: getattr(self, key) for (name, _), key in zip(STATE_FIELDS, self.BODY_ARRAYS)}

    def arrays(self) -> dict:
        return {key: getattr(self, key) for key in (*self.BODY_ARRAYS, "world_status")}


class Control:
    """Inputs applied at every step until changed, shape (worlds, bodies), world frame:
    body_force [N] and body_torque [N m] at each body's centre of mass (dynamic bodies)."""

    def __init__(self, worlds: int, bodies: int):
        self.body_force = ti.ndarray(vec3, (worlds, bodies))
        self.body_torque = ti.ndarray(vec3, (worlds, bodies))

    def fields(self) -> dict:
        return {"force": self.body_force, "torque": self.body_torque}

    def arrays(self) -> dict:
        return {"body_force": self.body_force, "body_torque": self.body_torque}


def select_worlds(worlds, count: int) -> np.ndarray:
    """World indices from None (all), a boolean mask of shape (count,), an integer index or an
    integer index array (no repeats, each in [0, count)). Raises SceneError otherwise."""
    if worlds is None:
        return np.arange(count)
    sel = np.asarray(worlds)
    if sel.dtype == bool:
        if sel.shape != (count,):
            raise SceneError(f"reset: a boolean world mask must have shape ({count},), got shape {sel.shape}")
        return np.flatnonzero(sel)
    if sel.ndim == 0:
        sel = sel.reshape(1)
    if sel.ndim != 1 or (sel.size and not np.issubdtype(sel.dtype, np.integer)):
        raise SceneError(f"reset: worlds must be None, a boolean mask of shape ({count},) or integer world indices, "
                         f"got {worlds!r}")
    sel = sel.astype(np.int64)
    out_of_range = sel[(sel < 0) | (sel >= count)]
    if out_of_range.size:
        raise SceneError(f"reset: world index {int(out_of_range[0])} is out of range [0, {count})")
    values, counts = np.unique(sel, return_counts=True)
    if np.any(counts > 1):
        raise SceneError(f"reset: world index {int(values[counts > 1][0])} is given more than once (an integer array "
                         "lists world indices; pass a boolean array for a mask)")
    return sel


def checked_state(name: str, value, width: int, world_ids: np.ndarray, body_names: list[str], caller: str,
                  float_type=np.float32) -> np.ndarray:
    """float64 state rows of shape (len(world_ids), B, width) [SI, world frame]; quaternions
    (width 4) normalised. Raises SceneError naming the body and world of a non-finite value, of
    one the device's float_type cannot hold (checks.unrepresentable), or of a zero quaternion."""
    shape = (len(world_ids), len(body_names), width)
    try:
        v = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SceneError(f"{caller}: {name} must be numeric, got {value!r}") from exc
    if v.shape != shape:
        raise SceneError(f"{caller}: {name} must have shape {shape}, got {v.shape}")
    if not np.all(np.isfinite(v)):
        i, b = np.argwhere(~np.isfinite(v))[0][:2]
        raise SceneError(f"{caller}: {name} of body '{body_names[b]}' in world {world_ids[i]} is not finite: {v[i, b].tolist()}")
    bad = unrepresentable(v, float_type, underflow=False)
    if bad.any():
        i, b = np.argwhere(bad)[0][:2]
        raise SceneError(f"{caller}: {name} of body '{body_names[b]}' in world {world_ids[i]}: "
                         f"{range_problem(v[i, b], float_type, underflow=False)}")
    if width == 4:
        norm = np.linalg.norm(v, axis=2, keepdims=True)
        if np.any(norm < 1e-12):
            i, b = np.argwhere(norm[..., 0] < 1e-12)[0]
            raise SceneError(f"{caller}: {name} of body '{body_names[b]}' in world {world_ids[i]} has zero norm")
        v = v / norm
    return v


def checked_reset_state(state: dict | None, selected: np.ndarray, body_names: list[str], float_type=np.float32) -> dict:
    """The rows of reset(worlds, state) that `state` gives, checked (checked_state: float64,
    quaternions normalised), keyed as in get_state; keys not given are left out. SceneError for
    a state that is not a dict, an unknown key or a bad row."""
    state = {} if state is None else state
    keys = [name for name, _ in STATE_FIELDS]
    if not isinstance(state, dict):
        raise SceneError(f"reset: state must be a dict with keys {keys}, got {type(state).__name__}")
    unknown = sorted(set(state) - set(keys))
    if unknown:
        raise SceneError(f"reset: unknown state key {unknown[0]!r}; choose from {keys}")
    return {name: checked_state(name, state[name], width, selected, body_names, "reset", float_type)
            for name, width in STATE_FIELDS if name in state}


def checked_checkpoint(checkpoint, worlds: int, bodies: int, float_type=np.float32) -> dict:
    """A checkpoint (Simulator.checkpoint()) for restore: every key of CHECKPOINT_KEYS, state
    arrays of shape (worlds, bodies, 3|4) as contiguous `float_type` (values as recorded, not
    checked for finiteness: a frozen world may hold NaN), world_status (worlds,) int32 with
    codes 0 or types.FROZEN_REASONS, world_steps (worlds,) int64 >= 0. SceneError otherwise."""
    if not isinstance(checkpoint, dict):
        raise SceneError(f"restore: checkpoint must be a dict (Simulator.checkpoint()), got {type(checkpoint).__name__}")
    missing, unknown = sorted(set(CHECKPOINT_KEYS) - set(checkpoint)), sorted(set(checkpoint) - set(CHECKPOINT_KEYS))
    if missing or unknown:
        raise SceneError(f"restore: checkpoint keys must be {list(CHECKPOINT_KEYS)}; "
                         + (f"missing {missing[0]!r}" if missing else f"unknown {unknown[0]!r}"))
    out = {}
    for name, width in STATE_FIELDS:
        v = np.asarray(checkpoint[name])
        if v.shape != (worlds, bodies, width) or not np.issubdtype(v.dtype, np.floating):
            raise SceneError(f"restore: {name} must be a float array of shape {(worlds, bodies, width)}, got {v.dtype} {v.shape}")
        out[name] = np.ascontiguousarray(v, dtype=float_type)
    for name, dtype in (("world_status", np.int32), ("world_steps", np.int64)):
        v = np.asarray(checkpoint[name])
        if v.shape != (worlds,) or not np.issubdtype(v.dtype, np.integer):
            raise SceneError(f"restore: {name} must be an integer array of shape ({worlds},), got {v.dtype} {v.shape}")
        out[name] = np.ascontiguousarray(v, dtype=dtype)
    bad = ~np.isin(out["world_status"], [0, *FROZEN_REASONS])
    if bad.any():
        w = int(np.flatnonzero(bad)[0])
        raise SceneError(f"restore: world_status of world {w} is {int(out['world_status'][w])}, not 0 or a code of "
                         "FROZEN_REASONS")
    if np.any(out["world_steps"] < 0):
        raise SceneError(f"restore: world_steps of world {int(np.flatnonzero(out['world_steps'] < 0)[0])} is negative")
    return out


@ti.kernel
def reset_worlds(
    world_row: nd(dtype=ti.i32, ndim=1),
    stage_p: nd(dtype=vec3, ndim=2),
    stage_q: nd(dtype=vec4, ndim=2),
    stage_v: nd(dtype=vec3, ndim=2),
    stage_w: nd(dtype=vec3, ndim=2),
    body_p: nd(dtype=vec3, ndim=2),
    body_q: nd(dtype=vec4, ndim=2),
    body_v: nd(dtype=vec3, ndim=2),
    body_w: nd(dtype=vec3, ndim=2),
    body_force: nd(dtype=vec3, ndim=2),
    body_torque: nd(dtype=vec3, ndim=2),
    pair_impulse: nd(dtype=vec3, ndim=2),
    world_status: nd(dtype=ti.i32, ndim=1),
    world_iterations: nd(dtype=ti.i32, ndim=1),
    world_residual: nd(dtype=float, ndim=1),
    world_contacts: nd(dtype=ti.i32, ndim=1),
    world_updates: nd(dtype=ti.i32, ndim=1),
):
    """For every world w with world_row[w] = r >= 0: state from row r % rows of each staging
    array (a one-row array is the scene's initial state, shared), controls, warm-start pair
    impulses, divergence flag and solver statistics zero. Other worlds are not written."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, b in ti.ndrange(body_p.shape[0], body_p.shape[1]):
        r = world_row[w]
        if r >= 0:
            body_p[w, b] = stage_p[r % stage_p.shape[0], b]
            body_q[w, b] = stage_q[r % stage_q.shape[0], b]
            body_v[w, b] = stage_v[r % stage_v.shape[0], b]
            body_w[w, b] = stage_w[r % stage_w.shape[0], b]
            body_force[w, b] = vec3(0.0)
            body_torque[w, b] = vec3(0.0)
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, p in ti.ndrange(pair_impulse.shape[0], pair_impulse.shape[1]):
        if world_row[w] >= 0:
            pair_impulse[w, p] = vec3(0.0)
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w in range(world_status.shape[0]):
        if world_row[w] >= 0:
            world_status[w] = 0
            world_iterations[w] = 0
            world_residual[w] = 0.0
            world_contacts[w] = 0
            world_updates[w] = 0
