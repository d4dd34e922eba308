"""Rasterising contact polygons onto a tactile face, on the device: one thread per polygon of
the pool, every world in one launch.

Each polygon touching the face's geometry is projected along the face normal onto the face
plane (face coordinates u, v [m], carrying the vertex pressure p [Pa] as a third coordinate)
and clipped exactly against every pixel its box overlaps (Sutherland-Hodgman in (u, v, p):
pressure is linear on a polygon, so it stays linear on the pieces). Per piece:
- pressure: the integral of p+ over the projected piece, i.e. the pressure force along the
  face normal, sum of p dA cos(theta) (the part with p < 0, speculative, clipped off), divided
  by the pixel's area [Pa];
- shear: the polygon's solved friction impulse / dt (the tangential part of its contact row's
  impulse, the force the other body exerts on the sensor's body), in (u, v) components, spread
  over the polygon's projected footprint in proportion to area, divided by the pixel's area
  [Pa].
So an image sums, times the pixel area, to the normal pressure force and the friction force on
the face, exactly up to float round-off, for every polygon whose projection lies on the face;
what projects outside the rectangle is not counted. A polygon seen edge-on (projected area below
1e-6 of its own) adds nothing. The only approximation is the point-contact model's: one
friction impulse per polygon, spread uniformly over it."""

import taichi as ti

from .. import backend

from ..math3d import quat_to_mat
from ..types import (
    C_POLYGONS, K_PAIR, K_WORLD, P_BODY_HI, P_GEOM_A, P_GEOM_B, POLY_AREA, ivec4, ivec8, mat3, nd, poly_record,
    poly_vertex_values, poly_vertices, vec2, vec3, vec4,
)
from ..types import RealMatrix

__all__ = ["RASTER_MAX", "clip_piece", "piece_integrals", "rasterise_face", "clear_worlds", "EDGE_ON_REL"]

RASTER_MAX = 16
"""Vertices of a clipped piece: a polygon (8 at most) cut by the p >= 0 plane and four pixel
sides gains at most one vertex per cut."""
EDGE_ON_REL = 1e-6
"""A polygon whose projected area is below this fraction of its area is seen edge-on."""

Piece = RealMatrix(RASTER_MAX, 3)
"""A planar polygon in face coordinates: rows (u [m], v [m], p [Pa])."""


@ti.func
def clip_piece(poly: Piece, count: ti.i32, n: vec3, d: float):
    """Keep the part of a convex polygon (rows (u, v, p)) with n . (u, v, p) <= d, coordinates
    interpolated along the cut edges (Sutherland-Hodgman). Returns the piece and its count."""
    out = Piece(0.0)
    m = 0
    for i in range(count):
        a = vec3(poly[i, 0], poly[i, 1], poly[i, 2])
        j = (i + 1) % count
        b = vec3(poly[j, 0], poly[j, 1], poly[j, 2])
        da = n.dot(a) - d
        db = n.dot(b) - d
        if da <= 0.0 and m < RASTER_MAX:
            for k in ti.static(range(3)):
                out[m, k] = a[k]
            m += 1
        if (da <= 0.0) != (db <= 0.0) and m < RASTER_MAX:
            x = a + (da / (da - db)) * (b - a)
            for k in ti.static(range(3)):
                out[m, k] = x[k]
            m += 1
    return out, m


@ti.func
def piece_integrals(poly: Piece, count: ti.i32) -> vec2:
    """(signed area [m^2], signed integral of p [N]) of a planar polygon with p linear on it:
    a fan of triangles from vertex 0, each contributing its area times the mean of its three
    pressures (exact for a linear p). Counter-clockwise in (u, v) is positive."""
    area = 0.0
    force = 0.0
    for i in range(1, count - 1):
        du1, dv1 = poly[i, 0] - poly[0, 0], poly[i, 1] - poly[0, 1]
        du2, dv2 = poly[i + 1, 0] - poly[0, 0], poly[i + 1, 1] - poly[0, 1]
        a = 0.5 * (du1 * dv2 - du2 * dv1)
        area += a
        force += a * (poly[0, 2] + poly[i, 2] + poly[i + 1, 2]) / 3.0
    return vec2(area, force)


@ti.func
def pixel_piece(poly: Piece, count: ti.i32, u0: float, u1: float, v0: float, v1: float) -> vec2:
    """piece_integrals of the part of `poly` inside the pixel [u0, u1] x [v0, v1]."""
    a, m = clip_piece(poly, count, vec3(-1.0, 0.0, 0.0), -u0)
    a, m = clip_piece(a, m, vec3(1.0, 0.0, 0.0), u1)
    a, m = clip_piece(a, m, vec3(0.0, -1.0, 0.0), -v0)
    a, m = clip_piece(a, m, vec3(0.0, 1.0, 0.0), v1)
    out = vec2(0.0)
    if m >= 3:
        out = piece_integrals(a, m)
    return out


