"""The "world" schedule: one thread runs every sweep of one world (one launch per solve; the
CPU default). Gauss-Seidel applies each contact update at once; the Jacobi methods update every
contact from the same velocities, then apply them (solver.cone has the arithmetic).

Gauss-Seidel "sleep": a body whose velocity moved by no more than the tolerance over two
sweeps in a row falls asleep, and a sweep skips every contact whose two bodies are asleep (or
asleep and immobile). A sleeping body is measured against its velocity when it fell asleep, so
nudges from its awake neighbours add up, and it wakes once they pass the tolerance; the
world's residual includes that drift, so the world stops by the same test as without sleep.
In a pile most spheres settle long before the last sweep of a step (the slow friction modes of
a few set the sweep count), and their contacts are no longer revisited. Falling asleep after
one quiet sweep instead of two made the lower box of a stack keep waking."""


import functools

import taichi as ti

from .. import backend

from ..types import ID_A, ID_B, contact_reg, ivec4, mat3, nd, vec3
from .cone import apply_world_impulse, body_change, contact_update, contact_velocity, restart_product, sweep_beta

__all__ = ["world_solver", "open_queue", "world_slots", "first_world", "next_world"]


@ti.func
def open_queue(world_queue: ti.template()):
    """Empties the queue of worlds before a world loop (on the cpu pool; a serial statement of
    the kernel, which runs before its loop). world_queue (1,) i32 counts the worlds claimed."""
    if ti.static(backend.WORLD_SPREAD > 0):
        world_queue[0] = 0


@ti.func
def world_slots(n_worlds: ti.i32) -> ti.i32:
    """The range of the world schedule's loop: one slot per world on one thread and on the GPU
    backends; on the cpu pool, backend.POOL_SLOTS per thread, of which the first of each
    claims worlds from the queue (first_world, next_world) until none is left, so that a
    thread whose worlds stop early takes more: Taichi's pool gives each thread a fixed share
    of the range, and the worlds of a batch cost from one to tens of iterations."""
    slots = n_worlds
    if ti.static(backend.WORLD_SPREAD > 0):
        slots = backend.WORLD_SPREAD
    return slots


@ti.func
def claim_world(n_worlds: ti.i32, world_queue: ti.template()) -> ti.i32:
    """The next unclaimed world, -1 once every world is claimed."""
    k = ti.atomic_add(world_queue[0], 1)
    return k if k < n_worlds else -1


@ti.func
def first_world(slot: ti.i32, n_worlds: ti.i32, world_queue: ti.template()) -> ti.i32:
    """The first world of this slot of world_slots, -1 for none."""
    w = slot
    if ti.static(backend.WORLD_SPREAD > 0):
        w = -1
        if slot % backend.POOL_SLOTS == 0:
            w = claim_world(n_worlds, world_queue)
    return w


@ti.func
def next_world(n_worlds: ti.i32, world_queue: ti.template()) -> ti.i32:
    """The next world of a slot that has solved one, -1 for none (always on one thread and on
    the GPU backends: one world per slot)."""
    w = -1
    if ti.static(backend.WORLD_SPREAD > 0):
        w = claim_world(n_worlds, world_queue)
    return w


