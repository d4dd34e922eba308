"""URDF files read into validated, plain data (host, float64): links with their inertials and
collision shapes, joints with their frames, axes, limits and dynamics.

The parser is Python's own XML reader (xml.etree.ElementTree, strict: a file that is not
well-formed XML is refused with its line and column). Every other mistake is a SceneError
that names the URDF file, the link or joint, the element and the attribute. What is read
(the URDF specification, ROS wiki "urdf/XML"):

- <link name>: <inertial> (<origin xyz rpy>, <mass value>, <inertia ixx ixy ixz iyy iyz izz>:
  all six entries, about the centre of mass in the axes of the inertial's origin frame) and
  any number of <collision> (<origin>, <geometry> with one of <box size>, <cylinder radius
  length> (along z), <sphere radius>, <mesh filename scale>, and Drake's <capsule radius
  length> extension). <visual>, <material>, <transmission> and <gazebo> are not read.
- <joint name type>: revolute, continuous, prismatic, fixed, floating; planar is refused (no
  planar joint here), <mimic> too (no coupling between joints here). <parent link>, <child
  link>, <origin> (the joint frame J in the parent link frame; the child link frame is J at
  the joint's zero position), <axis xyz> (in J; default (1, 0, 0); normalised), <limit lower
  upper effort velocity> (lower and upper default to 0 when only one is given, as the
  specification says; neither: no position limit; continuous joints have none; velocity is not
  used), <dynamics damping friction>.

The links must form one tree: unique names, every joint's links exist, a link has at most one
parent joint, one root (the link no joint has as child), every link reachable from it.

Mesh file names: "package://PKG/rest" is looked up as PKG/rest beside the URDF's folder and
each folder above it (or as rest inside a folder above named PKG), as ROS users lay packages
out; "file:///abs" and absolute paths are taken as they are; relative paths are relative to the
URDF's folder."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import SceneError
from ..geometry.mass import inertia_problem
from ..rotation import rpy_matrix

__all__ = ["UrdfShape", "UrdfCollision", "UrdfInertial", "UrdfLink", "UrdfJoint", "UrdfModel", "read_urdf", "JOINT_KINDS"]

JOINT_KINDS = ("revolute", "continuous", "prismatic", "fixed", "floating")
_REFUSED_KINDS = {"planar": "a planar joint (2 translations and a rotation) is not supported here; model it with two "
                            "prismatic joints and a revolute joint between massive links"}
_XACRO_NS = "{http://www.ros.org/wiki/xacro}"


@dataclass(frozen=True, eq=False)
class UrdfShape:
    """A collision shape in its geometry frame G. type: "box" (size: full edges [m]), "cylinder"
    or "capsule" (radius, length [m], along G's z axis), "sphere" (radius), "mesh" (file: an
    absolute path; scale: per axis)."""

    type: str
    size: tuple[float, float, float] | None = None
    radius: float | None = None
    length: float | None = None
    file: str | None = None
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)

    def table(self) -> dict:
        """The scene file's shape table of this shape."""
        out = {"type": self.type}
        if self.type == "box":
            out["size"] = list(self.size)
        elif self.type == "sphere":
            out["radius"] = self.radius
        elif self.type in ("cylinder", "capsule"):
            out.update(radius=self.radius, length=self.length)
        else:
            out.update(file=self.file, scale=list(self.scale))
        return out


@dataclass(frozen=True, eq=False)
class UrdfCollision:
    """One <collision>: its name (None when the file gives none), the pose of its geometry frame
    G in the link frame L (p_LG [m], R_LG), and its shape."""

    name: str | None
    p_LG: np.ndarray
    R_LG: np.ndarray
    shape: UrdfShape


@dataclass(frozen=True, eq=False)
class UrdfInertial:
    """A link's <inertial>: mass [kg]; the centre-of-mass frame C in the link frame L (p_LC [m],
    R_LC); I_C (3, 3) [kg m^2]: the inertia about the centre of mass in C's axes."""

    mass: float
    p_LC: np.ndarray
    R_LC: np.ndarray
    I_C: np.ndarray

    def inertia_L(self) -> np.ndarray:
        """The inertia about the centre of mass in the link's axes [kg m^2]: R_LC I_C R_LC^T."""
        return self.R_LC @ self.I_C @ self.R_LC.T


@dataclass(frozen=True, eq=False)
class UrdfLink:
    """A link: name, inertial (None when the file gives none: a massless link, as is a mass of
    0), collision shapes in file order."""

    name: str
    inertial: UrdfInertial | None
    collisions: tuple[UrdfCollision, ...]

    @property
    def massless(self) -> bool:
        return self.inertial is None or self.inertial.mass == 0.0


