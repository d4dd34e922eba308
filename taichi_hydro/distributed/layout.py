"""How a batch of W worlds is split over K shards: contiguous slices of balanced size, and the
maps between global world indices (the batch API's) and a shard's local ones (its Simulator's).

Pure NumPy: no Ray, no Taichi."""

from __future__ import annotations

import numpy as np

from ..checks import integer
from ..errors import ArgumentError

__all__ = ["Layout", "shard_ranges"]


def shard_ranges(worlds: int, shards: int) -> tuple[tuple[int, int], ...]:
    """(first, stop) of each shard's worlds: contiguous slices in world order whose sizes differ
    by at most one (the first worlds % shards shards hold one world more). ArgumentError unless
    1 <= shards <= worlds."""
    worlds = integer(worlds, "ShardedSimulator(worlds)", 1)
    shards = integer(shards, "ShardedSimulator(shards)", 1)
    if shards > worlds:
        raise ArgumentError(f"ShardedSimulator(shards) must be at most worlds = {worlds} (a shard holds one world or more), "
                            f"got {shards}")
    base, extra = divmod(worlds, shards)
    stops = np.cumsum([base + (k < extra) for k in range(shards)])
    return tuple((int(stop - base - (k < extra)), int(stop)) for k, stop in enumerate(stops))


class Layout:
    """The shards of a batch: `ranges[k]` = (first, stop) of shard k's worlds (shard_ranges)."""

    def __init__(self, worlds: int, shards: int):
        self.ranges = shard_ranges(worlds, shards)
        self.worlds, self.shards = int(worlds), len(self.ranges)
        self.firsts = np.array([a for a, _ in self.ranges], dtype=np.int64)

    def sizes(self) -> list[int]:
        """Worlds per shard."""
        return [b - a for a, b in self.ranges]

    def split(self, array: np.ndarray) -> list[np.ndarray]:
        """Views of `array` (leading axis: worlds) holding each shard's rows."""
        if array.shape[0] != self.worlds:
            raise ValueError(f"split needs {self.worlds} rows, got {array.shape[0]}")
        return [array[a:b] for a, b in self.ranges]

    def locate(self, world: int) -> tuple[int, int]:
        """(shard, local index) of global world `world` (0 <= world < worlds, checked by the caller)."""
        k = int(np.searchsorted(self.firsts, world, side="right") - 1)
        return k, int(world - self.firsts[k])

    def split_selection(self, selected: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """For global world indices `selected` (distinct, any order): per shard, (positions in
        `selected` of the worlds it holds, in the given order; their local indices)."""
        selected = np.asarray(selected, dtype=np.int64)
        out = []
        for a, b in self.ranges:
            positions = np.flatnonzero((selected >= a) & (selected < b))
            out.append((positions, selected[positions] - a))
        return out

    def gather(self, parts: list[np.ndarray], dtype=None) -> np.ndarray:
        """One array in global world order from each shard's rows (one copy, converted to
        `dtype` on the way when given)."""
        sizes = [len(p) for p in parts]
        if sizes != self.sizes():
            raise ValueError(f"gather needs rows {self.sizes()} per shard, got {sizes}")
        return np.concatenate(parts, axis=0, dtype=dtype)
