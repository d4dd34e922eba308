"""Does a closed triangle surface cross itself? (host, float64)

A surface that crosses itself (two shells pushed into each other, a fold) bounds no single
solid: its divergence-theorem volume, and so its mass, counts the overlap twice, and a mesher
would fill some other solid than the one the file describes. crossing_triangles() finds such
pairs of triangles.

Two triangles that are not coplanar intersect exactly when an edge of one pierces the other:
the segment they share ends where such edges pass through. An edge pierces a triangle when its
two ends lie strictly on opposite sides of the triangle's plane (farther than a tolerance) and
the point where it crosses the plane lies in the closed triangle. Neighbouring triangles only
touch: every edge of one has an end on the other (a shared vertex, at distance 0 from its
plane), so they never count, and a fold through a shared vertex still does (the edge opposite
the vertex pierces). Triangles that overlap within one plane are not reported."""

from __future__ import annotations

import numpy as np

from .mesh import TriMesh

__all__ = ["crossing_triangles"]

_PAIRS_PER_CHUNK = 1 << 17


def crossing_triangles(surface: TriMesh, rel_tol: float = 1e-9, limit: int = 1) -> np.ndarray:
    """Up to `limit` pairs of triangle indices (k, 2) whose interiors cross, found by the edge
    test above; an edge end counts as off a plane when farther than rel_tol x the bounding-box
    diagonal, a crossing point as on the triangle when its barycentric coordinates are all >= -rel_tol. Candidates: pairs of triangles whose bounding spheres (about the centroid, through
    the farthest vertex) overlap, found per size class (radii within a factor of 2) so that a few
    large triangles do not make every pair a candidate."""
    from scipy.spatial import cKDTree

    v, f = surface.vertices, surface.triangles
    x = v[f]  # (m, 3, 3)
    centre = x.mean(axis=1)
    radius = np.sqrt(((x - centre[:, None]) ** 2).sum(axis=2).max(axis=1))
    tol = rel_tol * float(np.linalg.norm(np.ptp(v, axis=0)))
    size_class = np.floor(np.log2(np.maximum(radius, tol) / max(radius.min(), tol))).astype(np.int64)
    found = []
    for c in np.unique(size_class):
        members = np.flatnonzero(size_class == c)
        tree = cKDTree(centre[members])
        queries = np.flatnonzero(size_class <= c)  # a pair of classes a < b is looked for once, from a's triangles in b's tree
        reach = radius[queries] + radius[members].max() + tol
        counts = tree.query_ball_point(centre[queries], reach, return_length=True)
        total = np.concatenate([[0], np.cumsum(counts)])
        start = 0
        while start < len(queries):
            stop = max(start + 1, int(np.searchsorted(total, total[start] + _PAIRS_PER_CHUNK, side="right")) - 1)
            hits = tree.query_ball_point(centre[queries[start:stop]], reach[start:stop])
            i = np.repeat(queries[start:stop], counts[start:stop])
            j = members[np.fromiter((k for h in hits for k in h), dtype=np.int64, count=len(i))]
            keep = (size_class[i] < c) | (i < j)  # within a class, each pair once
            i, j = i[keep], j[keep]
            near = np.linalg.norm(centre[i] - centre[j], axis=1) <= radius[i] + radius[j] + tol
            i, j = i[near], j[near]
            crossing = _pierces(x[i], x[j], tol, rel_tol) | _pierces(x[j], x[i], tol, rel_tol)
            found.extend(zip(i[crossing].tolist(), j[crossing].tolist()))
            if len(found) >= limit:
                return np.array(found[:limit], dtype=np.int64).reshape(-1, 2)
            start = stop
    return np.array(found, dtype=np.int64).reshape(-1, 2)


def _pierces(edges_of: np.ndarray, triangle: np.ndarray, tol: float, bary_tol: float) -> np.ndarray:
    """Whether any of the three edges of each triangle in edges_of (k, 3, 3) pierces the matching
    triangle (k, 3, 3): its ends farther than tol [m] from the plane on opposite sides, and the
    crossing point in the closed triangle (barycentric coordinates all >= -bary_tol: an edge
    through another triangle's edge or vertex counts, as happens where symmetric shells meet)."""
    a, b, c = triangle[:, 0], triangle[:, 1], triangle[:, 2]
    n = np.cross(b - a, c - a)  # |n| = twice the area
    n2 = np.einsum("ij,ij->i", n, n)
    off = tol * np.sqrt(n2)  # a distance tol from the plane, in units of n . (p - a)
    out = np.zeros(len(a), dtype=bool)
    for s, e in ((0, 1), (1, 2), (2, 0)):
        p, q = edges_of[:, s], edges_of[:, e]
        dp = np.einsum("ij,ij->i", n, p - a)
        dq = np.einsum("ij,ij->i", n, q - a)
        straddles = ((dp > off) & (dq < -off)) | ((dp < -off) & (dq > off))
        with np.errstate(divide="ignore", invalid="ignore"):  # dp == dq only where nothing straddles
            point = p + (q - p) * (dp / (dp - dq))[:, None]
            # Barycentric coordinates times |n|^2: n . (twice the signed area of each sub-triangle, as a vector).
            wa = np.einsum("ij,ij->i", n, np.cross(c - b, point - b))
            wb = np.einsum("ij,ij->i", n, np.cross(a - c, point - c))
            wc = np.einsum("ij,ij->i", n, np.cross(b - a, point - a))
        margin = -bary_tol * n2
        out |= straddles & (wa >= margin) & (wb >= margin) & (wc >= margin)
    return out
