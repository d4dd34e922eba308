"""Tier 3: the device pool against the float64 oracle (compared as sets), and worlds against
worlds."""

import numpy as np
import pytest

import taichi_hydro as th

from conftest import ball, ground, scene
from oracle import oracle_polygons, quat_matrix


def q_axis(axis, angle):
    axis = np.asarray(axis, dtype=np.float64) / np.linalg.norm(axis)
    return [float(np.cos(angle / 2)), *(np.sin(angle / 2) * axis).tolist()]


def crowd(count=11, radius=0.05, small=0.02, depth=0.002):
    """A compliant ball touched by `count` small compliant balls spread over its surface
    (Fibonacci directions, `depth` [m] of overlap each): more active pairs on one geometry
    than the broad phase keeps region boxes for (broadphase.REGION_BOXES)."""
    bodies = [ball("centre", radius=radius, z=0.0, resolution=0.02, orientation=q_axis([1, 1, 1], 0.3))]
    golden = np.pi * (3.0 - np.sqrt(5.0))
    for i in range(count):
        z = 1.0 - 2.0 * (i + 0.5) / count
        r = np.sqrt(1.0 - z * z)
        d = np.array([r * np.cos(golden * i), r * np.sin(golden * i), z])
        bodies.append(ball(f"s{i}", radius=small, resolution=0.01, modulus=3e5, orientation=q_axis([0, 1, 1], 0.1 * i),
                           position=((radius + small - depth) * d).tolist()))
    return bodies


CASES = {
    "tet-tet": [
        ball("a", radius=0.05, z=0.0, resolution=0.02, orientation=q_axis([1, 2, 3], 0.4)),
        ball("b", radius=0.04, z=0.08, resolution=0.02, modulus=3e5, orientation=q_axis([0, 1, 0], 1.0), position=[0.01, -0.005, 0.08]),
    ],
    "tet-triangle": [
        {"name": "rock", "type": "static", "position": [0, 0, 0], "orientation": q_axis([1, 1, 0], 0.3),
         "shape": {"type": "sphere", "radius": 0.05}, "contact": {"resolution": 0.02}},
        {"name": "box", "mass": 1.0, "position": [0.01, 0.0, 0.076], "orientation": q_axis([0, 0, 1], 0.2),
         "shape": {"type": "box", "size": [0.1, 0.08, 0.06]}, "contact": {"modulus": 1e5}},
    ],
    "tet-plane": [
        {"name": "egg", "mass": 1.0, "position": [0, 0, 0.025], "orientation": q_axis([1, 0.2, 0], 0.7),
         "shape": {"type": "ellipsoid", "radii": [0.06, 0.04, 0.03]}, "contact": {"modulus": 1e5, "resolution": 0.02}},
        ground(),
    ],
    "crowd": crowd(),
    "tet-slab": [
        ground("pool", hydro="compliant", modulus=2e5, slab_thickness=0.1),
        {"name": "pill", "mass": 1.0, "position": [0, 0, 0.02], "orientation": q_axis([1, 0, 0], 1.2),
         "shape": {"type": "capsule", "radius": 0.025, "length": 0.05}, "contact": {"modulus": 1e5, "resolution": 0.02}},
    ],
    "slab-triangle": [
        ground("pool", hydro="compliant", modulus=2e5, slab_thickness=0.1),
        {"name": "can", "type": "kinematic", "position": [0, 0, 0.01], "orientation": q_axis([0.3, 1, 0], 0.9),
         "shape": {"type": "cylinder", "radius": 0.03, "length": 0.08}, "contact": {"resolution": 0.02}},
    ],
}


