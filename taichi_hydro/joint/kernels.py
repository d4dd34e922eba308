"""Joint kernels: the constraint rows of every joint in every world before the solve
(joint_rows), and the joints' positions, velocities, efforts and reaction wrenches after the
step (joint_state). Layout and row kinds: joint.layout.

Parent = body a of a row (or the world, a = -1), child = body b. A row along a direction d
(unit, world frame) is

  linear at points x_a, x_b:  u = d . (v_b + w_b x r_b) - d . (v_a + w_a x r_a),
                              Ja = -(d, r_a x d), Jb = (d, r_b x d)   (r: from each centre of mass)
  angular:                    u = d . (w_b - w_a),  Ja = -(0, d),  Jb = (0, d)

and its law (solver.bilateral) is one of (tau = dt, Tedrake's Baumgarte correction with the
time constant of one step):

  hold (the joint's constrained directions):  gamma = -(u + C/dt) / R, unbounded, where C is
    the position error along d and R = beta^2/(4 pi^2) w the near-rigid compliance of Drake's
    SAP: a spring whose period is dt/beta, the stiffest a step of dt resolves, for the inverse
    mass w of the two bodies along d (1/m_a + 1/m_b for a linear row: their rotation, which
    the Delassus diagonal J M^-1 J^T would add, is left out, since it would make a point held
    along a direction far from its lever arm as soft as the lever arm's rotational inertia;
    d . (I_a^-1 + I_b^-1) d for an angular row); C after the step is -dt R gamma (no
    oscillation);
  limit (lower: s = q - lower, upper: s = upper - q, the row's direction flipped):
    gamma = max(0, -(u + s/dt) / R): free while the limit is not reached within the step
    (speculative, like a contact), held with the same stiffness when it is;
  damping c:   gamma = -dt c u  (implicit: R = 1/(dt c), bias 0);
  friction f:  gamma = clamp(-u / R, -f dt, f dt) with the near-rigid R (sticks below f);
  actuator:    effort e: gamma = clamp(e, -E, E) dt (lower = upper);
               PD: gamma = clamp(dt (kp (q* - q - dt u) + kd (v* - u) + e), -E dt, E dt), i.e.
               R = 1/(dt (kp dt + kd)), bias = (kp (q* - q) + kd v*) / (kp dt + kd) + R e dt:
               the PD force at the end of the step, implicit in u, stable for any gain."""

import math

import taichi as ti

from .. import backend

from ..math3d import quat_mul, quat_to_mat
from ..types import L_BIAS, L_LOWER, L_R, L_UPPER, UNBOUNDED, ivec4, ivec8, mat3, nd, vec3, vec4, vec6, vec8
from .layout import (ACT_PD, BALL, J_ACTUATOR, J_CHILD, J_DOF_START, J_PARENT, J_ROW_COUNT, J_ROW_START, J_TYPE,
                     JF_DAMPING, JF_EFFORT_LIMIT, JF_FRICTION, JF_KD, JF_KP, JF_LOWER, JF_UPPER, PRISMATIC, REVOLUTE,
                     ROW_ACTUATOR, ROW_ANGULAR, ROW_DAMPING, ROW_FRICTION, ROW_LIMIT_LOWER, ROW_LIMIT_UPPER, ROW_LINEAR)

__all__ = ["joint_rows", "joint_state", "reset_joints"]

TWO_PI = 2.0 * math.pi


@ti.func
def conjugate(q: vec4) -> vec4:
    return vec4(q[0], -q[1], -q[2], -q[3])


@ti.func
def rotation_vector(q: vec4) -> vec3:
    """The rotation vector (axis x angle, angle in [0, pi]) of a unit quaternion [rad]."""
    if q[0] < 0.0:
        q = -q
    v = vec3(q[1], q[2], q[3])
    n = v.norm()
    out = 2.0 * v
    if n > 1e-12:
        out = v * (2.0 * ti.atan2(n, q[0]) / n)
    return out


