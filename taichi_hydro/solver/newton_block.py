"""Newton's method on the body velocities ([solver] method = "newton", solver.newton) on the
block schedule: one block (workgroup) of BLOCK threads per world, cuda and vulkan.

The same algorithm, stopping rule and outputs as the world kernel (solver.newton.newton_solver),
from the same ti.funcs (newton_funcs), except that a world is solved whole: one line search
and one stopping test for all its islands (the world kernels solve each island alone,
world_funcs.group_islands), its islands are not reported (0), and the isotropic slip
curvature of the first iterations applies, in float64 arithmetic, to every world with a row
between two mobile bodies (newton_funcs.isotropic_start; the world kernels: to every island
of two or more bodies; a world of lone bodies gets the exact curvature from the first step in
both; in float32 every world and island starts isotropic). The lanes of a world's block share
its passes:

- per contact (lane c mod BLOCK): u = J v, the response and its world-frame terms, J dv, the
  line search's directional terms, the step of u and of the bound; per body: the mass terms,
  the stopping test's residual and the step; per block row of the factor: the Jacobi
  scaling; per row of the blocks L[I, J] below a factored diagonal block J (independent
  across I); per entry of a diagonal block's update.
- Assembly without atomics and in the world kernel's order: lanes write each contact's terms,
  the lane of a run's first contact sums the run in contact order, then the lane that owns a
  body (b mod BLOCK) adds the runs and bilateral rows that touch it, in row order, into its
  block row: the gradient and Hessian are the world kernel's to the bit. The runs that touch
  a body come from a list by body made once per solve (list_runs), so that lane reads its
  body's runs, not every row of the world. The warm start and the solution's store apply the
  impulses the same way, each body on its own lane (apply_body_impulses).
- Sums over lanes (the line search's phi'(alpha), phi''(alpha), grad . dv, the quadratic terms)
  by a tree of fixed shape in shared memory: deterministic, but summed in another order than
  the world kernel's (the results agree to round-off); the largest residual by the same tree
  (max is exact).
- Triangular solves by block columns: lane 0 solves a 6x6 diagonal block, then each lane
  takes a row of a block row that the column's pattern touches (forward: the later block rows;
  backward, from the last block: the rows of its pattern), the sums of
  newton_funcs.triangular_solves in the same order.
- Serial on lane 0, between barriers: the minimum-degree order of the bodies and the list of
  runs by body (once per solve: both walk the whole row list; the order is a sequential
  elimination), each 6x6 diagonal factor (21 entries, a dependent chain, in registers) and
  each diagonal block's triangular solves.

Every branch that contains a barrier depends only on block-uniform values (the world's counts,
the iteration count, the reduced sums that every lane reads back after a barrier, and alpha,
which every lane computes from them by the same instructions), so all lanes of a block meet
the same barriers.

Memory ordering: the scratch (newton_H, newton_v, c_u, ...) is in global memory, written by
one lane and read by others after a barrier. On cuda, Taichi's block.sync is __syncthreads,
which orders global and shared memory within the block. On SPIR-V, block.sync is an
OpControlBarrier whose semantics name workgroup memory only (Taichi 1.7.4
spirv_codegen.cpp, "workgroupBarrier"), and block.mem_sync likewise; so each barrier here first
issues an integer atomic on newton_fence[w], which Taichi's SPIR-V code generator precedes
with an OpMemoryBarrier (device scope, UniformMemory | AcquireRelease): GLSL's
memoryBarrierBuffer(); barrier(); idiom."""

import functools

import taichi as ti

from ..contact.rows import run_start
from ..types import ID_A, ID_B, ID_PAIR, R_MU, contact_reg, ivec4, mat3, nd, vec3, vec4, vec6
from .newton import ALPHA_MAX, LINE_SEARCH_EVALUATIONS, newton_funcs

__all__ = ["BLOCK", "newton_block_solver"]

BLOCK = 64
"""Threads per world (a power of two: the tree reductions halve it)."""