@functools.lru_cache(maxsize=None)
def world_solver(gauss_seidel: bool, accelerated: bool, sleep: bool, coulomb: bool):
    """The solve kernel of the world schedule for these compile-time options (one kernel per
    combination, made once). Sleep is a Gauss-Seidel option (SolverOptions.resolve)."""
    assert gauss_seidel or not sleep, "sleep needs gauss_seidel"

    @ti.kernel
    def solve_world(
        world_start: nd(dtype=ti.i32, ndim=1),
        world_status: nd(dtype=ti.i32, ndim=1),
        world_queue: nd(dtype=ti.i32, ndim=1),
        c_ids: nd(dtype=ivec4, ndim=1),
        c_frame: nd(dtype=mat3, ndim=1),
        c_ra: nd(dtype=vec3, ndim=1),
        c_rb: nd(dtype=vec3, ndim=1),
        c_reg: nd(dtype=contact_reg, ndim=1),
        c_gamma: nd(dtype=vec3, ndim=1),
        c_delta: nd(dtype=vec3, ndim=1),
        c_prev: nd(dtype=vec3, ndim=1),
        body_vc: nd(dtype=vec3, ndim=2),
        body_wc: nd(dtype=vec3, ndim=2),
        body_vx: nd(dtype=vec3, ndim=2),
        body_wx: nd(dtype=vec3, ndim=2),
        body_awake: nd(dtype=ti.i32, ndim=2),
        body_reach: nd(dtype=float, ndim=1),
        body_inv_mass: nd(dtype=float, ndim=2),
        body_inv_inertia_W: nd(dtype=mat3, ndim=2),
        world_iterations: nd(dtype=ti.i32, ndim=1),
        world_residual: nd(dtype=float, ndim=1),
        world_contacts: nd(dtype=ti.i32, ndim=1),
        world_updates: nd(dtype=ti.i32, ndim=1),
        iterations: ti.i32,
        tolerance: float,
        omega: float,
    ):
        """One thread per world: applies the warm-start impulses, then sweeps until no point of
        any body changes velocity by more than tolerance over a sweep (body_change), or the cap.
        Gauss-Seidel with sleep skips the contacts of sleeping bodies (body_awake[w, b] = 0;
        body_vx/body_wx then hold a sleeping body's velocity when it fell asleep). Jacobi keeps
        x_k+1 in c_delta and applies it after the sweep, then, accelerated, extrapolates
        impulses (c_gamma = y_k+1, c_prev = x_k+1) and velocities alike (body_vx/body_wx keep
        v(x_k)). Reads and writes c_gamma and body_vc/body_wc (centre-of-mass velocities, world
        frame); writes the world's iterations, residual [m/s], contacts and contact updates."""
        B = body_vc.shape[1]
        n_worlds = world_start.shape[0] - 1
        open_queue(world_queue)
        ti.loop_config(serialize=backend.SERIAL_LOOPS)
        for slot in range(world_slots(n_worlds)):
            w = first_world(slot, n_worlds, world_queue)
            while w >= 0:
                start, end = world_start[w], world_start[w + 1]
                it = 0
                residual = 0.0
                updates = 0
                if world_status[w] == 0:
                    wm = w % body_inv_mass.shape[0]
                    for c in range(start, end):  # the warm start
                        ids = c_ids[c]
                        apply_world_impulse(w, wm, ids[ID_A], ids[ID_B], c_frame[c].transpose() @ c_gamma[c], c_ra[c], c_rb[c], body_vc,
                                            body_wc, body_inv_mass, body_inv_inertia_W)
                    for b in range(B):
                        body_vx[w, b] = body_vc[w, b]
                        body_wx[w, b] = body_wc[w, b]
                        if ti.static(sleep):
                            body_awake[w, b] = 2
                    t_k = 1.0
                    if ti.static(accelerated):
                        for c in range(start, end):
                            c_prev[c] = c_gamma[c]
                    while it < iterations:
                        restart_sum = 0.0
                        for c in range(start, end):
                            ids = c_ids[c]
                            a, b = ids[ID_A], ids[ID_B]
                            if ti.static(sleep):
                                if body_awake[w, a] == 0 and body_awake[w, b] == 0:
                                    continue
                            updates += 1
                            frame = c_frame[c]
                            ra, rb = c_ra[c], c_rb[c]
                            vc = contact_velocity(frame, ra, rb, body_vc[w, a], body_wc[w, a], body_vc[w, b], body_wc[w, b])
                            reg = c_reg[c]
                            y = c_gamma[c]
                            x_new = contact_update(y, vc, reg, omega, coulomb)
                            if ti.static(gauss_seidel):
                                c_gamma[c] = x_new
                                apply_world_impulse(w, wm, a, b, frame.transpose() @ (x_new - y), ra, rb, body_vc, body_wc,
                                                    body_inv_mass, body_inv_inertia_W)
                            else:
                                if ti.static(accelerated):
                                    restart_sum += restart_product(y, x_new, c_prev[c], reg)
                                c_delta[c] = x_new
                        if ti.static(not gauss_seidel):  # velocities of x_k+1
                            for c in range(start, end):
                                ids = c_ids[c]
                                x_new = c_delta[c]
                                apply_world_impulse(w, wm, ids[ID_A], ids[ID_B], c_frame[c].transpose() @ (x_new - c_gamma[c]), c_ra[c],
                                                    c_rb[c], body_vc, body_wc, body_inv_mass, body_inv_inertia_W)
                                c_gamma[c] = x_new
                        residual = 0.0
                        for b in range(B):
                            change = body_change(body_vc[w, b] - body_vx[w, b], body_wc[w, b] - body_wx[w, b], body_reach[b])
                            residual = ti.max(residual, change)
                            if ti.static(sleep):  # body_awake: 2 moving, 1 quiet for one sweep, 0 asleep
                                awake = 2 if change > tolerance else ti.max(body_awake[w, b] - 1, 0)
                                if awake > 0 or body_awake[w, b] > 0:  # the next sweep's start, or the moment it falls asleep
                                    body_vx[w, b] = body_vc[w, b]
                                    body_wx[w, b] = body_wc[w, b]
                                body_awake[w, b] = awake
                            elif ti.static(gauss_seidel):
                                body_vx[w, b] = body_vc[w, b]
                                body_wx[w, b] = body_wc[w, b]
                        beta_t = sweep_beta(it, residual, tolerance, iterations, t_k, restart_sum, accelerated)
                        t_k = beta_t[1]
                        beta = beta_t[0]
                        if ti.static(accelerated):  # y_k+1 = x_k+1 + beta (x_k+1 - x_k), impulses and velocities
                            for c in range(start, end):
                                x_new = c_gamma[c]
                                c_gamma[c] = x_new + beta * (x_new - c_prev[c])
                                c_prev[c] = x_new
                        if ti.static(not gauss_seidel):
                            for b in range(B):
                                v, om = body_vc[w, b], body_wc[w, b]
                                body_vc[w, b] = v + beta * (v - body_vx[w, b])
                                body_wc[w, b] = om + beta * (om - body_wx[w, b])
                                body_vx[w, b] = v
                                body_wx[w, b] = om
                        it += 1
                        if residual <= tolerance:
                            break
                world_iterations[w] = it
                world_residual[w] = residual
                world_contacts[w] = end - start
                world_updates[w] = updates
                w = next_world(n_worlds, world_queue)

    return solve_world
