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
from .plan import Plan
from .scan import block_count, block_sum_size, scan_add, scan_blocks, scan_sums

__all__ = ["Capacities", "Collision", "PolygonPool"]

CAPACITY_NAMES = ("active_elements", "cell_entries", "candidates", "polygons")
POOL_ARGS = ("poly_i", "poly_g", "poly_c", "poly_n", "poly_nv", "poly_v", "poly_vp")
MODEL_ARGS = (
    "tet_X_G", "tet_p", "tet_grad_G", "tri_X_G", "tri_n_G", "geom_i", "geom_f", "geom_box_G", "geom_ball_G", "hash_elem_geom", "pair_i",
    "pair_table", "geom_pair_start", "geom_pair_list", "plane_task",
)


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
        self.poly_g = ti.ndarray(vec8, capacity)
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
    """Owns the per-step broad/narrow phase arrays for `worlds` worlds of `model`.

    use_graph: dispatch the pass as one Taichi compute graph (see plan.Plan). world_status:
    the (worlds,) i32 array that marks diverged worlds (skipped); a zero one by default.
    geom_scale: pressure scale per (world, geometry), leading dimension 1 or worlds (the
    model's shared ones by default; set_geom_scale replaces it)."""

    def __init__(self, model: DeviceModel, worlds: int, capacities: Capacities | None = None, max_capacity: int = 1 << 28,
                 use_graph: bool = True, world_status=None):
        self.model = model
        self.worlds = worlds
        self.max_capacity = max_capacity
        self.inv_cell = 1.0 / model.data.cell_size
        W, P, G = worlds, max(model.pair_count, 1), model.geom_count
        self.counts = ti.ndarray(ti.i32, 8)
        if world_status is None:
            world_status = ti.ndarray(ti.i32, W)
            world_status.fill(0)
        self.world_status = world_status
        self.geom_scale = model.geom_scale
        self.pair_active = ti.ndarray(ti.i32, (W, P))
        self.pair_box = ti.ndarray(bp.box3, (W, P))
        self.geom_region = ti.ndarray(bp.box3, (W, G, bp.REGION_BOXES))
        self.geom_region_pair = ti.ndarray(ti.i32, (W, G, bp.REGION_BOXES))
        self.geom_region_n = ti.ndarray(ti.i32, (W, G))
        self.use_graph = use_graph
        self.plan = self._build_plan()
        self.caps = capacities or Capacities.for_model(model, worlds)
        self._allocate(self.caps)
        self.last_counts = np.zeros(8, dtype=np.int64)
        self.passes = 0
        self.growths = 0  # pool overflows so far, each answered by growing and recomputing

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
        self.args = self._args()

    def _build_plan(self) -> Plan:
        """The collision pass as a list of launches (see plan.Plan)."""
        m = self.model
        plan = Plan("collide").add(bp.clear_hash, "counts", "bucket_start")
        if m.pair_count == 0:
            return plan
        plan.add(bp.pair_activity, "world_status", "body_p", "body_q", "geom_i", "geom_box_G", "geom_ball_G", "pair_i", "pair_active",
                 "pair_box")
        if m.hash_elem_count > 0:
            plan.add(bp.geometry_regions, "geom_i", "geom_pair_start", "geom_pair_list", "pair_active", "pair_box", "geom_region",
                     "geom_region_pair", "geom_region_n")
            plan.add(
                bp.insert_elements, "body_p", "body_q", "geom_i", "hash_elem_geom", "tet_X_G", "tri_X_G", "geom_region", "geom_region_n",
                "inv_cell",
                "hash_count", "counts", "act_we", "act_box", "ent_key", "ent_act", "ent_bucket", "bucket_start",
            )
            plan.add(scan_blocks, "bucket_start", "scan_scratch", "bucket_count")
            plan.add(scan_sums, "scan_scratch", "scan_blocks")
            plan.add(scan_add, "bucket_start", "bucket_cursor", "scan_scratch", "bucket_count")
            plan.add(bp.scatter_entries, "counts", "ent_bucket", "bucket_cursor", "sorted_ent")
            plan.add(
                bp.find_candidates, "counts", "sorted_ent", "ent_key", "ent_act", "bucket_start", "act_we", "act_box", "hash_elem_geom",
                "geom_i", "geom_pair_start", "geom_pair_list", "geom_region_pair", "geom_region_n", "pair_i", "pair_active", "inv_cell",
                "cand",
            )
            plan.add(np_.clip_candidates, "counts", "cand", "body_p", "body_q", "geom_i", "pair_i", "tet_X_G", "tet_p", "tet_grad_G",
                     "tri_X_G", "tri_n_G", "geom_scale", "merge_rel", *POOL_ARGS)
        if m.plane_task_count > 0:
            plan.add(np_.clip_planar, "counts", "plane_task", "plane_task_count", "pair_active", "body_p", "body_q", "geom_i", "geom_f",
                     "pair_i", "tet_X_G", "tet_p", "tet_grad_G", "tri_X_G", "tri_n_G", "geom_scale", "merge_rel", *POOL_ARGS)
        return plan

    def _args(self) -> dict:
        """Every array and scalar the plan names, for the current pools."""
        m = self.model
        args = {name: getattr(m, name) for name in MODEL_ARGS}
        args.update(
            counts=self.counts, world_status=self.world_status, geom_scale=self.geom_scale,
            pair_active=self.pair_active, pair_box=self.pair_box, geom_region=self.geom_region,
            geom_region_pair=self.geom_region_pair, geom_region_n=self.geom_region_n,
            act_we=self.act_we, act_box=self.act_box, ent_key=self.ent_key, ent_act=self.ent_act, ent_bucket=self.ent_bucket,
            sorted_ent=self.sorted_ent, bucket_start=self.bucket_start, bucket_cursor=self.bucket_cursor,
            scan_scratch=self.scan_scratch, cand=self.cand, inv_cell=float(self.inv_cell), hash_count=int(m.hash_elem_count),
            plane_task_count=int(m.plane_task_count), merge_rel=float(MERGE_REL), bucket_count=int(self.bucket_count),
            scan_blocks=int(block_count(self.bucket_count)),
        )
        args.update(zip(POOL_ARGS, self.pool.arrays()))
        return args

    def set_geom_scale(self, geom_scale) -> None:
        """Use `geom_scale` ((1 or worlds, geometries) float ndarray, E_world / E_scene) from
        the next pass on."""
        self.geom_scale = geom_scale
        self.args["geom_scale"] = geom_scale

    def _pass(self, body_p, body_q):
        self.args["body_p"], self.args["body_q"] = body_p, body_q
        self.plan.run(self.args, graph=self.use_graph)

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
            self.grow(grown)

    def grow(self, caps: Capacities) -> None:
        """Reallocate the pools at the larger capacities `caps` after an overflow (counted in
        growths; CapacityError past max_capacity)."""
        self._allocate(caps)
        self.growths += 1

    @property
    def polygon_count(self) -> int:
        return int(self.last_counts[bp.C_POLYGONS])
