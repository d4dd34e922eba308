"""Tet meshes of convex polytopes that conform to the medial axis.

The distance to the boundary of a convex polytope P = {x : n_f.x <= d_f} is
min_f (d_f - n_f.x); it is linear inside the region R_f of points closest to face f, and the
regions meet on the medial axis. Meshing every region separately therefore makes the
distance field exactly piecewise linear on the tets (Elandt 2019 §VI-A1 does this for a cube;
Drake's box and cylinder meshes follow the same idea).

Each region is a convex polytope: its facets are triangulated (quads by the diagonal through
their smallest vertex id, larger polygons by a fan from their centroid), identically from both
regions that share a facet, so the mesh is conforming; and
its tets fan from the region centroid, which lies strictly inside P: no tet has all four
vertices on the boundary.
"""

from __future__ import annotations

import numpy as np

from ..errors import MeshError

__all__ = ["polytope_medial_mesh", "polytope_distance"]


def polytope_distance(normals: np.ndarray, offsets: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Signed distance to the boundary of {x : n_f.x <= d_f}, positive inside [m] (exact for
    interior points; outside points get minus the largest face violation)."""
    return np.min(offsets[None, :] - points @ normals.T, axis=1)


def _chebyshev_center(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A point deep inside {x : a x <= b} (centre of the largest inscribed ball)."""
    from scipy.optimize import linprog  # imported where used: about 1 s at start-up otherwise

    norms = np.linalg.norm(a, axis=1)
    res = linprog(
        c=[0, 0, 0, -1],
        A_ub=np.hstack([a, norms[:, None]]),
        b_ub=b,
        bounds=[(None, None)] * 3 + [(0, None)],
        method="highs",
    )
    if not res.success or res.x[3] <= 0:
        raise MeshError("polytope medial mesh: a face region is empty (degenerate polytope)")
    return res.x[:3]


def _ordered_ring(points: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """Indices that order coplanar points counter-clockwise about `normal`."""
    c = points.mean(axis=0)
    u = points[0] - c
    u /= np.linalg.norm(u)
    v = np.cross(normal, u)
    rel = points - c
    return np.argsort(np.arctan2(rel @ v, rel @ u))


def polytope_medial_mesh(normals: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Conforming tet mesh of the convex polytope {x : normals[f].x <= offsets[f]} whose tets each
    lie inside one face region (closest-face region), so the distance field is linear per tet.

    normals: (F, 3) unit outward face normals; offsets: (F,) [m]. Returns (vertices (n, 3),
    tets (m, 4)) with positively oriented tets."""
    from scipy.spatial import HalfspaceIntersection, cKDTree

    normals = np.asarray(normals, dtype=np.float64)
    offsets = np.asarray(offsets, dtype=np.float64)
    nf = len(normals)
    scale = float(np.abs(offsets).max())
    tol = 1e-9 * scale

    region_vertices: list[np.ndarray] = []
    region_planes: list[tuple[np.ndarray, np.ndarray]] = []
    for f in range(nf):
        others = np.array([g for g in range(nf) if g != f])
        a = np.vstack([normals, normals[others] - normals[f]])
        b = np.concatenate([offsets, offsets[others] - offsets[f]])
        inside = _chebyshev_center(a, b)
        hs = HalfspaceIntersection(np.hstack([a, -b[:, None]]), inside)
        region_vertices.append(hs.intersections)
        region_planes.append((a, b))

    # Merge the vertices shared between regions.
    stacked = np.vstack(region_vertices)
    tree = cKDTree(stacked)
    label = -np.ones(len(stacked), dtype=np.int64)
    unique: list[np.ndarray] = []
    for i in range(len(stacked)):
        if label[i] >= 0:
            continue
        group = tree.query_ball_point(stacked[i], tol)
        label[group] = len(unique)
        unique.append(stacked[i])
    vertices = list(unique)
    offsets_in_stack = np.cumsum([0] + [len(r) for r in region_vertices])

    facet_centroid: dict[tuple[int, ...], int] = {}
    tets: list[list[int]] = []
    for f in range(nf):
        ids = np.unique(label[offsets_in_stack[f] : offsets_in_stack[f + 1]])
        pts = np.array([vertices[i] for i in ids])
        a, b = region_planes[f]
        centre = len(vertices)
        vertices.append(pts.mean(axis=0))
        seen: set[tuple[int, ...]] = set()
        for row in range(len(a)):
            norm = np.linalg.norm(a[row])
            on = np.abs(pts @ a[row] - b[row]) <= tol * max(norm, 1.0) * 10
            if on.sum() < 3:
                continue
            face_ids = ids[on]
            key = tuple(sorted(face_ids.tolist()))
            if key in seen:
                continue
            seen.add(key)
            ring = face_ids[_ordered_ring(pts[on], a[row] / norm)]
            ring_pts = np.array([vertices[i] for i in ring])
            area2 = np.linalg.norm(np.cross(ring_pts[1:-1] - ring_pts[0], ring_pts[2:] - ring_pts[0]).sum(axis=0))
            if area2 <= tol * scale:
                continue
            if len(ring) == 3:
                triangles = [ring.tolist()]
            elif len(ring) == 4:
                # Split by the diagonal through the smallest vertex id: both regions that share
                # this facet choose the same diagonal.
                k = int(np.argmin(ring))
                q = [int(ring[(k + i) % 4]) for i in range(4)]
                triangles = [[q[0], q[1], q[2]], [q[0], q[2], q[3]]]
            else:
                if key not in facet_centroid:
                    facet_centroid[key] = len(vertices)
                    vertices.append(ring_pts.mean(axis=0))
                fc = facet_centroid[key]
                triangles = [[fc, int(ring[i]), int(ring[(i + 1) % len(ring)])] for i in range(len(ring))]
            tets.extend([[centre, *t] for t in triangles])

    vertices_arr = np.array(vertices)
    tets_arr = np.array(tets, dtype=np.int64)
    x = vertices_arr[tets_arr]
    vol = np.einsum("ij,ij->i", x[:, 1] - x[:, 0], np.cross(x[:, 2] - x[:, 0], x[:, 3] - x[:, 0]))
    flip = vol < 0
    tets_arr[flip] = tets_arr[flip][:, [0, 2, 1, 3]]
    keep = np.abs(vol) > 1e-12 * scale**3
    return vertices_arr, tets_arr[keep]
