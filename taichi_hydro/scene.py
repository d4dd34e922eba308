"""Scene description: TOML files (../CONTRACT, and the README's "Scene files" and "Robots" for
the keys added since: [[body.geometry]], inertia, center_of_mass, [[robot]]) or dicts, validated
into plain dataclasses. A [[robot]] table becomes bodies, joints and a collision filter
(robot.tables) validated with the hand-written ones.

Every error is a SceneError that names the source file, the body, the geometry (of a
[[body.geometry]] table) and the key."""

from __future__ import annotations

import math
import tomllib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checks import INT32_MAX, integer_problem, range_problem, real_problem
from .errors import HydroWarning, SceneError
from .geometry.mass import inertia_matrix, inertia_problem

__all__ = ["Scene", "Body", "GeometrySpec", "Shape", "Contact", "SolverSettings", "ViewSettings", "Joint", "Actuator",
           "load_scene", "scene_from_dict", "RIGID_MODULUS", "SHAPE_TYPES", "JOINT_TYPES", "JOINT_DOFS"]

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
JOINT_TYPES = ("fixed", "revolute", "prismatic", "ball")
JOINT_DOFS = {"fixed": 0, "revolute": 1, "prismatic": 1, "ball": 3}
"""Degrees of freedom of each joint type (revolute: the angle about the axis; prismatic: the
displacement along it; ball: the rotation vector of the child in the parent's joint frame)."""
ACTUATOR_TYPES = ("effort", "pd")
WORLD = "world"
"""The parent name of a joint attached to the world (no body)."""


@dataclass(frozen=True)
class Shape:
    """A shape in its geometry frame G (the body frame B for [body.shape]). Dimensions [m];
    `file` is resolved to an absolute path; `scale` multiplies file coordinates."""

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


IDENTITY_QUATERNION = (1.0, 0.0, 0.0, 0.0)
# Why [solver] sigma = 0 is refused with method newton (here, and in SolverOptions.resolve where
# method "auto" picks it): its friction law is the regularised one, R_t = sigma w.
NEWTON_SIGMA = ("0: method newton solves the regularised friction law (R_t = sigma w), which needs sigma > 0 (default "
                "1e-3); use sigma > 0, or a projected method")


@dataclass(frozen=True)
class GeometrySpec:
    """One collision geometry of a body: a shape with its contact material, in its geometry
    frame G, posed in the body frame B by p_BG [m] and the unit quaternion q_BG (w, x, y, z).
    name: unique within its body ("geometry<i>" by default)."""

    name: str
    shape: Shape
    contact: Contact
    p_BG: tuple[float, float, float] = (0.0, 0.0, 0.0)
    q_BG: tuple[float, float, float, float] = IDENTITY_QUATERNION

    @property
    def posed(self) -> bool:
        """True unless G coincides with B (zero offset, identity rotation)."""
        return self.p_BG != (0.0, 0.0, 0.0) or self.q_BG != IDENTITY_QUATERNION


