"""Compliant geometry for any closed triangle surface, convex or not (host, float64).

compliant_from_surface() fills the solid with tets (fTetWild, geometry/tetwild.py), gives it
the pressure field p = E e with e = d / d_max, d the distance to the tet mesh's boundary (Elandt
2019 §VI-A; meshfile.distance_extent, which also splits tets whose four vertices lie on the
boundary), and keeps the result in the on-disk cache (diskcache), keyed by everything it depends
on except the modulus: the cache holds e, and p = E e is formed after loading, so one entry
serves every modulus.

What cannot be made solid is refused with a MeshError naming the surface and the reason: open,
non-manifold or inconsistently oriented (TriMesh.validate), inverted (negative enclosed volume),
degenerate (no enclosed volume, zero-area triangles), crossing itself
(selfintersection.crossing_triangles), or a mesh from fTetWild that is not a valid solid within
the envelope of the surface (a failure of the mesher).

Margin delta (Drake's hydroelastic margin, as the primitives do it): the boundary vertices move
out by delta along their angle-weighted normals and the field written for the original solid is
evaluated there, e = -(distance to the original boundary) / d_max, so p = 0 stays on the
original surface and p < 0 in the skirt."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from .. import diskcache
from ..errors import HydroWarning, MeshError
from .mesh import TetMesh, TriMesh, boundary_faces, tet_signed_volumes
from .meshfile import distance_extent, distance_to_surface
from .primitives import MAX_ELEMENTS, extent_to_pressure
from .selfintersection import crossing_triangles
from .tetwild import MESHER, mesher_version, tetwild

__all__ = ["ALGORITHM_VERSION", "ENVELOPE_REL", "ExtentMesh", "default_resolution", "extent_mesh",
           "compliant_from_surface", "SPLIT_SHARE_WARNING"]

ALGORITHM_VERSION = 1
"""Version of what this module does to fTetWild's output (part of the cache key): raise it
whenever a change here would change a cached mesh or field."""

ENVELOPE_REL = 1e-3
"""fTetWild's envelope as a fraction of the surface's bounding-box diagonal (its default): the
tet mesh's boundary lies within this distance of the surface. bench/tetrahedralize.py measured
a quarter of it (2.5e-4) at 3-4 times the meshing time."""

SPLIT_SHARE_WARNING = 0.25
"""Above this share of tets with four boundary vertices (split at their centroids) the
resolution is coarse for the body's thickness, and a HydroWarning says so."""

_CACHE_KIND = "tetmesh"
_TETS_PER_REGULAR_VOLUME = 2.0  # fTetWild's tets per regular-tet volume h^3/(6 sqrt 2) of the solid, with margin


@dataclass(frozen=True)
class ExtentMesh:
    """A tetrahedralised solid with its extent field.

    mesh: vertices (n, 3) [m] in the surface's frame, positively oriented tets (m, 4), and as
    `pressure` the extent e in [0, 1] (0 on the boundary, 1 at the deepest vertex).
    depth: d_max, the largest distance of a vertex to the boundary [m] (e = d / d_max).
    split: how many tets had four boundary vertices and were split at their centroids."""

    mesh: TetMesh
    depth: float
    split: int


def default_resolution(surface: TriMesh) -> float:
    """Target tet edge length [m] when none is given: a quarter of the smallest extent of the
    surface's axis-aligned bounding box (for a sphere of radius R that is R/2, the primitives'
    default; bodies thinner than that in places get a HydroWarning once meshed)."""
    return float(np.ptp(surface.vertices, axis=0).min()) / 4.0


def compliant_from_surface(surface: TriMesh, modulus: float, resolution: float | None = None, margin: float = 0.0, *,
                           what: str = "surface", cache: bool = True) -> TetMesh:
    """Compliant tet mesh of the solid bounded by `surface` (closed, outward; frame G, [m]).

    modulus: hydroelastic modulus E [Pa], the pressure at the deepest vertex. resolution:
    target tet edge length [m] (default_resolution when None). margin: delta [m] >= 0 (see the
    module docstring). what: names the surface in error messages (e.g. "mesh file part.obj").
    cache: look up and store the extent mesh in the on-disk cache.
    Returns a validated TetMesh with pressure [Pa] in G; MeshError when the surface cannot be
    made solid."""
    modulus = _number(modulus, "modulus [Pa]", what, 0.0, strict=True)
    margin = _number(margin, "margin [m]", what, 0.0, strict=False)
    extent = extent_mesh(surface, resolution, what=what, cache=cache)
    mesh = extent.mesh
    pressure = extent_to_pressure(modulus, mesh.pressure)
    if margin > 0:
        vertices, boundary_extent, boundary = _inflate(mesh, extent.depth, margin)
        pressure[boundary] = modulus * boundary_extent
        mesh = TetMesh(vertices, mesh.tets, pressure)
        volumes = tet_signed_volumes(mesh.vertices, mesh.tets)
        if np.any(volumes <= 0):
            i = int(np.argmin(volumes))
            raise MeshError(f"{what}: margin {margin:g} m inverts {int(np.sum(volumes <= 0))} tet(s) of its mesh (tet {i}: "
                            f"volume {volumes[i]:.3e} m^3) where the mesh is thinner than the margin; use a smaller margin")
        return mesh.validate(f"{what} (inflated by margin {margin:g} m)")
    return TetMesh(mesh.vertices, mesh.tets, pressure).validate(what)


