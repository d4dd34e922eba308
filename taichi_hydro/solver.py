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

A world stops iterating when no point of any of its bodies changes velocity by more than
`tolerance` [m/s] over a sweep (|dv| + reach |dw| per body, body_change), or at the cap. The
test is on velocities, not impulses: the many polygons of one patch are nearly parallel rows,
and the impulse can keep moving between them, sweep after sweep, with almost no effect on the
velocities (which set the motion). Measured on the 27-sphere pile (150 steps, one world):
an impulse-change test at the same tolerance took 81 sweeps per step and this one 43, and
both trajectories are 1e-4 m from a solve converged to 1e-9 m/s after 0.3 s. On a box on an
incline (one cold step) the velocity error is of the order of the tolerance (1.0e-6 m/s at
1e-6 m/s, tests/test_dynamics.py::test_solver_methods_agree).

Gauss-Seidel applies the same test body by body to skip work ("sleep"): a body whose
velocity moved by no more than `tolerance` over two sweeps in a row falls asleep, and a sweep
skips every contact whose two bodies are asleep (or asleep and immobile). A sleeping body is
measured against its velocity when it fell asleep, so nudges from its awake neighbours'
contacts add up, and it wakes once they pass `tolerance`; the world's residual includes that
drift, so the world stops by the same test as without sleep. In a pile most spheres settle
long before the last sweep of a step (the slow friction modes of a few set the sweep count),
and their contacts are no longer revisited. Falling asleep after one quiet sweep instead of
two cost a stack of boxes sweeps (the lower box, asleep under a box still settling, kept
waking: 8.6 instead of 7.9 sweeps per step). Measured on a 2-core EPYC: one solve at steps
40, 75, 110 and 140 of pile_27 (16 worlds) has the same error with and without sleep against a
solve converged to 1e-10 m/s (1.5e-5 m/s both at step 140); over whole runs
(bench/sleep_ab.py) sleep makes 16 % fewer contact updates on pile_27 and 21 % on pile_64, as
many on the coin and 6 % more on box_stack, for 1.07x the world-steps/s on pile_27 x 64 and
1.16x on pile_64 x 16 (README, "Sleep"; this machine varies by several per cent from run to
run). `[solver] sleep = false` updates every contact in every sweep.

"accelerated": the Jacobi step above is a projected gradient step (step D) on the convex
problem min 1/2 gamma^T (W + R) gamma + gamma^T (J v* - v_hat) over the cones; Nesterov's
momentum (the APGD of Chrono: Mazhar, Heyn, Negrut, Tasora 2015) extrapolates from the last
two iterates x_k, x_k+1:
    y = x_k+1 + beta_k (x_k+1 - x_k),   t_k+1 = (1 + sqrt(1 + 4 t_k^2)) / 2,   beta_k = (t_k - 1) / t_k+1