@dataclass(frozen=True)
class Body:
    """A rigid body. Pose of the body frame B in the world W: p_WB [m], q_WB (w, x, y, z), unit.
    Velocities in W: v_WB [m/s] of the frame origin, w_WB [rad/s].

    geometries: its collision geometries in the body frame (possibly none). A body given by
    [body.shape] + [body.contact] has exactly one, named "geometry0", at the body frame
    (shape_table = True: error messages then name the body alone, as for that form).

    Dynamic bodies have a mass [kg] or a density [kg/m^3]; the mass properties come from the
    geometries (model.build_model) unless overridden: inertia [kg m^2] (ixx, iyy, izz, ixy, ixz,
    iyz), the entries of the inertia tensor about the centre of mass in body axes (ixy is the
    tensor's off-diagonal entry, -integral of x y dm, as in URDF), and center_of_mass [m] in B."""

    name: str
    type: str
    geometries: tuple[GeometrySpec, ...]
    mass: float | None = None
    density: float | None = None
    inertia: tuple[float, float, float, float, float, float] | None = None
    center_of_mass: tuple[float, float, float] | None = None
    p_WB: tuple[float, float, float] = (0.0, 0.0, 0.0)
    q_WB: tuple[float, float, float, float] = IDENTITY_QUATERNION
    v_WB: tuple[float, float, float] = (0.0, 0.0, 0.0)
    w_WB: tuple[float, float, float] = (0.0, 0.0, 0.0)
    shape_table: bool = False

    @property
    def shape(self) -> Shape:
        """The shape of a body with exactly one geometry (SceneError otherwise: read
        `geometries`, whose entries also carry their poses)."""
        return self._only_geometry().shape

    @property
    def contact(self) -> Contact:
        """The contact material of a body with exactly one geometry (SceneError otherwise)."""
        return self._only_geometry().contact

    def _only_geometry(self) -> GeometrySpec:
        if len(self.geometries) != 1:
            raise SceneError(f"body '{self.name}' has {len(self.geometries)} geometries, not one: read Body.geometries")
        return self.geometries[0]

    def geometry_label(self, i: int) -> str:
        """How messages name geometry i: "body 'b'" for the [body.shape] form, else
        "body 'b': geometry 'g'"."""
        if self.shape_table:
            return f"body '{self.name}'"
        return f"body '{self.name}': geometry '{self.geometries[i].name}'"