@ti.func
def body_pose(w: ti.i32, body: ti.i32, body_p: ti.template(), body_q: ti.template(), body_com_B: ti.template()):
    """(p_WB, q_WB, c_W): the body frame's pose and its centre of mass in the world; the
    identity and the origin for body -1 (the world)."""
    p = vec3(0.0)
    q = vec4(1.0, 0.0, 0.0, 0.0)
    c = vec3(0.0)
    if body >= 0:
        p = body_p[w, body]
        q = body_q[w, body]
        c = p + quat_to_mat(q) @ body_com_B[body]
    return p, q, c


@ti.func
def joint_frames(w: ti.i32, j: ti.i32, joint_i: ti.template(), joint_p_PJ: ti.template(), joint_q_PJ: ti.template(),
                 joint_p_CJ: ti.template(), joint_q_CJ: ti.template(), body_p: ti.template(), body_q: ti.template(),
                 body_com_B: ti.template()):
    """World poses of the joint frame on the parent (p_WJp, q_WJp) and on the child (p_WJc,
    q_WJc), and the two centres of mass c_WP, c_WC (the origin for the world)."""
    p_WP, q_WP, c_WP = body_pose(w, joint_i[j][J_PARENT], body_p, body_q, body_com_B)
    p_WC, q_WC, c_WC = body_pose(w, joint_i[j][J_CHILD], body_p, body_q, body_com_B)
    p_WJp = p_WP + quat_to_mat(q_WP) @ joint_p_PJ[j]
    p_WJc = p_WC + quat_to_mat(q_WC) @ joint_p_CJ[j]
    q_WJp = quat_mul(q_WP, joint_q_PJ[j])
    q_WJc = quat_mul(q_WC, joint_q_CJ[j])
    return p_WJp, q_WJp, p_WJc, q_WJc, c_WP, c_WC


@ti.func
def inverse_mass_along(w: ti.i32, wm: ti.i32, body: ti.i32, d: vec3, angular: ti.i32, body_inv_mass: ti.template(),
                       body_inv_inertia_W: ti.template()) -> float:
    """One body's inverse mass along a row's direction d: 1/m (a linear row: its translation
    only) or d . I^-1 d (an angular row) [1/kg or 1/(kg m^2)]; 0 for the world or an immobile
    body."""
    out = 0.0
    if body >= 0:
        b = ti.max(body, 0)
        out = body_inv_mass[wm, b]
        if angular:
            out = d.dot(body_inv_inertia_W[w, b] @ d)
    return out


