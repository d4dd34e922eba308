"""Per-world physical parameters and partial resets of a batch of worlds (host side of
Simulator.set_parameters / sample_parameters / reset, and the reset kernel).

Parameters, one row per world (host copies in float64):
  mass (W, B) [kg]         dynamic bodies; NaN for static and kinematic bodies (they have none)
  friction (W, B) [-]      Coulomb coefficient mu of each body's contact material
  dissipation (W, B) [s/m] Hunt-Crossley d of each body
  modulus (W, B) [Pa]      hydroelastic modulus E of compliant geometries; NaN for rigid ones
  gravity (W, 3) [m/s^2]   world frame

What the kernels read (leading dimension 1 = shared by all worlds, or W; index w % shape[0]):
  body_inv_mass (W, B) = 1/m and body_inv_inertia_B (W, B) = I^-1 with I = I_scene m / m_scene:
    the same density distribution scaled, so the centre of mass does not move;
  pair_f (W, P): mu and d combined per body pair by Drake's rules (model.combine_pair_parameters;
    d depends on the two moduli), the Kelvin-Voigt tau of the scene;
  geom_scale (W, G) = E / E_scene: the narrow phase scales the pressure field of a compliant
    geometry (vertex pressures and gradients, a slab's E/H) by it, since the field is
    proportional to E (narrowphase.py);
  gravity (W,) vec3.
The values are derived on the host in float64 with the same arithmetic as a scene built with
those values (model.build_model), then uploaded: a world equals a one-world simulation of
that scene up to float32 round-off."""


from dataclasses import dataclass

import numpy as np
import taichi as ti

from .errors import SceneError
from .model import BODY_DYNAMIC, BODY_KINDS, ModelData, combine_pair_parameters

__all__ = [
    "WorldParameters", "BODY_PARAMETERS", "SAMPLE_KEYS", "STATE_FIELDS", "scene_parameters", "parse_body_parameter",
    "parse_gravity", "inverse_mass_inertia", "pressure_scale", "pair_parameters", "sample_values", "select_worlds",
    "checked_state", "reset_worlds",
]

# name: (unit, lowest allowed value, strictly above it)
BODY_PARAMETERS = {
    "mass": ("kg", 0.0, True),
    "friction": ("-", 0.0, False),
    "dissipation": ("s/m", 0.0, False),
    "modulus": ("Pa", 0.0, True),
}
# sample_parameters keys, in the order they are drawn; mass and modulus are factors of the
# scene's value, the others absolute values.
SAMPLE_KEYS = ("mass", "friction", "dissipation", "modulus", "gravity_x", "gravity_y", "gravity_z")
RELATIVE_SAMPLES = ("mass", "modulus")
STATE_FIELDS = (("position", 3), ("orientation", 4), ("velocity", 3), ("angular_velocity", 3))


@dataclass
class WorldParameters:
    """Per-world parameter values (see the module docstring for shapes and units)."""

    mass: np.ndarray
    friction: np.ndarray
    dissipation: np.ndarray
    modulus: np.ndarray
    gravity: np.ndarray

    def as_dict(self) -> dict[str, np.ndarray]:
        """Copies, keyed as set_parameters takes them."""
        return {k: getattr(self, k).copy() for k in (*BODY_PARAMETERS, "gravity")}


def scene_parameters(data: ModelData, worlds: int) -> WorldParameters:
    """The scene's values in every world."""
    bodies = data.scene.bodies
    mass = np.where(data.body_kind == BODY_DYNAMIC, data.body_mass, np.nan)
    modulus = np.array([g.modulus if g.compliant else np.nan for g in data.geometries], dtype=np.float64)
    friction = np.array([b.contact.friction for b in bodies], dtype=np.float64)
    dissipation = np.array([b.contact.dissipation for b in bodies], dtype=np.float64)

    def tile(row):
        return np.tile(np.asarray(row, dtype=np.float64), (worlds, 1))

    return WorldParameters(tile(mass), tile(friction), tile(dissipation), tile(modulus), tile(data.scene.gravity))


def applies(data: ModelData, name: str) -> np.ndarray:
    """(B,) bool: the bodies a parameter means something for (mass: dynamic bodies; modulus:
    compliant geometries; friction, dissipation: every body)."""
    if name == "mass":
        return data.body_kind == BODY_DYNAMIC
    if name == "modulus":
        return np.array([g.compliant for g in data.geometries], dtype=bool)
    return np.ones(data.body_count, dtype=bool)


