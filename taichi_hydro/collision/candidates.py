"""The candidate list of a collision pass (ti.func and the span record): the element pairs
(world, pair, element of a, element of b; types.K_*) that the broad phase appends and the
narrow phase clips, one flat list for every world. This module is the one owner of how a row is
appended and where the list lies.

Layout. `cand` holds `candidate_capacity` rows per list: one list without a skin, two with one
(collision.skin), the list this pass writes and the one the last pass wrote, from which it keeps
the rows of the pairs that did not move. cand_span[SPAN_START] is the first row of the list the
pass writes (0 or candidate_capacity); with a skin the next pass writes the other half
(skin.turn_over, in broadphase.pair_activity, turns it over first), so the two lists swap
roles and a kept list is never copied. cand_span[SPAN_KEPT] is the number of rows the last
pass appended, as counted (above the capacity when it overflowed; -1: no complete list, after
an allocation or Collision.forget_lists), recorded by the narrow phase once the list is
complete (record_length).

Overflow accounting: every append is counted in counts[C_CANDIDATES], also past the capacity,
so the host knows how many rows the pass needed, grows the pool and redoes the pass
(collision.pipeline)."""

import taichi as ti

from ..types import C_CANDIDATES, ivec4

SPAN_START, SPAN_KEPT = range(2)
SPAN_SLOTS = 2


@ti.func
def append_candidate(key: ivec4, counts: ti.template(), cand: ti.template(), cand_span: ti.template(), capacity: ti.i32):
    """Appends key to the list this pass writes (counted even past the capacity)."""
    k = ti.atomic_add(counts[C_CANDIDATES], 1)
    if k < capacity:
        cand[cand_span[SPAN_START] + k] = key


@ti.func
def candidate_count(counts: ti.template(), capacity: ti.i32) -> ti.i32:
    """Rows of this pass's list that were stored (at most the capacity)."""
    return ti.min(counts[C_CANDIDATES], capacity)


@ti.func
def candidate(c: ti.i32, cand: ti.template(), cand_span: ti.template()) -> ivec4:
    """Row c of the list this pass writes."""
    return cand[cand_span[SPAN_START] + c]


@ti.func
def record_length(counts: ti.template(), cand_span: ti.template()):
    """cand_span[SPAN_KEPT] = the rows this pass appended, as counted (above the capacity when
    the pool overflowed, which makes the next pass search every pair; collision.skin). Nothing
    is copied: the list stays where it is and the next pass keeps rows from it
    (broadphase.pair_activity). Called once the list is complete."""
    cand_span[SPAN_KEPT] = counts[C_CANDIDATES]
