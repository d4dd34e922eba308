"""Integer hashing for the device hash tables (the warm-start table).

Keys are combined one 32-bit word at a time and finished with the avalanche step of
MurmurHash3's fmix32 (Appleby), so that keys differing only in small coordinates or in the
world index spread over the whole table (or region). u32 arithmetic wraps on every backend."""

import taichi as ti


@ti.func
def combine(h: ti.u32, x: ti.i32) -> ti.u32:
    """Folds the word x into the running hash h."""
    return (h ^ ti.cast(x, ti.u32)) * ti.u32(0x01000193) + ti.u32(0x9E3779B9)


@ti.func
def finish(h: ti.u32) -> ti.u32:
    """fmix32: every input bit affects every output bit."""
    h ^= h >> ti.u32(16)
    h *= ti.u32(0x85EBCA6B)
    h ^= h >> ti.u32(13)
    h *= ti.u32(0xC2B2AE35)
    h ^= h >> ti.u32(16)
    return h


@ti.func
def same_key(a: ti.template(), b: ti.template()) -> ti.i32:
    """1 when the integer keys a and b (vectors of one length) are equal."""
    eq = 1
    for k in ti.static(range(a.n)):
        if a[k] != b[k]:
            eq = 0
    return eq

