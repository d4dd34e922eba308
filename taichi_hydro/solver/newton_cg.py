"""Newton's step by preconditioned conjugate gradients ([solver] method = "newton", linear =
"cg", or "auto" when the dense Hessians do not fit: solver.data.DENSE_BYTES), world schedule
(one thread per world). The Newton iteration is solver.newton's (the same cost, warm start,
line search, bound update and stopping test: newton.world_funcs); only the linear solve of
each iteration differs.

H dv = -grad is solved without forming H = M + sum_i J_i^T G_i J_i (+ the bilateral rows'
G j j^T): the assembly pass stores each contact row's curvature G_i (contact frame, 3x3:
newton.response) in c_G, and a product H x is M x plus, row by row, J_i^T (G_i (J_i x)) (the
bilateral rows' G is recomputed from the iterate, which CG does not move). Memory is linear
in bodies and rows: 6B x 6 numbers of preconditioner and four 6B vectors per world, no
(6B, 6B) array.

Preconditioner: per body, block Jacobi, P_b = M_b + the body's own diagonal blocks of the
rows (J_b^T G J_b: the blocks the Cholesky path writes on H's diagonal), Jacobi-scaled and
factored by a dense 6x6 Cholesky (immobile bodies: identity, their residual is zero).

Stopping rule (derivation). Descent: CG from x0 = 0 minimises the quadratic model over a
growing Krylov space; each iterate x_k satisfies the Galerkin condition p^T (H x_k + grad) =
0 for every p of that space, which contains x_k, so grad . x_k = -x_k^T H x_k < 0: every
truncated step is a descent direction, and the exact line search (which never increases the
cost) keeps the Newton iteration convergent whatever the truncation (inexact Newton: Dembo,
Eisenstat and Steihaug 1982). Error: H = M + (positive semidefinite rows) >= M, so H^-1 <=
M^-1, and the step's error e = x_k - H^-1 (-grad) = -H^-1 r_k obeys
||e||_M^2 <= e^T H e = r_k^T H^-1 r_k <= r_k^T M^-1 r_k: the residual in the inverse-mass
norm bounds the error in the kinetic-energy norm, whatever the conditioning. CG stops when

    r_k^T M^-1 r_k <= max(eta^2 x_k^T M x_k, (CG_ATOL tol / 2)^2 m_min).

The first term (eta = CG_RTOL = 1e-2) is the inexact-Newton forcing term, the step's error
at most 1 % of the step in the M-norm: near the solution each Newton iteration still
shrinks the error about a hundredfold. The second is tied to the Newton tolerance tol: a
body of mass m and world-frame inertia I whose error is ||e||_M <= eps moves its points by
at most |e_v| + reach |e_w| <= eps (1 / sqrt(m) + reach sqrt(trace I^-1)) <= 2 eps /
sqrt(m_min), m_min the least of min(m, 1 / (trace(I^-1) reach^2)) over mobile bodies
(point_mass), so a step within the floor is off by at most CG_ATOL tol = a tenth of the
tolerance at any body point. The Newton iteration's own stopping test is on the iterate's
residual (solver.newton), not on the step, so CG's truncation costs Newton iterations, never
accuracy: the solution returned balances momentum to the tolerance whatever the steps'
errors. The cap is 6n iterations for an island of n bodies (CG's exact termination, in exact
arithmetic, for a (6n, 6n) system); the iterations are counted in world_linear_iterations (Simulator.solver_stats),
never silent.

Every sum runs in a fixed order (one thread per world, each island's rows and bodies in
index order): the deterministic mode's bit-for-bit results hold."""

import functools
import types

import taichi as ti

from .. import backend

from ..types import ID_A, ID_B, contact_reg, ivec4, mat3, nd, vec3, vec4, vec6
from .newton import NEAR_TOLERANCES, newton_funcs, world_funcs
from .world_schedule import first_world, next_world, open_queue, world_slots

