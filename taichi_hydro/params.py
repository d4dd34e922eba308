"""Per-world physical parameters of a batch of worlds (Simulator.set_parameters,
sample_parameters, parameters): parsing, sampling, and the device arrays the kernels read.

Parameters, one row per world (host copies in float64):
  mass (W, B) [kg]         dynamic bodies; NaN for static and kinematic bodies (they have none)
  friction (W, B) [-]      Coulomb coefficient mu of each body's contact material
  dissipation (W, B) [s/m] Hunt-Crossley d of each body
  modulus (W, B) [Pa]      hydroelastic modulus E of compliant bodies; NaN for bodies with no
                           compliant geometry
  gravity (W, 3) [m/s^2]   world frame
friction and dissipation are NaN for a body without geometry (nothing of it can touch).
The compliant twins of rigid geometries (geometry.twin) are no body's reference geometry:
they follow the friction and dissipation of the geometry they stand for, and their modulus,
the scene's rigid_modulus, is not a per-world parameter.

Bodies with several geometries (each with its own material). A body's value is that of its
reference geometry: its first geometry for friction and dissipation, its first compliant one
for modulus. A value v set for body b in a world sets each geometry g of b to
    value_g (v / value_ref)          (the scene's ratios between the geometries are kept),
    v                                when value_ref is 0 (no ratio to keep), unless v is 0
                                     too: the scene's value leaves the scene's values,
and the reference geometry (so a single-geometry body) to v itself, bit for bit: a
one-geometry body has the same per-world values as before bodies had several. The ratio is
taken first so that v = value_ref gives every geometry its scene value exactly: a world set to
parameters() is the scene, bit for bit.

What the kernels read (leading dimension 1 = shared by all worlds, or W; index w % shape[0]):
  body_inv_mass (W, B) = 1/m and body_inv_inertia_B (W, B) = I^-1 with I = I_scene m / m_scene:
    the same density distribution scaled, so the centre of mass does not move;
  pair_f (W, P): mu and d of the pair's two geometries (geometry_values) combined by Drake's
    rules (model.combine_pair_parameters; d depends on the two moduli), the Kelvin-Voigt tau of
    the scene;
  geom_scale (W, G) = E / E_scene: the narrow phase scales the pressure field of a compliant
    geometry (vertex pressures and gradients, a slab's E/H) by it, since the field is
    proportional to E (collision.narrowphase); by the rule above it is v / E_ref for every
    compliant geometry of the body;
  gravity (W,) vec3.
The values are derived on the host in float64 with the same arithmetic as a scene built with
those values (model.build_model), then uploaded: a world equals a one-world simulation of
that scene up to float32 round-off."""


from dataclasses import dataclass

import numpy as np
import taichi as ti

from . import hostcopy
from .backend import spend_launches
from .checks import range_problem, unrepresentable
from .errors import SceneError
from .model import ModelData, combine_pair_parameters
from .types import BODY_DYNAMIC, BODY_KINDS, G_COMPLIANT, PF_TAU, mat3, vec3, vec4