@dataclass(frozen=True)
class SolverSettings:
    """The contact solver (DESIGN §3; defaults in brackets).

    iterations [100]: cap on iterations (sweeps, or Newton iterations) per step.
    tolerance [1e-6 m/s]: a world's solve stops when no point of any of its bodies changes
      velocity by more than this over one iteration (|dv| + reach |dw| per body, reach: the
      distance from the centre of mass to the farthest point of the body's geometry; with
      sleep, a sleeping body's change since it fell asleep). Method newton measures the
      iterate's residual instead of its change: the velocity change the unbalanced impulse
      (momentum balance at the friction bounds mu gamma_n) would cause in each body alone.
    relaxation [0.9]: Jacobi step omega in (0, 1].
    mode ["coulomb"]: "coulomb" adds the De Saxce term mu |v_t| to the normal residual, so
      sliding obeys Coulomb's law exactly; "convex" is Anitescu's relaxation (separating
      velocity mu |v_t| while sliding), kept for comparison; not with method "newton" (with
      method "auto" the world schedule then runs Gauss-Seidel).
    beta [1.0]: near-rigid floor: a contact is never stiffer than a spring whose period is
      2 pi dt / beta (Drake SAP's rule); applied to a whole patch at once (see contact.assemble).
    sigma [1e-3]: friction regularisation R_t = sigma w (w: the contact's inverse mass);
      method newton needs sigma > 0.
    warm_start [true]: start from the impulses of the same polygons at the previous step.
    schedule ["auto"]: "world" (one thread per world runs every iteration: few launches, the
      CPU default), "contact" (one thread per contact per iteration: the GPU default),
      "block" (method newton only, cuda and vulkan only: one block of threads per world shares
      each iteration's passes, see solver.newton_block; the default for newton on cuda, the
      world schedule being newton's default on cpu and vulkan).
    method ["auto"]: "jacobi" (every contact of a sweep sees the same velocities; with mass
      splitting), "accelerated" (Jacobi with Nesterov momentum and gradient restart, see
      solver.cone: the same sweeps, converging in fewer of them) or "gauss_seidel" (each update
      applied at once: only with the "world" schedule) or "newton" (Newton's method on the
      body velocities with a lagged Coulomb bound and an exact line search, a block Cholesky
      factorisation on each world's contact graph: few iterations, each costlier than a
      sweep; its Hessian is stored densely, 36 B^2 numbers per world of B bodies; world
      schedule only, see solver.newton). "auto": Newton for the world schedule (Gauss-Seidel
      with mode "convex"), accelerated Jacobi for the contact schedule: at the same
      tolerance Newton's answer meets it, the projected iterations' stop on a small change per
      sweep far from the solution when they contract slowly (README, "Solve time against
      accuracy"). All four have the same fixed
      point (tests/test_dynamics.py::test_solver_methods_agree); relaxation, the mass
      splitting of sigma's metric and sleep do not apply to Newton (it is Coulomb-exact by
      construction; mode "convex" is refused with it).
    linear ["auto"]: how method newton solves for its step, H dv = -gradient, on the world
      schedule. "cholesky": the block Cholesky factorisation of each world's Hessian, which is
      stored densely (36 B^2 numbers per world: 8 bytes each where the arithmetic is float64);
      "cg": conjugate gradients, matrix-free (H x from the contact rows' stored curvatures),
      preconditioned by each body's own 6x6 block, memory linear in bodies and rows (see
      solver.newton_cg); "auto": cholesky while the Hessians of all worlds fit in
      solver.data.DENSE_BYTES (2 GiB), else cg, with a HydroWarning saying so. Only with
      method newton; the block schedule factors (cholesky) only.
    presweeps [0]: method newton, world schedule: projected Gauss-Seidel sweeps (as method
      "gauss_seidel", without sleep) that start each solve from the warm start, at most this many
      (stopping early by the sweeps' own test), before Newton's iterations take over from their
      impulses and velocities: they remove the fast, local part of the error cheaply, and Newton
      the coupled modes that sweeps cannot reach (both have the same fixed point). They pay on
      a pile falling into place and cost time on small scenes (README, Newton solver); Newton
      then often stops on the sweeps' iterate, at its tolerance rather than far below it. A
      count above 0 is refused with another method and on the block schedule (which has none).
    sleep [true]: method "gauss_seidel" skips, for the rest of a step's solve, the contacts
      between bodies that have settled (moved by no more than the tolerance over two sweeps;
      woken when their neighbours move them past it; see solver.world_schedule). The solve stops
      by the same test, with errors of the same size as the full sweeps'; false updates every
      contact in every sweep. No effect with another method, so none with method "auto" except
      where that is Gauss-Seidel (mode "convex" on the world schedule).
    contact ["polygons"]: "polygons" makes one point contact per contact polygon (Masterjohn
      2022, the model); "point" collapses each patch (the polygons of one pair of geometries
      in one world) into one point contact at its pressure centre with the patch's total
      stiffness and static force (contact.patch_point), as a point-contact engine would: for
      comparison only (it has no friction torque about the patch normal). Not with
      deterministic = true.
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
    contact: str = "polygons"
    linear: str = "auto"
    presweeps: int = 0


@dataclass(frozen=True)
class Actuator:
    """A joint-space actuator of a revolute or prismatic joint (units: N m and rad for a
    revolute joint, N and m for a prismatic one).

    type "effort": a generalised force `effort` along the joint (set per world from Python:
      Simulator.set_joint_control(effort=...)), clamped to +-effort_limit.
    type "pd": effort = kp (target - q) + kd (target_velocity - qdot) + effort (a feed-forward
      term, 0 unless set), clamped to +-effort_limit, evaluated implicitly at the end of the
      step (q + dt qdot), so any gain is stable at any dt.
    kp [N m/rad or N/m], kd [N m s/rad or N s/m] >= 0; effort_limit > 0 (inf: none)."""

    type: str
    kp: float = 0.0
    kd: float = 0.0
    target: float = 0.0
    target_velocity: float = 0.0
    effort: float = 0.0
    effort_limit: float = math.inf


@dataclass(frozen=True)
class Joint:
    """A joint between a parent body (or the world: parent = "world") and a dynamic child body.

    p_WJ [m]: the joint origin in the world frame in the scene's initial state; axis_W: unit
    axis in the world frame in that state (revolute: rotation axis; prismatic: sliding
    direction; unused by fixed and ball joints). The joint's position is 0 in that state.
    limits (lower, upper) [rad or m] or None; damping [N m s/rad or N s/m] >= 0 (ball: per
    axis); friction [N m or N] >= 0: a Coulomb bound on the joint's effort against motion
    (0: friction-free); actuator or None."""

    name: str
    type: str
    parent: str
    child: str
    p_WJ: tuple[float, float, float]
    axis_W: tuple[float, float, float] = (0.0, 0.0, 1.0)
    limits: tuple[float, float] | None = None
    damping: float = 0.0
    friction: float = 0.0
    actuator: Actuator | None = None

    @property
    def dofs(self) -> int:
        return JOINT_DOFS[self.type]

    def dof_names(self) -> list[str]:
        """Names of its degrees of freedom: the joint's name, or name[0..2] for a ball."""
        if self.dofs == 1:
            return [self.name]
        return [f"{self.name}[{k}]" for k in range(self.dofs)]


