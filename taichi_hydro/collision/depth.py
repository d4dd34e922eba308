"""Deep overlap of a compliant geometry with a rigid one (per world and pair, each step).

A compliant geometry's pressure field rises from 0 on its boundary to its maximum on its
medial axis ("core": a sphere's centre, a box's medial rectangle). While the core is outside
the rigid body, the rigid surface inside the compliant body faces the field the usual way:
the pressure grows into the rigid body's interior along the contact normal, gA > 0. A face
whose gradient points the other way (gA < 0) is then the far side of a thin rigid feature
(the underside of a plate the compliant body reaches through), and Drake drops it: its
5 pi / 8 face filter at construction, the gA > 0 test in the point-contact model. Both
filters are kept for such pairs.

Once the core is inside the rigid body (a sphere whose centre is below the floor), (nearly)
every polygon of the pair has gA < 0: the pressure on the rigid surface grows as the bodies
separate, up to the moment the core leaves. The static force A p0 of each polygon still
pushes the bodies apart (the surface integral of p n is the integral of grad p over the
overlap volume), but both filters drop the polygons and the compliant body fell through
while the contact query reported the force. For such a pair ("deep"), the narrow phase keeps
every face and the point-contact model uses max(|gA|, 1e-6 |grad pA|) (contact.assemble): the
force is A p0 at the current pose, with a positive stiffness, and the body is pushed out
until its core is outside again.

The core of a compliant tet mesh is the set of its vertices of maximal pressure (its medial
axis: a sphere's or an ellipsoid's centre, a capsule's segment, a box's medial rectangle, a
cylinder's medial disc, a convex mesh's centroid), represented by at most CORE_POINTS of
them, spread by farthest-point sampling (geometry_cores). A pair is deep when any of them
is inside the rigid geometry: on the solid side of a half-space's plane (n.x <= d, the
closed side, as clip.slice_tet counts a vertex on the plane), or inside a rigid (closed)
triangle mesh: generalised winding number >= 1/2 (Van Oosterom and Strackee's solid angle
of each triangle), after a bounding-box test. A single point would not do for an elongated
core: an upright capsule whose centre has just left the floor still has the lower half of
its segment below it, and the polygons of its cylindrical part (gradient in the plane) carry
its whole static force."""

import math

import numpy as np
import taichi as ti

from .. import backend

from ..math3d import quat_to_mat
from ..types import (
    G_BODY, G_COMPLIANT, G_ELEM_COUNT, G_KIND, G_POOL_START, P_GEOM_A, P_GEOM_B, P_TYPE, TETMESH, PairType, box3, ivec8, nd,
    tri_vertices, vec3, vec4,
)

__all__ = ["geometry_cores", "has_deep_pairs", "pair_depth"]

FOUR_PI = 4.0 * math.pi
# Vertices within this fraction of a field's maximum pressure belong to its core.
CORE_REL = 1e-6
# Points kept per core (each costs one winding number against a rigid mesh).
CORE_POINTS = 8


def core_points(x: np.ndarray, p: np.ndarray, keep: int = CORE_POINTS) -> np.ndarray:
    """(k <= keep, 3): the distinct vertices x (n, 3) whose pressure p (n,) is within CORE_REL
    of the maximum, thinned by farthest-point sampling (from the one farthest from their mean)
    when there are more than `keep`."""
    top = np.unique(x[p >= p.max() - CORE_REL * abs(p.max())], axis=0)
    if len(top) <= keep:
        return top
    chosen = [int(np.argmax(np.linalg.norm(top - top.mean(axis=0), axis=1)))]
    dist = np.linalg.norm(top - top[chosen[0]], axis=1)
    while len(chosen) < keep:
        chosen.append(int(np.argmax(dist)))
        dist = np.minimum(dist, np.linalg.norm(top - top[chosen[-1]], axis=1))
    return top[chosen]


def geometry_cores(host) -> tuple[np.ndarray, np.ndarray]:
    """(points (G, CORE_POINTS, 3) [m], geometry (= body) frame; count (G,)): the core points
    of each compliant tet-mesh geometry of `host` (model.ModelData), core_points of its
    vertices; count 0 for every other geometry."""
    geom_i = host.geom_i
    points = np.zeros((len(geom_i), CORE_POINTS, 3), dtype=np.float64)
    count = np.zeros(len(geom_i), dtype=np.int32)
    for g in range(len(geom_i)):
        if geom_i[g, G_KIND] != TETMESH or geom_i[g, G_COMPLIANT] != 1:
            continue
        start, n = int(geom_i[g, G_POOL_START]), int(geom_i[g, G_ELEM_COUNT])
        x = np.asarray(host.tet_X_G[start:start + n], dtype=np.float64).reshape(-1, 3)
        p = np.asarray(host.tet_p[start:start + n], dtype=np.float64).reshape(-1)
        if len(p):
            core = core_points(x, p)
            points[g, : len(core)] = core
            count[g] = len(core)
    return points, count


