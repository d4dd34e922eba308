"""Temporal coherence of the broad phase: candidate lists kept while the pair barely moves
(Verlet lists; issue 18 item 2). On with a skin s > 0 [m] ([collision] skin, default
scene.SKIN); s = 0 searches every pair at every pass.

The rule. When the candidates of a pair (geometries F, M) are searched, every element box of
one side is inflated by s, so the list holds every element pair whose elements are within
distance s of each other (two convex elements at distance <= s have world boxes whose gap along
every axis is <= s). The pair's pose at that search is kept as a reference: the position c_F
of the centre c of M's bounding ball (radius r_M, about its body's frame) in the body frame of
F, and the relative orientation q_FM. While the pair's later poses satisfy

    delta = |c_F - c_F,ref| + 2 |vec(q_FM q_FM,ref^-1)| r_M  <=  s - rounding,

the list is kept. Why it holds: a point y of M is c + u with |u| <= r_M; in F's frame it is at
c_F + R_FM u, so it moved by (c_F - c_F,ref) + (R_FM - R_FM,ref) u, and
|(R_FM - R_FM,ref) u| = |(R_FM R_FM,ref^T - 1) R_FM,ref u| = 2 sin(theta / 2) |u_perp| <=
2 |vec(q_rel)| r_M, where theta is the angle of the relative turn q_rel (|vec(q_rel)| =
sin(theta / 2) exactly, without the ill-conditioned acos). No point of M moves by more than
delta relative to F, so two elements farther apart than s at the search are still apart by
more than s - delta >= 0 now: they do not intersect and have no polygon. The list is a superset
of the element pairs that intersect, and clipping (every step) decides exactly which do: the
polygons are those of a fresh search. rounding = TREE_SLACK (|c_F| + r_M) covers float32
rounding of delta. The search also leaves out the tet-tet pairs that have no polygon in any
pose within the rule (clip.clearly_no_polygon with the skin: M's field moves by at most
|grad p_M| s at a point of F); that test reads the pressure scales, so a change of modulus
(Simulator.set_parameters) drops every kept list (Collision.forget_lists). F is geometry a of a
mesh-mesh pair and M geometry b; for a planar pair F is the half-space and M the mesh (a plane
has no bounding ball). The bound depends only on the relative pose, not on how the bodies got
there: poses written from the host (set_state, reset) or a chunk replayed after a pool overflow
keep a list valid when the rule holds.

A pair is searched again (stale) when the rule fails, when its reference is invalid (first
step, a frozen world, a non-finite pose), or when the kept list is incomplete (the candidate
pool overflowed in the last pass, or was reallocated: no kept count). Stale pairs are
searched with the inflated boxes; the candidates of the other pairs are copied from the last
pass's list first (turn_over, kept_in_chunk, copy_kept_chunk, in broadphase.pair_activity's
launch), and the new list's length is recorded for the next pass (candidates.record_length,
in the narrow phase's launch): a skin adds no launch to the step. The two lists are the two
halves of one array that swap roles every pass (collision.candidates): keeping a list costs
one read and one write per row.

Each pair's own skin. A wider list costs clipping at every pass it is kept and pays only when
it saves searches, so a stale pair is searched with the skin s only when, at its bodies'
present velocities, it would keep the list for SKIN_STEPS steps (search_skin, motion_rate);
a pair that moves faster (a falling body, an impact, a slide) is searched tightly, exactly as
without a skin, and again at the next pass. The rule reads the skin each list was searched
with (pair_reference's s_pair), so the choice changes the cost, never the polygons; the
velocities are only a forecast.

Order. The kept rows keep their order exactly (a compaction: rows kept per chunk of
KEEP_CHUNK rows, the chunks' offsets by a prefix sum, each chunk's rows written in order), then
those of the searched pairs arrive through the atomic counter. Appending the kept rows through
the counter instead interleaves the threads' rows at every pass, and over many passes the rows
of a pair scatter: the solver sums each run of one pair's rows once (solver.newton), so
scattered rows made its Hessian and gradient passes twice as slow on a settled pile. The order
still differs from a fresh search's, which is itself thread-timing dependent. The
deterministic mode ([solver] deterministic = true) orders contact rows by (pair, element a,
element b), so its results are independent of it, bit for bit equal with and without a skin
(tests/test_skin.py)."""

import taichi as ti

from ..math3d import quat_mul
from ..types import K_PAIR, K_WORLD, RealVector, vec3, vec4
from .candidates import SPAN_KEPT, SPAN_START

pair_reference = RealVector(8)
"""A pair's pose at its last search and the skin it was searched with: (c_F (3) [m], q_FM (4),
s_pair [m]); s_pair = 0 (also the zeros of a new array, or of a frozen world) keeps nothing:
the pair is searched again at the next pass."""

SKIN_STEPS = 4.0
"""A pair is searched with the skin only when, at its velocities, it would keep its list for at
least this many steps (search_skin); one that moves faster is searched without, as if there
were no skin, and searched again at the next pass."""


