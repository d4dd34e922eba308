"""From a scene body's geometries to their contact geometry (host, float64) and mass
properties, in the body frame: each geometry is built in its own frame G, then its vertices
are moved by X_BG on the host, so that every kernel works in the body frame as before."""

from __future__ import annotations

from dataclasses import dataclass
import warnings
from functools import lru_cache

import numpy as np

from ..errors import HydroWarning, MeshError, SceneError
from ..rotation import rotation_matrices
from ..scene import Body, Contact, GeometrySpec, Shape
from ..types import HALFSPACE, TETMESH, TRIMESH
from . import primitives as prim
from .mass import UnitMassProperties, posed_props, box_props, capsule_props, cylinder_props, ellipsoid_props, sphere_props, surface_props
from .mesh import TetMesh, TriMesh, boundary_faces
from .meshfile import compliant_convex, distance_field_tetmesh, is_convex, load_surface, load_tetmesh
from .tetrahedralize import compliant_from_surface

__all__ = ["Geometry", "build_geometry", "body_geometries", "compliant_primitive", "posed", "PRIMITIVES", "TETMESH", "TRIMESH",
           "HALFSPACE"]


@dataclass(frozen=True, eq=False)
class Geometry:
    """One contact geometry of a body, in its body frame B.

    kind: TETMESH (compliant volume), TRIMESH (rigid surface) or HALFSPACE (z <= 0 of the body
    frame). compliant: hydroelastic compliance. tets: the compliant mesh (TETMESH).
    surface: rigid contact surface (TRIMESH) or the boundary used for drawing (TETMESH).
    modulus E [Pa]; slab_gradient E/H [Pa/m] of a compliant half-space; margin [m].
    mass: unit-density mass properties of the shape, in B (None for a half-space)."""

    kind: int
    compliant: bool
    tets: TetMesh | None
    surface: TriMesh | None
    modulus: float
    slab_gradient: float
    margin: float
    mass: UnitMassProperties | None


def body_geometries(body: Body, source: str) -> list[Geometry]:
    """The geometries of `body` in its body frame, in its order; errors name the scene file,
    the body, the geometry and the key."""
    return [build_geometry(spec, f"{source}: {body.geometry_label(i)}") for i, spec in enumerate(body.geometries)]


def build_geometry(spec: GeometrySpec, where: str) -> Geometry:
    """Geometry `spec` in its body's frame; `where` ("file: body 'b'[: geometry 'g']")
    prefixes every error."""
    shape, contact = spec.shape, spec.contact
    if shape.type in ("sphere", "ellipsoid", "cylinder", "capsule"):
        problem = prim.resolution_problem(shape.type, contact.compliant, contact.resolution, shape.radius or 0.0,
                                          shape.length or 0.0, shape.radii)
        if problem:
            raise SceneError(f"{where}: key 'contact.resolution': {problem}")
    try:
        geometry = _build(shape, contact)
    except MeshError as exc:
        key = "shape.file" if shape.file else "shape"
        raise SceneError(f"{where}: key '{key}': {exc}") from exc
    return posed(geometry, spec.p_BG, spec.q_BG) if spec.posed else geometry


@lru_cache(maxsize=256)
def posed(geometry: Geometry, p_BG: tuple, q_BG: tuple) -> Geometry:
    """`geometry` (built in its frame G) expressed in the body frame B: every vertex x_G becomes
    R_BG x_G + p_BG in float64; the pressures stay per vertex, so the gradients computed from
    the moved vertices are R_BG times the old ones (a rotation keeps tets positively oriented
    and triangles outward). Cached, so that equal geometries at equal poses share their
    element pools. Half-spaces never come here (scene refuses a posed one)."""
    R = rotation_matrices(q_BG)
    p = np.asarray(p_BG, dtype=np.float64)

    def move(x: np.ndarray) -> np.ndarray:
        return x @ R.T + p

    tets = None if geometry.tets is None else TetMesh(move(geometry.tets.vertices), geometry.tets.tets, geometry.tets.pressure)
    surface = None if geometry.surface is None else TriMesh(move(geometry.surface.vertices), geometry.surface.triangles)
    mass = None if geometry.mass is None else posed_props(geometry.mass, R, p)
    return Geometry(geometry.kind, geometry.compliant, tets, surface, geometry.modulus, geometry.slab_gradient, geometry.margin,
                    mass)


@lru_cache(maxsize=256)
def _build(shape: Shape, contact: Contact) -> Geometry:
    t = shape.type
    E = contact.modulus or 0.0
    h = contact.resolution
    delta = contact.margin
    if t == "halfspace":
        slab = E / contact.slab_thickness if contact.compliant else 0.0
        return Geometry(HALFSPACE, contact.compliant, None, None, E, slab, delta, None)
    if t in ("mesh", "tetmesh"):
        return _build_file(shape, contact)
    mass = {
        "sphere": lambda: sphere_props(shape.radius),
        "box": lambda: box_props(shape.size),
        "cylinder": lambda: cylinder_props(shape.radius, shape.length),
        "capsule": lambda: capsule_props(shape.radius, shape.length),
        "ellipsoid": lambda: ellipsoid_props(shape.radii),
    }[t]()
    if contact.compliant:
        tets = compliant_primitive(shape, E, h, delta)
        return Geometry(TETMESH, True, tets, tets.surface(), E, 0.0, delta, mass)
    surface = {
        "sphere": lambda: prim.rigid_sphere(shape.radius, h),
        "box": lambda: prim.rigid_box(shape.size),
        "cylinder": lambda: prim.rigid_cylinder(shape.radius, shape.length, h),
        "capsule": lambda: prim.rigid_capsule(shape.radius, shape.length, h),
        "ellipsoid": lambda: prim.rigid_ellipsoid(shape.radii, h),
    }[t]()
    return Geometry(TRIMESH, False, None, surface, 0.0, 0.0, 0.0, mass)


