"""Compliant twins: the contact of two rigid geometries (host, float64).

Hydroelastic contact needs a pressure field on at least one side of a pair, and a rigid
geometry has none. Drake falls back to point contact for such a pair; Genesis gives every
rigid geometry a tet mesh and treats it as a stiff compliant body. We do the latter, pair by
pair: in a pair of two rigid geometries (of two bodies, one of them dynamic, not filtered),
one side is replaced, for that pair only, by its *compliant twin*: the tet mesh and pressure
field the same shape would get if it were declared compliant, with the scene's
`rigid_modulus` E (scene.RIGID_MODULUS). The pair then runs through the compliant-rigid
pipeline unchanged (tet-triangle, tet-half-space, slab-triangle), and the geometry's pairs
with compliant geometries keep its rigid surface.

Stiffness. A twin's contact is a spring of stiffness about E A / L (footprint A, half
thickness L); contact.assemble caps every patch at the solver's near-rigid floor (a spring of
period 2 pi dt / beta per contact, Drake SAP's rule). With E large enough that the floor
binds, the contact rows (k and phi0 = -p0 / g, both independent of E once scaled) and so the
motion do not depend on E: the pair behaves as SAP's near-rigid contact. The README's
"Rigid-rigid contact" has the measurements behind scene.RIGID_MODULUS.

Which side gets the twin (choose_twin):
1. Never a half-space when the other side can take a twin: a half-space's field would need a
   thickness the scene does not give (a slab of thickness H), while a twin's field is the
   shape's own, the field the user gets by declaring it compliant.
2. Of two sides that can, the one with the smaller bounding ball. The penetration is read
   from the field as phi0 = -p0 / g, where p0 is a difference of pressures of size E and
   g ~ E / L: its float32 round-off is about 1e-7 L, so the smaller geometry measures the
   (tiny) penetration of a near-rigid contact best; a small twin on a large surface also
   has few tets in contact. Equal balls: the geometry listed first.
3. A shape that cannot take a twin: a half-space (rule 1), and a shape whose compliant mesh
   cannot be built (a non-convex surface that the tetrahedraliser, nonconvex_twin, fails to
   fill; a primitive whose resolution asks for too many elements). A half-space against such
   a mesh becomes a compliant slab (slab-triangle pair) of thickness H = the mesh's smallest
   half extent (slab_thickness), so that its gradient E / H is the one a twin of the mesh
   would have. Two geometries neither of which can take a twin make no pair:
   model.check_supported refuses the scene, naming both.

Twins have no mass (the body's mass properties are its scene geometries'), are not drawn,
and carry the material of the geometry they stand for (friction, dissipation, relaxation
time; model.combine_pair_parameters combines the dissipation of a twin pair as Drake's rule
does for two sides of equal modulus)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import MeshError
from ..scene import GeometrySpec, Shape
from ..types import HALFSPACE, TETMESH, TRIMESH
from . import primitives as prim
from .build import PRIMITIVES, Geometry, compliant_primitive, posed
from .mesh import TetMesh, TriMesh
from .meshfile import compliant_convex, distance_field_tetmesh, is_convex, load_tetmesh

__all__ = ["NoTwin", "Side", "choose_twin", "twin_geometry", "slab_twin", "slab_thickness", "nonconvex_twin",
           "bounding_radius", "max_gradient"]


class NoTwin(Exception):
    """A geometry cannot stand in as a compliant twin; the message says why and what to do."""


@dataclass(frozen=True)
class Side:
    """One side of a rigid-rigid pair: its scene geometry index, spec, rigid geometry (in the
    body frame B) and how messages name it ("body 'b'" or "body 'b': geometry 'g'")."""

    index: int
    spec: GeometrySpec
    geometry: Geometry
    label: str


def bounding_radius(geometry: Geometry) -> float:
    """Radius [m] of the bounding ball of a mesh geometry's surface about its box centre (inf
    for a half-space)."""
    if geometry.kind == HALFSPACE:
        return float("inf")
    x = geometry.surface.vertices
    centre = 0.5 * (x.min(axis=0) + x.max(axis=0))
    return float(np.linalg.norm(x - centre, axis=1).max())


def slab_thickness(other: Geometry) -> float:
    """Thickness H [m] of the slab a rigid half-space becomes against the rigid mesh `other`:
    its smallest half extent (body-frame box), so that the slab's gradient E / H is the one a
    twin of `other` would have (E over its half thickness; advice.py uses the same scale)."""
    x = other.surface.vertices
    return float(0.5 * np.min(x.max(axis=0) - x.min(axis=0)))


@lru_cache(maxsize=64)
def slab_twin(modulus: float, thickness: float) -> Geometry:
    """A rigid half-space as a compliant slab: p = E depth / H below its plane."""
    return Geometry(HALFSPACE, True, None, None, modulus, modulus / thickness, 0.0, None)


def nonconvex_twin(surface: TriMesh, modulus: float, resolution: float | None) -> TetMesh:
    """The compliant twin of a closed non-convex surface (frame B) of modulus E [Pa]: tets by
    the tetrahedraliser that compliant non-convex meshes use
    (geometry.tetrahedralize.compliant_from_surface: fTetWild, cached on disk) at the target
    edge length `resolution` (its default when None), with the distance-to-boundary field.
    MeshError when the surface cannot be made solid."""
    from .tetrahedralize import compliant_from_surface

    return compliant_from_surface(surface, modulus, resolution, what="a rigid non-convex mesh's compliant twin")


def twin_geometry(side: Side, modulus: float) -> Geometry:
    """The compliant twin of `side` with modulus E [Pa], in its body frame B: the tet mesh and
    field of the same shape declared compliant (resolution as given, margin 0). Raises NoTwin
    (with the reason) for a half-space, or a shape whose compliant mesh cannot be built."""
    spec, rigid = side.spec, side.geometry
    shape = spec.shape
    if shape.type == "halfspace":
        raise NoTwin("a half-space")
    if shape.type in PRIMITIVES:
        problem = shape.type != "box" and prim.resolution_problem(shape.type, True, spec.contact.resolution,
                                                                  shape.radius or 0.0, shape.length or 0.0, shape.radii)
        if problem:
            raise NoTwin(f"its compliant twin cannot be meshed (key 'contact.resolution': {problem})")
        twin = _primitive_twin(shape, spec.contact.resolution, modulus)
        return posed(twin, spec.p_BG, spec.q_BG) if spec.posed else twin
    try:
        if shape.type == "tetmesh":
            twin = _tetmesh_twin(shape, modulus)
            return posed(twin, spec.p_BG, spec.q_BG) if spec.posed else twin
        return _surface_twin(rigid, spec.contact.resolution, modulus)
    except MeshError as exc:
        raise NoTwin(f"its compliant twin cannot be built ({exc})") from exc


def _twin(tets: TetMesh, modulus: float) -> Geometry:
    return Geometry(TETMESH, True, tets, tets.surface(), modulus, 0.0, 0.0, None)


@lru_cache(maxsize=256)
def _primitive_twin(shape: Shape, resolution: float | None, modulus: float) -> Geometry:
    """A primitive's twin in its frame G (shared by equal shapes)."""
    return _twin(compliant_primitive(shape, modulus, resolution, 0.0), modulus)