@ti.func
def quat_conj(q: vec4) -> vec4:
    return vec4(q[0], -q[1], -q[2], -q[3])


@ti.func
def relative_pose(ball_M: vec4, p_F: vec3, q_F: vec4, R_F, p_M: vec3, q_M: vec4, R_M):
    """(c_F, q_FM): the centre of M's bounding ball (ball_M = centre in M's body frame, radius)
    in F's body frame [m], and M's orientation in F's frame (F, M given by their world poses,
    R the rotation matrices of q)."""
    c_W = R_M @ vec3(ball_M[0], ball_M[1], ball_M[2]) + p_M
    return R_F.transpose() @ (c_W - p_F), quat_mul(quat_conj(q_F), q_M)


@ti.func
def moved(ref: pair_reference, c_F: vec3, q_FM: vec4, radius: float) -> float:
    """delta [m]: a bound on how far any point of M moved in F's frame since the reference
    (module docstring)."""
    q_ref = vec4(ref[3], ref[4], ref[5], ref[6])
    q_rel = quat_mul(q_FM, quat_conj(q_ref))
    turn = ti.sqrt(q_rel[1] * q_rel[1] + q_rel[2] * q_rel[2] + q_rel[3] * q_rel[3])  # sin(theta / 2)
    return (c_F - vec3(ref[0], ref[1], ref[2])).norm() + 2.0 * turn * radius


@ti.func
def motion_rate(ball_M: vec4, R_M, p_F: vec3, v_F: vec3, w_F: vec3, p_M: vec3, v_M: vec3, w_M: vec3) -> float:
    """How fast moved() grows at the bodies' present velocities [m/s]: the speed of the
    centre c of M's bounding ball relative to F's frame, |v_M + w_M x (c - p_M) - v_F - w_F x
    (c - p_F)|, plus |w_M - w_F| r_M (the turn's share, 2 sin(theta / 2) r_M <= theta r_M).
    Poses and velocities in the world frame, v of the body frame's origin p."""
    c = R_M @ vec3(ball_M[0], ball_M[1], ball_M[2]) + p_M
    v_rel = v_M + w_M.cross(c - p_M) - v_F - w_F.cross(c - p_F)
    return v_rel.norm() + (w_M - w_F).norm() * ball_M[3]


@ti.func
def search_skin(skin: float, rate: float, dt: float) -> float:
    """The skin [m] a stale pair's list is searched with: `skin` when the pair, moving at
    `rate` [m/s] (motion_rate), stays within it for SKIN_STEPS steps of dt [s], else 0 (a
    tight list, as without a skin). Only the cost depends on this choice: the rule holds for
    either list, each checked against the skin it was searched with."""
    return skin if SKIN_STEPS * rate * dt <= skin else 0.0


KEEP_CHUNK = 1024
"""Rows of the last list per thread of the kept rows' count and copy (and per item of their
prefix sum, which one thread runs)."""


def chunk_slots(capacity: int) -> int:
    """Items of the chunk-offset array for lists of `capacity` rows."""
    return (capacity + KEEP_CHUNK - 1) // KEEP_CHUNK + 1


@ti.func
def turn_over(cand_span: ti.template(), candidate_capacity: ti.i32):
    """Turns the list over: the last pass's list (at cand_span[SPAN_START], cand_span[SPAN_KEPT]
    rows; pair_activity marks every pair stale when that list is incomplete) becomes the kept
    one and this pass writes the other half of cand. Returns (the last list's first row, this
    pass's first row, the last list's rows; -1: nothing kept)."""
    last = cand_span[SPAN_START]
    first = candidate_capacity - last
    cand_span[SPAN_START] = first
    return last, first, ti.min(cand_span[SPAN_KEPT], candidate_capacity)


@ti.func
def kept_in_chunk(k: ti.i32, n: ti.i32, last: ti.i32, cand: ti.template(), pair_stale: ti.template()) -> ti.i32:
    """Rows of chunk k (rows k KEEP_CHUNK on, of the last list's n at `last`) whose pairs are not
    stale."""
    kept = 0
    for c in range(k * KEEP_CHUNK, ti.min(n, (k + 1) * KEEP_CHUNK)):
        key = cand[last + c]
        kept += 1 - pair_stale[key[K_WORLD], key[K_PAIR]]
    return kept


@ti.func
def copy_kept_chunk(k: ti.i32, n: ti.i32, last: ti.i32, first: ti.i32, cand: ti.template(), pair_stale: ti.template(),
                    keep_chunk_row: ti.template()):
    """Copies chunk k's kept rows, in their order, to this pass's list from its row
    keep_chunk_row[k] (the exclusive prefix sum of kept_in_chunk; a chunk with none is not
    read again)."""
    row = first + keep_chunk_row[k]
    end = ti.min(n, (k + 1) * KEEP_CHUNK) if keep_chunk_row[k + 1] > keep_chunk_row[k] else 0  # 0: none kept
    for c in range(k * KEEP_CHUNK, end):
        key = cand[last + c]
        if pair_stale[key[K_WORLD], key[K_PAIR]] == 0:
            cand[row] = key
            row += 1
