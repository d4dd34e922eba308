"""precision "f64" (taichi_hydro.init): every stage of a step, the contact query and the state
access in float64, and float32 unchanged beside it.

The suite runs in float32; the module fixture runs the same scenes there first, then restarts
Taichi in float64 once for every float64 run, and restarts it in the suite's precision again
(a restart invalidates Simulators made before it, so each run keeps only host copies). Vulkan
has no float64: skipped there."""

import os

import numpy as np
import pytest
import taichi as ti

import taichi_hydro as th

from conftest import ball, ground, scene

G = 9.81
EPS32 = float(np.finfo(np.float32).eps)
EPS64 = float(np.finfo(np.float64).eps)
TOLERANCE = th.SolverSettings().tolerance  # the default stopping tolerance [m/s]

# Every solver method, on the schedules that run it.
METHODS = [("gauss_seidel", "world"), ("jacobi", "world"), ("jacobi", "contact"), ("newton", "world")]

# Resting box: 0.2 kg, 0.2 x 0.15 x 0.08 m, E = 1e7 Pa, on a rigid floor; dt 1 ms, SETTLE steps
# to come to rest, HOLD more at rest. A cap of 50 sweeps is ample at rest (warm started: 1-2
# sweeps) and keeps the contact schedule's per-sweep launches few.
MASS, SIZE, DT, SETTLE, HOLD, ITERATIONS = 0.2, (0.2, 0.15, 0.08), 1e-3, 150, 50, 50
# Flat box pressed DEPTH into the floor for the contact query (no margin, E_QUERY).
DEPTH, E_QUERY, OFFSET = 1e-3, 1e5, (0.01, -0.02)
# Free fall from 10 m, FALL_STEPS steps.
FALL_STEPS, Z0, V0 = 300, 10.0, (0.3, 0.0, 2.0)


def box(z, modulus, **contact):
    return {"name": "box", "mass": MASS, "position": [0.0, 0.0, z], "shape": {"type": "box", "size": list(SIZE)},
            "contact": {"modulus": modulus, **contact}}


def float_types(sim) -> set[str]:
    """The float element types of every device array a step binds."""
    return {str(v.dtype) for v in sim.bindings().values() if isinstance(v, ti.Ndarray) and v.dtype in (ti.f32, ti.f64)}


def resting_box(method: str, schedule: str) -> dict:
    """The box dropped onto the floor from touching, after SETTLE and SETTLE + HOLD steps."""
    sim = th.Simulator(scene([ground(), box(SIZE[2] / 2, 1e7, margin=1e-4)], dt=DT,
                             solver={"iterations": ITERATIONS, "method": method, "schedule": schedule}))
    sim.step(SETTLE)
    settled = sim.get_state()["position"][0, 1]
    sim.step(HOLD)
    return {"state": sim.get_state(), "settled": settled, "force": sim.contact_forces()[("ground", "box")],
            "float_types": float_types(sim)}


def pressed_box() -> dict:
    """Contact query of a flat box whose bottom face is DEPTH into the floor, placed there by
    set_state; and set_state / get_state of arbitrary float64 values."""
    sim = th.Simulator(scene([ground(), box(1.0, E_QUERY)]))
    position = np.array([[[0.0, 0.0, 0.0], [*OFFSET, SIZE[2] / 2 - DEPTH]]])
    sim.set_state(position=position)
    (surface,) = sim.contact_surfaces()
    odd = np.array([[[0.0, 0.0, 0.0], [np.pi, -1 / 3, 1 + 1e-12]]])  # not float32 numbers
    sim.set_state(velocity=odd)
    return {"surface": surface, "velocity": sim.get_state()["velocity"], "odd": odd}


def free_fall() -> dict:
    sim = th.Simulator(scene([ball(z=Z0, velocity=list(V0))], dt=DT, gravity=[0, 0, -G]))
    sim.step(FALL_STEPS)
    return sim.get_state()


def all_runs() -> dict:
    out = {("rest", m, s): resting_box(m, s) for m, s in METHODS}
    out["pressed"] = pressed_box()
    out["fall"] = free_fall()
    return out


@pytest.fixture(scope="module")
def runs(arch):
    """{"f32": ..., "f64": ...}: all_runs() in each precision (float32 in the suite's runtime)."""
    if arch == "vulkan":
        pytest.skip("precision 'f64' is not available on vulkan")
    debug = os.environ.get("TH_DEBUG") == "1"  # as conftest's arch fixture starts Taichi
    f32 = all_runs()
    try:
        th.init(arch, precision="f64", debug=debug)
        f64 = all_runs()
    finally:
        th.init(arch, debug=debug)
    return {"f32": f32, "f64": f64}


