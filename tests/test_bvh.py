"""The meshes' static trees (geometry.bvh) and the broad phase that descends them
(collision.broadphase): the tree's invariants on the host, and on the device the candidates
found through the trees against brute force over all element pairs, for bodies turned and 50 m
from the origin (where float32 rounding of the change of frame is largest)."""

from dataclasses import replace

import numpy as np
import pytest

import taichi_hydro as th
from taichi_hydro.collision.broadphase import TREE_SLACK
from taichi_hydro.geometry.bvh import LEAF_SIZE, build_tree
from taichi_hydro.types import C_CANDIDATES, G_BODY, G_ELEM_COUNT, G_KIND, G_POOL_START, P_GEOM_A, P_GEOM_B, P_TYPE, TETMESH, PairType

from conftest import ball, scene
from oracle import clipped_by_tet, quat_matrix, tet_slice
from test_oracle import q_axis

FAR = np.array([50.0, -30.0, 20.0])  # m


def walk(tree, node, boxes):
    """Checks the subtree at `node` (box containment, preorder, escape) and returns (its end,
    its elements, its depth)."""
    escape, first, count, _ = tree.node[node]
    if count > 0:
        elems = list(tree.elem[first:first + count])
        assert escape == node + 1 and count <= LEAF_SIZE
        end, depth = node + 1, 1
    else:
        end_l, elems_l, depth_l = walk(tree, node + 1, boxes)
        end, elems_r, depth_r = walk(tree, end_l, boxes)
        assert escape == end
        elems, depth = elems_l + elems_r, 1 + max(depth_l, depth_r)
    assert np.all(tree.box[node, 0] <= boxes[elems, 0]) and np.all(tree.box[node, 1] >= boxes[elems, 1])
    return end, elems, depth


@pytest.mark.parametrize("n", [1, 4, 5, 17, 1000])
def test_tree_holds_every_element_once_in_boxes_that_contain_them(arch, n):
    """Every element sits in exactly one leaf; each node's box contains its elements' boxes;
    escape is the end of the node's subtree in preorder; median splits keep the depth at
    ceil(log2(n / LEAF_SIZE)) + 1."""
    if arch != "cpu":
        pytest.skip("host-side NumPy only")
    rng = np.random.default_rng(n)
    lo = rng.uniform(-1.0, 1.0, (n, 3))
    boxes = np.stack([lo, lo + rng.uniform(0.0, 0.3, (n, 3))], axis=1)
    tree = build_tree(boxes)
    end, elems, depth = walk(tree, 0, boxes)
    assert end == len(tree.node)
    assert sorted(elems) == list(range(n))
    assert depth <= int(np.ceil(np.log2(max(n / LEAF_SIZE, 1)))) + 1


def far(body, tilt=0.0):
    body = dict(body)
    body["position"] = (FAR + np.asarray(body.get("position", [0.0, 0.0, 0.0]))).tolist()
    if tilt:
        body["orientation"] = q_axis([1, -2, 0.5], tilt)
    return body


# Turned bodies 50 m from the origin: each planar pair type and both mesh-mesh types.
CASES = {
    "tet-tet": [far(ball("a", radius=0.05, z=0.0, resolution=0.01), 0.4),
                far(ball("b", radius=0.04, z=0.08, resolution=0.01, modulus=3e5, position=[0.01, -0.005, 0.08]), 1.0)],
    "tet-triangle": [far({"name": "rock", "type": "static", "shape": {"type": "sphere", "radius": 0.05},
                          "contact": {"resolution": 0.01}}, 0.3),
                     far({"name": "box", "mass": 1.0, "position": [0.01, 0.0, 0.076], "shape": {"type": "box", "size": [0.1, 0.08, 0.06]},
                          "contact": {"modulus": 1e5, "resolution": 0.01}}, 0.2)],
    "tet-plane": [far({"name": "ground", "type": "static", "shape": {"type": "halfspace"}}, 0.25),
                  far({"name": "egg", "mass": 1.0, "position": [0, 0, 0.02], "shape": {"type": "ellipsoid", "radii": [0.06, 0.04, 0.03]},
                       "contact": {"modulus": 1e5, "resolution": 0.01}}, 0.7)],
    "tet-slab": [far({"name": "pool", "type": "static", "shape": {"type": "halfspace"},
                      "contact": {"hydro": "compliant", "modulus": 2e5, "slab_thickness": 0.1}}, 0.25),
                 far({"name": "pill", "mass": 1.0, "position": [0, 0, 0.015], "shape": {"type": "capsule", "radius": 0.025, "length": 0.05},
                      "contact": {"modulus": 1e5, "resolution": 0.01}}, 1.2)],
    "slab-triangle": [far({"name": "pool", "type": "static", "shape": {"type": "halfspace"},
                           "contact": {"hydro": "compliant", "modulus": 2e5, "slab_thickness": 0.1}}, 0.25),
                      far({"name": "can", "type": "kinematic", "position": [0, 0, 0.01],
                           "shape": {"type": "cylinder", "radius": 0.03, "length": 0.08}, "contact": {"resolution": 0.01}}, 0.9)],
}
SLACK = 1e-4  # m: float32 rounding of coordinates near 60 m (ulp 3.8e-6 m) over a few operations, with margin


