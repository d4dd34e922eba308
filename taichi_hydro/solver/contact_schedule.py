"""The "contact" schedule: one launch per sweep over every contact of every world, then one
over every body (the GPU default; converged worlds idle until the last world stops). Same
arithmetic as the world schedule (solver.cone): Jacobi or accelerated Jacobi.

Impulse changes reach the bodies through float atomics, or, in the deterministic mode, by
storing each sweep's changes per row and letting every body gather its own in row order
(gather_impulses), with each world's restart test summed in row order (sum_world_restart)."""


import functools

import taichi as ti

from .. import backend

from ..types import ID_A, ID_B, ID_WORLD, P_BODY_LO, contact_reg, ivec4, ivec8, mat3, nd, vec3
from .cone import add_impulse, body_change, contact_update, contact_velocity, restart_product, sweep_beta

__all__ = ["apply_impulses", "gather_impulses", "start_sweeps", "sweep_contacts", "sum_world_restart", "sweep_bodies"]


@ti.kernel
def apply_impulses(
    world_start: nd(dtype=ti.i32, ndim=1),
    c_ids: nd(dtype=ivec4, ndim=1),
    c_frame: nd(dtype=mat3, ndim=1),
    c_ra: nd(dtype=vec3, ndim=1),
    c_rb: nd(dtype=vec3, ndim=1),
    c_gamma: nd(dtype=vec3, ndim=1),
    body_vc: nd(dtype=vec3, ndim=2),
    body_wc: nd(dtype=vec3, ndim=2),
    body_inv_mass: nd(dtype=float, ndim=2),
    body_inv_inertia_W: nd(dtype=mat3, ndim=2),
):
    """v += M^-1 J^T gamma for every contact (atomic accumulation): the warm start."""
    W = world_start.shape[0] - 1
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for c in range(world_start[W]):
        ids = c_ids[c]
        w = ids[ID_WORLD]
        wm = w % body_inv_mass.shape[0]
        add_impulse(w, wm, ids[ID_A], ids[ID_B], c_frame[c].transpose() @ c_gamma[c], c_ra[c], c_rb[c], body_vc, body_wc,
                    body_inv_mass, body_inv_inertia_W)


@functools.lru_cache(maxsize=None)
def gather_impulses(during_sweeps: bool):
    """The deterministic replacement of the atomic accumulation: the warm start (during_sweeps
    False, source = c_gamma) or a sweep's changes (True, source = c_delta, worlds still
    iterating only)."""

    @ti.kernel
    def gather(
        world_status: nd(dtype=ti.i32, ndim=1),
        world_converged: nd(dtype=ti.i32, ndim=1),
        body_pair_start: nd(dtype=ti.i32, ndim=1),
        body_pairs: nd(dtype=ti.i32, ndim=1),
        pair_i: nd(dtype=ivec8, ndim=1),
        pair_first: nd(dtype=ti.i32, ndim=2),
        pair_end: nd(dtype=ti.i32, ndim=2),
        c_frame: nd(dtype=mat3, ndim=1),
        c_ra: nd(dtype=vec3, ndim=1),
        c_rb: nd(dtype=vec3, ndim=1),
        source: nd(dtype=vec3, ndim=1),
        body_vc: nd(dtype=vec3, ndim=2),
        body_wc: nd(dtype=vec3, ndim=2),
        body_inv_mass: nd(dtype=float, ndim=2),
        body_inv_inertia_W: nd(dtype=mat3, ndim=2),
    ):
        """v += M^-1 J^T source for every dynamic body, each body summing the rows of its pairs
        in order (source: contact-frame impulses)."""
        ti.loop_config(serialize=backend.SERIAL_LOOPS)
        for w, b in ti.ndrange(body_vc.shape[0], body_vc.shape[1]):
            wm = w % body_inv_mass.shape[0]
            active = world_status[w] == 0 and body_inv_mass[wm, b] > 0.0
            if ti.static(during_sweeps):
                active = active and world_converged[w] == 0
            if active:
                dv = vec3(0.0)
                dl = vec3(0.0)  # sum of r x impulse, mapped by the inverse inertia once at the end
                for j in range(body_pair_start[b], body_pair_start[b + 1]):
                    p = body_pairs[j]
                    sign = 1.0
                    if pair_i[p][P_BODY_LO] == b:
                        sign = -1.0
                    for c in range(pair_first[w, p], pair_end[w, p]):
                        impulse = sign * (c_frame[c].transpose() @ source[c])
                        dv += impulse
                        r = c_rb[c]
                        if sign < 0.0:
                            r = c_ra[c]
                        dl += r.cross(impulse)
                body_vc[w, b] = body_vc[w, b] + body_inv_mass[wm, b] * dv
                body_wc[w, b] = body_wc[w, b] + body_inv_inertia_W[w, b] @ dl

    return gather