PRIMITIVES = ("sphere", "box", "cylinder", "capsule", "ellipsoid")
"""The shapes meshed from their dimensions (the others are half-spaces and files)."""


def compliant_primitive(shape: Shape, modulus: float, resolution: float | None, margin: float) -> TetMesh:
    """The compliant tet mesh of a primitive `shape` (one of PRIMITIVES) in its frame G, with
    modulus E [Pa], target edge `resolution` [m] (round shapes) and margin delta [m]."""
    t, E, h, delta = shape.type, modulus, resolution, margin
    return {
        "sphere": lambda: prim.compliant_sphere(shape.radius, E, h, delta),
        "box": lambda: prim.compliant_box(shape.size, E, delta),
        "cylinder": lambda: prim.compliant_cylinder(shape.radius, shape.length, E, h, delta),
        "capsule": lambda: prim.compliant_capsule(shape.radius, shape.length, E, h, delta),
        "ellipsoid": lambda: prim.compliant_ellipsoid(shape.radii, E, h, delta),
    }[t]().validate(f"{t} mesh")


def _build_file(shape: Shape, contact: Contact) -> Geometry:
    scale = np.asarray(shape.scale)
    E = contact.modulus
    if shape.type == "mesh":
        surface = load_surface(shape.file)
        surface = TriMesh(surface.vertices * scale, surface.triangles)
        mass = surface_props(surface)
        if not contact.compliant:
            return Geometry(TRIMESH, False, None, surface, 0.0, 0.0, 0.0, mass)
        if is_convex(surface):
            tets = compliant_convex(surface, E, contact.margin).validate(f"convex mesh {shape.file}")
        else:
            tets = compliant_from_surface(surface, E, contact.resolution, contact.margin, what=f"mesh file {shape.file}")
        return Geometry(TETMESH, True, tets, tets.surface(), E, 0.0, contact.margin, mass)
    vertices, tets, pressure = load_tetmesh(shape.file)
    vertices = vertices * scale
    if contact.compliant:
        if contact.margin > 0:
            raise MeshError("margin is not supported for a tetmesh shape yet (the field would need extrapolating); use margin = 0")
        if pressure is None:
            if E is None:
                raise MeshError("has no point-data array 'pressure': give contact.modulus to build a distance-to-boundary field")
            mesh = TetMesh(vertices, tets, np.zeros(len(vertices))).validate(f"tet mesh {shape.file}")
            mesh = distance_field_tetmesh(mesh.vertices, mesh.tets, E)
        else:
            if len(pressure) != len(vertices):
                raise MeshError(f"point data 'pressure' has {len(pressure)} values for {len(vertices)} vertices")
            mesh = TetMesh(vertices, tets, pressure).validate(f"tet mesh {shape.file}")
            check_pressure_field(mesh, shape.file)
        mesh = mesh.validate(f"tet mesh {shape.file}")
        surface = mesh.surface().validate(f"boundary of tet mesh {shape.file}")
        return Geometry(TETMESH, True, mesh, surface, E or float(mesh.pressure.max()), 0.0, 0.0, surface_props(surface))
    mesh = TetMesh(vertices, tets, np.zeros(len(vertices))).validate(f"tet mesh {shape.file}")
    surface = mesh.surface().validate(f"boundary of tet mesh {shape.file}")
    return Geometry(TRIMESH, False, None, surface, 0.0, 0.0, 0.0, surface_props(surface))


BOUNDARY_PRESSURE_RTOL = 1e-6
"""A given pressure field counts as zero on the boundary where |p| <= this x max(p)."""


def check_pressure_field(mesh: TetMesh, file: str) -> None:
    """A pressure field given in a VTK file must be finite (TetMesh.validate), >= 0 everywhere
    with a positive maximum (MeshError otherwise: a negative pressure pulls bodies together),
    and should be 0 on the boundary (HydroWarning otherwise: contact then starts with a jump of
    force at first touch instead of growing from zero, unlike every field this package builds
    and Drake's; legal, e.g. for a pre-loaded pad, but rarely meant)."""
    p = mesh.pressure
    if p.min() < 0:
        i = int(np.argmin(p))
        raise MeshError(f"{file}: point data 'pressure' is negative at vertex {i}: {p[i]:g} Pa; a hydroelastic pressure "
                        "field is >= 0 (0 on the boundary, growing inward)")
    if p.max() <= 0:
        raise MeshError(f"{file}: point data 'pressure' is 0 everywhere; the field must be positive inside the body")
    boundary = np.unique(boundary_faces(mesh.tets))
    off = np.abs(p[boundary]) > BOUNDARY_PRESSURE_RTOL * p.max()
    if off.any():
        i = int(boundary[np.argmax(off)])
        warnings.warn(f"{file}: point data 'pressure' is not 0 on the boundary ({int(off.sum())} of {len(boundary)} boundary "
                      f"vertices, e.g. vertex {i}: {p[i]:g} Pa, max {p.max():g} Pa): contact will start with a jump of "
                      "force at first touch", HydroWarning, stacklevel=2)