__all__ = [
    "WorldParams", "WorldParameters", "BODY_PARAMETERS", "SAMPLE_KEYS", "scene_parameters", "parse_body_parameter",
    "parse_gravity", "parse_parameters", "inverse_mass_inertia", "pressure_scale", "pair_parameters", "sample_values",
    "reference_geometry", "geometry_values",
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


def _geometry_scene_values(data: ModelData, name: str) -> np.ndarray:
    """(G,) the scene's value of material parameter `name` (friction, dissipation, modulus) for
    every geometry; NaN for the modulus of a rigid geometry."""
    if name == "friction":
        return data.geom_friction
    if name == "dissipation":
        return data.geom_dissipation
    compliant = data.geom_i[:, G_COMPLIANT] == 1
    return np.where(compliant, data.geom_modulus, np.nan)


def reference_geometry(data: ModelData, name: str) -> np.ndarray:
    """(B,) the geometry whose value stands for each body's `name` (friction, dissipation,
    modulus): its first geometry, its first compliant one for modulus; -1 where there is none."""
    values = _geometry_scene_values(data, name)
    out = np.full(data.body_count, -1, dtype=np.int64)
    for b in range(data.body_count):
        found = [int(g) for g in data.geoms_of(b) if not np.isnan(values[g])]
        if found:
            out[b] = found[0]
    return out


def geometry_values(data: ModelData, name: str, values: np.ndarray) -> np.ndarray:
    """(W, G) per-geometry values of material parameter `name` from per-body values (W, B), by
    the rule of the module docstring (the reference geometry gets v, every other geometry
    value_g (v / value_ref), or v when value_ref is 0 and v is not); NaN where it does not
    apply. A compliant twin (geometry.twin) takes the friction and dissipation of the geometry
    it stands for, and keeps the modulus rigid_modulus."""
    scene = _geometry_scene_values(data, name)
    ref = reference_geometry(data, name)
    out = np.full((values.shape[0], len(scene)), np.nan)
    for g in range(len(scene)):
        b = data.geom_body[g]
        r = ref[b]
        if np.isnan(scene[g]) or data.geom_twin_of[g] >= 0:
            continue
        v = values[:, b]
        if g == r:
            out[:, g] = v
        elif scene[r] == 0.0:
            out[:, g] = np.where(v == 0.0, scene[g], v)
        else:
            out[:, g] = scene[g] * (v / scene[r])
    twins = np.flatnonzero(data.geom_twin_of >= 0)
    # A twin: the friction and dissipation of the geometry it stands for; its modulus is the
    # scene's rigid_modulus in every world.
    out[:, twins] = scene[twins] if name == "modulus" else out[:, data.geom_twin_of[twins]]
    return out


def scene_parameters(data: ModelData, worlds: int) -> WorldParameters:
    """The scene's values in every world (a body's material: its reference geometry's)."""
    mass = np.where(data.body_kind == BODY_DYNAMIC, data.body_mass, np.nan)

    def body_values(name: str) -> np.ndarray:
        ref = reference_geometry(data, name)
        scene = _geometry_scene_values(data, name)
        return np.where(ref >= 0, scene[np.maximum(ref, 0)] if len(scene) else np.nan, np.nan)

    def tile(row):
        return np.tile(np.asarray(row, dtype=np.float64), (worlds, 1))

    return WorldParameters(tile(mass), tile(body_values("friction")), tile(body_values("dissipation")),
                           tile(body_values("modulus")), tile(data.scene.gravity))


def applies(data: ModelData, name: str) -> np.ndarray:
    """(B,) bool: the bodies a parameter means something for (mass: dynamic bodies; modulus:
    bodies with a compliant geometry; friction, dissipation: bodies with a geometry)."""
    if name == "mass":
        return data.body_kind == BODY_DYNAMIC
    return reference_geometry(data, name) >= 0


def _not_applicable(data: ModelData, name: str, b: int) -> str:
    if name == "mass":
        return f"a {BODY_KINDS[data.body_kind[b]]} body has no mass"
    if name == "modulus" and len(data.geoms_of(b)):
        return "a rigid geometry has no modulus"
    return f"a body without geometry has no {name}"


def parse_body_parameter(name: str, value, data: ModelData, worlds: int, float_type=np.float32) -> np.ndarray:
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
    bad = unrepresentable(np.where(ok[None, :], v, 0.0), float_type)
    if bad.any():
        w, b = np.argwhere(bad)[0]
        raise SceneError(f"set_parameters: {name} of body '{names[b]}' in world {w}: {range_problem(v[w, b], float_type)}")
    return v


def parse_gravity(value, worlds: int, float_type=np.float32) -> np.ndarray:
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
    bad = unrepresentable(v, float_type)
    if bad.any():
        w = int(np.argwhere(bad)[0][0])
        raise SceneError(f"set_parameters: gravity in world {w}: {range_problem(v[w], float_type)}")
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
        props = data.body_mass_props(b)
        m = mass[:, b]
        inv_mass[:, b] = 1.0 / m
        if props is not None:
            inertia = props.inertia_unit[None] * (m / props.volume)[:, None, None]
        else:
            inertia = data.body_inertia_B[b][None] * (m / data.body_mass[b])[:, None, None]
        inv_inertia[:, b] = np.linalg.inv(inertia)
    return inv_mass, inv_inertia


def check_inverse_inertia(data: ModelData, inv_mass: np.ndarray, inv_inertia: np.ndarray, float_type, where: str) -> None:
    """SceneError naming the body and world whose 1/m or inverse inertia (W, B[, 3, 3]) the
    device float cannot hold (a shape far too small or too large for its mass: its inertia
    m r^2 leaves the float32 range, and the body would stop turning or turn without bound)."""
    names = [b.name for b in data.scene.bodies]
    for values, what in ((inv_mass, "1/mass"), (inv_inertia, "inverse inertia")):
        bad = unrepresentable(values, float_type)
        if bad.any():
            w, b = np.argwhere(bad)[0][:2]
            raise SceneError(f"{where}: body '{names[b]}' in world {w}: its {what} {range_problem(values[w, b], float_type)}; "
                             "the shape is too small or too large for its mass")


def pressure_scale(data: ModelData, modulus: np.ndarray) -> np.ndarray:
    """(W, G) E / E_scene of every compliant geometry (1 for rigid ones and for twins, whose
    modulus is the scene's rigid_modulus), from the per-body moduli (W, B): every compliant
    geometry of a body scales by v / E_ref (module docstring)."""
    scene = scene_parameters(data, 1).modulus[0]
    out = np.ones((modulus.shape[0], len(data.geometries)))
    for g, geometry in enumerate(data.geometries):
        if geometry.compliant and data.geom_twin_of[g] < 0:
            b = data.geom_body[g]
            out[:, g] = modulus[:, b] / scene[b]
    return out


def pair_parameters(data: ModelData, params: WorldParameters) -> np.ndarray:
    """(W, P, 4) pair_f rows of every world (columns types.PF_*)."""
    tau = data.pair_f[:, PF_TAU] if len(data.pair_f) else np.zeros(0)
    return combine_pair_parameters(data.pair_i, tau, geometry_values(data, "friction", params.friction),
                                   geometry_values(data, "dissipation", params.dissipation),
                                   geometry_values(data, "modulus", params.modulus))


def parse_parameters(data: ModelData, worlds: int, float_type=np.float32, **values) -> dict[str, np.ndarray]:
    """The given set_parameters values (keys mass, friction, dissipation, modulus, gravity; None
    is left out) as float64 arrays of shape (worlds, B), gravity (worlds, 3), every one checked
    before any is returned (parse_body_parameter, parse_gravity; a mass whose inertia the device
    float cannot hold: check_inverse_inertia). Raises SceneError naming the parameter, body,
    world and value."""
    unknown = sorted(set(values) - {*BODY_PARAMETERS, "gravity"})
    if unknown:
        raise SceneError(f"set_parameters: unknown parameter {unknown[0]!r}; choose from {[*BODY_PARAMETERS, 'gravity']}")
    parsed = {name: parse_body_parameter(name, values[name], data, worlds, float_type)
              for name in ("mass", "friction", "dissipation", "modulus") if values.get(name) is not None}
    if "mass" in parsed:
        inv_mass, inv_inertia = inverse_mass_inertia(data, parsed["mass"])
        check_inverse_inertia(data, inv_mass, inv_inertia, float_type, "set_parameters: mass")
    if values.get("gravity") is not None:
        parsed["gravity"] = parse_gravity(values["gravity"], worlds, float_type)
    return parsed


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




class WorldParams:
    """Owner of the per-world parameter arrays the kernels read, each with a leading dimension
    of 1 (the scene's values, shared by every world) until set() gives it one row per world
    (kernels index row w % shape[0]):

    body_inv_mass (1|W, B) [1/kg], 0 for immobile bodies;
    body_inv_inertia_B (1|W, B) mat3 [1/(kg m^2)], about the centre of mass, body axes;
    pair_f (1|W, P) vec4: columns types.PF_* (friction, Hunt-Crossley d [s/m], tau [s]);
    gravity (1|W,) vec3 [m/s^2], world frame;
    geom_scale (1|W, G): E_world / E_scene, the pressure scale of each geometry.

    `values` keeps the host copies (float64, WorldParameters) that parameters() reports."""

    NAMES = ("body_inv_mass", "body_inv_inertia_B", "pair_f", "gravity", "geom_scale")

    def __init__(self, data: ModelData, worlds: int, float_type):
        self.data, self.worlds, self._float = data, worlds, float_type
        self.values = scene_parameters(data, worlds)
        dynamic = data.body_mass > 0
        inv_mass = np.where(dynamic, 1.0 / np.where(dynamic, data.body_mass, 1.0), 0.0)
        inv_inertia = np.zeros_like(data.body_inertia_B)
        inv_inertia[dynamic] = np.linalg.inv(data.body_inertia_B[dynamic])
        check_inverse_inertia(data, inv_mass[None], inv_inertia[None], float_type, data.scene.source)
        P = max(data.pair_count, 1)
        self.body_inv_mass = self._upload(float, (1, data.body_count), inv_mass[None])
        self.body_inv_inertia_B = self._upload(mat3, (1, data.body_count), inv_inertia[None])
        self.pair_f = self._upload(vec4, (1, P), _padded(data.pair_f[None], P))
        self.gravity = self._upload(vec3, (1,), np.array([data.scene.gravity]))
        G = max(len(data.geometries), 1)  # padded: Taichi rejects empty arrays
        self.geom_scale = self._upload(float, (1, G), np.ones((1, G)))

    def _upload(self, dtype, shape: tuple, values: np.ndarray):
        arr = ti.ndarray(dtype, shape)
        spend_launches(1)
        hostcopy.from_numpy(arr, np.ascontiguousarray(values, dtype=self._float))
        return arr

    def _set(self, name: str, dtype, values: np.ndarray) -> None:
        """Give `name` one row per world (a new array the first time) holding `values`."""
        arr = getattr(self, name)
        if arr.shape[0] != self.worlds:
            setattr(self, name, self._upload(dtype, (self.worlds, *arr.shape[1:]), values))
            return
        spend_launches(1)
        hostcopy.from_numpy(arr, np.ascontiguousarray(values, dtype=self._float))

    def set(self, mass=None, friction=None, modulus=None, dissipation=None, gravity=None) -> None:
        """Parse every value first (SceneError naming the parameter, body, world and value),
        then apply them (see Simulator.set_parameters)."""
        parsed = parse_parameters(self.data, self.worlds, self._float, mass=mass, friction=friction, modulus=modulus,
                                  dissipation=dissipation, gravity=gravity)
        g = parsed.pop("gravity", None)
        if "mass" in parsed:
            inv_mass, inv_inertia = inverse_mass_inertia(self.data, parsed["mass"])
        for name, value in parsed.items():
            setattr(self.values, name, value)
        if g is not None:
            self.values.gravity = g
            self._set("gravity", vec3, g)
        if "mass" in parsed:
            self._set("body_inv_mass", float, inv_mass)
            self._set("body_inv_inertia_B", mat3, inv_inertia)
        if {"friction", "dissipation", "modulus"} & set(parsed) and self.data.pair_count:
            self._set("pair_f", vec4, pair_parameters(self.data, self.values))
        if "modulus" in parsed:
            scale = pressure_scale(self.data, self.values.modulus)
            self._set("geom_scale", float, scale if scale.shape[1] else np.ones((self.worlds, 1)))

    def arrays(self) -> dict:
        return {name: getattr(self, name) for name in self.NAMES}


def _padded(rows: np.ndarray, count: int) -> np.ndarray:
    """rows (N, P, k) padded with zero rows to (N, count, k) (Taichi rejects empty arrays)."""
    out = np.zeros((rows.shape[0], count, rows.shape[2]))
    out[:, :rows.shape[1]] = rows
    return out