SKIN = 1e-4
"""Default [collision] skin [m] (collision.skin): a pair whose bodies move less than 0.1 mm in
four steps (2.5 cm/s at dt = 1 ms) keeps its candidate list across steps; faster pairs are
searched every step, as with 0. Chosen from bench/skin_ab.py and bench.run (README, "Each
pair's own skin"): on resting contact it removes most of the candidate search, on moving
scenes it leaves the work as without a skin."""

RIGID_MODULUS = 1e12
"""Default [sim] rigid_modulus [Pa]: the modulus of the compliant twin a rigid geometry gets in
a pair with another rigid geometry (geometry.twin). Chosen from bench/rigid_modulus.py (README,
"Rigid-rigid contact"): at 1e12 Pa the flat contacts of 1 to 100 kg bodies at dt >= 1 ms are
in the solver's near-rigid regime (the patch floor of contact.assemble sets their stiffness:
penetration and motion no longer depend on the modulus or the mass), while the twins'
pressure gradients, E over their half thickness, stay below the 1e17 Pa/m that float32 can
square (model.check_supported) for features down to 10 um."""


@dataclass(frozen=True)
class ViewSettings:
    """The viewer's camera ([view], optional): camera_position and camera_target in W [m];
    None keeps the automatic framing (taichi_hydro.framing) for that end."""

    camera_position: tuple[float, float, float] | None = None
    camera_target: tuple[float, float, float] | None = None


@dataclass(frozen=True)
class Scene:
    """A validated scene. dt [s]; gravity in W [m/s^2]; bodies in file order.

    rigid_modulus [Pa]: the hydroelastic modulus of the compliant twin that stands in for a
    rigid geometry in a pair of two rigid geometries (geometry.twin; default RIGID_MODULUS).
    One value for the scene: it is a numerical device, not a material (past the solver's
    near-rigid floor the motion does not depend on it), and where it must change, it changes
    with dt and the bodies' masses, which are the scene's."""

    bodies: tuple[Body, ...]
    dt: float = 1e-3
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)
    solver: SolverSettings = field(default_factory=SolverSettings)
    source: str = "<scene>"
    collision_filters: tuple[frozenset, ...] = ()
    joints: tuple["Joint", ...] = ()
    robots: tuple = ()
    """The [[robot]] tables' records (robot.tables.Robot: link -> body and URDF joint -> joint
    names); their bodies and joints are in `bodies` and `joints`."""
    rigid_modulus: float = RIGID_MODULUS
    view: ViewSettings = field(default_factory=ViewSettings)
    collision_skin: float = SKIN
    """[collision] skin [m]: candidate lists kept while a pair moves less than this
    (collision.skin); 0 searches every pair every step."""

    def filtered(self, a: str, b: str) -> bool:
        """True when a [[collision_filter]] lists both bodies, or a joint joins them (a
        parent and its child never collide, as in Drake and MuJoCo: their shapes usually
        overlap at the joint by design)."""
        return any(a in f and b in f for f in self.collision_filters) or any(
            {j.parent, j.child} == {a, b} for j in self.joints)

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


def _unit_quaternion(t: _Table, key: str) -> tuple[float, float, float, float]:
    """The unit quaternion (w, x, y, z) under `key` (identity when absent), normalised; a norm
    off 1 by more than 1e-3 is an error."""
    q = t.vector(key, 4, IDENTITY_QUATERNION)
    norm = math.sqrt(sum(x * x for x in q))
    if abs(norm - 1.0) > 1e-3:
        raise t.error(key, f"must be a unit quaternion (w, x, y, z), got norm {norm:.6g}")
    return tuple(x / norm for x in q)


