"""Per-contact warm start: the solved impulse of every polygon, keyed by (world, pair, element
of a, element of b), kept in a hash table from one step to the next.

A polygon keeps its key while the same two elements overlap (elements are fixed in their body
frames), so a sliding or spinning patch starts each solve from last step's impulses, friction
directions included. The table stores impulses in the world frame. Each world has a region of
its own, twice its rows of the stored step (open addressing with linear probing inside the
region, at most half full), so the part of the table in use is twice the stored rows, not the
pool's capacity, and it is all a step clears; a world's entries lie together. Slots are
claimed with an atomic increment (no compare-and-swap needed); the regions are cleared after
the lookups of a step and refilled after its solve. Between two steps the table holds the
last step's impulses: Simulator.reset hides those of the worlds it resets (forget_worlds), so
a reset world starts cold, like a fresh simulator. When the pools grow, the entries move to
the larger table as they are (a world's region does not depend on the table's size), so
growth does not cost a cold start."""


import functools

import taichi as ti

from .. import backend

from .. import hashing, hostcopy
from ..backend import spend_launches
from ..plan import ndarray_dtype
from ..types import ID_PAIR, ID_WORLD, K_WORLD, M_FORCE0, ivec4, mat3, nd, vec3, vec4
from .rows import run_start, same_pair

__all__ = ["WarmStartTable", "lookup", "look_up_impulses", "clear_table", "store_impulses", "forget_worlds"]

REGION_SLOTS_PER_ROW = 2
"""Slots of a world's region per contact row of the step it stores (a load of at most 1/2)."""


class WarmStartTable:
    """Owner of what one step leaves for the next one's warm start:

    table_key (slots,) ivec4, table_val (slots,) [N s] world frame, table_occ (slots,) i32: the
      open-addressing table of per-polygon impulses, REGION_SLOTS_PER_ROW slots per row of the
      pool's capacity;
    table_start (W + 1,) i32: the rows' world_start of the step the table holds; world w's
      region is the slots [2 table_start[w], 2 table_start[w + 1]) (region_of);
    pair_impulse (W, P) [N s]: the total impulse of each pair on its higher body, world frame.
    save() / restore(): copies of these arrays for the Simulator's chunk replay."""

    def __init__(self, worlds: int, pairs: int, rows: int):
        self.pair_impulse = ti.ndarray(vec3, (worlds, max(pairs, 1)))
        self._saved_pair_impulse = ti.ndarray(vec3, (worlds, max(pairs, 1)))
        self.table_start = ti.ndarray(ti.i32, worlds + 1)
        self._saved_table_start = ti.ndarray(ti.i32, worlds + 1)
        spend_launches(1)
        self.table_start.fill(0)  # every region empty: nothing stored yet
        self.rows = -1
        self.resize(rows)

    def resize(self, rows: int) -> None:
        """A table for `rows` polygon rows; entries already stored move to it unchanged (the
        regions depend on table_start only), so growth does not cost a cold start."""
        if rows == self.rows:
            return
        slots = REGION_SLOTS_PER_ROW * max(rows, 8)
        old = self._arrays() if self.rows >= 0 else None
        self.table_key = ti.ndarray(ivec4, slots)
        self.table_val = ti.ndarray(vec3, slots)
        self.table_occ = ti.ndarray(ti.i32, slots)
        self._saved = tuple(ti.ndarray(ndarray_dtype(a), slots) for a in self._arrays())
        spend_launches(1)
        self.table_occ.fill(0)
        if old is not None:
            spend_launches(1)
            copy_table(*old, *self._arrays())
        self.rows = rows

    def _arrays(self) -> tuple:
        return self.table_key, self.table_val, self.table_occ

    def _kept(self) -> tuple:
        """(array, its copy) of what save() keeps."""
        return tuple(zip((*self._saved, self._saved_pair_impulse, self._saved_table_start),
                         (*self._arrays(), self.pair_impulse, self.table_start)))

    def save(self) -> None:
        """Copy the table and the pair impulses aside (the start of a chunk of steps)."""
        for saved, arr in self._kept():
            hostcopy.copy(saved, arr)

    def restore(self) -> None:
        """Back to the last save()."""
        for saved, arr in self._kept():
            hostcopy.copy(arr, saved)

    def forget(self, world_row) -> None:
        """Hide the stored impulses of the worlds with world_row[w] >= 0 (see forget_worlds)."""
        spend_launches(1)
        forget_worlds(world_row, self.table_key, self.table_occ)

    def arrays(self) -> dict:
        return {"table_key": self.table_key, "table_val": self.table_val, "table_occ": self.table_occ,
                "table_start": self.table_start, "pair_impulse": self.pair_impulse}


