"""Meshes from files: closed triangle meshes through trimesh (OBJ/STL/PLY/GLB...), tetrahedral
meshes through meshio (VTK), and the pressure fields we derive for them."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np

from ..errors import MeshError
from .mesh import TetMesh, TriMesh, boundary_faces, tet_signed_volumes
from .primitives import extent_to_pressure

__all__ = [
    "load_surface",
    "load_tetmesh",
    "convex_hull",
    "is_convex",
    "compliant_convex",
    "distance_to_surface",
    "distance_extent",
    "distance_field_tetmesh",
]


def load_surface(path: Path) -> TriMesh:
    """A closed triangle mesh from any format trimesh reads; a scene file (GLB) is flattened.
    Raises MeshError for unreadable, open or non-manifold meshes. Outward orientation is
    restored if the whole mesh is inside out."""
    import trimesh

    path = _existing_file(path, "mesh")
    _check_stl_size(path)
    try:
        mesh = trimesh.load(str(path), force="mesh", process=False)
    except Exception as exc:  # trimesh raises many types for unreadable files, ImportError among them
        detail = "the parser failed" if isinstance(exc, ImportError) else str(exc)
        raise MeshError(f"cannot read mesh file {path}: not a valid {path.suffix or 'mesh'} file ({detail})") from exc
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
        raise MeshError(f"mesh file {path} holds no triangles")
    vertices = np.asarray(mesh.vertices, dtype=np.float64)
    if not np.all(np.isfinite(vertices)):
        i = int(np.argwhere(~np.isfinite(vertices))[0, 0])
        raise MeshError(f"mesh file {path}: vertex {i} is not finite: {vertices[i].tolist()}")
    mesh.process()  # merge duplicate vertices, drop unused ones
    surface = TriMesh(np.asarray(mesh.vertices), np.asarray(mesh.faces))
    if surface.volume() < 0:
        surface = TriMesh(surface.vertices, surface.triangles[:, ::-1])
    return surface.validate(f"mesh file {path}")


def load_tetmesh(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(vertices (n,3) [m], tets (m,4), pressure (n,) [Pa] or None) from a volume mesh file meshio
    reads (VTK legacy or XML); pressure is the point-data array named "pressure" if present."""
    import meshio

    path = _existing_file(path, "tet mesh")
    said = io.StringIO()
    try:
        # meshio prints its reasons and calls sys.exit when no reader accepts the file: keep both.
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            m = meshio.read(str(path))
    except (Exception, SystemExit) as exc:
        detail = "the parser failed" if isinstance(exc, ImportError) else str(exc)
        if isinstance(exc, SystemExit) or not detail:
            detail = " ".join(said.getvalue().split()) or "the parser failed"
        raise MeshError(f"cannot read tet mesh file {path}: not a valid {path.suffix or 'volume mesh'} file ({detail})") from None
    tets = [c.data for c in m.cells if c.type == "tetra"]
    if not tets:
        kinds = sorted({c.type for c in m.cells})
        raise MeshError(f"tet mesh file {path} has no tetra cells (cell types: {kinds})")
    pressure = m.point_data.get("pressure")
    if pressure is not None:
        pressure = np.asarray(pressure, dtype=np.float64).reshape(-1)
    return np.asarray(m.points, dtype=np.float64)[:, :3], np.vstack(tets).astype(np.int64), pressure


def _existing_file(path, what: str) -> Path:
    """`path` as a Path; MeshError when it is missing or not a regular file."""
    path = Path(path)
    if path.is_dir():
        raise MeshError(f"{what} file {path} is a directory")
    if not path.is_file():
        raise MeshError(f"{what} file not found: {path}")
    return path


def _check_stl_size(path: Path) -> None:
    """A binary STL (80-byte header, triangle count, 50 bytes per triangle) must have the size its
    count says; an ASCII one starts with "solid". MeshError names the mismatch otherwise (trimesh
    would try to decode garbage as text and fail with an unrelated message)."""
    if path.suffix.lower() != ".stl":
        return
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(84)
    if head[:5].lower() == b"solid" and b"facet" in path.read_bytes()[:4096]:
        return
    if size < 84:
        raise MeshError(f"cannot read mesh file {path}: not a valid STL file ({size} bytes, shorter than a binary STL header)")
    count = int.from_bytes(head[80:84], "little")
    if size != 84 + 50 * count:
        raise MeshError(f"cannot read mesh file {path}: not a valid STL file (a binary STL of {count} triangles has "
                        f"{84 + 50 * count} bytes, this file {size})")


def convex_hull(surface: TriMesh) -> TriMesh:
    """The convex hull of a surface's vertices as an outward triangle mesh."""
    from scipy.spatial import ConvexHull

    hull = ConvexHull(surface.vertices)
    used, remap = np.unique(hull.simplices, return_inverse=True)
    hm = TriMesh(surface.vertices[used], remap.reshape(-1, 3))
    centre = hm.vertices.mean(axis=0)
    x = hm.vertices[hm.triangles]
    outward = np.einsum("ij,ij->i", np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0]), x[:, 0] - centre) > 0
    tris = np.where(outward[:, None], hm.triangles, hm.triangles[:, ::-1])
    return TriMesh(hm.vertices, tris)


