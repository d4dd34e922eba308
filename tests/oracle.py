"""A float64 NumPy oracle of the contact polygons, written independently of the device code:
each polygon is the intersection of half-planes on its plane, found by enumerating the
pairwise intersections of the constraint lines (no Sutherland-Hodgman, no marching tets).
Brute force over element pairs with overlapping boxes: small meshes only."""

from __future__ import annotations

import itertools
import math

import numpy as np


COS_LIMIT = math.cos(5 * math.pi / 8)


def quat_matrix(q):
    w, x, y, z = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def tet_halfspaces(x):
    """(normals, offsets) with the tet = {p : n.p <= d} (outward unit normals)."""
    out_n, out_d = [], []
    for k in range(4):
        a, b, c = (x[i] for i in range(4) if i != k)
        n = np.cross(b - a, c - a)
        n /= np.linalg.norm(n)
        if n @ (x[k] - a) > 0:
            n = -n
        out_n.append(n)
        out_d.append(n @ a)
    return np.array(out_n), np.array(out_d)


def polygon_on_plane(normal, point, normals, offsets, scale):
    """Vertices (counter-clockwise about `normal`) of {p on the plane : normals p <= offsets}."""
    u = np.cross(normal, [1.0, 0, 0] if abs(normal[0]) < 0.9 else [0, 1.0, 0])
    u /= np.linalg.norm(u)
    v = np.cross(normal, u)
    # Constraint in plane coordinates s, t: (n.u) s + (n.v) t <= d - n.point
    A = np.column_stack([normals @ u, normals @ v])
    b = offsets - normals @ point
    pts = []
    for i, j in itertools.combinations(range(len(A)), 2):
        M = A[[i, j]]
        if abs(np.linalg.det(M)) < 1e-14 * (np.abs(M).max() ** 2 + 1e-300):
            continue
        st = np.linalg.solve(M, b[[i, j]])
        if np.all(A @ st <= b + 1e-10 * scale):
            pts.append(st)
    if len(pts) < 3:
        return None
    pts = np.unique(np.round(np.array(pts) / (1e-9 * scale)) * (1e-9 * scale), axis=0)
    if len(pts) < 3:
        return None
    c = pts.mean(axis=0)
    pts = pts[np.argsort(np.arctan2(pts[:, 1] - c[1], pts[:, 0] - c[0]))]
    return point + np.outer(pts[:, 0], u) + np.outer(pts[:, 1], v)


def tet_slice(x, f, normal):
    """Where the linear function with values f (4,) at the tet's vertices x (4 x 3) is zero: the
    crossings of its edges, counter-clockwise about `normal`; None below three."""
    poly = [x[u] + f[u] / (f[u] - f[v]) * (x[v] - x[u]) for u in range(4) for v in range(u + 1, 4) if (f[u] > 0.0) != (f[v] > 0.0)]
    if len(poly) < 3:
        return None
    t1 = np.cross(normal, [1.0, 0.0, 0.0] if abs(normal[0]) < 0.9 else [0.0, 1.0, 0.0])
    t2 = np.cross(normal, t1)
    rel = np.array(poly) - np.mean(poly, axis=0)
    return np.array(poly)[np.argsort(np.arctan2(rel @ t2, rel @ t1))]


def clipped_by_tet(poly, x, inset=0.0):
    """The convex polygon poly clipped by the tet x's four half-spaces, each face moved inwards
    by `inset` [m] (Sutherland-Hodgman); None once fewer than three vertices are left."""
    normals, offsets = tet_halfspaces(x)
    for n, d in zip(normals, offsets - inset):
        s = poly @ n - d
        kept = []
        for m in range(len(poly)):
            a, b, sa, sb = poly[m], poly[(m + 1) % len(poly)], s[m], s[(m + 1) % len(poly)]
            if sa <= 0.0:
                kept.append(a)
            if (sa <= 0.0) != (sb <= 0.0):
                kept.append(a + sa / (sa - sb) * (b - a))
        if len(kept) < 3:
            return None
        poly = np.array(kept)
    return poly


def area_centroid(poly, normal):
    p0 = poly[0]
    total, weighted = 0.0, np.zeros(3)
    for a, b in zip(poly[1:-1], poly[2:]):
        w = np.cross(a - p0, b - p0) @ normal
        total += w
        weighted += w * (p0 + a + b) / 3
    return 0.5 * total, weighted / total if total != 0 else p0


def along(grad, direction):
    return grad @ direction > COS_LIMIT * np.linalg.norm(grad)