def extent_mesh(surface: TriMesh, resolution: float | None = None, *, what: str = "surface",
                cache: bool = True) -> ExtentMesh:
    """The surface's solid as tets with the extent field, from the on-disk cache when an entry
    for the same surface, resolution, mesher version and ALGORITHM_VERSION exists, else built
    (and stored). Warns (HydroWarning) when many tets had to be split (a coarse resolution for
    the body's thickness), cached or not."""
    surface = _checked_surface(surface, what)
    h = default_resolution(surface) if resolution is None else _number(resolution, "resolution [m]", what, 0.0, strict=True)
    key = diskcache.digest(_CACHE_KIND, ALGORITHM_VERSION, MESHER, mesher_version(), ENVELOPE_REL, surface.vertices,
                           surface.triangles, h)
    names = ("vertices", "tets", "extent", "depth", "split")
    arrays = diskcache.load(_CACHE_KIND, key, names, check=_check_entry) if cache else None
    if arrays is None:
        built = _build(surface, h, what)
        if cache:
            diskcache.store(_CACHE_KIND, key, {"vertices": built.mesh.vertices, "tets": built.mesh.tets,
                                               "extent": built.mesh.pressure, "depth": np.float64(built.depth),
                                               "split": np.int64(built.split)})
    else:
        built = ExtentMesh(TetMesh(arrays["vertices"], arrays["tets"], arrays["extent"]), float(arrays["depth"]),
                           int(arrays["split"]))
    share = built.split / max(1, built.mesh.tet_count - 3 * built.split)  # share of the tets before splitting
    if share > SPLIT_SHARE_WARNING:
        warnings.warn(f"{what}: {100 * share:.0f}% of its tets have all four vertices on the boundary at resolution {h:g} m "
                      f"(the body is about {2 * built.depth:.3g} m thick at its thickest); their centroids are the only inner "
                      f"vertices there, so the pressure field is coarse: use a resolution <= {built.depth:.3g} m",
                      HydroWarning, stacklevel=2)
    return built


def _checked_surface(surface: TriMesh, what: str) -> TriMesh:
    """`surface` after TriMesh.validate: closed, manifold, consistently oriented, no zero-area
    triangle, a positive enclosed volume (negative: inverted; negligible: degenerate)."""
    if not isinstance(surface, TriMesh):
        raise MeshError(f"{what}: expected a TriMesh, got {type(surface).__name__}")
    return surface.validate(what)