@ti.func
def region_of(w: ti.i32, starts: ti.template()):
    """(first slot, slots) of world w's region for the rows' prefix `starts` (world_start)."""
    first = REGION_SLOTS_PER_ROW * starts[w]
    return first, REGION_SLOTS_PER_ROW * starts[w + 1] - first


@ti.func
def key_offset(key: ivec4, size: ti.i32) -> ti.i32:
    """The key's home slot in a region of `size` > 0 slots."""
    h = ti.u32(0x811C9DC5)
    for k in ti.static(range(4)):
        h = hashing.combine(h, key[k])
    return ti.cast(hashing.finish(h) % ti.cast(size, ti.u32), ti.i32)


@ti.func
def lookup(key: ivec4, table_start: ti.template(), table_key: ti.template(), table_val: ti.template(),
           table_occ: ti.template()):
    """(found, world-frame impulse) for `key`, in its world's region."""
    first, size = region_of(key[K_WORLD], table_start)
    found = 0
    value = vec3(0.0)
    if size > 0:
        k = key_offset(key, size)
        for _ in range(size):
            s = first + k
            if table_occ[s] == 0:
                break
            if hashing.same_key(table_key[s], key) == 1:
                found = 1
                value = table_val[s]
                break
            k = k + 1 if k + 1 < size else 0
    return found, value


@ti.kernel
def look_up_impulses(
    world_start: nd(dtype=ti.i32, ndim=1),
    c_ids: nd(dtype=ivec4, ndim=1),
    c_key: nd(dtype=ivec4, ndim=1),
    c_model: nd(dtype=vec4, ndim=1),
    pair_weight: nd(dtype=float, ndim=2),
    pair_impulse: nd(dtype=vec3, ndim=2),
    table_start: nd(dtype=ti.i32, ndim=1),
    table_key: nd(dtype=ivec4, ndim=1),
    table_val: nd(dtype=vec3, ndim=1),
    table_occ: nd(dtype=ti.i32, ndim=1),
    c_gamma: nd(dtype=vec3, ndim=1),
):
    """c_gamma[c] = each row's warm-start impulse [N s], world frame: its key's last impulse,
    else its share of its pair's last total (c_model's A p0 over the pair's weight), else 0
    (contact.assemble's finalize turns it into the contact frame and projects it on the cone).
    A kernel of its own, apart from finalize's arithmetic: a short loop keeps several lookups in
    flight at once (inside finalize's loop they were slower: README, "Warm-start regions")."""
    W = world_start.shape[0] - 1
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for c in range(world_start[W]):
        found, impulse = lookup(c_key[c], table_start, table_key, table_val, table_occ)
        if found == 0:
            ids = c_ids[c]
            w, pair = ids[ID_WORLD], ids[ID_PAIR]
            if pair_weight[w, pair] > 0.0:
                impulse = (ti.max(c_model[c][M_FORCE0], 0.0) / pair_weight[w, pair]) * pair_impulse[w, pair]
        c_gamma[c] = impulse


@ti.kernel
def clear_table(table_start: nd(dtype=ti.i32, ndim=1), table_occ: nd(dtype=ti.i32, ndim=1)):
    """Frees the slots of every world's region (the rest of the table is never written)."""
    W = table_start.shape[0] - 1
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for s in range(REGION_SLOTS_PER_ROW * table_start[W]):
        table_occ[s] = 0


@ti.func
def insert(key: ivec4, value: vec3, first: ti.i32, size: ti.i32, table_key: ti.template(), table_val: ti.template(),
           table_occ: ti.template()):
    """Put `value` under `key` in the first free slot of its probe chain in the region of
    `size` slots from `first`."""
    k = key_offset(key, size)
    for _ in range(size):
        s = first + k
        if ti.atomic_add(table_occ[s], 1) == 0:
            table_key[s] = key
            table_val[s] = value
            break
        k = k + 1 if k + 1 < size else 0


