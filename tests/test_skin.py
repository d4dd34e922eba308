"""Temporal coherence of the broad phase ([collision] skin, taichi_hydro/collision/skin.py):
candidate lists kept while a pair moves less than the skin must never lose a polygon.

The checks: the motion bound of the rule against the float64 displacement of a mesh's vertices,
and the broad phase's field test with a skin (a tet pair it drops has no polygon, float64,
after any move of b by up to the skin) (tier 1); bodies driven along fast, turning paths that
cross the skin now and then, each pose's polygons against a simulator without a skin, bit for
bit, and against the float64 oracle as a set (tier 3), also with pools that start too small and
grow while lists are kept; a change of modulus, which drops the kept lists; the deterministic
mode bit for bit with and without a skin, a batch against single worlds; the scene key's
validation."""

from dataclasses import replace

import numpy as np
import pytest
import taichi as ti

import taichi_hydro as th
from taichi_hydro.collision import Capacities
from taichi_hydro.collision import clip
from taichi_hydro.collision import skin as skin_rule
from taichi_hydro.errors import SceneError
from taichi_hydro.types import C_POLYGONS, P_TYPE, PairType

from conftest import ball, scene
from oracle import area_centroid, clipped_by_tet, oracle_polygons, quat_matrix, tet_slice
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


@ti.kernel
def drop_pairs(tets: nd(dtype=ti.math.mat4, ndim=1), fields: nd(dtype=ti.math.vec4, ndim=1), skin: float,
               out: nd(dtype=ti.i32, ndim=1)):
    """out[i] = clip.clearly_no_polygon of pair i (tets[2i], tets[2i+1]: vertices as rows .xyz;
    fields[2i], fields[2i+1]: (grad, p) about the origin) with the skin [m]."""
    for i in out:
        A, B = tets[2 * i], tets[2 * i + 1]
        fa, fb = fields[2 * i], fields[2 * i + 1]
        out[i] = clip.clearly_no_polygon(A[0, :3], A[1, :3], A[2, :3], A[3, :3], fa.xyz, fa.w, B[0, :3], B[1, :3], B[2, :3],
                                         B[3, :3], fb.xyz, fb.w, skin)


def polygon_area(xa, ga, pa, xb, gb, pb):
    """Area [m^2] of the contact polygon of tets xa, xb (4 x 3) with fields p + g.x (float64):
    a's slice by the equal-pressure plane clipped by b's four faces."""
    n = (gb - ga) / np.linalg.norm(gb - ga)
    poly = tet_slice(xa, xa @ (ga - gb) + (pa - pb), n)
    poly = None if poly is None else clipped_by_tet(poly, xb)
    return 0.0 if poly is None else abs(area_centroid(poly, n)[0])


