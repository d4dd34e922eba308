"""Meshes and pressure fields of the primitive shapes (host, float64).

Compliant shapes get a tet mesh whose per-vertex pressure is p = E * e, with the extent e of
DESIGN §1 (as Drake defines it):
  sphere     e = 1 - r/R                       fan of tets from the centre (refined octahedron)
  ellipsoid  e = 1 - |S^-1 x|                  the sphere mesh scaled by the semi-axes
  capsule    e = 1 - r/R, r = distance to the axis segment
  box        e = distance to the boundary / smallest half-size, medial-axis conforming mesh
  cylinder   e = distance to the boundary / its largest value, medial-axis conforming mesh of
             the inscribed n-gon prism
Margin delta (Drake's hydroelastic margin): the mesh is inflated by delta and the same field
formula, written for the original shape, is evaluated at the inflated vertices, so p = 0 stays
on the original surface and p < 0 in the skirt.

Rigid shapes get an outward triangle surface mesh. `resolution` [m] is the target edge length
where a shape is curved; boxes are exact and ignore it.
"""

from __future__ import annotations

import math

import numpy as np

from .mesh import TetMesh, TriMesh
from .polytope import polytope_distance, polytope_medial_mesh

__all__ = [
    "extent_to_pressure",
    "sphere_surface",
    "unit_sphere_level",
    "compliant_sphere",
    "compliant_ellipsoid",
    "compliant_capsule",
    "compliant_box",
    "compliant_cylinder",
    "rigid_sphere",
    "rigid_ellipsoid",
    "rigid_capsule",
    "rigid_box",
    "rigid_cylinder",
    "circle_segments",
    "box_planes",
    "prism_planes",
    "estimated_elements",
    "resolution_problem",
    "MAX_ELEMENTS",
]

_MAX_SPHERE_LEVEL = 8
MAX_ELEMENTS = 8 * 4**_MAX_SPHERE_LEVEL
"""Most elements (tets or triangles) one round shape may be meshed with: the finest sphere
(level 8, 524 288 tets, about 60 MB of device memory per world's pools at most)."""


MAX_PRISM_SIDES = 512
"""Most sides of a compliant cylinder's prism: its medial-axis mesh is built in time quadratic
in the side count (seconds at 512)."""


def resolution_problem(kind: str, compliant: bool, resolution: float, radius: float = 0.0, length: float = 0.0,
                       radii=None) -> str | None:
    """Why `resolution` [m] is too fine for a round shape (too many elements, or for a compliant
    cylinder too many sides to build in reasonable time), or None."""
    if kind == "cylinder" and compliant:
        sides = circle_segments(radius, resolution)
        if sides > MAX_PRISM_SIDES:
            return (f"{resolution:g} m gives a compliant cylinder of {sides} sides, more than {MAX_PRISM_SIDES}; "
                    f"use resolution >= {2.0 * math.pi * radius / MAX_PRISM_SIDES:.3g} m")
    count = estimated_elements(kind, resolution, radius, length, radii)
    if count > MAX_ELEMENTS:
        return (f"{resolution:g} m would mesh the {kind} with about {count:.3g} elements, more than {MAX_ELEMENTS}; "
                "use a coarser resolution")
    return None


def estimated_elements(kind: str, resolution: float, radius: float = 0.0, length: float = 0.0, radii=None) -> int:
    """Elements (tets of the compliant mesh, about as many as the rigid surface's triangles) a
    round shape of `kind` gets at `resolution` [m], computed without building it."""
    if kind in ("sphere", "ellipsoid"):
        r, h = (radius, resolution) if kind == "sphere" else (1.0, resolution / max(radii))
        chord = min(h, 2.0 * r)
        level = max(math.ceil(math.log2(math.pi / math.asin(chord / (2.0 * r)))) - 2, 0)
        return 8 * 4 ** min(level, 64)
    n = circle_segments(radius, resolution)
    if kind == "cylinder":
        return 12 * n
    s = max(1, math.ceil(length / resolution))
    m = max(1, math.ceil(0.5 * math.pi * radius / resolution))
    return 2 * n * (s + 2 * m)