def has_deep_pairs(host) -> bool:
    """Whether `host` (model.ModelData) has a pair whose depth pair_depth decides."""
    types = np.asarray(host.pair_i)[:, P_TYPE] if len(host.pair_i) else np.zeros(0)
    return bool(np.isin(types, (PairType.TET_TRI, PairType.TET_PLANE)).any())


@ti.func
def solid_angle(a, b, c):
    """Signed solid angle [sr] of the triangle (a, b, c) seen from the origin, positive when
    the triangle turns counter-clockwise about a normal pointing away from the origin
    (Van Oosterom and Strackee 1983)."""
    la, lb, lc = a.norm(), b.norm(), c.norm()
    num = a.dot(b.cross(c))
    den = la * lb * lc + a.dot(b) * lc + a.dot(c) * lb + b.dot(c) * la
    return 2.0 * ti.atan2(num, den)


@ti.func
def inside_mesh(x, box, start: ti.i32, count: ti.i32, tri_X_G: ti.template(), tri_n_G: ti.template()) -> ti.i32:
    """1 when the point x (geometry frame) is inside the closed triangle mesh of `count`
    triangles from `start` (outward normals tri_n_G): inside its bounding box and a winding
    number >= 1/2."""
    inside = 1
    for k in ti.static(range(3)):
        if x[k] < box[0, k] or x[k] > box[1, k]:
            inside = 0
    if inside == 1:
        total = 0.0
        for f in range(start, start + count):
            X = tri_X_G[f]
            a = vec3(X[0, 0], X[0, 1], X[0, 2]) - x
            b = vec3(X[1, 0], X[1, 1], X[1, 2]) - x
            c = vec3(X[2, 0], X[2, 1], X[2, 2]) - x
            omega = solid_angle(a, b, c)
            if (b - a).cross(c - a).dot(tri_n_G[f]) < 0.0:
                omega = -omega  # vertices listed clockwise about the outward normal
            total += omega
        inside = 1 if total >= 0.5 * FOUR_PI else 0
    return inside


@ti.kernel
def pair_depth(
    pair_active: nd(dtype=ti.i32, ndim=2),
    body_p: nd(dtype=vec3, ndim=2),
    body_q: nd(dtype=vec4, ndim=2),
    geom_i: nd(dtype=ivec8, ndim=1),
    geom_box_G: nd(dtype=box3, ndim=1),
    geom_core_G: nd(dtype=vec3, ndim=2),
    geom_core_n: nd(dtype=ti.i32, ndim=1),
    pair_i: nd(dtype=ivec8, ndim=1),
    tri_X_G: nd(dtype=tri_vertices, ndim=1),
    tri_n_G: nd(dtype=vec3, ndim=1),
    pair_deep: nd(dtype=ti.i32, ndim=2),
):
    """Reads poses, pair_active, the core points and the rigid meshes. Writes pair_deep[w, p]:
    1 when pair p (compliant tet mesh a - rigid mesh or half-space b) is active in world w and
    a core point of a is inside b (module docstring), else 0."""
    W = body_p.shape[0]
    P = pair_i.shape[0]
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, p in ti.ndrange(W, P):
        pr = pair_i[p]
        t = pr[P_TYPE]
        deep = 0
        if pair_active[w, p] == 1 and (t == PairType.TET_TRI or t == PairType.TET_PLANE):
            ga, gb = pr[P_GEOM_A], pr[P_GEOM_B]
            ba, bb = geom_i[ga][G_BODY], geom_i[gb][G_BODY]
            Ra, Rb_T = quat_to_mat(body_q[w, ba]), quat_to_mat(body_q[w, bb]).transpose()
            offset = Rb_T @ (body_p[w, ba] - body_p[w, bb])
            for k in range(geom_core_n[ga]):
                if deep == 0:
                    x = Rb_T @ (Ra @ geom_core_G[ga, k]) + offset  # in b's frame
                    if t == PairType.TET_PLANE:
                        deep = 1 if x[2] <= 0.0 else 0  # the half-space is z <= 0 of its frame
                    else:
                        deep = inside_mesh(x, geom_box_G[gb], geom_i[gb][G_POOL_START], geom_i[gb][G_ELEM_COUNT], tri_X_G,
                                           tri_n_G)
        pair_deep[w, p] = deep
