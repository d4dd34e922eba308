"""ContactRows: the solver's rows, one per kept polygon, grouped by world, and the per-pair
and per-body reductions their assembly makes."""

import taichi as ti

from ..scan import block_count, block_sum_size
from ..types import ID_PAIR, ID_WORLD, contact_reg, ivec4, mat3, vec3, vec4

__all__ = ["ContactRows", "run_start", "same_pair"]


@ti.func
def same_pair(a: ivec4, b: ivec4) -> ti.i32:
    """Two rows' c_ids name one pair of one world."""
    return a[ID_WORLD] == b[ID_WORLD] and a[ID_PAIR] == b[ID_PAIR]


@ti.func
def run_start(c: ti.i32, start: ti.i32, c_ids: ti.template()) -> ti.i32:
    """1 if row c begins a run of rows of one pair, rows from `start` on (a world's first row,
    or 0 for all worlds'): the rows of a pair come one after another, mostly, so a pair split
    in two makes two runs."""
    first = 1
    if c > start and same_pair(c_ids[c - 1], c_ids[c]):
        first = 0
    return first


class ContactRows:
    """Rows sized like the polygon pool (a polygon makes at most one row), reallocated when
    the pool grows (resize). Rows of world w are [world_start[w], world_start[w + 1]).

    poly_slot (C,) i32: each polygon's row within its world (-1: skipped); row_poly (C,) i32:
      the polygon of each row (deterministic ordering);
    c_ids (C,) ivec4: columns types.ID_* (world, body a, body b, pair);
    c_key (C,) ivec4: the polygon's identity (world, pair, element of a, element of b);
    c_frame (C,) mat3: rows t1, t2, n (n from a into b), world frame;
    c_ra, c_rb (C,) [m]: the contact point from each body's centre of mass, world frame;
    c_model (C,) vec4: columns types.M_* (k [N/m], phi0 [m], tau [s], A p0 [N]);
    c_reg (C,) contact_reg: columns types.R_*;
    c_gamma (C,) [N s]: the impulse, contact frame; c_delta, c_prev (C,): the previous iterate
      and a sweep's changes (Jacobi methods); c_restart (C,): a row's term of the restart test.
    Per world: world_start (W + 1,) i32, world_scratch (scan block sums).
    Per (world, pair): pair_scale (near-rigid stiffness scale), pair_weight [N] (warm-start
      weight), pair_rows, pair_first, pair_end (deterministic row ranges).
    Per (world, body): body_contacts (rows touching a dynamic body).
    Point-contact mode only (patch_point=True, [solver] contact = "point"; contact.patch_point):
      per (world, pair) patch_sum vec4 (columns patch_point.PATCH_*), patch_c, patch_ck
      (pressure- and stiffness-weighted sums of polygon centroids [N m]), patch_n, patch_nk
      (weighted sums of normals [N, N/m]).
    Scalars: world_count, world_blocks."""

    def __init__(self, worlds: int, bodies: int, pairs: int, capacity: int, patch_point: bool = False):
        W, B, P = worlds, bodies, max(pairs, 1)
        self.worlds = worlds
        self.world_start = ti.ndarray(ti.i32, W + 1)
        self.world_scratch = ti.ndarray(ti.i32, block_sum_size(W))
        self.body_contacts = ti.ndarray(ti.i32, (W, B))
        for name in ("pair_scale", "pair_weight"):
            setattr(self, name, ti.ndarray(float, (W, P)))
        for name in ("pair_rows", "pair_first", "pair_end"):
            setattr(self, name, ti.ndarray(ti.i32, (W, P)))
        if patch_point:
            self.patch_sum = ti.ndarray(vec4, (W, P))
            for name in ("patch_c", "patch_ck", "patch_n", "patch_nk"):
                setattr(self, name, ti.ndarray(vec3, (W, P)))
        self.capacity = -1
        self.resize(capacity)

    def resize(self, capacity: int) -> None:
        if capacity == self.capacity:
            return
        C = capacity
        self.poly_slot = ti.ndarray(ti.i32, C)
        self.row_poly = ti.ndarray(ti.i32, C)
        self.c_ids = ti.ndarray(ivec4, C)
        self.c_key = ti.ndarray(ivec4, C)
        self.c_frame = ti.ndarray(mat3, C)
        self.c_ra = ti.ndarray(vec3, C)
        self.c_rb = ti.ndarray(vec3, C)
        self.c_model = ti.ndarray(vec4, C)
        self.c_reg = ti.ndarray(contact_reg, C)
        self.c_gamma = ti.ndarray(vec3, C)
        self.c_delta = ti.ndarray(vec3, C)
        self.c_prev = ti.ndarray(vec3, C)
        self.c_restart = ti.ndarray(float, C)
        self.capacity = C

    def arrays(self) -> dict:
        out = {k: v for k, v in vars(self).items() if isinstance(v, ti.Ndarray)}
        out.update(world_count=int(self.worlds), world_blocks=int(block_count(self.worlds)))
        return out