def oracle_polygons(sim, world=0):
    """{(body_a, body_b, element_a, element_b): (area, centroid, p0, normal)} for one world, in
    the output convention (normal from the lower body index to the higher)."""
    data = sim.model.host
    state = sim.get_state()
    pos, quat = state["position"][world], state["orientation"][world]
    out = {}
    geoms = data.geometries
    for p, row in enumerate(data.pair_i):
        ga, gb, ptype, flip = (int(x) for x in row[:4])
        lo, hi = int(row[4]), int(row[5])
        Ra, pa = quat_matrix(quat[ga]), pos[ga]
        Rb, pb = quat_matrix(quat[gb]), pos[gb]
        A, B = geoms[ga], geoms[gb]
        results = []  # (element a, element b, polygon, normal out of a, pressure field)
        if ptype in (0, 1, 2, 3):  # a is a tet mesh
            xa = A.tets.vertices[A.tets.tets] @ Ra.T + pa
            pa_v = A.tets.pressure[A.tets.tets]
            grads = A.tets.gradients() @ Ra.T
            lo_a, hi_a = xa.min(axis=1), xa.max(axis=1)
        if ptype == 0 or ptype == 1:
            if ptype == 0:
                xb = B.tets.vertices[B.tets.tets] @ Rb.T + pb
            else:
                xb = B.surface.vertices[B.surface.triangles] @ Rb.T + pb
            lo_b, hi_b = xb.min(axis=1), xb.max(axis=1)
            ia, ib = np.nonzero(np.all(lo_a[:, None] <= hi_b[None], axis=2) & np.all(lo_b[None] <= hi_a[:, None], axis=2))
            for ea, eb in zip(ia, ib):
                field = lambda x, ea=ea: pa_v[ea, 0] + grads[ea] @ (x - xa[ea, 0])  # noqa: E731
                na, da = tet_halfspaces(xa[ea])
                scale = np.ptp(xa[ea], axis=0).max()
                if ptype == 0:
                    gb_ = B.tets.gradients()[eb] @ Rb.T
                    pb_v = B.tets.pressure[B.tets.tets[eb, 0]]
                    m = gb_ - grads[ea]
                    if np.linalg.norm(m) <= 1e-6 * max(np.linalg.norm(gb_), np.linalg.norm(grads[ea])):
                        continue
                    n = m / np.linalg.norm(m)
                    if not (along(gb_, n) and along(grads[ea], -n)):
                        continue
                    # pA(x) = pB(x): (gb - ga).x = pA0 - ga.xa0 - pB0 + gb.xb0
                    d = (pa_v[ea, 0] - grads[ea] @ xa[ea, 0] - pb_v + gb_ @ xb[eb, 0]) / np.linalg.norm(m)
                    nb, db = tet_halfspaces(xb[eb])
                    poly = polygon_on_plane(n, n * d, np.vstack([na, nb]), np.concatenate([da, db]), scale)
                else:
                    nt = np.cross(xb[eb, 1] - xb[eb, 0], xb[eb, 2] - xb[eb, 0])
                    nt /= np.linalg.norm(nt)
                    if not along(grads[ea], nt):
                        continue
                    n = -nt
                    edges_n, edges_d = [], []
                    for k in range(3):
                        a, b = xb[eb, k], xb[eb, (k + 1) % 3]
                        en = np.cross(b - a, nt)
                        en /= np.linalg.norm(en)
                        edges_n.append(en)
                        edges_d.append(en @ a)
                    poly = polygon_on_plane(n, xb[eb, 0], np.vstack([na, edges_n]), np.concatenate([da, edges_d]), scale)
                if poly is not None:
                    results.append((ea, eb, poly, n, field))
        elif ptype in (2, 3):
            n_plane = Rb @ [0, 0, 1.0]
            d_plane = n_plane @ pb
            slab = B.slab_gradient
            for ea in np.nonzero((xa @ n_plane).min(axis=1) <= d_plane)[0]:
                field = lambda x, ea=ea: pa_v[ea, 0] + grads[ea] @ (x - xa[ea, 0])  # noqa: E731
                na, da = tet_halfspaces(xa[ea])
                scale = np.ptp(xa[ea], axis=0).max()
                if ptype == 2:
                    n = -n_plane
                    poly = polygon_on_plane(n, n_plane * d_plane, na, da, scale)
                else:
                    gb_ = -slab * n_plane
                    m = gb_ - grads[ea]
                    n = m / np.linalg.norm(m)
                    if not (along(gb_, n) and along(grads[ea], -n)):
                        continue
                    # pA = pA0 + ga.(x - xa0) = slab (d_plane - n_plane.x)
                    d = (pa_v[ea, 0] - grads[ea] @ xa[ea, 0] - slab * d_plane) / np.linalg.norm(m)
                    poly = polygon_on_plane(n, n * d, np.vstack([na, n_plane]), np.concatenate([da, [d_plane]]), scale)
                if poly is not None:
                    results.append((ea, 0, poly, n, field))
        elif ptype == 4:
            n_plane = Ra @ [0, 0, 1.0]
            d_plane = n_plane @ pa
            slab = A.slab_gradient
            xb = B.surface.vertices[B.surface.triangles] @ Rb.T + pb
            for eb in np.nonzero((xb @ n_plane).min(axis=1) <= d_plane)[0]:
                nt = np.cross(xb[eb, 1] - xb[eb, 0], xb[eb, 2] - xb[eb, 0])
                nt /= np.linalg.norm(nt)
                edges_n, edges_d = [], []
                for k in range(3):
                    a, b = xb[eb, k], xb[eb, (k + 1) % 3]
                    en = np.cross(b - a, nt)
                    en /= np.linalg.norm(en)
                    edges_n.append(en)
                    edges_d.append(en @ a)
                scale = np.ptp(xb[eb], axis=0).max()
                poly = polygon_on_plane(-nt, xb[eb, 0], np.vstack([edges_n, n_plane]), np.concatenate([edges_d, [d_plane]]), scale)
                field = lambda x: slab * (d_plane - n_plane @ x)  # noqa: E731
                if poly is not None:
                    results.append((0, eb, poly, -nt, field))
        for ea, eb, poly, n, field in results:
            area, centroid = area_centroid(poly, n)
            if area <= 0:
                continue
            key_elems = (eb, ea) if flip else (ea, eb)
            normal = -n if flip else n
            out[(lo, hi, int(key_elems[0]), int(key_elems[1]))] = (area, centroid, field(centroid), normal)
    return out
