"""Point-contact comparison mode ([solver] contact = "point"): every patch, the polygons of one
pair of geometries in one world, becomes ONE compliant point contact instead of one per polygon.

This is what a point-contact engine gives a compliant grasp: the right total force and
stiffness, but no spread of contact points, so no friction torque about the contact normal
(Masterjohn 2022 §V-C: "very difficult, if not impossible, to emulate using point contact
approaches"). It exists for that comparison only; the default ("polygons") never runs these
kernels, so it costs the default path nothing.

The patch's point contact, from its valid polygons i (the same filter and gradients as
contact.assemble, deep pairs included), with k_i = g_i A_i, phi0_i = -p0_i / g_i,
f_i = A_i p0_i:
    k = sum k_i                         (the springs in parallel)
    phi0 = sum k_i phi0_i / k           (so that -k phi0 = sum f_i: the patch's static force)
    c = sum f_i+ c_i / sum f_i+         (its pressure centre; the stiffness centre
                                         sum k_i c_i / k when no polygon has pressure yet)
    n = normalised sum f_i+ n_i         (the direction of the static force; k-weighted as c)
    tau = tau_KelvinVoigt + d (-phi0)+  (the pair's dissipation at the patch's depth)
The near-rigid floor (contact.assemble) applies to the one contact as to a patch; the warm
start keys the contact by (world, pair, -1, -1), so it is found again at the next step."""

import taichi as ti

from .. import backend

from ..types import (
    BODY_DYNAMIC, C_POLYGONS, K_PAIR, K_WORLD, P_BODY_HI, P_BODY_LO, POLY_AREA, POLY_GA, POLY_GB, POLY_GRAD_A,
    POLY_GRAD_B, POLY_P0, ivec4, ivec8, mat3, nd, poly_record, vec3, vec4,
)
from .assemble import deep_gradient, series_gradient, valid_polygon, write_row

__all__ = ["count_patches", "assemble_patches", "PATCH_K", "PATCH_K_PHI0", "PATCH_FORCE", "PATCH_COUNT"]

# patch_sum columns: sum k_i [N/m], sum k_i phi0_i [N], sum (A_i p0_i)+ [N], polygon count.
PATCH_K, PATCH_K_PHI0, PATCH_FORCE, PATCH_COUNT = range(4)