@dataclass(frozen=True, eq=False)
class UrdfJoint:
    """A joint from its parent link P to its child link C. p_PJ [m], R_PJ: the joint frame J in
    P (C's frame is J at the joint's zero position); axis_J: unit axis in J (revolute,
    continuous, prismatic). lower, upper [rad or m]: position limits or None; effort [N m or N]:
    the URDF's effort limit (None: not given, or 0); damping [N m s/rad or N s/m], friction
    [N m or N] >= 0."""

    name: str
    type: str
    parent: str
    child: str
    p_PJ: np.ndarray
    R_PJ: np.ndarray
    axis_J: np.ndarray
    lower: float | None = None
    upper: float | None = None
    effort: float | None = None
    damping: float = 0.0
    friction: float = 0.0

    @property
    def moves(self) -> bool:
        """True for a joint with one degree of freedom (revolute, continuous, prismatic)."""
        return self.type in ("revolute", "continuous", "prismatic")


@dataclass(frozen=True, eq=False)
class UrdfModel:
    """A URDF robot: name, its file (absolute), links by name (file order), joints (file order),
    the root link's name, and tree_order: every link, each after its parent."""

    name: str
    path: str
    links: dict[str, UrdfLink]
    joints: tuple[UrdfJoint, ...]
    root: str
    tree_order: tuple[str, ...] = field(default=())

    def parent_joint(self, link: str) -> UrdfJoint | None:
        """The joint whose child is `link` (None for the root)."""
        return next((j for j in self.joints if j.child == link), None)


class _Element:
    """An XML element with typed attribute access; errors name the file and where the element is."""

    def __init__(self, element: ET.Element, where: str, path: str):
        self.element, self.where, self.path = element, where, path

    def error(self, message: str) -> SceneError:
        return SceneError(f"{self.path}: {self.where}: {message}")

    def child(self, tag: str, required: bool = False) -> "_Element | None":
        found = self.element.findall(tag)
        if len(found) > 1:
            raise self.error(f"has {len(found)} <{tag}> elements; the URDF specification allows one")
        if not found:
            if required:
                raise self.error(f"needs a <{tag}> element")
            return None
        return _Element(found[0], f"{self.where}: <{tag}>", self.path)

    def text(self, name: str, required: bool = False) -> str | None:
        value = self.element.get(name)
        if value is None:
            if required:
                raise self.error(f"attribute '{name}' is required")
            return None
        if "${" in value or "$(" in value:
            raise self.error(f"attribute '{name}' is a xacro expression ({value!r}): expand the file with xacro first")
        return value

    def numbers(self, name: str, n: int | tuple[int, ...], default=None, required: bool = False) -> tuple[float, ...] | None:
        """The attribute's n whitespace-separated finite numbers (n may list the counts allowed)."""
        raw = self.text(name, required)
        if raw is None:
            return default
        counts = (n,) if isinstance(n, int) else n
        what = "a number" if counts == (1,) else f"{' or '.join(map(str, counts))} numbers"
        try:
            values = tuple(float(x) for x in raw.split())
        except ValueError:
            raise self.error(f"attribute '{name}' must be {what}, got {raw!r}") from None
        if len(values) not in counts:
            raise self.error(f"attribute '{name}' must be {what}, got {raw!r}")
        if not all(math.isfinite(v) for v in values):
            raise self.error(f"attribute '{name}' must be finite, got {raw!r}")
        return values

    def number(self, name: str, default: float | None = None, required: bool = False, minimum: float | None = None,
               positive: bool = False) -> float | None:
        value = self.numbers(name, 1, required=required)
        if value is None:
            return default
        v = value[0]
        if positive and not v > 0:
            raise self.error(f"attribute '{name}' must be > 0, got {v:g}")
        if minimum is not None and v < minimum:
            raise self.error(f"attribute '{name}' must be >= {minimum:g}, got {v:g}")
        return v


def _origin(parent: _Element) -> tuple[np.ndarray, np.ndarray]:
    """(p, R) of the parent element's <origin xyz rpy> (identity when absent)."""
    origin = parent.child("origin")
    if origin is None:
        return np.zeros(3), np.eye(3)
    xyz = origin.numbers("xyz", 3, (0.0, 0.0, 0.0))
    rpy = origin.numbers("rpy", 3, (0.0, 0.0, 0.0))
    return np.array(xyz, dtype=np.float64), rpy_matrix(rpy)


def resolve_mesh_path(filename: str, urdf_dir: Path) -> tuple[Path | None, list[Path]]:
    """The file a URDF mesh name points to (module docstring) and the paths tried; (None, tried)
    when none exists."""
    if filename.startswith("package://"):
        package, _, rest = filename[len("package://"):].partition("/")
        tried = []
        for folder in (urdf_dir, *urdf_dir.parents):
            for candidate in ([folder / rest] if folder.name == package else []) + [folder / package / rest]:
                tried.append(candidate)
                if candidate.is_file():
                    return candidate.resolve(), tried
        return None, tried
    name = filename[len("file://"):] if filename.startswith("file://") else filename
    path = Path(name)
    if not path.is_absolute():
        path = urdf_dir / path
    return (path.resolve() if path.is_file() else None), [path]