@ti.kernel
def start_sweeps(world_start: nd(dtype=ti.i32, ndim=1), world_iterations: nd(dtype=ti.i32, ndim=1),
                 world_residual: nd(dtype=float, ndim=1), world_contacts: nd(dtype=ti.i32, ndim=1),
                 world_converged: nd(dtype=ti.i32, ndim=1), world_momentum: nd(dtype=float, ndim=1),
                 world_beta: nd(dtype=float, ndim=1), world_restart: nd(dtype=float, ndim=1), body_vc: nd(dtype=vec3, ndim=2),
                 body_wc: nd(dtype=vec3, ndim=2), body_vx: nd(dtype=vec3, ndim=2), body_wx: nd(dtype=vec3, ndim=2)):
    """Resets the per-world statistics and momentum (t = 1, beta = 0) before the sweeps;
    v(x_0) = the velocities after the warm start."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w in range(world_residual.shape[0]):
        world_iterations[w] = 0
        world_residual[w] = 0.0
        world_contacts[w] = world_start[w + 1] - world_start[w]
        world_converged[w] = 0
        world_momentum[w] = 1.0
        world_beta[w] = 0.0
        world_restart[w] = 0.0
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, b in ti.ndrange(body_vc.shape[0], body_vc.shape[1]):
        body_vx[w, b] = body_vc[w, b]
        body_wx[w, b] = body_wc[w, b]


@functools.lru_cache(maxsize=None)
def sweep_contacts(accelerated: bool, coulomb: bool, deterministic: bool):
    """The per-contact launch of one sweep, for these compile-time options."""

    @ti.kernel
    def sweep(
        world_start: nd(dtype=ti.i32, ndim=1),
        world_status: nd(dtype=ti.i32, ndim=1),
        world_converged: nd(dtype=ti.i32, ndim=1),
        c_ids: nd(dtype=ivec4, ndim=1),
        c_frame: nd(dtype=mat3, ndim=1),
        c_ra: nd(dtype=vec3, ndim=1),
        c_rb: nd(dtype=vec3, ndim=1),
        c_reg: nd(dtype=contact_reg, ndim=1),
        c_gamma: nd(dtype=vec3, ndim=1),
        c_prev: nd(dtype=vec3, ndim=1),
        c_delta: nd(dtype=vec3, ndim=1),
        c_restart: nd(dtype=float, ndim=1),
        body_vc: nd(dtype=vec3, ndim=2),
        body_wc: nd(dtype=vec3, ndim=2),
        body_dv: nd(dtype=vec3, ndim=2),
        body_dw: nd(dtype=vec3, ndim=2),
        body_inv_mass: nd(dtype=float, ndim=2),
        body_inv_inertia_W: nd(dtype=mat3, ndim=2),
        world_beta: nd(dtype=float, ndim=1),
        world_restart: nd(dtype=float, ndim=1),
        omega: float,
    ):
        """One sweep over all contacts of the worlds still iterating. c_gamma holds x_k; the
        velocities hold v(y), y = x_k + beta (x_k - x_k-1) with the world's beta of the previous
        sweep (c_prev = x_k-1, accelerated only). Writes x_k+1 to c_gamma, accumulates
        M^-1 J^T (x_k+1 - y) into body_dv/body_dw (deterministic: stores the change in c_delta
        for gather_impulses) and, accelerated, the restart term (world_restart, atomic sum;
        deterministic: c_restart for sum_world_restart)."""
        W = world_start.shape[0] - 1
        ti.loop_config(serialize=backend.SERIAL_LOOPS)
        for c in range(world_start[W]):
            ids = c_ids[c]
            w, a, b = ids[ID_WORLD], ids[ID_A], ids[ID_B]
            if world_status[w] == 0 and world_converged[w] == 0:
                wm = w % body_inv_mass.shape[0]
                vc = contact_velocity(c_frame[c], c_ra[c], c_rb[c], body_vc[w, a], body_wc[w, a], body_vc[w, b], body_wc[w, b])
                reg = c_reg[c]
                x = c_gamma[c]
                y = x
                if ti.static(accelerated):
                    x_prev = c_prev[c]
                    y = x + world_beta[w] * (x - x_prev)
                    c_prev[c] = x
                x_new = contact_update(y, vc, reg, omega, coulomb)
                c_gamma[c] = x_new
                if ti.static(accelerated):
                    term = restart_product(y, x_new, x, reg)
                    if ti.static(deterministic):
                        c_restart[c] = term
                    else:
                        ti.atomic_add(world_restart[w], term)
                if ti.static(deterministic):
                    c_delta[c] = x_new - y
                else:
                    add_impulse(w, wm, a, b, c_frame[c].transpose() @ (x_new - y), c_ra[c], c_rb[c], body_dv, body_dw, body_inv_mass,
                                body_inv_inertia_W)

    return sweep


@ti.kernel
def sum_world_restart(world_start: nd(dtype=ti.i32, ndim=1), world_status: nd(dtype=ti.i32, ndim=1),
                      world_converged: nd(dtype=ti.i32, ndim=1), c_restart: nd(dtype=float, ndim=1),
                      world_restart: nd(dtype=float, ndim=1)):
    """world_restart[w] = sum of c_restart over the world's rows, in row order (deterministic
    mode of accelerated Jacobi)."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w in range(world_restart.shape[0]):
        if world_status[w] == 0 and world_converged[w] == 0:
            total = 0.0
            for c in range(world_start[w], world_start[w + 1]):
                total += c_restart[c]
            world_restart[w] = total


