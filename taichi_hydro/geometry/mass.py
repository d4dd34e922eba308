"""Mass properties of shapes at unit density: volume [m^3], centre of mass in the geometry
frame [m], and the inertia tensor about the centre of mass per unit density [m^5]."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .mesh import TriMesh

__all__ = [
    "UnitMassProperties", "sphere_props", "box_props", "cylinder_props", "capsule_props", "ellipsoid_props", "surface_props",
    "posed_props", "union_props", "inertia_matrix", "inertia_problem", "gyration_radius", "TRIANGLE_RTOL",
]


@dataclass(frozen=True)
class UnitMassProperties:
    """volume [m^3]; com_G [m]; inertia_unit: 3x3 inertia about the com per unit density [m^5]."""

    volume: float
    com_G: np.ndarray
    inertia_unit: np.ndarray

    def inertia(self, mass: float) -> np.ndarray:
        """Inertia about the com [kg m^2] for a body of total `mass` [kg]."""
        return self.inertia_unit * (mass / self.volume)


def posed_props(props: UnitMassProperties, R_BG: np.ndarray, p_BG: np.ndarray) -> UnitMassProperties:
    """The same solid expressed in frame B, given its pose X_BG (rotation R_BG (3, 3), origin
    p_BG (3,) [m]): com_B = R_BG com_G + p_BG, inertia R_BG I R_BG^T (still about the com)."""
    return UnitMassProperties(props.volume, R_BG @ props.com_G + p_BG, R_BG @ props.inertia_unit @ R_BG.T)


def union_props(parts: list[UnitMassProperties]) -> UnitMassProperties:
    """Unit-density mass properties of several solids taken together, all in one frame:
    volumes add (a region where two solids overlap counts twice, as if each had its own
    material), the com is the volume-weighted mean, and each solid's inertia is moved to the
    common com by the parallel-axis rule, I + V (|d|^2 1 - d d^T) with d = com_i - com. One part
    is returned as it is."""
    if len(parts) == 1:
        return parts[0]
    volume = sum(p.volume for p in parts)
    com = sum(p.volume * p.com_G for p in parts) / volume
    inertia = np.zeros((3, 3))
    for p in parts:
        d = p.com_G - com
        inertia += p.inertia_unit + p.volume * (np.dot(d, d) * np.eye(3) - np.outer(d, d))
    return UnitMassProperties(float(volume), com, inertia)


TRIANGLE_RTOL = 1e-6
"""Slack of the triangle inequality of principal moments, relative to the largest moment: a
thin plate (I3 = I1 + I2 exactly) written with a few digits must still pass."""


def inertia_matrix(six) -> np.ndarray:
    """The symmetric 3 x 3 tensor [kg m^2] from (ixx, iyy, izz, ixy, ixz, iyz) (URDF's order of
    names; ixy is the tensor entry, -integral of x y dm)."""
    ixx, iyy, izz, ixy, ixz, iyz = (float(x) for x in six)
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


def inertia_problem(inertia: np.ndarray) -> str | None:
    """What makes a 3 x 3 inertia tensor [kg m^2] (about the centre of mass) impossible for a
    rigid body, or None: it must be symmetric positive definite, and its principal moments
    must satisfy the triangle inequalities I_a + I_b >= I_c (within TRIANGLE_RTOL of the
    largest), which every real mass distribution does (I_a + I_b - I_c = 2 integral of r_c^2 dm)."""
    if not np.all(np.isfinite(inertia)):
        return f"must be finite, got {inertia.tolist()}"
    if not np.allclose(inertia, inertia.T, rtol=0.0, atol=1e-12 * np.abs(inertia).max()):
        return f"must be symmetric, got {inertia.tolist()}"
    moments = np.linalg.eigvalsh(inertia)
    shown = ", ".join(f"{m:.6g}" for m in moments)
    if moments[0] <= 0.0:
        return f"must be positive definite: its principal moments are [{shown}] kg m^2"
    if moments[0] + moments[1] < moments[2] * (1.0 - TRIANGLE_RTOL):
        return (f"principal moments [{shown}] kg m^2 break the triangle inequality (the largest, {moments[2]:.6g}, exceeds "
                f"the sum of the other two, {moments[0] + moments[1]:.6g}): no mass distribution has them")
    return None


def gyration_radius(mass: float, inertia: np.ndarray) -> float:
    """Radius [m] of the uniform solid ball with this mass [kg] and the same trace of inertia
    [kg m^2] (a ball of radius R has trace 6/5 m R^2): sqrt(5 trace / (6 m))."""
    return math.sqrt(5.0 * float(np.trace(inertia)) / (6.0 * mass))


def _diag(v, ixx, iyy, izz) -> UnitMassProperties:
    return UnitMassProperties(v, np.zeros(3), np.diag([ixx, iyy, izz]).astype(np.float64))


def sphere_props(r: float) -> UnitMassProperties:
    v = 4.0 / 3.0 * math.pi * r**3
    i = 0.4 * v * r * r
    return _diag(v, i, i, i)


def box_props(size) -> UnitMassProperties:
    a, b, c = size
    v = a * b * c
    return _diag(v, v * (b * b + c * c) / 12, v * (a * a + c * c) / 12, v * (a * a + b * b) / 12)


def cylinder_props(r: float, length: float) -> UnitMassProperties:
    v = math.pi * r * r * length
    ixx = v * (3 * r * r + length * length) / 12
    return _diag(v, ixx, ixx, 0.5 * v * r * r)


def capsule_props(r: float, length: float) -> UnitMassProperties:
    """Capsule along z: cylinder of `length` plus two hemispheres of radius r."""
    vc = math.pi * r * r * length
    vh = 2.0 / 3.0 * math.pi * r**3  # one hemisphere
    izz = 0.5 * vc * r * r + 2 * 0.4 * vh * r * r
    # Hemisphere about its own centre of mass (3r/8 from the flat face), then shifted.
    ih_own = 0.4 * vh * r * r - vh * (3 * r / 8) ** 2
    d = 0.5 * length + 3 * r / 8
    ixx = vc * (3 * r * r + length * length) / 12 + 2 * (ih_own + vh * d * d)
    return _diag(vc + 2 * vh, ixx, ixx, izz)


def ellipsoid_props(radii) -> UnitMassProperties:
    a, b, c = radii
    v = 4.0 / 3.0 * math.pi * a * b * c
    return _diag(v, v * (b * b + c * c) / 5, v * (a * a + c * c) / 5, v * (a * a + b * b) / 5)


_CANONICAL = np.array([[2.0, 1.0, 1.0], [1.0, 2.0, 1.0], [1.0, 1.0, 2.0]]) / 120.0


def surface_props(surface: TriMesh) -> UnitMassProperties:
    """Mass properties of the solid enclosed by an outward triangle mesh, summed over the
    signed tets (origin, triangle) with the canonical second-moment tensor."""
    x = surface.vertices[surface.triangles]  # (m, 3 vertices, 3)
    det = np.einsum("ij,ij->i", x[:, 0], np.cross(x[:, 1], x[:, 2]))
    volume = det.sum() / 6.0
    com = (det[:, None] * x.sum(axis=1)).sum(axis=0) / (24.0 * volume)
    a = np.transpose(x, (0, 2, 1))  # columns are the vertices
    cov = np.einsum("m,mij,jk,mlk->il", det, a, _CANONICAL, a)  # second moment about the origin
    cov_com = cov - volume * np.outer(com, com)
    inertia = np.trace(cov_com) * np.eye(3) - cov_com
    return UnitMassProperties(float(volume), com, inertia)