@pytest.mark.parametrize("case", list(CASES))
def test_device_pool_matches_float64_oracle(arch, tol, case):
    sim = th.Simulator(scene(CASES[case]))
    surfaces = sim.contact_surfaces()
    ours = {}
    for s in surfaces:
        lo, hi = sim.scene.body_index(s.body_a), sim.scene.body_index(s.body_b)
        P = s.polygons
        for i in range(len(P["area"])):
            ours[(lo, hi, int(P["element_a"][i]), int(P["element_b"][i]))] = (P["area"][i], P["centroid"][i], P["pressure"][i], P["normal"][i])
    oracle = oracle_polygons(sim)
    assert oracle, "the case makes no contact"
    scale = 0.1  # m, size of the scenes
    # Polygons may legitimately differ only where float32 rounding decides whether a sliver
    # exists: below (position rounding x element size) of area.
    sliver = 100 * tol.pos * scale * 0.05
    big_ours = {k for k, v in ours.items() if v[0] > sliver}
    big_oracle = {k for k, v in oracle.items() if v[0] > sliver}
    assert big_ours <= set(oracle), f"device polygons the oracle lacks: {sorted(big_ours - set(oracle))[:5]}"
    assert big_oracle <= set(ours), f"oracle polygons the device lacks: {sorted(big_oracle - set(ours))[:5]}"
    # Pressures: the steepest pressure gradient of the scene [Pa/m] times the float32 position
    # rounding [m].
    grad_max = max(np.linalg.norm(sim.model.host.tet_grad_G, axis=1).max(initial=0.0), sim.model.host.geom_slab_gradient.max())
    p_tol = grad_max * tol.pos * scale
    for k in set(ours) & set(oracle):
        a, c, p, n = ours[k]
        ea, ec, ep, en = oracle[k]
        assert p == pytest.approx(ep, abs=p_tol), k
        assert a == pytest.approx(ea, rel=1e-4, abs=sliver), k
        np.testing.assert_allclose(c, ec, atol=10 * tol.pos * scale + np.sqrt(sliver) * (ea < 10 * sliver))
        np.testing.assert_allclose(n, en, atol=1e-4)
    total = sum(v[0] for v in oracle.values())
    assert sum(v[0] for v in ours.values()) == pytest.approx(total, rel=tol.rel * 10)
    print(f"{case}: {len(ours)} device polygons, {len(oracle)} oracle polygons, area {total:.6g} m^2")


def test_replicated_worlds_give_identical_surfaces(arch):
    """W copies of a scene give W identical surfaces (each world runs the same arithmetic)."""
    W = 16
    sim = th.Simulator(scene(CASES["tet-tet"]), worlds=W)
    first = sim.contact_surfaces(0)
    for w in (1, 7, W - 1):
        other = sim.contact_surfaces(w)
        assert len(other) == len(first)
        for a, b in zip(first, other):
            assert a.faces == b.faces
            np.testing.assert_array_equal(a.force, b.force)
            np.testing.assert_array_equal(a.polygons["centroid"], b.polygons["centroid"])


def test_worlds_at_different_poses_match_separate_runs(arch, tol):
    """A batch whose worlds hold different poses gives, world by world, what a one-world
    simulator gives at that pose."""
    W = 5
    batch = th.Simulator(scene(CASES["tet-triangle"]), worlds=W)
    state = batch.get_state()
    rng = np.random.default_rng(3)
    state["position"][:, 1] += rng.normal(0, 0.004, size=(W, 3))
    batch.set_state(position=state["position"])
    single = th.Simulator(scene(CASES["tet-triangle"]))
    for w in range(W):
        s1 = single.get_state()
        s1["position"][0] = state["position"][w]
        single.set_state(position=s1["position"])
        a, b = batch.contact_surfaces(w), single.contact_surfaces(0)
        assert [x.faces for x in a] == [x.faces for x in b]
        for x, y in zip(a, b):
            np.testing.assert_allclose(x.force, y.force, rtol=tol.rel, atol=tol.rel * np.abs(y.force).max())


def test_crowd_overflows_the_region_boxes(arch):
    """The "crowd" case above exercises the broad phase's fallback to one union box: its
    centre ball has more active pairs than there are region boxes."""
    from taichi_hydro.collision.broadphase import REGION_BOXES

    sim = th.Simulator(scene(CASES["crowd"]))
    sim.collide()
    active_pairs = sim.collision.geom_region_n.to_numpy()[0, sim.scene.body_index("centre")]
    assert active_pairs == len(CASES["crowd"]) - 1 > REGION_BOXES


def test_oracle_rotation_helper():
    np.testing.assert_allclose(quat_matrix(q_axis([0, 0, 1], np.pi / 2)) @ [1, 0, 0], [0, 1, 0], atol=1e-15)