def extent_to_pressure(modulus: float, extent: np.ndarray) -> np.ndarray:
    """p = E * e [Pa], with |e| below round-off (1e-12) snapped to 0 so boundary vertices of an
    uninflated mesh have exactly zero pressure."""
    extent = np.where(np.abs(extent) < 1e-12, 0.0, extent)
    return modulus * extent


def unit_sphere_level(radius: float, resolution: float) -> int:
    """Octahedron refinement level for a sphere of `radius` [m] whose surface edges subtend at
    most the angle of a chord of length `resolution` [m] (Drake's rule: 8*4^L tets)."""
    chord = min(resolution, 2.0 * radius)
    level = math.ceil(math.log2(math.pi / math.asin(chord / (2.0 * radius)))) - 2
    return int(min(max(level, 0), _MAX_SPHERE_LEVEL))


def sphere_surface(level: int) -> TriMesh:
    """Unit sphere: an octahedron whose triangles are split in four `level` times, vertices
    projected to the sphere. 8*4^level outward triangles."""
    v = [np.array(p, dtype=np.float64) for p in ([1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1])]
    faces = [(0, 2, 4), (2, 1, 4), (1, 3, 4), (3, 0, 4), (2, 0, 5), (1, 2, 5), (3, 1, 5), (0, 3, 5)]
    for _ in range(level):
        midpoint: dict[tuple[int, int], int] = {}

        def mid(a: int, b: int) -> int:
            key = (min(a, b), max(a, b))
            if key not in midpoint:
                m = v[a] + v[b]
                midpoint[key] = len(v)
                v.append(m / np.linalg.norm(m))
            return midpoint[key]

        refined = []
        for a, b, c in faces:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            refined += [(a, ab, ca), (ab, b, bc), (ca, bc, c), (ab, bc, ca)]
        faces = refined
    return TriMesh(np.array(v), np.array(faces))


def _fan_from_origin(surface: TriMesh) -> tuple[np.ndarray, np.ndarray]:
    """Tets (centre, triangle) for a star-shaped surface about the origin; centre is vertex 0."""
    vertices = np.vstack([np.zeros((1, 3)), surface.vertices])
    tets = np.hstack([np.zeros((surface.triangle_count, 1), dtype=np.int64), surface.triangles + 1])
    return vertices, tets


def compliant_sphere(radius: float, modulus: float, resolution: float, margin: float = 0.0) -> TetMesh:
    """Sphere of `radius` [m], p = E(1 - r/R) [Pa], inflated by `margin` [m]."""
    surface = sphere_surface(unit_sphere_level(radius + margin, resolution))
    vertices, tets = _fan_from_origin(surface)
    vertices = vertices * (radius + margin)
    r = np.linalg.norm(vertices, axis=1)
    return TetMesh(vertices, tets, extent_to_pressure(modulus, 1.0 - r / radius))


def compliant_ellipsoid(radii, modulus: float, resolution: float, margin: float = 0.0) -> TetMesh:
    """Ellipsoid with semi-axes `radii` [m], p = E(1 - |S^-1 x|), inflated by `margin` [m]."""
    radii = np.asarray(radii, dtype=np.float64)
    inflated = radii + margin
    surface = sphere_surface(unit_sphere_level(1.0, resolution / inflated.max()))
    vertices, tets = _fan_from_origin(surface)
    vertices = vertices * inflated
    return TetMesh(vertices, tets, extent_to_pressure(modulus, 1.0 - np.linalg.norm(vertices / radii, axis=1)))


def circle_segments(radius: float, resolution: float) -> int:
    """Number of polygon sides for a circle of `radius` with edges of about `resolution` [m]."""
    return max(3, math.ceil(2.0 * math.pi * radius / resolution))