@ti.kernel
def joint_rows(
    world_status: nd(dtype=ti.i32, ndim=1),
    joint_i: nd(dtype=ivec8, ndim=1),
    joint_f: nd(dtype=vec8, ndim=1),
    joint_p_PJ: nd(dtype=vec3, ndim=1),
    joint_q_PJ: nd(dtype=vec4, ndim=1),
    joint_p_CJ: nd(dtype=vec3, ndim=1),
    joint_q_CJ: nd(dtype=vec4, ndim=1),
    joint_row_info: nd(dtype=ivec4, ndim=1),
    body_p: nd(dtype=vec3, ndim=2),
    body_q: nd(dtype=vec4, ndim=2),
    body_com_B: nd(dtype=vec3, ndim=1),
    body_inv_mass: nd(dtype=float, ndim=2),
    body_inv_inertia_W: nd(dtype=mat3, ndim=2),
    joint_q: nd(dtype=float, ndim=2),
    joint_target: nd(dtype=float, ndim=2),
    joint_target_velocity: nd(dtype=float, ndim=2),
    joint_effort_command: nd(dtype=float, ndim=2),
    dt: float,
    beta: float,
    joint_fresh: nd(dtype=ti.i32, ndim=1),
    b_ids: nd(dtype=ivec4, ndim=1),
    b_Ja: nd(dtype=vec6, ndim=1),
    b_Jb: nd(dtype=vec6, ndim=1),
    b_law: nd(dtype=vec4, ndim=1),
):
    """One thread per (world, row). Reads the poses at the start of the step, the inverse
    inertias of this step (integrator.free_velocity), the joints' positions (joint_state of the
    last step) and controls; writes row w * rows + r of the bilateral rows (module docstring)
    and clears joint_fresh.
    A frozen world's rows are written all the same; the solver skips the world."""
    rows = joint_row_info.shape[0]
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, r in ti.ndrange(world_status.shape[0], rows):
        info = joint_row_info[r]
        j, kind, k = info[0], info[1], info[2]
        ji, jf = joint_i[j], joint_f[j]
        parent, child, jtype = ji[J_PARENT], ji[J_CHILD], ji[J_TYPE]
        wm = w % body_inv_mass.shape[0]
        p_WJp, q_WJp, p_WJc, q_WJc, c_WP, c_WC = joint_frames(w, j, joint_i, joint_p_PJ, joint_q_PJ, joint_p_CJ, joint_q_CJ,
                                                              body_p, body_q, body_com_B)
        R_Jp = quat_to_mat(q_WJp)
        d = vec3(R_Jp[0, k], R_Jp[1, k], R_Jp[2, k])  # axis k of Jp in W
        angular = kind == ROW_ANGULAR or (kind != ROW_LINEAR and (jtype == REVOLUTE or jtype == BALL))
        x_a, x_b = p_WJp, p_WJc  # the points a linear row holds together
        if jtype == PRISMATIC:
            x_a = p_WJc
        sign = -1.0 if kind == ROW_LIMIT_UPPER else 1.0
        d = sign * d
        Ja, Jb = vec6(0.0), vec6(0.0)
        if angular:
            for n in ti.static(range(3)):
                Ja[3 + n] = -d[n]
                Jb[3 + n] = d[n]
        else:
            ta = (x_a - c_WP).cross(d)
            tb = (x_b - c_WC).cross(d)
            for n in ti.static(range(3)):
                Ja[n] = -d[n]
                Ja[3 + n] = -ta[n]
                Jb[n] = d[n]
                Jb[3 + n] = tb[n]
        inv_mass = (inverse_mass_along(w, wm, parent, d, angular, body_inv_mass, body_inv_inertia_W)
                    + inverse_mass_along(w, wm, child, d, angular, body_inv_mass, body_inv_inertia_W))
        rigid = beta * beta / (4.0 * math.pi * math.pi) * inv_mass  # the near-rigid compliance
        dof = ti.min(ji[J_DOF_START], joint_q.shape[1] - 1)  # a fixed joint's (unused) may be past the end
        q = joint_q[w, dof]
        law = vec4(rigid, 0.0, -UNBOUNDED, UNBOUNDED)
        if kind == ROW_LINEAR:
            law[L_BIAS] = -d.dot(p_WJc - p_WJp) / dt
        elif kind == ROW_ANGULAR:
            error = vec3(0.0)
            if jtype == REVOLUTE:
                R_Jc = quat_to_mat(q_WJc)
                error = vec3(R_Jp[0, 2], R_Jp[1, 2], R_Jp[2, 2]).cross(vec3(R_Jc[0, 2], R_Jc[1, 2], R_Jc[2, 2]))
            else:
                error = rotation_vector(quat_mul(q_WJc, conjugate(q_WJp)))
            law[L_BIAS] = -d.dot(error) / dt
        elif kind == ROW_LIMIT_LOWER or kind == ROW_LIMIT_UPPER:
            room = q - jf[JF_LOWER] if kind == ROW_LIMIT_LOWER else jf[JF_UPPER] - q
            law[L_BIAS] = -room / dt
            law[L_LOWER] = 0.0
        elif kind == ROW_DAMPING:
            law[L_R] = 1.0 / (dt * jf[JF_DAMPING])
        elif kind == ROW_FRICTION:
            law[L_LOWER] = -jf[JF_FRICTION] * dt
            law[L_UPPER] = jf[JF_FRICTION] * dt
        elif kind == ROW_ACTUATOR:
            limit = jf[JF_EFFORT_LIMIT] * dt
            effort = joint_effort_command[w, dof]
            gain = jf[JF_KP] * dt + jf[JF_KD]
            if ji[J_ACTUATOR] == ACT_PD and gain > 0.0:
                law[L_R] = 1.0 / (dt * gain)
                law[L_BIAS] = ((jf[JF_KP] * (joint_target[w, dof] - q) + jf[JF_KD] * joint_target_velocity[w, dof]) / gain
                               + law[L_R] * effort * dt)
                law[L_LOWER] = -limit
                law[L_UPPER] = limit
            else:  # ACT_EFFORT: a constant impulse
                law[L_R] = 1.0
                law[L_LOWER] = ti.min(ti.max(effort * dt, -limit), limit)
                law[L_UPPER] = law[L_LOWER]
        row = w * rows + r
        if r == 0:
            joint_fresh[w] = 0  # measured afresh by joint_state since the reset: unwrap from now on
        b_ids[row] = ivec4(w, parent, child, 0)
        b_Ja[row] = Ja
        b_Jb[row] = Jb
        b_law[row] = law