def is_convex(surface: TriMesh, rel_tol: float = 1e-6) -> bool:
    """True when the enclosed volume equals the convex hull's to `rel_tol`."""
    from scipy.spatial import ConvexHull

    hull_volume = ConvexHull(surface.vertices).volume
    return abs(hull_volume - surface.volume()) <= rel_tol * hull_volume


def _hull_planes(hull: TriMesh) -> tuple[np.ndarray, np.ndarray]:
    n = hull.normals()
    return n, np.einsum("ij,ij->i", n, hull.vertices[hull.triangles[:, 0]])


def compliant_convex(surface: TriMesh, modulus: float, margin: float = 0.0) -> TetMesh:
    """Convex shape as a fan of tets from its volume centroid, p = E there and 0 on the surface
    (Drake's convex field); with margin the hull planes move out by delta and the boundary gets
    p = -E delta / d_c, d_c the centroid's distance to the original surface."""
    hull = convex_hull(surface)
    x = hull.vertices[hull.triangles]
    vol = np.einsum("ij,ij->i", x[:, 0], np.cross(x[:, 1], x[:, 2])) / 6.0
    centroid = (vol[:, None] * x.sum(axis=1) / 4.0).sum(axis=0) / vol.sum()
    normals, offsets = _hull_planes(hull)
    depth_centroid = float(np.min(offsets - normals @ centroid))
    if margin > 0.0:
        from scipy.spatial import HalfspaceIntersection

        hs = HalfspaceIntersection(np.hstack([normals, -(offsets + margin)[:, None]]), centroid)
        hull = convex_hull(TriMesh(hs.intersections, np.zeros((0, 3), dtype=np.int64)))
    vertices = np.vstack([centroid[None], hull.vertices])
    tets = np.hstack([np.zeros((hull.triangle_count, 1), dtype=np.int64), hull.triangles + 1])
    extent = np.full(len(vertices), -margin / depth_centroid)
    extent[0] = 1.0
    return TetMesh(vertices, tets, extent_to_pressure(modulus, extent))