def _not_applicable(data: ModelData, name: str, b: int) -> str:
    if name == "mass":
        return f"a {BODY_KINDS[data.body_kind[b]]} body has no mass"
    return "a rigid geometry has no modulus"


def parse_body_parameter(name: str, value, data: ModelData, worlds: int) -> np.ndarray:
    """(worlds, B) float64 values of body parameter `name` from a scalar (every body it applies
    to, every world), a (B,) row (every world) or a (worlds, B) array. Entries of bodies it does
    not apply to (mass of a static or kinematic body, modulus of a rigid one) must be NaN and
    stay NaN; the others must be finite and positive (mass, modulus) or >= 0 (friction,
    dissipation). Raises SceneError naming the parameter, the body, the world and the value."""
    unit, low, strict = BODY_PARAMETERS[name]
    B = data.body_count
    names = [b.name for b in data.scene.bodies]
    try:
        v = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SceneError(f"set_parameters: {name} must be numeric, got {value!r}") from exc
    ok = applies(data, name)
    if v.ndim == 0:
        v = np.where(ok, v, np.nan)
    if v.shape == (B,):
        v = np.broadcast_to(v, (worlds, B)).copy()
    if v.shape != (worlds, B):
        raise SceneError(f"set_parameters: {name} must be a scalar or have shape ({B},) or ({worlds}, {B}) "
                         f"(worlds, bodies), got shape {v.shape}")
    stray = ~ok[None, :] & ~np.isnan(v)
    if stray.any():
        w, b = np.argwhere(stray)[0]
        raise SceneError(f"set_parameters: {name} of body '{names[b]}' in world {w}: {_not_applicable(data, name, b)}; "
                         f"give NaN, got {float(v[w, b])!r}")
    valid = np.isfinite(v) & ((v > low) if strict else (v >= low))
    bad = ok[None, :] & ~valid
    if bad.any():
        w, b = np.argwhere(bad)[0]
        rule = "positive" if strict else ">= 0"
        raise SceneError(f"set_parameters: {name} of body '{names[b]}' in world {w} must be finite and {rule} [{unit}], "
                         f"got {float(v[w, b])!r}")
    return v