@ti.kernel
def joint_state(
    joint_i: nd(dtype=ivec8, ndim=1),
    joint_p_PJ: nd(dtype=vec3, ndim=1),
    joint_q_PJ: nd(dtype=vec4, ndim=1),
    joint_p_CJ: nd(dtype=vec3, ndim=1),
    joint_q_CJ: nd(dtype=vec4, ndim=1),
    joint_row_info: nd(dtype=ivec4, ndim=1),
    body_p: nd(dtype=vec3, ndim=2),
    body_q: nd(dtype=vec4, ndim=2),
    body_v: nd(dtype=vec3, ndim=2),
    body_w: nd(dtype=vec3, ndim=2),
    body_com_B: nd(dtype=vec3, ndim=1),
    b_Jb: nd(dtype=vec6, ndim=1),
    b_gamma: nd(dtype=float, ndim=1),
    dt: float,
    joint_fresh: nd(dtype=ti.i32, ndim=1),
    joint_q: nd(dtype=float, ndim=2),
    joint_qd: nd(dtype=float, ndim=2),
    joint_effort: nd(dtype=float, ndim=2),
    joint_force: nd(dtype=vec3, ndim=2),
    joint_torque: nd(dtype=vec3, ndim=2),
):
    """One thread per (world, joint). Reads the state after the step and the impulses of its
    solve; writes each degree of freedom's position (a revolute angle unwrapped from its last
    value, so it counts whole turns, unless the world was just reset or set: joint_fresh),
    velocity [rad/s or m/s] and effort (the impulses along it / dt: actuator, limits, damping,
    friction [N m or N]), and the joint's wrench on the child at the joint origin, world frame
    (joint_force [N], joint_torque [N m]: every row of the joint, constraint and effort)."""
    rows = joint_row_info.shape[0]
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, j in ti.ndrange(joint_fresh.shape[0], joint_i.shape[0]):
        ji = joint_i[j]
        parent, child, jtype, dof = ji[J_PARENT], ji[J_CHILD], ji[J_TYPE], ji[J_DOF_START]
        p_WJp, q_WJp, p_WJc, q_WJc, c_WP, c_WC = joint_frames(w, j, joint_i, joint_p_PJ, joint_q_PJ, joint_p_CJ, joint_q_CJ,
                                                              body_p, body_q, body_com_B)
        R_Jp = quat_to_mat(q_WJp)
        z = vec3(R_Jp[0, 2], R_Jp[1, 2], R_Jp[2, 2])
        v_P, w_P = vec3(0.0), vec3(0.0)
        if parent >= 0:
            v_P = body_v[w, ti.max(parent, 0)] + body_w[w, ti.max(parent, 0)].cross(p_WJc - body_p[w, ti.max(parent, 0)])
            w_P = body_w[w, ti.max(parent, 0)]
        v_C = body_v[w, child] + body_w[w, child].cross(p_WJc - body_p[w, child])
        w_C = body_w[w, child]
        force, torque = vec3(0.0), vec3(0.0)
        effort = vec3(0.0)
        for n in range(ji[J_ROW_COUNT]):
            r = ji[J_ROW_START] + n
            row = w * rows + r
            g = b_gamma[row] / dt
            jb = b_Jb[row]
            force += g * vec3(jb[0], jb[1], jb[2])
            torque += g * vec3(jb[3], jb[4], jb[5])
            kind, k = joint_row_info[r][1], joint_row_info[r][2]
            if kind != ROW_LINEAR and kind != ROW_ANGULAR:
                along = -g if kind == ROW_LIMIT_UPPER else g
                for n in ti.static(range(3)):
                    if k == n:
                        effort[n] += along
        joint_force[w, j] = force
        joint_torque[w, j] = torque - (p_WJc - c_WC).cross(force)
        if jtype == REVOLUTE:
            R_Jc = quat_to_mat(q_WJc)
            x_p = vec3(R_Jp[0, 0], R_Jp[1, 0], R_Jp[2, 0])
            x_c = vec3(R_Jc[0, 0], R_Jc[1, 0], R_Jc[2, 0])
            angle = ti.atan2(x_p.cross(x_c).dot(z), x_p.dot(x_c))
            q = angle
            if joint_fresh[w] == 0:
                last = joint_q[w, dof]
                q = last + (angle - last) - TWO_PI * ti.floor((angle - last + math.pi) / TWO_PI)
            joint_q[w, dof] = q
            joint_qd[w, dof] = z.dot(w_C - w_P)
            joint_effort[w, dof] = effort[2]
        elif jtype == PRISMATIC:
            joint_q[w, dof] = z.dot(p_WJc - p_WJp)
            joint_qd[w, dof] = z.dot(v_C - v_P)
            joint_effort[w, dof] = effort[2]
        elif jtype == BALL:
            theta = rotation_vector(quat_mul(conjugate(q_WJp), q_WJc))
            rel = R_Jp.transpose() @ (w_C - w_P)
            for n in ti.static(range(3)):
                joint_q[w, dof + n] = theta[n]
                joint_qd[w, dof + n] = rel[n]
                joint_effort[w, dof + n] = effort[n]


