"""Projected Jacobi on the regularised cone complementarity problem (DESIGN §3).

Unknowns: per contact the impulse gamma = (gamma_t1, gamma_t2, gamma_n) in the friction cone
K = {|gamma_t| <= mu gamma_n}. One iteration, for every contact i at once from the same
velocities:
    r_i = J_i v + R_i gamma_i - v_hat_i                (velocity residual, contact frame)
    r_n += mu |r_t|                                    (De Saxce: "coulomb" mode only)
    gamma_i <- Proj_K(gamma_i - omega D_i r_i)         (projection in the metric D_i^-1)
then v += M^-1 J^T (gamma_new - gamma) for every body. With the De Saxce term the fixed point
satisfies the normal compliance law with u_n + mu |u_t| instead of u_n, which removes the
separating velocity mu |v_t| that the convex relaxation (Anitescu) imposes while sliding
(Acary, Cadoux, Lemarechal, Malick 2011).

Step D_i: diag(1/s_t^2, 1/s_t^2, 1/s_n^2), the inverse diagonal of W_ii^split + R_i, where
W^split shares each body's mass among its contacts (Tonge 2012) so that Jacobi stays stable
when dozens of contacts push one body. A scalar step (3/trace) would overshoot the normal
direction of a soft contact (R_n >> W) by 3x; a diagonal step with a Euclidean projection
would change the fixed point. Scaling gamma' = S gamma, S = diag(s_t, s_t, s_n), makes the
step isotropic; the cone becomes K' (mu' = mu s_t / s_n) and the projection onto K' is the
projection onto K in the metric S^2, which keeps the fixed point (same variational
inequality) while each contact's local problem is well conditioned.

A world stops iterating when no contact velocity changes by more than `tolerance` [m/s] in
an iteration (|S^2 delta gamma_i|), or at the iteration cap.

Two schedules, same arithmetic: "world" runs every iteration of a world in one thread (one
launch per step: the CPU default); "contact" runs one launch per iteration over all contacts
of all worlds with atomic accumulation (the GPU default; converged worlds idle). In the
deterministic mode the contact schedule stores each sweep's changes and every body gathers
its own (deterministic.gather_impulses) instead of the atomics."""

import taichi as ti

from .broadphase import ivec4
from .contacts import project_cone

nd = ti.types.ndarray
vec3 = ti.math.vec3
vec4 = ti.math.vec4
mat3 = ti.math.mat3
vec8 = ti.types.vector(8, float)


@ti.func
def contact_velocity(frame: mat3, ra: vec3, rb: vec3, va: vec3, wa: vec3, vb: vec3, wb: vec3) -> vec3:
    """Velocity of b relative to a at the contact point, in the contact frame (n last)."""
    return frame @ ((vb + wb.cross(rb)) - (va + wa.cross(ra)))


@ti.func
def contact_update(gamma: vec3, vc: vec3, reg: vec8, omega: float, coulomb: ti.i32) -> vec3:
    """One projected-Jacobi update of a contact impulse (reg: see contacts.finalize_contacts)."""
    r = vc + vec3(reg[0] * gamma[0], reg[0] * gamma[1], reg[1] * gamma[2] - reg[2])
    mu = reg[5]
    if coulomb == 1:
        r[2] += mu * ti.sqrt(r[0] * r[0] + r[1] * r[1])
    s_t, s_n, inv_t, inv_n = reg[3], reg[4], reg[6], reg[7]
    scaled = vec3(s_t * gamma[0] - omega * r[0] * inv_t, s_t * gamma[1] - omega * r[1] * inv_t, s_n * gamma[2] - omega * r[2] * inv_n)
    p = project_cone(scaled, mu * s_t * inv_n)
    return vec3(p[0] * inv_t, p[1] * inv_t, p[2] * inv_n)


