"""Newton's step by preconditioned conjugate gradients ([solver] linear = "cg",
taichi_hydro.solver.newton_cg) against the block Cholesky factor on the same problems, the
[solver] linear key, and the fallback to cg when the dense Hessians would not fit
(solver.data.DENSE_BYTES)."""

import warnings

import numpy as np
import pytest

import taichi_hydro as th
import taichi_hydro.solver.data as solver_data
from taichi_hydro.solver import SolverOptions
from taichi_hydro.solver.data import choose_linear, resolve_linear

from newton_problems import oracle, problems, prototype, solve, solve_batch
from test_newton import EPS32, TOLERANCE, float64, pinned_body, spread
from test_simulation import small_pile


def rounding(arch, v):
    """The float32 allowance of test_newton_reaches_the_coulomb_fixed_point_on_dumped_steps
    (16 EPS32 max |v|: the contact velocities J v rounded per term), 0 in float64."""
    return 0.0 if float64(arch) else 16 * EPS32 * np.abs(v).max()


def test_cg_and_cholesky_reach_the_same_fixed_point_on_dumped_steps(arch):
    """Two dumped steps of each scene (landing sphere, box stack, coin, pile: the first and
    the last with contacts) and the impact step (most Gauss-Seidel sweeps; on the landing
    sphere, the coin and the pile it is the first of the two), solved with the
    CG step and with the Cholesky step at the default tolerance. Both iterations stop at the
    fixed point of the same cost: the Cholesky solution is within the tolerance of the
    prototype's float64 reference (test_newton; errors in the tolerance's measure, |dv| +
    reach |dw| per body), and the CG solution must be too: the Newton test is on the
    iterate's residual, whatever CG's truncation (solver.newton_cg).
    In float32 (vulkan) each is allowed the same rounding bound 16 EPS32 max |v| as there.
    The CG iterations stay under the cap 6 B per Newton iteration (the count is reported).
    A single mobile body's Hessian is its own preconditioner block: CG solves it in one
    iteration per Newton iteration, which the landing sphere shows."""
    P = prototype()
    for name in ("landing", "box", "coin", "pile"):
        records = problems(name)
        chosen = {r["step"]: r for r in spread(records, 2) + [max(records, key=lambda r: r["sweeps"])]}
        for rec in chosen.values():
            p = oracle(P, rec)
            reference = P.newton_mod(p, tol=1e-12, switch=3)[0]
            x_chol, _, it_chol, _ = solve(dict(rec))
            cg_rec = dict(rec)
            x_cg, _, it_cg, _ = solve(cg_rec, linear="cg")
            bound = TOLERANCE + rounding(arch, reference)
            e_chol = p.body_change(x_chol[p.dyn_ids].reshape(-1) - reference)
            e_cg = p.body_change(x_cg[p.dyn_ids].reshape(-1) - reference)
            linear = cg_rec["linear_iterations"]
            print(f"{name} step {rec['step']}: {rec['n']} contacts; Newton iterations cholesky {it_chol}, cg {it_cg} "
                  f"({linear} CG iterations); |v - v_ref| cholesky {e_chol:.1e}, cg {e_cg:.1e} m/s")
            assert e_cg <= bound, f"{name} step {rec['step']}"
            assert it_cg < 100
            mobile = len(p.dyn_ids)
            assert linear <= it_cg * 6 * len(rec["inv_mass"])
            if mobile == 1 and float64(arch):
                assert linear <= it_cg