@pytest.mark.parametrize("method, schedule", METHODS)
def test_resting_box_in_float64(runs, method, schedule):
    """Every device float array of the step is float64 (none float32) and so is the state read
    back; the solved contact force is m g to the stopping tolerance (m tol / dt per contact,
    ~10 contacts) and the box stays (velocity errors up to tol per contact: 10 HOLD dt tol).
    float32 and float64 agree on the pose: the
    stopping test leaves a velocity error up to `tol` in either, which moves the box by at
    most (SETTLE + HOLD) dt tol, plus float32's rounding of the coordinates (10 eps32 per metre
    of scene size, conftest.Tolerances.pos)."""
    r64, r32 = runs["f64"][("rest", method, schedule)], runs["f32"][("rest", method, schedule)]
    assert r64["float_types"] == {"f64"}
    assert all(v.dtype == np.float64 for v in r64["state"].values())
    tolerance_force = MASS * TOLERANCE / DT * 10
    for r in (r64, r32):
        assert r["force"][2] == pytest.approx(MASS * G, abs=tolerance_force)
        assert np.abs(r["force"][:2]).max() < tolerance_force
        assert np.abs(r["state"]["position"][0, 1] - r["settled"]).max() < 10 * HOLD * DT * TOLERANCE
    bound = (SETTLE + HOLD) * DT * TOLERANCE + 10 * EPS32 * max(SIZE)
    for key in ("position", "orientation"):
        np.testing.assert_allclose(r64["state"][key], r32["state"][key], rtol=0, atol=bound, err_msg=key)


def test_contact_query_in_float64_is_exact_to_float64_round_off(runs, tol):
    """The medial field of a box is exact on its mesh, so the force of a flat box `DEPTH` into a
    rigid floor is (E/H)[d(a-2d)(b-2d) + (a+b)d^2 - 8d^3/3] (H = c/2) up to round-off: float32's
    tol.rel, and in float64 the same error model scaled by eps64/eps32 (a float32 quantity
    anywhere in the collision stage would miss it by 1e8 x). The area is a b, the centroid
    the box's (x, y)."""
    a, b, c = SIZE
    d, H = DEPTH, c / 2
    exact = E_QUERY / H * (d * (a - 2 * d) * (b - 2 * d) + (a + b) * d * d - 8 * d**3 / 3)
    for precision, scale in (("f32", 1.0), ("f64", EPS64 / EPS32)):
        s = runs[precision]["pressed"]["surface"]
        assert s.force[2] == pytest.approx(exact, rel=tol.rel * scale), precision
        assert np.abs(s.force[:2]).max() <= tol.rel * scale * exact, precision
        assert s.area == pytest.approx(a * b, rel=tol.rel * scale), precision
        np.testing.assert_allclose(s.centroid[:2], OFFSET, rtol=0, atol=tol.pos * scale, err_msg=precision)


def test_set_state_and_get_state_keep_float64_values(runs):
    """float64 values go through set_state and get_state unrounded in float64 (rounded to
    float32 in float32)."""
    r64, r32 = runs["f64"]["pressed"], runs["f32"]["pressed"]
    np.testing.assert_array_equal(r64["velocity"], r64["odd"])
    np.testing.assert_array_equal(r32["velocity"], r32["odd"].astype(np.float32))


def test_free_fall_in_float64(runs):
    """No contact: v_n = v0 + n g dt and z_n = z0 + n dt v0 + dt^2 g n (n+1) / 2 exactly
    (semi-implicit Euler); rounding grows like n eps |z| in float64 (10 n eps64 |z0| bound,
    against 10 n eps32 |z0| in float32, test_dynamics)."""
    n, v0, g = FALL_STEPS, np.array(V0), np.array([0.0, 0.0, -G])
    expected = np.array([0.0, 0.0, Z0]) + n * DT * v0 + DT * DT * g * n * (n + 1) / 2
    state = runs["f64"]["fall"]
    np.testing.assert_allclose(state["velocity"][0, 0], v0 + n * DT * g, rtol=0, 
                               atol=10 * n * EPS64 * max(np.abs(v0).max(), n * DT * G))
    np.testing.assert_allclose(state["position"][0, 0], expected, rtol=0, atol=10 * n * EPS64 * Z0)