def _capsule_rings(radius: float, length: float, resolution: float):
    """Surface of a capsule along z (cylinder part of `length`, caps of `radius`).

    Returns (surface vertices, triangles, axis z values, ring z index ranges) where the
    cylinder rings come first: ring i (0..s) at axis z_i has vertices [i*n, (i+1)*n)."""
    n = circle_segments(radius, resolution)
    s = max(1, math.ceil(length / resolution))
    m = max(1, math.ceil(0.5 * math.pi * radius / resolution))
    angle = 2.0 * np.pi * np.arange(n) / n
    ring = np.stack([np.cos(angle), np.sin(angle), np.zeros(n)], axis=1)
    z_axis = -0.5 * length + length * np.arange(s + 1) / s
    rings = [radius * ring + [0.0, 0.0, z] for z in z_axis]
    # Hemisphere rings (top then bottom), excluding the equator and the pole.
    top, bottom = [], []
    for k in range(1, m):
        theta = 0.5 * np.pi * k / m
        top.append(radius * np.cos(theta) * ring + [0.0, 0.0, 0.5 * length + radius * np.sin(theta)])
        bottom.append(radius * np.cos(theta) * ring + [0.0, 0.0, -0.5 * length - radius * np.sin(theta)])
    vertices = np.vstack(rings + top + bottom + [[[0.0, 0.0, 0.5 * length + radius]], [[0.0, 0.0, -0.5 * length - radius]]])
    top_pole, bottom_pole = len(vertices) - 2, len(vertices) - 1

    def ring_ids(r: int) -> np.ndarray:
        return np.arange(r * n, (r + 1) * n)

    tris: list[tuple[int, int, int]] = []

    def band(lower: np.ndarray, upper: np.ndarray):
        # Quads between two rings, split by the diagonal lower[j] - upper[j+1]; outward for +z travel.
        for j in range(n):
            j1 = (j + 1) % n
            tris.append((lower[j], lower[j1], upper[j1]))
            tris.append((lower[j], upper[j1], upper[j]))

    for i in range(s):
        band(ring_ids(i), ring_ids(i + 1))
    top_rings = [ring_ids(s)] + [ring_ids(s + 1 + k) for k in range(m - 1)]
    for lo, up in zip(top_rings[:-1], top_rings[1:]):
        band(lo, up)
    for j in range(n):
        tris.append((top_rings[-1][j], top_rings[-1][(j + 1) % n], top_pole))
    bottom_rings = [ring_ids(0)] + [ring_ids(s + m + k) for k in range(m - 1)]
    for up, lo in zip(bottom_rings[:-1], bottom_rings[1:]):
        band(lo, up)
    for j in range(n):
        tris.append((bottom_rings[-1][(j + 1) % n], bottom_rings[-1][j], bottom_pole))
    return vertices, np.array(tris, dtype=np.int64), z_axis, n, top_rings, bottom_rings, top_pole, bottom_pole


def compliant_capsule(radius: float, length: float, modulus: float, resolution: float, margin: float = 0.0) -> TetMesh:
    """Capsule along z: cylinder part `length` [m] between the centres of two hemispheres of
    `radius` [m]; p = E(1 - r/R), r the distance to the axis segment. Inflated by `margin`."""
    R = radius + margin
    surf, tris, z_axis, n, top_rings, bottom_rings, _, _ = _capsule_rings(R, length, resolution)
    ns = len(surf)
    axis = np.stack([np.zeros_like(z_axis), np.zeros_like(z_axis), z_axis], axis=1)
    vertices = np.vstack([surf, axis])
    a = ns + np.arange(len(z_axis))  # axis vertex ids
    tets: list[list[int]] = []
    s = len(z_axis) - 1
    for i in range(s):
        for j in range(n):
            j1 = (j + 1) % n
            A, B, C = a[i], i * n + j, i * n + j1
            A1, B1, C1 = a[i + 1], (i + 1) * n + j, (i + 1) * n + j1
            tets += [[A, B, C, C1], [A, B, B1, C1], [A, A1, B1, C1]]
    # Cap triangles fan to the axis end on their side.
    cylinder_tris = 2 * n * s
    for t in tris[cylinder_tris:]:
        end = a[s] if vertices[t, 2].mean() > 0 else a[0]
        tets.append([end, *t])
    tets_arr = np.array(tets, dtype=np.int64)
    x = vertices[tets_arr]
    vol = np.einsum("ij,ij->i", x[:, 1] - x[:, 0], np.cross(x[:, 2] - x[:, 0], x[:, 3] - x[:, 0]))
    tets_arr[vol < 0] = tets_arr[vol < 0][:, [0, 2, 1, 3]]
    z = np.clip(vertices[:, 2], -0.5 * length, 0.5 * length)
    r = np.linalg.norm(vertices - np.stack([0 * z, 0 * z, z], axis=1), axis=1)
    return TetMesh(vertices, tets_arr, extent_to_pressure(modulus, 1.0 - r / radius))


