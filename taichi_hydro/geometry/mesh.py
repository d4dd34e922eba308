"""Host-side meshes (float64 NumPy): compliant tetrahedral meshes with a pressure field, and
rigid triangle surface meshes. Pure data plus validation; nothing here touches the device."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import MeshError

__all__ = ["TetMesh", "TriMesh", "tet_signed_volumes", "tet_pressure_gradients", "boundary_faces"]

# A tet whose volume is below this fraction of (its longest edge)^3 is degenerate.
_DEGENERATE_TET_RATIO = 1e-12
# A closed surface enclosing less than this fraction of (its bounding box's largest side)^3 is flat.
_FLAT_VOLUME_RATIO = 1e-9


def tet_signed_volumes(vertices: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Signed volume of each tet [m^3], positive when (v1-v0, v2-v0, v3-v0) is right-handed."""
    x = vertices[tets]
    a, b, c = x[:, 1] - x[:, 0], x[:, 2] - x[:, 0], x[:, 3] - x[:, 0]
    return np.einsum("ij,ij->i", a, np.cross(b, c)) / 6.0


def tet_pressure_gradients(vertices: np.ndarray, tets: np.ndarray, pressure: np.ndarray) -> np.ndarray:
    """Constant gradient of the linear pressure field in each tet [Pa/m], shape (m, 3).

    Solves [v1-v0; v2-v0; v3-v0] g = [p1-p0; p2-p0; p3-p0] per tet."""
    x = vertices[tets]
    edges = x[:, 1:] - x[:, :1]  # (m, 3, 3) rows are edge vectors
    dp = pressure[tets[:, 1:]] - pressure[tets[:, :1]]  # (m, 3)
    return np.linalg.solve(edges, dp[..., None])[..., 0]


def boundary_faces(tets: np.ndarray) -> np.ndarray:
    """Faces used by exactly one tet, oriented outward, shape (f, 3).

    Assumes positively oriented tets; face k is opposite vertex k."""
    local = np.array([[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]])
    faces = tets[:, local].reshape(-1, 3)
    key = np.sort(faces, axis=1)
    _, inverse, counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    if np.any(counts > 2):
        raise MeshError(f"non-manifold tet mesh: a face is shared by {counts.max()} tets")
    return faces[counts[inverse] == 1]


@dataclass(frozen=True)
class TetMesh:
    """A compliant volume mesh with a piecewise-linear pressure field.

    vertices: (n, 3) float64, geometry frame G [m].
    tets: (m, 4) int64, positively oriented.
    pressure: (n,) float64 [Pa]; 0 on the original surface, negative in a margin skirt.
    """

    vertices: np.ndarray
    tets: np.ndarray
    pressure: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "vertices", np.ascontiguousarray(self.vertices, dtype=np.float64))
        object.__setattr__(self, "tets", np.ascontiguousarray(self.tets, dtype=np.int64))
        object.__setattr__(self, "pressure", np.ascontiguousarray(self.pressure, dtype=np.float64))

    @property
    def tet_count(self) -> int:
        return len(self.tets)

    def validate(self, what: str = "tet mesh") -> "TetMesh":
        """Raise MeshError naming the first problem: shapes, NaN, bad indices, inverted or
        degenerate tets. Returns self."""
        v, t, p = self.vertices, self.tets, self.pressure
        if v.ndim != 2 or v.shape[1] != 3 or len(v) < 4:
            raise MeshError(f"{what}: vertices must have shape (n>=4, 3), got {v.shape}")
        if t.ndim != 2 or t.shape[1] != 4 or len(t) < 1:
            raise MeshError(f"{what}: tets must have shape (m>=1, 4), got {t.shape}")
        if p.shape != (len(v),):
            raise MeshError(f"{what}: pressure must have one value per vertex ({len(v)}), got shape {p.shape}")
        if not np.all(np.isfinite(v)):
            i = int(np.argwhere(~np.isfinite(v))[0, 0])
            raise MeshError(f"{what}: vertex {i} is not finite: {v[i].tolist()}")
        if not np.all(np.isfinite(p)):
            i = int(np.argwhere(~np.isfinite(p))[0, 0])
            raise MeshError(f"{what}: pressure at vertex {i} is not finite: {p[i]}")
        if t.min() < 0 or t.max() >= len(v):
            raise MeshError(f"{what}: tet vertex index out of range [0, {len(v)}): min {t.min()}, max {t.max()}")
        vol = tet_signed_volumes(v, t)
        edge = np.linalg.norm(v[t[:, [1, 2, 3, 2, 3, 3]]] - v[t[:, [0, 0, 0, 1, 1, 2]]], axis=2).max(axis=1)
        tiny = _DEGENERATE_TET_RATIO * edge**3
        bad = np.flatnonzero(vol < -tiny)
        if len(bad):
            i = int(bad[0])
            raise MeshError(
                f"{what}: {len(bad)} inverted tet(s); tet {i} {t[i].tolist()} has volume {vol[i]:.3e} m^3 "
                "(vertices must be ordered so that (v1-v0).((v2-v0)x(v3-v0)) > 0)"
            )
        bad = np.flatnonzero(np.abs(vol) <= tiny)
        if len(bad):
            i = int(bad[0])
            raise MeshError(f"{what}: {len(bad)} degenerate tet(s); tet {i} {t[i].tolist()} has volume {vol[i]:.3e} m^3")
        return self

    def gradients(self) -> np.ndarray:
        """Pressure gradient of each tet in G [Pa/m], shape (m, 3)."""
        return tet_pressure_gradients(self.vertices, self.tets, self.pressure)

    def surface(self) -> "TriMesh":
        """The boundary of the mesh as an outward triangle mesh (vertices re-indexed)."""
        faces = boundary_faces(self.tets)
        used, remap = np.unique(faces, return_inverse=True)
        return TriMesh(self.vertices[used], remap.reshape(-1, 3))

    def volume(self) -> float:
        return float(tet_signed_volumes(self.vertices, self.tets).sum())