@ti.func
def velocity_change(delta: vec3, reg: vec8) -> float:
    """|S^2 delta|: the change of contact velocity an impulse change makes [m/s]."""
    st2, sn2 = reg[3] * reg[3], reg[4] * reg[4]
    return vec3(st2 * delta[0], st2 * delta[1], sn2 * delta[2]).norm()


@ti.func
def apply_world_impulse(w: ti.i32, wm: ti.i32, a: ti.i32, b: ti.i32, impulse: vec3, ra: vec3, rb: vec3,
                        body_vc: ti.template(), body_w: ti.template(), body_inv_mass: ti.template(),
                        body_inv_inertia_W: ti.template()):
    """v -= M_a^-1 J_a^T impulse, v += M_b^-1 J_b^T impulse (world frame) with plain stores:
    the calling thread owns world w. An immobile body (inverse mass 0) takes no update."""
    if body_inv_mass[wm, a] > 0.0:
        body_vc[w, a] = body_vc[w, a] - body_inv_mass[wm, a] * impulse
        body_w[w, a] = body_w[w, a] - body_inv_inertia_W[w, a] @ ra.cross(impulse)
    if body_inv_mass[wm, b] > 0.0:
        body_vc[w, b] = body_vc[w, b] + body_inv_mass[wm, b] * impulse
        body_w[w, b] = body_w[w, b] + body_inv_inertia_W[w, b] @ rb.cross(impulse)


@ti.func
def add_impulse(w: ti.i32, wm: ti.i32, a: ti.i32, b: ti.i32, impulse: vec3, ra: vec3, rb: vec3, dv: ti.template(),
                dw: ti.template(), body_inv_mass: ti.template(), body_inv_inertia_W: ti.template()):
    """dv -= M_a^-1 J_a^T impulse, dv += M_b^-1 J_b^T impulse (and dw for the angular part),
    atomically: many contacts of a launch share a body. An immobile body takes no update."""
    if body_inv_mass[wm, a] > 0.0:
        dv[w, a] -= body_inv_mass[wm, a] * impulse
        dw[w, a] -= body_inv_inertia_W[w, a] @ ra.cross(impulse)
    if body_inv_mass[wm, b] > 0.0:
        dv[w, b] += body_inv_mass[wm, b] * impulse
        dw[w, b] += body_inv_inertia_W[w, b] @ rb.cross(impulse)


@ti.kernel
def solve_world_serial(
    world_start: nd(dtype=ti.i32, ndim=1),
    world_status: nd(dtype=ti.i32, ndim=1),
    c_ids: nd(dtype=ivec4, ndim=1),
    c_frame: nd(dtype=mat3, ndim=1),
    c_ra: nd(dtype=vec3, ndim=1),
    c_rb: nd(dtype=vec3, ndim=1),
    c_reg: nd(dtype=vec8, ndim=1),
    c_gamma: nd(dtype=vec3, ndim=1),
    c_delta: nd(dtype=vec3, ndim=1),
    body_vc: nd(dtype=vec3, ndim=2),
    body_w: nd(dtype=vec3, ndim=2),
    body_inv_mass: nd(dtype=float, ndim=2),
    body_inv_inertia_W: nd(dtype=mat3, ndim=2),
    iterations: ti.i32,
    tolerance: float,
    omega: float,
    coulomb: ti.i32,
    gauss_seidel: ti.i32,
    world_stats: nd(dtype=vec4, ndim=1),
):
    """One thread per world: applies the warm-start impulses, then sweeps until the residual
    falls below tolerance or the cap. Gauss-Seidel applies each update at once; Jacobi keeps
    the sweep's changes in c_delta and applies them after the sweep. Reads and writes c_gamma
    and the velocities (body_vc: centre of mass, body_w: angular, world frame); writes
    world_stats[w] = (iterations, residual [m/s], contacts, 0)."""
    for w in range(world_start.shape[0] - 1):
        start, end = world_start[w], world_start[w + 1]
        it = 0
        residual = 0.0
        if world_status[w] == 0:
            wm = w % body_inv_mass.shape[0]
            for c in range(start, end):  # the warm start
                ids = c_ids[c]
                apply_world_impulse(w, wm, ids[1], ids[2], c_frame[c].transpose() @ c_gamma[c], c_ra[c], c_rb[c], body_vc, body_w,
                                    body_inv_mass, body_inv_inertia_W)
            while it < iterations:
                residual = 0.0
                for c in range(start, end):
                    ids = c_ids[c]
                    a, b = ids[1], ids[2]
                    frame = c_frame[c]
                    ra, rb = c_ra[c], c_rb[c]
                    vc = contact_velocity(frame, ra, rb, body_vc[w, a], body_w[w, a], body_vc[w, b], body_w[w, b])
                    reg = c_reg[c]
                    g_old = c_gamma[c]
                    g_new = contact_update(g_old, vc, reg, omega, coulomb)
                    c_gamma[c] = g_new
                    residual = ti.max(residual, velocity_change(g_new - g_old, reg))
                    if gauss_seidel == 1:
                        apply_world_impulse(w, wm, a, b, frame.transpose() @ (g_new - g_old), ra, rb, body_vc, body_w, body_inv_mass,
                                            body_inv_inertia_W)
                    else:
                        c_delta[c] = g_new - g_old
                if gauss_seidel == 0:
                    for c in range(start, end):
                        ids = c_ids[c]
                        apply_world_impulse(w, wm, ids[1], ids[2], c_frame[c].transpose() @ c_delta[c], c_ra[c], c_rb[c], body_vc,
                                            body_w, body_inv_mass, body_inv_inertia_W)
                it += 1
                if residual <= tolerance:
                    break
        world_stats[w] = vec4(it, residual, end - start, 0.0)