def penetration(P, Q):
    """Penetration [m] of the convex hulls of vertex sets P (N, k, 3) and Q (N, l, 3), pair by
    pair: the least distance either must move along an axis to separate them, over the axes
    normal to two edges of either (their face normals and the edge-edge axes of the separating
    axis theorem, and some more); negative when an axis separates them."""
    def edges(X):
        k = X.shape[1]
        return np.stack([X[:, j] - X[:, i] for i in range(k) for j in range(i + 1, k)], axis=1)
    E = np.concatenate([edges(P), edges(Q)], axis=1)
    axes = np.stack([np.cross(E[:, i], E[:, j]) for i in range(E.shape[1]) for j in range(i + 1, E.shape[1])], axis=1)
    norm = np.linalg.norm(axes, axis=2, keepdims=True)
    axes = np.where(norm > 1e-12, axes / np.maximum(norm, 1e-300), 0.0)
    pp = np.einsum("nak,nvk->nav", axes, P)
    qq = np.einsum("nak,nvk->nav", axes, Q)
    # How far either must move along the axis to separate (a flat triangle's zero-width
    # interval counts by how far the other reaches across it on both sides).
    depth = np.minimum(pp.max(axis=2) - qq.min(axis=2), qq.max(axis=2) - pp.min(axis=2))
    depth = np.where(norm[..., 0] > 1e-12, depth, np.inf)
    return depth.min(axis=1)


def field_difference(host, ga, gb, pairs, x_a, x_b):
    """For tet pairs (i of ga, j of gb) with world vertices x_a, x_b (E, 4, 3): f = p_a - p_b
    (the two linear fields, float64) at the vertices of a and of b, (N, 4) each, and grad f
    (N, 3)."""
    ta = host.geom_i[ga, G_POOL_START] + pairs[:, 0]
    tb = host.geom_i[gb, G_POOL_START] + pairs[:, 1]
    xa, xb = x_a[pairs[:, 0]], x_b[pairs[:, 1]]

    def world_gradient(t, x):  # the field's gradient in W from its vertex values: solve E g = dp
        E = x[:, 1:] - x[:, :1]
        dp = host.tet_p[t, 1:] - host.tet_p[t, :1]
        return np.linalg.solve(E, dp[..., None])[..., 0]
    ga_W, gb_W = world_gradient(ta, xa), world_gradient(tb, xb)

    def f(x):  # p_a - p_b at points x (N, k, 3)
        pa = host.tet_p[ta, :1] + np.einsum("nk,nvk->nv", ga_W, x - xa[:, :1])
        pb = host.tet_p[tb, :1] + np.einsum("nk,nvk->nv", gb_W, x - xb[:, :1])
        return pa - pb
    return f(xa), f(xb), ga_W - gb_W


def plane_crosses_both(host, ga, gb, pairs, x_a, x_b):
    """1 where f = p_a - p_b (field_difference) takes both signs at the vertices of each tet
    by more than 1e-3 of |grad f| times the tet's size: the equal-pressure plane f = 0 clearly
    crosses both."""
    fa, fb, grad_f = field_difference(host, ga, gb, pairs, x_a, x_b)
    xa, xb = x_a[pairs[:, 0]], x_b[pairs[:, 1]]
    margin = 1e-3 * np.linalg.norm(grad_f, axis=1)
    size_a = np.ptp(xa, axis=1).max(axis=1)
    size_b = np.ptp(xb, axis=1).max(axis=1)
    return ((fa.min(axis=1) < -margin * size_a) & (fa.max(axis=1) > margin * size_a)
            & (fb.min(axis=1) < -margin * size_b) & (fb.max(axis=1) > margin * size_b))