@lru_cache(maxsize=64)
def _tetmesh_twin(shape: Shape, modulus: float) -> Geometry:
    """A rigid tet mesh's twin in G: its own tets with the distance-to-boundary field (a
    pressure array in the file belongs to the compliant use of the mesh and is not used)."""
    vertices, tets, _ = load_tetmesh(shape.file)
    mesh = TetMesh(vertices * np.asarray(shape.scale), tets, np.zeros(len(vertices))).validate(f"tet mesh {shape.file}")
    return _twin(distance_field_tetmesh(mesh.vertices, mesh.tets, modulus).validate(f"tet mesh {shape.file}"), modulus)


@lru_cache(maxsize=64)
def _surface_twin(rigid: Geometry, resolution: float | None, modulus: float) -> Geometry:
    """A rigid surface mesh's twin, built from its surface in B: the fan of a convex one
    (meshfile.compliant_convex, Drake's convex field), nonconvex_twin otherwise."""
    surface = rigid.surface
    if is_convex(surface):
        return _twin(compliant_convex(surface, modulus).validate("convex mesh twin"), modulus)
    return _twin(nonconvex_twin(surface, modulus, resolution).validate("non-convex mesh twin"), modulus)


def choose_twin(a: Side, b: Side, modulus: float) -> tuple[int, Geometry]:
    """(which side, 0 for a or 1 for b, and its twin) for the rigid pair (a, b), by the rules
    of the module docstring. Raises NoTwin naming why neither side can take one."""
    sides = (a, b)
    order = sorted((s for s in (0, 1) if sides[s].geometry.kind != HALFSPACE),
                   key=lambda s: (bounding_radius(sides[s].geometry), sides[s].index))
    reasons = {}
    for s in order:
        try:
            return s, twin_geometry(sides[s], modulus)
        except NoTwin as exc:
            reasons[s] = str(exc)
    for s in (0, 1):
        other = sides[1 - s].geometry
        if sides[s].geometry.kind == HALFSPACE and other.kind == TRIMESH:
            return s, slab_twin(modulus, slab_thickness(other))
    for s in (0, 1):
        reasons.setdefault(s, "a half-space")
    raise NoTwin("; ".join(f"{sides[s].label}: {reasons[s]}" for s in (0, 1)))


def max_gradient(geometry: Geometry) -> float:
    """The largest pressure gradient [Pa/m] of a compliant geometry (a slab's E / H)."""
    if geometry.kind == HALFSPACE:
        return float(geometry.slab_gradient)
    return float(np.linalg.norm(geometry.tets.gradients(), axis=1).max())