@ti.kernel
def clear_worlds(world_row: nd(dtype=ti.i32, ndim=1), pressure: nd(dtype=float, ndim=3), shear: nd(dtype=vec2, ndim=3)):
    """Zero the images of the worlds with world_row[w] >= 0 (the worlds a reset selects)."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, i, j in ti.ndrange(pressure.shape[0], pressure.shape[1], pressure.shape[2]):
        if world_row[w] >= 0:
            pressure[w, i, j] = 0.0
            shear[w, i, j] = vec2(0.0)


@ti.kernel
def rasterise_face(
    counts: nd(dtype=ti.i32, ndim=1),
    poly_i: nd(dtype=ivec4, ndim=1),
    poly_g: nd(dtype=poly_record, ndim=1),
    poly_nv: nd(dtype=ti.i32, ndim=1),
    poly_v: nd(dtype=poly_vertices, ndim=1),
    poly_vp: nd(dtype=poly_vertex_values, ndim=1),
    poly_slot: nd(dtype=ti.i32, ndim=1),
    world_start: nd(dtype=ti.i32, ndim=1),
    pair_i: nd(dtype=ivec8, ndim=1),
    c_frame: nd(dtype=mat3, ndim=1),
    c_gamma: nd(dtype=vec3, ndim=1),
    body_p: nd(dtype=vec3, ndim=2),
    body_q: nd(dtype=vec4, ndim=2),
    dt: float,
    face_geometry: ti.i32,
    face_body: ti.i32,
    face: nd(dtype=float, ndim=1),
    pressure: nd(dtype=float, ndim=3),
    shear: nd(dtype=vec2, ndim=3),
):
    """The pressure and shear images of one face (module docstring), every world at once.
    Reads the polygon pool, the contact rows' impulses (c_gamma, rows found through
    poly_slot) and the bodies' poses at the polygons' time (the step's start); face: the
    TactileFace's packed floats (p_BF, u, v, n in the body frame, width, height).
    Writes pressure (W, rows, cols) [Pa] and shear (W, rows, cols) (u, v) [Pa]."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, i, j in ti.ndrange(pressure.shape[0], pressure.shape[1], pressure.shape[2]):
        pressure[w, i, j] = 0.0
        shear[w, i, j] = vec2(0.0)
    rows, cols = pressure.shape[1], pressure.shape[2]
    p_BF = vec3(face[0], face[1], face[2])
    u_B = vec3(face[3], face[4], face[5])
    v_B = vec3(face[6], face[7], face[8])
    width, height = face[12], face[13]
    du, dv = width / cols, height / rows
    pixel_area = du * dv
    n = ti.min(counts[C_POLYGONS], poly_i.shape[0])
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for k in range(n):
        key = poly_i[k]
        w, pair = key[K_WORLD], key[K_PAIR]
        pi = pair_i[pair]
        if pi[P_GEOM_A] == face_geometry or pi[P_GEOM_B] == face_geometry:
            R_WB = quat_to_mat(body_q[w, face_body])
            origin = body_p[w, face_body] + R_WB @ p_BF
            U, V = R_WB @ u_B, R_WB @ v_B
            full = Piece(0.0)
            count = poly_nv[k]
            xs = poly_v[k]
            for m in range(count):
                x = vec3(xs[m, 0], xs[m, 1], xs[m, 2]) - origin
                full[m, 0] = x.dot(U)
                full[m, 1] = x.dot(V)
                full[m, 2] = poly_vp[k][m]
            whole = piece_integrals(full, count)
            if ti.abs(whole[0]) > EDGE_ON_REL * poly_g[k][POLY_AREA]:
                orient = 1.0 if whole[0] > 0.0 else -1.0
                positive, m_pos = clip_piece(full, count, vec3(0.0, 0.0, -1.0), 0.0)  # p >= 0
                f_uv = vec2(0.0)
                slot = poly_slot[k]
                if slot >= 0:
                    c = world_start[w] + slot
                    g = c_gamma[c]
                    f_W = c_frame[c].transpose() @ vec3(g[0], g[1], 0.0) / dt  # on the pair's higher body
                    if pi[P_BODY_HI] != face_body:
                        f_W = -f_W
                    f_uv = vec2(f_W.dot(U), f_W.dot(V))
                lo_u, hi_u, lo_v, hi_v = full[0, 0], full[0, 0], full[0, 1], full[0, 1]
                for m in range(1, count):
                    lo_u, hi_u = ti.min(lo_u, full[m, 0]), ti.max(hi_u, full[m, 0])
                    lo_v, hi_v = ti.min(lo_v, full[m, 1]), ti.max(hi_v, full[m, 1])
                j0 = ti.max(0, ti.cast(ti.floor((lo_u + 0.5 * width) / du), ti.i32))
                j1 = ti.min(cols - 1, ti.cast(ti.floor((hi_u + 0.5 * width) / du), ti.i32))
                i0 = ti.max(0, ti.cast(ti.floor((lo_v + 0.5 * height) / dv), ti.i32))
                i1 = ti.min(rows - 1, ti.cast(ti.floor((hi_v + 0.5 * height) / dv), ti.i32))
                for i in range(i0, i1 + 1):
                    v0 = -0.5 * height + i * dv
                    for j in range(j0, j1 + 1):
                        u0 = -0.5 * width + j * du
                        if m_pos >= 3:
                            part = pixel_piece(positive, m_pos, u0, u0 + du, v0, v0 + dv)
                            if part[1] != 0.0:
                                ti.atomic_add(pressure[w, i, j], orient * part[1] / pixel_area)
                        if slot >= 0:
                            share = orient * pixel_piece(full, count, u0, u0 + du, v0, v0 + dv)[0] / ti.abs(whole[0])
                            if share != 0.0:
                                ti.atomic_add(shear[w, i, j], share * f_uv / pixel_area)