@ti.kernel
def reset_joints(
    world_row: nd(dtype=ti.i32, ndim=1),
    joint_row_info: nd(dtype=ivec4, ndim=1),
    joint_target0: nd(dtype=float, ndim=1),
    joint_target_velocity0: nd(dtype=float, ndim=1),
    joint_effort0: nd(dtype=float, ndim=1),
    joint_fresh: nd(dtype=ti.i32, ndim=1),
    joint_target: nd(dtype=float, ndim=2),
    joint_target_velocity: nd(dtype=float, ndim=2),
    joint_effort_command: nd(dtype=float, ndim=2),
    b_gamma: nd(dtype=float, ndim=1),
):
    """For every world w with world_row[w] >= 0: the joint controls back to the scene's values,
    no warm start for its rows, and its joint positions to be measured afresh (joint_fresh)."""
    rows = joint_row_info.shape[0]
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w in range(joint_fresh.shape[0]):
        joint_fresh[w] = 1 if world_row[w] >= 0 else 0
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, d in ti.ndrange(joint_target.shape[0], joint_target.shape[1]):
        if world_row[w] >= 0:
            joint_target[w, d] = joint_target0[d]
            joint_target_velocity[w, d] = joint_target_velocity0[d]
            joint_effort_command[w, d] = joint_effort0[d]
    ti.loop_config(serialize=backend.SERIAL_LOOPS)
    for w, r in ti.ndrange(joint_fresh.shape[0], rows):
        if world_row[w] >= 0:
            b_gamma[w * rows + r] = 0.0
