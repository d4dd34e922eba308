"""Pool sizes and the flat polygon pool, shared by every world (a world column per row)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import taichi as ti

from ..types import ivec4, poly_record, poly_vertex_values, poly_vertices, vec3

__all__ = ["Capacities", "PolygonPool", "CAPACITY_NAMES"]

CAPACITY_NAMES = ("active_elements", "cell_entries", "candidates", "polygons")


@dataclass
class Capacities:
    """Pool sizes (rows). Defaults come from Capacities.for_model: a quarter of the hashed
    elements of all worlds are active, each covers 4 cells on average and makes 2 candidates,
    and 64 polygons per world plus 2 per planar task; any of them grows on overflow."""

    active_elements: int
    cell_entries: int
    candidates: int
    polygons: int

    @staticmethod
    def for_model(model, worlds: int) -> "Capacities":
        active = max(256, worlds * model.hash_elem_count // 4)
        return Capacities(
            active_elements=active,
            cell_entries=4 * active,
            candidates=2 * active,
            polygons=max(1024, worlds * (64 + model.plane_task_count // 8)),
        )

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (self.active_elements, self.cell_entries, self.candidates, self.polygons)


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
        return {k: v.to_numpy()[:n] for k, v in self.arrays().items()}