def test_cg_solves_a_bilateral_row_and_is_deterministic(arch):
    """The pinned body of test_newton (one bilateral point, a quadratic cost) solved with the
    CG step: the same solution as the Cholesky step to twice the tolerance (+ the float32
    rounding bound); and three pile steps solved as the worlds of one launch give, world by
    world, the bits of each solved alone (one thread per world, every sum in a fixed order)."""
    rec, pin = pinned_body()
    x_chol, _, _, _ = solve(dict(rec), bilateral=pin)
    x_cg, _, iterations, _ = solve(dict(rec), bilateral=pin, linear="cg")
    bound = 2 * (TOLERANCE + rounding(arch, x_chol))
    print(f"pinned: {iterations} iterations, |v_cg - v_cholesky| {np.abs(x_cg - x_chol).max():.1e} m/s")
    assert np.abs(x_cg - x_chol).max() <= bound
    recs = spread(problems("pile"), 3)
    alone = [solve(dict(r), linear="cg") for r in recs]
    together = solve_batch(recs, linear="cg")
    for (x, gamma, it, _), (xb, gammab, itb) in zip(alone, together):
        assert itb == it
        np.testing.assert_array_equal(xb, x)
        np.testing.assert_array_equal(gammab, gamma)


def test_scene_with_linear_cg_follows_the_cholesky_trajectory(arch):
    """A column of four compliant spheres (tests/test_simulation.py small_pile: 0.5 kg,
    E = 1e5 Pa, dt = 2 ms) dropped onto a floor, 80 steps (0.16 s: the spheres land on each
    other from step ~25), with [solver] linear = "cg" and = "cholesky" (deterministic mode,
    so each run is reproducible). Bound: from the same state both solves stop within the
    tolerance of the same fixed point, so one step's velocities differ by at most 2 tol; a
    position difference dp feeds back into velocity through the contact stiffness by at
    most omega^2 dt dp per step, with omega^2 = k / m, k = 4 pi E d the sphere-plane
    stiffness at depth d = sqrt(F / (2 pi E)) under the column's weight F = 4 m g
    (omega dt = 0.24). Over n steps dp <= 2 tol n dt, so the velocities differ by at most
    2 tol (1 + n (omega dt)^2) and the positions by dt n times that (observed: 6.0e-8 m/s
    and 3.7e-9 m against bounds 1.1e-5 m/s and 1.8e-6 m). Float32 state on vulkan: each
    step's velocities also carry the rounding bound 16 EPS32 max |v| (above)."""
    n, dt, m, E, g = 80, 2e-3, 0.5, 1e5, 9.81
    d = np.sqrt(4 * m * g / (2 * np.pi * E))
    omega_dt = np.sqrt(4 * np.pi * E * d / m) * dt
    runs = {}
    for linear in ("cholesky", "cg"):
        sim = th.Simulator(small_pile(solver={"method": "newton", "linear": linear, "deterministic": True}))
        assert sim.linear_solver == linear
        sim.step(n)
        stats = sim.solver_stats()
        assert stats["contacts"][0] > 10
        assert (stats["linear_iterations"][0] > 0) == (linear == "cg")
        state = sim.get_state()
        runs[linear] = (state["position"][0].astype(np.float64), state["velocity"][0].astype(np.float64))
    per_step = 2 * TOLERANCE + 2 * rounding(arch, runs["cholesky"][1])
    dv_bound = per_step * (1 + n * omega_dt ** 2)
    dp_bound = dt * n * dv_bound
    dp = np.abs(runs["cg"][0] - runs["cholesky"][0]).max()
    dv = np.abs(runs["cg"][1] - runs["cholesky"][1]).max()
    print(f"omega dt {omega_dt:.2f}: |dp| {dp:.1e} m (bound {dp_bound:.1e}), |dv| {dv:.1e} m/s (bound {dv_bound:.1e})")
    assert dp <= dp_bound and dv <= dv_bound


