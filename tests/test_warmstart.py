"""The warm-start table (taichi_hydro.contact.warmstart) at the kernel level: every stored
polygon's impulse comes back under its key in the next step, whatever the rows' order and the
worlds' row counts; the pairs' totals are summed with the store; new keys get their pair's
share or nothing; growth keeps the entries; a forgotten world finds nothing; the table is
clear outside the regions in use."""

import numpy as np
import taichi as ti

from taichi_hydro.contact import warmstart as cw
from taichi_hydro.types import M_FORCE0, ivec4, mat3, vec3, vec4

WORLDS, PAIRS = 3, 2


def rotations(rng, n):
    """n random proper rotation matrices (QR of Gaussian matrices)."""
    out = np.empty((n, 3, 3))
    for k in range(n):
        q, r = np.linalg.qr(rng.normal(size=(3, 3)))
        q *= np.sign(np.diag(r))
        out[k] = q if np.linalg.det(q) > 0 else -q
    return out


def rows_of(counts, keys, frames, gammas, models):
    """The arrays of a step's rows, world by world (counts per world), as the kernels take them."""
    n = len(keys)
    start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    ids = np.stack([keys[:, 0], np.zeros(n, np.int32), np.ones(n, np.int32), keys[:, 1]], axis=1).astype(np.int32)
    out = {"world_start": ti.ndarray(ti.i32, WORLDS + 1), "c_ids": ti.ndarray(ivec4, max(n, 1)),
           "c_key": ti.ndarray(ivec4, max(n, 1)), "c_frame": ti.ndarray(mat3, max(n, 1)),
           "c_gamma": ti.ndarray(vec3, max(n, 1)), "c_model": ti.ndarray(vec4, max(n, 1))}
    out["world_start"].from_numpy(start)
    if n:
        out["c_ids"].from_numpy(ids)
        out["c_key"].from_numpy(keys.astype(np.int32))
        out["c_frame"].from_numpy(frames.astype(np.float32))
        out["c_gamma"].from_numpy(gammas.astype(np.float32))
        out["c_model"].from_numpy(models.astype(np.float32))
    return out


def store(table, rows, accumulate):
    cw.store_impulses(accumulate)(rows["world_start"], rows["c_ids"], rows["c_key"], rows["c_frame"], rows["c_gamma"],
                             table.pair_impulse, table.table_start, table.table_key, table.table_val, table.table_occ)


def look_up(table, rows, pair_weight, n):
    cw.look_up_impulses(rows["world_start"], rows["c_ids"], rows["c_key"], rows["c_model"], pair_weight, table.pair_impulse,
                        table.table_start, table.table_key, table.table_val, table.table_occ, rows["c_gamma"])
    return rows["c_gamma"].to_numpy()[:n].astype(np.float64)


def test_stored_impulses_come_back_under_their_keys(arch):
    rng = np.random.default_rng(7)
    # Step 1: world 0 has 5 rows, world 1 none, world 2 60 (its region of 120 slots wraps
    # around: linear probing past the region's end goes back to its start).
    counts1 = [5, 0, 60]
    keys1 = np.array([(w, rng.integers(PAIRS), k, rng.integers(1000)) for w, c in enumerate(counts1) for k in range(c)])
    frames1 = rotations(rng, len(keys1))
    gammas1 = rng.normal(size=(len(keys1), 3))
    table = cw.WarmStartTable(WORLDS, PAIRS, rows=80)
    rows1 = rows_of(counts1, keys1, frames1, gammas1, np.zeros((len(keys1), 4)))
    table.pair_impulse.from_numpy(np.full((WORLDS, PAIRS, 3), 7.0, np.float32))  # overwritten
    store(table, rows1, accumulate=True)
    occ = table.table_occ.to_numpy()
    entries = {tuple(k): v for k, v, o in zip(table.table_key.to_numpy(), table.table_val.to_numpy(), occ) if o}
    stored = np.array([entries[tuple(k)] for k in keys1], np.float64)  # every key once
    np.testing.assert_allclose(stored, np.einsum("nji,nj->ni", frames1, gammas1), rtol=1e-5, atol=1e-6)  # F^T gamma
    assert np.count_nonzero(occ[: 2 * len(keys1)]) == len(keys1) and not occ[2 * len(keys1):].any()
    np.testing.assert_array_equal(table.table_start.to_numpy(), [0, 5, 5, 65])
    totals = np.zeros((WORLDS, PAIRS, 3))
    np.add.at(totals, (keys1[:, 0], keys1[:, 1]), stored)  # each pair's total, world frame
    np.testing.assert_allclose(table.pair_impulse.to_numpy(), totals, rtol=1e-5, atol=1e-5)

    # Step 2: a different order and row counts: world 0 keeps 3 of its keys and has a new one,
    # world 1 has two new keys (its region was empty), world 2 keeps every key, shuffled.
    pair_impulse = rng.normal(size=(WORLDS, PAIRS, 3))
    table.pair_impulse.from_numpy(pair_impulse.astype(np.float32))
    pair_weight = np.array([[2.0, 0.0], [4.0, 0.0], [1.0, 1.0]])
    weights = ti.ndarray(float, (WORLDS, PAIRS))
    weights.from_numpy(pair_weight.astype(np.float32))
    kept0 = [4, 0, 2]
    new_keys = np.array([(0, 0, 99, 99), (1, 0, 3, 4), (1, 1, 3, 4)])
    order2 = rng.permutation(np.arange(5, 65))
    keys2 = np.concatenate([keys1[kept0], new_keys[:1], new_keys[1:], keys1[order2]])
    models2 = np.zeros((len(keys2), 4))
    models2[:, M_FORCE0] = rng.uniform(0.5, 1.0, len(keys2))
    rows2 = rows_of([4, 2, 60], keys2, rotations(rng, len(keys2)), np.zeros((len(keys2), 3)), models2)

    def expected():
        out = np.concatenate([stored[kept0], np.zeros((3, 3)), stored[order2]])
        for k, key in zip((3, 4, 5), new_keys):  # a new key: the pair's share, or 0 without weight
            w, p = key[0], key[1]
            if pair_weight[w, p] > 0:
                out[k] = models2[k, M_FORCE0] / pair_weight[w, p] * pair_impulse[w, p]
        return out

    got = look_up(table, rows2, weights, len(keys2))
    np.testing.assert_allclose(got, expected(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[:3], stored[kept0])  # the stored values themselves
    np.testing.assert_array_equal(got[6:], stored[order2])

    # Growth keeps the entries where they are.
    table.resize(400)
    assert table.table_occ.shape[0] == 800
    np.testing.assert_array_equal(look_up(table, rows2, weights, len(keys2)), got)

    # A forgotten world finds none of its keys (only pair shares); the others still do.
    world_row = ti.ndarray(ti.i32, WORLDS)
    world_row.from_numpy(np.array([-1, -1, 0], np.int32))
    table.forget(world_row)
    after = look_up(table, rows2, weights, len(keys2))
    np.testing.assert_array_equal(after[:6], got[:6])
    share = models2[6:, M_FORCE0, None] / pair_weight[2][keys2[6:, 1]][:, None] * pair_impulse[2][keys2[6:, 1]]
    np.testing.assert_allclose(after[6:], share, rtol=1e-5, atol=1e-6)

    # clear_table frees the regions in use; nothing else was ever written.
    cw.clear_table(table.table_start, table.table_occ)
    assert not table.table_occ.to_numpy().any()