def _shape(geometry: _Element, urdf_dir: Path) -> UrdfShape:
    kids = [k for k in geometry.element if isinstance(k.tag, str)]
    if len(kids) != 1:
        raise geometry.error(f"needs exactly one of <box>, <cylinder>, <sphere>, <mesh>, <capsule>; found "
                             f"{[k.tag for k in kids] or 'none'}")
    tag = kids[0].tag
    e = _Element(kids[0], f"{geometry.where}: <{tag}>", geometry.path)
    if tag == "box":
        size = e.numbers("size", 3, required=True)
        if not all(s > 0 for s in size):
            raise e.error(f"attribute 'size' must be 3 positive edge lengths [m], got {list(size)}")
        return UrdfShape("box", size=size)
    if tag == "sphere":
        return UrdfShape("sphere", radius=e.number("radius", required=True, positive=True))
    if tag in ("cylinder", "capsule"):
        return UrdfShape(tag, radius=e.number("radius", required=True, positive=True),
                         length=e.number("length", required=True, positive=True))
    if tag == "mesh":
        filename = e.text("filename", required=True)
        scale = e.numbers("scale", (1, 3), (1.0, 1.0, 1.0))
        scale = scale * 3 if len(scale) == 1 else scale
        if not all(s > 0 for s in scale):
            raise e.error(f"attribute 'scale' must be positive (a mirrored mesh would be inside out), got {list(scale)}")
        path, tried = resolve_mesh_path(filename, urdf_dir)
        if path is None:
            raise e.error(f"mesh file {filename!r} not found (looked for {', '.join(map(str, tried[:6]))}"
                          f"{' ...' if len(tried) > 6 else ''})")
        return UrdfShape("mesh", file=str(path), scale=scale)
    raise e.error(f"unknown geometry <{tag}> (expected <box>, <cylinder>, <sphere>, <mesh> or <capsule>)")


