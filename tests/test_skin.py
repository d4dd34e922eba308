"""Temporal coherence of the broad phase ([collision] skin, taichi_hydro/collision/skin.py):
candidate lists kept while a pair moves less than the skin must never lose a polygon.

The checks: the motion bound of the rule against the float64 displacement of a mesh's
vertices (tier 1); bodies driven along fast, turning paths that cross the skin now and then,
each pose's polygons against a simulator without a skin, bit for bit, and against the float64
oracle as a set (tier 3), also with pools that start too small and grow while lists are kept;
the deterministic mode bit for bit with and without a skin, a batch against single worlds;
the scene key's validation."""

from dataclasses import replace

import numpy as np
import pytest
import taichi as ti

import taichi_hydro as th
from taichi_hydro.collision import Capacities
from taichi_hydro.collision import skin as skin_rule
from taichi_hydro.errors import SceneError
from taichi_hydro.types import C_POLYGONS, P_TYPE, PairType

from conftest import scene
from oracle import oracle_polygons, quat_matrix
from test_deterministic import assert_bitwise_equal, final_state
from test_oracle import CASES, q_axis
from test_simulation import small_pile

nd = ti.types.ndarray
SKIN = 5e-3  # m


def q_mul(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


@ti.kernel
def motion_bound(ball: nd(dtype=ti.math.vec4, ndim=1), pose: nd(dtype=ti.math.vec4, ndim=1), out: nd(dtype=float, ndim=1)):
    """out[0] = skin.moved of M (ball[0]) relative to F between the reference poses (pose[0:4]:
    p_F, q_F, p_M, q_M, positions in .xyz) and the current ones (pose[4:8])."""
    for _ in range(1):
        b = ball[0]
        c0, q0 = skin_rule.relative_pose(b, pose[0].xyz, pose[1], th.math3d.quat_to_mat(pose[1]), pose[2].xyz, pose[3],
                                         th.math3d.quat_to_mat(pose[3]))
        c1, q1 = skin_rule.relative_pose(b, pose[4].xyz, pose[5], th.math3d.quat_to_mat(pose[5]), pose[6].xyz, pose[7],
                                         th.math3d.quat_to_mat(pose[7]))
        ref = skin_rule.pair_reference(c0[0], c0[1], c0[2], q0[0], q0[1], q0[2], q0[3], 1.0)
        out[0] = skin_rule.moved(ref, c1, q1, b[3])


def test_motion_bound_covers_every_vertex(arch):
    """skin.moved bounds the displacement, in F's frame, of every vertex of a mesh M inside
    its bounding ball (centre off M's origin), for random pairs of poses of both bodies with
    turns from 1e-3 to 1 rad: max_i |x_i' - x_i| <= delta (+ float32 rounding, 1e-6 of the
    0.5 m scale), and delta is not loose by more than the turn's share, 2 sin(theta/2) r
    (the bound is exact for a pure translation)."""
    rng = np.random.default_rng(3)
    centre, radius = np.array([0.03, -0.02, 0.01]), 0.05
    d = rng.normal(size=(200, 3))
    verts = centre + radius * d / np.linalg.norm(d, axis=1, keepdims=True) * rng.uniform(0.2, 1.0, (200, 1))
    ball = ti.ndarray(ti.math.vec4, 1)
    ball.from_numpy(np.array([[*centre, radius]], dtype=np.float32))
    pose = ti.ndarray(ti.math.vec4, 8)
    out = ti.ndarray(float, 1)
    for trial in range(12):
        turn = 10.0 ** rng.uniform(-3, 0)
        q = [q_axis(rng.normal(size=3), rng.uniform(0, np.pi)) for _ in range(2)]
        p = [rng.uniform(-0.2, 0.2, 3) for _ in range(2)]
        q += [q_mul(q_axis(rng.normal(size=3), turn * rng.uniform(0, 1)), q[0]), q_mul(q_axis(rng.normal(size=3), turn), q[1])]
        p += [p[0] + rng.normal(0, 0.01, 3), p[1] + rng.normal(0, 0.01, 3)]
        q = [np.asarray(x, dtype=np.float32).astype(np.float64) for x in q]  # what the device reads
        p = [np.asarray(x, dtype=np.float32).astype(np.float64) for x in p]
        rows = [np.r_[p[0], 0], q[0], np.r_[p[1], 0], q[1], np.r_[p[2], 0], q[2], np.r_[p[3], 0], q[3]]
        pose.from_numpy(np.array(rows, dtype=np.float32))
        motion_bound(ball, pose, out)
        delta = float(out.to_numpy()[0])

        def in_F(pF, qF, pM, qM):
            return (verts @ quat_matrix(qM).T + pM - pF) @ quat_matrix(qF)

        moved = np.linalg.norm(in_F(p[2], q[2], p[3], q[3]) - in_F(p[0], q[0], p[1], q[1]), axis=1).max()
        assert moved <= delta + 1e-6 * 0.5, f"trial {trial}: vertices moved {moved} m > bound {delta} m"
        Rf0, Rm0, Rf1, Rm1 = (quat_matrix(x) for x in q)
        theta = np.arccos(np.clip((np.trace((Rf1.T @ Rm1) @ (Rf0.T @ Rm0).T) - 1) / 2, -1, 1))
        assert delta <= moved + 2 * np.sin(theta / 2) * radius + 1e-6, f"trial {trial}: bound {delta} m loose"


# Which body of each oracle case the path drives (a dynamic or kinematic one), and the axis it turns about.
DRIVEN = {"tet-tet": ("b", [1, 2, 0.5]), "tet-triangle": ("box", [0.2, 1, 1]), "tet-plane": ("egg", [1, 0, 0.3]),
          "crowd": ("centre", [0, 1, 1]), "tet-slab": ("pill", [1, 1, 0]), "slab-triangle": ("can", [0, 0.4, 1])}


def path(steps=24):
    """(offset along +z [m], turn [rad]) per frame: from 2 cm above the case's pose (out of
    contact) down to 1 cm below it and back up, by steps of 0.2 of the skin (1 mm) with a jump
    of 2 skins every 6th frame, turning by 0.02 rad per step (0.4 to 1 mm at the bodies' 1 to
    5 cm bounding radii) and 0.4 rad per jump: a list is kept for a frame or two after each
    search, and every jump crosses the skin."""
    z, turn, out, down = 0.02, 0.0, [], True
    for k in range(steps):
        big = k % 6 == 5
        dz = (2.0 if big else 0.2) * SKIN
        if down and z - dz < -0.01:
            down = False
        z += -dz if down else dz
        turn += 0.4 if big else 0.02
        out.append((z, turn))
    return out


def polygons(sim):
    """The polygon pool after a collide, rows sorted by (world, pair, element a, element b)."""
    n = int(sim.collide()[C_POLYGONS])
    pool = sim.collision.pool.to_numpy(n)
    order = np.lexsort(pool["poly_i"].T[::-1])
    return {k: v[order] for k, v in pool.items()}


@pytest.mark.parametrize("case, tiny", [(c, False) for c in DRIVEN if c != "crowd"] + [("tet-tet", True), ("crowd", True)])
def test_kept_lists_miss_no_polygon(arch, tol, case, tiny):
    """A body driven along path() (out of contact, through it, back; turning; crossing the
    skin at every jump): at every frame the skin's polygon pool equals, bit for bit, that of
    a simulator without a skin (clipping is the same arithmetic on the same element pairs, so
    any pair a kept list lacked would show), and at the deepest frame it holds every polygon of
    the float64 oracle above float32's sliver area (test_oracle's criterion). Both ways occur:
    frames where active pairs kept their lists and frames where they were searched again. With
    tiny pools (one row each) the pools overflow when contact starts, mid-run, while other
    pairs' lists are kept, and grow."""
    bodies = CASES[case]
    plain = th.Simulator(scene(bodies))
    caps = Capacities(1, 1) if tiny else None
    sim = th.Simulator(th.scene_from_dict({"body": bodies, "collision": {"skin": SKIN}}, source="<test>"), capacities=caps)
    name, axis = DRIVEN[case]
    b = sim.scene.body_index(name)
    start = sim.get_state()
    p0, q0 = start["position"][0, b].copy(), start["orientation"][0, b].copy()
    kept = searched = 0
    deepest = min(path(), key=lambda f: f[0])
    for z, turn in path():
        pos, ori = start["position"].copy(), start["orientation"].copy()
        pos[0, b] = p0 + [0.2 * z, -0.1 * z, z]
        ori[0, b] = q_mul(q_axis(axis, turn), q0)
        for s in (plain, sim):
            s.set_state(position=pos, orientation=ori)
        want, got = polygons(plain), polygons(sim)
        for k in want:
            assert np.array_equal(want[k], got[k]), f"z = {z:.4f} m: {k} differs with the skin"
        # The list just clipped (the two lists swap halves every pass): each row once, every
        # polygon's (a slab-triangle polygon is keyed (slab 0, triangle), its candidate (triangle, 0)).
        rows = sim.collision.candidates()
        assert len(np.unique(rows, axis=0)) == len(rows), f"z = {z:.4f} m: a candidate row is listed twice"
        keys = rows.copy()
        swap = sim.model.host.pair_i[rows[:, 1], P_TYPE] == PairType.SLAB_TRI
        keys[swap, 2], keys[swap, 3] = rows[swap, 3], rows[swap, 2]
        assert {tuple(k) for k in got["poly_i"]} <= {tuple(k) for k in keys}, f"z = {z:.4f} m: a polygon of no candidate"
        active = sim.collision.pair_active.to_numpy()[0] == 1
        stale = sim.collision.pair_stale.to_numpy()[0] == 1
        kept += int(np.any(active & ~stale))
        searched += int(np.any(active & stale))
        if (z, turn) == deepest:
            assert len(got["poly_i"]) > 0
            ours = {(*sorted((sim.scene.body_index(x.body_a), sim.scene.body_index(x.body_b))), int(ea), int(eb)): area
                    for x in sim.contact_surfaces()
                    for ea, eb, area in zip(x.polygons["element_a"], x.polygons["element_b"], x.polygons["area"])}
            sliver = 100 * tol.pos * 0.1 * 0.05
            big = {k for k, v in oracle_polygons(sim).items() if v[0] > sliver}
            assert big <= set(ours), f"oracle polygons the skin lost: {sorted(big - set(ours))[:5]}"
    assert kept >= 3 and searched >= 3, f"kept {kept} and searched {searched} frames: the path does not test the rule"
    if tiny:
        assert sim.collision.growths > 0


def test_deterministic_mode_is_bitwise_the_same_with_a_skin_and_in_a_batch(arch):
    """Deterministic mode orders rows by (pair, element a, element b), so a list's order does
    not matter: 3 worlds of the falling pile (own initial velocities) stepped 60 steps with a 1
    mm skin equal, bit for bit, each world run alone without a skin. Some lists were kept in
    the last step (the rule is exercised), while the pile's spheres meet (contacts > 0)."""
    steps, W = 60, 3
    solver = {"deterministic": True}
    skinned = replace(small_pile(solver=solver), collision_skin=1e-3)
    batch = th.Simulator(skinned, worlds=W)
    state = batch.get_state()
    state["velocity"][:, 1:] += np.random.default_rng(7).normal(0, 0.3, size=(W, 4, 3))
    batch.set_state(velocity=state["velocity"])
    out = final_state(batch, steps)
    assert batch.step_totals()["contacts"] > 0
    active, stale = batch.collision.pair_active.to_numpy(), batch.collision.pair_stale.to_numpy()
    assert np.any((active == 1) & (stale == 0)), "no list was kept"
    for w in range(W):
        single = th.Simulator(small_pile(solver=solver))
        s = single.get_state()
        s["velocity"][0] = state["velocity"][w]
        single.set_state(velocity=s["velocity"])
        ref = final_state(single, steps)
        assert_bitwise_equal({k: v[w] for k, v in out.items()}, {k: v[0] for k, v in ref.items()}, f"world {w}")


@pytest.mark.parametrize("value, fragment", [(-1e-3, "skin"), (float("nan"), "skin"), ("1mm", "skin")])
def test_skin_key_is_validated(arch, value, fragment):
    """[collision] skin: a length >= 0 [m]; anything else is a SceneError naming the key,
    the table and the source; an unknown key in [collision] too; 0 is the default."""
    if arch != "cpu":
        pytest.skip("host-side scene validation only")
    body = [{"name": "ball", "mass": 1.0, "shape": {"type": "sphere", "radius": 0.1}}]
    with pytest.raises(SceneError, match=rf"<t>.*\[collision\].*{fragment}"):
        th.scene_from_dict({"body": body, "collision": {"skin": value}}, source="<t>")
    with pytest.raises(SceneError, match=r"<t>.*\[collision\].*skn"):
        th.scene_from_dict({"body": body, "collision": {"skn": 1e-3}}, source="<t>")
    assert th.scene_from_dict({"body": body}, source="<t>").collision_skin == 0.0
    assert th.scene_from_dict({"body": body, "collision": {"skin": 2e-3}}, source="<t>").collision_skin == 2e-3