def slice_meets_inside(host, ga, gb, pairs, x_a, x_b, inset):
    """1 where a's slice by the equal-pressure plane f = 0 (float64) still meets tet b with
    b's faces moved `inset` [m] inwards: such a pair has a contact polygon whatever the
    rounding, so the broad phase must list it (it drops pairs whose slice lies outside a
    face of b: clip.clearly_no_polygon). The slice (the crossings of f = 0 on a's edges,
    in angular order about their mean) is clipped by b's four half-spaces in turn."""
    fa, _, grad_f = field_difference(host, ga, gb, pairs, x_a, x_b)
    out = np.zeros(len(pairs), dtype=bool)
    for e, (i, j) in enumerate(pairs):
        poly = tet_slice(x_a[i], fa[e], grad_f[e] / np.linalg.norm(grad_f[e]))
        out[e] = poly is not None and clipped_by_tet(poly, x_b[j], inset) is not None
    return out


def world_boxes(sim, g, p_W, R_W):
    """Float64 world boxes (E, 2, 3) of geometry g's elements under its body's pose."""
    host = sim.model.host
    gi = host.geom_i[g]
    start, n = gi[G_POOL_START], gi[G_ELEM_COUNT]
    X = (host.tet_X_G if gi[G_KIND] == TETMESH else host.tri_X_G)[start:start + n]
    x = X @ R_W.T + p_W
    return np.stack([x.min(axis=1), x.max(axis=1)], axis=1), x


