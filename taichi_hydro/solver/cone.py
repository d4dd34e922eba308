"""Per-contact arithmetic of the projected iterations (ti.func only), shared by both schedules.

One update of a contact impulse gamma = (gamma_t1, gamma_t2, gamma_n) in the friction cone
K = {|gamma_t| <= mu gamma_n}, from the velocities v the contact sees:
    r = J v + R gamma - v_hat                          (velocity residual, contact frame)
    r_n += mu |r_t|                                    (De Saxce, "coulomb" mode only)
    gamma <- Proj_K(gamma - omega D r)                 (projection in the metric D^-1)
With the De Saxce term the fixed point satisfies the normal compliance law with
u_n + mu |u_t| instead of u_n, which removes the separating velocity mu |v_t| that the convex
relaxation (Anitescu) imposes while sliding (Acary, Cadoux, Lemarechal, Malick 2011).

Step D = diag(1/s_t^2, 1/s_t^2, 1/s_n^2), the inverse diagonal of W_ii + R_i (mass-split for
the Jacobi methods, Tonge 2012: contact.assemble). A scalar step (3/trace) would overshoot the
normal direction of a soft contact (R_n >> W) by 3x, and a diagonal step with a Euclidean
projection would change the fixed point. Scaling gamma' = S gamma, S = diag(s_t, s_t, s_n),
makes the step isotropic; the cone becomes K' (mu' = mu s_t / s_n), and the projection onto K'
is the projection onto K in the metric S^2, which keeps the fixed point (same variational
inequality) while each contact's local problem is well conditioned.

Accelerated Jacobi: the Jacobi step is a projected gradient step on the convex problem
min 1/2 gamma^T (W + R) gamma + gamma^T (J v* - v_hat) over the cones, and Nesterov's momentum
(APGD, Mazhar, Heyn, Negrut, Tasora 2015) extrapolates from the last two iterates,
    y = x_k+1 + beta_k (x_k+1 - x_k),  t_k+1 = (1 + sqrt(1 + 4 t_k^2)) / 2,  beta_k = (t_k - 1) / t_k+1,
restarted (t = 1, beta = 0) whenever the step turns against it,
sum_i (y_i - x_i)^T S^2 (x_i,k+1 - x_i,k) > 0 (gradient restart, O'Donoghue and Candes 2015).
The velocities are linear in the impulses, so each body extrapolates its own velocities alike.

A world stops iterating when no point of any of its bodies changes velocity by more than the
tolerance [m/s] over a sweep (body_change), or at the cap. The test is on velocities, not
impulses: the many polygons of one patch are nearly parallel rows, and the impulse can keep
moving between them with almost no effect on the motion."""

import taichi as ti

from ..types import R_INV_SN, R_INV_ST, R_MU, R_RN, R_RT, R_SN, R_ST, R_VHAT, contact_reg, mat3, vec2, vec3

__all__ = ["project_cone", "contact_velocity", "contact_update", "restart_product", "momentum", "sweep_beta",
           "apply_world_impulse", "add_impulse", "body_change"]


@ti.func
def project_cone(gamma: vec3, mu: float) -> vec3:
    """Euclidean projection of (gamma_t1, gamma_t2, gamma_n) onto {|gamma_t| <= mu gamma_n}."""
    gt = vec2(gamma[0], gamma[1])
    t = gt.norm()
    gn = gamma[2]
    out = gamma
    if t <= mu * gn:
        out = gamma
    elif mu * t <= -gn:
        out = vec3(0.0)
    else:
        n_new = (mu * t + gn) / (mu * mu + 1.0)
        scale = mu * n_new / t
        out = vec3(gt[0] * scale, gt[1] * scale, n_new)
    return out


@ti.func
def contact_velocity(frame: mat3, ra: vec3, rb: vec3, va: vec3, wa: vec3, vb: vec3, wb: vec3) -> vec3:
    """Velocity of b relative to a at the contact point, in the contact frame (n last)."""
    return frame @ ((vb + wb.cross(rb)) - (va + wa.cross(ra)))


