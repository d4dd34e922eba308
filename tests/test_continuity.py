"""The pressure-field force is a continuous function of the pose (Elandt 2019 §X-C): polygons
appear and vanish with zero area. Sampled along a path at step h and at h/4 (one world per
sample), the largest jump between neighbours must shrink with the step; a discontinuity would
keep its size."""

import numpy as np
import pytest

import taichi_hydro as th

from conftest import ball, scene


def forces_along(bodies, moving, start, direction, length, samples):
    """Force on body `moving` (index) for `samples` poses along a segment, one world each."""
    sim = th.Simulator(scene(bodies), worlds=samples)
    state = sim.get_state()
    t = np.linspace(0.0, length, samples)
    state["position"][:, moving] = np.asarray(start) + t[:, None] * np.asarray(direction)
    sim.set_state(position=state["position"])
    out = np.zeros((samples, 3))
    for w in range(samples):
        for s in sim.contact_surfaces(w):
            sign = 1.0 if s.body_b == sim.body_names[moving] else -1.0
            out[w] += sign * s.force
    return t, out


PATHS = {
    # A compliant box 2 mm into a rigid table, slid off the table's edge.
    "box-off-table-edge": (
        [
            {"name": "table", "type": "static", "position": [0, 0, -0.05], "shape": {"type": "box", "size": [0.3, 0.3, 0.1]}},
            {"name": "box", "mass": 0.2, "position": [0, 0, 0.038], "orientation": [0.9961946980917455, 0, 0, 0.08715574274765817],
             "shape": {"type": "box", "size": [0.1, 0.08, 0.08]}, "contact": {"modulus": 1e5}},
        ],
        1, [0.07, 0.01, 0.038], [1.0, 0.13, 0.0], 0.12,
    ),
    # A compliant sphere sliding over another one (tet-tet polygons come and go).
    "sphere-over-sphere": (
        [ball("lower", radius=0.05, z=0.0, resolution=0.01), ball("upper", radius=0.05, z=0.094, resolution=0.01)],
        1, [-0.04, -0.004, 0.094], [1.0, 0.1, 0.0], 0.08,
    ),
}


@pytest.mark.parametrize("path", list(PATHS))
def test_force_is_continuous_along_a_path(arch, path):
    bodies, moving, start, direction, length = PATHS[path]
    coarse_t, coarse = forces_along(bodies, moving, start, direction, length, 61)
    fine_t, fine = forces_along(bodies, moving, start, direction, length, 241)
    assert np.abs(coarse).max() > 0.5, "the path makes no contact"
    jump_coarse = np.linalg.norm(np.diff(coarse, axis=0), axis=1).max()
    jump_fine = np.linalg.norm(np.diff(fine, axis=0), axis=1).max()
    print(f"{path}: max |dF| {jump_coarse:.4g} N at step {coarse_t[1]:.2e} m, {jump_fine:.4g} N at step {fine_t[1]:.2e} m")
    # Lipschitz: jumps scale with the step (ratio 1/4); allow 1/2 for sampling luck.
    assert jump_fine <= 0.5 * jump_coarse
    # The same samples at both resolutions agree (every 4th fine sample is a coarse one).
    np.testing.assert_allclose(fine[::4], coarse, atol=1e-4 * np.abs(coarse).max())