def _number(value, name: str, what: str, low: float, strict: bool) -> float:
    """`value` as a finite float above `low` (or at least `low` when not strict); MeshError naming it otherwise."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    if isinstance(value, bool) or not math.isfinite(x) or x < low or (strict and x == low):
        raise MeshError(f"{what}: {name} must be a finite number {'>' if strict else '>='} {low:g}, got {value!r}")
    return x


def _check_entry(arrays: dict) -> None:
    """Refuse a cached entry whose arrays do not form a valid extent mesh (MeshError)."""
    mesh = TetMesh(arrays["vertices"], arrays["tets"], arrays["extent"]).validate("cached tet mesh")
    e = mesh.pressure
    if e.min() < 0 or not math.isclose(float(e.max()), 1.0, rel_tol=1e-12):
        raise MeshError(f"cached extent outside [0, 1] or without a maximum of 1: [{e.min():g}, {e.max():g}]")
    if np.ndim(arrays["depth"]) != 0 or not float(arrays["depth"]) > 0 or np.ndim(arrays["split"]) != 0:
        raise MeshError("cached depth or split count is not a positive scalar")


def _build(surface: TriMesh, h: float, what: str) -> ExtentMesh:
    """Tetrahedralise and check (see the module docstring), then the extent field."""
    crossing = crossing_triangles(surface)
    if len(crossing):
        i, j = (int(k) for k in crossing[0])
        near = surface.vertices[surface.triangles[[i, j]]].mean(axis=(0, 1))
        raise MeshError(f"{what}: self-intersecting: triangles {i} and {j} cross (near {np.round(near, 6).tolist()} m), so "
                        "the surface bounds no single solid; separate or merge the intersecting parts")
    volume = surface.volume()
    estimate = _TETS_PER_REGULAR_VOLUME * volume / (h**3 / (6.0 * math.sqrt(2.0)))
    if estimate > MAX_ELEMENTS:
        coarsest = (_TETS_PER_REGULAR_VOLUME * volume * 6.0 * math.sqrt(2.0) / MAX_ELEMENTS) ** (1.0 / 3.0)
        raise MeshError(f"{what}: resolution {h:g} m would fill its {volume:.3g} m^3 with about {estimate:.3g} tets, more "
                        f"than {MAX_ELEMENTS}; use resolution >= {coarsest:.3g} m")
    diagonal = float(np.linalg.norm(np.ptp(surface.vertices, axis=0)))
    envelope = ENVELOPE_REL * diagonal
    vertices, tets = tetwild(surface.vertices, surface.triangles, h, envelope)
    mesh = _solid(vertices, tets, what)
    _check_fidelity(mesh, surface, envelope, what)
    field, depth, split = distance_extent(mesh.vertices, mesh.tets)
    return ExtentMesh(field.validate(what), depth, split)


def _solid(vertices: np.ndarray, tets: np.ndarray, what: str) -> TetMesh:
    """fTetWild's output as a valid TetMesh: unused vertices dropped, every tet positively
    oriented (fTetWild writes them negative); MeshError when it is empty or has degenerate tets."""
    if len(tets) == 0:
        raise MeshError(f"{what}: fTetWild ({MESHER}) produced no tets: the surface encloses no solid it could find")
    used, remap = np.unique(tets, return_inverse=True)
    vertices, tets = vertices[used], remap.reshape(-1, 4)
    negative = tet_signed_volumes(vertices, tets) < 0
    tets[negative] = tets[negative][:, [0, 2, 1, 3]]
    try:
        return TetMesh(vertices, tets, np.zeros(len(vertices))).validate(f"fTetWild's tet mesh of {what}")
    except MeshError as exc:
        raise MeshError(f"{what}: mesher failure: {exc}") from exc


def _check_fidelity(mesh: TetMesh, surface: TriMesh, envelope: float, what: str) -> None:
    """The tet mesh's boundary must be a closed manifold lying within twice the envelope of the
    surface, the surface within twice the envelope of it (vertices and triangle centroids of
    each, measured against the other), and its volume within 2 x envelope x area of the
    surface's (what moving every point of the boundary by the envelope changes it by, to first
    order). MeshError (a mesher failure) otherwise."""
    try:
        boundary = mesh.surface().validate("boundary")
    except MeshError as exc:
        raise MeshError(f"{what}: mesher failure: the tet mesh's boundary is not a closed manifold ({exc})") from exc
    tol = 2.0 * envelope
    for points, target, direction in (
        (np.vstack([boundary.vertices, boundary.vertices[boundary.triangles].mean(axis=1)]), surface, "its tet mesh's boundary lies"),
        (np.vstack([surface.vertices, surface.vertices[surface.triangles].mean(axis=1)]), boundary, "the surface lies"),
    ):
        d = distance_to_surface(points, target.vertices, target.triangles)
        if d.max() > tol:
            k = int(np.argmax(d))
            raise MeshError(f"{what}: mesher failure: {direction} {d[k]:.3g} m from the other at "
                            f"{np.round(points[k], 6).tolist()} m (allowed: {tol:.3g} m, twice fTetWild's envelope)")
    expected, got = surface.volume(), mesh.volume()
    allowed = 2.0 * envelope * float(surface.areas().sum())
    if abs(got - expected) > allowed:
        raise MeshError(f"{what}: mesher failure: its tet mesh holds {got:.6g} m^3, the surface encloses {expected:.6g} m^3 "
                        f"(allowed difference {allowed:.3g} m^3)")


def _inflate(mesh: TetMesh, depth: float, margin: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vertices with the boundary moved out by `margin` along angle-weighted vertex normals,
    extent at the moved boundary vertices = -(distance to the original boundary) / depth, indices
    of those vertices)."""
    faces = boundary_faces(mesh.tets)
    x = mesh.vertices[faces]
    normal = np.zeros_like(mesh.vertices)
    for k in range(3):
        e1 = x[:, (k + 1) % 3] - x[:, k]
        e2 = x[:, (k + 2) % 3] - x[:, k]
        n = np.cross(e1, e2)
        n /= np.linalg.norm(n, axis=1, keepdims=True)
        cos = np.einsum("ij,ij->i", e1, e2) / (np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1))
        np.add.at(normal, faces[:, k], n * np.arccos(np.clip(cos, -1.0, 1.0))[:, None])
    boundary = np.unique(faces)
    normal = normal[boundary] / np.linalg.norm(normal[boundary], axis=1, keepdims=True)
    vertices = mesh.vertices.copy()
    vertices[boundary] += margin * normal
    extent = -distance_to_surface(vertices[boundary], mesh.vertices, faces) / depth
    return vertices, extent, boundary