@ti.func
def contact_update(gamma: vec3, vc: vec3, reg: contact_reg, omega: float, coulomb: ti.template()) -> vec3:
    """One projected-Jacobi update of a contact impulse (reg: columns types.R_*)."""
    r = vc + vec3(reg[R_RT] * gamma[0], reg[R_RT] * gamma[1], reg[R_RN] * gamma[2] - reg[R_VHAT])
    mu = reg[R_MU]
    if ti.static(coulomb):
        r[2] += mu * ti.sqrt(r[0] * r[0] + r[1] * r[1])
    s_t, s_n, inv_t, inv_n = reg[R_ST], reg[R_SN], reg[R_INV_ST], reg[R_INV_SN]
    scaled = vec3(s_t * gamma[0] - omega * r[0] * inv_t, s_t * gamma[1] - omega * r[1] * inv_t, s_n * gamma[2] - omega * r[2] * inv_n)
    p = project_cone(scaled, mu * s_t * inv_n)
    return vec3(p[0] * inv_t, p[1] * inv_t, p[2] * inv_n)


@ti.func
def restart_product(y: vec3, x_new: vec3, x_old: vec3, reg: contact_reg) -> float:
    """(y - x_new)^T S^2 (x_new - x_old): one contact's term of the gradient-restart test."""
    st2, sn2 = reg[R_ST] * reg[R_ST], reg[R_SN] * reg[R_SN]
    g = y - x_new
    d = x_new - x_old
    return st2 * (g[0] * d[0] + g[1] * d[1]) + sn2 * g[2] * d[2]


@ti.func
def momentum(t: float, restart_sum: float) -> vec2:
    """(beta, t_next) of Nesterov's sequence; a positive restart sum restarts it (0, 1)."""
    out = vec2(0.0, 1.0)
    if restart_sum <= 0.0:
        t_next = 0.5 * (1.0 + ti.sqrt(1.0 + 4.0 * t * t))
        out = vec2((t - 1.0) / t_next, t_next)
    return out


@ti.func
def sweep_beta(done: float, residual: float, tolerance: float, iterations: ti.i32, t: float, restart_sum: float,
               accelerated: ti.template()) -> vec2:
    """(beta, t_next) after sweep number done + 1 of a world: 0 (and no momentum) for plain
    Jacobi, for a world that converged with this sweep, and at the iteration cap, so that the
    velocities end consistent with the stored impulses."""
    out = vec2(0.0, t)
    if ti.static(accelerated):
        if residual > tolerance and done + 1.0 < iterations:
            out = momentum(t, restart_sum)
    return out


@ti.func
def apply_world_impulse(w: ti.i32, wm: ti.i32, a: ti.i32, b: ti.i32, impulse: vec3, ra: vec3, rb: vec3,
                        body_vc: ti.template(), body_wc: ti.template(), body_inv_mass: ti.template(),
                        body_inv_inertia_W: ti.template()):
    """v -= M_a^-1 J_a^T impulse, v += M_b^-1 J_b^T impulse (world frame) with plain stores:
    the calling thread owns world w. An immobile body (inverse mass 0) takes no update."""
    if body_inv_mass[wm, a] > 0.0:
        body_vc[w, a] = body_vc[w, a] - body_inv_mass[wm, a] * impulse
        body_wc[w, a] = body_wc[w, a] - body_inv_inertia_W[w, a] @ ra.cross(impulse)
    if body_inv_mass[wm, b] > 0.0:
        body_vc[w, b] = body_vc[w, b] + body_inv_mass[wm, b] * impulse
        body_wc[w, b] = body_wc[w, b] + body_inv_inertia_W[w, b] @ rb.cross(impulse)


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


@ti.func
def body_change(dv: vec3, dw: vec3, reach: float) -> float:
    """|dv| + reach |dw|: a bound on the velocity change of every point of a body [m/s] (dv at
    the centre of mass, dw angular, reach: the body's farthest point from its centre of mass)."""
    return dv.norm() + reach * dw.norm()