def _parse_geometry(data: Any, index: int, body_label: str, source: str, base_dir: Path | None) -> GeometrySpec:
    """One [[body.geometry]] table: name, position (p_BG), orientation (q_BG), shape, contact."""
    name = data.get("name") if isinstance(data, dict) else None
    label = f"{body_label}: geometry '{name}'" if isinstance(name, str) else f"{body_label}: geometry #{index}"
    t = _Table(data, label, source)
    name = t.string("name", f"geometry{index}")
    if not name.strip():
        raise t.error("name", "must not be empty")
    shape_data = t.raw("shape")
    if shape_data is None:
        raise t.error("shape", "is required ([body.geometry.shape] with a type)")
    shape = _parse_shape(_Table(shape_data, f"{label}: shape", source), base_dir)
    contact = _parse_contact(_Table(t.raw("contact", {}), f"{label}: contact", source), shape)
    spec = GeometrySpec(name, shape, contact, t.vector("position", 3, (0.0, 0.0, 0.0)), _unit_quaternion(t, "orientation"))
    if shape.type == "halfspace" and spec.posed:
        key = "position" if spec.p_BG != (0.0, 0.0, 0.0) else "orientation"
        raise t.error(key, "a halfspace geometry is the z <= 0 side of its body frame and takes no pose of its own: "
                           "remove the pose and place the body instead")
    t.finish()
    return spec


def _parse_geometries(t: _Table, label: str, source: str, base_dir: Path | None) -> tuple[tuple[GeometrySpec, ...], bool]:
    """The body's geometries and whether they came from the one-shape form ([body.shape] and
    [body.contact]) rather than [[body.geometry]] tables."""
    if t.has("geometry"):
        if t.has("shape"):
            raise t.error("geometry", "give either [body.shape] (one shape) or [[body.geometry]] tables (several), not both")
        if t.has("contact"):
            raise t.error("contact", "with [[body.geometry]] tables, each geometry has its own [body.geometry.contact]")
        raw = t.raw("geometry")
        if not isinstance(raw, list):
            raise t.error("geometry", f"must be an array of tables ([[body.geometry]]), got {type(raw).__name__}")
        geometries = tuple(_parse_geometry(g, i, label, source, base_dir) for i, g in enumerate(raw))
        names = [g.name for g in geometries]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise t.error("geometry", f"geometry name '{dup[0]}' is used more than once; names must be unique within a body")
        return geometries, False
    shape_data = t.raw("shape")
    if shape_data is None:
        raise t.error("shape", "is required ([body.shape] with a type, or [[body.geometry]] tables)")
    shape = _parse_shape(_Table(shape_data, f"{label}: shape", source), base_dir)
    contact = _parse_contact(_Table(t.raw("contact", {}), f"{label}: contact", source), shape)
    return (GeometrySpec("geometry0", shape, contact),), True


def named_table(data: Any, what: str, index: int, source: str) -> tuple[_Table, str, str]:
    """(table, name, label) of the index-th [[what]] table: its label ("what 'name'", or
    "what #index" before the name is known) prefixes every error about it; its name is
    required and not blank."""
    name = data.get("name") if isinstance(data, dict) else None
    label = f"{what} '{name}'" if isinstance(name, str) else f"{what} #{index}"
    t = _Table(data, label, source)
    name = t.string("name", required=True)
    if not name.strip():
        raise t.error("name", "must not be empty")
    return t, name, label


