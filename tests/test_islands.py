"""Islands: the Newton world kernels (solver.newton's, with the Cholesky factor, and
solver.newton_cg's) split a world into islands, the groups of bodies joined by rows between
two mobile bodies (world_funcs.group_islands), and solve each alone: its own start, line
search and stopping test."""

import numpy as np
import pytest

from newton_problems import problems, solve

TOLERANCE_TIGHT = 1e-10  # [m/s]: many iterations, where a line search shared by the islands would part them


def islands_of(B, ids, inv_mass):
    """NumPy reference: each body's island label (the least body index of its connected
    component on the rows between two mobile bodies; a < 0 is the world)."""
    parent = list(range(B))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in ids:
        if a >= 0 and inv_mass[a] > 0 and inv_mass[b] > 0:
            ra, rb = find(a), find(b)
            parent[max(ra, rb)] = min(ra, rb)
    return np.array([find(b) for b in range(B)])


def row_labels(ids, inv_mass, label):
    """The island label of each row: its mobile body's (a's when both are), else b's."""
    return np.array([label[a] if a >= 0 and inv_mass[a] > 0 else label[b] for a, b in ids])


@pytest.mark.parametrize("B", [5, 40, 70])
def test_group_islands_groups_bodies_and_rows_in_order(arch, B):
    """group_islands on random graphs (some bodies immobile, rows to the world and between
    immobile bodies, bodies with no row): the islands are the connected components through
    mobile bodies, numbered by their first body in the minimum-degree order; newton_body lists
    each island's bodies contiguously and in that order; newton_pos becomes its inverse (so
    an island's blocks are contiguous) and the factor's pattern never joins two islands; the
    rows come grouped by island, each island's in row order. Without regrouping (CG)
    newton_pos stays the identity and the grouping is by body index."""
    import taichi as ti

    from taichi_hydro.solver.newton import newton_funcs, world_funcs
    from taichi_hydro.types import ivec4

    rng = np.random.default_rng(B)
    n = B
    pairs = rng.integers(0, B, size=(n, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    pairs = np.concatenate([pairs, [[-1, 0], [B - 1, B - 2]]])  # the world and body 0; two immobile bodies
    ids = np.zeros((len(pairs), 4), np.int32)
    ids[:, 1:3] = pairs
    ids[:, 3] = np.arange(len(pairs))  # every row its own pair
    inv_mass = np.ones(B, np.float32)
    inv_mass[[B - 1, B - 2]] = 0.0
    label = islands_of(B, pairs, inv_mass)
    rows_label = row_labels(pairs, inv_mass, label)

    f, wf = newton_funcs(ti.f32), world_funcs(ti.f32)
    c_ids = ti.ndarray(ivec4, len(ids))
    c_ids.from_numpy(ids)
    b_ids = ti.ndarray(ivec4, 1)
    masses = ti.ndarray(ti.f32, (1, B))
    masses.from_numpy(inv_mass[None])
    adj = ti.ndarray(ti.i32, (1, B + 1, (B + 31) // 32))
    pos, deg, row_len, island, body = (ti.ndarray(ti.i32, (1, B)) for _ in range(5))
    padj, rows = (ti.ndarray(ti.i32, (1, B, B)) for _ in range(2))
    starts = ti.ndarray(ti.i32, (1, B + 1, 3))
    row_order = ti.ndarray(ti.i32, len(ids))
    count = ti.ndarray(ti.i32, 1)

    @ti.kernel
    def group(regroup: ti.template(), c_ids: ti.types.ndarray(dtype=ivec4, ndim=1), b_ids: ti.types.ndarray(dtype=ivec4, ndim=1),
              masses: ti.types.ndarray(), adj: ti.types.ndarray(), pos: ti.types.ndarray(), deg: ti.types.ndarray(),
              padj: ti.types.ndarray(), rows: ti.types.ndarray(), row_len: ti.types.ndarray(), island: ti.types.ndarray(),
              body: ti.types.ndarray(), starts: ti.types.ndarray(), row_order: ti.types.ndarray(), count: ti.types.ndarray()):
        for w in range(1):
            if ti.static(regroup):
                f.order_bodies(w, 0, c_ids.shape[0], 0, 0, B, c_ids, b_ids, masses, 0, adj, pos, deg)
            else:
                for b in range(B):
                    pos[w, b] = b
            count[0] = wf.group_islands(w, 0, 0, c_ids.shape[0], 0, 0, B, regroup, c_ids, b_ids, masses, pos, island, body, starts,
                                        row_order)
            if ti.static(regroup):
                f.block_pattern(w, B, adj, pos, padj, rows, row_len)

    for regroup in (True, False):
        group(regroup, c_ids, b_ids, masses, adj, pos, deg, padj, rows, row_len, island, body, starts, row_order, count)
        k_n = int(count.to_numpy()[0])
        got_island, got_body, got_pos = island.to_numpy()[0], body.to_numpy()[0], pos.to_numpy()[0]
        start = starts.to_numpy()[0]
        assert k_n == len(np.unique(label))
        # The same partition as the reference, numbered in the order of first appearance in newton_body.
        for b in range(B):
            assert np.array_equal(np.flatnonzero(got_island == got_island[b]), np.flatnonzero(label == label[b]))
        assert np.array_equal(got_island[got_body], np.sort(got_island[got_body]))
        assert list(np.unique(got_island[got_body], return_index=True)[1]) == list(start[:k_n, 0])
        assert start[k_n, 0] == B
        if regroup:
            assert np.array_equal(got_pos[got_body], np.arange(B))  # the positions are the grouped order
            pattern = padj.to_numpy()[0]
            I, K = np.nonzero(pattern)
            assert np.array_equal(got_island[got_body[I]], got_island[got_body[K]])  # no block joins two islands
        else:
            assert np.array_equal(got_pos, np.arange(B))
            for k in range(k_n):  # by body index within an island
                members = got_body[start[k, 0]:start[k + 1, 0]]
                assert np.array_equal(members, np.sort(members))
        order = row_order.to_numpy()
        for k in range(k_n):
            listed = order[start[k, 1]:start[k + 1, 1]]
            members = got_body[start[k, 0]:start[k + 1, 0]]
            assert np.array_equal(listed, np.flatnonzero(rows_label == label[members[0]]))
        assert start[k_n, 1] == len(ids)


def sub_problem(rec, keep):
    """The dumped problem `rec` with its contact rows `keep` only (every body kept)."""
    out = dict(rec)
    for key in ("ids", "frame", "ra", "rb", "reg", "gamma0"):
        out[key] = np.asarray(rec[key])[keep]
    out["n"] = int(np.count_nonzero(keep))
    return out


@pytest.mark.parametrize("linear", ["cholesky", "cg"])
def test_each_island_is_solved_as_if_alone(arch, linear):
    """On dumped pile steps whose worlds hold several islands (a heap, and spheres resting
    alone on the ground), at the default tolerance and a tight one: the world's solve gives the
    bodies and rows of each island, to the bit, the velocities and impulses that the island
    gets in a world with its rows only, and reports as its iterations the most of its
    islands' and as its islands their number (the immobile and the untouched bodies are
    islands of their own). A line search or stopping test shared by the islands would part
    them. In float64 every island converges within the cap at both tolerances."""
    records = [r for r in problems("pile") if r["step"] in (86, 149)]
    assert len(records) == 2
    for rec in records:
        ids = np.asarray(rec["ids"])[:, 1:3]
        inv_mass = np.asarray(rec["inv_mass"])
        B = len(inv_mass)
        label = islands_of(B, ids, inv_mass)
        rows_label = row_labels(ids, inv_mass, label)
        assert len(np.unique(rows_label)) >= 3, f"pile step {rec['step']}: too few islands with rows to test"
        for tolerance in (1e-6, TOLERANCE_TIGHT):
            v, gamma, iterations, _ = solve(rec, tolerance=tolerance, linear=linear)
            assert rec["islands"] == len(np.unique(label))
            alone = []
            for root in np.unique(rows_label):
                keep = rows_label == root
                sub = sub_problem(rec, keep)
                v_k, gamma_k, iterations_k, _ = solve(sub, tolerance=tolerance, linear=linear)
                bodies = label == root
                what = f"pile step {rec['step']}, tolerance {tolerance}, island of body {root}"
                np.testing.assert_array_equal(v[bodies], v_k[bodies], err_msg=what)
                np.testing.assert_array_equal(gamma[keep], gamma_k, err_msg=what)
                alone.append(iterations_k)
            print(f"pile step {rec['step']}, {linear}, tolerance {tolerance}: {rec['islands']} islands, iterations "
                  f"{iterations} = max {alone}")
            assert iterations == max(alone)
            if arch != "vulkan":  # float64: every island converges (a lone sphere's once stalled, newton_funcs.inertia)
                assert iterations < 100 and rec["residual"] <= tolerance


def test_simulator_reports_the_islands_it_solved_apart(arch):
    """Simulator.solver_stats()["islands"] counts the islands of each world's last Newton solve
    (world schedule): the ground (immobile), two balls pressed into it and into each other
    (one island through their contact), a third resting apart and a fourth in free fall: 4
    islands, while contacts join the ground to three balls."""
    import taichi_hydro as th

    from conftest import ball, ground, scene

    bodies = [ground(), ball("a"), ball("b", position=[0.195, 0.0, 0.095]), ball("c", position=[0.6, 0.0, 0.095]),
              ball("d", position=[-0.6, 0.0, 2.0])]
    sim = th.Simulator(scene(bodies, solver={"method": "newton", "schedule": "world"}, dt=1e-3))
    sim.step(1)
    stats = sim.solver_stats()
    assert set(sim.contact_forces(0)) == {("ground", "a"), ("ground", "b"), ("ground", "c"), ("a", "b")}
    assert stats["islands"][0] == 4
