"""Mass properties of shapes at unit density: volume [m^3], centre of mass in the geometry
frame [m], and the inertia tensor about the centre of mass per unit density [m^5]."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .mesh import TriMesh

__all__ = ["UnitMassProperties", "sphere_props", "box_props", "cylinder_props", "capsule_props", "ellipsoid_props", "surface_props"]


@dataclass(frozen=True)
class UnitMassProperties:
    """volume [m^3]; com_G [m]; inertia_unit: 3x3 inertia about the com per unit density [m^5]."""

    volume: float
    com_G: np.ndarray
    inertia_unit: np.ndarray

    def inertia(self, mass: float) -> np.ndarray:
        """Inertia about the com [kg m^2] for a body of total `mass` [kg]."""
        return self.inertia_unit * (mass / self.volume)


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