def parse_gravity(value, worlds: int) -> np.ndarray:
    """(worlds, 3) gravity [m/s^2] from a (3,) vector (every world) or a (worlds, 3) array."""
    try:
        v = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SceneError(f"set_parameters: gravity must be numeric, got {value!r}") from exc
    if v.shape == (3,):
        v = np.broadcast_to(v, (worlds, 3)).copy()
    if v.shape != (worlds, 3):
        raise SceneError(f"set_parameters: gravity must have shape (3,) or ({worlds}, 3) [m/s^2], got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        w = int(np.argwhere(~np.isfinite(v))[0][0])
        raise SceneError(f"set_parameters: gravity in world {w} is not finite: {v[w].tolist()}")
    return v


def inverse_mass_inertia(data: ModelData, mass: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(W, B) 1/m [1/kg] and (W, B, 3, 3) inverse inertia about the centre of mass [1/(kg m^2)],
    body axes, for masses (W, B) [kg] (NaN: a non-dynamic body, 0 and 0). The inertia is the
    scene's scaled by m / m_scene, computed as the scene computes it (unit inertia times
    m / volume) so that a world equals a scene with that mass."""
    W, B = mass.shape
    dynamic = data.body_kind == BODY_DYNAMIC
    inv_mass = np.zeros((W, B))
    inv_inertia = np.zeros((W, B, 3, 3))
    for b in np.flatnonzero(dynamic):
        props = data.geometries[b].mass
        m = mass[:, b]
        inv_mass[:, b] = 1.0 / m
        if props is not None:
            inertia = props.inertia_unit[None] * (m / props.volume)[:, None, None]
        else:
            inertia = data.body_inertia_B[b][None] * (m / data.body_mass[b])[:, None, None]
        inv_inertia[:, b] = np.linalg.inv(inertia)
    return inv_mass, inv_inertia


def pressure_scale(data: ModelData, modulus: np.ndarray) -> np.ndarray:
    """(W, G) E / E_scene of every compliant geometry (1 for rigid ones)."""
    scene = np.array([g.modulus if g.compliant else np.nan for g in data.geometries], dtype=np.float64)
    compliant = ~np.isnan(scene)
    out = np.ones_like(modulus)
    out[:, compliant] = modulus[:, compliant] / scene[compliant]
    return out


def pair_parameters(data: ModelData, params: WorldParameters) -> np.ndarray:
    """(W, P, 4) pair_f rows of every world (friction, dissipation, tau, 0)."""
    tau = data.pair_f[:, 2] if len(data.pair_f) else np.zeros(0)
    return combine_pair_parameters(data.pair_i, tau, params.friction, params.dissipation, params.modulus)


def _checked_range(key: str, value) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in value)
    except (TypeError, ValueError) as exc:
        raise SceneError(f"sample_parameters: {key} must be a (low, high) pair, got {value!r}") from exc
    if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
        raise SceneError(f"sample_parameters: {key} range must be finite with low <= high, got {value!r}")
    if key in RELATIVE_SAMPLES and lo <= 0.0:
        raise SceneError(f"sample_parameters: {key} is a factor of the scene's value and must be positive, got {value!r}")
    if key in ("friction", "dissipation") and lo < 0.0:
        raise SceneError(f"sample_parameters: {key} must be >= 0, got {value!r}")
    return lo, hi


def sample_values(seed: int, ranges: dict, data: ModelData, worlds: int) -> dict[str, np.ndarray]:
    """Uniform samples for set_parameters, per (world, body) for body parameters and per world
    for gravity components. mass, modulus: factor of the scene's value; friction [-],
    dissipation [s/m], gravity_x/y/z [m/s^2]: absolute values; gravity components not sampled
    keep the scene's value. Each key draws from its own stream of `seed`, so a key's samples do
    not depend on which other keys are given."""
    unknown = sorted(set(ranges) - set(SAMPLE_KEYS))
    if unknown:
        raise SceneError(f"sample_parameters: unknown parameter {unknown[0]!r}; choose from {list(SAMPLE_KEYS)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise SceneError(f"sample_parameters: seed must be a non-negative integer, got {seed!r}")
    scene = scene_parameters(data, worlds)
    out: dict[str, np.ndarray] = {}
    gravity = None
    for index, key in enumerate(SAMPLE_KEYS):
        if key not in ranges:
            continue
        lo, hi = _checked_range(key, ranges[key])
        rng = np.random.default_rng([int(seed), index])
        if key.startswith("gravity_"):
            gravity = scene.gravity.copy() if gravity is None else gravity
            gravity[:, "xyz".index(key[-1])] = rng.uniform(lo, hi, size=worlds)
            continue
        u = rng.uniform(lo, hi, size=(worlds, data.body_count))
        values = u * getattr(scene, key) if key in RELATIVE_SAMPLES else u
        out[key] = np.where(applies(data, key)[None, :], values, np.nan)
    if gravity is not None:
        out["gravity"] = gravity
    return out


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


def checked_state(name: str, value, width: int, world_ids: np.ndarray, body_names: list[str], caller: str) -> np.ndarray:
    """float64 state rows of shape (len(world_ids), B, width) [SI, world frame]; quaternions
    (width 4) normalised. Raises SceneError naming the body and world of a non-finite value or a
    zero quaternion."""
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
    if width == 4:
        norm = np.linalg.norm(v, axis=2, keepdims=True)
        if np.any(norm < 1e-12):
            i, b = np.argwhere(norm[..., 0] < 1e-12)[0]
            raise SceneError(f"{caller}: {name} of body '{body_names[b]}' in world {world_ids[i]} has zero norm")
        v = v / norm
    return v


nd = ti.types.ndarray
vec3 = ti.math.vec3
vec4 = ti.math.vec4


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
    world_stats: nd(dtype=vec4, ndim=1),
):
    """For every world w with world_row[w] = r >= 0: state from row r % rows of each staging
    array (a one-row array is the scene's initial state, shared), controls, warm-start pair
    impulses, divergence flag and solver statistics zero. Other worlds are not written."""
    for w, b in body_p:
        r = world_row[w]
        if r >= 0:
            body_p[w, b] = stage_p[r % stage_p.shape[0], b]
            body_q[w, b] = stage_q[r % stage_q.shape[0], b]
            body_v[w, b] = stage_v[r % stage_v.shape[0], b]
            body_w[w, b] = stage_w[r % stage_w.shape[0], b]
            body_force[w, b] = vec3(0.0)
            body_torque[w, b] = vec3(0.0)
    for w, p in pair_impulse:
        if world_row[w] >= 0:
            pair_impulse[w, p] = vec3(0.0)
    for w in world_status:
        if world_row[w] >= 0:
            world_status[w] = 0
            world_stats[w] = vec4(0.0)