@ti.kernel
def apply_impulses(
    world_start: nd(dtype=ti.i32, ndim=1),
    c_ids: nd(dtype=ivec4, ndim=1),
    c_frame: nd(dtype=mat3, ndim=1),
    c_ra: nd(dtype=vec3, ndim=1),
    c_rb: nd(dtype=vec3, ndim=1),
    c_gamma: nd(dtype=vec3, ndim=1),
    body_vc: nd(dtype=vec3, ndim=2),
    body_w: nd(dtype=vec3, ndim=2),
    body_inv_mass: nd(dtype=float, ndim=2),
    body_inv_inertia_W: nd(dtype=mat3, ndim=2),
):
    """v += M^-1 J^T gamma for every contact (atomic accumulation): the warm start of the
    "contact" schedule."""
    W = world_start.shape[0] - 1
    for c in range(world_start[W]):
        ids = c_ids[c]
        w, a, b = ids[0], ids[1], ids[2]
        wm = w % body_inv_mass.shape[0]
        add_impulse(w, wm, a, b, c_frame[c].transpose() @ c_gamma[c], c_ra[c], c_rb[c], body_vc, body_w, body_inv_mass,
                    body_inv_inertia_W)


@ti.kernel
def jacobi_contacts(
    world_start: nd(dtype=ti.i32, ndim=1),
    world_status: nd(dtype=ti.i32, ndim=1),
    world_stats: nd(dtype=vec4, ndim=1),
    c_ids: nd(dtype=ivec4, ndim=1),
    c_frame: nd(dtype=mat3, ndim=1),
    c_ra: nd(dtype=vec3, ndim=1),
    c_rb: nd(dtype=vec3, ndim=1),
    c_reg: nd(dtype=vec8, ndim=1),
    c_gamma: nd(dtype=vec3, ndim=1),
    body_vc: nd(dtype=vec3, ndim=2),
    body_w: nd(dtype=vec3, ndim=2),
    body_dv: nd(dtype=vec3, ndim=2),
    body_dw: nd(dtype=vec3, ndim=2),
    body_inv_mass: nd(dtype=float, ndim=2),
    body_inv_inertia_W: nd(dtype=mat3, ndim=2),
    world_residual: nd(dtype=float, ndim=1),
    omega: float,
    coulomb: ti.i32,
    c_delta: nd(dtype=vec3, ndim=1),
    deterministic: ti.i32,
):
    """One Jacobi sweep over all contacts of the worlds still iterating (world_stats[w][3] is
    1 once converged): updates c_gamma, accumulates M^-1 J^T delta into body_dv/body_dw (with
    deterministic == 1 it stores delta in c_delta instead, for deterministic.gather_impulses)
    and the per-world residual (atomic max)."""
    W = world_start.shape[0] - 1
    for c in range(world_start[W]):
        ids = c_ids[c]
        w, a, b = ids[0], ids[1], ids[2]
        if world_status[w] == 0 and world_stats[w][3] == 0.0:
            wm = w % body_inv_mass.shape[0]
            vc = contact_velocity(c_frame[c], c_ra[c], c_rb[c], body_vc[w, a], body_w[w, a], body_vc[w, b], body_w[w, b])
            reg = c_reg[c]
            g_old = c_gamma[c]
            g_new = contact_update(g_old, vc, reg, omega, coulomb)
            c_gamma[c] = g_new
            if deterministic == 1:
                c_delta[c] = g_new - g_old
            else:
                add_impulse(w, wm, a, b, c_frame[c].transpose() @ (g_new - g_old), c_ra[c], c_rb[c], body_dv, body_dw, body_inv_mass,
                            body_inv_inertia_W)
            ti.atomic_max(world_residual[w], velocity_change(g_new - g_old, reg))