@pytest.mark.parametrize("case", list(CASES))
def test_tree_candidates_match_brute_force_far_from_the_origin(arch, case):
    """Mesh-mesh pairs: every element pair that meets (penetration over SLACK, by the separating
    axis theorem in float64; for tet-tet pairs, also crossed on both tets by the equal-pressure
    plane, plane_crosses_both, with a's slice by it meeting b well inside, slice_meets_inside,
    since the broad phase drops the others) is a candidate, and every candidate's world boxes
    overlap and its boxes overlap in b's frame (b's element box against a's world box turned
    into that frame and against a's element's own box there, up to twice the query's slack).
    Planar pairs: every element the plane crosses (a rigid plane) or that reaches below it (a
    slab) by more than SLACK is a candidate, no element whose vertices all lie on one side
    (above a slab; above or below a rigid plane) by more than the search's slack is, and the
    test prunes (fewer candidates than elements). Without a skin (test_skin checks the lists a
    skin keeps)."""
    sim = th.Simulator(replace(scene(CASES[case]), collision_skin=0.0))
    counts = sim.collide()
    n = int(counts[C_CANDIDATES])
    cand = sim.collision.candidates()
    assert n > 0
    host = sim.model.host
    p = sim.state.body_p.to_numpy()[0].astype(np.float64)
    q = sim.state.body_q.to_numpy()[0].astype(np.float64)
    pose = [(p[b], quat_matrix(q[b])) for b in range(len(p))]
    assert len(host.pair_i) == 1
    pair = host.pair_i[0]
    found = {(int(c[2]), int(c[3])) for c in cand}
    assert len(found) == n, "a candidate is reported twice"
    if pair[P_TYPE] in PairType.MESH_MESH:
        ga, gb = pair[P_GEOM_A], pair[P_GEOM_B]
        box_a, x_a = world_boxes(sim, ga, *pose[host.geom_i[ga, G_BODY]])
        box_b, x_b = world_boxes(sim, gb, *pose[host.geom_i[gb, G_BODY]])
        gap = np.minimum(box_a[:, None, 1], box_b[None, :, 1]) - np.maximum(box_a[:, None, 0], box_b[None, :, 0])  # (A, B, 3)
        near = np.argwhere(gap.min(axis=2) >= -SLACK)
        # The tree tests, in b's frame, b's element boxes against a's world boxes taken there
        # (the box of the turned box), then the world boxes: element pairs that meet are all
        # found; no candidate lies farther apart than those tests allow.
        p_b, R_b = pose[host.geom_i[gb, G_BODY]]
        centre, half = 0.5 * (box_a[:, 0] + box_a[:, 1]) - p_b, 0.5 * (box_a[:, 1] - box_a[:, 0])
        centre_B, half_B = centre @ R_b, half @ np.abs(R_b)
        X_b = x_b - p_b
        local_b = np.stack([(X_b @ R_b).min(axis=1), (X_b @ R_b).max(axis=1)], axis=1)
        gap_B = (np.minimum(centre_B[:, None] + half_B[:, None], local_b[None, :, 1])
                 - np.maximum(centre_B[:, None] - half_B[:, None], local_b[None, :, 0]))
        may = {tuple(ij) for ij in np.argwhere(gap_B.min(axis=2) >= -2 * TREE_SLACK * (np.linalg.norm(p_b) + 1.0))}
        # ... and against a's element's own box in b's frame (its vertices turned there).
        p_a = pose[host.geom_i[ga, G_BODY]][0]
        X_a = (x_a - p_b) @ R_b
        own_a = np.stack([X_a.min(axis=1), X_a.max(axis=1)], axis=1)
        gap_own = np.minimum(own_a[:, None, 1], local_b[None, :, 1]) - np.maximum(own_a[:, None, 0], local_b[None, :, 0])
        slack_own = 2 * TREE_SLACK * (np.linalg.norm(p_a) + np.linalg.norm(p_b) + 1.0)
        tight = {tuple(ij) for ij in np.argwhere(gap_own.min(axis=2) >= -slack_own)}
        assert len(tight & may) < len(may), "the case turns no box enough to test the tighter bound"
        may &= tight
        may &= {tuple(ij) for ij in near}
        depth = penetration(x_a[near[:, 0]], x_b[near[:, 1]])
        hit = depth > SLACK
        if pair[P_TYPE] == PairType.TET_TET:
            # Tet pairs without a polygon may be dropped: a pair must be found when the
            # equal-pressure plane clearly crosses both tets and a's slice by it meets b well
            # inside (float64).
            hit &= plane_crosses_both(host, ga, gb, near, x_a, x_b)
            hit[hit] &= slice_meets_inside(host, ga, gb, near[hit], x_a, x_b, SLACK)
        must = {tuple(ij) for ij in near[hit]}
        assert must <= found, f"missed: {sorted(must - found)[:5]}"
        assert found <= may, f"spurious: {sorted(found - may)[:5]}"
        print(f"{case}: {n} candidates, {len(must)} needed, {len(near)} with overlapping world boxes")
    else:
        mesh, half = (pair[P_GEOM_B], pair[P_GEOM_A]) if pair[P_TYPE] == PairType.SLAB_TRI else (pair[P_GEOM_A], pair[P_GEOM_B])
        _, x = world_boxes(sim, mesh, *pose[host.geom_i[mesh, G_BODY]])
        p_h, R_h = pose[host.geom_i[half, G_BODY]]
        height = (x - p_h) @ R_h[:, 2]  # (E, k) vertex heights above the plane
        low, high = height.min(axis=1), height.max(axis=1)
        reaches = low < -SLACK
        if pair[P_TYPE] == PairType.TET_PLANE:
            reaches &= high > SLACK
        must = {(int(e), 0) for e in np.flatnonzero(reaches)}
        # An element is listed by its vertices, not its box: none lies wholly on one side of
        # the plane (above it, or, for a rigid plane, below it) by more than the search's
        # slack (TREE_SLACK of the distances from the origin: the narrow phase takes the
        # plane in the world frame) and SLACK.
        slack = SLACK + 2 * TREE_SLACK * (np.linalg.norm(pose[host.geom_i[mesh, G_BODY]][0]) + np.linalg.norm(p_h) + 1.0)
        within = low < slack
        if pair[P_TYPE] == PairType.TET_PLANE:
            within &= high > -slack
        may = {(int(e), 0) for e in np.flatnonzero(within)}
        assert must, "the case makes no contact"
        assert must <= found, f"missed: {sorted(must - found)[:5]}"
        assert found <= may, f"spurious: {sorted(found - may)[:5]}"
        assert n < len(x), "nothing was pruned"
        print(f"{case}: {n} candidates of {len(x)} elements, {len(must)} needed")


