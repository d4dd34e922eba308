"""bench.solver_accuracy: the error of a solve against the converged solution of the same
problem, the measure behind the default method."""

import numpy as np
import pytest

from bench import solver_accuracy


def test_body_errors_take_the_worst_point_of_the_worst_body(arch):
    """|dv| + reach |dw| per body (solver.cone.body_change), the largest per world."""
    v_ref = np.zeros((2, 2, 3))
    v = v_ref.copy()
    v[0, 1] = (3e-6, 4e-6, 0.0)  # 5e-6 m/s
    w = np.zeros((2, 2, 3))
    w[1, 0] = (0.0, 0.0, 2e-5)  # reach 0.1 m: 2e-6 m/s
    errors = solver_accuracy.body_errors(v, w, v_ref, np.zeros_like(w), np.array([0.1, 0.5]))
    np.testing.assert_allclose(errors, [5e-6, 2e-6])


def test_errors_separate_a_converged_solve_from_one_sweep(arch):
    """On the held box stack (2 worlds, 2 steps after 1): Newton with the reference's own
    settings is the reference bit for bit (the same kernel on the same problem: the warm
    start that the reference overwrote was restored before the measured solve), while one
    Gauss-Seidel sweep per step is off by more than its scene's tolerance (1e-6 m/s)."""
    if arch != "cpu":
        pytest.skip("the bench runs on cpu")
    tol = solver_accuracy.REFERENCE_TOLERANCE
    newton = solver_accuracy.measure("box_stack_held", "newton", solver_accuracy.REFERENCE_ITERATIONS, tol, worlds=2, steps=2,
                                     skip=1)
    one_sweep = solver_accuracy.measure("box_stack_held", "gauss_seidel", 1, 1e-12, worlds=2, steps=2, skip=1)
    assert newton["error_m_s_median_p95_max"][2] == 0.0
    assert newton["reference_residual_max_m_s"] <= tol
    assert one_sweep["error_m_s_median_p95_max"][0] > 1e-6
    assert one_sweep["iterations_mean_p95_max"] == [1.0, 1.0, 1]
