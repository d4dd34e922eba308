"""Newton's method on the body velocities with a lagged Coulomb bound ([solver] method =
"newton"; world schedule: one thread per world; solver.newton_block: one block of threads
per world on cuda and vulkan, from the same ti.funcs, newton_funcs).

Unknowns: the velocities v of every body of a world (6 per body, centre of mass, world frame).
Each iteration minimises the convex cost, with the friction bound g_i of each contact fixed,

    l(v; g) = 1/2 |v - v*|_M^2 + sum_i [ (vhat_i - u_n,i)_+^2 / (2 R_n,i) + Huber_{g_i R_t,i}(u_t,i) ],
    u_i = J_i v,   Huber_{gR}(x) = |x|^2 / (2R) if |x| <= gR, else g |x| - g^2 R / 2,

(MuJoCo's friction-loss term; with g fixed, Drake's Lagged model) by one Newton step:
gradient M (v - v*) - sum J_i^T gamma_i(u_i) and Hessian H = M + sum J_i^T G_i J_i with the
contact response of the regularised law

    gamma_n = (vhat - u_n)_+ / R_n,  G_nn = 1/R_n while active;
    stick |u_t| <= g R_t: gamma_t = -u_t / R_t,  G_t = I / R_t;
    slide: gamma_t = -g u_t / |u_t|,  G_t = (g / |u_t|)(I - t t^T)   (t = u_t / |u_t|),

where the first MODIFIED_ITERATIONS iterations use the isotropic slip curvature (g / |u_t|) I
(a majorant: fewer iterations on piles than the exact curvature from the start, where the slip
of one body's contacts turns with its neighbours'); in float64 arithmetic an island of one
body gets the exact curvature at once (newton_funcs.isotropic_start: a lone sliding contact
then takes one iteration instead of three), unless the
first iterate's residual is already within NEAR_TOLERANCES tolerances: then the exact
curvature from the first step (near the solution the majorant only slows the convergence to
linear). H is
Jacobi-scaled and factored by a block Cholesky on the bodies' row graph (6x6 blocks,
minimum-degree order: only the blocks of touching bodies and their fill are written and
factored, in the world's dense H array); an exact line search (Newton on phi'(alpha) with a
bisection safeguard, as in Drake's SAP) picks the step; then every bound is updated,
g_i = mu_i gamma_n,i(v). At the fixed point (zero gradient,
g = mu gamma_n) the impulses satisfy normal compliance exactly while sliding: the De Saxce
fixed point of the projected iterations, without hydroplaning.

A world (an island) stops when the iterate balances momentum to the tolerance: the cost's gradient r =
M (v - v*) - J^T gamma(v) at the updated bounds (the unbalanced impulse of the Coulomb fixed
point), applied to each body alone, would change no point of any body by more than the
tolerance (body_change of M^-1 r, per body; the body-velocity test of the projected
iterations, measured on the residual instead of on the step). The test runs before every
factorisation, the warm start's included: a warm start that already balances stops at once
(0 iterations), and a step that the line search cuts short (a small alpha far from the
solution) never stops the solve. It also stops at the cap. Since H >= M, the iterate's error obeys |e|_M <=
|r|_M^-1. In float32 arithmetic (vulkan) the residual has a round-off floor that can exceed
the tolerance: a contact's velocity is rounded by ~EPS32 |u| and its normal impulse by that
over R_n, which M^-1 turns into EPS32 |u| / (m R_n) (1e4 EPS32 |u| for a stiff contact of a
light body). There the solve also stops after an iteration whose full Newton step (before
the line search, H^-1 r: the error estimate of the local model) moves no body point by more
than the tolerance.
With [solver] presweeps > 0 the world kernels first run that many projected Gauss-Seidel
sweeps at most from the warm start (world_funcs.gauss_seidel_sweeps, relaxation omega; the
same fixed point), and Newton starts from their impulses and velocities: they settle the
lagged bounds on which Newton's residual can stall for several iterations on a pile. The
sweeps' code is compiled into a world kernel only when presweeps > 0 (newton_solver's and
newton_cg_solver's `sweeps`): a kernel's cold compile, lavapipe's above all, grows with its
size. For the same reason each world kernel holds one copy of the warm start and of the
cost pass (start_island after must_restart, choose_start's two rounds).
The first iterate is the warm start v0 = v* + M^-1 J^T gamma0 (the previous solve's impulses on
this step's rows) or, on the world schedule, the previous solve's solution (newton_last: the
mobile bodies' velocities at the end of the last step, Drake SAP's start), whichever has the
lower cost l(v; g0) at the warm start's bounds g0 (world_funcs.choose_start): on a settled pile
the rows change every step, so the mapped impulses balance worse than the last velocities; a
solution of the last step that no longer fits (an impact, a reset world) costs more and is not
taken. The lagged bounds can cycle from that start (a rigid box coming to a stop on a rigid
table): a solve from it that has not converged after LAST_START_ITERATIONS iterations starts
again from the warm start. Worlds with bilateral rows, and the block schedule, start from the
warm start only.
On the world schedule each island of a world (bodies joined by rows between two mobile
bodies: world_funcs.group_islands) is solved alone, with its own start, line search and
stopping test, as if it were a world of its own; the world's iterations are its slowest
island's. The block schedule solves a world whole.
Bilateral rows (solver.bilateral: joints) add their cost to l (a quadratic, one-sided or
clamped, see there) and are solved with the contacts, warm-started from their impulses of the
previous solve. Immobile bodies keep their velocity (identity rows). Arithmetic is in `real`
(float64 on cpu and cuda); the state keeps the run-time precision (backend.init).

Every sum into the world's scratch (the gradient, the Hessian, the island counts) is written
`x[i] = x[i] + y`, never `x[i] += y`: Taichi compiles `+=` (and `-=`, `*=`) on an ndarray
element into an atomic, on cpu a compare-and-swap loop for a float, whatever the schedule. A
world's entries have one writer on both schedules (its thread; on the block schedule the lane
that owns the block row or the body), so the atomics bought nothing and cost time (README,
"Sums without atomics")."""

import functools
import types

import taichi as ti

from .. import backend

from ..math3d import quat_to_mat
from ..types import (ID_A, ID_B, ID_PAIR, L_BIAS, L_LOWER, L_R, L_UPPER, R_MU, R_RN, R_RT, R_VHAT, contact_reg, ivec4, mat3, nd, vec3,
                     vec4, vec6)
from .cone import apply_world_impulse, body_change, contact_update, contact_velocity
from .world_schedule import first_world, next_world, open_queue, world_slots

__all__ = ["newton_funcs", "world_funcs", "newton_solver", "seed_solutions", "MODIFIED_ITERATIONS", "NEAR_TOLERANCES", "LAST_START_ITERATIONS", "LINE_SEARCH_EVALUATIONS", "LINE_SEARCH_RTOL", "ALPHA_MAX"]

MODIFIED_ITERATIONS = 3
"""Iterations that use the isotropic slip curvature (islands of two or more bodies; every
island in float32: newton_funcs.isotropic_start)."""
NEAR_TOLERANCES = 1e3
"""A first residual within this many tolerances starts the exact slip curvature at once."""
LAST_START_ITERATIONS = 20
"""A solve started from the previous solution that has not converged after this many
iterations starts again from the warm start (world_funcs.choose_start)."""
LINE_SEARCH_EVALUATIONS = 20
LINE_SEARCH_RTOL = 1e-2  # stop the line search when |phi'(alpha)| <= this x |phi'(0)|
ALPHA_MAX = 16.0
"""The longest step of the line search, in units of the Newton step: the isotropic slip
curvature of the first iterations overestimates the cost's curvature along the slip, so the
best step can be several Newton steps long."""