@functools.lru_cache(maxsize=None)
def newton_block_solver(real, spirv: bool):
    """The Newton solve kernel of the block schedule with arithmetic in `real`, for a SPIR-V
    backend (vulkan: barriers fence global memory explicitly) or cuda; made once per pair."""
    f = newton_funcs(real)
    rvec3, rmat3 = f.rvec3, f.rmat3

    @ti.func
    def barrier(fence: ti.template(), w: ti.i32):
        """Every lane of the block waits here; global and shared writes before it are seen by
        every lane after it (see the module's note on memory ordering)."""
        if ti.static(spirv):
            ti.atomic_add(fence[w], 0)
        ti.simt.block.sync()

    @ti.func
    def block_sum(red: ti.template(), lane: ti.i32, x: real, y: real, z: real, fence: ti.template(), w: ti.i32):
        """(sum of x, of y, of z) over the block's lanes, in a fixed tree order; every lane gets
        the same values. (A run-time loop over the tree's levels: one barrier site, which
        keeps lavapipe's compilation of the kernel short.)"""
        red[lane] = x
        red[BLOCK + lane] = y
        red[2 * BLOCK + lane] = z
        s = BLOCK // 2
        while s > 0:
            barrier(fence, w)
            if lane < s:
                for k in ti.static(range(3)):
                    red[k * BLOCK + lane] = red[k * BLOCK + lane] + red[k * BLOCK + lane + s]
            s //= 2
        barrier(fence, w)
        sx, sy, sz = red[0], red[BLOCK], red[2 * BLOCK]
        barrier(fence, w)
        return sx, sy, sz

    @ti.func
    def block_max(red: ti.template(), lane: ti.i32, x: real, fence: ti.template(), w: ti.i32) -> real:
        """The largest x over the block's lanes; every lane gets it."""
        red[lane] = x
        s = BLOCK // 2
        while s > 0:
            barrier(fence, w)
            if lane < s:
                red[lane] = ti.max(red[lane], red[lane + s])
            s //= 2
        barrier(fence, w)
        m = red[0]
        barrier(fence, w)
        return m

    @ti.func
    def list_runs(w: ti.i32, start: ti.i32, end: ti.i32, B: ti.i32, c_ids: ti.template(), newton_run_end: ti.template(),
                  c_body_runs: ti.template()):
        """The first rows of the world's runs (run_start), listed by body in row order: body b's
        are c_body_runs[k] for k in [newton_run_end[w, b - 1], newton_run_end[w, b]) (from 2
        start for b = 0). A run has two bodies, so the world's list fits in [2 start, 2 end).
        With it, the lane that owns a body reads the runs that touch it, not every row."""
        for b in range(B):
            newton_run_end[w, b] = 0
        for c in range(start, end):
            if run_start(c, start, c_ids) == 1:
                ids = c_ids[c]
                newton_run_end[w, ids[ID_A]] = newton_run_end[w, ids[ID_A]] + 1
                newton_run_end[w, ids[ID_B]] = newton_run_end[w, ids[ID_B]] + 1
        first = 2 * start
        for b in range(B):  # each body's first slot, then its end once filled
            n = newton_run_end[w, b]
            newton_run_end[w, b] = first
            first += n
        for c in range(start, end):
            if run_start(c, start, c_ids) == 1:
                ids = c_ids[c]
                for side in ti.static(range(2)):
                    body = ids[ID_A] if ti.static(side == 0) else ids[ID_B]
                    c_body_runs[newton_run_end[w, body]] = c
                    newton_run_end[w, body] = newton_run_end[w, body] + 1

    @ti.func
    def runs_begin(w: ti.i32, b: ti.i32, start: ti.i32, newton_run_end: ti.template()) -> ti.i32:
        """Where body b's runs begin in c_body_runs (list_runs)."""
        begin = 2 * start
        if b > 0:
            begin = newton_run_end[w, b - 1]
        return begin

    @ti.func
    def apply_body_impulses(w: ti.i32, wm: ti.i32, b: ti.i32, start: ti.i32, end: ti.i32, jstart: ti.i32, jend: ti.i32,
                            newton_run_end: ti.template(), c_body_runs: ti.template(), c_ids: ti.template(),
                            c_frame: ti.template(), c_ra: ti.template(), c_rb: ti.template(), c_gamma: ti.template(),
                            b_ids: ti.template(), b_Ja: ti.template(), b_Jb: ti.template(), b_gamma: ti.template(),
                            body_vc: ti.template(), body_wc: ti.template(), body_inv_mass: ti.template(),
                            body_inv_inertia_W: ti.template()):
        """Body b's part of newton.world_funcs.apply_impulses (v += M^-1 J^T gamma), on the lane that
        owns it: the contact rows of its runs, then the bilateral rows that touch it, in row
        order, so the body sees the same sums as there."""
        if body_inv_mass[wm, b] > 0.0:
            for k in range(runs_begin(w, b, start, newton_run_end), newton_run_end[w, b]):
                c = c_body_runs[k]
                pair = c_ids[c][ID_PAIR]
                while c < end:
                    ids = c_ids[c]
                    if ids[ID_PAIR] != pair:
                        break
                    impulse = c_frame[c].transpose() @ c_gamma[c]
                    if ids[ID_A] == b:
                        body_vc[w, b] = body_vc[w, b] - body_inv_mass[wm, b] * impulse
                        body_wc[w, b] = body_wc[w, b] - body_inv_inertia_W[w, b] @ c_ra[c].cross(impulse)
                    else:
                        body_vc[w, b] = body_vc[w, b] + body_inv_mass[wm, b] * impulse
                        body_wc[w, b] = body_wc[w, b] + body_inv_inertia_W[w, b] @ c_rb[c].cross(impulse)
                    c += 1
            for j in range(jstart, jend):
                ids = b_ids[j]
                for side in ti.static(range(2)):
                    if (ids[ID_A] if ti.static(side == 0) else ids[ID_B]) == b:
                        f.apply_bilateral_side(w, wm, j, side, b_ids, b_Ja, b_Jb, b_gamma, body_vc, body_wc, body_inv_mass,
                                               body_inv_inertia_W)

    @ti.kernel
    def solve_newton_block(
        world_start: nd(dtype=ti.i32, ndim=1),
        world_status: nd(dtype=ti.i32, ndim=1),
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
        newton_grad: nd(dtype=real, ndim=2),
        newton_dv: nd(dtype=real, ndim=2),
        newton_scale: nd(dtype=real, ndim=2),
        newton_adj: nd(dtype=ti.i32, ndim=3),
        newton_pos: nd(dtype=ti.i32, ndim=2),
        newton_deg: nd(dtype=ti.i32, ndim=2),
        newton_padj: nd(dtype=ti.i32, ndim=3),
        newton_rows: nd(dtype=ti.i32, ndim=3),
        newton_row_len: nd(dtype=ti.i32, ndim=2),
        newton_run_end: nd(dtype=ti.i32, ndim=2),
        newton_fence: nd(dtype=ti.i32, ndim=1),
        c_bound: nd(dtype=real, ndim=1),
        c_u: nd(dtype=rvec3, ndim=1),
        c_jdv: nd(dtype=rvec3, ndim=1),
        c_f: nd(dtype=rvec3, ndim=1),
        c_ta: nd(dtype=rvec3, ndim=1),
        c_tb: nd(dtype=rvec3, ndim=1),
        c_A: nd(dtype=rmat3, ndim=1),
        c_AS: nd(dtype=rmat3, ndim=1),
        c_SAS: nd(dtype=rmat3, ndim=1),
        c_body_runs: nd(dtype=ti.i32, ndim=1),
        world_iterations: nd(dtype=ti.i32, ndim=1),
        world_residual: nd(dtype=float, ndim=1),
        world_contacts: nd(dtype=ti.i32, ndim=1),
        world_updates: nd(dtype=ti.i32, ndim=1),
        iterations: ti.i32,
        tolerance: float,
    ):
        """One block of BLOCK threads per world. Reads and writes what the world kernel does
        (solver.newton.newton_solver), with the same scratch, plus per contact row its terms
        f, r_a x f, r_b x f, A, A [r_a], [r_a] A [r_a] (world frame; at a run's first row, after
        the run sum, the run's totals) in c_f, c_ta, c_tb, c_A, c_AS, c_SAS, and newton_fence
        (the SPIR-V barriers' atomic, value unchanged)."""
        B = body_vc.shape[1]
        ti.loop_config(block_dim=BLOCK)
        for i in range((world_start.shape[0] - 1) * BLOCK):
            w = i // BLOCK
            lane = i % BLOCK
            red = ti.simt.block.SharedArray((3 * BLOCK,), real)
            start, end = world_start[w], world_start[w + 1]
            jstart, jend = bilateral_start[w], bilateral_start[w + 1]
            it = 0
            residual = ti.cast(0.0, real)
            evaluations = 0
            short = 0
            if world_status[w] == 0:  # block-uniform
                wm = w % body_inv_mass.shape[0]
                if lane == 0:
                    f.order_bodies(w, start, end, jstart, jend, B, c_ids, b_ids, body_inv_mass, wm, newton_adj, newton_pos,
                                   newton_deg)
                    f.block_pattern(w, B, newton_adj, newton_pos, newton_padj, newton_rows, newton_row_len)
                    list_runs(w, start, end, B, c_ids, newton_run_end, c_body_runs)
                barrier(newton_fence, w)
                b = lane
                while b < B:  # v* to newton_vs, v0 = v* + M^-1 J^T gamma0 (the warm start) to newton_v
                    p6 = 6 * newton_pos[w, b]
                    f.load_velocity(w, b, p6, body_vc, body_wc, newton_vs)
                    apply_body_impulses(w, wm, b, start, end, jstart, jend, newton_run_end, c_body_runs, c_ids, c_frame, c_ra, c_rb,
                                        c_gamma, b_ids, b_Ja, b_Jb, b_gamma, body_vc, body_wc, body_inv_mass, body_inv_inertia_W)
                    f.load_velocity(w, b, p6, body_vc, body_wc, newton_v)
                    b += BLOCK
                c = start + lane
                while c < end:  # g0 = mu gamma0_n
                    c_bound[c] = ti.cast(c_reg[c][R_MU] * ti.max(c_gamma[c][2], 0.0), real)
                    c += BLOCK
                barrier(newton_fence, w)
                c = start + lane
                while c < end:  # u = J v, then kept up to date with each step
                    ids = c_ids[c]
                    c_u[c] = f.contact_u(w, 6 * newton_pos[w, ids[ID_A]], 6 * newton_pos[w, ids[ID_B]], ti.cast(c_frame[c], real),
                                         ti.cast(c_ra[c], real), ti.cast(c_rb[c], real), newton_v)
                    c += BLOCK
                # A row joins two mobile bodies (the factor has a block off its diagonal): the same
                # on every lane.
                coupled = 0
                for I in range(B):
                    if newton_row_len[w, I] > 0:
                        coupled = 1
                while True:  # it: block-uniform
                    modified = f.isotropic_start(it, 0, coupled)
                    # Each lane: the mass terms of its bodies (zeroing their block rows), the
                    # terms of its contacts.
                    b = lane
                    while b < B:
                        p = newton_pos[w, b]
                        f.zero_block_row(w, p, newton_H, newton_rows, newton_row_len)
                        f.mass_terms(w, wm, b, 6 * p, newton_v, newton_vs, body_inv_mass, body_inv_inertia_W, newton_grad,
                                     newton_H)
                        b += BLOCK
                    c = start + lane
                    while c < end:
                        ra, rb = ti.cast(c_ra[c], real), ti.cast(c_rb[c], real)
                        arm, _ = f.hessian_arm(body_inv_mass[wm, c_ids[c][ID_A]] > 0.0, ra, rb)
                        cf, cta, ctb, cA, cAS, cSAS = f.contact_terms(c_u[c], c_bound[c], c_reg[c], modified, ti.cast(c_frame[c], real),
                                                                      ra, rb, arm)
                        c_f[c], c_ta[c], c_tb[c] = cf, cta, ctb
                        c_A[c], c_AS[c], c_SAS[c] = cA, cAS, cSAS
                        c += BLOCK
                    evaluations += end - start + jend - jstart
                    barrier(newton_fence, w)
                    # The lane of a run's first row: the run's sums, in row order, in place.
                    c = start + lane
                    while c < end:
                        if run_start(c, start, c_ids) == 1:
                            sum_A, sum_AS, sum_SAS = rmat3(0.0), rmat3(0.0), rmat3(0.0)
                            sum_f, sum_ta, sum_tb = rvec3(0.0), rvec3(0.0), rvec3(0.0)
                            pair = c_ids[c][ID_PAIR]
                            k = c
                            while k < end:
                                if c_ids[k][ID_PAIR] != pair:
                                    break
                                sum_A += c_A[k]
                                sum_AS += c_AS[k]
                                sum_SAS += c_SAS[k]
                                sum_f += c_f[k]
                                sum_ta += c_ta[k]
                                sum_tb += c_tb[k]
                                k += 1
                            c_A[c], c_AS[c], c_SAS[c] = sum_A, sum_AS, sum_SAS
                            c_f[c], c_ta[c], c_tb[c] = sum_f, sum_ta, sum_tb
                        c += BLOCK
                    barrier(newton_fence, w)
                    # The lane that owns a mobile body: the runs and bilateral rows touching it,
                    # in row order, into its gradient, its diagonal block and the off-diagonal
                    # blocks of its block row (the pair's body of lower position).
                    b = lane
                    while b < B:
                        if body_inv_mass[wm, b] > 0.0:
                            pb_own = newton_pos[w, b]
                            for k in range(runs_begin(w, b, start, newton_run_end), newton_run_end[w, b]):
                                cr = c_body_runs[k]
                                ids = c_ids[cr]
                                a, bb = ids[ID_A], ids[ID_B]
                                pa, pb = newton_pos[w, a], newton_pos[w, bb]
                                _, d = f.hessian_arm(body_inv_mass[wm, a] > 0.0, ti.cast(c_ra[cr], real), ti.cast(c_rb[cr], real))
                                if a == b:
                                    f.add_gradient_side(w, pa, c_f[cr], c_ta[cr], 1.0, newton_grad)
                                    f.hessian_a(w, pa, c_A[cr], c_AS[cr], c_SAS[cr], newton_H)
                                else:
                                    f.add_gradient_side(w, pb, c_f[cr], c_tb[cr], -1.0, newton_grad)
                                    f.hessian_b(w, pb, c_A[cr], c_AS[cr], c_SAS[cr], d, newton_H)
                                other = bb if a == b else a
                                if body_inv_mass[wm, other] > 0.0 and newton_pos[w, other] < pb_own:
                                    f.hessian_ab(w, pa, pb, c_A[cr], c_AS[cr], c_SAS[cr], d, newton_H)
                            for jr in range(jstart, jend):
                                ids = b_ids[jr]
                                if ids[ID_A] == b or ids[ID_B] == b:
                                    pa, pb, mobile_a, mobile_b, ja, jb, gamma, G = f.bilateral_row(
                                        w, wm, jr, b_ids, b_Ja, b_Jb, b_law, body_inv_mass, newton_pos, newton_v)
                                    if ids[ID_A] == b:
                                        f.bilateral_side(w, pa, ja, gamma, G, newton_grad, newton_H)
                                    else:
                                        f.bilateral_side(w, pb, jb, gamma, G, newton_grad, newton_H)
                                    if mobile_a and mobile_b and ti.max(pa, pb) == pb_own:
                                        f.bilateral_pair(w, pa, pb, ja, jb, G, newton_H)
                        b += BLOCK
                    barrier(newton_fence, w)
                    # Stopping test (block-uniform: the block's maximum).
                    part_r = ti.cast(0.0, real)
                    b = lane
                    while b < B:
                        part_r = ti.max(part_r, f.body_residual(w, wm, b, 6 * newton_pos[w, b], newton_grad, body_inv_mass,
                                                                body_inv_inertia_W, body_reach))
                        b += BLOCK
                    residual = block_max(red, lane, part_r, newton_fence, w)
                    if residual <= tolerance or it >= iterations or short == 1:
                        break
                    # Factor: Jacobi scaling, then the block columns J in order.
                    k = lane
                    while k < 6 * B:
                        newton_scale[w, k] = 1.0 / ti.sqrt(newton_H[w, k, k])
                        k += BLOCK
                    barrier(newton_fence, w)
                    k = lane
                    while k < B:
                        f.scale_block_row(w, k, newton_H, newton_scale, newton_rows, newton_row_len)
                        k += BLOCK
                    barrier(newton_fence, w)
                    for J in range(B):
                        if lane < 36:  # one entry of the diagonal block's update each
                            for n in range(newton_row_len[w, J]):
                                f.update_entry(newton_H, w, J, J, newton_rows[w, J, n], lane // 6, lane % 6)
                        barrier(newton_fence, w)
                        if lane == 0:
                            f.factor_diagonal(w, J, newton_H)
                        barrier(newton_fence, w)
                        k = lane
                        while k < 6 * (B - J - 1):  # row k % 6 of block L[I, J], I = J + 1 + k // 6
                            I = J + 1 + k // 6
                            if newton_padj[w, I, J] == 1:
                                f.factor_row(w, I, J, k % 6, newton_H, newton_padj, newton_rows, newton_row_len)
                            k += BLOCK
                        barrier(newton_fence, w)
                    # Triangular solves (newton_funcs.triangular_solves' sums): forward by block
                    # columns (y_J, then each later row's update by it, a row per lane),
                    # backward from the last block (x_K, then the rows of K's pattern).
                    k = lane
                    while k < 6 * B:
                        newton_dv[w, k] = -newton_scale[w, k] * newton_grad[w, k]
                        k += BLOCK
                    barrier(newton_fence, w)
                    for J in range(B):
                        if lane == 0:
                            f.forward_diagonal(w, J, newton_H, newton_dv)
                        barrier(newton_fence, w)
                        k = lane
                        while k < 6 * (B - J - 1):  # row k % 6 of block row I = J + 1 + k // 6
                            I = J + 1 + k // 6
                            if newton_padj[w, I, J] == 1:
                                f.subtract_row_product(w, I, J, k % 6, False, newton_H, newton_dv)
                            k += BLOCK
                        barrier(newton_fence, w)
                    for KK in range(B):
                        K = B - 1 - KK
                        if lane == 0:
                            f.backward_diagonal(w, K, newton_H, newton_dv)
                        barrier(newton_fence, w)
                        k = lane
                        while k < 6 * newton_row_len[w, K]:  # row k % 6 of block row newton_rows[w, K, k // 6]
                            f.subtract_row_product(w, newton_rows[w, K, k // 6], K, k % 6, True, newton_H, newton_dv)
                            k += BLOCK
                        barrier(newton_fence, w)
                    k = lane
                    while k < 6 * B:
                        newton_dv[w, k] = newton_dv[w, k] * newton_scale[w, k]
                        k += BLOCK
                    barrier(newton_fence, w)
                    if ti.static(f.step_test):  # float32: the full step's test (solver.newton)
                        part_s = ti.cast(0.0, real)
                        b = lane
                        while b < B:
                            part_s = ti.max(part_s, f.body_step(w, b, 6 * newton_pos[w, b], newton_dv, body_reach))
                            b += BLOCK
                        short = 1 if block_max(red, lane, part_s, newton_fence, w) <= tolerance else 0
                    # Line search on phi(alpha) = l(v + alpha dv; g).
                    part0 = ti.cast(0.0, real)
                    k = lane
                    while k < 6 * B:
                        part0 += newton_grad[w, k] * newton_dv[w, k]
                        k += BLOCK
                    part_d, part_v = ti.cast(0.0, real), ti.cast(0.0, real)
                    b = lane
                    while b < B:
                        part_d, part_v = f.mass_directional(w, wm, b, 6 * newton_pos[w, b], newton_v, newton_vs, newton_dv,
                                                            body_inv_mass, body_inv_inertia_W, part_d, part_v)
                        b += BLOCK
                    c = start + lane
                    while c < end:
                        ids = c_ids[c]
                        c_jdv[c] = f.contact_u(w, 6 * newton_pos[w, ids[ID_A]], 6 * newton_pos[w, ids[ID_B]],
                                               ti.cast(c_frame[c], real), ti.cast(c_ra[c], real), ti.cast(c_rb[c], real), newton_dv)
                        c += BLOCK
                    d0, dMd, dMv = block_sum(red, lane, part0, part_d, part_v, newton_fence, w)
                    alpha = ti.cast(1.0, real)
                    if d0 >= 0.0:  # no descent left: the iterate is the minimum to round-off
                        alpha = 0.0
                    else:
                        lo, hi = ti.cast(0.0, real), ti.cast(ALPHA_MAX, real)
                        for _ in range(LINE_SEARCH_EVALUATIONS):
                            p1, p2 = ti.cast(0.0, real), ti.cast(0.0, real)
                            c = start + lane
                            while c < end:
                                jdv = c_jdv[c]
                                dd1, dd2 = f.directional(c_u[c] + alpha * jdv, jdv, c_bound[c], c_reg[c])
                                p1 += dd1
                                p2 += dd2
                                c += BLOCK
                            j = jstart + lane
                            while j < jend:
                                dd1, dd2 = f.bilateral_directional(w, j, alpha, b_ids, b_Ja, b_Jb, b_law, newton_pos, newton_v,
                                                                   newton_dv)
                                p1 += dd1
                                p2 += dd2
                                j += BLOCK
                            s1, s2, _unused = block_sum(red, lane, p1, p2, 0.0, newton_fence, w)
                            d1 = dMv + alpha * dMd + s1
                            d2 = dMd + s2
                            evaluations += end - start + jend - jstart
                            alpha, lo, hi, done = f.search_update(alpha, lo, hi, d0, d1, d2)
                            if done:  # block-uniform: d0, d1 and d2 are block sums
                                break
                    # Step and bounds.
                    b = lane
                    while b < B:
                        f.step_body(w, 6 * newton_pos[w, b], alpha, newton_v, newton_dv)
                        b += BLOCK
                    c = start + lane
                    while c < end:
                        f.step_contact(c, alpha, c_u, c_jdv, c_reg, c_bound)
                        c += BLOCK
                    barrier(newton_fence, w)
                    it += 1
                # The solution (newton.world_funcs.store_solution): the impulses of the
                # regularised law at the iterate, then the velocities v* + M^-1 J^T gamma (each
                # body on its lane, in row order, as the world kernel).
                c = start + lane
                while c < end:
                    gamma, _ = f.response(c_u[c], c_bound[c], c_reg[c], 0)
                    c_gamma[c] = ti.cast(gamma, float)
                    c += BLOCK
                j = jstart + lane
                while j < jend:
                    b_gamma[j] = ti.cast(f.bilateral_impulse(w, wm, j, b_ids, b_Ja, b_Jb, b_law, body_inv_mass, newton_pos,
                                                             newton_v), float)
                    j += BLOCK
                barrier(newton_fence, w)
                b = lane
                while b < B:
                    f.store_velocity(w, b, 6 * newton_pos[w, b], newton_vs, body_vc, body_wc)
                    apply_body_impulses(w, wm, b, start, end, jstart, jend, newton_run_end, c_body_runs, c_ids, c_frame, c_ra, c_rb,
                                        c_gamma, b_ids, b_Ja, b_Jb, b_gamma, body_vc, body_wc, body_inv_mass, body_inv_inertia_W)
                    b += BLOCK
            if lane == 0:
                world_iterations[w] = it
                world_residual[w] = ti.cast(residual, float)
                world_contacts[w] = end - start
                world_updates[w] = evaluations

    return solve_newton_block
