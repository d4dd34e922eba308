"""Semi-implicit Euler for free rigid bodies (DESIGN §3 steps 1 and 6).

The state holds the pose and velocity of each body frame origin B as the scene places it; the
dynamics run at the centre of mass Bcm (p_BBcm in the body frame):
    v_cm = v_B + w x (R p_BBcm)
    v_cm* = v_cm + dt (g + f/m),   w* from I w* + dt w* x (I w*) = I w + dt tau   (implicit
    gyroscopic term, one Newton step in the body frame, Catto 2015)
    after the contact solve: p_cm += dt v_cm, q <- normalise(q + dt/2 (0, w) (x) q),
    then back to the origin: p_B = p_cm - R' p_BBcm, v_B = v_cm - w x (R' p_BBcm).
Kinematic bodies keep their velocity (infinite mass); static bodies never move.

A world whose velocities become non-finite or absurd (|v| > 1e4 m/s, |w| > 1e5 rad/s) is
marked diverged (world_status = 1) before its pose is touched: it keeps its last good state,
every stage skips it, and no other world is affected. So is a world whose pose is not finite
(written so through a state view, sim.state_tensors), which stays as it was written.
world_status records which check tripped (types.FROZEN_*, the highest code when several did)."""

import taichi as ti

from . import backend

from .math3d import finite_pose, quat_mul, quat_to_mat, skew
from .types import BODY_DYNAMIC, BODY_STATIC, FROZEN_POSE, FROZEN_SPEED, FROZEN_SPIN, mat3, nd, vec3, vec4

MAX_SPEED = 1e4  # m/s
MAX_SPIN = 1e5  # rad/s


@ti.kernel
def free_velocity(
    world_status: nd(dtype=ti.i32, ndim=1),
    body_kind: nd(dtype=ti.i32, ndim=1),
    body_p: nd(dtype=vec3, ndim=2),
    body_q: nd(dtype=vec4, ndim=2),
    body_v: nd(dtype=vec3, ndim=2),
    body_w: nd(dtype=vec3, ndim=2),
    body_com_B: nd(dtype=vec3, ndim=1),
    body_inv_mass: nd(dtype=float, ndim=2),
    body_inv_inertia_B: nd(dtype=mat3, ndim=2),
    gravity: nd(dtype=vec3, ndim=1),
    body_force: nd(dtype=vec3, ndim=2),
    body_torque: nd(dtype=vec3, ndim=2),
    dt: float,
    body_vc: nd(dtype=vec3, ndim=2),
    body_wc: nd(dtype=vec3, ndim=2),
    body_inv_inertia_W: nd(dtype=mat3, ndim=2),
):
    """Writes the free-motion velocities of every body's centre of mass (body_vc, body_wc,
    world frame) and its inverse inertia in W. Forces/torques [N, N m] act at the centre of
    mass, world frame."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, b in ti.ndrange(body_vc.shape[0], body_vc.shape[1]):
        kind = body_kind[b]
        R = quat_to_mat(body_q[w, b])
        wm = w % body_inv_mass.shape[0]
        inv_I_W = R @ body_inv_inertia_B[wm, b] @ R.transpose()
        omega = body_w[w, b]
        v_cm = body_v[w, b] + omega.cross(R @ body_com_B[b])
        if kind == BODY_STATIC or world_status[w] != 0:
            v_cm = vec3(0.0)
            omega = vec3(0.0)
        elif kind == BODY_DYNAMIC:
            inv_m = body_inv_mass[wm, b]
            v_cm += dt * (gravity[w % gravity.shape[0]] + inv_m * body_force[w, b])
            # Implicit gyroscopic term in the body frame: one Newton step of
            # f(x) = I (x - w1) + dt x cross (I x) from x = w1.
            I_B = body_inv_inertia_B[wm, b].inverse()
            w1 = R.transpose() @ omega
            Iw = I_B @ w1
            f = dt * w1.cross(Iw)
            J = I_B + dt * (skew(w1) @ I_B - skew(Iw))
            w2 = w1 - J.inverse() @ f
            omega = R @ w2 + dt * (inv_I_W @ body_torque[w, b])
        body_vc[w, b] = v_cm
        body_wc[w, b] = omega
        body_inv_inertia_W[w, b] = inv_I_W


@ti.kernel
def check_divergence(world_status: nd(dtype=ti.i32, ndim=1), body_p: nd(dtype=vec3, ndim=2), body_q: nd(dtype=vec4, ndim=2),
                     body_vc: nd(dtype=vec3, ndim=2), body_wc: nd(dtype=vec3, ndim=2)):
    """Marks as diverged the worlds with non-finite or absurd solved velocities, or a
    non-finite pose (written through a state view; the collision stage already catches it
    for bodies that have contact pairs)."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, b in ti.ndrange(body_vc.shape[0], body_vc.shape[1]):
        v, omega = body_vc[w, b], body_wc[w, b]
        code = 0
        if not v.norm() <= MAX_SPEED:  # also for NaN
            code = FROZEN_SPEED
        if not omega.norm() <= MAX_SPIN:
            code = FROZEN_SPIN
        if finite_pose(body_p[w, b], body_q[w, b]) == 0:
            code = FROZEN_POSE
        if code != 0:
            ti.atomic_max(world_status[w], code)  # the same code whichever body's thread runs last


@ti.kernel
def integrate(
    world_status: nd(dtype=ti.i32, ndim=1),
    body_kind: nd(dtype=ti.i32, ndim=1),
    body_com_B: nd(dtype=vec3, ndim=1),
    body_vc: nd(dtype=vec3, ndim=2),
    body_wc: nd(dtype=vec3, ndim=2),
    dt: float,
    body_p: nd(dtype=vec3, ndim=2),
    body_q: nd(dtype=vec4, ndim=2),
    body_v: nd(dtype=vec3, ndim=2),
    body_w: nd(dtype=vec3, ndim=2),
):
    """Advances the pose with the solved velocities and writes the state back at the body
    origin (worlds marked diverged keep their state)."""
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, b in ti.ndrange(body_vc.shape[0], body_vc.shape[1]):
        if world_status[w] == 0 and body_kind[b] != BODY_STATIC:
            q = body_q[w, b]
            c_W = quat_to_mat(q) @ body_com_B[b]
            p_cm = body_p[w, b] + c_W
            v_cm, omega = body_vc[w, b], body_wc[w, b]
            p_cm += dt * v_cm
            q = q + 0.5 * dt * quat_mul(vec4(0.0, omega[0], omega[1], omega[2]), q)
            q = q / q.norm()
            c_new = quat_to_mat(q) @ body_com_B[b]
            body_p[w, b] = p_cm - c_new
            body_q[w, b] = q
            body_v[w, b] = v_cm - omega.cross(c_new)
            body_w[w, b] = omega