@ti.kernel
def copy_table(old_key: nd(dtype=ivec4, ndim=1), old_val: nd(dtype=vec3, ndim=1), old_occ: nd(dtype=ti.i32, ndim=1),
               table_key: nd(dtype=ivec4, ndim=1), table_val: nd(dtype=vec3, ndim=1), table_occ: nd(dtype=ti.i32, ndim=1)):
    """The old table's entries into the same slots of the (empty, larger) new one."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for s in range(old_occ.shape[0]):
        if old_occ[s] != 0:
            table_key[s] = old_key[s]
            table_val[s] = old_val[s]
            table_occ[s] = old_occ[s]


@functools.lru_cache(maxsize=None)
def store_impulses(accumulate: bool):
    """The kernel that stores a step's impulses for the next one's warm start; with
    accumulate, it also sums each pair's total (pair_impulse; the deterministic mode sums them
    in row order instead, contact.ordering.sum_pair_impulses)."""

    @ti.kernel
    def store(
        world_start: nd(dtype=ti.i32, ndim=1),
        c_ids: nd(dtype=ivec4, ndim=1),
        c_key: nd(dtype=ivec4, ndim=1),
        c_frame: nd(dtype=mat3, ndim=1),
        c_gamma: nd(dtype=vec3, ndim=1),
        pair_impulse: nd(dtype=vec3, ndim=2),
        table_start: nd(dtype=ti.i32, ndim=1),
        table_key: nd(dtype=ivec4, ndim=1),
        table_val: nd(dtype=vec3, ndim=1),
        table_occ: nd(dtype=ti.i32, ndim=1),
    ):
        """Inserts every contact's impulse (world frame) under its key, in its world's region
        for this step's rows (world_start, which becomes table_start); with accumulate,
        pair_impulse[w, p] = the total impulse of the pair's contacts on its higher body, world
        frame [N s] (the next step's warm start of new polygons: summed a run of one pair's rows
        at a time, then added atomically, one atomic per run instead of one per row)."""
        W = world_start.shape[0] - 1
        ti.loop_config(serialize=backend.SERIAL_LOOPS)
        for w in range(W + 1):
            table_start[w] = world_start[w]
        if ti.static(accumulate):
            ti.loop_config(serialize=backend.SERIAL_LOOPS)
            for w, p in ti.ndrange(pair_impulse.shape[0], pair_impulse.shape[1]):
                pair_impulse[w, p] = vec3(0.0)
        ti.loop_config(serialize=backend.SERIAL_LOOPS)
        for c in range(world_start[W]):
            key = c_key[c]
            impulse = c_frame[c].transpose() @ c_gamma[c]
            first, size = region_of(key[K_WORLD], world_start)
            insert(key, impulse, first, size, table_key, table_val, table_occ)
        if ti.static(accumulate):
            n = world_start[W]
            ti.loop_config(serialize=backend.SERIAL_LOOPS)
            for c in range(n):
                if run_start(c, 0, c_ids):
                    ids = c_ids[c]
                    total = c_frame[c].transpose() @ c_gamma[c]
                    e = c + 1
                    while e < n and same_pair(c_ids[e], ids):
                        total += c_frame[e].transpose() @ c_gamma[e]
                        e += 1
                    ti.atomic_add(pair_impulse[ids[ID_WORLD], ids[ID_PAIR]], total)

    return store


@ti.kernel
def forget_worlds(world_row: nd(dtype=ti.i32, ndim=1), table_key: nd(dtype=ivec4, ndim=1), table_occ: nd(dtype=ti.i32, ndim=1)):
    """Hides the stored impulses of every world w with world_row[w] >= 0 (reset worlds): their
    keys get world -1, which no lookup asks for. The slots stay occupied so that the probe
    chains of the other worlds' keys are unbroken; clear_table frees them at the next step."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for s in range(table_occ.shape[0]):
        if table_occ[s] != 0:
            key = table_key[s]
            w = key[K_WORLD]
            if w >= 0 and w < world_row.shape[0]:
                if world_row[w] >= 0:
                    key[K_WORLD] = -1
                    table_key[s] = key