def test_lens_box_holds_the_balls_overlap_and_is_tight(arch):
    """broadphase.lens_box: every point of both balls (sampled, float64) lies in the box, over
    random pairs of balls that overlap a little, a lot, one inside the other, and concentric;
    balls apart give an empty box. Tight where closed form says: unit balls 1.98 m apart along
    x meet in a lens 0.02 m thick and of radius sqrt(1 - 0.99^2) = 0.1411 m, so the box is
    [0.98, 1.0] x [-0.1411, 0.1411]^2 up to the slack (1e-5 of the sizes)."""
    import taichi as ti

    from taichi_hydro.collision.broadphase import lens_box
    from taichi_hydro.types import box3, nd, vec4

    @ti.kernel
    def boxes(balls: nd(dtype=vec4, ndim=2), out: nd(dtype=box3, ndim=1)):
        for i in range(out.shape[0]):
            a, b = balls[i, 0], balls[i, 1]
            out[i] = lens_box(ti.Vector([a[0], a[1], a[2]]), a[3], ti.Vector([b[0], b[1], b[2]]), b[3])

    rng = np.random.default_rng(7)
    n = 64
    c_a = rng.uniform(-1, 1, (n, 3))
    r_a = rng.uniform(0.1, 1.0, n)
    r_b = rng.uniform(0.1, 1.0, n)
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    # Distances from concentric through one inside the other to barely touching, and apart.
    frac = np.concatenate([[0.0], rng.uniform(0.0, 1.0, n - 9), [0.999, 1.001, 1.2, 1.5, 0.5, 0.9, 0.99, 0.02]])
    d = frac * (r_a + r_b)
    c_b = c_a + d[:, None] * direction
    tight = n - 1  # the closed-form case in the last row
    c_a[tight], r_a[tight], c_b[tight], r_b[tight] = (0, 0, 0), 1.0, (1.98, 0, 0), 1.0
    d[tight] = 1.98
    balls = ti.ndarray(vec4, (n, 2))
    balls.from_numpy(np.stack([np.c_[c_a, r_a], np.c_[c_b, r_b]], axis=1).astype(np.float32))
    out = ti.ndarray(box3, n)
    boxes(balls, out)
    box = out.to_numpy().astype(np.float64)
    for i in range(n):
        apart = d[i] > r_a[i] + r_b[i]
        lo, hi = box[i]
        assert apart == bool(np.any(lo > hi)), (i, d[i], r_a[i] + r_b[i], lo, hi)
        if apart:
            continue
        # Points in the lens: sample ball a's box uniformly and keep those inside both balls.
        x = rng.uniform(c_a[i] - r_a[i], c_a[i] + r_a[i], (40000, 3))
        x = x[(np.linalg.norm(x - c_a[i], axis=1) <= r_a[i]) & (np.linalg.norm(x - c_b[i], axis=1) <= r_b[i])]
        tol = 1e-5 * (np.abs(c_a[i]).sum() + np.abs(c_b[i]).sum() + r_a[i] + r_b[i])
        assert np.all(x >= lo - tol) and np.all(x <= hi + tol), i
    lo, hi = box[tight]
    rho = np.sqrt(1 - 0.99 ** 2)
    np.testing.assert_allclose(lo, [0.98, -rho, -rho], atol=1e-4)
    np.testing.assert_allclose(hi, [1.0, rho, rho], atol=1e-4)