@functools.lru_cache(maxsize=None)
def sweep_bodies(accelerated: bool):
    """The per-body launch that ends a sweep, for these compile-time options."""

    @ti.kernel
    def end_sweep(
        world_status: nd(dtype=ti.i32, ndim=1),
        body_vc: nd(dtype=vec3, ndim=2),
        body_wc: nd(dtype=vec3, ndim=2),
        body_dv: nd(dtype=vec3, ndim=2),
        body_dw: nd(dtype=vec3, ndim=2),
        body_vx: nd(dtype=vec3, ndim=2),
        body_wx: nd(dtype=vec3, ndim=2),
        body_reach: nd(dtype=float, ndim=1),
        world_iterations: nd(dtype=ti.i32, ndim=1),
        world_residual: nd(dtype=float, ndim=1),
        world_converged: nd(dtype=ti.i32, ndim=1),
        world_swept: nd(dtype=ti.i32, ndim=1),
        world_momentum: nd(dtype=float, ndim=1),
        world_beta: nd(dtype=float, ndim=1),
        world_restart: nd(dtype=float, ndim=1),
        tolerance: float,
        iterations: ti.i32,
    ):
        """Ends a sweep. Per world still iterating: the residual is the largest velocity change
        of a body point between v(x_k) (body_vx/body_wx) and v(x_k+1) = v(y) + dv
        (body_change); counts the sweep, marks the world converged when the residual is below
        tolerance and chooses the momentum (world_swept[w] = 1 for a world that swept). Then per
        body of those worlds: v(y_k+1) = v(x_k+1) + beta (v(x_k+1) - v(x_k)) (beta = 0 for
        plain Jacobi) and body_vx/body_wx = v(x_k+1)."""
        B = body_vc.shape[1]
        ti.loop_config(serialize=backend.SERIAL_LOOPS)
        for w in range(world_swept.shape[0]):
            swept = 0
            if world_status[w] == 0 and world_converged[w] == 0:
                swept = 1
                residual = 0.0
                for b in range(B):
                    change = body_change(body_vc[w, b] + body_dv[w, b] - body_vx[w, b], body_wc[w, b] + body_dw[w, b] - body_wx[w, b],
                                         body_reach[b])
                    residual = ti.max(residual, change)
                bt = sweep_beta(world_iterations[w], residual, tolerance, iterations, world_momentum[w], world_restart[w], accelerated)
                world_beta[w] = bt[0]
                world_momentum[w] = bt[1]
                world_iterations[w] = world_iterations[w] + 1
                world_residual[w] = residual
                if residual <= tolerance:
                    world_converged[w] = 1
            world_swept[w] = swept
            world_restart[w] = 0.0
        ti.loop_config(serialize=backend.SERIAL_LOOPS)
        for w, b in ti.ndrange(body_vc.shape[0], body_vc.shape[1]):
            if world_swept[w] == 1:
                v = body_vc[w, b] + body_dv[w, b]
                om = body_wc[w, b] + body_dw[w, b]
                beta = world_beta[w]
                body_vc[w, b] = v + beta * (v - body_vx[w, b])
                body_wc[w, b] = om + beta * (om - body_wx[w, b])
                body_vx[w, b] = v
                body_wx[w, b] = om
            body_dv[w, b] = vec3(0.0)
            body_dw[w, b] = vec3(0.0)

    return end_sweep