def box_planes(size) -> tuple[np.ndarray, np.ndarray]:
    """Outward unit normals and offsets of a box with full edge lengths `size` [m]."""
    h = 0.5 * np.asarray(size, dtype=np.float64)
    normals = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], dtype=np.float64)
    return normals, np.array([h[0], h[0], h[1], h[1], h[2], h[2]])


def prism_planes(radius: float, length: float, sides: int) -> tuple[np.ndarray, np.ndarray]:
    """Planes of the n-gon prism inscribed in a cylinder of `radius` and `length` along z."""
    angle = 2.0 * np.pi * (np.arange(sides) + 0.5) / sides
    side = np.stack([np.cos(angle), np.sin(angle), np.zeros(sides)], axis=1)
    normals = np.vstack([side, [[0, 0, 1], [0, 0, -1]]])
    offsets = np.concatenate([np.full(sides, radius * math.cos(math.pi / sides)), [0.5 * length, 0.5 * length]])
    return normals, offsets


def _compliant_polytope(normals, offsets, modulus: float, margin: float) -> TetMesh:
    vertices, tets = polytope_medial_mesh(normals, offsets + margin)
    depth = polytope_distance(normals, offsets, vertices)
    return TetMesh(vertices, tets, extent_to_pressure(modulus, depth / depth.max()))


def compliant_box(size, modulus: float, margin: float = 0.0) -> TetMesh:
    """Box with full edge lengths `size` [m]; p = E * distance / smallest half-size."""
    normals, offsets = box_planes(size)
    return _compliant_polytope(normals, offsets, modulus, margin)


def compliant_cylinder(radius: float, length: float, modulus: float, resolution: float, margin: float = 0.0) -> TetMesh:
    """Cylinder along z of `radius` and full `length` [m], as its inscribed n-gon prism;
    p = E * distance to the boundary / largest distance."""
    normals, offsets = prism_planes(radius, length, circle_segments(radius, resolution))
    return _compliant_polytope(normals, offsets, modulus, margin)


def rigid_sphere(radius: float, resolution: float) -> TriMesh:
    s = sphere_surface(unit_sphere_level(radius, resolution))
    return TriMesh(s.vertices * radius, s.triangles)


def rigid_ellipsoid(radii, resolution: float) -> TriMesh:
    radii = np.asarray(radii, dtype=np.float64)
    s = sphere_surface(unit_sphere_level(1.0, resolution / radii.max()))
    return TriMesh(s.vertices * radii, s.triangles)


def rigid_capsule(radius: float, length: float, resolution: float) -> TriMesh:
    vertices, tris, *_ = _capsule_rings(radius, length, resolution)
    return TriMesh(vertices, tris)


def rigid_box(size) -> TriMesh:
    h = 0.5 * np.asarray(size, dtype=np.float64)
    corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=np.float64) * h
    # corner index = 4*(x>0) + 2*(y>0) + (z>0)
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tris = [t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))]
    return TriMesh(corners, np.array(tris))


def rigid_cylinder(radius: float, length: float, resolution: float) -> TriMesh:
    """Cylinder along z as the n-gon prism with vertices on the circle."""
    n = circle_segments(radius, resolution)
    angle = 2.0 * np.pi * np.arange(n) / n
    ring = np.stack([radius * np.cos(angle), radius * np.sin(angle), np.zeros(n)], axis=1)
    vertices = np.vstack([ring - [0, 0, 0.5 * length], ring + [0, 0, 0.5 * length], [[0, 0, -0.5 * length], [0, 0, 0.5 * length]]])
    tris = []
    for j in range(n):
        j1 = (j + 1) % n
        tris += [(j, j1, n + j1), (j, n + j1, n + j), (2 * n + 1, n + j, n + j1), (2 * n, j1, j)]
    return TriMesh(vertices, np.array(tris))