def test_field_test_with_a_skin_holds_for_every_move_within_it(arch):
    """clip.clearly_no_polygon with a skin s: a tet pair it drops (the broad phase then keeps no
    row for it while the pair moves less than s) has no polygon, float64, after b moves
    by s along its gradient, along each face normal of b, along the plane's normal and in
    random directions, either way, or turns by up to s / r about its centroid (r its
    reach). Random 1 cm tets 0-1.5 cm apart with fields of 1e6-1e7 Pa/m, some pairs of equal
    stiffness and some one stiff, s = 1 mm: the test drops a share of the pairs, and a pair
    it drops with s = 0 moves into contact within s often enough that a field test ignoring
    the move would fail here."""
    rng = np.random.default_rng(11)
    N, s = 2000, 1e-3
    tets, fields = [], []
    for i in range(N):
        a = rng.normal(0, 0.006, (4, 3))
        a -= a[0]  # a's vertex 0 is the local origin, as the broad phase takes it
        b = rng.normal(0, 0.006, (4, 3)) + rng.normal(0, 0.007, 3)
        u = rng.normal(size=3)
        u /= np.linalg.norm(u)
        ga = -u * 10.0 ** rng.uniform(6, 7)
        gb = (u + rng.normal(0, 0.3, 3)) * 10.0 ** rng.uniform(6, 7) * (10.0 if i % 3 == 0 else 1.0)
        # p_a - p_b: the plane through a random point between the two tets
        x = rng.uniform(0, 1) * a.mean(axis=0) + rng.uniform(0, 1) * b.mean(axis=0)
        pa = rng.uniform(1e3, 1e4)
        pb = pa + (ga - gb) @ x
        tets += [np.c_[a, np.zeros(4)], np.c_[b, np.zeros(4)]]
        fields += [np.r_[ga, pa], np.r_[gb, pb]]
    tets, fields = np.array(tets, dtype=np.float32), np.array(fields, dtype=np.float32)
    t_arr, f_arr, out = ti.ndarray(ti.math.mat4, 2 * N), ti.ndarray(ti.math.vec4, 2 * N), ti.ndarray(ti.i32, N)
    t_arr.from_numpy(tets)
    f_arr.from_numpy(fields)
    dropped = {}
    for skin in (0.0, s):
        drop_pairs(t_arr, f_arr, skin, out)
        dropped[skin] = out.to_numpy().astype(bool)
    assert dropped[s].sum() >= N // 10, f"the skin's test drops {dropped[s].sum()} of {N} pairs"
    tets, fields = tets.astype(np.float64)[:, :, :3], fields.astype(np.float64)

    def moves(xb, ga, gb):
        """b's moved vertices: translations by s and turns that move no point of b by more than s."""
        dirs = [gb, gb - ga] + [np.cross(xb[(k + 1) % 4] - xb[(k + 2) % 4], xb[(k + 3) % 4] - xb[(k + 2) % 4]) for k in range(4)]
        dirs += list(rng.normal(size=(4, 3)))
        for d in dirs:
            for sign in (1.0, -1.0):
                yield xb + sign * s * d / np.linalg.norm(d), sign * s * d / np.linalg.norm(d)
        c = xb.mean(axis=0)
        r = np.linalg.norm(xb - c, axis=1).max()
        for axis in rng.normal(size=(3, 3)):
            axis /= np.linalg.norm(axis)
            K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
            angle = 2 * np.arcsin(min(1.0, s / (2 * r)))
            R = np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K
            yield (xb - c) @ R.T + c, None

    def moved_area(i, xb_new, shift):
        """b's field moves with b: for a translation p_b(x - t); for a turn about c, p_b(R^T (x - c) + c)."""
        xa, xb, (ga, pa), (gb, pb) = tets[2 * i], tets[2 * i + 1], (fields[2 * i][:3], fields[2 * i][3]), (fields[2 * i + 1][:3],
                                                                                                          fields[2 * i + 1][3])
        if shift is not None:
            return polygon_area(xa, ga, pa, xb_new, gb, pb - gb @ shift)
        c = xb.mean(axis=0)
        A = np.linalg.lstsq(np.c_[xb - c, np.ones(4)], np.c_[xb_new - c, np.ones(4)], rcond=None)[0][:3, :3].T  # the turn R
        g_new = A @ gb
        return polygon_area(xa, ga, pa, xb_new, g_new, pb + gb @ c - g_new @ c)

    moved_into_contact = 0
    for i in range(N):
        xb, ga, gb = tets[2 * i + 1], fields[2 * i][:3], fields[2 * i + 1][:3]
        areas = [moved_area(i, x, t) for x, t in moves(xb, ga, gb)]
        if dropped[s][i]:
            assert max(areas) == 0.0, f"pair {i}: dropped with the skin, but a move within it makes a polygon of {max(areas)} m^2"
        elif dropped[0.0][i] and max(areas) > 0.0:
            moved_into_contact += 1
    assert moved_into_contact >= 10, f"only {moved_into_contact} pairs dropped without a skin move into contact within it"


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
    plain = th.Simulator(replace(scene(bodies), collision_skin=0.0))
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


@pytest.mark.parametrize("case", ["tet-tet", "tet-plane"])
def test_a_pair_faster_than_the_skin_allows_is_searched_without_it(arch, case):
    """skin.search_skin, at one pose: the driven body given a speed of 1.1 v*, v* = s /
    (SKIN_STEPS dt) (its list would be kept for fewer than SKIN_STEPS steps), is searched without
    the skin: its candidates are, as a set, those of a simulator without a skin, and it is
    searched again at the next pass; at 0.9 v* it is searched with the skin (more candidates)
    and kept at the next pass, also after its speed goes back up (the choice is made at a
    search). Polygons bit for bit those without a skin throughout."""
    bodies = CASES[case]
    plain = th.Simulator(replace(scene(bodies), collision_skin=0.0))
    sim = th.Simulator(th.scene_from_dict({"body": bodies, "collision": {"skin": SKIN}}, source="<test>"))
    b = sim.scene.body_index(DRIVEN[case][0])
    v_star = SKIN / (skin_rule.SKIN_STEPS * sim.dt)
    direction = np.array([0.3, -0.2, 1.0]) / np.linalg.norm([0.3, -0.2, 1.0])
    rows = {}
    for factor, stale, skin in [(1.1, 1, 0.0), (1.1, 1, 0.0), (0.9, 1, SKIN), (0.9, 0, SKIN), (1.1, 0, SKIN)]:
        velocity = sim.get_state()["velocity"]
        velocity[0, b] = factor * v_star * direction
        sim.set_state(velocity=velocity)
        want, got = polygons(plain), polygons(sim)
        assert len(want["poly_i"]) > 0
        for k in want:
            assert np.array_equal(want[k], got[k]), f"{factor} v*: {k} differs with the skin"
        active = np.flatnonzero(sim.collision.pair_active.to_numpy()[0] == 1)
        assert len(active) == 1
        p = active[0]
        assert sim.collision.pair_stale.to_numpy()[0, p] == stale, f"{factor} v*: pair stale should be {stale}"
        assert sim.collision.pair_ref.to_numpy()[0, p, 7] == np.float32(skin), f"{factor} v*: the pair's skin should be {skin}"
        rows[skin] = {tuple(r) for r in sim.collision.candidates()}
    assert rows[0.0] == {tuple(r) for r in plain.collision.candidates()}
    # (Not a superset: the field test with a skin is another test, which drops some pairs the
    # tight one keeps; clip.clearly_no_polygon.)
    assert len(rows[SKIN]) > len(rows[0.0]), f"the skin's search lists {len(rows[SKIN])} candidates, a tight one {len(rows[0.0])}"