@dataclass(frozen=True)
class TriMesh:
    """A closed, outward-oriented triangle surface mesh (rigid geometry or rendering).

    vertices: (n, 3) float64, geometry frame G [m]; triangles: (m, 3) int64, counter-clockwise
    seen from outside."""

    vertices: np.ndarray
    triangles: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "vertices", np.ascontiguousarray(self.vertices, dtype=np.float64))
        object.__setattr__(self, "triangles", np.ascontiguousarray(self.triangles, dtype=np.int64))

    @property
    def triangle_count(self) -> int:
        return len(self.triangles)

    def normals(self) -> np.ndarray:
        """Unit outward normal of each triangle in G, shape (m, 3)."""
        x = self.vertices[self.triangles]
        n = np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0])
        return n / np.linalg.norm(n, axis=1, keepdims=True)

    def areas(self) -> np.ndarray:
        x = self.vertices[self.triangles]
        return 0.5 * np.linalg.norm(np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0]), axis=1)

    def volume(self) -> float:
        """Enclosed volume [m^3] by the divergence theorem (positive for outward triangles)."""
        x = self.vertices[self.triangles]
        return float(np.einsum("ij,ij->i", x[:, 0], np.cross(x[:, 1], x[:, 2])).sum() / 6.0)

    def validate(self, what: str = "triangle mesh") -> "TriMesh":
        """Raise MeshError unless the mesh is finite, closed, manifold, consistently and outwardly
        oriented, with no degenerate triangle. Returns self."""
        v, f = self.vertices, self.triangles
        if v.ndim != 2 or v.shape[1] != 3 or len(v) < 4:
            raise MeshError(f"{what}: vertices must have shape (n>=4, 3), got {v.shape}")
        if f.ndim != 2 or f.shape[1] != 3:
            raise MeshError(f"{what}: triangles must have shape (m, 3), got {f.shape}")
        if len(f) < 4:
            raise MeshError(f"{what}: open mesh: {len(f)} triangle(s) cannot enclose a volume (a closed mesh has at least 4)")
        if not np.all(np.isfinite(v)):
            i = int(np.argwhere(~np.isfinite(v))[0, 0])
            raise MeshError(f"{what}: vertex {i} is not finite: {v[i].tolist()}")
        if f.min() < 0 or f.max() >= len(v):
            raise MeshError(f"{what}: triangle vertex index out of range [0, {len(v)})")
        scale = np.ptp(v, axis=0).max()
        area = self.areas()
        bad = np.flatnonzero(area <= 1e-12 * scale**2)
        if len(bad):
            i = int(bad[0])
            raise MeshError(f"{what}: {len(bad)} degenerate triangle(s); triangle {i} {f[i].tolist()} has area {area[i]:.3e} m^2")
        # Every directed edge must appear once and its reverse once: closed, manifold, consistent.
        e = np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]])
        directed, counts = np.unique(e, axis=0, return_counts=True)
        if np.any(counts > 1):
            a, b = directed[np.argmax(counts)]
            raise MeshError(
                f"{what}: non-manifold or inconsistently oriented: directed edge ({a}, {b}) is used {counts.max()} times"
            )
        undirected, ucounts = np.unique(np.sort(e, axis=1), axis=0, return_counts=True)
        if np.any(ucounts != 2):
            a, b = undirected[np.argmax(ucounts != 2)]
            n = int(np.sum(ucounts == 1))
            raise MeshError(f"{what}: open mesh: {n} boundary edge(s), e.g. edge ({a}, {b}) belongs to one triangle only")
        vol = self.volume()
        if abs(vol) <= _FLAT_VOLUME_RATIO * scale**3:
            raise MeshError(f"{what}: degenerate: enclosed volume is {vol:.3e} m^3 for a bounding box of {scale:.3g} m; "
                            "a closed surface must enclose a solid")
        if vol < 0:
            raise MeshError(f"{what}: inverted: enclosed volume is {vol:.3e} m^3; triangles must be counter-clockwise seen "
                            "from outside (reverse their vertex order)")
        return self