def _parse_body(data: Any, index: int, source: str, base_dir: Path | None) -> Body:
    t, name, label = named_table(data, "body", index, source)
    kind = t.string("type", "dynamic", choices=BODY_TYPES)
    geometries, shape_table = _parse_geometries(t, label, source, base_dir)
    mass = t.number("mass", positive=True)
    density = t.number("density", positive=True)
    inertia = t.vector("inertia", 6)
    com = t.vector("center_of_mass", 3)
    if kind == "dynamic":
        halfspace = next((g for g in geometries if g.shape.type == "halfspace"), None)
        if halfspace is not None:
            which = "" if shape_table else f" (geometry '{halfspace.name}')"
            raise t.error("type", f"a halfspace{which} has infinite mass: make the body \"static\" or \"kinematic\"")
        if mass is None and density is None:
            raise t.error("mass", "a dynamic body needs 'mass' [kg] or 'density' [kg/m^3]")
        if mass is not None and density is not None:
            raise t.error("density", "give either 'mass' or 'density', not both")
        if inertia is not None:
            if mass is None:
                raise t.error("inertia", "needs 'mass' [kg], the mass this inertia belongs to (not 'density')")
            problem = inertia_problem(inertia_matrix(inertia))
            if problem:
                raise t.error("inertia", problem)
        if not geometries and inertia is None:
            raise t.error("inertia", "a dynamic body without geometry needs 'mass' [kg] and 'inertia' [kg m^2] "
                                     "(there is no shape to compute them from)")
    else:
        for key, value in (("mass", mass), ("density", density), ("inertia", inertia), ("center_of_mass", com)):
            if value is not None:
                raise t.error(key, f"a {kind} body has no mass; remove it")
    body = Body(
        name=name,
        type=kind,
        geometries=geometries,
        mass=mass,
        density=density,
        inertia=inertia,
        center_of_mass=com,
        p_WB=t.vector("position", 3, (0.0, 0.0, 0.0)),
        q_WB=_unit_quaternion(t, "orientation"),
        v_WB=t.vector("velocity", 3, (0.0, 0.0, 0.0)),
        w_WB=t.vector("angular_velocity", 3, (0.0, 0.0, 0.0)),
        shape_table=shape_table,
    )
    t.finish()
    return body