and the next step starts from y (the velocities always hold v* + M^-1 J^T y). The momentum is
restarted (t = 1, beta = 0) whenever the step turns against it, sum_i (y_i - x_i)^T S^2
(x_i,k+1 - x_i,k) > 0 (gradient restart, O'Donoghue and Candes 2015): a per-world sum. The
residual is the velocity change from v(x_k) to v(x_k+1), as for plain Jacobi. A sweep costs
what a Jacobi sweep costs: the velocities are linear in the impulses, so each body extrapolates its own,
v(y) = v(x_k+1) + beta (v(x_k+1) - v(x_k)), and each contact forms its y from x_k and x_k-1
when it next reads them. Measured (one cold step, 100 sweeps, against the converged
velocities): 27-sphere pile after landing 2.2e-4 m/s against Jacobi's 1.2e-3 m/s; box on an
incline 1.1e-7 against 1.6e-4 m/s (tests/test_dynamics.py::test_solver_methods_agree).

Two schedules, same arithmetic: "world" runs every iteration of a world in one thread (one
launch per step: the CPU default); "contact" runs one launch per iteration over all contacts
of all worlds with atomic accumulation (the GPU default; converged worlds idle). In the
deterministic mode the contact schedule stores each sweep's changes and every body gathers
its own (deterministic.gather_impulses) instead of the atomics, and each world sums its
restart test in row order (sum_world_restart)."""

import taichi as ti

from .broadphase import ivec4
from .contacts import project_cone

nd = ti.types.ndarray
vec3 = ti.math.vec3
vec2 = ti.math.vec2
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
def restart_product(y: vec3, x_new: vec3, x_old: vec3, reg: vec8) -> float:
    """(y - x_new)^T S^2 (x_new - x_old): one contact's term of the gradient-restart test."""
    st2, sn2 = reg[3] * reg[3], reg[4] * reg[4]
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
def sweep_beta(done: float, residual: float, tolerance: float, iterations: ti.i32, t: float, restart_sum: float, accelerated: ti.i32) -> vec2:
    """(beta, t_next) after sweep number done + 1 of a world: 0 (and no momentum) for plain
    Jacobi, for a world that converged with this sweep, and at the iteration cap, so that the
    velocities end consistent with the stored impulses."""
    out = vec2(0.0, t)
    if accelerated == 1 and residual > tolerance and done + 1.0 < iterations:
        out = momentum(t, restart_sum)
    return out


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


@ti.func
def body_change(dv: vec3, dw: vec3, reach: float) -> float:
    """|dv| + reach |dw|: a bound on the velocity change of every point of a body [m/s] (dv at
    the centre of mass, dw angular, reach: the body's farthest point from its centre of mass)."""
    return dv.norm() + reach * dw.norm()


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
    body_vx: nd(dtype=vec3, ndim=2),
    body_wx: nd(dtype=vec3, ndim=2),
    body_reach: nd(dtype=float, ndim=1),
    body_inv_mass: nd(dtype=float, ndim=2),
    body_inv_inertia_W: nd(dtype=mat3, ndim=2),
    iterations: ti.i32,
    tolerance: float,
    omega: float,
    coulomb: ti.i32,
    gauss_seidel: ti.i32,
    accelerated: ti.i32,
    c_prev: nd(dtype=vec3, ndim=1),
    world_stats: nd(dtype=vec4, ndim=1),
    body_awake: nd(dtype=ti.i32, ndim=2),
    sleep: ti.i32,
):
    """One thread per world: applies the warm-start impulses, then sweeps until no point of any
    body changes velocity by more than tolerance over a sweep (body_change), or the cap.
    Gauss-Seidel applies each update at once and, with sleep == 1, skips the contacts of
    sleeping bodies (body_awake[w, b] = 0, see the module docstring; body_vx/body_wx then hold
    a sleeping body's velocity when it fell asleep). With sleep == 0 every contact is updated
    in every sweep. Jacobi keeps x_k+1 in c_delta and applies it after the sweep, then,
    accelerated, extrapolates impulses (c_gamma = y_k+1, c_prev = x_k+1) and velocities alike
    (body_vx/body_wx keep v(x_k), the velocities of the impulses without extrapolation). Reads
    and writes c_gamma and the velocities (body_vc: centre of mass, body_w: angular, world
    frame); writes world_stats[w] = (iterations, residual [m/s],
    contacts, contact updates; float, exact up to 2^24 updates per world and step)."""
    B = body_vc.shape[1]
    for w in range(world_start.shape[0] - 1):
        start, end = world_start[w], world_start[w + 1]
        it = 0
        residual = 0.0
        updates = 0
        if world_status[w] == 0:
            wm = w % body_inv_mass.shape[0]
            for c in range(start, end):  # the warm start
                ids = c_ids[c]
                apply_world_impulse(w, wm, ids[1], ids[2], c_frame[c].transpose() @ c_gamma[c], c_ra[c], c_rb[c], body_vc, body_w,
                                    body_inv_mass, body_inv_inertia_W)
            for b in range(B):
                body_vx[w, b] = body_vc[w, b]
                body_wx[w, b] = body_w[w, b]
                body_awake[w, b] = 2
            t_k = 1.0
            if accelerated == 1:
                for c in range(start, end):
                    c_prev[c] = c_gamma[c]
            while it < iterations:
                restart_sum = 0.0
                for c in range(start, end):
                    ids = c_ids[c]
                    a, b = ids[1], ids[2]
                    if sleep == 1 and body_awake[w, a] == 0 and body_awake[w, b] == 0:
                        continue
                    updates += 1
                    frame = c_frame[c]
                    ra, rb = c_ra[c], c_rb[c]
                    vc = contact_velocity(frame, ra, rb, body_vc[w, a], body_w[w, a], body_vc[w, b], body_w[w, b])
                    reg = c_reg[c]
                    y = c_gamma[c]
                    x_new = contact_update(y, vc, reg, omega, coulomb)
                    if gauss_seidel == 1:
                        c_gamma[c] = x_new
                        apply_world_impulse(w, wm, a, b, frame.transpose() @ (x_new - y), ra, rb, body_vc, body_w, body_inv_mass,
                                            body_inv_inertia_W)
                    else:
                        if accelerated == 1:
                            restart_sum += restart_product(y, x_new, c_prev[c], reg)
                        c_delta[c] = x_new
                if gauss_seidel == 0:  # velocities of x_k+1
                    for c in range(start, end):
                        ids = c_ids[c]
                        x_new = c_delta[c]
                        apply_world_impulse(w, wm, ids[1], ids[2], c_frame[c].transpose() @ (x_new - c_gamma[c]), c_ra[c], c_rb[c],
                                            body_vc, body_w, body_inv_mass, body_inv_inertia_W)
                        c_gamma[c] = x_new
                residual = 0.0
                for b in range(B):
                    change = body_change(body_vc[w, b] - body_vx[w, b], body_w[w, b] - body_wx[w, b], body_reach[b])
                    residual = ti.max(residual, change)
                    if gauss_seidel == 1:  # body_awake: 2 moving, 1 quiet for one sweep, 0 asleep
                        awake = 2 if (change > tolerance or sleep == 0) else ti.max(body_awake[w, b] - 1, 0)
                        if awake > 0 or body_awake[w, b] > 0:  # the next sweep's start, or the moment it falls asleep
                            body_vx[w, b] = body_vc[w, b]
                            body_wx[w, b] = body_w[w, b]
                        body_awake[w, b] = awake
                beta_t = sweep_beta(it, residual, tolerance, iterations, t_k, restart_sum, accelerated)
                t_k = beta_t[1]
                beta = beta_t[0]
                if accelerated == 1:  # y_k+1 = x_k+1 + beta (x_k+1 - x_k), impulses and velocities
                    for c in range(start, end):
                        x_new = c_gamma[c]
                        c_gamma[c] = x_new + beta * (x_new - c_prev[c])
                        c_prev[c] = x_new
                if gauss_seidel == 0:
                    for b in range(B):
                        v, om = body_vc[w, b], body_w[w, b]
                        body_vc[w, b] = v + beta * (v - body_vx[w, b])
                        body_w[w, b] = om + beta * (om - body_wx[w, b])
                        body_vx[w, b] = v
                        body_wx[w, b] = om
                it += 1
                if residual <= tolerance:
                    break
        world_stats[w] = vec4(it, residual, end - start, updates)


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
    c_prev: nd(dtype=vec3, ndim=1),
    body_vc: nd(dtype=vec3, ndim=2),
    body_w: nd(dtype=vec3, ndim=2),
    body_dv: nd(dtype=vec3, ndim=2),
    body_dw: nd(dtype=vec3, ndim=2),
    body_inv_mass: nd(dtype=float, ndim=2),
    body_inv_inertia_W: nd(dtype=mat3, ndim=2),
    world_beta: nd(dtype=float, ndim=1),
    world_restart: nd(dtype=float, ndim=1),
    c_restart: nd(dtype=float, ndim=1),
    omega: float,
    coulomb: ti.i32,
    c_delta: nd(dtype=vec3, ndim=1),
    deterministic: ti.i32,
    accelerated: ti.i32,
):
    """One sweep over all contacts of the worlds still iterating (world_stats[w][3] is 1 once
    converged). c_gamma holds x_k; the velocities hold v(y), y = x_k + beta (x_k - x_k-1) with
    the world's beta of the previous sweep (world_beta; always 0 for plain Jacobi, and c_prev
    = x_k-1 is only read when accelerated). Writes x_k+1 to c_gamma, accumulates
    M^-1 J^T (x_k+1 - y) into body_dv/body_dw (with deterministic == 1 it stores the change in
    c_delta instead, for deterministic.gather_impulses) and, accelerated, the restart term (world_restart, atomic sum; deterministic: c_restart
    for sum_world_restart)."""
    W = world_start.shape[0] - 1
    for c in range(world_start[W]):
        ids = c_ids[c]
        w, a, b = ids[0], ids[1], ids[2]
        if world_status[w] == 0 and world_stats[w][3] == 0.0:
            wm = w % body_inv_mass.shape[0]
            vc = contact_velocity(c_frame[c], c_ra[c], c_rb[c], body_vc[w, a], body_w[w, a], body_vc[w, b], body_w[w, b])
            reg = c_reg[c]
            x = c_gamma[c]
            y = x
            if accelerated == 1:
                x_prev = c_prev[c]
                y = x + world_beta[w] * (x - x_prev)
                c_prev[c] = x
            x_new = contact_update(y, vc, reg, omega, coulomb)
            c_gamma[c] = x_new
            if accelerated == 1:
                term = restart_product(y, x_new, x, reg)
                if deterministic == 1:
                    c_restart[c] = term
                else:
                    ti.atomic_add(world_restart[w], term)
            if deterministic == 1:
                c_delta[c] = x_new - y
            else:
                add_impulse(w, wm, a, b, c_frame[c].transpose() @ (x_new - y), c_ra[c], c_rb[c], body_dv, body_dw, body_inv_mass,
                            body_inv_inertia_W)