def test_batch_past_dense_bytes_falls_back_to_cg(arch, monkeypatch):
    """A batch whose dense Hessians would take more than DENSE_BYTES (here lowered to 1 kB, so
    two worlds of the 5-body pile, 2 x 30^2 x 8 bytes, are past it) is solved with the CG step
    and a HydroWarning that says so, allocates no (W, 6B, 6B) array, and steps: the spheres
    meet and CG iterates. A forced linear = "cholesky" is refused with the size and the ways
    out."""
    monkeypatch.setattr(solver_data, "DENSE_BYTES", 1024)
    with pytest.warns(th.HydroWarning, match=r"conjugate gradients"):
        sim = th.Simulator(small_pile(n=2, solver={"method": "newton"}), worlds=2)
    assert sim.linear_solver == "cg"
    assert not hasattr(sim.solver, "newton_H") and not hasattr(sim.solver, "newton_adj")
    sim.step(50)
    stats = sim.solver_stats()
    assert stats["contacts"].min() > 0 and stats["linear_iterations"].min() > 0
    assert np.isfinite(sim.get_state()["velocity"]).all()
    with pytest.raises(th.SceneError, match=r"linear = \"cholesky\".*GiB.*linear = \"cg\""):
        th.Simulator(small_pile(n=2, solver={"method": "newton", "linear": "cholesky"}), worlds=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an explicit choice is not warned about
        assert th.Simulator(small_pile(n=2, solver={"method": "newton", "linear": "cg"}), worlds=2).linear_solver == "cg"


def test_linear_choice_follows_the_batch_size(arch):
    """choose_linear: "auto" is cholesky up to DENSE_BYTES of Hessians (W (6B)^2 numbers) and
    cg past it (warned), and past it too cuda's block schedule, when chosen by "auto", gives
    way to the world schedule with cg; method newton with linear cg resolves to the world schedule on cuda
    too (the block schedule factors only); method auto with linear cg is newton on cpu (the
    world schedule's default method) and refused on cuda (accelerated Jacobi there), as is a
    projected method with linear set."""
    if arch != "cpu":
        pytest.skip("host-side option checks: run once, on the cpu pass")
    limit = solver_data.DENSE_BYTES
    B = 216 + 5  # pile_216: its bodies and the bin's five half-spaces
    fits = limit // (8 * (6 * B) ** 2)
    assert choose_linear("auto", False, fits, B, 8) == "cholesky"
    with pytest.warns(th.HydroWarning, match=r"GiB"):
        assert choose_linear("auto", False, fits + 1, B, 8) == "cg"
    assert choose_linear("cg", False, 1, B, 8) == "cg"
    with pytest.raises(th.SceneError, match=r"schedule \"block\""):
        choose_linear("auto", True, fits + 1, B, 8, "pile.toml")
    # cuda's block schedule, left to "auto", gives way to the world schedule's CG past the limit
    # (the sizes in float64, the arithmetic of this cpu pass); asked for by name, it is refused
    newton_cuda = SolverOptions.resolve(th.SolverSettings(method="newton"), "cuda")
    assert newton_cuda.schedule == "block"
    assert resolve_linear(newton_cuda, fits, B).linear == "cholesky"
    assert resolve_linear(newton_cuda, fits, B).schedule == "block"
    with pytest.warns(th.HydroWarning, match=r"conjugate gradients"):
        large = resolve_linear(newton_cuda, fits + 1, B, "pile.toml")
    assert (large.schedule, large.linear) == ("world", "cg")
    with pytest.raises(th.SceneError, match=r"pile.toml.*schedule \"block\".*GiB"):
        resolve_linear(SolverOptions.resolve(th.SolverSettings(schedule="block"), "cuda"), fits + 1, B, "pile.toml", "block")
    assert SolverOptions.resolve(th.SolverSettings(method="newton", linear="cg"), "cuda").schedule == "world"
    auto = SolverOptions.resolve(th.SolverSettings(linear="cg"), "cpu")  # method auto is newton on the world schedule
    assert (auto.method, auto.linear) == ("newton", "cg")
    with pytest.raises(th.SceneError, match=r"linear \"cg\".*accelerated"):
        SolverOptions.resolve(th.SolverSettings(linear="cg"), "cuda")
    with pytest.raises(th.SceneError, match=r"linear \"cg\".*gauss_seidel"):
        SolverOptions.resolve(th.SolverSettings(linear="cg", method="gauss_seidel"), "cpu")