def test_a_change_of_modulus_searches_every_pair_again(arch):
    """The skin's lists were filtered with the pressure fields of their search, so a change
    of modulus (set_parameters) makes the next pass search every pair: two balls 1 cm deep
    (6 mm tets), a 0.1 mm skin, b's modulus set 30 times lower (the equal-pressure plane moves into b) and back, the skin's
    polygons equal, bit for bit, those of a simulator without a skin, and its pairs are stale
    in the pass after each change, kept in the one after that."""
    bodies = [ball("a", radius=0.05, z=0.0, resolution=0.006), ball("b", radius=0.04, z=0.08, resolution=0.006, modulus=3e5,
                                                                    position=[0.01, -0.005, 0.08])]
    plain = th.Simulator(replace(scene(bodies), collision_skin=0.0))
    sim = th.Simulator(th.scene_from_dict({"body": bodies, "collision": {"skin": 1e-4}}, source="<test>"))
    base = sim.parameters()["modulus"]
    soft = base.copy()
    soft[0, sim.scene.body_index("b")] /= 30.0
    for modulus in (None, soft, base):
        for step in range(2):
            if modulus is not None and step == 0:
                rows = sim.collision.candidates()
                for s in (plain, sim):
                    s.set_parameters(modulus=modulus)
                assert np.array_equal(sim.collision.candidates(), rows), "set_parameters moved the last list"
            want, got = polygons(plain), polygons(sim)
            assert len(want["poly_i"]) > 0
            for k in want:
                assert np.array_equal(want[k], got[k]), f"modulus {modulus}, pass {step}: {k} differs with the skin"
            stale = sim.collision.pair_stale.to_numpy()[0, 0]
            assert stale == (1 if step == 0 else 0), f"modulus {modulus}, pass {step}: pair stale = {stale}"


def test_deterministic_mode_is_bitwise_the_same_with_a_skin_and_in_a_batch(arch):
    """Deterministic mode orders rows by (pair, element a, element b), so a list's order does
    not matter: 3 worlds of the falling pile (own initial velocities) stepped 60 steps with a 1
    cm skin equal, bit for bit, each world run alone without a skin. Some lists were kept in
    the last step (the rule is exercised: the spheres fall at up to ~1 m/s, and a pair keeps
    a list only when it would for skin.SKIN_STEPS steps of 2 ms), while the pile's spheres
    meet (contacts > 0)."""
    steps, W = 60, 3
    solver = {"deterministic": True}
    skinned = replace(small_pile(solver=solver), collision_skin=1e-2)
    batch = th.Simulator(skinned, worlds=W)
    state = batch.get_state()
    state["velocity"][:, 1:] += np.random.default_rng(7).normal(0, 0.3, size=(W, 4, 3))
    batch.set_state(velocity=state["velocity"])
    out = final_state(batch, steps)
    assert batch.step_totals()["contacts"] > 0
    active, stale = batch.collision.pair_active.to_numpy(), batch.collision.pair_stale.to_numpy()
    assert np.any((active == 1) & (stale == 0)), "no list was kept"
    for w in range(W):
        single = th.Simulator(replace(small_pile(solver=solver), collision_skin=0.0))
        s = single.get_state()
        s["velocity"][0] = state["velocity"][w]
        single.set_state(velocity=s["velocity"])
        ref = final_state(single, steps)
        assert_bitwise_equal({k: v[w] for k, v in out.items()}, {k: v[0] for k, v in ref.items()}, f"world {w}")


@pytest.mark.parametrize("value, fragment", [(-1e-3, "skin"), (float("nan"), "skin"), ("1mm", "skin")])
def test_skin_key_is_validated(arch, value, fragment):
    """[collision] skin: a length >= 0 [m]; anything else is a SceneError naming the key,
    the table and the source; an unknown key in [collision] too; 1e-4 m is the default."""
    if arch != "cpu":
        pytest.skip("host-side scene validation only")
    body = [{"name": "ball", "mass": 1.0, "shape": {"type": "sphere", "radius": 0.1}}]
    with pytest.raises(SceneError, match=rf"<t>.*\[collision\].*{fragment}"):
        th.scene_from_dict({"body": body, "collision": {"skin": value}}, source="<t>")
    with pytest.raises(SceneError, match=r"<t>.*\[collision\].*skn"):
        th.scene_from_dict({"body": body, "collision": {"skn": 1e-3}}, source="<t>")
    assert th.scene_from_dict({"body": body}, source="<t>").collision_skin == th.scene.SKIN == 1e-4
    assert th.scene_from_dict({"body": body, "collision": {"skin": 2e-3}}, source="<t>").collision_skin == 2e-3