@ti.kernel
def sum_world_restart(world_start: nd(dtype=ti.i32, ndim=1), world_status: nd(dtype=ti.i32, ndim=1), world_stats: nd(dtype=vec4, ndim=1),
                      c_restart: nd(dtype=float, ndim=1), world_restart: nd(dtype=float, ndim=1)):
    """world_restart[w] = sum of c_restart over the world's rows, in row order (deterministic
    mode of the accelerated contact schedule)."""
    for w in world_restart:
        if world_status[w] == 0 and world_stats[w][3] == 0.0:
            total = 0.0
            for c in range(world_start[w], world_start[w + 1]):
                total += c_restart[c]
            world_restart[w] = total


@ti.kernel
def jacobi_bodies(
    world_start: nd(dtype=ti.i32, ndim=1),
    world_status: nd(dtype=ti.i32, ndim=1),
    body_vc: nd(dtype=vec3, ndim=2),
    body_w: nd(dtype=vec3, ndim=2),
    body_dv: nd(dtype=vec3, ndim=2),
    body_dw: nd(dtype=vec3, ndim=2),
    body_vx: nd(dtype=vec3, ndim=2),
    body_wx: nd(dtype=vec3, ndim=2),
    body_reach: nd(dtype=float, ndim=1),
    world_residual: nd(dtype=float, ndim=1),
    world_stats: nd(dtype=vec4, ndim=1),
    world_momentum: nd(dtype=float, ndim=1),
    world_beta: nd(dtype=float, ndim=1),
    world_restart: nd(dtype=float, ndim=1),
    tolerance: float,
    iterations: ti.i32,
    accelerated: ti.i32,
):
    """Ends a sweep. Per world still iterating: the residual is the largest velocity change
    of a body point between v(x_k) (body_vx/body_wx) and v(x_k+1) = v(y) + dv (body_change);
    counts the sweep, marks the world converged when the residual is below tolerance and
    chooses the momentum (world_residual[w] = residual, or -1 for a world that did not sweep).
    Then per body of those worlds: v(y_k+1) = v(x_k+1) + beta (v(x_k+1) - v(x_k)) (velocities
    are linear in the impulses; beta = 0 for plain Jacobi) and body_vx/body_wx = v(x_k+1)."""
    B = body_vc.shape[1]
    for w in world_residual:
        s = world_stats[w]
        residual = -1.0
        if world_status[w] == 0 and s[3] == 0.0:
            residual = 0.0
            for b in range(B):
                change = body_change(body_vc[w, b] + body_dv[w, b] - body_vx[w, b], body_w[w, b] + body_dw[w, b] - body_wx[w, b],
                                     body_reach[b])
                residual = ti.max(residual, change)
            bt = sweep_beta(s[0], residual, tolerance, iterations, world_momentum[w], world_restart[w], accelerated)
            world_beta[w] = bt[0]
            world_momentum[w] = bt[1]
            s[0] += 1.0
            s[1] = residual
            if residual <= tolerance:
                s[3] = 1.0
            world_stats[w] = s
        world_residual[w] = residual
        world_restart[w] = 0.0
    for w, b in body_vc:
        if world_residual[w] >= 0.0:
            v = body_vc[w, b] + body_dv[w, b]
            om = body_w[w, b] + body_dw[w, b]
            beta = world_beta[w]
            body_vc[w, b] = v + beta * (v - body_vx[w, b])
            body_w[w, b] = om + beta * (om - body_wx[w, b])
            body_vx[w, b] = v
            body_wx[w, b] = om
        body_dv[w, b] = vec3(0.0)
        body_dw[w, b] = vec3(0.0)


@ti.kernel
def start_contact_schedule(world_start: nd(dtype=ti.i32, ndim=1), world_stats: nd(dtype=vec4, ndim=1), world_residual: nd(dtype=float, ndim=1),
                           world_momentum: nd(dtype=float, ndim=1), world_beta: nd(dtype=float, ndim=1), world_restart: nd(dtype=float, ndim=1),
                           body_vc: nd(dtype=vec3, ndim=2), body_w: nd(dtype=vec3, ndim=2), body_vx: nd(dtype=vec3, ndim=2),
                           body_wx: nd(dtype=vec3, ndim=2)):
    """Resets the per-world statistics and momentum (t = 1, beta = 0) before the sweeps of the
    "contact" schedule; v(x_0) = the velocities after the warm start."""
    for w in world_residual:
        world_stats[w] = vec4(0.0, 0.0, world_start[w + 1] - world_start[w], 0.0)
        world_residual[w] = 0.0
        world_momentum[w] = 1.0
        world_beta[w] = 0.0
        world_restart[w] = 0.0
    for w, b in body_vc:
        body_vx[w, b] = body_vc[w, b]
        body_wx[w, b] = body_w[w, b]


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