def scene_from_dict(data: dict, source: str = "<dict>", base_dir: str | Path | None = None) -> Scene:
    """Validate a scene given as nested dicts/lists with the TOML file's layout."""
    top = _Table(data, "top level", source)
    sim = _Table(top.raw("sim", {}), "[sim]", source)
    dt = sim.number("dt", 1e-3, positive=True)
    gravity = sim.vector("gravity", 3, (0.0, 0.0, -9.81))
    rigid_modulus = sim.number("rigid_modulus", RIGID_MODULUS, positive=True)
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
        schedule=st.string("schedule", "auto", choices=("auto", "world", "contact", "block")),
        method=st.string("method", "auto", choices=("auto", "jacobi", "accelerated", "gauss_seidel", "newton")),
        deterministic=st.boolean("deterministic", False),
        sleep=st.boolean("sleep", True),
        contact=st.string("contact", "polygons", choices=("polygons", "point")),
        linear=st.string("linear", "auto", choices=("auto", "cholesky", "cg")),
        presweeps=st.integer("presweeps", 0, minimum=0),
    )
    if solver.contact == "point" and solver.deterministic:
        raise st.error("contact", "\"point\" (a comparison mode) sums each patch with float atomics, so it cannot be "
                                  "deterministic; use deterministic = false, or contact = \"polygons\"")
    if solver.method in ("gauss_seidel", "newton") and solver.schedule == "contact":
        raise st.error("method", f"{solver.method} needs schedule = \"world\" (one thread solves a whole world)")
    if solver.schedule == "block" and solver.method not in ("auto", "newton"):
        raise st.error("schedule", f"\"block\" runs method newton only, not method = \"{solver.method}\"")
    if solver.method == "newton" and solver.mode == "convex":
        raise st.error("mode", "\"convex\" is a relaxation of the projected iterations; method newton solves the Coulomb "
                               "law (use mode = \"coulomb\" or another method)")
    if solver.linear != "auto" and solver.method not in ("auto", "newton"):
        raise st.error("linear", f"\"{solver.linear}\" chooses how method newton solves its step; method = "
                                 f"\"{solver.method}\" has no linear solve (use method = \"newton\", or drop the key)")
    if solver.presweeps and solver.method not in ("auto", "newton"):
        raise st.error("presweeps", f"{solver.presweeps} Gauss-Seidel sweeps start method newton's solve; method = "
                                    f"\"{solver.method}\" has no such phase (use method = \"newton\", or drop the key)")
    if solver.presweeps and solver.schedule == "block":
        raise st.error("presweeps", f"{solver.presweeps}: the block schedule has no Gauss-Seidel sweeps (they run one "
                                    "contact after another); use schedule = \"world\", or presweeps = 0")
    if solver.linear == "cg" and solver.schedule == "block":
        raise st.error("linear", "\"cg\" runs on the world schedule only; schedule = \"block\" factors (use "
                                 "schedule = \"world\", or linear = \"cholesky\")")
    if solver.relaxation > 1.0:
        raise st.error("relaxation", f"must be in (0, 1], got {solver.relaxation}")
    if solver.sigma == 0.0 and solver.method == "newton":
        raise st.error("sigma", NEWTON_SIGMA)
    st.finish()
    raw_bodies = top.raw("body", [])
    if not isinstance(raw_bodies, list):
        raise SceneError(f"{source}: [[body]] must be an array of tables")
    base = Path(base_dir) if base_dir is not None else None
    robots = _robot_tables(top.raw("robot", []), source, base)
    raw_bodies = raw_bodies + [b for r in robots for b in r.bodies]
    if not raw_bodies:
        raise SceneError(f"{source}: the scene needs at least one [[body]] (or [[robot]])")
    bodies = tuple(_parse_body(b, i, source, base) for i, b in enumerate(raw_bodies))
    names = [b.name for b in bodies]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SceneError(f"{source}: body name '{dup[0]}' is used more than once; names must be unique")
    filters = []
    raw_filters = top.raw("collision_filter", [])
    if not isinstance(raw_filters, list):
        raise SceneError(f"{source}: [[collision_filter]] must be an array of tables")
    raw_filters = raw_filters + [f for r in robots for f in r.filters]
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
    raw_joints = top.raw("joint", [])
    if not isinstance(raw_joints, list):
        raise SceneError(f"{source}: [[joint]] must be an array of tables")
    joints = _parse_joints(raw_joints + [j for r in robots for j in r.joints], bodies, source)
    if joints and solver.method not in ("auto", "newton"):
        raise st.error("method", f"the scene has joints, which only method \"newton\" solves (got {solver.method!r}; "
                                 "\"auto\" picks newton for scenes with joints)")
    ct = _Table(top.raw("collision", {}), "[collision]", source)
    skin = ct.number("skin", SKIN, nonneg=True)
    ct.finish()
    vt = _Table(top.raw("view", {}), "[view]", source)
    view = ViewSettings(camera_position=vt.vector("camera_position", 3), camera_target=vt.vector("camera_target", 3))
    if view.camera_position is not None and view.camera_position == view.camera_target:
        raise vt.error("camera_target", f"must differ from camera_position, got {list(view.camera_target)} for both")
    vt.finish()
    top.finish()
    return Scene(bodies=bodies, dt=dt, gravity=gravity, solver=solver, source=source, collision_filters=tuple(filters),
                 joints=joints, robots=tuple(r.robot for r in robots), rigid_modulus=rigid_modulus, view=view,
                 collision_skin=skin)


def _robot_tables(raw: Any, source: str, base_dir: Path | None) -> list:
    """The tables each [[robot]] adds (robot.tables.RobotTables), in file order; robot names
    must be unique."""
    if not isinstance(raw, list):
        raise SceneError(f"{source}: [[robot]] must be an array of tables")
    if not raw:
        return []
    from .robot.tables import robot_tables  # the robot package reads this module's tables

    robots = [robot_tables(r, i, source, base_dir) for i, r in enumerate(raw)]
    names = [r.robot.name for r in robots]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise SceneError(f"{source}: robot name '{dup}' is used more than once; names must be unique")
    return robots