def test_bounds_apart_only_where_no_skin_can_make_the_pair_active(arch):
    """broadphase.bounds_apart, pair_activity's first test: balls of radii 0.3 and 0.2 m (the
    centres given in turned body frames, the bodies 62 m from the origin) are apart exactly
    when their centres are farther than 0.3 + 0.2 + skin (skin 0.01 m) plus the slack of 1e-5
    of the sizes (2.5e-3 m there), and then lens_box of a's ball widened by the skin is empty; a mesh's ball
    above a turned half-space (its plane through the body's origin, normal its z axis) is apart
    exactly when its lowest point is higher than the skin, and the roles swap for a
    slab-triangle pair (the mesh is b)."""
    import taichi as ti

    from taichi_hydro.collision.broadphase import bounds_apart, lens_box
    from taichi_hydro.math3d import quat_to_mat
    from taichi_hydro.types import box3, nd, vec3, vec4

    skin = 0.01

    @ti.kernel
    def run(t: nd(dtype=ti.i32, ndim=1), balls: nd(dtype=vec4, ndim=2), poses: nd(dtype=vec3, ndim=2),
            turns: nd(dtype=vec4, ndim=2), apart: nd(dtype=ti.i32, ndim=1), lens: nd(dtype=box3, ndim=1)):
        for i in range(apart.shape[0]):
            Ra, Rb = quat_to_mat(turns[i, 0]), quat_to_mat(turns[i, 1])
            a, b = balls[i, 0], balls[i, 1]
            apart[i] = bounds_apart(t[i], a, Ra, poses[i, 0], b, Rb, poses[i, 1], skin)
            c_a = Ra @ ti.Vector([a[0], a[1], a[2]]) + poses[i, 0]
            c_b = Rb @ ti.Vector([b[0], b[1], b[2]]) + poses[i, 1]
            lens[i] = lens_box(c_a, a[3] + skin, c_b, b[3])

    rng = np.random.default_rng(3)
    n = 48
    types = np.array([PairType.TET_TET] * 16 + [PairType.TET_PLANE] * 16 + [PairType.SLAB_TRI] * 16, np.int32)
    turns = rng.normal(size=(n, 2, 4))
    turns /= np.linalg.norm(turns, axis=2, keepdims=True)
    local = rng.uniform(-0.1, 0.1, (n, 2, 3))  # ball centres in the body frames
    radius = np.array([0.3, 0.2])
    # Gaps beyond contact (reach = radii + skin for a ball pair, skin for a plane): well inside,
    # inside and outside the slack (2.5e-3 m for two balls 62 m from the origin), well outside.
    gap = np.tile([-0.05, -6e-3, -1e-3, 0.0, 1e-3, 6e-3, 0.02, 0.5], n // 8)
    poses = np.empty((n, 2, 3))
    want = np.empty(n, bool)
    slack = np.empty(n)
    for i in range(n):
        R = [quat_matrix(q) for q in turns[i]]
        poses[i, 0] = FAR
        c_a = R[0] @ local[i, 0] + FAR
        if types[i] == PairType.TET_TET:
            direction = rng.normal(size=3)
            direction /= np.linalg.norm(direction)
            c_b = c_a + (radius.sum() + skin + gap[i]) * direction
            poses[i, 1] = c_b - R[1] @ local[i, 1]
            slack[i] = 2 * TREE_SLACK * (np.linalg.norm(c_a) + np.linalg.norm(c_b) + radius.sum() + skin)
        else:  # the mesh's ball above the plane of the half-space body
            m, h = (0, 1) if types[i] == PairType.TET_PLANE else (1, 0)
            poses[i, h] = FAR + rng.uniform(-0.5, 0.5, 3)
            n_W = R[h][:, 2]
            c_m = poses[i, h] + (radius[m] + skin + gap[i]) * n_W + np.cross(n_W, rng.normal(size=3))
            poses[i, m] = c_m - R[m] @ local[i, m]
            slack[i] = TREE_SLACK * (np.linalg.norm(c_m) + np.linalg.norm(poses[i, h]) + radius[m])
        want[i] = gap[i] > slack[i]
    slack_ok = np.abs(gap - slack) <= 1e-4  # at the slack, up to float32 rounding 62 m out: either answer
    balls = ti.ndarray(vec4, (n, 2))
    balls.from_numpy(np.concatenate([local, np.broadcast_to(radius[None, :, None], (n, 2, 1))], axis=2).astype(np.float32))
    t_nd = ti.ndarray(ti.i32, n)
    t_nd.from_numpy(types)
    p_nd, q_nd = ti.ndarray(vec3, (n, 2)), ti.ndarray(vec4, (n, 2))
    p_nd.from_numpy(poses.astype(np.float32))
    q_nd.from_numpy(turns.astype(np.float32))
    apart, lens = ti.ndarray(ti.i32, n), ti.ndarray(box3, n)
    run(t_nd, balls, p_nd, q_nd, apart, lens)
    got = apart.to_numpy() == 1
    assert np.array_equal(got[~slack_ok], want[~slack_ok]), (gap[~slack_ok], got[~slack_ok])
    assert np.all(~got[gap <= 0]) and np.all(got[gap > 2 * slack])  # never apart within reach; apart past the slack
    box = lens.to_numpy()
    pairs = (types == PairType.TET_TET) & got
    assert np.all(np.any(box[pairs, 0] > box[pairs, 1], axis=1)), "balls apart with a lens"


def test_run_boxes_are_the_hulls_of_their_elements(arch):
    """model.run_boxes: run r's box is exactly the min and max over the vertices of elements
    [r * run, (r + 1) * run) (the last run shorter), so find_planar may skip a run whose box
    misses the plane: each element's box lies inside its run's."""
    if arch != "cpu":
        pytest.skip("host-side NumPy")
    from taichi_hydro.model import run_boxes

    X = np.random.default_rng(3).normal(size=(70, 4, 3)).astype(np.float32)
    boxes = run_boxes(X, 32)
    assert boxes.shape == (3, 2, 3)
    for r, (lo, hi) in enumerate(boxes):
        part = X[32 * r:32 * (r + 1)].reshape(-1, 3)
        assert np.array_equal(lo, part.min(axis=0)) and np.array_equal(hi, part.max(axis=0))