@functools.lru_cache(maxsize=None)
def newton_funcs(real):
    """The ti.funcs of one Newton solve with arithmetic in `real` (ti.f64 or ti.f32), made once
    per type and shared by both schedules (the world kernel below and solver.newton_block):
    per contact, per bilateral row, per body and per factor block, each writing only what it
    owns, so that one thread may run them all in turn or many threads apart."""
    rvec3 = ti.types.vector(3, real)
    rvec6 = ti.types.vector(6, real)
    rmat3 = ti.types.matrix(3, 3, real)
    rmat6 = ti.types.matrix(6, 6, real)
    tiny = 1e-300 if real == ti.f64 else 1e-30  # a floor for the Cholesky pivots
    step_test = real != ti.f64  # float32: also stop on a short full step (the module's stopping rule)

    @ti.func
    def mat_vec(A: rmat3, x: rvec3) -> rvec3:
        """A x, each entry summed in column order as Taichi's @ sums it, but as one expression:
        @ accumulates into a local vector (a store per product), and every mutable local adds
        to the cost of Taichi's data-flow passes over the whole kernel."""
        return rvec3([A[i, 0] * x[0] + A[i, 1] * x[1] + A[i, 2] * x[2] for i in ti.static(range(3))])

    @ti.func
    def mat_t_vec(A: rmat3, x: rvec3) -> rvec3:
        """A^T x (as mat_vec)."""
        return rvec3([A[0, i] * x[0] + A[1, i] * x[1] + A[2, i] * x[2] for i in ti.static(range(3))])

    @ti.func
    def mat_t_mat(A: rmat3, B: rmat3) -> rmat3:
        """A^T B (as mat_vec)."""
        return rmat3([[A[0, i] * B[0, j] + A[1, i] * B[1, j] + A[2, i] * B[2, j] for j in ti.static(range(3))]
                      for i in ti.static(range(3))])

    @ti.func
    def mat_mat(A: rmat3, B: rmat3) -> rmat3:
        """A B (as mat_vec)."""
        return rmat3([[A[i, 0] * B[0, j] + A[i, 1] * B[1, j] + A[i, 2] * B[2, j] for j in ti.static(range(3))]
                      for i in ti.static(range(3))])

    @ti.func
    def regime(u: rvec3, g: real, reg: contact_reg):
        """A contact row's state at contact velocity u with bound g, shared by response() and
        directional() so that the two agree: x = vhat - u_n [m/s], active (x > 0), stick
        (|u_t| <= g R_t), k = g / |u_t| (used only while sliding, |u_t| > g R_t >= 0), and the
        reciprocals 1 / |u_t|, 1 / R_t, 1 / R_n that the callers multiply by (three divisions
        per row)."""
        Rt, Rn, vhat = ti.cast(reg[R_RT], real), ti.cast(reg[R_RN], real), ti.cast(reg[R_VHAT], real)
        x = vhat - u[2]
        slip = ti.sqrt(u[0] * u[0] + u[1] * u[1])
        inv_slip = 1.0 / slip
        return x, x > 0.0, slip <= g * Rt, g * inv_slip, inv_slip, 1.0 / Rt, 1.0 / Rn

    @ti.func
    def response(u: rvec3, g: real, reg: contact_reg, modified: ti.i32):
        """(gamma, G): the impulse [N s] and its derivative -d gamma / d u, contact frame.
        Branch-free (selects; each value is the one the branches would assign): a mutable
        local per branch would add to the cost of Taichi's data-flow passes at every call
        site."""
        zero = ti.cast(0.0, real)
        x, active, stick, k, inv_slip, inv_Rt, inv_Rn = regime(u, g, reg)
        exact = (modified == 0) and not stick  # the exact slip curvature: G_t = k (I - t t^T)
        tx, ty = u[0] * inv_slip, u[1] * inv_slip
        gamma = rvec3(ti.select(stick, -u[0] * inv_Rt, -k * u[0]), ti.select(stick, -u[1] * inv_Rt, -k * u[1]),
                      ti.select(active, x * inv_Rn, zero))
        G00 = ti.select(stick, inv_Rt, ti.select(exact, k - k * tx * tx, k))
        G11 = ti.select(stick, inv_Rt, ti.select(exact, k - k * ty * ty, k))
        G01 = ti.select(exact, zero - k * tx * ty, zero)
        G = rmat3([[G00, G01, zero], [G01, G11, zero], [zero, zero, ti.select(active, inv_Rn, zero)]])
        return gamma, G

    @ti.func
    def isotropic_start(it: ti.i32, near: ti.i32, coupled: ti.i32) -> ti.i32:
        """1 where iteration `it` uses the isotropic slip curvature: the first MODIFIED_ITERATIONS
        of a solve whose first residual was not near the solution (near = 0), in an island
        with a row between two mobile bodies (coupled; the block schedule: a world with one),
        and in float32 arithmetic in every island. In float64 a lone body's sliding contact
        gets the exact curvature at once: one iteration, where the isotropic step, shared by
        the normal and the tangent, took three. In float32 (solve forced to float32 on cpu, 8
        worlds) the exact start made the sliding coin hit the iteration cap (300) in one step;
        with the exact curvature's entries formed as products (k t_y^2, which cannot go
        negative where |t| rounds above 1) it did not, but on vulkan it then popped a rigid
        ring resting on ~650 stiff rows of a rigid half-space (test_rigid_contact's non-convex
        ring: 2.5e-4 m/s vertical against a 2.9e-6 m/s bound; 4.2e-7 m/s with the isotropic
        start, the same mesh), and those entries alone failed two float32 tests at their
        bounds (README)."""
        return 1 if it < MODIFIED_ITERATIONS and near == 0 and (coupled or ti.static(real != ti.f64)) else 0

    @ti.func
    def directional(u: rvec3, d: rvec3, g: real, reg: contact_reg):
        """(-gamma(u) . d, d . G(u) d): one contact's terms of the cost's first and second
        derivatives along the contact velocity direction d (response() with the exact slip
        curvature, without forming G). Branch-free, as response(): the line search runs it
        over every row several times per iteration, and a branch on the row's regime (active
        or not, sticking or sliding) mispredicts where the regimes mix, as at impacts (README,
        "The line search without branches")."""
        zero = ti.cast(0.0, real)
        x, active, stick, k, inv_slip, inv_Rt, inv_Rn = regime(u, g, reg)
        ud = u[0] * d[0] + u[1] * d[1]
        dd = d[0] * d[0] + d[1] * d[1]
        ut = ud * inv_slip
        d1 = ti.select(active, -x * inv_Rn * d[2], zero) + ti.select(stick, ud * inv_Rt, k * ud)
        d2 = ti.select(active, d[2] * d[2] * inv_Rn, zero) + ti.select(stick, dd * inv_Rt, k * (dd - ut * ut))
        return d1, d2

    @ti.func
    def bilateral_response(u: real, law: vec4):
        """(gamma, G) of a bilateral row (solver.bilateral): gamma = clamp(-(u - bias) / R,
        lower, upper) and G = -d gamma / d u (1 / R inside the bounds, 0 on them)."""
        R = ti.cast(law[L_R], real)
        lower, upper = ti.cast(law[L_LOWER], real), ti.cast(law[L_UPPER], real)
        free = -(u - ti.cast(law[L_BIAS], real)) / R
        below, above = free <= lower, free >= upper
        gamma = ti.select(below, lower, ti.select(above, upper, free))
        G = ti.select(below or above, ti.cast(0.0, real), 1.0 / R)  # branch-free, as response()
        return gamma, G

    @ti.func
    def row_u(w: ti.i32, pa: ti.i32, pb: ti.i32, ja: rvec6, jb: rvec6, v: ti.template()) -> real:
        """u = Ja . v_a + Jb . v_b of a bilateral row, with body a's generalized velocity at
        v[w, pa:pa + 6] (pa < 0: no body a) and b's at pb."""
        u = ti.cast(0.0, real)
        for k in range(6):  # run-time loops (here and below): one copy of the body in the IR
            u += jb[k] * v[w, pb + k]
        if pa >= 0:
            for k in range(6):
                u += ja[k] * v[w, pa + k]
        return u

    @ti.func
    def add_outer(H: ti.template(), w: ti.i32, i: ti.i32, j: ti.i32, s: real, x: rvec6, y: rvec6, diagonal: ti.template()):
        """H[6i.., 6j..] += s x y^T (a diagonal block, i = j: its lower triangle only). A run-time
        loop: one copy of the body in the IR per call site."""
        for r, c in ti.ndrange(6, 6):
            if ti.static(not diagonal) or c <= r:
                H[w, 6 * i + r, 6 * j + c] = H[w, 6 * i + r, 6 * j + c] + s * x[r] * y[c]

    @ti.func
    def body_twist(w: ti.i32, p: ti.i32, v: ti.template()):
        """(linear, angular) velocity of the body at v[w, p:p + 6]."""
        return rvec3(v[w, p], v[w, p + 1], v[w, p + 2]), rvec3(v[w, p + 3], v[w, p + 4], v[w, p + 5])

    @ti.func
    def relative_u(F: rmat3, ra: rvec3, rb: rvec3, va: rvec3, wa: rvec3, vb: rvec3, wb: rvec3) -> rvec3:
        """Velocity of b relative to a at the contact, contact frame, from the bodies' twists."""
        return mat_vec(F, (vb + wb.cross(rb)) - (va + wa.cross(ra)))

    @ti.func
    def contact_u(w: ti.i32, pa: ti.i32, pb: ti.i32, F: rmat3, ra: rvec3, rb: rvec3, v: ti.template()) -> rvec3:
        """u = J v: velocity of b relative to a at the contact, contact frame, from the world's
        generalized velocities, (v, w) of body a at v[w, pa:pa + 6] and of b at pb."""
        va, wa = body_twist(w, pa, v)
        vb, wb = body_twist(w, pb, v)
        return relative_u(F, ra, rb, va, wa, vb, wb)

    @ti.func
    def run_end(s: ti.i32, s1: ti.i32, newton_row: ti.template(), c_ids: ti.template()) -> ti.i32:
        """The end of the run of rows from position s (< s1) of newton_row that share row s's
        pair of geometries: the rows of one pair come one after another, mostly."""
        pair = c_ids[newton_row[s]][ID_PAIR]
        e = s + 1
        while e < s1 and c_ids[newton_row[e]][ID_PAIR] == pair:
            e += 1
        return e

    @ti.func
    def times_skew(A: rmat3, r: rvec3) -> rmat3:
        """A [r]: row i is A_i x r ([r] x = r x x)."""
        return rmat3([[A[i, 1] * r[2] - A[i, 2] * r[1], A[i, 2] * r[0] - A[i, 0] * r[2], A[i, 0] * r[1] - A[i, 1] * r[0]]
                      for i in ti.static(range(3))])

    @ti.func
    def skew_times(r: rvec3, X: rmat3) -> rmat3:
        """[r] X: column c is r x X_c."""
        return rmat3([[r[1] * X[2, c] - r[2] * X[1, c] for c in ti.static(range(3))],
                      [r[2] * X[0, c] - r[0] * X[2, c] for c in ti.static(range(3))],
                      [r[0] * X[1, c] - r[1] * X[0, c] for c in ti.static(range(3))]])

    @ti.func
    def add_block(H: ti.template(), w: ti.i32, i: ti.i32, j: ti.i32, sign: real, A: rmat3, ASj: rmat3, ASi: rmat3, SAS: rmat3,
                  diagonal: ti.template()):
        """H[6i.., 6j..] += sign [I; [ri]] A [I, -[rj]] = sign [[A, -A [rj]], [-(A [ri])^T,
        -[ri] A [rj]]]: the block J_i^T G J_j of the bodies at block positions i and j of a
        row (their Jacobians are -+F [I, -[r]]), with A = F^T G F (world frame, symmetric),
        ASj = A [rj], ASi = A [ri], SAS = [ri] A [rj]. A diagonal block (i = j) gets its lower
        triangle only: the factorisation reads no other part of it. The block is loaded whole,
        then stored (load_block's note: a load between two stores costs several)."""
        X = load_block(H, w, i, j)
        for r in ti.static(range(3)):
            for c in ti.static(range(3)):
                if ti.static(not diagonal or c <= r):
                    H[w, 6 * i + r, 6 * j + c] = X[r, c] + sign * A[r, c]
                    H[w, 6 * i + 3 + r, 6 * j + 3 + c] = X[3 + r, 3 + c] - sign * SAS[r, c]
                if ti.static(not diagonal):
                    H[w, 6 * i + r, 6 * j + 3 + c] = X[r, 3 + c] - sign * ASj[r, c]
                H[w, 6 * i + 3 + r, 6 * j + c] = X[3 + r, c] - sign * ASi[c, r]

    @ti.func
    def add_gradient_side(w: ti.i32, p: ti.i32, f: rvec3, t: rvec3, sign: real, grad: ti.template()):
        """grad[6p..] += sign (f, t): one body's part of -J^T gamma of a run of rows (sign +1
        for body a, which takes -f, and -1 for body b; x + (-1) y is x - y exactly)."""
        for k in range(3):
            grad[w, 6 * p + k] = grad[w, 6 * p + k] + sign * f[k]
            grad[w, 6 * p + 3 + k] = grad[w, 6 * p + 3 + k] + sign * t[k]

    @ti.func
    def add_gradient(w: ti.i32, wm: ti.i32, a: ti.i32, b: ti.i32, pa: ti.i32, pb: ti.i32, f: rvec3, ta: rvec3, tb: rvec3,
                     body_inv_mass: ti.template(), grad: ti.template()):
        """grad -= J^T gamma for rows between bodies a and b (block positions pa, pb): their
        total impulse f on b (world frame; -f on a) and its moments ta = sum r_a x f_i,
        tb = sum r_b x f_i about each body's centre of mass."""
        if body_inv_mass[wm, a] > 0.0:
            add_gradient_side(w, pa, f, ta, 1.0, grad)
        if body_inv_mass[wm, b] > 0.0:
            add_gradient_side(w, pb, f, tb, -1.0, grad)

    @ti.func
    def hessian_a(w: ti.i32, pa: ti.i32, A: rmat3, ASa: rmat3, SASa: rmat3, H: ti.template()):
        """Body a's diagonal block of a run of rows (add_hessian)."""
        add_block(H, w, pa, pa, 1.0, A, ASa, ASa, SASa, True)

    @ti.func
    def hessian_b(w: ti.i32, pb: ti.i32, A: rmat3, ASa: rmat3, SASa: rmat3, d: rvec3, H: ti.template()):
        """Body b's diagonal block of a run of rows (add_hessian)."""
        ASb = ASa + times_skew(A, d)
        X = skew_times(d, ASa)
        add_block(H, w, pb, pb, 1.0, A, ASb, ASb, SASa + X + X.transpose() + skew_times(d, times_skew(A, d)), True)

    @ti.func
    def hessian_ab(w: ti.i32, pa: ti.i32, pb: ti.i32, A: rmat3, ASa: rmat3, SASa: rmat3, d: rvec3, H: ti.template()):
        """The off-diagonal block of a run of rows between two mobile bodies (add_hessian), in
        the lower triangle: block row max(pa, pb)."""
        ASb = ASa + times_skew(A, d)
        X = skew_times(d, ASa)
        if pa > pb:
            add_block(H, w, pa, pb, -1.0, A, ASb, ASa, SASa + X.transpose(), False)
        else:
            add_block(H, w, pb, pa, -1.0, A, ASa, ASb, SASa + X, False)

    @ti.func
    def hessian_arm(mobile_a: ti.i32, ra: rvec3, rb: rvec3):
        """(arm, d): the arm about which a row's Hessian moments are taken (contact_terms,
        add_hessian) and b's arm less it: a's arm and d = r_b - r_a while body a is mobile,
        else b's own arm and d = 0. An immobile body's arms reach from its origin, metres away
        for a half-space or a table: moments about them, shifted to b by d, cancel all but the
        last digits in float32 (the twist block of a body 1.2 m from a half-space's origin came
        out negative, and its factor NaN, from a deep start on vulkan)."""
        return ti.select(mobile_a, ra, rb), ti.select(mobile_a, rb - ra, rvec3(0.0))

    @ti.func
    def add_hessian(w: ti.i32, wm: ti.i32, a: ti.i32, b: ti.i32, pa: ti.i32, pb: ti.i32, A: rmat3, ASa: rmat3, SASa: rmat3,
                    d: rvec3, body_inv_mass: ti.template(), H: ti.template()):
        """H += sum_i J_i^T G_i J_i for rows between bodies a and b, from the moments of
        A_i = F_i^T G_i F_i about the arms r_i of hessian_arm (a's while a is mobile): A = sum A_i,
        ASa = sum A_i [r_i], SASa = sum [r_i] A_i [r_i]. b's arms are r_i + d (the rows share
        their point), so with X = [d] ASa: sum A_i [r_b,i] = ASa + A [d], sum [r_b,i] A_i [r_b,i]
        = SASa + X + X^T + [d] A [d], sum [r_a,i] A_i [r_b,i] = SASa + X^T."""
        if body_inv_mass[wm, a] > 0.0:
            hessian_a(w, pa, A, ASa, SASa, H)
        if body_inv_mass[wm, b] > 0.0:
            hessian_b(w, pb, A, ASa, SASa, d, H)
        if body_inv_mass[wm, a] > 0.0 and body_inv_mass[wm, b] > 0.0:
            hessian_ab(w, pa, pb, A, ASa, SASa, d, H)

    @ti.func
    def update_entry(H: ti.template(), w: ti.i32, I: ti.i32, J: ti.i32, K: ti.i32, r: ti.i32, c: ti.i32):
        """Entry (r, c) of H[I, J] -= L[I, K] L[J, K]^T (6x6 blocks at positions; L in H's lower
        blocks)."""
        x = ti.cast(0.0, real)
        for k in ti.static(range(6)):
            x += H[w, 6 * I + r, 6 * K + k] * H[w, 6 * J + c, 6 * K + k]
        H[w, 6 * I + r, 6 * J + c] = H[w, 6 * I + r, 6 * J + c] - x

    @ti.func
    def scale_block_row(w: ti.i32, I: ti.i32, H: ti.template(), scale: ti.template(), rows: ti.template(),
                        row_len: ti.template()):
        """Jacobi scaling D H D of the pattern blocks of block row I (scale = D, diagonal)."""
        for n in range(row_len[w, I] + 1):
            K = I if n == row_len[w, I] else rows[w, I, n]
            S, si, sk = load_block(H, w, I, K), load_segment(scale, w, I), load_segment(scale, w, K)
            for r in ti.static(range(6)):  # loads first, then the stores (load_block's note)
                for c in ti.static(range(6)):
                    H[w, 6 * I + r, 6 * K + c] = S[r, c] * (si[r] * sk[c])

    @ti.func
    def factor_diagonal(w: ti.i32, J: ti.i32, H: ti.template()):
        """The dense Cholesky factor of the (updated) diagonal block J, in place (lower
        triangle), computed on the block loaded once (load_block)."""
        store_lower(H, w, J, cholesky_block(load_block(H, w, J, J)))

    @ti.func
    def store_lower(H: ti.template(), w: ti.i32, J: ti.i32, L: rmat6):
        """The lower triangle of L to the diagonal block J of H (the factor reads no other part
        of it)."""
        for r in ti.static(range(6)):
            for c in ti.static(range(r + 1)):
                H[w, 6 * J + r, 6 * J + c] = L[r, c]

    @ti.func
    def cholesky_block(S: rmat6) -> rmat6:
        """The dense Cholesky factor (lower triangle; the upper is S's) of the 6x6 block S,
        reading S's lower triangle only; pivots floored at `tiny`."""
        L = S
        for j in ti.static(range(6)):
            d = L[j, j]
            for k in ti.static(range(j)):
                d -= L[j, k] * L[j, k]
            d = ti.sqrt(ti.max(d, tiny))
            L[j, j] = d
            for i in ti.static(range(j + 1, 6)):
                x = L[i, j]
                for k in ti.static(range(j)):
                    x -= L[i, k] * L[j, k]
                L[i, j] = x / d
        return L

    @ti.func
    def solve_right(S: rmat6, L: rmat6) -> rmat6:
        """X with X L^T = S (L lower triangular: a factored diagonal block), row by row by
        forward substitution."""
        X = S
        for r in ti.static(range(6)):
            for jj in ti.static(range(6)):
                x = X[r, jj]
                for k in ti.static(range(jj)):
                    x -= X[r, k] * L[jj, k]
                X[r, jj] = x / L[jj, jj]
        return X

    @ti.func
    def minus_product(C: rmat6, a: rmat6, b: rmat6, diagonal: ti.template()) -> rmat6:
        """C - a b^T, each entry's six products summed in column order (update_entry's sums);
        the lower triangle only for a diagonal block (the rest is C's)."""
        X = C
        for r in ti.static(range(6)):
            for c in ti.static(range(r + 1 if diagonal else 6)):
                X[r, c] -= (a[r, 0] * b[c, 0] + a[r, 1] * b[c, 1] + a[r, 2] * b[c, 2] + a[r, 3] * b[c, 3]
                            + a[r, 4] * b[c, 4] + a[r, 5] * b[c, 5])
        return X

    @ti.func
    def factor_row(w: ti.i32, I: ti.i32, J: ti.i32, r: ti.i32, H: ti.template(), padj: ti.template(), rows: ti.template(),
                   row_len: ti.template()):
        """Row r of the factor's block L[I, J] (I > J, on the pattern): the updates by the
        columns K < J that I and J share, then the solve X L_JJ^T = S, with factor_and_solve's
        arithmetic (minus_product, then solve_right) on the row held in registers. The rows of
        every I are independent (they read only columns K <= J, already factored): the block
        schedule gives each to a lane."""
        x = rvec6([H[w, 6 * I + r, 6 * J + c] for c in ti.static(range(6))])
        for n in range(row_len[w, I]):
            K = rows[w, I, n]
            if K < J and padj[w, J, K] == 1:
                a = rvec6([H[w, 6 * I + r, 6 * K + k] for k in ti.static(range(6))])
                b = load_block(H, w, J, K)
                for c in ti.static(range(6)):
                    x[c] -= a[0] * b[c, 0] + a[1] * b[c, 1] + a[2] * b[c, 2] + a[3] * b[c, 3] + a[4] * b[c, 4] + a[5] * b[c, 5]
        L = load_block(H, w, J, J)
        for jj in ti.static(range(6)):
            y = x[jj]
            for k in ti.static(range(jj)):
                y -= x[k] * L[jj, k]
            x[jj] = y / L[jj, jj]
        for c in ti.static(range(6)):
            H[w, 6 * I + r, 6 * J + c] = x[c]

    @ti.func
    def subtract_row_product(w: ti.i32, I: ti.i32, K: ti.i32, r: ti.i32, transposed: ti.template(), H: ti.template(),
                             dv: ti.template()):
        """dv[6I + r] -= row r of A times dv[6K:6K + 6], A the factor's block L[I, K]
        (transposed = False: the forward solve) or L[K, I]^T (True: the backward solve), summed
        in column order."""
        x = ti.cast(0.0, real)
        for k in ti.static(range(6)):
            if ti.static(transposed):
                x += H[w, 6 * K + k, 6 * I + r] * dv[w, 6 * K + k]
            else:
                x += H[w, 6 * I + r, 6 * K + k] * dv[w, 6 * K + k]
        dv[w, 6 * I + r] = dv[w, 6 * I + r] - x

    @ti.func
    def forward_diagonal(w: ti.i32, I: ti.i32, H: ti.template(), dv: ti.template()):
        """dv[6I:6I + 6] = L[I, I]^-1 dv[6I:6I + 6] (forward substitution on the factored
        diagonal block, loaded once)."""
        x = forward_solve(load_block(H, w, I, I), load_segment(dv, w, I))
        store_segment(dv, w, I, x)

    @ti.func
    def load_segment(x: ti.template(), w: ti.i32, I: ti.i32) -> rvec6:
        """x[w, 6I:6I + 6] as a local vector (its loads issued together, as load_block's)."""
        return rvec6([x[w, 6 * I + r] for r in ti.static(range(6))])

    @ti.func
    def store_segment(x: ti.template(), w: ti.i32, I: ti.i32, y: rvec6):
        """x[w, 6I:6I + 6] = y (load_segment's inverse)."""
        for r in ti.static(range(6)):
            x[w, 6 * I + r] = y[r]

    @ti.func
    def forward_solve(L: rmat6, b: rvec6) -> rvec6:
        """L^-1 b, L lower triangular (forward substitution)."""
        x = b
        for r in ti.static(range(6)):
            y = x[r]
            for k in ti.static(range(r)):
                y -= L[r, k] * x[k]
            x[r] = y / L[r, r]
        return x

    @ti.func
    def backward_solve(L: rmat6, b: rvec6) -> rvec6:
        """L^-T b, L lower triangular (back substitution)."""
        x = b
        for i in ti.static(range(5, -1, -1)):
            y = x[i]
            for k in ti.static(range(i + 1, 6)):
                y -= L[k, i] * x[k]
            x[i] = y / L[i, i]
        return x

    @ti.func
    def minus_block_times(x: rvec6, A: rmat6, y: rvec6, transposed: ti.template()) -> rvec6:
        """x - A y (transposed: x - A^T y), each row's six products summed in column order from
        zero (subtract_row_product's sums)."""
        out = x
        for r in ti.static(range(6)):
            t = ti.cast(0.0, real)
            for k in ti.static(range(6)):
                if ti.static(transposed):
                    t += A[k, r] * y[k]
                else:
                    t += A[r, k] * y[k]
            out[r] -= t
        return out

    @ti.func
    def backward_diagonal(w: ti.i32, I: ti.i32, H: ti.template(), dv: ti.template()):
        """dv[6I:6I + 6] = L[I, I]^-T dv[6I:6I + 6] (back substitution on the factored diagonal
        block, loaded once)."""
        x = backward_solve(load_block(H, w, I, I), load_segment(dv, w, I))
        store_segment(dv, w, I, x)

    @ti.func
    def triangular_solves(w: ti.i32, P0: ti.i32, P1: ti.i32, H: ti.template(), grad: ti.template(), dv: ti.template(),
                          scale: ti.template(), rows: ti.template(), row_len: ti.template()):
        """dv = -D (L L^T)^-1 D grad from the factor L in H: forward by block rows (each row's
        updates by the earlier blocks in ascending order), backward by block columns from the
        last (once x_K is solved, every block row K's pattern names takes its update): the
        order of the block schedule's parallel solves, whose sums are these to the bit. Block
        rows [P0, P1) only: an island's (its pattern stays inside)."""
        for I in range(P0, P1):  # forward: L y = -D grad
            x = rvec6([-scale[w, 6 * I + r] * grad[w, 6 * I + r] for r in ti.static(range(6))])
            for n in range(row_len[w, I]):
                K = rows[w, I, n]
                x = minus_block_times(x, load_block(H, w, I, K), load_segment(dv, w, K), False)
            x = forward_solve(load_block(H, w, I, I), x)
            store_segment(dv, w, I, x)
        for KK in range(P0, P1):  # backward: L^T x = y, dv = D x
            K = P1 - 1 - (KK - P0)
            x = backward_solve(load_block(H, w, K, K), load_segment(dv, w, K))
            store_segment(dv, w, K, x)
            for n in range(row_len[w, K]):
                I = rows[w, K, n]
                y = minus_block_times(load_segment(dv, w, I), load_block(H, w, K, I), x, True)
                store_segment(dv, w, I, y)
        for i in range(6 * P0, 6 * P1):
            dv[w, i] = dv[w, i] * scale[w, i]

    @ti.func
    def load_block(H: ti.template(), w: ti.i32, I: ti.i32, K: ti.i32) -> rmat6:
        """The 6x6 block H[I, K] (block positions) as a local matrix: its 36 loads issued
        together. (On cpu every store to an ndarray makes LLVM reload the array's pointer and
        shape before the next access, as it cannot tell them apart from the stored data: a
        load between two stores costs several.) Static loops over a block's entries are
        nested: one of 36 iterations would pass Taichi's unrolling_limit (32) and warn."""
        return rmat6([[H[w, 6 * I + r, 6 * K + k] for k in ti.static(range(6))] for r in ti.static(range(6))])

    @ti.func
    def factor_and_solve(w: ti.i32, P0: ti.i32, P1: ti.i32, H: ti.template(), grad: ti.template(), dv: ti.template(),
                         scale: ti.template(), padj: ti.template(), rows: ti.template(), row_len: ti.template()):
        """dv = -H^-1 grad on the block rows and columns [P0, P1) (an island's: no pattern block
        leaves it): Jacobi scaling, then a block Cholesky factorisation in place (lower
        triangle, 6x6 blocks of the filled pattern only: padj[w, I, K] in positions, and rows[w,
        I, :row_len[w, I]] the K < I of block row I) and two block triangular solves."""
        for i in range(6 * P0, 6 * P1):
            scale[w, i] = 1.0 / ti.sqrt(H[w, i, i])
        for I in range(P0, P1):
            scale_block_row(w, I, H, scale, rows, row_len)
        for J in range(P0, P1):  # each block updated in registers and stored once
            D = load_block(H, w, J, J)
            for n in range(row_len[w, J]):
                a = load_block(H, w, J, rows[w, J, n])
                D = minus_product(D, a, a, True)
            L = cholesky_block(D)
            store_lower(H, w, J, L)
            for I in range(J + 1, P1):  # factor_row's arithmetic, all six rows' updates first
                if padj[w, I, J] == 1:
                    X = load_block(H, w, I, J)
                    for n in range(row_len[w, I]):
                        K = rows[w, I, n]
                        if K < J and padj[w, J, K] == 1:
                            X = minus_product(X, load_block(H, w, I, K), load_block(H, w, J, K), False)
                    X = solve_right(X, L)
                    for r in ti.static(range(6)):
                        for c in ti.static(range(6)):
                            H[w, 6 * I + r, 6 * J + c] = X[r, c]
        triangular_solves(w, P0, P1, H, grad, dv, scale, rows, row_len)

    @ti.func
    def zero_block_row(w: ti.i32, I: ti.i32, H: ti.template(), rows: ti.template(), row_len: ti.template()):
        """Zero the pattern blocks of block row I of H."""
        for n in range(row_len[w, I] + 1):
            K = I if n == row_len[w, I] else rows[w, I, n]
            for r in ti.static(range(6)):  # unrolled, as scale_block_row
                for s in ti.static(range(6)):
                    H[w, 6 * I + r, 6 * K + s] = 0.0

    @ti.func
    def inertia(w: ti.i32, b: ti.i32, body_inv_inertia_W: ti.template()) -> rmat3:
        """Body b's world-frame inertia [kg m^2] in `real`: the inverse of the stored inverse,
        symmetrised. (The state's R I^-1 R^T is symmetric only to its float32 round-off; with
        the asymmetric part the gradient's I w and the line search's (I dw) . w disagree by
        ~1e-8 of either, and the line search of a lone sphere on the ground stalled at a
        residual of 1e-9 m/s, taking its own round-off for an uphill slope.)"""
        A = ti.cast(body_inv_inertia_W[w, b], real).inverse()
        return 0.5 * (A + A.transpose())

    @ti.func
    def mass_gradient(w: ti.i32, p: ti.i32, inv_m: real, I_W: rmat3, v: ti.template(), vs: ti.template(), grad: ti.template()):
        """Body b's (at offset p = 6 position) gradient M (v - v*) of l, from its inverse mass
        inv_m and world-frame inertia I_W (zero for an immobile body, inv_m = 0: it keeps its
        velocity)."""
        if inv_m > 0.0:
            dvl = rvec3(0.0)
            dwl = rvec3(0.0)
            for k in ti.static(range(3)):
                dvl[k] = v[w, p + k] - vs[w, p + k]
                dwl[k] = v[w, p + 3 + k] - vs[w, p + 3 + k]
            Iw = mat_vec(I_W, dwl)
            for k in ti.static(range(3)):
                grad[w, p + k] = dvl[k] / inv_m
                grad[w, p + 3 + k] = Iw[k]
        else:
            for k in ti.static(range(6)):
                grad[w, p + k] = 0.0

    @ti.func
    def mass_hessian(w: ti.i32, p: ti.i32, inv_m: real, I_W: rmat3, H: ti.template()):
        """Body b's diagonal block M of H (as mass_gradient; the identity for an immobile body)."""
        if inv_m > 0.0:
            for k in ti.static(range(3)):
                H[w, p + k, p + k] = 1.0 / inv_m
            for r, s in ti.static(ti.ndrange(3, 3)):
                H[w, p + 3 + r, p + 3 + s] = I_W[r, s]
        else:
            for k in ti.static(range(6)):
                H[w, p + k, p + k] = 1.0

    @ti.func
    def body_mass(w: ti.i32, wm: ti.i32, b: ti.i32, body_inv_mass: ti.template(), body_inv_inertia_W: ti.template()):
        """(inv_m, I_W): body b's inverse mass [1/kg] and world-frame inertia [kg m^2] in
        `real` (I_W only where the body is mobile)."""
        inv_m = ti.cast(body_inv_mass[wm, b], real)
        I_W = rmat3(0.0)
        if inv_m > 0.0:
            I_W = inertia(w, b, body_inv_inertia_W)
        return inv_m, I_W

    @ti.func
    def mass_terms(w: ti.i32, wm: ti.i32, b: ti.i32, p: ti.i32, v: ti.template(), vs: ti.template(), body_inv_mass: ti.template(),
                   body_inv_inertia_W: ti.template(), grad: ti.template(), H: ti.template()):
        """Body b's (at offset p = 6 position) gradient M (v - v*) and diagonal block M of l
        (identity and zero gradient for an immobile body: it keeps its velocity)."""
        inv_m, I_W = body_mass(w, wm, b, body_inv_mass, body_inv_inertia_W)
        mass_gradient(w, p, inv_m, I_W, v, vs, grad)
        mass_hessian(w, p, inv_m, I_W, H)

    @ti.func
    def contact_terms(u: rvec3, g: real, reg: contact_reg, modified: ti.i32, F: rmat3, ra: rvec3, rb: rvec3, arm: rvec3):
        """One contact's impulse and curvature in the world frame: f = F^T gamma (on b), its
        moments ra x f and rb x f, A = F^T G F, A [arm] and [arm] A [arm] (add_hessian's sums;
        arm: hessian_arm's)."""
        gamma, G = response(u, g, reg, modified)
        f, ta, tb = row_force(gamma, F, ra, rb)
        A, AS, SAS = row_curvature(G, F, arm)
        return f, ta, tb, A, AS, SAS

    @ti.func
    def row_force(gamma: rvec3, F: rmat3, ra: rvec3, rb: rvec3):
        """A contact's impulse gamma (contact frame) in the world frame, f = F^T gamma (on b), and
        its moments ra x f and rb x f (add_gradient's sums)."""
        f = mat_t_vec(F, gamma)
        return f, ra.cross(f), rb.cross(f)

    @ti.func
    def row_curvature(G: rmat3, F: rmat3, arm: rvec3):
        """A contact's curvature G (contact frame) as add_hessian sums it: A = F^T G F, A [arm]
        and [arm] A [arm] (arm: hessian_arm's)."""
        A = mat_mat(mat_t_mat(F, G), F)
        AS = times_skew(A, arm)
        return A, AS, skew_times(arm, AS)

    @ti.func
    def bilateral_row(w: ti.i32, wm: ti.i32, j: ti.i32, b_ids: ti.template(), b_Ja: ti.template(), b_Jb: ti.template(),
                      b_law: ti.template(), body_inv_mass: ti.template(), pos: ti.template(), v: ti.template()):
        """Bilateral row j at the iterate v: (pa, pb) block positions, (mobile_a, mobile_b),
        its Jacobians (ja, jb) and (gamma, G) of its law."""
        ids = b_ids[j]
        a, b = ids[ID_A], ids[ID_B]
        mobile_a = a >= 0 and body_inv_mass[wm, ti.max(a, 0)] > 0.0
        mobile_b = body_inv_mass[wm, b] > 0.0
        pa = pos[w, ti.max(a, 0)]
        pb = pos[w, b]
        ja, jb = ti.cast(b_Ja[j], real), ti.cast(b_Jb[j], real)
        u = row_u(w, 6 * pa if a >= 0 else -1, 6 * pb, ja, jb, v)
        gamma, G = bilateral_response(u, b_law[j])
        return pa, pb, mobile_a, mobile_b, ja, jb, gamma, G

    @ti.func
    def bilateral_impulse(w: ti.i32, wm: ti.i32, j: ti.i32, b_ids: ti.template(), b_Ja: ti.template(), b_Jb: ti.template(),
                          b_law: ti.template(), body_inv_mass: ti.template(), pos: ti.template(), v: ti.template()) -> real:
        """Bilateral row j's impulse gamma [N s] at the iterate v."""
        _pa, _pb, _ma, _mb, _ja, _jb, gamma, _G = bilateral_row(w, wm, j, b_ids, b_Ja, b_Jb, b_law, body_inv_mass, pos, v)
        return gamma

    @ti.func
    def bilateral_side(w: ti.i32, p: ti.i32, jac: rvec6, gamma: real, G: real, grad: ti.template(), H: ti.template()):
        """One mobile body's part of a bilateral row: grad -= jac gamma, its diagonal block
        += G jac jac^T."""
        bilateral_gradient(w, p, jac, gamma, grad)
        add_outer(H, w, p, p, G, jac, jac, True)

    @ti.func
    def bilateral_gradient(w: ti.i32, p: ti.i32, jac: rvec6, gamma: real, grad: ti.template()):
        """One mobile body's part of a bilateral row's gradient: grad -= jac gamma."""
        for k in ti.static(range(6)):
            grad[w, 6 * p + k] = grad[w, 6 * p + k] - jac[k] * gamma

    @ti.func
    def bilateral_pair(w: ti.i32, pa: ti.i32, pb: ti.i32, ja: rvec6, jb: rvec6, G: real, H: ti.template()):
        """The off-diagonal block of a bilateral row between two mobile bodies (lower triangle)."""
        if pa > pb:
            add_outer(H, w, pa, pb, G, ja, jb, False)
        else:
            add_outer(H, w, pb, pa, G, jb, ja, False)

    @ti.func
    def mass_directional(w: ti.i32, wm: ti.i32, b: ti.i32, p: ti.i32, v: ti.template(), vs: ti.template(), dv: ti.template(),
                         body_inv_mass: ti.template(), body_inv_inertia_W: ti.template(), dMd: real, dMv: real):
        """(dMd, dMv) plus body b's terms of dv^T M dv and dv^T M (v - v*) (the quadratic part
        of the line search's phi'(alpha)); an immobile body adds none."""
        inv_m = ti.cast(body_inv_mass[wm, b], real)
        sum_d, sum_v = dMd, dMv
        if inv_m > 0.0:
            I_W = inertia(w, b, body_inv_inertia_W)
            dvl = rvec3(dv[w, p], dv[w, p + 1], dv[w, p + 2])
            dwl = rvec3(dv[w, p + 3], dv[w, p + 4], dv[w, p + 5])
            xv = rvec3(v[w, p] - vs[w, p], v[w, p + 1] - vs[w, p + 1], v[w, p + 2] - vs[w, p + 2])
            xw = rvec3(v[w, p + 3] - vs[w, p + 3], v[w, p + 4] - vs[w, p + 4], v[w, p + 5] - vs[w, p + 5])
            Idw = mat_vec(I_W, dwl)
            sum_d += dvl.dot(dvl) / inv_m + dwl.dot(Idw)
            sum_v += dvl.dot(xv) / inv_m + Idw.dot(xw)
        return sum_d, sum_v

    @ti.func
    def bilateral_directional(w: ti.i32, j: ti.i32, alpha: real, b_ids: ti.template(), b_Ja: ti.template(), b_Jb: ti.template(),
                              b_law: ti.template(), pos: ti.template(), v: ti.template(), dv: ti.template()):
        """Bilateral row j's terms (-gamma jd, G jd^2) of phi'(alpha) and phi''(alpha), jd = J dv."""
        ids = b_ids[j]
        a = ids[ID_A]
        pa = 6 * pos[w, ti.max(a, 0)] if a >= 0 else -1
        pb = 6 * pos[w, ids[ID_B]]
        ja, jb = ti.cast(b_Ja[j], real), ti.cast(b_Jb[j], real)
        jd = row_u(w, pa, pb, ja, jb, dv)
        gamma, G = bilateral_response(row_u(w, pa, pb, ja, jb, v) + alpha * jd, b_law[j])
        return -(gamma * jd), G * jd * jd

    @ti.func
    def contact_cost(u: rvec3, g: real, reg: contact_reg) -> real:
        """One contact's term of the cost l(v; g) [J] at its velocity u (the integral of
        -gamma(u) that response() differentiates): (vhat - u_n)_+^2 / (2 R_n) plus the
        Huber function of the slip, |u_t|^2 / (2 R_t) up to g R_t, then g |u_t| - g^2 R_t / 2."""
        Rt, Rn, vhat = ti.cast(reg[R_RT], real), ti.cast(reg[R_RN], real), ti.cast(reg[R_VHAT], real)
        x = ti.max(vhat - u[2], 0.0)
        slip = ti.sqrt(u[0] * u[0] + u[1] * u[1])
        return x * x / (2.0 * Rn) + ti.select(slip <= g * Rt, slip * slip / (2.0 * Rt), g * slip - 0.5 * g * g * Rt)

    @ti.func
    def step_body(w: ti.i32, p: ti.i32, alpha: real, v: ti.template(), dv: ti.template()):
        """v += alpha dv for the body at offset p."""
        for k in ti.static(range(6)):
            v[w, p + k] = v[w, p + k] + alpha * dv[w, p + k]

    @ti.func
    def body_residual(w: ti.i32, wm: ti.i32, b: ti.i32, p: ti.i32, grad: ti.template(), body_inv_mass: ti.template(),
                      body_inv_inertia_W: ti.template(), body_reach: ti.template()) -> real:
        """The stopping test's measure for body b (at offset p): how far its points would move
        [m/s] if the unbalanced impulse -grad[w, p:p + 6] (force and moment parts) acted on it
        alone, cone.body_change of M_b^-1 grad (0 for an immobile body, whose gradient is 0)."""
        out = ti.cast(0.0, real)
        inv_m = body_inv_mass[wm, b]
        if inv_m > 0.0:
            lin = ti.cast(inv_m, real) * rvec3(grad[w, p], grad[w, p + 1], grad[w, p + 2])
            ang = mat_vec(ti.cast(body_inv_inertia_W[w, b], real), rvec3(grad[w, p + 3], grad[w, p + 4], grad[w, p + 5]))
            out = ti.cast(body_change(ti.cast(lin, float), ti.cast(ang, float), body_reach[b]), real)
        return out

    @ti.func
    def body_step(w: ti.i32, b: ti.i32, p: ti.i32, dv: ti.template(), body_reach: ti.template()) -> real:
        """How far body b's points would move [m/s] under its part of the full Newton step dv
        (at offset p): cone.body_change."""
        lin = rvec3(dv[w, p], dv[w, p + 1], dv[w, p + 2])
        ang = rvec3(dv[w, p + 3], dv[w, p + 4], dv[w, p + 5])
        return ti.cast(body_change(ti.cast(lin, float), ti.cast(ang, float), body_reach[b]), real)

    @ti.func
    def set_bound(c: ti.i32, c_u: ti.template(), c_reg: ti.template(), c_bound: ti.template()):
        """Contact c's friction bound at its velocity u: g = mu gamma_n(u)."""
        reg = c_reg[c]
        gamma_n = ti.max(ti.cast(reg[R_VHAT], real) - c_u[c][2], 0.0) / ti.cast(reg[R_RN], real)
        c_bound[c] = ti.cast(reg[R_MU], real) * gamma_n

    @ti.func
    def step_contact(c: ti.i32, alpha: real, c_u: ti.template(), c_jdv: ti.template(), c_reg: ti.template(),
                     c_bound: ti.template()):
        """u += alpha J dv for contact c, then its bound g = mu gamma_n(u)."""
        c_u[c] = c_u[c] + alpha * c_jdv[c]
        set_bound(c, c_u, c_reg, c_bound)

    @ti.func
    def search_update(alpha: real, lo: real, hi: real, d0: real, d1: real, d2: real):
        """One update of the exact line search on phi(alpha) (SAP's safeguarded Newton on
        phi'), given phi'(0) = d0 < 0 and, at the current alpha, phi'(alpha) = d1 and
        phi''(alpha) = d2; [lo, hi] brackets the minimum. Returns (alpha, lo, hi, done): done = 1
        when alpha is the step (|d1| <= LINE_SEARCH_RTOL |d0|, or phi still falls at ALPHA_MAX),
        else the bracket shrinks to the side of the minimum and alpha moves to the Newton point
        alpha - d1 / d2, or to the bracket's middle where that is not inside it."""
        a, l, h = alpha, lo, hi
        done = 0
        if ti.abs(d1) <= LINE_SEARCH_RTOL * ti.abs(d0):
            done = 1
        else:
            if d1 < 0.0:
                l = a
                if a >= ALPHA_MAX:
                    done = 1
            else:
                h = a
            if done == 0:
                nxt = 0.5 * (l + h)
                if d2 > 0.0:
                    nxt = a - d1 / d2
                if not (l < nxt and nxt < h):
                    nxt = 0.5 * (l + h)
                a = nxt
        return a, l, h, done

    @ti.func
    def load_velocity(w: ti.i32, b: ti.i32, p: ti.i32, body_vc: ti.template(), body_wc: ti.template(), v: ti.template()):
        """v[w, p:p + 6] = body b's (v, w) in `real`."""
        for k in ti.static(range(3)):
            v[w, p + k] = ti.cast(body_vc[w, b][k], real)
            v[w, p + 3 + k] = ti.cast(body_wc[w, b][k], real)

    @ti.func
    def store_velocity(w: ti.i32, b: ti.i32, p: ti.i32, v: ti.template(), body_vc: ti.template(), body_wc: ti.template()):
        """Body b's (v, w) = v[w, p:p + 6], in the state's precision."""
        body_vc[w, b] = ti.cast(rvec3(v[w, p], v[w, p + 1], v[w, p + 2]), float)
        body_wc[w, b] = ti.cast(rvec3(v[w, p + 3], v[w, p + 4], v[w, p + 5]), float)

    @ti.func
    def apply_bilateral_side(w: ti.i32, wm: ti.i32, j: ti.i32, side: ti.template(), b_ids: ti.template(), b_Ja: ti.template(),
                             b_Jb: ti.template(), b_gamma: ti.template(), body_vc: ti.template(), body_wc: ti.template(),
                             body_inv_mass: ti.template(), body_inv_inertia_W: ti.template()):
        """v += M^-1 J^T gamma of side `side` (0: body a, 1: body b) of bilateral row j, gamma =
        b_gamma[j]; nothing for the world (body < 0) or an immobile body."""
        ids = b_ids[j]
        body = ids[ID_A] if ti.static(side == 0) else ids[ID_B]
        jac = b_Ja[j] if ti.static(side == 0) else b_Jb[j]
        if body >= 0 and body_inv_mass[wm, ti.max(body, 0)] > 0.0:
            g = b_gamma[j]
            lin = vec3(jac[0], jac[1], jac[2]) * g
            ang = vec3(jac[3], jac[4], jac[5]) * g
            body_vc[w, body] = body_vc[w, body] + body_inv_mass[wm, body] * lin
            body_wc[w, body] = body_wc[w, body] + body_inv_inertia_W[w, body] @ ang

    @ti.func
    def find_root(w: ti.i32, b: ti.i32, parent: ti.template()) -> ti.i32:
        """The root of body b's tree in the union-find forest parent[w, :] (a root is its own
        parent), halving the path on the way."""
        x = b
        while parent[w, x] != x:
            parent[w, x] = parent[w, parent[w, x]]
            x = parent[w, x]
        return x

    @ti.func
    def row_island(w: ti.i32, wm: ti.i32, a: ti.i32, b: ti.i32, body_inv_mass: ti.template(), newton_island: ti.template()) -> ti.i32:
        """The island of a row between bodies a (< 0: the world) and b: its mobile body's (a's
        when both are; they share one), else b's (an immobile body's own island)."""
        out = newton_island[w, b]
        if a >= 0 and body_inv_mass[wm, ti.max(a, 0)] > 0.0:
            out = newton_island[w, a]
        return out

    @ti.func
    def has_bit(adj: ti.template(), w: ti.i32, row: ti.i32, b: ti.i32) -> ti.i32:
        """1 when bit b of the bit-mask row `row` of newton_adj is set (word b // 32, bit b % 32)."""
        return (adj[w, row, b // 32] >> (b % 32)) & 1

    @ti.func
    def order_bodies(w: ti.i32, start: ti.i32, end: ti.i32, jstart: ti.i32, jend: ti.i32, B: ti.i32, c_ids: ti.template(),
                     b_ids: ti.template(), body_inv_mass: ti.template(), wm: ti.i32, newton_adj: ti.template(),
                     newton_pos: ti.template(), newton_deg: ti.template()):
        """Minimum-degree elimination order of the world's bodies on its row graph (bodies
        joined by a contact row [start, end) or a bilateral row [jstart, jend), both mobile):
        newton_pos[w, b] = the body's block position.
        The graph is kept as bit masks, newton_adj[w, b, k] bit j = an edge from b to body
        32 k + j (row B: the bodies not yet ordered), so that eliminating a body merges its
        neighbours' rows a word at a time; the filled graph (the block pattern of the Cholesky
        factor, block_pattern) stays there, by body. Ties go to the lower body index:
        deterministic. Fill joins only bodies of one island (connected component): the
        elimination order restricted to an island is the order it gets alone."""
        words = (B + 31) // 32
        for b, k in ti.ndrange(B, words):
            newton_adj[w, b, k] = 0
        for k in range(words):  # every body still to order
            left = B - 32 * k
            newton_adj[w, B, k] = -1 if left >= 32 else (1 << left) - 1
        for c in range(start, end + jend - jstart):
            ids = c_ids[c] if c < end else b_ids[jstart + c - end]
            a, b = ids[ID_A], ids[ID_B]
            if a >= 0 and body_inv_mass[wm, ti.max(a, 0)] > 0.0 and body_inv_mass[wm, b] > 0.0:  # a < 0: the world
                newton_adj[w, a, b // 32] |= 1 << (b % 32)
                newton_adj[w, b, a // 32] |= 1 << (a % 32)
        for b in range(B):
            d = 0
            for k in range(words):
                d += ti.math.popcnt(newton_adj[w, b, k])
            newton_deg[w, b] = d
            newton_pos[w, b] = -1
        for t in range(B):
            best = -1
            for b in range(B):
                if newton_pos[w, b] < 0:
                    if best < 0 or newton_deg[w, b] < newton_deg[w, best]:
                        best = b
            newton_pos[w, best] = t
            newton_adj[w, B, best // 32] &= ~(1 << (best % 32))
            for i in range(B):  # its remaining neighbours become a clique (the fill)
                if has_bit(newton_adj, w, best, i) == 1 and newton_pos[w, i] < 0:
                    d = 0
                    for k in range(words):
                        row = newton_adj[w, i, k] | (newton_adj[w, best, k] & newton_adj[w, B, k])
                        if k == i // 32:
                            row &= ~(1 << (i % 32))
                        newton_adj[w, i, k] = row
                        d += ti.math.popcnt(row & newton_adj[w, B, k])
                    newton_deg[w, i] = d

    @ti.func
    def block_pattern(w: ti.i32, B: ti.i32, newton_adj: ti.template(), newton_pos: ti.template(), newton_padj: ti.template(),
                      newton_rows: ti.template(), newton_row_len: ti.template()):
        """The Cholesky factor's block pattern by position from the filled graph newton_adj
        (order_bodies) and the positions newton_pos: newton_padj[w, I, K] = 1 where block (I, K)
        is stored, and the row lists newton_rows[w, I, :newton_row_len[w, I]] (positions K < I,
        ascending)."""
        for i, j in ti.ndrange(B, B):
            newton_padj[w, newton_pos[w, i], newton_pos[w, j]] = has_bit(newton_adj, w, i, j)
        for I in range(B):
            n = 0
            for K in range(I):
                if newton_padj[w, I, K] == 1:
                    newton_rows[w, I, n] = K
                    n += 1
            newton_row_len[w, I] = n

    return types.SimpleNamespace(**locals())


@functools.lru_cache(maxsize=None)
def world_funcs(real):
    """The passes of one world's Newton solve that run the same whatever solves for the step
    (one thread per world: the world kernel below, with the Cholesky factor, and
    solver.newton_cg's, with conjugate gradients): the islands, the warm start, the line search
    with the step and the bound update, and the solution's store. The generalized velocity of
    body b sits at 6 newton_pos[w, b] of the world's vectors.

    Each pass works on one island k of the world (group_islands): its bodies newton_body[w,
    b0:b1], its contact rows newton_row[s0:s1] and the bilateral rows of [jstart, jend) that
    newton_funcs.row_island puts in it. An island is solved alone, from its own start to its own
    stopping test, with its own line search: its velocities and impulses are those it gets in a
    world of its own, to the bit."""
    f = newton_funcs(real)

    @ti.func
    def group_islands(w: ti.i32, wm: ti.i32, start: ti.i32, end: ti.i32, jstart: ti.i32, jend: ti.i32, B: ti.i32,
                      regroup: ti.template(), c_ids: ti.template(), b_ids: ti.template(), body_inv_mass: ti.template(),
                      newton_pos: ti.template(), newton_island: ti.template(), newton_body: ti.template(),
                      newton_island_start: ti.template(), newton_row: ti.template()) -> ti.i32:
        """The world's islands: the connected components of its bodies joined by a row
        (contact or bilateral) between two mobile bodies; a body with no such row is an island
        of its own (an immobile one always). Islands are numbered in the order of their first
        body in newton_pos's order. Writes newton_island[w, b] (body b's island), the bodies
        grouped by island, each island's in newton_pos's order, to newton_body[w, :] (island k:
        newton_body[w, newton_island_start[w, k, 0]:newton_island_start[w, k + 1, 0]]), and
        the contact rows of [start, end) grouped by island, in row order (runs of one pair
        stay together), to newton_row (island k: newton_row[newton_island_start[w, k, 1]:
        newton_island_start[w, k + 1, 1]]). regroup (the Cholesky factor): the positions
        newton_pos become the grouped order too, so that an island's blocks are contiguous;
        else they are left. Returns the number of islands. newton_island_start[w, :, 2] is
        scratch."""
        for b in range(B):  # union-find: newton_island holds each body's parent
            newton_island[w, b] = b
        for c in range(start, end + jend - jstart):
            ids = c_ids[c] if c < end else b_ids[jstart + c - end]
            a, b = ids[ID_A], ids[ID_B]
            if a >= 0 and body_inv_mass[wm, ti.max(a, 0)] > 0.0 and body_inv_mass[wm, b] > 0.0:
                ra, rb = f.find_root(w, a, newton_island), f.find_root(w, b, newton_island)
                if ra != rb:
                    newton_island[w, ti.max(ra, rb)] = ti.min(ra, rb)
        for b in range(B):
            newton_island[w, b] = f.find_root(w, b, newton_island)
            newton_body[w, newton_pos[w, b]] = b  # the bodies in position order
            newton_island_start[w, b, 2] = -1  # the number of the island whose root is b
        n = 0
        for P in range(B):
            root = newton_island[w, newton_body[w, P]]
            if newton_island_start[w, root, 2] < 0:
                newton_island_start[w, root, 2] = n
                n += 1
        for k in range(n + 1):
            newton_island_start[w, k, 0] = 0
            newton_island_start[w, k, 1] = 0
        for b in range(B):  # each body reads its own root's number, then overwrites its entry
            newton_island[w, b] = newton_island_start[w, newton_island[w, b], 2]
            slot = newton_island[w, b] + 1
            newton_island_start[w, slot, 0] = newton_island_start[w, slot, 0] + 1
        for c in range(start, end):
            ids = c_ids[c]
            slot = f.row_island(w, wm, ids[ID_A], ids[ID_B], body_inv_mass, newton_island) + 1
            newton_island_start[w, slot, 1] = newton_island_start[w, slot, 1] + 1
        newton_island_start[w, 0, 1] = start
        for k in range(n):
            newton_island_start[w, k + 1, 0] = newton_island_start[w, k + 1, 0] + newton_island_start[w, k, 0]
            newton_island_start[w, k + 1, 1] = newton_island_start[w, k + 1, 1] + newton_island_start[w, k, 1]
        for k in range(n):  # cursors: the bodies
            newton_island_start[w, k, 2] = newton_island_start[w, k, 0]
        for P in range(B):  # newton_pos takes each body's slot in the grouped order
            b = newton_body[w, P]
            k = newton_island[w, b]
            newton_pos[w, b] = newton_island_start[w, k, 2]
            newton_island_start[w, k, 2] = newton_island_start[w, k, 2] + 1
        for b in range(B):
            newton_body[w, newton_pos[w, b]] = b
            if ti.static(not regroup):
                newton_pos[w, b] = b
        for k in range(n):  # cursors: the rows
            newton_island_start[w, k, 2] = newton_island_start[w, k, 1]
        for c in range(start, end):
            ids = c_ids[c]
            k = f.row_island(w, wm, ids[ID_A], ids[ID_B], body_inv_mass, newton_island)
            newton_row[newton_island_start[w, k, 2]] = c
            newton_island_start[w, k, 2] = newton_island_start[w, k, 2] + 1
        return n

    @ti.func
    def island_joints(w: ti.i32, wm: ti.i32, k: ti.i32, jstart: ti.i32, jend: ti.i32, b_ids: ti.template(),
                      body_inv_mass: ti.template(), newton_island: ti.template()) -> ti.i32:
        """The number of island k's bilateral rows."""
        n = 0
        for j in range(jstart, jend):
            ids = b_ids[j]
            if f.row_island(w, wm, ids[ID_A], ids[ID_B], body_inv_mass, newton_island) == k:
                n += 1
        return n

    @ti.func
    def apply_impulses(w: ti.i32, wm: ti.i32, k: ti.i32, s0: ti.i32, s1: ti.i32, jstart: ti.i32, jend: ti.i32, c_ids: ti.template(),
                       c_frame: ti.template(), c_ra: ti.template(), c_rb: ti.template(), c_gamma: ti.template(),
                       b_ids: ti.template(), b_Ja: ti.template(), b_Jb: ti.template(), b_gamma: ti.template(),
                       body_vc: ti.template(), body_wc: ti.template(), body_inv_mass: ti.template(),
                       body_inv_inertia_W: ti.template(), newton_row: ti.template(), newton_island: ti.template()):
        """v += M^-1 J^T gamma over island k's contact rows (impulses c_gamma, contact frame),
        then its bilateral rows (b_gamma), in row order: the warm start (the previous solve's
        impulses on v*) and the solution's store (the solved ones). One thread does every row:
        bodies are shared by rows."""
        for s in range(s0, s1):
            c = newton_row[s]
            ids = c_ids[c]
            apply_world_impulse(w, wm, ids[ID_A], ids[ID_B], c_frame[c].transpose() @ c_gamma[c], c_ra[c], c_rb[c],
                                body_vc, body_wc, body_inv_mass, body_inv_inertia_W)
        for j in range(jstart, jend):
            ids = b_ids[j]
            if f.row_island(w, wm, ids[ID_A], ids[ID_B], body_inv_mass, newton_island) == k:
                for side in ti.static(range(2)):
                    f.apply_bilateral_side(w, wm, j, side, b_ids, b_Ja, b_Jb, b_gamma, body_vc, body_wc, body_inv_mass,
                                           body_inv_inertia_W)

    @ti.func
    def load_free(w: ti.i32, B: ti.i32, body_vc: ti.template(), body_wc: ti.template(), newton_pos: ti.template(),
                  newton_v: ti.template(), newton_vs: ti.template(), newton_dv: ti.template()):
        """Every body's free velocity to newton_vs and newton_v and a zero step to newton_dv,
        before the islands' solves: the immobile bodies keep them (no island moves them), and
        the rows of every island read theirs."""
        for b in range(B):
            p = 6 * newton_pos[w, b]
            f.load_velocity(w, b, p, body_vc, body_wc, newton_vs)
            f.load_velocity(w, b, p, body_vc, body_wc, newton_v)
            for i in ti.static(range(6)):
                newton_dv[w, p + i] = 0.0

    @ti.func
    def warm_start(w: ti.i32, wm: ti.i32, k: ti.i32, b0: ti.i32, b1: ti.i32, s0: ti.i32, s1: ti.i32, jstart: ti.i32, jend: ti.i32,
                   c_ids: ti.template(), c_frame: ti.template(), c_ra: ti.template(), c_rb: ti.template(), c_reg: ti.template(),
                   c_gamma: ti.template(), b_ids: ti.template(), b_Ja: ti.template(), b_Jb: ti.template(), b_gamma: ti.template(),
                   body_vc: ti.template(), body_wc: ti.template(), body_inv_mass: ti.template(), body_inv_inertia_W: ti.template(),
                   newton_pos: ti.template(), newton_body: ti.template(), newton_row: ti.template(), newton_island: ti.template(),
                   newton_v: ti.template(), newton_vs: ti.template(), c_bound: ti.template(), c_u: ti.template()):
        """Island k: v* to newton_vs; the first iterate v0 = v* + M^-1 J^T gamma0 (the warm
        start: the contact and bilateral impulses of the previous solve) to newton_v; the bounds
        g0 = mu gamma0_n to c_bound and u = J v0 to c_u (in the first solve after a reset or
        set_state, start_island then gives the rows without a warm normal impulse their bound
        at the start). (Bounds from u0 for every row, mu gamma_n(J v0), pressed a contact
        between rigid bodies with the bound of its whole penetration speed: the iteration then
        stalled on a rigid box sliding on a table; for every row without a warm impulse, every
        step, the same box hopped and drifted in float32: start_island.)"""
        for q in range(b0, b1):
            b = newton_body[w, q]
            f.load_velocity(w, b, 6 * newton_pos[w, b], body_vc, body_wc, newton_vs)
        apply_impulses(w, wm, k, s0, s1, jstart, jend, c_ids, c_frame, c_ra, c_rb, c_gamma, b_ids, b_Ja, b_Jb, b_gamma, body_vc,
                       body_wc, body_inv_mass, body_inv_inertia_W, newton_row, newton_island)
        for s in range(s0, s1):
            c = newton_row[s]
            c_bound[c] = ti.cast(c_reg[c][R_MU] * ti.max(c_gamma[c][2], 0.0), real)
        for q in range(b0, b1):
            b = newton_body[w, q]
            f.load_velocity(w, b, 6 * newton_pos[w, b], body_vc, body_wc, newton_v)
        for s in range(s0, s1):  # u = J v, then kept up to date with each step
            c = newton_row[s]
            ids = c_ids[c]
            c_u[c] = f.contact_u(w, 6 * newton_pos[w, ids[ID_A]], 6 * newton_pos[w, ids[ID_B]], ti.cast(c_frame[c], real),
                                 ti.cast(c_ra[c], real), ti.cast(c_rb[c], real), newton_v)

    @ti.func
    def contact_cost_total(w: ti.i32, wm: ti.i32, b0: ti.i32, b1: ti.i32, s0: ti.i32, s1: ti.i32, c_reg: ti.template(),
                           body_inv_mass: ti.template(), body_inv_inertia_W: ti.template(), newton_pos: ti.template(),
                           newton_body: ti.template(), newton_row: ti.template(), newton_v: ti.template(),
                           newton_vs: ti.template(), newton_dv: ti.template(), c_bound: ti.template(), c_u: ti.template()) -> real:
        """The cost l(v; g) [J] of an island without bilateral rows at the iterate newton_v,
        its contact rows' velocities u = J v in c_u and bounds g in c_bound (newton_dv holds
        v - v* afterwards)."""
        for q in range(b0, b1):
            p = 6 * newton_pos[w, newton_body[w, q]]
            for i in ti.static(range(6)):
                newton_dv[w, p + i] = newton_v[w, p + i] - newton_vs[w, p + i]
        dMd, dMv = ti.cast(0.0, real), ti.cast(0.0, real)
        for q in range(b0, b1):
            b = newton_body[w, q]
            dMd, dMv = f.mass_directional(w, wm, b, 6 * newton_pos[w, b], newton_vs, newton_vs, newton_dv, body_inv_mass,
                                          body_inv_inertia_W, dMd, dMv)
        out = 0.5 * dMd
        for s in range(s0, s1):
            c = newton_row[s]
            out += f.contact_cost(c_u[c], c_bound[c], c_reg[c])
        return out

    @ti.func
    def choose_start(w: ti.i32, wm: ti.i32, b0: ti.i32, b1: ti.i32, s0: ti.i32, s1: ti.i32, joints: ti.i32,
                     c_ids: ti.template(), c_frame: ti.template(), c_ra: ti.template(), c_rb: ti.template(), c_reg: ti.template(),
                     body_inv_mass: ti.template(), body_inv_inertia_W: ti.template(), newton_pos: ti.template(),
                     newton_body: ti.template(), newton_row: ti.template(), newton_v: ti.template(), newton_vs: ti.template(),
                     newton_last: ti.template(), newton_kept: ti.template(), newton_grad: ti.template(),
                     newton_dv: ti.template(), c_bound: ti.template(), c_u: ti.template(), c_jdv: ti.template()) -> ti.i32:
        """The island's first iterate: of the warm start v0 (in newton_v, u0 in c_u) and the
        last solve's solution (newton_last, by body: the mobile bodies' velocities at the end of
        the previous step, SAP's start), the one of lower cost l(v; g0), both with the warm
        start's bounds. Returns 1 when it is the last solution. (newton_grad and c_jdv hold v0
        and u0 meanwhile.) Islands with bilateral rows (joints > 0) keep the warm start: there
        a contact's friction and a joint's rows can hold an internal force between them that no
        body's residual sees (both act on the same body), and a start that carries the last
        step's split keeps it within the tolerance (test_joints' finger held by a prismatic
        joint on a pad kept a larger tangential contact force from that start)."""
        last = 0
        if newton_kept[w] >= 1 and joints == 0:
            # Two rounds of one cost pass each (the warm start's, then the last solution's), so
            # that the kernel holds one copy of the pass.
            cost0 = ti.cast(0.0, real)
            for which in range(2):
                cost = contact_cost_total(w, wm, b0, b1, s0, s1, c_reg, body_inv_mass, body_inv_inertia_W, newton_pos,
                                          newton_body, newton_row, newton_v, newton_vs, newton_dv, c_bound, c_u)
                if which == 0:
                    cost0 = cost
                    for q in range(b0, b1):
                        b = newton_body[w, q]
                        p = 6 * newton_pos[w, b]
                        for i in ti.static(range(6)):
                            newton_grad[w, p + i] = newton_v[w, p + i]
                        if body_inv_mass[wm, b] > 0.0:
                            for i in ti.static(range(6)):
                                newton_v[w, p + i] = newton_last[w, 6 * b + i]
                    for s in range(s0, s1):
                        c = newton_row[s]
                        c_jdv[c] = c_u[c]
                        ids = c_ids[c]
                        c_u[c] = f.contact_u(w, 6 * newton_pos[w, ids[ID_A]], 6 * newton_pos[w, ids[ID_B]],
                                             ti.cast(c_frame[c], real), ti.cast(c_ra[c], real), ti.cast(c_rb[c], real), newton_v)
                elif cost >= cost0:
                    for q in range(b0, b1):
                        p = 6 * newton_pos[w, newton_body[w, q]]
                        for i in ti.static(range(6)):
                            newton_v[w, p + i] = newton_grad[w, p + i]
                    for s in range(s0, s1):
                        c = newton_row[s]
                        c_u[c] = c_jdv[c]
                else:
                    last = 1
        return last

    @ti.func
    def keep_solution(w: ti.i32, B: ti.i32, newton_pos: ti.template(), newton_v: ti.template(), newton_last: ti.template(),
                      newton_kept: ti.template()):
        """The solution's velocities by body (newton_last), the next solve's candidate start."""
        newton_kept[w] = 1
        for b in range(B):
            p = 6 * newton_pos[w, b]
            for k in ti.static(range(6)):
                newton_last[w, 6 * b + k] = newton_v[w, p + k]

    @ti.func
    def must_restart(from_last: ti.i32, residual: real, tolerance: real, it: ti.i32, iterations: ti.i32) -> ti.i32:
        """1 when an island's solve started from the last solution (from_last) has not
        converged after LAST_START_ITERATIONS iterations (or the cap, if lower): the lagged
        bounds can cycle there, as on a rigid box coming to a stop. The caller then starts the
        island again from the warm start (start_island with first = 0) and solves afresh."""
        again = 0
        if from_last == 1 and residual > tolerance and it >= ti.min(iterations, LAST_START_ITERATIONS):
            again = 1
        return again

    @ti.func
    def gauss_seidel_sweeps(w: ti.i32, wm: ti.i32, b0: ti.i32, b1: ti.i32, s0: ti.i32, s1: ti.i32, sweeps: ti.i32,
                            tolerance: float, omega: float, c_ids: ti.template(), c_frame: ti.template(), c_ra: ti.template(),
                            c_rb: ti.template(), c_reg: ti.template(), c_gamma: ti.template(), body_vc: ti.template(),
                            body_wc: ti.template(), body_reach: ti.template(), body_inv_mass: ti.template(),
                            body_inv_inertia_W: ti.template(), newton_pos: ti.template(), newton_body: ti.template(),
                            newton_row: ti.template(), newton_v: ti.template(), c_bound: ti.template(), c_u: ti.template()) -> ti.i32:
        """Up to `sweeps` projected Gauss-Seidel sweeps over the island's contact rows
        (solver.cone, the Coulomb mode: the same fixed point as Newton's) from the warm start in
        body_vc/body_wc and c_gamma, stopping early when no body point changed by more than the
        tolerance over a sweep; then the Newton iterate starts from them: v0 to newton_v, the
        bounds g0 = mu gamma_n to c_bound and u = J v0 to c_u. Bilateral rows keep their
        warm-start impulses through the sweeps. Returns the sweeps made. newton_v holds each
        sweep's starting velocities meanwhile."""
        n = 0
        while n < sweeps:
            for q in range(b0, b1):
                b = newton_body[w, q]
                f.load_velocity(w, b, 6 * newton_pos[w, b], body_vc, body_wc, newton_v)
            for s in range(s0, s1):
                c = newton_row[s]
                ids = c_ids[c]
                a, b = ids[ID_A], ids[ID_B]
                frame = c_frame[c]
                ra, rb = c_ra[c], c_rb[c]
                vc = contact_velocity(frame, ra, rb, body_vc[w, a], body_wc[w, a], body_vc[w, b], body_wc[w, b])
                y = c_gamma[c]
                x_new = contact_update(y, vc, c_reg[c], omega, True)
                c_gamma[c] = x_new
                apply_world_impulse(w, wm, a, b, frame.transpose() @ (x_new - y), ra, rb, body_vc, body_wc, body_inv_mass,
                                    body_inv_inertia_W)
            change = 0.0
            for q in range(b0, b1):
                b = newton_body[w, q]
                p = 6 * newton_pos[w, b]
                dv = body_vc[w, b] - ti.cast(f.rvec3(newton_v[w, p], newton_v[w, p + 1], newton_v[w, p + 2]), float)
                dw = body_wc[w, b] - ti.cast(f.rvec3(newton_v[w, p + 3], newton_v[w, p + 4], newton_v[w, p + 5]), float)
                change = ti.max(change, body_change(dv, dw, body_reach[b]))
            n += 1
            if change <= tolerance:
                break
        if n > 0:
            for s in range(s0, s1):
                c = newton_row[s]
                c_bound[c] = ti.cast(c_reg[c][R_MU] * ti.max(c_gamma[c][2], 0.0), real)
            for q in range(b0, b1):
                b = newton_body[w, q]
                f.load_velocity(w, b, 6 * newton_pos[w, b], body_vc, body_wc, newton_v)
            for s in range(s0, s1):
                c = newton_row[s]
                ids = c_ids[c]
                c_u[c] = f.contact_u(w, 6 * newton_pos[w, ids[ID_A]], 6 * newton_pos[w, ids[ID_B]], ti.cast(c_frame[c], real),
                                     ti.cast(c_ra[c], real), ti.cast(c_rb[c], real), newton_v)
        return n

    @ti.func
    def start_island(w: ti.i32, wm: ti.i32, k: ti.i32, b0: ti.i32, b1: ti.i32, s0: ti.i32, s1: ti.i32, jstart: ti.i32,
                     jend: ti.i32,joints: ti.i32, first: ti.i32, sweeps: ti.template(), presweeps: ti.i32, tolerance: float,
                     omega: float, c_ids: ti.template(), c_frame: ti.template(), c_ra: ti.template(), c_rb: ti.template(),
                     c_reg: ti.template(), c_gamma: ti.template(), b_ids: ti.template(), b_Ja: ti.template(), b_Jb: ti.template(),
                     b_gamma: ti.template(), body_vc: ti.template(), body_wc: ti.template(), body_reach: ti.template(),
                     body_inv_mass: ti.template(), body_inv_inertia_W: ti.template(), newton_pos: ti.template(),
                     newton_body: ti.template(), newton_row: ti.template(), newton_island: ti.template(), newton_v: ti.template(),
                     newton_vs: ti.template(), newton_last: ti.template(), newton_kept: ti.template(), newton_grad: ti.template(),
                     newton_dv: ti.template(), c_bound: ti.template(), c_u: ti.template(), c_jdv: ti.template()):
        """Island k's first iterate, as both world kernels start it: the warm start, then, in the
        island's first start (first = 1; a start again after must_restart keeps the warm start),
        the choice between it and the last solution (choose_start; joints: the island's
        bilateral rows), the first bounds and, in kernels made with sweeps (a compile-time
        flag: the sweeps' code is large), up to `presweeps` Gauss-Seidel sweeps. Returns
        (from_last, the contact rows evaluated). A row's first bound is mu gamma0_n from its warm
        impulse; in the first solve after a reset or set_state (newton_kept = 2, seed_solutions), a row
        without one (every row after a reset) takes mu gamma_n(u) at the start: a bound of 0
        makes that step frictionless, and a packed pile then spreads sideways and takes tens of
        damped iterations to come back (the first step from the settled pile's saved state: 33
        iterations, 15 with this bound). Mid-run a new contact keeps the bound 0: with its
        bound at the start, a rigid box hopping micrometres on a rigid table in float32 (vulkan,
        test_box_slides_to_a_stop_at_mu_g) drifted 2.4e-5 m after it had stopped."""
        warm_start(w, wm, k, b0, b1, s0, s1, jstart, jend, c_ids, c_frame, c_ra, c_rb, c_reg, c_gamma, b_ids, b_Ja, b_Jb, b_gamma,
                   body_vc, body_wc, body_inv_mass, body_inv_inertia_W, newton_pos, newton_body, newton_row, newton_island,
                   newton_v, newton_vs, c_bound, c_u)
        evaluations = 0
        from_last = 0
        if first == 1:
            evaluations = 2 * (s1 - s0) * ti.min(newton_kept[w], 1) * (1 if joints == 0 else 0)
            from_last = choose_start(w, wm, b0, b1, s0, s1, joints, c_ids, c_frame, c_ra, c_rb, c_reg, body_inv_mass,
                                     body_inv_inertia_W, newton_pos, newton_body, newton_row, newton_v, newton_vs, newton_last,
                                     newton_kept, newton_grad, newton_dv, c_bound, c_u, c_jdv)
            if newton_kept[w] == 2:  # the first solve after the host wrote the state
                for s in range(s0, s1):
                    c = newton_row[s]
                    if c_gamma[c][2] <= 0.0:  # no warm normal impulse: the bound at the start
                        f.set_bound(c, c_u, c_reg, c_bound)
            if ti.static(sweeps):
                evaluations += (s1 - s0) * gauss_seidel_sweeps(w, wm, b0, b1, s0, s1, presweeps, tolerance, omega, c_ids, c_frame,
                                                               c_ra, c_rb, c_reg, c_gamma, body_vc, body_wc, body_reach,
                                                               body_inv_mass, body_inv_inertia_W, newton_pos, newton_body,
                                                               newton_row, newton_v, c_bound, c_u)
        return from_last, evaluations

    @ti.func
    def search_and_step(w: ti.i32, wm: ti.i32, k: ti.i32, b0: ti.i32, b1: ti.i32, s0: ti.i32, s1: ti.i32, jstart: ti.i32,
                        jend: ti.i32, c_ids: ti.template(), c_frame: ti.template(), c_ra: ti.template(), c_rb: ti.template(),
                        c_reg: ti.template(), b_ids: ti.template(), b_Ja: ti.template(), b_Jb: ti.template(), b_law: ti.template(),
                        body_inv_mass: ti.template(), body_inv_inertia_W: ti.template(), newton_pos: ti.template(),
                        newton_body: ti.template(), newton_row: ti.template(), newton_island: ti.template(),
                        newton_v: ti.template(), newton_vs: ti.template(), newton_grad: ti.template(), newton_dv: ti.template(),
                        c_bound: ti.template(), c_u: ti.template(), c_jdv: ti.template(), step_rows: ti.template()):
        """The exact line search on the island's phi(alpha) = l(v + alpha dv; g) along the
        step newton_dv, then v += alpha dv and, with step_rows, u += alpha J dv and the bounds
        g = mu gamma_n(u) (else the caller's next pass over the rows steps them: assemble).
        Returns (the rows evaluated, alpha)."""
        evaluations = 0
        d0 = ti.cast(0.0, real)
        # The quadratic part of phi: phi'(alpha) = dMv + alpha dMd + the rows' terms,
        # dMv = dv^T M (v - v*), dMd = dv^T M dv.
        dMd = ti.cast(0.0, real)
        dMv = ti.cast(0.0, real)
        for q in range(b0, b1):
            p = 6 * newton_pos[w, newton_body[w, q]]
            for i in ti.static(range(6)):
                d0 += newton_grad[w, p + i] * newton_dv[w, p + i]
        for q in range(b0, b1):
            b = newton_body[w, q]
            dMd, dMv = f.mass_directional(w, wm, b, 6 * newton_pos[w, b], newton_v, newton_vs, newton_dv,
                                          body_inv_mass, body_inv_inertia_W, dMd, dMv)
        joints = 0
        run = s0
        while run < s1:  # J dv, a run of one pair's rows at a time (the bodies' steps loaded once)
            e = f.run_end(run, s1, newton_row, c_ids)
            ids = c_ids[newton_row[run]]
            va, wa = f.body_twist(w, 6 * newton_pos[w, ids[ID_A]], newton_dv)
            vb, wb = f.body_twist(w, 6 * newton_pos[w, ids[ID_B]], newton_dv)
            for t in range(run, e):
                c = newton_row[t]
                c_jdv[c] = f.relative_u(ti.cast(c_frame[c], real), ti.cast(c_ra[c], real), ti.cast(c_rb[c], real), va, wa, vb,
                                        wb)
            run = e
        alpha = ti.cast(1.0, real)
        if d0 >= 0.0:  # no descent left: the iterate is the minimum to round-off
            alpha = 0.0
        else:
            lo, hi = ti.cast(0.0, real), ti.cast(ALPHA_MAX, real)
            for _ in range(LINE_SEARCH_EVALUATIONS):
                d1 = dMv + alpha * dMd
                d2 = dMd
                for s in range(s0, s1):
                    c = newton_row[s]
                    jdv = c_jdv[c]
                    dd1, dd2 = f.directional(c_u[c] + alpha * jdv, jdv, c_bound[c], c_reg[c])
                    d1 += dd1
                    d2 += dd2
                joints = 0
                for j in range(jstart, jend):
                    ids = b_ids[j]
                    if f.row_island(w, wm, ids[ID_A], ids[ID_B], body_inv_mass, newton_island) == k:
                        dd1, dd2 = f.bilateral_directional(w, j, alpha, b_ids, b_Ja, b_Jb, b_law, newton_pos, newton_v,
                                                           newton_dv)
                        d1 += dd1
                        d2 += dd2
                        joints += 1
                evaluations += s1 - s0 + joints
                alpha, lo, hi, done = f.search_update(alpha, lo, hi, d0, d1, d2)
                if done:
                    break
        for q in range(b0, b1):
            f.step_body(w, 6 * newton_pos[w, newton_body[w, q]], alpha, newton_v, newton_dv)
        if ti.static(step_rows):
            for s in range(s0, s1):
                f.step_contact(newton_row[s], alpha, c_u, c_jdv, c_reg, c_bound)
        return evaluations, alpha

    @ti.func
    def residual(w: ti.i32, wm: ti.i32, b0: ti.i32, b1: ti.i32, body_inv_mass: ti.template(), body_inv_inertia_W: ti.template(),
                 body_reach: ti.template(), newton_pos: ti.template(), newton_body: ti.template(),
                 newton_grad: ti.template()) -> real:
        """The stopping test's measure of the iterate whose gradient is in newton_grad: the
        largest newton_funcs.body_residual over the island's bodies [m/s]."""
        out = ti.cast(0.0, real)
        for q in range(b0, b1):
            b = newton_body[w, q]
            out = ti.max(out, f.body_residual(w, wm, b, 6 * newton_pos[w, b], newton_grad, body_inv_mass, body_inv_inertia_W,
                                              body_reach))
        return out

    @ti.func
    def assemble(w: ti.i32, wm: ti.i32, k: ti.i32, b0: ti.i32, b1: ti.i32, s0: ti.i32, s1: ti.i32, jstart: ti.i32, jend: ti.i32,
                 modified: ti.i32, stepped: ti.i32, alpha: real, hessian: ti.template(), c_ids: ti.template(),
                 c_frame: ti.template(), c_ra: ti.template(),
                 c_rb: ti.template(), c_reg: ti.template(), b_ids: ti.template(), b_Ja: ti.template(), b_Jb: ti.template(),
                 b_law: ti.template(), body_inv_mass: ti.template(), body_inv_inertia_W: ti.template(),
                 newton_pos: ti.template(), newton_body: ti.template(), newton_row: ti.template(),
                 newton_island: ti.template(), newton_rows: ti.template(), newton_row_len: ti.template(),
                 newton_v: ti.template(), newton_vs: ti.template(), newton_grad: ti.template(), newton_H: ti.template(),
                 c_bound: ti.template(), c_u: ti.template(), c_jdv: ti.template()) -> ti.i32:
        """One pass over island k's bodies and rows at the iterate: hessian False writes the
        cost's gradient M (v - v*) - J^T gamma to newton_grad (what the stopping test reads),
        first stepping each row to the iterate where a line search has just moved the bodies
        (stepped = 1: u += alpha J dv and the bound, search_and_step without step_rows),
        True the Hessian M + J^T G J to the pattern blocks of newton_H (modified: the isotropic
        slip curvature); the Hessian is assembled only for a step that follows, never for the
        iterate that stops. Rows come grouped by pair (mostly): each run of rows of one pair is
        summed here and written once (the gradient exactly; the Hessian from moments about
        hessian_arm's arms, b's taken as those plus the run's first offset, which changes only
        the step). Returns the rows evaluated."""
        evaluations = 0
        for I in range(b0, b1):
            inv_m, I_W = f.body_mass(w, wm, newton_body[w, I], body_inv_mass, body_inv_inertia_W)
            if ti.static(hessian):
                f.zero_block_row(w, I, newton_H, newton_rows, newton_row_len)
                f.mass_hessian(w, 6 * I, inv_m, I_W, newton_H)
            else:
                f.mass_gradient(w, 6 * I, inv_m, I_W, newton_v, newton_vs, newton_grad)
        if ti.static(not hessian):
            if stepped == 1:
                for s in range(s0, s1):
                    f.step_contact(newton_row[s], alpha, c_u, c_jdv, c_reg, c_bound)
        # One run of rows of one pair at a time, summed in an inner loop of loads and sums only (no
        # stores: a loop LLVM can vectorise), then written once. Names such as row_G and arm0 take the
        # unused parts of a func's result: Taichi's `_` may not change type within a kernel.
        run = s0
        while run < s1:
            e = f.run_end(run, s1, newton_row, c_ids)
            ids = c_ids[newton_row[run]]
            run_a, run_b = ids[ID_A], ids[ID_B]
            run_pa, run_pb = newton_pos[w, run_a], newton_pos[w, run_b]
            run_mobile_a = body_inv_mass[wm, run_a] > 0.0
            c0 = newton_row[run]
            arm0, d = f.hessian_arm(run_mobile_a, ti.cast(c_ra[c0], real), ti.cast(c_rb[c0], real))
            if ti.static(hessian):
                sum_A, sum_AS, sum_SAS = f.rmat3(0.0), f.rmat3(0.0), f.rmat3(0.0)
                for t in range(run, e):
                    c = newton_row[t]
                    row_gamma, G = f.response(c_u[c], c_bound[c], c_reg[c], modified)
                    arm, row_d = f.hessian_arm(run_mobile_a, ti.cast(c_ra[c], real), ti.cast(c_rb[c], real))
                    cA, cAS, cSAS = f.row_curvature(G, ti.cast(c_frame[c], real), arm)
                    sum_A += cA
                    sum_AS += cAS
                    sum_SAS += cSAS
                f.add_hessian(w, wm, run_a, run_b, run_pa, run_pb, sum_A, sum_AS, sum_SAS, d, body_inv_mass, newton_H)
            else:
                sum_f, sum_ta, sum_tb = f.rvec3(0.0), f.rvec3(0.0), f.rvec3(0.0)
                for t in range(run, e):
                    c = newton_row[t]
                    gamma, row_G = f.response(c_u[c], c_bound[c], c_reg[c], modified)
                    cf, cta, ctb = f.row_force(gamma, ti.cast(c_frame[c], real), ti.cast(c_ra[c], real),
                                               ti.cast(c_rb[c], real))
                    sum_f += cf
                    sum_ta += cta
                    sum_tb += ctb
                f.add_gradient(w, wm, run_a, run_b, run_pa, run_pb, sum_f, sum_ta, sum_tb, body_inv_mass, newton_grad)
            evaluations += e - run
            run = e
        for j in range(jstart, jend):  # bilateral rows: gamma(u) and G = -d gamma / d u
            jids = b_ids[j]
            if f.row_island(w, wm, jids[ID_A], jids[ID_B], body_inv_mass, newton_island) == k:
                pa, pb, mobile_a, mobile_b, ja, jb, gamma, G = f.bilateral_row(w, wm, j, b_ids, b_Ja, b_Jb, b_law, body_inv_mass,
                                                                                newton_pos, newton_v)
                evaluations += 1
                if ti.static(hessian):
                    if mobile_a:
                        f.add_outer(newton_H, w, pa, pa, G, ja, ja, True)
                    if mobile_b:
                        f.add_outer(newton_H, w, pb, pb, G, jb, jb, True)
                    if mobile_a and mobile_b:
                        f.bilateral_pair(w, pa, pb, ja, jb, G, newton_H)
                else:
                    if mobile_a:
                        f.bilateral_gradient(w, pa, ja, gamma, newton_grad)
                    if mobile_b:
                        f.bilateral_gradient(w, pb, jb, gamma, newton_grad)
        return evaluations

    @ti.func
    def short_step(w: ti.i32, b0: ti.i32, b1: ti.i32, tolerance: real, body_reach: ti.template(), newton_pos: ti.template(),
                   newton_body: ti.template(), newton_dv: ti.template()) -> ti.i32:
        """1 when the float32 stopping test (module docstring) holds for the island's full
        Newton step in newton_dv; always 0 in float64."""
        short = 0
        if ti.static(f.step_test):
            step = ti.cast(0.0, real)
            for q in range(b0, b1):
                b = newton_body[w, q]
                step = ti.max(step, f.body_step(w, b, 6 * newton_pos[w, b], newton_dv, body_reach))
            short = 1 if step <= tolerance else 0
        return short

    @ti.func
    def store_solution(w: ti.i32, wm: ti.i32, k: ti.i32, b0: ti.i32, b1: ti.i32, s0: ti.i32, s1: ti.i32, jstart: ti.i32,
                       jend: ti.i32, c_ids: ti.template(), c_frame: ti.template(), c_ra: ti.template(), c_rb: ti.template(),
                       c_reg: ti.template(), c_gamma: ti.template(), b_ids: ti.template(), b_Ja: ti.template(),
                       b_Jb: ti.template(), b_law: ti.template(), b_gamma: ti.template(), body_vc: ti.template(),
                       body_wc: ti.template(), body_inv_mass: ti.template(), body_inv_inertia_W: ti.template(),
                       newton_pos: ti.template(), newton_body: ti.template(), newton_row: ti.template(),
                       newton_island: ti.template(), newton_v: ti.template(), newton_vs: ti.template(), c_bound: ti.template(),
                       c_u: ti.template()):
        """The island's solution: the impulses of the regularised law at the iterate to c_gamma
        and b_gamma, and the velocities they give, v* + M^-1 J^T gamma, to body_vc/body_wc: the
        state's momentum changes by exactly the impulses reported (as with the projected
        iterations), and differs from the iterate by M^-1 r, which the stopping test bounds."""
        for q in range(b0, b1):
            b = newton_body[w, q]
            f.store_velocity(w, b, 6 * newton_pos[w, b], newton_vs, body_vc, body_wc)
        for s in range(s0, s1):
            c = newton_row[s]
            gamma, _ = f.response(c_u[c], c_bound[c], c_reg[c], 0)
            c_gamma[c] = ti.cast(gamma, float)
        for j in range(jstart, jend):
            ids = b_ids[j]
            if f.row_island(w, wm, ids[ID_A], ids[ID_B], body_inv_mass, newton_island) == k:
                b_gamma[j] = ti.cast(f.bilateral_impulse(w, wm, j, b_ids, b_Ja, b_Jb, b_law, body_inv_mass, newton_pos,
                                                         newton_v), float)
        apply_impulses(w, wm, k, s0, s1, jstart, jend, c_ids, c_frame, c_ra, c_rb, c_gamma, b_ids, b_Ja, b_Jb, b_gamma, body_vc,
                       body_wc, body_inv_mass, body_inv_inertia_W, newton_row, newton_island)

    return types.SimpleNamespace(**locals())


@functools.lru_cache(maxsize=None)
def newton_solver(real, sweeps: bool = False):
    """The Newton solve kernel of the world schedule with the block Cholesky factor ([solver]
    linear = "cholesky"), with arithmetic in `real` (ti.f64 or ti.f32) and, with sweeps, the
    Gauss-Seidel presweeps' code ([solver] presweeps > 0), made once per combination."""
    f = newton_funcs(real)
    wf = world_funcs(real)
    rvec3 = f.rvec3

    @ti.kernel
    def solve_newton(
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
        newton_H: nd(dtype=real, ndim=3),
        newton_v: nd(dtype=real, ndim=2),
        newton_vs: nd(dtype=real, ndim=2),
        newton_last: nd(dtype=real, ndim=2),
        newton_kept: nd(dtype=ti.i32, ndim=1),
        newton_grad: nd(dtype=real, ndim=2),
        newton_dv: nd(dtype=real, ndim=2),
        newton_scale: nd(dtype=real, ndim=2),
        newton_adj: nd(dtype=ti.i32, ndim=3),
        newton_pos: nd(dtype=ti.i32, ndim=2),
        newton_deg: nd(dtype=ti.i32, ndim=2),
        newton_padj: nd(dtype=ti.i32, ndim=3),
        newton_rows: nd(dtype=ti.i32, ndim=3),
        newton_row_len: nd(dtype=ti.i32, ndim=2),
        newton_island: nd(dtype=ti.i32, ndim=2),
        newton_body: nd(dtype=ti.i32, ndim=2),
        newton_island_start: nd(dtype=ti.i32, ndim=3),
        newton_row: nd(dtype=ti.i32, ndim=1),
        c_bound: nd(dtype=real, ndim=1),
        c_u: nd(dtype=rvec3, ndim=1),
        c_jdv: nd(dtype=rvec3, ndim=1),
        world_iterations: nd(dtype=ti.i32, ndim=1),
        world_residual: nd(dtype=float, ndim=1),
        world_contacts: nd(dtype=ti.i32, ndim=1),
        world_updates: nd(dtype=ti.i32, ndim=1),
        world_islands: nd(dtype=ti.i32, ndim=1),
        iterations: ti.i32,
        tolerance: float,
        omega: float,
        presweeps: ti.i32,
    ):
        """One thread per world, which solves the world's islands one after the other
        (world_funcs.group_islands). Reads the contact rows, their warm-start impulses c_gamma, the
        bilateral rows (solver.bilateral) and theirs b_gamma, and the free velocities
        body_vc/body_wc; writes the solved velocities there, the impulses of the solution to
        c_gamma and b_gamma (row frames), and the world's iterations (the most factorisations
        of one island), the residual of the solution [m/s] (the stopping test's, the largest of
        its islands'), contacts, contact evaluations (world_updates, the presweeps' contact
        updates included) and islands (world_islands). presweeps: the most
        Gauss-Seidel sweeps before the Newton iterations (relaxation omega; 0: none).
        A bilateral row's body a < 0 is the world (no velocity).

        The generalized velocity of body b sits at 6 newton_pos[w, b] in the vectors (v, v*,
        gradient, step) and in H, whose 6x6 blocks are stored and factored only where the
        filled row graph newton_adj has an edge (and on the diagonal): the factor of a
        sparse pile costs a small part of a dense one."""
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
                residual_world = ti.cast(0.0, real)
                evaluations = 0
                n_islands = 0
                if world_status[w] == 0:
                    wm = w % body_inv_mass.shape[0]
                    f.order_bodies(w, start, end, jstart, jend, B, c_ids, b_ids, body_inv_mass, wm, newton_adj, newton_pos, newton_deg)
                    n_islands = wf.group_islands(w, wm, start, end, jstart, jend, B, True, c_ids, b_ids, body_inv_mass, newton_pos,
                                                 newton_island, newton_body, newton_island_start, newton_row)
                    f.block_pattern(w, B, newton_adj, newton_pos, newton_padj, newton_rows, newton_row_len)
                    wf.load_free(w, B, body_vc, body_wc, newton_pos, newton_v, newton_vs, newton_dv)
                    for k in range(n_islands):  # each island alone (its positions are b0..b1: regrouped)
                        b0, b1 = newton_island_start[w, k, 0], newton_island_start[w, k + 1, 0]
                        s0, s1 = newton_island_start[w, k, 1], newton_island_start[w, k + 1, 1]
                        joints = wf.island_joints(w, wm, k, jstart, jend, b_ids, body_inv_mass, newton_island)
                        if s1 == s0 and joints == 0:
                            continue  # no rows: the free velocities (already in place) are the solution
                        it = 0
                        residual = ti.cast(0.0, real)
                        first = 1
                        while True:  # a start, then the iterations; once more from the warm start after must_restart
                            from_last, started = wf.start_island(
                                w, wm, k, b0, b1, s0, s1, jstart, jend, joints, first, sweeps, presweeps, tolerance, omega, c_ids,
                                c_frame, c_ra, c_rb, c_reg, c_gamma, b_ids, b_Ja, b_Jb, b_gamma, body_vc, body_wc, body_reach,
                                body_inv_mass, body_inv_inertia_W, newton_pos, newton_body, newton_row, newton_island, newton_v,
                                newton_vs, newton_last, newton_kept, newton_grad, newton_dv, c_bound, c_u, c_jdv)
                            evaluations += started
                            first, it, near, short, stepped, again = 0, 0, 0, 0, 0, 0
                            alpha = ti.cast(0.0, real)
                            while True:
                                evaluations += wf.assemble(w, wm, k, b0, b1, s0, s1, jstart, jend, 0, stepped, alpha, False,
                                                           c_ids,c_frame, c_ra, c_rb, c_reg, b_ids, b_Ja, b_Jb, b_law,
                                                           body_inv_mass, body_inv_inertia_W, newton_pos, newton_body, newton_row,
                                                           newton_island, newton_rows, newton_row_len, newton_v, newton_vs,
                                                           newton_grad, newton_H, c_bound, c_u, c_jdv)
                                stepped = 0
                                residual = wf.residual(w, wm, b0, b1, body_inv_mass, body_inv_inertia_W, body_reach, newton_pos,
                                                       newton_body, newton_grad)
                                again = wf.must_restart(from_last, residual, tolerance, it, iterations)
                                if again == 1 or residual <= tolerance or it >= iterations or short == 1:
                                    break
                                if it == 0 and near == 0 and residual <= NEAR_TOLERANCES * tolerance:
                                    near = 1  # close already: the exact curvature from the first step
                                modified = f.isotropic_start(it, near, b1 - b0 > 1)
                                evaluations += wf.assemble(w, wm, k, b0, b1, s0, s1, jstart, jend, modified, 0, alpha, True,
                                                           c_ids,c_frame, c_ra, c_rb, c_reg, b_ids, b_Ja, b_Jb, b_law,
                                                           body_inv_mass, body_inv_inertia_W, newton_pos, newton_body, newton_row,
                                                           newton_island, newton_rows, newton_row_len, newton_v, newton_vs,
                                                           newton_grad, newton_H, c_bound, c_u, c_jdv)
                                f.factor_and_solve(w, b0, b1, newton_H, newton_grad, newton_dv, newton_scale, newton_padj,
                                                   newton_rows, newton_row_len)
                                short = wf.short_step(w, b0, b1, tolerance, body_reach, newton_pos, newton_body, newton_dv)
                                searched, alpha = wf.search_and_step(w, wm, k, b0, b1, s0, s1, jstart, jend, c_ids, c_frame, c_ra,
                                                                     c_rb, c_reg, b_ids, b_Ja, b_Jb, b_law, body_inv_mass,
                                                                     body_inv_inertia_W, newton_pos, newton_body, newton_row,
                                                                     newton_island, newton_v, newton_vs, newton_grad, newton_dv,
                                                                     c_bound, c_u, c_jdv, False)
                                evaluations += searched
                                stepped = 1  # the rows follow in the next gradient pass
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
                world_residual[w] = ti.cast(residual_world, float)
                world_contacts[w] = end - start
                world_updates[w] = evaluations
                world_islands[w] = n_islands
                w = next_world(n_worlds, world_queue)

    return solve_newton


@ti.kernel
def seed_solutions(world_row: nd(dtype=ti.i32, ndim=1), body_com_B: nd(dtype=vec3, ndim=1), body_q: nd(dtype=vec4, ndim=2),
                   body_v: nd(dtype=vec3, ndim=2), body_w: nd(dtype=vec3, ndim=2), newton_last: ti.types.ndarray(ndim=2),
                   newton_kept: nd(dtype=ti.i32, ndim=1)):
    """Worlds w with world_row[w] >= 0, whose state the host has just written (reset,
    set_state): the candidate start of their next Newton solve (newton_last,
    world_funcs.choose_start) becomes the new state's velocities at the centres of mass, what
    a solve that had ended in that state would have kept (the integrator writes the solved
    velocities into the state). The solve still starts from the warm start where that has the
    lower cost. newton_kept = 2 marks the seed until that solve has kept its own solution (1):
    its rows without a warm impulse take their first bound at the start (start_island)."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, b in ti.ndrange(body_v.shape[0], body_v.shape[1]):
        if world_row[w] >= 0:
            omega = body_w[w, b]
            v_cm = body_v[w, b] + omega.cross(quat_to_mat(body_q[w, b]) @ body_com_B[b])
            for i in ti.static(range(3)):
                newton_last[w, 6 * b + i] = v_cm[i]
                newton_last[w, 6 * b + 3 + i] = omega[i]
            newton_kept[w] = 2
