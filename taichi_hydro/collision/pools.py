"""Pool sizes and the flat polygon pool, shared by every world (a world column per row)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import taichi as ti

from .. import hostcopy
from ..types import ivec4, poly_record, poly_vertex_values, poly_vertices, vec3

__all__ = ["Capacities", "PolygonPool", "CAPACITY_NAMES"]

CAPACITY_NAMES = ("candidates", "polygons")


@dataclass
class Capacities:
    """Pool sizes (rows): candidate element pairs (broad phase) and polygons (narrow phase).
    Defaults come from Capacities.for_model: half as many candidates as the query elements of
    all worlds plus 64 per world and one per 8 elements of the planar pairs' meshes, and 64
    polygons per world plus the same share of those elements; either grows on overflow."""

    candidates: int
    polygons: int

    @staticmethod
    def for_model(model, worlds: int) -> "Capacities":
        planar = model.planar_element_count
        return Capacities(
            candidates=max(1024, worlds * (model.query_elem_count // 2 + 64 + planar // 8)),
            polygons=max(1024, worlds * (64 + planar // 8)),
        )

    def as_tuple(self) -> tuple[int, int]:
        return (self.candidates, self.polygons)


class PolygonPool:
    """The flat polygon pool, one row per polygon of any world, in arrival order:
    poly_i (world, pair, element of a, element of b); poly_g the scalars (columns types.POLY_*);
    poly_c centroid [m] and poly_n unit normal (from the pair's lower body to its higher one),
    world frame; poly_nv vertex count; poly_v vertices [m], world frame; poly_vp pressure at each
    vertex [Pa]."""

    NAMES = ("poly_i", "poly_g", "poly_c", "poly_n", "poly_nv", "poly_v", "poly_vp")

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.poly_i = ti.ndarray(ivec4, capacity)
        self.poly_g = ti.ndarray(poly_record, capacity)
        self.poly_c = ti.ndarray(vec3, capacity)
        self.poly_n = ti.ndarray(vec3, capacity)
        self.poly_nv = ti.ndarray(ti.i32, capacity)
        self.poly_v = ti.ndarray(poly_vertices, capacity)
        self.poly_vp = ti.ndarray(poly_vertex_values, capacity)

    def arrays(self) -> dict:
        return {name: getattr(self, name) for name in self.NAMES}

    def to_numpy(self, count: int) -> dict[str, np.ndarray]:
        """Host copy of the first `count` rows."""
        n = min(count, self.capacity)
        return {k: hostcopy.to_numpy(v)[:n] for k, v in self.arrays().items()}