__all__ = ["cg_funcs", "newton_cg_solver", "CG_RTOL", "CG_ATOL"]

CG_RTOL = 1e-2
"""eta: CG stops when the step's error, in the kinetic-energy norm, is at most this fraction of
the step (r^T M^-1 r <= eta^2 x^T M x; the module's stopping rule)."""
CG_ATOL = 0.1
"""... or when it can move no body point by more than this fraction of the tolerance."""


@functools.lru_cache(maxsize=None)
def cg_funcs(real):
    """The ti.funcs of the matrix-free step (arithmetic in `real`): per body and per row, each
    writing only what it owns. The preconditioner block of body b is newton_block[w, 6b + r,
    c] (r, c < 6); body b's entries of a world vector are [w, 6b:6b + 6] (newton_pos is the
    identity here: no elimination order)."""
    f = newton_funcs(real)
    rvec3, rvec6, rmat3 = f.rvec3, f.rvec6, f.rmat3
    tiny = 1e-300 if real == ti.f64 else 1e-30  # a floor for the Cholesky pivots

    @ti.func
    def mass_block(w: ti.i32, wm: ti.i32, b: ti.i32, v: ti.template(), vs: ti.template(), body_inv_mass: ti.template(),
                   body_inv_inertia_W: ti.template(), grad: ti.template(), P: ti.template()):
        """Body b's gradient M (v - v*) and preconditioner block M_b (identity and zero gradient
        for an immobile body: it keeps its velocity)."""
        p = 6 * b
        for r, c in ti.ndrange(6, 6):
            P[w, p + r, c] = 0.0
        inv_m = ti.cast(body_inv_mass[wm, b], real)
        if inv_m > 0.0:
            I_W = f.inertia(w, b, body_inv_inertia_W)
            dvl = rvec3(v[w, p] - vs[w, p], v[w, p + 1] - vs[w, p + 1], v[w, p + 2] - vs[w, p + 2])
            dwl = rvec3(v[w, p + 3] - vs[w, p + 3], v[w, p + 4] - vs[w, p + 4], v[w, p + 5] - vs[w, p + 5])
            Iw = f.mat_vec(I_W, dwl)
            for k in ti.static(range(3)):
                grad[w, p + k] = dvl[k] / inv_m
                grad[w, p + 3 + k] = Iw[k]
                P[w, p + k, k] = 1.0 / inv_m
            for r, s in ti.static(ti.ndrange(3, 3)):
                P[w, p + 3 + r, 3 + s] = I_W[r, s]
        else:
            for k in ti.static(range(6)):
                grad[w, p + k] = 0.0
                P[w, p + k, k] = 1.0

    @ti.func
    def own_block(w: ti.i32, b: ti.i32, A: rmat3, r: rvec3, P: ti.template()):
        """P_b += J^T G J of one row for body b, whose Jacobian is +-F [I, -[r]] (r: the
        row's arm from b's centre of mass, world frame): [[A, -A [r]], [[r] A, -[r] A [r]]]
        with A = F^T G F."""
        AS = f.times_skew(A, r)
        SAS = f.skew_times(r, AS)
        p = 6 * b
        for i, j in ti.ndrange(3, 3):
            P[w, p + i, j] = P[w, p + i, j] + A[i, j]
            P[w, p + i, 3 + j] = P[w, p + i, 3 + j] - AS[i, j]
            P[w, p + 3 + i, j] = P[w, p + 3 + i, j] - AS[j, i]
            P[w, p + 3 + i, 3 + j] = P[w, p + 3 + i, 3 + j] - SAS[i, j]

    @ti.func
    def contact_row(w: ti.i32, wm: ti.i32, c: ti.i32, a: ti.i32, b: ti.i32, u: rvec3, g: real, reg: contact_reg,
                    modified: ti.i32, F: rmat3, ra: rvec3, rb: rvec3, body_inv_mass: ti.template(), grad: ti.template(),
                    P: ti.template(), c_G: ti.template()):
        """One contact row's terms: grad -= J^T gamma, its curvature G (contact frame) to c_G[c]
        for the products, and its blocks J_a^T G J_a, J_b^T G J_b on the mobile bodies'
        preconditioner blocks."""
        gamma, G = f.response(u, g, reg, modified)
        c_G[c] = G
        fo = f.mat_t_vec(F, gamma)
        A = f.mat_mat(f.mat_t_mat(F, G), F)
        if body_inv_mass[wm, a] > 0.0:
            f.add_gradient_side(w, a, fo, ra.cross(fo), 1.0, grad)
            own_block(w, a, A, ra, P)
        if body_inv_mass[wm, b] > 0.0:
            f.add_gradient_side(w, b, fo, rb.cross(fo), -1.0, grad)
            own_block(w, b, A, rb, P)

    @ti.func
    def bilateral_own(w: ti.i32, p: ti.i32, jac: rvec6, gamma: real, G: real, grad: ti.template(), P: ti.template()):
        """One mobile body's part of a bilateral row: grad -= jac gamma, P_p += G jac jac^T."""
        for k in ti.static(range(6)):
            grad[w, 6 * p + k] = grad[w, 6 * p + k] - jac[k] * gamma
        for r, c in ti.ndrange(6, 6):
            P[w, 6 * p + r, c] = P[w, 6 * p + r, c] + G * jac[r] * jac[c]

    @ti.func
    def factor_block(w: ti.i32, b: ti.i32, P: ti.template(), scale: ti.template()):
        """Body b's block: Jacobi scaling D P_b D (D = diag(P_b)^-1/2, to scale[w, 6b..]), then
        its dense Cholesky factor L in place (lower triangle)."""
        p = 6 * b
        for i in range(6):
            scale[w, p + i] = 1.0 / ti.sqrt(P[w, p + i, i])
        for i, j in ti.ndrange(6, 6):
            P[w, p + i, j] = P[w, p + i, j] * (scale[w, p + i] * scale[w, p + j])
        for j in range(6):
            d = P[w, p + j, j]
            for k in range(j):
                d -= P[w, p + j, k] * P[w, p + j, k]
            d = ti.sqrt(ti.max(d, tiny))
            P[w, p + j, j] = d
            for i in range(j + 1, 6):
                x = P[w, p + i, j]
                for k in range(j):
                    x -= P[w, p + i, k] * P[w, p + j, k]
                P[w, p + i, j] = x / d

    @ti.func
    def precondition(w: ti.i32, b: ti.i32, P: ti.template(), scale: ti.template(), x: ti.template(), y: ti.template()):
        """y_b = P_b^-1 x_b = D (L L^T)^-1 D x_b (the factor of factor_block)."""
        p = 6 * b
        for i in range(6):  # forward: L t = D x
            t = scale[w, p + i] * x[w, p + i]
            for k in range(i):
                t -= P[w, p + i, k] * y[w, p + k]
            y[w, p + i] = t / P[w, p + i, i]
        for ii in range(6):  # backward: L^T s = t, y = D s
            i = 5 - ii
            t = y[w, p + i]
            for k in range(i + 1, 6):
                t -= P[w, p + k, i] * y[w, p + k]
            y[w, p + i] = t / P[w, p + i, i]
        for i in range(6):
            y[w, p + i] = y[w, p + i] * scale[w, p + i]

    @ti.func
    def mass_product(w: ti.i32, wm: ti.i32, b: ti.i32, x: ti.template(), body_inv_mass: ti.template(),
                     body_inv_inertia_W: ti.template(), y: ti.template()):
        """y_b = M_b x_b (x_b for an immobile body: H's identity rows)."""
        p = 6 * b
        inv_m = ti.cast(body_inv_mass[wm, b], real)
        if inv_m > 0.0:
            I_W = f.inertia(w, b, body_inv_inertia_W)
            Iw = f.mat_vec(I_W, rvec3(x[w, p + 3], x[w, p + 4], x[w, p + 5]))
            for k in ti.static(range(3)):
                y[w, p + k] = x[w, p + k] / inv_m
                y[w, p + 3 + k] = Iw[k]
        else:
            for k in ti.static(range(6)):
                y[w, p + k] = x[w, p + k]

    @ti.func
    def row_product(w: ti.i32, wm: ti.i32, a: ti.i32, b: ti.i32, G: rmat3, F: rmat3, ra: rvec3, rb: rvec3,
                    body_inv_mass: ti.template(), x: ti.template(), y: ti.template()):
        """y += J^T G J x for one contact row between bodies a and b (mobile sides only)."""
        fo = f.mat_t_vec(F, f.mat_vec(G, f.contact_u(w, 6 * a, 6 * b, F, ra, rb, x)))
        if body_inv_mass[wm, a] > 0.0:
            f.add_gradient_side(w, a, fo, ra.cross(fo), -1.0, y)
        if body_inv_mass[wm, b] > 0.0:
            f.add_gradient_side(w, b, fo, rb.cross(fo), 1.0, y)

    @ti.func
    def hessian_product(w: ti.i32, wm: ti.i32, k: ti.i32, b0: ti.i32, b1: ti.i32, s0: ti.i32, s1: ti.i32, jstart: ti.i32,
                        jend: ti.i32, c_ids: ti.template(), c_frame: ti.template(), c_ra: ti.template(), c_rb: ti.template(),
                        c_G: ti.template(), b_ids: ti.template(), b_Ja: ti.template(), b_Jb: ti.template(), b_law: ti.template(),
                        body_inv_mass: ti.template(), body_inv_inertia_W: ti.template(), newton_pos: ti.template(),
                        newton_body: ti.template(), newton_row: ti.template(), newton_island: ti.template(),
                        newton_v: ti.template(), x: ti.template(), y: ti.template()):
        """y = H x on island k (newton.world_funcs): M x + sum over its contact rows J^T G J x +
        sum over its bilateral rows G j (j . x), G of the bilateral rows at the iterate newton_v."""
        for q in range(b0, b1):
            mass_product(w, wm, newton_body[w, q], x, body_inv_mass, body_inv_inertia_W, y)
        for s in range(s0, s1):
            c = newton_row[s]
            ids = c_ids[c]
            row_product(w, wm, ids[ID_A], ids[ID_B], c_G[c], ti.cast(c_frame[c], real), ti.cast(c_ra[c], real),
                        ti.cast(c_rb[c], real), body_inv_mass, x, y)
        for j in range(jstart, jend):
            jids = b_ids[j]
            if f.row_island(w, wm, jids[ID_A], jids[ID_B], body_inv_mass, newton_island) != k:
                continue
            pa, pb, mobile_a, mobile_b, ja, jb, _gamma, G = f.bilateral_row(w, wm, j, b_ids, b_Ja, b_Jb, b_law, body_inv_mass,
                                                                             newton_pos, newton_v)
            jx = G * f.row_u(w, 6 * pa if mobile_a else -1, 6 * pb, ja, jb, x)
            if mobile_a:
                for k in ti.static(range(6)):
                    y[w, 6 * pa + k] = y[w, 6 * pa + k] + ja[k] * jx
            if mobile_b:
                for k in ti.static(range(6)):
                    y[w, 6 * pb + k] = y[w, 6 * pb + k] + jb[k] * jx

    @ti.func
    def mass_norms(w: ti.i32, wm: ti.i32, b0: ti.i32, b1: ti.i32, r: ti.template(), x: ti.template(),
                   body_inv_mass: ti.template(), body_inv_inertia_W: ti.template(), newton_body: ti.template()):
        """(r^T M^-1 r, x^T M x) over the mobile bodies newton_body[w, b0:b1] (an island's)
        [kg m^2/s^2]: the residual's squared inverse-mass norm (r in N s and N m s) and the
        step's squared kinetic-energy norm (x in m/s and rad/s)."""
        rr = ti.cast(0.0, real)
        xx = ti.cast(0.0, real)
        for q in range(b0, b1):
            b = newton_body[w, q]
            inv_m = ti.cast(body_inv_mass[wm, b], real)
            if inv_m > 0.0:
                p = 6 * b
                inv_I = ti.cast(body_inv_inertia_W[w, b], real)
                rv = rvec3(r[w, p], r[w, p + 1], r[w, p + 2])
                rw = rvec3(r[w, p + 3], r[w, p + 4], r[w, p + 5])
                xv = rvec3(x[w, p], x[w, p + 1], x[w, p + 2])
                xw = rvec3(x[w, p + 3], x[w, p + 4], x[w, p + 5])
                rr += inv_m * rv.dot(rv) + rw.dot(f.mat_vec(inv_I, rw))
                xx += xv.dot(xv) / inv_m + xw.dot(f.mat_vec(f.inertia(w, b, body_inv_inertia_W), xw))
        return rr, xx

    @ti.func
    def point_mass(w: ti.i32, wm: ti.i32, b0: ti.i32, b1: ti.i32, body_inv_mass: ti.template(), body_inv_inertia_W: ti.template(),
                   body_reach: ti.template(), newton_body: ti.template()) -> real:
        """The least mass any mobile body of newton_body[w, b0:b1] (an island) shows at its
        farthest point [kg]: min over them of min(m, 1 / (trace(I^-1) reach^2)) (trace(I^-1) >=
        the largest eigenvalue of I^-1)."""
        least = ti.cast(1e30, real)
        for q in range(b0, b1):
            b = newton_body[w, q]
            inv_m = ti.cast(body_inv_mass[wm, b], real)
            if inv_m > 0.0:
                least = ti.min(least, 1.0 / inv_m)
                reach = ti.cast(body_reach[b], real)
                inv_I = ti.cast(body_inv_inertia_W[w, b], real)
                spin = (inv_I[0, 0] + inv_I[1, 1] + inv_I[2, 2]) * reach * reach
                if spin > 0.0:
                    least = ti.min(least, 1.0 / spin)
        return least

    return types.SimpleNamespace(**locals())