@ti.kernel
def count_patches(
    counts: nd(dtype=ti.i32, ndim=1),
    poly_i: nd(dtype=ivec4, ndim=1),
    poly_g: nd(dtype=poly_record, ndim=1),
    poly_c: nd(dtype=vec3, ndim=1),
    poly_n: nd(dtype=vec3, ndim=1),
    pair_i: nd(dtype=ivec8, ndim=1),
    body_kind: nd(dtype=ti.i32, ndim=1),
    world_status: nd(dtype=ti.i32, ndim=1),
    world_start: nd(dtype=ti.i32, ndim=1),
    body_contacts: nd(dtype=ti.i32, ndim=2),
    pair_scale: nd(dtype=float, ndim=2),
    pair_weight: nd(dtype=float, ndim=2),
    poly_slot: nd(dtype=ti.i32, ndim=1),
    pair_rows: nd(dtype=ti.i32, ndim=2),
    pair_deep: nd(dtype=ti.i32, ndim=2),
    patch_sum: nd(dtype=vec4, ndim=2),
    patch_c: nd(dtype=vec3, ndim=2),
    patch_ck: nd(dtype=vec3, ndim=2),
    patch_n: nd(dtype=vec3, ndim=2),
    patch_nk: nd(dtype=vec3, ndim=2),
):
    """Sums each (world, pair)'s valid polygons into patch_sum (columns PATCH_*), patch_c /
    patch_ck (pressure- and stiffness-weighted centroids, unnormalised [N m, N]) and patch_n /
    patch_nk (weighted normals); then gives each patch with a polygon one row: pair_rows[w,
    pair] = its slot within the world (-1: none), world_start[w] = rows of world w (the scan
    that follows makes them offsets), body_contacts = patches touching each dynamic body.
    Resets pair_scale (1) and pair_weight (0); poly_slot = -1 (no polygon has a row)."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w in range(world_start.shape[0]):
        world_start[w] = 0
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, b in ti.ndrange(body_contacts.shape[0], body_contacts.shape[1]):
        body_contacts[w, b] = 0
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, p in ti.ndrange(pair_scale.shape[0], pair_scale.shape[1]):
        pair_scale[w, p] = 1.0
        pair_weight[w, p] = 0.0
        pair_rows[w, p] = -1
        patch_sum[w, p] = vec4(0.0)
        patch_c[w, p] = vec3(0.0)
        patch_ck[w, p] = vec3(0.0)
        patch_n[w, p] = vec3(0.0)
        patch_nk[w, p] = vec3(0.0)
    n = ti.min(counts[C_POLYGONS], poly_i.shape[0])
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for k in range(n):
        poly_slot[k] = -1
        w, pair = poly_i[k][K_WORLD], poly_i[k][K_PAIR]
        g8 = poly_g[k]
        if world_status[w] == 0 and valid_polygon(g8, pair_deep[w, pair]) == 1:
            ga, gb = g8[POLY_GA], g8[POLY_GB]
            if pair_deep[w, pair] == 1:
                ga, gb = deep_gradient(ga, g8[POLY_GRAD_A]), deep_gradient(gb, g8[POLY_GRAD_B])
            g = series_gradient(ga, gb)
            stiffness = g * g8[POLY_AREA]
            force0 = g8[POLY_AREA] * g8[POLY_P0]
            weight = ti.max(force0, 0.0)
            ti.atomic_add(patch_sum[w, pair], vec4(stiffness, -force0, weight, 1.0))  # k phi0 = -A p0
            ti.atomic_add(patch_c[w, pair], weight * poly_c[k])
            ti.atomic_add(patch_ck[w, pair], stiffness * poly_c[k])
            ti.atomic_add(patch_n[w, pair], weight * poly_n[k])
            ti.atomic_add(patch_nk[w, pair], stiffness * poly_n[k])
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, pair in ti.ndrange(patch_sum.shape[0], patch_sum.shape[1]):
        if patch_sum[w, pair][PATCH_COUNT] > 0.0:
            pair_rows[w, pair] = ti.atomic_add(world_start[w], 1)
            for side in ti.static(range(2)):
                b = pair_i[pair][P_BODY_LO + side]
                if body_kind[b] == BODY_DYNAMIC:
                    ti.atomic_add(body_contacts[w, b], 1)


@ti.kernel
def assemble_patches(
    world_start: nd(dtype=ti.i32, ndim=1),
    pair_i: nd(dtype=ivec8, ndim=1),
    pair_f: nd(dtype=vec4, ndim=2),
    pair_rows: nd(dtype=ti.i32, ndim=2),
    patch_sum: nd(dtype=vec4, ndim=2),
    patch_c: nd(dtype=vec3, ndim=2),
    patch_ck: nd(dtype=vec3, ndim=2),
    patch_n: nd(dtype=vec3, ndim=2),
    patch_nk: nd(dtype=vec3, ndim=2),
    body_p: nd(dtype=vec3, ndim=2),
    body_q: nd(dtype=vec4, ndim=2),
    body_com_B: nd(dtype=vec3, ndim=1),
    body_inv_mass: nd(dtype=float, ndim=2),
    body_inv_inertia_W: nd(dtype=mat3, ndim=2),
    dt: float,
    beta: float,
    pair_scale: nd(dtype=float, ndim=2),
    pair_weight: nd(dtype=float, ndim=2),
    c_ids: nd(dtype=ivec4, ndim=1),
    c_key: nd(dtype=ivec4, ndim=1),
    c_frame: nd(dtype=mat3, ndim=1),
    c_ra: nd(dtype=vec3, ndim=1),
    c_rb: nd(dtype=vec3, ndim=1),
    c_model: nd(dtype=vec4, ndim=1),
):
    """The one point contact of each patch (module docstring), written at its world's row.
    Writes c_ids, c_key (world, pair, -1, -1), c_frame, c_ra, c_rb, c_model (k, phi0, tau,
    sum A p0) as contact.assemble does for a polygon, pair_scale (the near-rigid scale of the
    one contact) and pair_weight (its static force, the warm-start weight)."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, pair in ti.ndrange(pair_rows.shape[0], pair_rows.shape[1]):
        slot = pair_rows[w, pair]
        if slot >= 0:
            c = world_start[w] + slot
            s = patch_sum[w, pair]
            stiffness = s[PATCH_K]
            phi0 = s[PATCH_K_PHI0] / stiffness
            centroid = patch_ck[w, pair] / stiffness
            normal_sum = patch_nk[w, pair]
            if s[PATCH_FORCE] > 0.0:
                centroid = patch_c[w, pair] / s[PATCH_FORCE]
                normal_sum = patch_n[w, pair]
            nrm = normal_sum / ti.max(normal_sum.norm(), 1e-30)
            a, b = pair_i[pair][P_BODY_LO], pair_i[pair][P_BODY_HI]
            force0 = -stiffness * phi0
            scale = write_row(c, w, a, b, pair, ivec4(w, pair, -1, -1), centroid, nrm, stiffness, phi0, force0, pair_f,
                              body_p, body_q, body_com_B, body_inv_mass, body_inv_inertia_W, dt, beta,
                              c_ids, c_key, c_frame, c_ra, c_rb, c_model)
            pair_scale[w, pair] = ti.min(1.0, scale)
            pair_weight[w, pair] = ti.max(force0, 0.0)