def _parse_actuator(t: _Table, joint_type: str) -> Actuator:
    kind = t.string("type", required=True, choices=ACTUATOR_TYPES)
    allowed = {"type", "effort", "effort_limit"} | ({"kp", "kd", "target", "target_velocity"} if kind == "pd" else set())
    for key in t.data:
        if key not in allowed:
            raise t.error(key, f"is not a parameter of the {kind} actuator (allowed: {sorted(allowed - {'type'})})")
    actuator = Actuator(
        type=kind,
        kp=t.number("kp", 0.0, nonneg=True),
        kd=t.number("kd", 0.0, nonneg=True),
        target=t.number("target", 0.0),
        target_velocity=t.number("target_velocity", 0.0),
        effort=t.number("effort", 0.0),
        effort_limit=t.number("effort_limit", math.inf, positive=True),
    )
    if kind == "pd" and actuator.kp == 0.0 and actuator.kd == 0.0:
        raise t.error("kp", "a pd actuator needs kp > 0 or kd > 0 (use type = \"effort\" for a pure effort)")
    t.finish()
    return actuator


def _parse_joint(data: Any, index: int, source: str, bodies: dict[str, Body]) -> Joint:
    t, name, label = named_table(data, "joint", index, source)
    kind = t.string("type", required=True, choices=JOINT_TYPES)
    parent = t.string("parent", required=True)
    child = t.string("child", required=True)
    if parent != WORLD and parent not in bodies:
        raise t.error("parent", f"no body named {parent!r} (a body name, or \"{WORLD}\")")
    if child not in bodies:
        raise t.error("child", f"no body named {child!r}")
    if child == parent:
        raise t.error("child", f"is also the parent ({child!r}); a joint joins two different bodies")
    if bodies[child].type != "dynamic":
        raise t.error("child", f"body {child!r} is {bodies[child].type}; a joint's child must be dynamic")
    p_WJ = t.vector("position", 3, required=True)
    one_dof = kind in ("revolute", "prismatic")
    for key, rule in (("axis", one_dof), ("limits", one_dof), ("actuator", one_dof), ("friction", one_dof),
                      ("damping", kind != "fixed")):
        if t.has(key) and not rule:
            raise t.error(key, f"does not apply to a {kind} joint")
    axis = (0.0, 0.0, 1.0)
    if one_dof:
        axis = t.vector("axis", 3, required=True)
        norm = math.sqrt(sum(x * x for x in axis))
        if norm < 1e-9:
            raise t.error("axis", f"must be a nonzero vector, got {list(axis)}")
        axis = tuple(x / norm for x in axis)
    limits = t.vector("limits", 2) if t.has("limits") else None
    if limits is not None and not limits[0] < limits[1]:
        raise t.error("limits", f"must be [lower, upper] with lower < upper, got {list(limits)}")
    if limits is not None and not limits[0] <= 0.0 <= limits[1]:
        warnings.warn(f"{source}: {label}: key 'limits': {list(limits)} does not contain 0, the joint's position in the "
                      "scene's initial state: the limit pushes it into range within the first step", HydroWarning, stacklevel=4)
    actuator = None
    if t.has("actuator"):
        actuator = _parse_actuator(_Table(t.raw("actuator"), f"{label}: actuator", source), kind)
    joint = Joint(name=name, type=kind, parent=parent, child=child, p_WJ=p_WJ, axis_W=axis, limits=limits,
                  damping=t.number("damping", 0.0, nonneg=True), friction=t.number("friction", 0.0, nonneg=True),
                  actuator=actuator)
    t.finish()
    return joint


def _parse_joints(raw: Any, bodies: tuple[Body, ...], source: str) -> tuple[Joint, ...]:
    if not isinstance(raw, list):
        raise SceneError(f"{source}: [[joint]] must be an array of tables")
    by_name = {b.name: b for b in bodies}
    joints = tuple(_parse_joint(j, i, source, by_name) for i, j in enumerate(raw))
    names = [j.name for j in joints]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SceneError(f"{source}: joint name '{dup[0]}' is used more than once; names must be unique")
    return joints


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