def _inertial(link: _Element) -> UrdfInertial | None:
    inertial = link.child("inertial")
    if inertial is None:
        return None
    mass = inertial.child("mass", required=True).number("value", required=True, minimum=0.0)
    inertia = inertial.child("inertia", required=True)
    ixx, ixy, ixz, iyy, iyz, izz = (inertia.number(k, required=True) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
    I_C = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    if mass > 0:
        problem = inertia_problem(I_C)
        if problem:
            raise inertia.error(problem)
    p_LC, R_LC = _origin(inertial)
    return UrdfInertial(mass, p_LC, R_LC, I_C)


def _link(element: ET.Element, index: int, path: str, urdf_dir: Path) -> UrdfLink:
    name = element.get("name")
    e = _Element(element, f"link '{name}'" if name else f"<link> #{index}", path)
    if not name or not name.strip():
        raise e.error("attribute 'name' is required")
    collisions = []
    for k, c in enumerate(element.findall("collision")):
        cname = c.get("name")
        ce = _Element(c, f"{e.where}: <collision> " + (f"'{cname}'" if cname else f"#{k}"), path)
        p, R = _origin(ce)
        collisions.append(UrdfCollision(cname, p, R, _shape(ce.child("geometry", required=True), urdf_dir)))
    return UrdfLink(name, _inertial(e), tuple(collisions))


def _joint(element: ET.Element, index: int, path: str, links: dict[str, UrdfLink]) -> UrdfJoint:
    name = element.get("name")
    e = _Element(element, f"joint '{name}'" if name else f"<joint> #{index}", path)
    if not name or not name.strip():
        raise e.error("attribute 'name' is required")
    kind = e.text("type", required=True)
    if kind in _REFUSED_KINDS:
        raise e.error(f"type '{kind}': {_REFUSED_KINDS[kind]}")
    if kind not in JOINT_KINDS:
        raise e.error(f"attribute 'type' must be one of {list(JOINT_KINDS)}, got {kind!r}")
    if e.child("mimic") is not None:
        raise e.error("<mimic> joints are not supported (no coupling between joints here): remove the <mimic> element "
                      "and drive both joints, or make the follower a separate actuated joint")
    ends = {}
    for tag in ("parent", "child"):
        link = e.child(tag, required=True).text("link", required=True)
        if link not in links:
            raise e.error(f"<{tag} link='{link}'>: no link named {link!r} in the file")
        ends[tag] = link
    if ends["parent"] == ends["child"]:
        raise e.error(f"parent and child are the same link ({ends['child']!r})")
    p_PJ, R_PJ = _origin(e)
    axis = np.array([1.0, 0.0, 0.0])
    axis_e = e.child("axis")
    if axis_e is not None:
        axis = np.array(axis_e.numbers("xyz", 3, (1.0, 0.0, 0.0)))
        if kind in ("revolute", "continuous", "prismatic") and np.linalg.norm(axis) < 1e-9:
            raise axis_e.error(f"attribute 'xyz' must be a nonzero vector, got {axis.tolist()}")
    if np.linalg.norm(axis) > 0:
        axis = axis / np.linalg.norm(axis)
    lower = upper = effort = None
    limit = e.child("limit")
    if limit is not None:
        effort = limit.number("effort", minimum=0.0) or None  # 0: not given (as many exported files write it)
        limit.number("velocity", minimum=0.0)  # checked, not used
        if kind in ("revolute", "prismatic") and any(limit.element.get(k) is not None for k in ("lower", "upper")):
            lower, upper = limit.number("lower", 0.0), limit.number("upper", 0.0)
            if not lower < upper:
                raise limit.error(f"lower ({lower:g}) must be below upper ({upper:g}); a joint that cannot move is "
                                  "type=\"fixed\"")
    damping = friction = 0.0
    dynamics = e.child("dynamics")
    if dynamics is not None:
        damping = dynamics.number("damping", 0.0, minimum=0.0)
        friction = dynamics.number("friction", 0.0, minimum=0.0)
    return UrdfJoint(name, kind, ends["parent"], ends["child"], p_PJ, R_PJ, axis, lower, upper, effort, damping, friction)


def _tree(joints: tuple[UrdfJoint, ...], links: dict[str, UrdfLink], path: str) -> tuple[str, tuple[str, ...]]:
    """The root link and every link in an order where each comes after its parent."""
    parent_of: dict[str, UrdfJoint] = {}
    for j in joints:
        if j.child in parent_of:
            raise SceneError(f"{path}: joint '{j.name}': link '{j.child}' is already the child of joint "
                             f"'{parent_of[j.child].name}'; a link has one parent joint (the links must form a tree)")
        parent_of[j.child] = j
    roots = [name for name in links if name not in parent_of]
    if len(roots) != 1:
        detail = (f"{len(roots)} links are no joint's child: {roots}; join them into one tree" if roots else
                  "every link is some joint's child: the joints form a loop")
        raise SceneError(f"{path}: the links must form one tree with one root: {detail}")
    children: dict[str, list[str]] = {}
    for j in joints:
        children.setdefault(j.parent, []).append(j.child)
    order, stack = [], [roots[0]]
    while stack:
        link = stack.pop()
        order.append(link)
        stack.extend(reversed(children.get(link, [])))
    unreachable = [name for name in links if name not in set(order)]
    if unreachable:
        raise SceneError(f"{path}: joint '{parent_of[unreachable[0]].name}': link '{unreachable[0]}' is not reachable "
                         f"from the root link '{roots[0]}': the joints form a loop")
    return roots[0], tuple(order)


def read_urdf(path: str | Path) -> UrdfModel:
    """Read and validate a URDF file. Raises SceneError naming the file, the link or joint, the
    element and the attribute."""
    path = Path(path)
    if not path.is_file():
        raise SceneError(f"URDF file not found: {path}" + (" (a directory)" if path.is_dir() else ""))
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise SceneError(f"{path}: not well-formed XML: {exc}") from exc
    except OSError as exc:
        raise SceneError(f"{path}: cannot read the URDF file: {exc.strerror or exc}") from exc
    source = str(path)
    if any(isinstance(e.tag, str) and e.tag.startswith(_XACRO_NS) for e in root.iter()):
        raise SceneError(f"{source}: is a xacro file (xacro: elements): expand it with `xacro` into a plain URDF first")
    if root.tag != "robot":
        raise SceneError(f"{source}: the root element is <{root.tag}>, not <robot>: not a URDF file")
    urdf_dir = path.resolve().parent
    links: dict[str, UrdfLink] = {}
    for i, element in enumerate(root.findall("link")):
        link = _link(element, i, source, urdf_dir)
        if link.name in links:
            raise SceneError(f"{source}: link '{link.name}': the name is used by more than one <link>")
        links[link.name] = link
    if not links:
        raise SceneError(f"{source}: the robot has no <link>")
    joints = tuple(_joint(element, i, source, links) for i, element in enumerate(root.findall("joint")))
    names = [j.name for j in joints]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise SceneError(f"{source}: joint '{dup}': the name is used by more than one <joint>")
    base, order = _tree(joints, links, source)
    return UrdfModel(root.get("name") or path.stem, str(path.resolve()), links, joints, base, order)
