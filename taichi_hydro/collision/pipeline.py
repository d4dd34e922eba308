"""Collision stage: world poses -> contact polygon pool, for all worlds in one set of launches.

Pools have fixed capacities and a counter each. Every overflowing append is still counted, so
after a pass the host knows exactly how much room was needed: the caller grows the pools to
fit and runs the pass again (Collision.run, or the Simulator's chunk replay), or gets a
CapacityError naming the capacity when growth would pass `max_capacity`. Contacts are never
dropped silently."""

from __future__ import annotations

import numpy as np
import taichi as ti

from .. import hostcopy
from ..errors import ArgumentError, CapacityError
from ..model import Model, _upload
from ..plan import Plan
from ..types import C_CANDIDATES, C_POLYGONS, COUNTER_SLOTS, box3, host_float, ivec4, vec3
from . import broadphase as bp
from . import depth
from . import narrowphase as narrow
from . import skin as skin_rule
from .candidates import SPAN_KEPT, SPAN_SLOTS, SPAN_START
from .clip import MERGE_REL
from .pools import CAPACITY_NAMES, Capacities, PolygonPool

__all__ = ["Collision"]


class Collision:
    """Owns the per-step broad and narrow phase arrays of `worlds` worlds of `model`:

    counts (COUNTER_SLOTS,) i32: rows each pool needed in the last pass (types.C_*);
    pair_active (W, P) i32, pair_box (W, P) box3 [m]: pairs whose bounds overlap, and where;
    pair_deep (W, P) i32: 1 where a compliant mesh's core is inside the rigid geometry of its
      pair (deep overlap, see depth); geom_core_G (G, depth.CORE_POINTS) vec3 [m] and
      geom_core_n (G,) i32: each compliant mesh's core points and their count;
    pair_plane (W, P) broadphase.plane_record: an active planar pair's plane in its mesh's frame;
    pair_stale, pair_search (W, P) i32: pairs whose candidates this pass searches, and of those
      the active ones (all, without a skin);
    pair_ref (W, P) skin.pair_reference: with a skin, each pair's pose at its last search
      (collision.skin; a one-row placeholder without a skin);
    geom_region (W, G, REGION_BOXES) box3, geom_region_G, geom_region_pair, geom_region_n: the
      boxes of the active pairs in which the geometry is a, world and mesh frame (broadphase);
    cand (candidates,) ivec4, twice that with a skin, and cand_span (candidates.SPAN_SLOTS,)
      i32: the candidate element pairs (world, pair, element of a, element of b; for a planar
      pair, (world, pair, element of the mesh, 0)), the list this pass writes and, with a skin,
      the last pass's (collision.candidates: where each lies, how many rows were kept);
    keep_chunk_row (skin.chunk_slots(candidates),) i32: with a skin, where each chunk of the
      last list's kept rows goes in this pass's (broadphase.pair_activity; one placeholder without);
    pool: the polygon pool (pools.PolygonPool).
    Scalars: query_count, planar_task_count, merge_rel, skin, candidate_capacity (rows per list).

    skin [m]: 0 searches every pair's candidates every pass; s > 0 keeps a pair's list while
    it moves less than s relative to its pose at the last search (collision.skin)."""

    def __init__(self, model: Model, worlds: int, capacities: Capacities | None = None, max_capacity: int = 1 << 28,
                 skin: float = 0.0):
        self.model = model
        self.worlds = worlds
        self.max_capacity = max_capacity
        if not (np.isfinite(skin) and skin >= 0.0):
            raise ArgumentError(f"Collision: skin must be a finite length >= 0 m, got {skin!r}")
        self.skin = float(skin)
        W, P, G = worlds, max(model.pair_count, 1), max(model.geom_count, 1)  # padded: Taichi rejects empty arrays
        self.counts = ti.ndarray(ti.i32, COUNTER_SLOTS)
        self.pair_active = ti.ndarray(ti.i32, (W, P))
        self.pair_box = ti.ndarray(box3, (W, P))
        self.pair_plane = ti.ndarray(bp.plane_record, (W, P))
        self.pair_stale = ti.ndarray(ti.i32, (W, P))
        self.pair_search = ti.ndarray(ti.i32, (W, P))
        self.pair_ref = ti.ndarray(skin_rule.pair_reference, (W, P) if self.skin > 0.0 else (1, 1))
        self.cand_span = ti.ndarray(ti.i32, SPAN_SLOTS)
        self.pair_deep = ti.ndarray(ti.i32, (W, P))  # zeros until pair_depth writes it
        cores, core_count = depth.geometry_cores(model.host)
        self.geom_core_G = ti.ndarray(vec3, (G, cores.shape[1]))
        if len(cores):
            hostcopy.from_numpy(self.geom_core_G, cores.astype(host_float()))
        self.geom_core_n = _upload(ti.i32, core_count)
        self.geom_region = ti.ndarray(box3, (W, G, bp.REGION_BOXES))
        self.geom_region_G = ti.ndarray(box3, (W, G, bp.REGION_BOXES))
        self.geom_region_pair = ti.ndarray(ti.i32, (W, G, bp.REGION_BOXES))
        self.geom_region_n = ti.ndarray(ti.i32, (W, G))
        self.caps = capacities or Capacities.for_model(model, worlds)
        self._allocate(self.caps)
        self.last_counts = np.zeros(COUNTER_SLOTS, dtype=np.int64)
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
        self.cand = ti.ndarray(ivec4, caps.candidates * (2 if self.skin > 0.0 else 1))
        self.keep_chunk_row = ti.ndarray(ti.i32, skin_rule.chunk_slots(caps.candidates) if self.skin > 0.0 else 1)
        span = np.zeros(SPAN_SLOTS, dtype=np.int32)
        span[SPAN_KEPT] = -1  # nothing kept: the next pass searches every pair
        hostcopy.from_numpy(self.cand_span, span)
        self.pool = PolygonPool(caps.polygons)

    def forget_lists(self) -> None:
        """Keep no candidate list: the next pass searches every pair (after a change of the
        pressure scales that the kept lists were filtered with). The last list stays where
        it is (candidates())."""
        span = hostcopy.to_numpy(self.cand_span).astype(np.int32)
        span[SPAN_KEPT] = -1
        hostcopy.from_numpy(self.cand_span, span)

    def arrays(self) -> dict:
        """Every array and scalar the collision launches bind, by name."""
        out = {k: v for k, v in vars(self).items() if isinstance(v, ti.Ndarray)}
        out.update(self.pool.arrays())
        m = self.model
        out.update(query_count=int(m.query_elem_count), planar_task_count=int(m.planar_task_count), merge_rel=float(MERGE_REL),
                   skin=self.skin, candidate_capacity=int(self.caps.candidates))
        return out

    def add_launches(self, plan: Plan) -> None:
        """Append the collision pass to `plan` (it reads body_p, body_q, world_status and
        geom_scale besides the model and these arrays)."""
        m = self.model
        plan.add(bp.clear_counts)
        if m.pair_count == 0:
            return
        plan.add(bp.pair_activity)
        if depth.has_deep_pairs(m.host):
            plan.add(depth.pair_depth)
        if m.query_elem_count > 0:
            plan.add(bp.geometry_regions)
            plan.add(bp.find_candidates)
        if m.planar_task_count > 0:
            plan.add(bp.find_planar)
        plan.add(narrow.clip_candidates)

    def candidates(self) -> np.ndarray:
        """Host copy of the last pass's candidate list, (n, 4) int32 rows (world, pair, element
        of a, element of b), in arrival order."""
        start = int(hostcopy.to_numpy(self.cand_span)[SPAN_START])
        n = min(int(hostcopy.to_numpy(self.counts)[C_CANDIDATES]), self.caps.candidates)
        return hostcopy.to_numpy(self.cand)[start:start + n]

    def overflow(self, counts: np.ndarray) -> Capacities | None:
        """The grown capacities if `counts` overflowed any pool, else None."""
        caps = self.caps.as_tuple()
        need = [int(counts[C_CANDIDATES]), int(counts[C_POLYGONS])]
        if all(n <= c for n, c in zip(need, caps)):
            return None
        grown = [c if n <= c else max(2 * c, int(1.25 * n) + 16) for n, c in zip(need, caps)]
        return Capacities(*grown)

    def run(self, plan: Plan, args: dict, use_graph: bool) -> np.ndarray:
        """Run the collision plan over `args` (Simulator.bindings; this container's arrays are
        refreshed after a growth) until no pool overflows. Returns the counters."""
        while True:
            plan.run(args, graph=use_graph)
            self.passes += 1
            counts = hostcopy.to_numpy(self.counts).astype(np.int64)
            grown = self.overflow(counts)
            if grown is None:
                self.last_counts = counts
                return counts
            self.grow(grown)
            args = {**args, **self.arrays()}

    def grow(self, caps: Capacities) -> None:
        """Reallocate the pools at the larger capacities `caps` after an overflow (counted in
        growths; CapacityError past max_capacity)."""
        self._allocate(caps)
        self.growths += 1
