"""Deterministic mode ([solver] deterministic = true, taichi_hydro/contact/ordering.py): the result
does not depend on the order in which the polygon pool was filled, so it is bit for bit the
same from run to run and a world of a batch equals the same world simulated alone. The tests
compare with np.array_equal: no tolerance, any order dependence shows."""

import numpy as np
import pytest
import taichi as ti

import taichi_hydro as th
from taichi_hydro.types import C_POLYGONS

from test_simulation import one_step_from_the_same_state, small_pile

nd = ti.types.ndarray


@ti.kernel
def reverse_pool(counts: nd(dtype=ti.i32, ndim=1), poly_i: nd(dtype=ti.types.vector(4, ti.i32), ndim=1),
                 poly_g: nd(dtype=ti.types.vector(8, float), ndim=1), poly_c: nd(dtype=ti.math.vec3, ndim=1),
                 poly_n: nd(dtype=ti.math.vec3, ndim=1)):
    """Reverse the order of the polygons in the pool (the columns a step reads)."""
    n = ti.min(counts[C_POLYGONS], poly_i.shape[0])
    for k in range(n // 2):
        j = n - 1 - k
        poly_i[k], poly_i[j] = poly_i[j], poly_i[k]
        poly_g[k], poly_g[j] = poly_g[j], poly_g[k]
        poly_c[k], poly_c[j] = poly_c[j], poly_c[k]
        poly_n[k], poly_n[j] = poly_n[j], poly_n[k]


def with_reversed_pool(sim):
    """Make every step of `sim` see its polygons in the reverse order of the narrow phase."""
    plan = sim.step_plan
    collide_end = dict(sim.stages)["collide"]
    plan.launches.insert(collide_end, (reverse_pool, ("counts", "poly_i", "poly_g", "poly_c", "poly_n")))
    return sim


def final_state(sim, steps):
    sim.step(steps)
    out = sim.get_state()
    out["pair_impulse"] = sim.warm.pair_impulse.to_numpy()
    return out


def assert_bitwise_equal(a, b, label):
    for key in a:
        assert np.array_equal(a[key], b[key]), f"{label}: {key} differs by up to {np.abs(a[key] - b[key]).max()}"


# The contact schedule launches three or four kernels per sweep: fewer sweeps and steps keep
# it within lavapipe's launch budget (backend.LAUNCH_BUDGET). The spheres meet from step ~25 on.
SOLVERS = {
    "world": {"schedule": "world", "method": "gauss_seidel"},
    "contact": {"schedule": "contact", "method": "jacobi", "iterations": 12},
    "contact-accelerated": {"schedule": "contact", "method": "accelerated", "iterations": 12},
    "newton": {"schedule": "world", "method": "newton"},
}
STEPS = {"world": 60, "contact": 45, "contact-accelerated": 45, "newton": 60}


@pytest.mark.launches(10_500)
@pytest.mark.parametrize("schedule", sorted(SOLVERS))
def test_result_does_not_depend_on_pool_order(arch, schedule):
    """Reversing the polygon pool before every step changes nothing, bit for bit, after the
    spheres of the pile have met (60 steps; 45 with the contact schedule). Without the mode
    the reversal changes the Gauss-Seidel order of the world schedule, so the same check
    fails (which shows the reversal takes effect)."""
    steps = STEPS[schedule]
    solver = {**SOLVERS[schedule], "deterministic": True}
    plain = final_state(th.Simulator(small_pile(solver=solver)), steps)
    reversed_ = final_state(with_reversed_pool(th.Simulator(small_pile(solver=solver))), steps)
    assert_bitwise_equal(plain, reversed_, f"deterministic {schedule} schedule, pool reversed")
    assert np.abs(plain["pair_impulse"]).max() > 0
    if schedule == "world":
        solver["deterministic"] = False
        a = final_state(th.Simulator(small_pile(solver=solver)), steps)
        b = final_state(with_reversed_pool(th.Simulator(small_pile(solver=solver))), steps)
        assert not np.array_equal(a["velocity"], b["velocity"]), "reversing the pool had no effect without the mode"


BITWISE_LAUNCHES = {"contact": 19_000, "contact-accelerated": 22_500, "newton": 11_000, "world": 11_000}


@pytest.mark.parametrize("schedule", [pytest.param(k, marks=pytest.mark.launches(BITWISE_LAUNCHES[k])) for k in sorted(SOLVERS)])
def test_batch_world_equals_single_run_bitwise(arch, schedule):
    """Each world of a batch (its own initial velocities) equals, bit for bit, a one-world run
    from the same state, over 60 steps (45 with the contact schedule) of the chaotic falling
    pile (without the mode they agree only to float32 round-off amplified by the chaos:
    test_simulation.py)."""
    steps, W = STEPS[schedule], 3
    solver = {**SOLVERS[schedule], "deterministic": True}
    batch = th.Simulator(small_pile(solver=solver), worlds=W)
    state = batch.get_state()
    state["velocity"][:, 1:] += np.random.default_rng(7).normal(0, 0.3, size=(W, 4, 3))
    batch.set_state(velocity=state["velocity"])
    out = final_state(batch, steps)
    assert batch.step_totals()["contacts"] > 0
    for w in range(W):
        single = th.Simulator(small_pile(solver=solver))
        s = single.get_state()
        s["velocity"][0] = state["velocity"][w]
        single.set_state(velocity=s["velocity"])
        ref = final_state(single, steps)
        assert_bitwise_equal({k: v[w] for k, v in out.items()}, {k: v[0] for k, v in ref.items()}, f"world {w}")


def test_deterministic_mode_keeps_the_physics(arch):
    """The mode reorders sums, nothing else: one step from the same state agrees with the
    default mode to the solver tolerance (1e-6 m/s per sweep; 1e-5 m/s bound as in
    test_world_and_contact_schedules_agree)."""
    a = th.Simulator(small_pile())
    b = th.Simulator(small_pile(solver={"deterministic": True}))
    one_step_from_the_same_state(a, b)
    np.testing.assert_allclose(a.get_state()["velocity"], b.get_state()["velocity"], atol=1e-5)


@pytest.mark.parametrize("polygons", [1, 24])
def test_pools_growing_mid_run_change_nothing(arch, polygons):
    """Pools that start small and grow while the pile falls (each overflow reruns its chunk of
    steps from the chunk's start, warm-start table included, and moves the table to the larger
    size) give, bit for bit, the run whose pools never overflowed. With room for 24 polygons
    the pool first overflows after contacts began, in the middle of a warm-started chunk."""
    from taichi_hydro.collision import Capacities

    steps, solver = 60, {"deterministic": True}
    ample = th.Simulator(small_pile(solver=solver))
    tiny = th.Simulator(small_pile(solver=solver), capacities=Capacities(1, polygons))
    b, a = final_state(tiny, steps), final_state(ample, steps)
    assert tiny.collision.caps.polygons > polygons
    assert tiny.collision.growths > ample.collision.growths  # counted: the bench reports them as pool_overflows
    assert_bitwise_equal(a, b, "grown pools")
    assert tiny.step_totals() == ample.step_totals()  # a rerun chunk counts the step before it, not the aborted attempt


def test_profile_stages_grows_pools_as_step_does(arch):
    """Simulator.profile_stages (one launch at a time, timed per stage) steps a world exactly as
    step() does, pool growth included: from pools with room for one polygon, 60 steps of the
    falling pile give, bit for bit, step()'s state and statistics from ample pools; the stage
    times of the attempts that overflowed are dropped, those kept are positive."""
    from taichi_hydro.collision import Capacities

    steps, solver = 60, {"deterministic": True}
    ample = th.Simulator(small_pile(solver=solver))
    tiny = th.Simulator(small_pile(solver=solver), capacities=Capacities(1, 1))
    a = final_state(ample, steps)
    stages = tiny.profile_stages(steps)
    assert tiny.collision.growths > ample.collision.growths
    assert list(stages) == ["collide", "assemble", "solve", "integrate"]
    assert all(t > 0 for t in stages.values()), stages
    b = tiny.get_state()
    b["pair_impulse"] = tiny.warm.pair_impulse.to_numpy()
    assert_bitwise_equal(a, b, "profiled with growing pools")
    assert tiny.step_totals() == ample.step_totals()
    assert tiny.step_count == ample.step_count == steps


def test_a_rerun_chunk_starts_newton_from_the_solution_before_it(arch):
    """Newton may start a solve from the last one's solution (newton_last, choose_start). A chunk
    that reruns after a pool overflow must start from the solution before the chunk, not from
    what the overflowed attempt left: a solve on a cut pool, whose polygons depend on thread
    timing (four sliding coins in deterministic mode, default pools: 3 runs in 7 here were
    1e-7 to 1e-4 m/s off within six steps). Here the attempt's leftovers are poisoned (NaN) as
    each overflow is found: the pile growing its pools mid-run still matches, bit for bit, the
    run whose pools never overflowed."""
    from taichi_hydro.collision import Capacities

    steps, solver = 60, {"deterministic": True}
    ample = th.Simulator(small_pile(solver=solver))
    tiny = th.Simulator(small_pile(solver=solver), capacities=Capacities(1, 24))
    assert tiny.method == "newton"
    found = tiny.collision.overflow
    poisoned = []

    def overflow(max_counts):
        grown = found(max_counts)
        if grown is not None:
            tiny.solver.newton_last.fill(float("nan"))
            tiny.solver.newton_kept.fill(1)
            poisoned.append(tiny.step_count)
        return grown

    tiny.collision.overflow = overflow
    b, a = final_state(tiny, steps), final_state(ample, steps)
    assert len(poisoned) >= 2, poisoned
    assert_bitwise_equal(a, b, "grown pools, the overflowed attempts' solutions poisoned")