@functools.lru_cache(maxsize=None)
def newton_cg_solver(real, sweeps: bool = False):
    """The Newton solve kernel of the world schedule with the matrix-free PCG step ([solver]
    linear = "cg"), with arithmetic in `real` (ti.f64 or ti.f32) and, with sweeps, the
    Gauss-Seidel presweeps' code ([solver] presweeps > 0), made once per combination."""
    f = newton_funcs(real)
    wf = world_funcs(real)
    g = cg_funcs(real)
    rvec3, rmat3 = f.rvec3, f.rmat3

    @ti.kernel
    def solve_newton_cg(
        world_start: nd(dtype=ti.i32, ndim=1),
        world_status: nd(dtype=ti.i32, ndim=1),
        world_queue: nd(dtype=ti.i32, ndim=1),
        c_ids: nd(dtype=ivec4, ndim=1),
        c_frame: nd(dtype=mat3, ndim=1),
        c_ra: nd(dtype=vec3, ndim=1),
        c_rb: nd(dtype=vec3, ndim=1),
        c_reg: nd(dtype=contact_reg, ndim=1),
        c_gamma: nd(dtype=vec3, ndim=1),
        bilateral_start: nd(dtype=ti.i32, ndim=1),
        b_ids: nd(dtype=ivec4, ndim=1),
        b_Ja: nd(dtype=vec6, ndim=1),
        b_Jb: nd(dtype=vec6, ndim=1),
        b_law: nd(dtype=vec4, ndim=1),
        b_gamma: nd(dtype=float, ndim=1),
        body_vc: nd(dtype=vec3, ndim=2),
        body_wc: nd(dtype=vec3, ndim=2),
        body_reach: nd(dtype=float, ndim=1),
        body_inv_mass: nd(dtype=float, ndim=2),
        body_inv_inertia_W: nd(dtype=mat3, ndim=2),
        newton_block: nd(dtype=real, ndim=3),
        newton_v: nd(dtype=real, ndim=2),
        newton_vs: nd(dtype=real, ndim=2),
        newton_last: nd(dtype=real, ndim=2),
        newton_kept: nd(dtype=ti.i32, ndim=1),
        newton_grad: nd(dtype=real, ndim=2),
        newton_dv: nd(dtype=real, ndim=2),
        newton_scale: nd(dtype=real, ndim=2),
        newton_pos: nd(dtype=ti.i32, ndim=2),
        newton_island: nd(dtype=ti.i32, ndim=2),
        newton_body: nd(dtype=ti.i32, ndim=2),
        newton_island_start: nd(dtype=ti.i32, ndim=3),
        newton_row: nd(dtype=ti.i32, ndim=1),
        newton_r: nd(dtype=real, ndim=2),
        newton_p: nd(dtype=real, ndim=2),
        newton_q: nd(dtype=real, ndim=2),
        c_bound: nd(dtype=real, ndim=1),
        c_u: nd(dtype=rvec3, ndim=1),
        c_jdv: nd(dtype=rvec3, ndim=1),
        c_G: nd(dtype=rmat3, ndim=1),
        world_iterations: nd(dtype=ti.i32, ndim=1),
        world_linear_iterations: nd(dtype=ti.i32, ndim=1),
        world_residual: nd(dtype=float, ndim=1),
        world_contacts: nd(dtype=ti.i32, ndim=1),
        world_updates: nd(dtype=ti.i32, ndim=1),
        world_islands: nd(dtype=ti.i32, ndim=1),
        iterations: ti.i32,
        tolerance: float,
        omega: float,
        presweeps: ti.i32,
    ):
        """One thread per world; reads and writes what solver.newton's kernel does (the same
        Newton iteration), with each step from PCG: newton_block holds the preconditioner's
        factors, newton_r, newton_p and newton_q CG's residual, direction and product (then
        the preconditioned residual), c_G each contact row's curvature. Also writes the CG
        iterations of the solve (all its Newton iterations) to world_linear_iterations and
        counts each product's rows in world_updates."""
        B = body_vc.shape[1]
        n_worlds = world_start.shape[0] - 1
        open_queue(world_queue)
        ti.loop_config(serialize=backend.SERIAL_LOOPS)
        for slot in range(world_slots(n_worlds)):
            w = first_world(slot, n_worlds, world_queue)
            while w >= 0:
                start, end = world_start[w], world_start[w + 1]
                jstart, jend = bilateral_start[w], bilateral_start[w + 1]
                it_world = 0
                linear = 0
                residual_world = ti.cast(0.0, real)
                evaluations = 0
                n_islands = 0
                if world_status[w] == 0:
                    wm = w % body_inv_mass.shape[0]
                    for b in range(B):
                        newton_pos[w, b] = b
                    n_islands = wf.group_islands(w, wm, start, end, jstart, jend, B, False, c_ids, b_ids, body_inv_mass, newton_pos,
                                                 newton_island, newton_body, newton_island_start, newton_row)
                    wf.load_free(w, B, body_vc, body_wc, newton_pos, newton_v, newton_vs, newton_dv)
                    for k in range(n_islands):  # each island alone (newton_pos is the identity here)
                        b0, b1 = newton_island_start[w, k, 0], newton_island_start[w, k + 1, 0]
                        s0, s1 = newton_island_start[w, k, 1], newton_island_start[w, k + 1, 1]
                        joints = wf.island_joints(w, wm, k, jstart, jend, b_ids, body_inv_mass, newton_island)
                        if s1 == s0 and joints == 0:
                            continue  # no rows: the free velocities (already in place) are the solution
                        it = 0
                        residual = ti.cast(0.0, real)
                        # CG's absolute floor on r^T M^-1 r (see the module's stopping rule).
                        floor = (0.5 * CG_ATOL * tolerance) ** 2 * g.point_mass(w, wm, b0, b1, body_inv_mass, body_inv_inertia_W,
                                                                              body_reach, newton_body)
                        first = 1
                        while True:  # a start, then the iterations; once more from the warm start after must_restart
                            from_last, started = wf.start_island(
                                w, wm, k, b0, b1, s0, s1, jstart, jend, joints, first, sweeps, presweeps, tolerance, omega, c_ids,
                                c_frame, c_ra, c_rb, c_reg, c_gamma, b_ids, b_Ja, b_Jb, b_gamma, body_vc, body_wc, body_reach,
                                body_inv_mass, body_inv_inertia_W, newton_pos, newton_body, newton_row, newton_island, newton_v,
                                newton_vs, newton_last, newton_kept, newton_grad, newton_dv, c_bound, c_u, c_jdv)
                            evaluations += started
                            first, it, near, short, again = 0, 0, 0, 0, 0
                            while True:
                                modified = f.isotropic_start(it, near, b1 - b0 > 1)
                                # Gradient, row curvatures and the preconditioner's blocks.
                                for q in range(b0, b1):
                                    g.mass_block(w, wm, newton_body[w, q], newton_v, newton_vs, body_inv_mass, body_inv_inertia_W,
                                                 newton_grad, newton_block)
                                for s in range(s0, s1):
                                    c = newton_row[s]
                                    ids = c_ids[c]
                                    g.contact_row(w, wm, c, ids[ID_A], ids[ID_B], c_u[c], c_bound[c], c_reg[c], modified,
                                                  ti.cast(c_frame[c], real), ti.cast(c_ra[c], real), ti.cast(c_rb[c], real),
                                                  body_inv_mass, newton_grad, newton_block, c_G)
                                for j in range(jstart, jend):
                                    jids = b_ids[j]
                                    if f.row_island(w, wm, jids[ID_A], jids[ID_B], body_inv_mass, newton_island) == k:
                                        pa, pb, mobile_a, mobile_b, ja, jb, gamma, G = f.bilateral_row(
                                            w, wm, j, b_ids, b_Ja, b_Jb, b_law, body_inv_mass, newton_pos, newton_v)
                                        if mobile_a:
                                            g.bilateral_own(w, pa, ja, gamma, G, newton_grad, newton_block)
                                        if mobile_b:
                                            g.bilateral_own(w, pb, jb, gamma, G, newton_grad, newton_block)
                                evaluations += s1 - s0 + joints
                                residual = wf.residual(w, wm, b0, b1, body_inv_mass, body_inv_inertia_W, body_reach, newton_pos,
                                                       newton_body, newton_grad)
                                again = wf.must_restart(from_last, residual, tolerance, it, iterations)
                                if again == 1 or residual <= tolerance or it >= iterations or short == 1:
                                    break
                                if it == 0 and near == 0 and residual <= NEAR_TOLERANCES * tolerance:
                                    near = 1  # close already: the exact curvature from the first step (solver.newton)
                                    continue
                                for q in range(b0, b1):
                                    g.factor_block(w, newton_body[w, q], newton_block, newton_scale)
                                # PCG on H dv = -grad from dv = 0 (newton_q holds z = P^-1 r between products).
                                for q in range(b0, b1):
                                    p = 6 * newton_body[w, q]
                                    for i in ti.static(range(6)):
                                        newton_dv[w, p + i] = 0.0
                                        newton_r[w, p + i] = -newton_grad[w, p + i]
                                    g.precondition(w, newton_body[w, q], newton_block, newton_scale, newton_r, newton_q)
                                rz = ti.cast(0.0, real)
                                for q in range(b0, b1):
                                    p = 6 * newton_body[w, q]
                                    for i in ti.static(range(6)):
                                        newton_p[w, p + i] = newton_q[w, p + i]
                                        rz += newton_r[w, p + i] * newton_q[w, p + i]
                                n_cg = 0
                                while n_cg < 6 * (b1 - b0) and rz > 0.0:
                                    g.hessian_product(w, wm, k, b0, b1, s0, s1, jstart, jend, c_ids, c_frame, c_ra, c_rb, c_G,
                                                      b_ids, b_Ja,b_Jb, b_law, body_inv_mass, body_inv_inertia_W, newton_pos,
                                                      newton_body, newton_row, newton_island, newton_v, newton_p, newton_q)
                                    evaluations += s1 - s0 + joints
                                    pq = ti.cast(0.0, real)
                                    for q in range(b0, b1):
                                        p = 6 * newton_body[w, q]
                                        for i in ti.static(range(6)):
                                            pq += newton_p[w, p + i] * newton_q[w, p + i]
                                    if pq <= 0.0:  # no curvature left along p (round-off): keep the step so far
                                        break
                                    step = rz / pq
                                    for q in range(b0, b1):
                                        p = 6 * newton_body[w, q]
                                        for i in ti.static(range(6)):
                                            newton_dv[w, p + i] = newton_dv[w, p + i] + step * newton_p[w, p + i]
                                            newton_r[w, p + i] = newton_r[w, p + i] - step * newton_q[w, p + i]
                                    n_cg += 1
                                    for q in range(b0, b1):
                                        g.precondition(w, newton_body[w, q], newton_block, newton_scale, newton_r, newton_q)
                                    rz_next = ti.cast(0.0, real)
                                    for q in range(b0, b1):
                                        p = 6 * newton_body[w, q]
                                        for i in ti.static(range(6)):
                                            rz_next += newton_r[w, p + i] * newton_q[w, p + i]
                                    rr, xx = g.mass_norms(w, wm, b0, b1, newton_r, newton_dv, body_inv_mass, body_inv_inertia_W,
                                                          newton_body)
                                    if rr <= ti.max(CG_RTOL * CG_RTOL * xx, floor):
                                        break
                                    beta = rz_next / rz
                                    rz = rz_next
                                    for q in range(b0, b1):
                                        p = 6 * newton_body[w, q]
                                        for i in ti.static(range(6)):
                                            newton_p[w, p + i] = newton_q[w, p + i] + beta * newton_p[w, p + i]
                                linear += n_cg
                                short = wf.short_step(w, b0, b1, tolerance, body_reach, newton_pos, newton_body, newton_dv)
                                searched, _ = wf.search_and_step(w, wm, k, b0, b1, s0, s1, jstart, jend, c_ids, c_frame, c_ra,
                                                                 c_rb,c_reg, b_ids, b_Ja, b_Jb, b_law, body_inv_mass,
                                                                 body_inv_inertia_W, newton_pos, newton_body, newton_row,
                                                                 newton_island, newton_v, newton_vs, newton_grad, newton_dv,
                                                                 c_bound, c_u, c_jdv, True)
                                evaluations += searched
                                it += 1
                            if again == 0:
                                break
                        wf.store_solution(w, wm, k, b0, b1, s0, s1, jstart, jend, c_ids, c_frame, c_ra, c_rb, c_reg, c_gamma, b_ids,
                                          b_Ja, b_Jb, b_law, b_gamma, body_vc, body_wc, body_inv_mass, body_inv_inertia_W,
                                          newton_pos, newton_body, newton_row, newton_island, newton_v, newton_vs, c_bound, c_u)
                        it_world = ti.max(it_world, it)
                        residual_world = ti.max(residual_world, residual)
                    wf.keep_solution(w, B, newton_pos, newton_v, newton_last, newton_kept)
                world_iterations[w] = it_world
                world_linear_iterations[w] = linear
                world_residual[w] = ti.cast(residual_world, float)
                world_contacts[w] = end - start
                world_updates[w] = evaluations
                world_islands[w] = n_islands
                w = next_world(n_worlds, world_queue)

    return solve_newton_cg
