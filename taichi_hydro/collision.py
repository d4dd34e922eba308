"""Collision stage: world poses -> contact polygon pool, for all worlds in one set of launches.

Pools have fixed capacities and a counter each. Every overflowing append is still counted, so
after a pass the host knows exactly how much room was needed: Collision.run() grows the pools
to fit and runs the pass again, or raises CapacityError naming the capacity when growth would
pass `max_capacity`. Contacts are never dropped silently."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import taichi as ti

from . import broadphase as bp
from .errors import CapacityError
from .model import DeviceModel
from .narrowphase import narrowphase as np_
from .narrowphase.clip import MERGE_REL, POLY_MAX
from .scan import block_sum_size, exclusive_scan

__all__ = ["Capacities", "Collision", "PolygonPool"]

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
    def for_model(model: DeviceModel, worlds: int) -> "Capacities":
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
    """The flat polygon pool (see narrowphase for the column meaning) and its counter."""

    def __init__(self, capacity: int):
        vec8 = ti.types.vector(POLY_MAX, float)
        self.capacity = capacity
        self.poly_i = ti.ndarray(ti.types.vector(4, ti.i32), capacity)
        self.poly_g = ti.ndarray(ti.math.vec4, capacity)
        self.poly_c = ti.ndarray(ti.math.vec3, capacity)
        self.poly_n = ti.ndarray(ti.math.vec3, capacity)
        self.poly_nv = ti.ndarray(ti.i32, capacity)
        self.poly_v = ti.ndarray(ti.types.matrix(POLY_MAX, 3, float), capacity)
        self.poly_vp = ti.ndarray(vec8, capacity)

    def arrays(self):
        return (self.poly_i, self.poly_g, self.poly_c, self.poly_n, self.poly_nv, self.poly_v, self.poly_vp)

    def to_numpy(self, count: int) -> dict[str, np.ndarray]:
        """Host copy of the first `count` rows."""
        n = min(count, self.capacity)
        names = ("poly_i", "poly_g", "poly_c", "poly_n", "poly_nv", "poly_v", "poly_vp")
        return {k: getattr(self, k).to_numpy()[:n] for k in names}


def _pow2_at_least(n: int) -> int:
    return 1 << max(4, int(n - 1).bit_length())


class Collision:
    """Owns the per-step broad/narrow phase arrays for `worlds` worlds of `model`."""

    def __init__(self, model: DeviceModel, worlds: int, capacities: Capacities | None = None, max_capacity: int = 1 << 28):
        self.model = model
        self.worlds = worlds
        self.max_capacity = max_capacity
        self.inv_cell = 1.0 / model.data.cell_size
        W, P, G = worlds, max(model.pair_count, 1), model.geom_count
        self.counts = ti.ndarray(ti.i32, 8)
        self.pair_active = ti.ndarray(ti.i32, (W, P))
        self.pair_box = ti.ndarray(bp.box3, (W, P))
        self.geom_region = ti.ndarray(bp.box3, (W, G))
        self.caps = capacities or Capacities.for_model(model, worlds)
        self._allocate(self.caps)
        self.last_counts = np.zeros(8, dtype=np.int64)
        self.passes = 0

    def _allocate(self, caps: Capacities):
        for name, value in zip(CAPACITY_NAMES, caps.as_tuple()):
            if value > self.max_capacity:
                raise CapacityError(
                    f"collision pool '{name}' needs {value} rows, above max_capacity={self.max_capacity}; "
                    "raise Simulator(max_capacity=...) or reduce worlds/resolution"
                )
        self.caps = caps
        A, E, C = caps.active_elements, caps.cell_entries, caps.candidates
        nb = _pow2_at_least(2 * E)
        self.act_we = ti.ndarray(ti.math.ivec2, A)
        self.act_box = ti.ndarray(bp.box3, A)
        self.ent_key = ti.ndarray(bp.ivec4, E)
        self.ent_act = ti.ndarray(ti.i32, E)
        self.ent_bucket = ti.ndarray(ti.i32, E)
        self.sorted_ent = ti.ndarray(ti.i32, E)
        self.bucket_start = ti.ndarray(ti.i32, nb + 1)
        self.bucket_cursor = ti.ndarray(ti.i32, nb + 1)
        self.scan_scratch = ti.ndarray(ti.i32, block_sum_size(nb))
        self.bucket_count = nb
        self.cand = ti.ndarray(bp.ivec4, C)
        self.pool = PolygonPool(caps.polygons)

    def _pass(self, body_p, body_q):
        m = self.model
        bp.clear_hash(self.counts, self.bucket_start)
        if m.pair_count == 0:
            return
        bp.pair_activity(body_p, body_q, m.geom_i, m.geom_box_G, m.pair_i, self.pair_active, self.pair_box)
        if m.hash_elem_count > 0:
            bp.geometry_regions(m.geom_i, m.geom_pair_start, m.geom_pair_list, self.pair_active, self.pair_box, self.geom_region)
            bp.insert_elements(
                body_p, body_q, m.geom_i, m.hash_elem_geom, m.tet_X_G, m.tri_X_G, self.geom_region, self.inv_cell,
                m.hash_elem_count, self.counts, self.act_we, self.act_box, self.ent_key, self.ent_act, self.ent_bucket,
                self.bucket_start,
            )
            exclusive_scan(self.bucket_start, self.bucket_cursor, self.scan_scratch, self.bucket_count)
            bp.scatter_entries(self.counts, self.ent_bucket, self.bucket_cursor, self.sorted_ent)
            bp.find_candidates(
                self.counts, self.sorted_ent, self.ent_key, self.ent_act, self.ent_bucket, self.bucket_start, self.act_we,
                self.act_box, m.hash_elem_geom, m.geom_i, m.pair_table, m.pair_i, self.pair_active, self.inv_cell, self.cand,
            )
            np_.clip_candidates(
                self.counts, self.cand, body_p, body_q, m.geom_i, m.pair_i, m.tet_X_G, m.tet_p, m.tet_grad_G, m.tri_X_G,
                m.tri_n_G, MERGE_REL, *self.pool.arrays(),
            )
        if m.plane_task_count > 0:
            np_.clip_planar(
                self.counts, m.plane_task, m.plane_task_count, self.pair_active, body_p, body_q, m.geom_i, m.geom_f, m.pair_i,
                m.tet_X_G, m.tet_p, m.tet_grad_G, m.tri_X_G, m.tri_n_G, MERGE_REL, *self.pool.arrays(),
            )

    def overflow(self, counts: np.ndarray) -> Capacities | None:
        """The grown capacities if `counts` overflowed any pool, else None."""
        caps = self.caps.as_tuple()
        need = [int(counts[i]) for i in range(4)]
        if all(n <= c for n, c in zip(need, caps)):
            return None
        grown = [c if n <= c else max(2 * c, int(1.25 * n) + 16) for n, c in zip(need, caps)]
        return Capacities(*grown)

    def run(self, body_p, body_q) -> np.ndarray:
        """Collide all worlds at the poses (body_p, body_q); grows pools and redoes the pass on
        overflow. Returns the counters (active elements, cell entries, candidates, polygons)."""
        while True:
            self._pass(body_p, body_q)
            self.passes += 1
            counts = self.counts.to_numpy().astype(np.int64)
            grown = self.overflow(counts)
            if grown is None:
                self.last_counts = counts
                return counts
            self._allocate(grown)

    @property
    def polygon_count(self) -> int:
        return int(self.last_counts[bp.C_POLYGONS])