@ti.kernel
def jacobi_bodies(
    world_start: nd(dtype=ti.i32, ndim=1),
    world_status: nd(dtype=ti.i32, ndim=1),
    body_vc: nd(dtype=vec3, ndim=2),
    body_w: nd(dtype=vec3, ndim=2),
    body_dv: nd(dtype=vec3, ndim=2),
    body_dw: nd(dtype=vec3, ndim=2),
    world_residual: nd(dtype=float, ndim=1),
    world_stats: nd(dtype=vec4, ndim=1),
    tolerance: float,
):
    """Applies the sweep's velocity changes; counts the iteration of worlds still iterating
    and marks those whose residual fell below tolerance."""
    for w, b in body_vc:
        body_vc[w, b] += body_dv[w, b]
        body_w[w, b] += body_dw[w, b]
        body_dv[w, b] = vec3(0.0)
        body_dw[w, b] = vec3(0.0)
    for w in world_residual:
        s = world_stats[w]
        if world_status[w] == 0 and s[3] == 0.0:
            s[0] += 1.0
            s[1] = world_residual[w]
            if world_residual[w] <= tolerance:
                s[3] = 1.0
        world_stats[w] = s
        world_residual[w] = 0.0


@ti.kernel
def start_contact_schedule(world_start: nd(dtype=ti.i32, ndim=1), world_stats: nd(dtype=vec4, ndim=1), world_residual: nd(dtype=float, ndim=1)):
    """Resets the per-world statistics before the sweeps of the "contact" schedule."""
    for w in world_residual:
        world_stats[w] = vec4(0.0, 0.0, world_start[w + 1] - world_start[w], 0.0)
        world_residual[w] = 0.0


@ti.kernel
def accumulate_pair_impulses(
    world_start: nd(dtype=ti.i32, ndim=1),
    c_ids: nd(dtype=ivec4, ndim=1),
    c_frame: nd(dtype=mat3, ndim=1),
    c_gamma: nd(dtype=vec3, ndim=1),
    pair_impulse: nd(dtype=vec3, ndim=2),
):
    """pair_impulse[w, p] = total impulse of the pair's contacts on its higher body, world frame
    [N s] (the next step's warm start)."""
    for w, p in pair_impulse:
        pair_impulse[w, p] = vec3(0.0)
    W = world_start.shape[0] - 1
    for c in range(world_start[W]):
        ids = c_ids[c]
        pair_impulse[ids[0], ids[3]] += c_frame[c].transpose() @ c_gamma[c]