def distance_to_surface(points: np.ndarray, surface_vertices: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Unsigned distance from each point (P, 3) to a triangle soup [m], shape (P,): exact
    point-triangle distances (Ericson's region tests), evaluated only against the triangles that
    can be closest. A surface point q (a vertex or a triangle centroid) bounds the distance from
    above, d(p) <= |p - q|; a triangle whose centroid m lies farther from p than that bound plus
    the triangle's radius about m (the farthest of its vertices) cannot be closer, so only the
    triangles within that ball are tested (a k-d tree finds them)."""
    from scipy.spatial import cKDTree

    points = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if len(points) == 0:
        return np.zeros(0)
    a = surface_vertices[triangles[:, 0]]
    b = surface_vertices[triangles[:, 1]]
    c = surface_vertices[triangles[:, 2]]
    centroid = (a + b + c) / 3.0
    radius = np.sqrt(np.max([((x - centroid) ** 2).sum(axis=1) for x in (a, b, c)], axis=0))
    on_surface = np.vstack([surface_vertices[np.unique(triangles)], centroid])
    bound, _ = cKDTree(on_surface).query(points)
    reach = bound + radius.max() * (1.0 + 1e-12)
    tree = cKDTree(centroid)
    counts = tree.query_ball_point(points, reach, return_length=True)
    total = np.concatenate([[0], np.cumsum(counts)])
    out = np.empty(len(points))
    start = 0
    while start < len(points):  # chunks of at most _PAIRS_PER_CHUNK (point, triangle) pairs, at least one point
        stop = max(start + 1, int(np.searchsorted(total, total[start] + _PAIRS_PER_CHUNK, side="right")) - 1)
        lists = tree.query_ball_point(points[start:stop], reach[start:stop])
        n = counts[start:stop]
        tri = np.fromiter((t for hits in lists for t in hits), dtype=np.int64, count=int(n.sum()))
        owner = np.repeat(np.arange(stop - start), n)
        p = points[start:stop][owner]
        ta, tb, tc = a[tri], b[tri], c[tri]
        d2 = ((p - _closest_on_triangles(p, ta, tb, tc, tb - ta, tc - ta, tc - tb)) ** 2).sum(axis=1)
        best = np.full(stop - start, np.inf)
        np.minimum.at(best, owner, d2)
        out[start:stop] = np.sqrt(best)
        start = stop
    return out


_PAIRS_PER_CHUNK = 1 << 18
"""(point, triangle) pairs distance_to_surface evaluates at once (about 100 MB of temporaries)."""


def _closest_on_triangles(p, a, b, c, ab, ac, bc):
    """Closest point on triangle (a, b, c) to p, elementwise over matching (K, 3) rows (or any
    shapes that broadcast); ab, ac, bc are the edge vectors b - a, c - a, c - b."""
    ap = p - a
    d1 = (ab * ap).sum(-1)
    d2 = (ac * ap).sum(-1)
    bp = p - b
    d3 = (ab * bp).sum(-1)
    d4 = (ac * bp).sum(-1)
    cp = p - c
    d5 = (ab * cp).sum(-1)
    d6 = (ac * cp).sum(-1)
    va = d3 * d6 - d5 * d4
    vb = d5 * d2 - d1 * d6
    vc = d1 * d4 - d3 * d2
    denom = va + vb + vc
    with np.errstate(divide="ignore", invalid="ignore"):
        v = vb / denom
        w = vc / denom
        result = a + ab * v[..., None] + ac * w[..., None]  # interior
        # Edge regions.
        t_ab = d1 / (d1 - d3)
        on_ab = (vc <= 0) & (d1 >= 0) & (d3 <= 0)
        result = np.where(on_ab[..., None], a + ab * t_ab[..., None], result)
        t_ac = d2 / (d2 - d6)
        on_ac = (vb <= 0) & (d2 >= 0) & (d6 <= 0)
        result = np.where(on_ac[..., None], a + ac * t_ac[..., None], result)
        t_bc = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        on_bc = (va <= 0) & ((d4 - d3) >= 0) & ((d5 - d6) >= 0)
        result = np.where(on_bc[..., None], b + bc * t_bc[..., None], result)
    # Vertex regions.
    result = np.where(((d1 <= 0) & (d2 <= 0))[..., None], a, result)
    result = np.where(((d3 >= 0) & (d4 <= d3))[..., None], b, result)
    result = np.where(((d6 >= 0) & (d5 <= d6))[..., None], c, result)
    return result


def distance_extent(vertices: np.ndarray, tets: np.ndarray) -> tuple[TetMesh, float, int]:
    """The extent field e = d / d_max of a positively oriented tet mesh, d the distance to the
    mesh's boundary [m] and d_max its largest value at a vertex (Elandt 2019 §VI-A): returns
    (mesh with pressure = e in [0, 1], d_max [m], number of tets with four boundary vertices).

    A tet whose four vertices have the same e has a zero gradient: with all four on the
    boundary (e = 0), or straddling a ridge of the field (two vertices at depth d on either side
    of a mid-plane). Each such tet is split into four at its centroid, which gets its own
    distance (a different one: the distance field has no flat spot), so that every tet has a
    gradient; the new vertex lies strictly inside the old tet, so neighbours stay conforming."""
    faces = boundary_faces(tets)
    on_boundary = np.zeros(len(vertices), dtype=bool)
    on_boundary[np.unique(faces)] = True
    flat = np.all(on_boundary[tets], axis=1)
    vertices, tets = _split_at_centroids(vertices, tets, flat)
    on_boundary = np.concatenate([on_boundary, np.zeros(len(vertices) - len(on_boundary), dtype=bool)])
    interior = np.flatnonzero(~on_boundary)
    if len(interior) == 0:
        raise MeshError("tet mesh has no interior vertex: cannot build a distance-to-boundary pressure field")
    distance = np.zeros(len(vertices))
    distance[interior] = distance_to_surface(vertices[interior], vertices, faces)
    d = distance[tets]
    ridge = (d.max(axis=1) - d.min(axis=1)) <= 1e-12 * distance.max()
    if np.any(ridge):
        count = len(vertices)
        vertices, tets = _split_at_centroids(vertices, tets, ridge)
        distance = np.concatenate([distance, distance_to_surface(vertices[count:], vertices, faces)])
    if np.any(tet_signed_volumes(vertices, tets) <= 0):
        raise MeshError("splitting tets at their centroids produced an inverted tet")
    d_max = float(distance.max())
    return TetMesh(vertices, tets, distance / d_max), d_max, int(flat.sum())


def _split_at_centroids(vertices: np.ndarray, tets: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each tet where `mask` is set replaced by four joining its centroid (appended to the
    vertices) to its faces, positively oriented; the other tets kept in order, first."""
    if not np.any(mask):
        return vertices, tets
    centroids = vertices[tets[mask]].mean(axis=1)
    ids = len(vertices) + np.arange(len(centroids))
    vertices = np.vstack([vertices, centroids])
    local = np.array([[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]])
    split = np.concatenate([np.column_stack([ids, tets[mask][:, f]]) for f in local])
    tets = np.vstack([tets[~mask], split])
    negative = tet_signed_volumes(vertices, tets) < 0
    tets[negative] = tets[negative][:, [0, 2, 1, 3]]
    return vertices, tets


def distance_field_tetmesh(vertices: np.ndarray, tets: np.ndarray, modulus: float) -> TetMesh:
    """Pressure E * e with the extent e of distance_extent (distance to the boundary over its
    maximum; tets with four boundary vertices split at their centroids)."""
    mesh, _, _ = distance_extent(vertices, tets)
    return TetMesh(mesh.vertices, mesh.tets, extent_to_pressure(modulus, mesh.pressure))
