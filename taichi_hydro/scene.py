"""Scene description: TOML files (../CONTRACT) or dicts, validated into plain dataclasses.

Every error is a SceneError that names the source file, the body and the key."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checks import INT32_MAX, integer_problem, range_problem, real_problem
from .errors import SceneError

__all__ = ["Scene", "Body", "Shape", "Contact", "SolverSettings", "load_scene", "scene_from_dict", "SHAPE_TYPES"]

SHAPE_TYPES = ("sphere", "box", "cylinder", "capsule", "ellipsoid", "halfspace", "mesh", "tetmesh")
BODY_TYPES = ("dynamic", "static", "kinematic")
_SHAPE_KEYS = {
    "sphere": {"radius"},
    "box": {"size"},
    "cylinder": {"radius", "length"},
    "capsule": {"radius", "length"},
    "ellipsoid": {"radii"},
    "halfspace": set(),
    "mesh": {"file", "scale"},
    "tetmesh": {"file", "scale"},
}
_ROUND_SHAPES = ("sphere", "cylinder", "capsule", "ellipsoid")


@dataclass(frozen=True)
class Shape:
    """Geometry of one body in its body frame B. Dimensions [m]; `file` is resolved to an
    absolute path; `scale` multiplies file coordinates."""

    type: str
    radius: float | None = None
    size: tuple[float, float, float] | None = None
    length: float | None = None
    radii: tuple[float, float, float] | None = None
    file: str | None = None
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)

    def characteristic_radius(self) -> float:
        """Smallest radius of a round shape [m] (used for the default resolution)."""
        if self.type == "ellipsoid":
            return min(self.radii)
        return float(self.radius)


@dataclass(frozen=True)
class Contact:
    """Contact material of a body's geometry.

    hydro: "compliant" or "rigid". modulus: hydroelastic modulus E [Pa] (compliant only).
    resolution: target edge length of curved meshes, and of the tets a compliant non-convex mesh
    is filled with (geometry/tetrahedralize.py; None: a quarter of its smallest bounding-box
    side) [m]. slab_thickness: depth H over which a
    compliant half-space reaches E [m]. margin: hydroelastic margin delta [m] (compliant only).
    dissipation: Hunt-Crossley d [s/m]. relaxation_time: Kelvin-Voigt time scale tau [s] (Drake's
    "relaxation_time"; a pair adds its two values). friction: Coulomb coefficient mu [-]."""

    hydro: str = "rigid"
    modulus: float | None = None
    resolution: float | None = None
    slab_thickness: float | None = None
    margin: float = 0.0
    dissipation: float = 0.0
    relaxation_time: float = 0.0
    friction: float = 0.5

    @property
    def compliant(self) -> bool:
        return self.hydro == "compliant"


@dataclass(frozen=True)
class Body:
    """A rigid body. Pose of the body frame B in the world W: p_WB [m], q_WB (w, x, y, z), unit.
    Velocities in W: v_WB [m/s] of the frame origin, w_WB [rad/s]. Dynamic bodies have a mass
    [kg] or a density [kg/m^3]."""

    name: str
    type: str
    shape: Shape
    contact: Contact
    mass: float | None = None
    density: float | None = None
    p_WB: tuple[float, float, float] = (0.0, 0.0, 0.0)
    q_WB: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)
    v_WB: tuple[float, float, float] = (0.0, 0.0, 0.0)
    w_WB: tuple[float, float, float] = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class SolverSettings:
    """The contact solver (DESIGN §3; defaults in brackets).

    iterations [100]: cap on iterations (sweeps, or Newton iterations) per step.
    tolerance [1e-6 m/s]: a world's solve stops when no point of any of its bodies changes
      velocity by more than this over one iteration (|dv| + reach |dw| per body, reach: the
      distance from the centre of mass to the farthest point of the body's geometry; with
      sleep, a sleeping body's change since it fell asleep).
    relaxation [0.9]: Jacobi step omega in (0, 1].
    mode ["coulomb"]: "coulomb" adds the De Saxce term mu |v_t| to the normal residual, so
      sliding obeys Coulomb's law exactly; "convex" is Anitescu's relaxation (separating
      velocity mu |v_t| while sliding), kept for comparison; not with method "newton".
    beta [1.0]: near-rigid floor: a contact is never stiffer than a spring whose period is
      2 pi dt / beta (Drake SAP's rule); applied to a whole patch at once (see contact.assemble).
    sigma [1e-3]: friction regularisation R_t = sigma w (w: the contact's inverse mass).
    warm_start [true]: start from the impulses of the same polygons at the previous step.
    schedule ["auto"]: "world" (one thread per world runs every iteration: few launches, the
      CPU default), "contact" (one thread per contact per iteration: the GPU default).
    method ["auto"]: "jacobi" (every contact of a sweep sees the same velocities; with mass
      splitting), "accelerated" (Jacobi with Nesterov momentum and gradient restart, see
      solver.cone: the same sweeps, converging in fewer of them) or "gauss_seidel" (each update
      applied at once: only with the "world" schedule) or "newton" (Newton's method on the
      body velocities with a lagged Coulomb bound and an exact line search, a block Cholesky
      factorisation on each world's contact graph: few iterations, each costlier than a
      sweep; its Hessian is stored densely, 36 B^2 numbers per world of B bodies; world
      schedule only, see solver.newton). "auto": Gauss-Seidel for the world
      schedule, accelerated Jacobi for the contact schedule. All four have the same fixed
      point (tests/test_dynamics.py::test_solver_methods_agree); relaxation, the mass
      splitting of sigma's metric and sleep do not apply to Newton (it is Coulomb-exact by
      construction; mode "convex" is refused with it).
    sleep [true]: Gauss-Seidel skips, for the rest of a step's solve, the contacts between
      bodies that have settled (moved by no more than the tolerance over two sweeps; woken
      when their neighbours move them past it; see solver.world_schedule). The solve stops by
      the same test, with errors of the same size as the full sweeps'; false updates every contact in
      every sweep. No effect on Jacobi.
    deterministic [false]: results independent of thread timing, bit for bit from run to run
      and equal to a one-world run world by world: contacts are sorted within each world and
      float sums are gathered in that order instead of accumulated by atomics (see
      contact.ordering; it costs extra launches and work, measured in bench/)."""

    iterations: int = 100
    tolerance: float = 1e-6
    relaxation: float = 0.9
    mode: str = "coulomb"
    beta: float = 1.0
    sigma: float = 1e-3
    warm_start: bool = True
    schedule: str = "auto"
    method: str = "auto"
    deterministic: bool = False
    sleep: bool = True


@dataclass(frozen=True)
class Scene:
    """A validated scene. dt [s]; gravity in W [m/s^2]; bodies in file order."""

    bodies: tuple[Body, ...]
    dt: float = 1e-3
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)
    solver: SolverSettings = field(default_factory=SolverSettings)
    source: str = "<scene>"
    collision_filters: tuple[frozenset, ...] = ()

    def filtered(self, a: str, b: str) -> bool:
        """True when a [[collision_filter]] lists both bodies."""
        return any(a in f and b in f for f in self.collision_filters)

    def body_index(self, name: str) -> int:
        for i, b in enumerate(self.bodies):
            if b.name == name:
                return i
        raise KeyError(f"no body named {name!r} in {self.source}; bodies: {[b.name for b in self.bodies]}")


class _Table:
    """Typed access to one TOML table that remembers where it is for error messages and
    rejects keys nobody read."""

    def __init__(self, data: Any, where: str, source: str):
        if not isinstance(data, dict):
            raise SceneError(f"{source}: {where} must be a table, got {type(data).__name__}")
        self.data, self.where, self.source = data, where, source
        self.used: set[str] = set()

    def error(self, key: str, msg: str) -> SceneError:
        return SceneError(f"{self.source}: {self.where}: key '{key}': {msg}")

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = None) -> Any:
        self.used.add(key)
        return self.data.get(key, default)

    def number(self, key: str, default: Any = None, *, required: bool = False, positive: bool = False, nonneg: bool = False) -> float | None:
        if key not in self.data:
            if required:
                raise self.error(key, "is required")
            return default
        v = self.raw(key)
        problem = real_problem(v, 0.0 if nonneg else -math.inf, above=0.0 if positive else None) or range_problem([v])
        if problem:
            raise self.error(key, problem)
        return float(v)

    def integer(self, key: str, default: int, *, minimum: int = 1) -> int:
        if key not in self.data:
            return default
        v = self.raw(key)
        problem = integer_problem(v, minimum, INT32_MAX)
        if problem:
            raise self.error(key, problem)
        return v

    def vector(self, key: str, n: int, default: Any = None, *, required: bool = False, positive: bool = False) -> tuple[float, ...] | None:
        if key not in self.data:
            if required:
                raise self.error(key, "is required")
            return default
        v = self.raw(key)
        if not isinstance(v, (list, tuple)) or len(v) != n or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in v):
            raise self.error(key, f"must be a list of {n} numbers, got {v!r}")
        out = tuple(float(x) for x in v)
        if not all(math.isfinite(x) for x in out):
            raise self.error(key, f"must be finite, got {list(out)}")
        if positive and any(x <= 0 for x in out):
            raise self.error(key, f"every entry must be > 0, got {list(out)}")
        problem = range_problem(out)
        if problem:
            raise self.error(key, problem)
        return out

    def boolean(self, key: str, default: bool) -> bool:
        if key not in self.data:
            return default
        v = self.raw(key)
        if not isinstance(v, bool):
            raise self.error(key, f"must be true or false, got {v!r}")
        return v

    def string(self, key: str, default: str | None = None, *, required: bool = False, choices: tuple[str, ...] | None = None) -> str | None:
        if key not in self.data:
            if required:
                raise self.error(key, "is required")
            return default
        v = self.raw(key)
        if not isinstance(v, str):
            raise self.error(key, f"must be a string, got {v!r}")
        if choices is not None and v not in choices:
            raise self.error(key, f"must be one of {list(choices)}, got {v!r}")
        return v

    def finish(self):
        unknown = sorted(map(str, set(self.data) - self.used))
        if unknown:
            raise SceneError(f"{self.source}: {self.where}: unknown key '{unknown[0]}'" + (f" (and {unknown[1:]})" if len(unknown) > 1 else ""))


def _parse_shape(t: _Table, base_dir: Path | None) -> Shape:
    kind = t.string("type", required=True, choices=SHAPE_TYPES)
    allowed = _SHAPE_KEYS[kind] | {"type"}
    for key in t.data:
        if key not in allowed:
            raise t.error(key, f"is not a parameter of a {kind} (allowed: {sorted(allowed - {'type'})})")
    if kind == "sphere":
        shape = Shape(kind, radius=t.number("radius", required=True, positive=True))
    elif kind == "box":
        shape = Shape(kind, size=t.vector("size", 3, required=True, positive=True))
    elif kind in ("cylinder", "capsule"):
        shape = Shape(kind, radius=t.number("radius", required=True, positive=True), length=t.number("length", required=True, positive=True))
    elif kind == "ellipsoid":
        shape = Shape(kind, radii=t.vector("radii", 3, required=True, positive=True))
    elif kind == "halfspace":
        shape = Shape(kind)
    else:
        name = t.string("file", required=True)
        path = Path(name)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.is_file():
            raise t.error("file", f"file not found: {path}")
        scale = (1.0, 1.0, 1.0)
        if t.has("scale"):
            s = t.raw("scale")
            if isinstance(s, (int, float)) and not isinstance(s, bool):
                t.data["scale"] = [s, s, s]
            scale = t.vector("scale", 3, positive=True)
        shape = Shape(kind, file=str(path.resolve()), scale=scale)
    t.finish()
    return shape


def _parse_contact(t: _Table, shape: Shape) -> Contact:
    modulus = t.number("modulus", positive=True)
    hydro = t.string("hydro", "compliant" if modulus is not None else "rigid", choices=("compliant", "rigid"))
    compliant = hydro == "compliant"
    if compliant and modulus is None and shape.type != "tetmesh":
        raise t.error("modulus", "is required for a compliant geometry (hydroelastic modulus E in Pa)")
    if not compliant and modulus is not None:
        raise t.error("modulus", "applies to compliant geometry only; remove it or set hydro = \"compliant\"")
    slab = t.number("slab_thickness", positive=True)
    if slab is not None and not (compliant and shape.type == "halfspace"):
        raise t.error("slab_thickness", "applies to a compliant halfspace only")
    if compliant and shape.type == "halfspace" and slab is None:
        slab = 1.0
    margin = t.number("margin", 0.0, nonneg=True)
    if margin > 0 and not compliant:
        raise t.error("margin", "applies to compliant geometry only (Drake's hydroelastic margin inflates the compliant side)")
    resolution = t.number("resolution", positive=True)
    if resolution is None and shape.type in _ROUND_SHAPES:
        resolution = 0.5 * shape.characteristic_radius()
    contact = Contact(
        hydro=hydro,
        modulus=modulus,
        resolution=resolution,
        slab_thickness=slab,
        margin=margin,
        dissipation=t.number("dissipation", 0.0, nonneg=True),
        relaxation_time=t.number("relaxation_time", 0.0, nonneg=True),
        friction=t.number("friction", 0.5, nonneg=True),
    )
    t.finish()
    return contact


def _parse_body(data: Any, index: int, source: str, base_dir: Path | None) -> Body:
    name = data.get("name") if isinstance(data, dict) else None
    label = f"body '{name}'" if isinstance(name, str) else f"body #{index}"
    t = _Table(data, label, source)
    name = t.string("name", required=True)
    if not name.strip():
        raise t.error("name", "must not be empty")
    kind = t.string("type", "dynamic", choices=BODY_TYPES)
    shape_data = t.raw("shape")
    if shape_data is None:
        raise t.error("shape", "is required ([body.shape] with a type)")
    shape = _parse_shape(_Table(shape_data, f"{label}: shape", source), base_dir)
    contact = _parse_contact(_Table(t.raw("contact", {}), f"{label}: contact", source), shape)
    mass = t.number("mass", positive=True)
    density = t.number("density", positive=True)
    if kind == "dynamic":
        if shape.type == "halfspace":
            raise t.error("type", "a halfspace has infinite mass: make it \"static\" or \"kinematic\"")
        if mass is None and density is None:
            raise t.error("mass", "a dynamic body needs 'mass' [kg] or 'density' [kg/m^3]")
        if mass is not None and density is not None:
            raise t.error("density", "give either 'mass' or 'density', not both")
    elif mass is not None or density is not None:
        raise t.error("mass" if mass is not None else "density", f"a {kind} body has no mass; remove it")
    q = t.vector("orientation", 4, (1.0, 0.0, 0.0, 0.0))
    norm = math.sqrt(sum(x * x for x in q))
    if abs(norm - 1.0) > 1e-3:
        raise t.error("orientation", f"must be a unit quaternion (w, x, y, z), got norm {norm:.6g}")
    body = Body(
        name=name,
        type=kind,
        shape=shape,
        contact=contact,
        mass=mass,
        density=density,
        p_WB=t.vector("position", 3, (0.0, 0.0, 0.0)),
        q_WB=tuple(x / norm for x in q),
        v_WB=t.vector("velocity", 3, (0.0, 0.0, 0.0)),
        w_WB=t.vector("angular_velocity", 3, (0.0, 0.0, 0.0)),
    )
    t.finish()
    return body


def scene_from_dict(data: dict, source: str = "<dict>", base_dir: str | Path | None = None) -> Scene:
    """Validate a scene given as nested dicts/lists with the TOML file's layout."""
    top = _Table(data, "top level", source)
    sim = _Table(top.raw("sim", {}), "[sim]", source)
    dt = sim.number("dt", 1e-3, positive=True)
    gravity = sim.vector("gravity", 3, (0.0, 0.0, -9.81))
    sim.finish()
    st = _Table(top.raw("solver", {}), "[solver]", source)
    solver = SolverSettings(
        iterations=st.integer("iterations", 100),
        tolerance=st.number("tolerance", 1e-6, positive=True),
        relaxation=st.number("relaxation", 0.9, positive=True),
        mode=st.string("mode", "coulomb", choices=("coulomb", "convex")),
        beta=st.number("beta", 1.0, positive=True),
        sigma=st.number("sigma", 1e-3, nonneg=True),
        warm_start=st.boolean("warm_start", True),
        schedule=st.string("schedule", "auto", choices=("auto", "world", "contact")),
        method=st.string("method", "auto", choices=("auto", "jacobi", "accelerated", "gauss_seidel", "newton")),
        deterministic=st.boolean("deterministic", False),
        sleep=st.boolean("sleep", True),
    )
    if solver.method in ("gauss_seidel", "newton") and solver.schedule == "contact":
        raise st.error("method", f"{solver.method} needs schedule = \"world\" (one thread solves a whole world)")
    if solver.method == "newton" and solver.mode == "convex":
        raise st.error("mode", "\"convex\" is a relaxation of the projected iterations; method newton solves the Coulomb "
                               "law (use mode = \"coulomb\" or another method)")
    if solver.relaxation > 1.0:
        raise st.error("relaxation", f"must be in (0, 1], got {solver.relaxation}")
    st.finish()
    raw_bodies = top.raw("body", [])
    if not isinstance(raw_bodies, list) or not raw_bodies:
        raise SceneError(f"{source}: the scene needs at least one [[body]]")
    base = Path(base_dir) if base_dir is not None else None
    bodies = tuple(_parse_body(b, i, source, base) for i, b in enumerate(raw_bodies))
    names = [b.name for b in bodies]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SceneError(f"{source}: body name '{dup[0]}' is used more than once; names must be unique")
    filters = []
    raw_filters = top.raw("collision_filter", [])
    if not isinstance(raw_filters, list):
        raise SceneError(f"{source}: [[collision_filter]] must be an array of tables")
    for i, f in enumerate(raw_filters):
        ft = _Table(f, f"collision_filter #{i}", source)
        listed = ft.raw("bodies")
        if not isinstance(listed, list) or len(listed) < 2 or not all(isinstance(x, str) for x in listed):
            raise ft.error("bodies", f"must list at least two body names, got {listed!r}")
        for name in listed:
            if name not in names:
                raise ft.error("bodies", f"no body named {name!r}")
        ft.finish()
        filters.append(frozenset(listed))
    top.finish()
    return Scene(bodies=bodies, dt=dt, gravity=gravity, solver=solver, source=source, collision_filters=tuple(filters))


def load_scene(path: str | Path) -> Scene:
    """Read and validate a TOML scene file (format: CONTRACT.md). Raises SceneError."""
    if not isinstance(path, (str, Path)):
        raise SceneError(f"load_scene needs a file path, got {type(path).__name__} {path!r}")
    path = Path(path)
    if path.is_dir():
        raise SceneError(f"{path}: is a directory, not a scene file (give the .toml file inside it)")
    if not path.exists():
        raise SceneError(f"scene file not found: {path}")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SceneError(f"{path}: cannot read the scene file: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SceneError(f"{path}: not UTF-8 text (byte {raw[exc.start]:#04x} at offset {exc.start}); TOML files are "
                         "UTF-8") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SceneError(f"{path}: not valid TOML: {exc}") from exc
    return scene_from_dict(data, source=str(path), base_dir=path.parent)
