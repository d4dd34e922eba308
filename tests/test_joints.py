"""Joints (joint.*, solved by the Newton solver as bilateral rows) against closed forms.

Time integration is semi-implicit (symplectic) Euler: velocities first, then positions, so a
motion released from rest at t = 0 runs dt/2 ahead of the exact one (its first velocity update
is a whole step of acceleration: the discrete trajectory is the exact one started from rest at
t = -dt/2), and its energy oscillates about a conserved value by (dt/2) g . sum m v (the
leading term of its modified energy). A joint's constrained directions are held by the
near-rigid rows of joint.kernels: after a step the error along a row is dt R gamma, with
R = w / (4 pi^2) (beta = 1; w: the bodies' inverse mass along the row, 1/m_a + 1/m_b for a
linear row) and gamma = F dt the row's impulse, i.e. F dt^2 w / (4 pi^2)."""

import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from scipy.optimize import fsolve
from scipy.special import ellipk

import taichi_hydro as th

G = 9.81
TOLERANCE = th.SolverSettings().tolerance  # [m/s]
EPS32 = float(np.finfo(np.float32).eps)


def link(name, position, size=(0.3, 0.04, 0.04), mass=1.0, **kw):
    body = {"name": name, "mass": mass, "position": list(position), "shape": {"type": "box", "size": list(size)}}
    body.update(kw)
    return body


def joint(name, kind, parent, child, position, axis=None, **kw):
    out = {"name": name, "type": kind, "parent": parent, "child": child, "position": list(position)}
    if axis is not None:
        out["axis"] = list(axis)
    out.update(kw)
    return out


def make(bodies, joints, dt=1e-3, gravity=(0.0, 0.0, -G), solver=None, **top):
    data = {"sim": {"dt": dt, "gravity": list(gravity)}, "body": bodies, "joint": joints, **top}
    if solver:
        data["solver"] = solver
    return th.scene_from_dict(data, source="<test>")


def cpu_only(arch):
    """Skip on lavapipe, whose launches cost milliseconds each: every joint kernel and row law
    runs there in test_every_joint_law_agrees_on_cpu_and_vulkan (150 steps compared with the
    cpu run) and the short tests kept for it (fixed and damped joints, set_state, the run
    summary); this one would repeat them for hundreds of steps."""
    if arch == "vulkan":
        pytest.skip("joint kernels covered on vulkan by the shorter joint tests; this one runs on cpu")


def rotor(name="rotor", omega=(0.0, 0.0, 0.0), radius=0.1, length=0.05, mass=2.0):
    """A cylinder about the world z axis (I_z = m r^2 / 2)."""
    return {"name": name, "mass": mass, "position": [0.0, 0.0, 1.0], "angular_velocity": list(omega),
            "shape": {"type": "cylinder", "radius": radius, "length": length}}


# ------------------------------------------------------------------------------- pendulums


@pytest.mark.parametrize("theta0", [0.2, pytest.param(2.0, marks=pytest.mark.launches(9_500))])
def test_pendulum_quarter_period_matches_the_elliptic_integral(arch, theta0):
    """A sphere (radius r, mass m) on a revolute joint at distance L, released from rest at
    theta0: its first pass through the vertical is at T/4 - dt/2 (module docstring), with the
    exact period of the physical pendulum T = 4 sqrt(L_eq / g) K(sin^2(theta0 / 2)),
    L_eq = (m L^2 + 2/5 m r^2) / (m L). Error budget: symplectic Euler's O((omega dt)^2) phase
    error over the quarter period, and the linear interpolation of the crossing between two
    samples (zero curvature there: O(dt^3))."""
    cpu_only(arch)
    L, r, m, dt = 0.5, 0.02, 1.0, 1e-3
    bob = {"name": "bob", "mass": m, "position": [L * math.sin(theta0), 0.0, 1.0 - L * math.cos(theta0)],
           "shape": {"type": "sphere", "radius": r}}
    sim = th.Simulator(make([bob], [joint("hinge", "revolute", "world", "bob", (0, 0, 1.0), axis=(0, 1, 0))], dt=dt))
    L_eq = (m * L * L + 0.4 * m * r * r) / (m * L)
    T = 4 * math.sqrt(L_eq / G) * ellipk(math.sin(theta0 / 2) ** 2)
    angle = [theta0]  # the swing angle from the vertical: a rotation about +y by q turns the bob to theta0 - q
    while angle[-1] > 0.0:
        sim.step(1)
        angle.append(theta0 - sim.joint_state()["position"][0, 0])
        assert len(angle) < T / dt
    n = len(angle) - 1
    t_cross = dt * (n - 1 + angle[-2] / (angle[-2] - angle[-1]))
    omega = math.sqrt(G / L_eq)
    bound = (omega * dt) ** 2 * T / 4 + (0.0 if arch == "cpu" else 1e3 * EPS32 * dt)
    print(f"theta0 {theta0}: crossing at {t_cross:.7f} s, T/4 - dt/2 = {T / 4 - dt / 2:.7f} s (bound {bound:.1e} s)")
    assert t_cross == pytest.approx(T / 4 - dt / 2, abs=bound)
    # The rod's length holds: the bob's distance from the pivot moves only by the geometric
    # error of a step along the tangent, (dt v)^2 / (2 L) with v^2 <= 2 g L (1 - cos theta0).
    p = sim.get_state()["position"][0, 0]
    v2 = 2 * G * L * (1 - math.cos(theta0))
    assert abs(np.linalg.norm(p - [0, 0, 1.0]) - L) <= dt * dt * v2 / L + 10 * EPS32


@pytest.mark.launches(90_000)
def test_double_pendulum_energy_stays_within_symplectic_eulers_bound():
    """An undamped double pendulum released horizontal moves chaotically for 10 s; its energy
    (kinetic + potential) differs from the start by at most (dt/2) g sum m_i (|v_z,i(t)| +
    |v_z,i(0)|) plus the O(dt^2) drift of the modified energy: bounded here by
    dt g sum m_i v_max, v_max = sqrt(2 Delta V / m_i) the speed the whole potential drop
    Delta V could give one link. A dissipative or energy-adding joint (a wrong bias, a too soft
    row) would leave it."""
    l, m, dt = 0.3, 1.0, 2e-3
    bodies = [link("a", (0.5 * l, 0, 1.0), mass=m), link("b", (1.5 * l, 0, 1.0), mass=m)]
    joints = [joint("j0", "revolute", "world", "a", (0, 0, 1.0), axis=(0, 1, 0)),
              joint("j1", "revolute", "a", "b", (l, 0, 1.0), axis=(0, 1, 0))]
    sim = th.Simulator(make(bodies, joints, dt=dt))
    inertia = sim.model.host.body_inertia_B

    def energy():
        from oracle import quat_matrix

        s = sim.get_state()
        p, q, v, w = s["position"][0], s["orientation"][0], s["velocity"][0], s["angular_velocity"][0]
        rotational = [w[i] @ quat_matrix(q[i]) @ inertia[i] @ quat_matrix(q[i]).T @ w[i] for i in range(2)]
        return sum(0.5 * m * v[i] @ v[i] + 0.5 * rotational[i] + m * G * p[i, 2] for i in range(2))

    E0 = energy()
    drop = m * G * (0.5 * l + 1.5 * l)  # both links hanging straight down
    bound = dt * G * 2 * m * math.sqrt(2 * drop / m)
    worst = 0.0
    for _ in range(int(10.0 / dt) // 25):
        sim.step(25)
        worst = max(worst, abs(energy() - E0))
    print(f"max |E - E0| over 10 s: {worst:.2e} J of {drop:.2f} J (bound {bound:.2e} J)")
    assert worst <= bound
    assert sim.world_status()[0] == 0


def seven_link_arm(kp, kd, dt=1e-3, n=7, l=0.3, m=1.0):
    bodies = [link(f"link{i}", (l * (i + 0.5), 0, 1.0), mass=m) for i in range(n)]
    joints = [joint(f"j{i}", "revolute", "world" if i == 0 else f"link{i - 1}", f"link{i}", (l * i, 0, 1.0), axis=(0, 1, 0),
                    actuator={"type": "pd", "kp": kp, "kd": kd}) for i in range(n)]
    # Links two apart may overlap as the arm bends: the arm itself is not the contact under test.
    return make(bodies, joints, dt=dt, collision_filter=[{"bodies": [b["name"] for b in bodies]}])


def arm_statics(kp, n=7, l=0.3, m=1.0):
    """Joint angles of the arm at rest: kp q_i = the gravity torque of links i.. about joint i
    (rotation about +y: positive q lowers the arm), and the joint points (x, z) [m]."""
    def points(q):
        a = np.cumsum(q)
        return np.vstack([[0.0, 1.0], [0.0, 1.0] + l * np.cumsum(np.column_stack([np.cos(a), -np.sin(a)]), axis=0)])

    def residual(q):
        P = points(q)
        C = 0.5 * (P[:-1] + P[1:])
        return [-kp * q[i] + sum(m * G * (C[k, 0] - P[i, 0]) for k in range(i, n)) for i in range(n)]

    q = fsolve(residual, np.zeros(n), xtol=1e-14)
    return q, points(q)


@pytest.mark.launches(43_000)
def test_pd_holds_a_seven_link_arm_at_its_static_equilibrium(arch):
    """A horizontal chain of 7 links (0.3 m, 1 kg) on PD-actuated revolute joints (target 0)
    settles where kp q_i equals the gravity torque on joint i (solved with scipy from the
    geometry): the PD error, and nothing more. Each joint's effort is that torque. The links
    sit where the measured angles put them (forward kinematics) up to the joints' near-rigid
    compliance, summed along the chain: sum_j |F_j| dt^2 (1/m_a + 1/m_b) / (4 pi^2)
    (module docstring). kd = 2 sqrt(kp I_base) damps the slowest mode critically; 2.5 s is
    over 15 time constants kd / kp of the others."""
    n, l, m, kp, dt = 7, 0.3, 1.0, 2000.0, 1e-3
    I_base = sum(m * (l * (k + 0.5)) ** 2 for k in range(n))
    kd = 2 * math.sqrt(kp * I_base)
    sim = th.Simulator(seven_link_arm(kp, kd, dt))
    sim.step(2500)
    q_static, points = arm_statics(kp)
    js = sim.joint_state()
    q, effort = js["position"][0], js["effort"][0]
    stats = sim.solver_stats()
    com = sim.get_state()["position"][0]
    fk = 0.5 * (points[:-1] + points[1:])
    deviation = np.linalg.norm(com[:, [0, 2]] - fk, axis=1).max()
    force = np.linalg.norm(sim.joint_forces()["force"][0], axis=1)
    compliance = dt * dt * sum(f * (2.0 / m) for f in force) / (4 * math.pi ** 2)
    tip_sag = 1.0 - points[-1, 1]
    print(f"tip sag {tip_sag:.4f} m (PD), joints beyond the PD angles by {np.abs(q - q_static).max():.1e} rad, links off "
          f"their kinematic place by {deviation:.1e} m (bound {compliance:.1e} m), {stats['iterations'][0]} iterations")
    atol = 1e-6 if arch == "cpu" else 1e-4  # float32 solve: the joint angles carry ~1e-7 x 1e3 conditioning
    np.testing.assert_allclose(q, q_static, rtol=0, atol=atol)
    np.testing.assert_allclose(effort, -kp * q_static, rtol=1e-4, atol=atol * kp)
    assert deviation <= 2 * compliance + 10 * EPS32
    assert stats["iterations"][0] <= 3


def test_pd_steady_state_error_is_gravity_torque_over_kp(arch):
    """One horizontal link (length l, mass m) on a PD joint with target 0 rests at the q that
    solves kp q = m g (l/2) cos q; kd damps it critically (2 sqrt(kp I), I = m l^2 / 3 about
    the joint), and 0.6 s is 12 time constants sqrt(I / kp)."""
    cpu_only(arch)
    l, m, kp = 0.3, 1.0, 50.0
    I = m * l * l / 3 + m * 0.04 ** 2 / 12
    kd = 2 * math.sqrt(kp * I)
    sim = th.Simulator(make([link("arm", (l / 2, 0, 1.0), mass=m)],
                            [joint("j", "revolute", "world", "arm", (0, 0, 1.0), axis=(0, 1, 0),
                                   actuator={"type": "pd", "kp": kp, "kd": kd})]))
    sim.step(600)
    q = sim.joint_state()["position"][0, 0]
    expected = fsolve(lambda x: kp * x - m * G * l / 2 * np.cos(x), 0.0, xtol=1e-14)[0]
    print(f"q = {q:.7f} rad, gravity torque / kp (cos q) = {expected:.7f} rad")
    assert q == pytest.approx(expected, abs=1e-5 * expected + 100 * EPS32)


@pytest.mark.launches(14_500)
def test_limit_holds_a_falling_link_at_its_bound(arch):
    """A horizontal link released under gravity falls onto its upper limit (0.3 rad) and rests
    there: the limit row is speculative (the joint never passes the bound within a step) and
    holds with the near-rigid compliance: q <= 0.3 + dt^2 tau / (4 pi^2 I_com) (I_com: the
    link's inertia about its centre, the row's inverse mass; tau: the gravity torque at the
    bound, which the limit's effort equals, with the opposite sign)."""
    cpu_only(arch)
    l, m, upper, dt = 0.3, 1.0, 0.3, 1e-3
    sim = th.Simulator(make([link("arm", (l / 2, 0, 1.0), mass=m)],
                            [joint("j", "revolute", "world", "arm", (0, 0, 1.0), axis=(0, 1, 0), limits=[-0.5, upper])], dt=dt))
    I_com = m * (l * l + 0.04 ** 2) / 12
    tau = m * G * l / 2 * math.cos(upper)
    slack = dt * dt * tau / (4 * math.pi ** 2 * I_com)
    highest = 0.0
    for _ in range(40):
        sim.step(20)
        highest = max(highest, sim.joint_state()["position"][0, 0])
    js = sim.joint_state()
    print(f"highest q {highest:.7f} rad, at rest {js['position'][0, 0]:.7f} rad (bound {upper + slack:.7f}), effort "
          f"{js['effort'][0, 0]:.4f} N m (gravity {tau:.4f})")
    assert highest <= upper + 2 * slack + 100 * EPS32
    assert js["position"][0, 0] >= upper - 1e-4  # resting on it
    assert js["effort"][0, 0] == pytest.approx(-tau, rel=1e-3)


# ------------------------------------------------------------------------------- other joints


def test_fixed_joint_holds_a_cantilever_and_reports_its_weight(arch):
    """A 2 kg box welded to the world 0.2 m from its centre: the joint's wrench on it at the joint
    origin balances gravity, force (0, 0, m g) and torque r x (0, 0, m g), r = (0.2, 0, 0), and
    the box stays within the rows' compliance of its place (linear: m g dt^2 / (4 pi^2 m);
    angular: tau dt^2 / (4 pi^2 I) times the lever arm)."""
    m, dt = 2.0, 1e-3
    body = link("box", (0.2, 0.0, 1.0), size=(0.1, 0.1, 0.1), mass=m)
    sim = th.Simulator(make([body], [joint("weld", "fixed", "world", "box", (0, 0, 1.0))], dt=dt))
    sim.step(50)
    wrench = sim.joint_forces()
    np.testing.assert_allclose(wrench["force"][0, 0], [0, 0, m * G], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(wrench["torque"][0, 0], [0, -0.2 * m * G, 0], rtol=1e-4, atol=1e-4)
    I = m * 0.02 / 12
    sag = dt * dt * (m * G / m + 0.2 * 0.2 * m * G / I) / (4 * math.pi ** 2)
    moved = np.linalg.norm(sim.get_state()["position"][0, 0] - [0.2, 0, 1.0])
    print(f"moved {moved:.2e} m (bound {sag:.2e} m)")
    assert moved <= 2 * sag
    assert sim.joint_names == []


def test_ball_joint_keeps_a_conical_pendulum_on_its_cone(arch):
    """A sphere on a ball joint at distance L, at angle alpha from the vertical, moving on the
    horizontal circle with Omega^2 = g / (L cos alpha) (a point mass's condition; the sphere's
    isotropic inertia adds no gyroscopic torque): over one revolution the angle stays alpha
    within O(Omega dt) x alpha (symplectic Euler's oscillation of the orbit), and the azimuth
    advances by Omega t."""
    cpu_only(arch)
    L, alpha, dt = 0.5, 0.6, 1e-3
    Omega = math.sqrt(G / (L * math.cos(alpha)))
    r = L * math.sin(alpha)
    bob = {"name": "bob", "mass": 1.0, "position": [r, 0.0, 1.0 - L * math.cos(alpha)], "velocity": [0.0, Omega * r, 0.0],
           "angular_velocity": [0.0, 0.0, Omega], "shape": {"type": "sphere", "radius": 0.02}}
    sim = th.Simulator(make([bob], [joint("ball", "ball", "world", "bob", (0, 0, 1.0))], dt=dt))
    assert sim.joint_names == ["ball[0]", "ball[1]", "ball[2]"]
    period = 2 * math.pi / Omega
    steps = int(period / dt)
    worst = 0.0
    for _ in range(steps // 10):
        sim.step(10)
        p = sim.get_state()["position"][0, 0] - [0, 0, 1.0]
        worst = max(worst, abs(math.acos(-p[2] / np.linalg.norm(p)) - alpha))
    turned = Omega * (steps // 10) * 10 * dt
    azimuth = math.atan2(p[1], p[0])
    expected = math.atan2(math.sin(turned), math.cos(turned))
    print(f"|alpha - alpha0| <= {worst:.1e} rad, azimuth {azimuth:.4f} (expected {expected:.4f})")
    assert worst <= 2 * Omega * dt * alpha
    assert azimuth == pytest.approx(expected, abs=2 * Omega * dt)
    # The body turns rigidly about the vertical: the joint position, the rotation vector of the
    # bob's frame in the world's, is (0, 0, azimuth turned) (wrapped to (-pi, pi]).
    np.testing.assert_allclose(sim.joint_state()["position"][0], [0, 0, expected], atol=2 * Omega * dt)


@pytest.mark.launches(3_500)
def test_prismatic_joint_is_a_slider(arch):
    """A block on a prismatic joint along a tilted axis under gravity slides with
    a = g . axis exactly (no friction): q_n = a dt^2 n (n + 1) / 2, qdot_n = a dt n, and moves
    only along the axis."""
    cpu_only(arch)
    axis = np.array([1.0, 0.0, -1.0]) / math.sqrt(2)
    dt, n = 1e-3, 200
    sim = th.Simulator(make([link("block", (0, 0, 1.0), size=(0.05, 0.05, 0.05))],
                            [joint("slide", "prismatic", "world", "block", (0, 0, 1.0), axis=list(axis))], dt=dt))
    sim.step(n)
    a = G / math.sqrt(2)
    js = sim.joint_state()
    assert js["position"][0, 0] == pytest.approx(a * dt * dt * n * (n + 1) / 2, rel=1e-4)
    assert js["velocity"][0, 0] == pytest.approx(a * dt * n, rel=1e-4)
    moved = sim.get_state()["position"][0, 0] - [0, 0, 1.0]
    assert np.linalg.norm(moved - (moved @ axis) * axis) <= 1e-6


# ------------------------------------------------------------------------------- joint laws


def test_damping_decays_a_rotor_as_implicit_euler(arch):
    """A rotor spinning about a vertical revolute joint with damping c: the implicit law
    gamma = -dt c omega_(n+1) gives omega_n = omega0 / (1 + c dt / I)^n exactly (I = m r^2/2;
    gravity acts along the axis)."""
    m, r, c, dt, n = 2.0, 0.1, 0.05, 1e-3, 100
    sim = th.Simulator(make([rotor(omega=(0, 0, 10.0), radius=r, mass=m)],
                            [joint("spin", "revolute", "world", "rotor", (0, 0, 1.0), axis=(0, 0, 1), damping=c)], dt=dt))
    sim.step(n)
    I = m * r * r / 2
    js = sim.joint_state()
    assert js["velocity"][0, 0] == pytest.approx(10.0 / (1 + c * dt / I) ** n, rel=1e-5)
    assert js["effort"][0, 0] == pytest.approx(-c * js["velocity"][0, 0], rel=1e-4)


def test_friction_stops_a_rotor_at_its_coulomb_rate(arch):
    """Joint friction f on a spinning rotor: omega_n = omega0 - n dt f / I while it slides
    (exact), then it stays stopped: the row sticks with |omega| <= R f dt, R the near-rigid
    compliance 1 / (4 pi^2 I)."""
    cpu_only(arch)
    m, r, f, dt = 2.0, 0.1, 0.2, 1e-3
    I = m * r * r / 2
    omega0 = 5.0
    sim = th.Simulator(make([rotor(omega=(0, 0, omega0), radius=r, mass=m)],
                            [joint("spin", "revolute", "world", "rotor", (0, 0, 1.0), axis=(0, 0, 1), friction=f)], dt=dt))
    sim.step(50)
    assert sim.joint_state()["velocity"][0, 0] == pytest.approx(omega0 - 50 * dt * f / I, rel=1e-5)
    stop = omega0 * I / f  # [s]
    sim.step(int(stop / dt) + 20)
    js = sim.joint_state()
    assert abs(js["velocity"][0, 0]) <= f * dt / (4 * math.pi ** 2 * I) + 10 * TOLERANCE


def test_effort_spins_a_rotor_and_the_angle_counts_turns(arch):
    """A constant effort tau: omega_n = n dt tau / I, and the angle, unwrapped past pi
    (several turns), is what the integrator's quaternion update turns by: normalise(q + dt/2
    omega (x) q) rotates by 2 atan(omega dt / 2) per step (float32: ~EPS32 per step). The
    effort reported is tau; set_joint_control sets it per world; reset restores the scene's."""
    cpu_only(arch)
    m, r, tau, dt, n = 2.0, 0.1, 0.5, 1e-3, 700
    I = m * r * r / 2
    sim = th.Simulator(make([rotor(radius=r, mass=m)],
                            [joint("spin", "revolute", "world", "rotor", (0, 0, 1.0), axis=(0, 0, 1),
                                   actuator={"type": "effort", "effort": tau})], dt=dt), worlds=2)
    sim.set_joint_control(effort=[[tau], [-2 * tau]])
    sim.step(n)
    js = sim.joint_state()
    alpha = np.array([tau, -2 * tau]) / I
    omega = np.arange(1, n + 1)[:, None] * dt * alpha
    q = (2 * np.arctan(omega * dt / 2)).sum(axis=0)
    assert abs(q[0]) > 3 * math.pi  # several turns
    np.testing.assert_allclose(js["velocity"][:, 0], n * dt * alpha, rtol=1e-5)
    np.testing.assert_allclose(js["position"][:, 0], q, rtol=0, atol=n * EPS32 * np.abs(q).max())
    np.testing.assert_allclose(js["effort"][:, 0], [tau, -2 * tau], rtol=1e-5)
    sim.reset()
    assert np.all(sim.joint_state()["position"] == 0.0)
    sim.step(1)
    np.testing.assert_allclose(sim.joint_state()["effort"][:, 0], [tau, tau], rtol=1e-5)  # the scene's value again


# ------------------------------------------------------------------------------- with contact


def finger_on_pad(effort=None, pd=None, worlds=1, deterministic=False):
    """A rigid finger (0.1 kg box) on a vertical prismatic joint above a compliant pad (a static
    box, E = 1e5 Pa), gravity off; the finger's actuator pushes it down (-z) into the pad."""
    actuator = {"type": "effort", "effort": effort} if pd is None else {"type": "pd", **pd}
    bodies = [{"name": "pad", "type": "static", "position": [0, 0, 0.0], "shape": {"type": "box", "size": [0.06, 0.06, 0.02]},
               "contact": {"modulus": 1e5, "dissipation": 20.0}},
              {"name": "finger", "mass": 0.1, "position": [0, 0, 0.0201], "shape": {"type": "box", "size": [0.02, 0.02, 0.02]},
               "contact": {"hydro": "rigid"}}]
    joints = [joint("press", "prismatic", "world", "finger", (0, 0, 0.0201), axis=(0, 0, -1), damping=2.0,
                    actuator=actuator)]
    return th.Simulator(make(bodies, joints, gravity=(0, 0, 0), solver={"deterministic": deterministic}), worlds=worlds)


@pytest.mark.launches(8_000)
def test_prismatic_finger_presses_a_pad_with_the_commanded_force(arch):
    """At rest the pad pushes back exactly what the actuator commands: an effort of 3 N, and a
    PD actuator's kp (target - q) (target 3 mm past first touch, kp = 500 N/m: the force at
    rest is kp (target - q_rest), read with q_rest). Joint damping and the pad's
    Hunt-Crossley dissipation settle it; at rest the force balance is the solver's: the finger
    (0.1 kg) is within the tolerance of rest, m tol / dt = 1e-4 N."""
    cpu_only(arch)
    sim = finger_on_pad(effort=3.0)
    sim.step(200)
    force = sim.contact_forces()[("pad", "finger")]
    js = sim.joint_state()
    print(f"effort: contact force {force}, joint {js['position'][0, 0] * 1e3:.3f} mm, effort {js['effort'][0, 0]:.4f} N")
    np.testing.assert_allclose(force, [0, 0, 3.0], rtol=0, atol=1e-3)
    sim = finger_on_pad(pd={"kp": 500.0, "kd": 5.0, "target": 0.0031})
    sim.step(200)
    force = sim.contact_forces()[("pad", "finger")]
    q = sim.joint_state()["position"][0, 0]
    print(f"pd: contact force {force}, q {q * 1e3:.3f} mm, kp (target - q) {500 * (0.0031 - q):.4f} N")
    np.testing.assert_allclose(force[2], 500.0 * (0.0031 - q), rtol=0, atol=1e-3)
    assert force[2] > 0.1


@pytest.mark.launches(10_000)
def test_batch_worlds_equal_single_worlds_with_joints(arch):
    """Three worlds with different PD targets, pressing the pad (contact and joints in one
    Newton solve, deterministic mode), equal three one-world runs bit for bit."""
    cpu_only(arch)
    targets = [0.0025, 0.003, 0.0035]
    pd = {"kp": 500.0, "kd": 5.0, "target": 0.0}
    batch = finger_on_pad(pd=pd, worlds=3, deterministic=True)
    batch.set_joint_control(target=np.array(targets)[:, None])
    batch.step(120)
    out = batch.get_state()["position"][:, 1]
    for w, target in enumerate(targets):
        one = finger_on_pad(pd={**pd, "target": target}, deterministic=True)
        one.step(120)
        assert np.array_equal(one.get_state()["position"][0, 1], out[w]), w
        assert np.array_equal(one.joint_state()["position"][0], batch.joint_state()["position"][w])


# ------------------------------------------------------------------------------- interface


def test_joint_state_follows_set_state_and_reset(arch):
    """joint_state() measures the pose it is given: set_state turns a hinged link by 0.4 rad and
    the joint reads 0.4 rad at once; reset reads 0 again and restores the scene's controls."""
    sim = th.Simulator(make([link("arm", (0.15, 0, 1.0))], [joint("j", "revolute", "world", "arm", (0, 0, 1.0), axis=(0, 1, 0),
                                                                    actuator={"type": "pd", "kp": 10.0, "target": 0.1})]))
    a = 0.4
    state = sim.get_state()
    state["position"][0, 0] = [0.15 * math.cos(a), 0, 1.0 - 0.15 * math.sin(a)]
    state["orientation"][0, 0] = [math.cos(a / 2), 0, math.sin(a / 2), 0]
    sim.set_state(position=state["position"], orientation=state["orientation"])
    assert sim.joint_state()["position"][0, 0] == pytest.approx(a, abs=1e-6)
    sim.set_joint_control(target=[0.7])
    sim.reset()
    assert sim.joint_state()["position"][0, 0] == 0.0
    assert sim.joints.joint_target.to_numpy()[0, 0] == pytest.approx(0.1)


def test_set_joint_control_refuses_what_it_cannot_apply(arch):
    if arch != "cpu":
        pytest.skip("host-side checks: run in the cpu session")
    sim = th.Simulator(make([link("a", (0.15, 0, 1.0)), link("b", (0.45, 0, 1.0))],
                            [joint("free", "revolute", "world", "a", (0, 0, 1.0), axis=(0, 1, 0)),
                             joint("driven", "revolute", "a", "b", (0.3, 0, 1.0), axis=(0, 1, 0),
                                   actuator={"type": "effort"})]), worlds=2)
    assert sim.joint_names == ["free", "driven"]
    cases = [({"effort": [1.0, 2.0]}, ["effort", "'free'", "no actuator", "NaN"]),
             ({"target": [np.nan, 1.0]}, ["target", "'driven'", "no pd actuator"]),
             ({"effort": [np.nan, np.inf]}, ["effort", "'driven'", "not finite"]),
             ({"effort": np.zeros((3, 2))}, ["effort", "shape", "(2, 2)"]),
             ({"effort": "x"}, ["effort", "numeric"])]
    for kwargs, fragments in cases:
        with pytest.raises(th.SceneError) as err:
            sim.set_joint_control(**kwargs)
        for fragment in fragments:
            assert fragment in str(err.value), (fragment, str(err.value))
    sim.set_joint_control(effort=[np.nan, 2.0])  # NaN where no actuator: accepted
    assert sim.joints.joint_effort_command.to_numpy()[:, 1].tolist() == [2.0, 2.0]


BAD_JOINTS = [
    ({"parent": "nobody"}, ["joint 'j'", "'parent'", "nobody"]),
    ({"child": "ground"}, ["joint 'j'", "'child'", "static"]),
    ({"child": "arm", "parent": "arm"}, ["joint 'j'", "'child'", "parent"]),
    ({"axis": [0, 0, 0]}, ["joint 'j'", "'axis'", "nonzero"]),
    ({"limits": [1.0, -1.0]}, ["joint 'j'", "'limits'", "lower < upper"]),
    ({"type": "hinge"}, ["joint 'j'", "'type'", "revolute"]),
    ({"type": "ball", "axis": None}, None),
    ({"type": "ball", "limits": [-1, 1], "axis": None}, ["joint 'j'", "'limits'", "ball"]),
    ({"type": "fixed", "damping": 1.0, "axis": None}, ["joint 'j'", "'damping'", "fixed"]),
    ({"actuator": {"type": "pd"}}, ["joint 'j': actuator", "'kp'"]),
    ({"actuator": {"type": "effort", "kp": 1.0}}, ["joint 'j': actuator", "'kp'", "the effort actuator"]),
    ({"actuator": {"type": "servo"}}, ["joint 'j': actuator", "'type'"]),
    ({"damping": -1.0}, ["joint 'j'", "'damping'"]),
    ({"stiffness": 1.0}, ["joint 'j'", "unknown key 'stiffness'"]),
]


@pytest.mark.parametrize("change, fragments", BAD_JOINTS)
def test_bad_joints_are_refused_naming_the_joint_and_key(change, fragments):
    """Every bad joint setting is a SceneError naming the file, the joint and the key."""
    j = {"name": "j", "type": "revolute", "parent": "world", "child": "arm", "position": [0, 0, 1.0], "axis": [0, 1, 0]}
    for key, value in change.items():
        if value is None:
            j.pop(key, None)
        else:
            j[key] = value
    data = {"body": [{"name": "arm", "mass": 1.0, "position": [0.15, 0, 1.0], "shape": {"type": "box", "size": [0.3, 0.04, 0.04]}},
                     {"name": "ground", "type": "static", "shape": {"type": "halfspace"}}], "joint": [j]}
    if fragments is None:
        th.scene_from_dict(data, source="bad.toml")
        return
    with pytest.raises(th.SceneError) as err:
        th.scene_from_dict(data, source="bad.toml")
    message = str(err.value)
    assert message.startswith("bad.toml:")
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_joints_need_the_newton_method():
    data = {"solver": {"method": "gauss_seidel"}, "joint": [{"name": "j", "type": "fixed", "parent": "world", "child": "b",
                                                            "position": [0, 0, 0]}],
            "body": [{"name": "b", "mass": 1.0, "shape": {"type": "sphere", "radius": 0.1}}]}
    with pytest.raises(th.SceneError, match="method.*newton"):
        th.scene_from_dict(data, source="bad.toml")
    data["solver"] = {}
    assert th.scene_from_dict(data).joints[0].dofs == 0


@pytest.mark.launches(1_000)
def test_run_summary_and_trajectory_report_the_joints(arch, tmp_path, capsys, monkeypatch):
    """`taichi-hydro run --json` adds {joint: {position, velocity, force}} for world 0, one entry
    per degree of freedom (CONTRACT), equal to joint_state() of the same run; the .npz holds the
    joint series and names."""
    import json
    import warnings

    from conftest import ROOT
    from taichi_hydro import cli

    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)  # cli.main replaces it
    out = tmp_path / "arm.npz"
    assert cli.main(["run", str(ROOT / "scenes/arm.toml"), "--steps", "20", "--json", "--arch", arch, "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    sim = th.Simulator(th.load_scene(ROOT / "scenes/arm.toml"))
    sim.step(20)
    state = sim.joint_state()
    assert list(summary["joints"]) == ["shoulder", "elbow", "wrist"]
    for d, name in enumerate(sim.joint_names):
        entry = summary["joints"][name]
        assert entry == {"position": [pytest.approx(state["position"][0, d], abs=1e-6)],
                         "velocity": [pytest.approx(state["velocity"][0, d], abs=1e-5)],
                         "force": [pytest.approx(state["effort"][0, d], rel=1e-4, abs=1e-4)]}
    traj = np.load(out)
    assert traj["joint_names"].tolist() == sim.joint_names
    assert traj["joint_position"].shape == (21, 1, 3)
    np.testing.assert_allclose(traj["joint_position"][-1, 0], state["position"][0], atol=1e-6)


# Every joint type and row law, with a contact: the cpu and vulkan runs of the same steps agree.
MECHANISM = {
    "sim": {"dt": 1e-3},
    "body": [
        {"name": "floor", "type": "static", "shape": {"type": "halfspace"}},
        {"name": "arm", "mass": 1.0, "position": [0.15, 0.0, 0.5], "shape": {"type": "box", "size": [0.3, 0.04, 0.04]}},
        {"name": "weight", "mass": 0.5, "position": [0.3, 0.0, 0.45], "shape": {"type": "box", "size": [0.05, 0.05, 0.05]}},
        {"name": "slider", "mass": 0.3, "position": [-0.3, 0.0, 0.3], "shape": {"type": "box", "size": [0.06, 0.06, 0.06]}},
        {"name": "bob", "mass": 0.2, "position": [-0.3, 0.0, 0.1], "shape": {"type": "sphere", "radius": 0.05},
         "contact": {"modulus": 1e5, "dissipation": 5.0}},
    ],
    "joint": [
        {"name": "shoulder", "type": "revolute", "parent": "world", "child": "arm", "position": [0, 0, 0.5], "axis": [0, 1, 0],
         "limits": [-0.4, 0.25], "damping": 0.1, "friction": 0.05,
         "actuator": {"type": "pd", "kp": 20.0, "kd": 1.0, "target": 0.6, "effort_limit": 8.0}},
        {"name": "weld", "type": "fixed", "parent": "arm", "child": "weight", "position": [0.3, 0, 0.45]},
        {"name": "rail", "type": "prismatic", "parent": "world", "child": "slider", "position": [-0.3, 0, 0.3], "axis": [1, 0, 0],
         "limits": [-0.05, 0.05], "actuator": {"type": "effort", "effort": 2.0}},
        {"name": "socket", "type": "ball", "parent": "slider", "child": "bob", "position": [-0.3, 0, 0.3], "damping": 0.01},
    ],
    "collision_filter": [{"bodies": ["floor", "arm", "weight", "slider"]}],
}

MECHANISM_SCRIPT = textwrap.dedent("""
    import json, sys
    import taichi_hydro as th
    th.init(sys.argv[1])
    sim = th.Simulator(th.scene_from_dict(json.loads(sys.argv[2])))
    sim.step(int(sys.argv[3]))
    out = {k: v.tolist() for k, v in sim.joint_state().items()}
    out["body_position"] = sim.get_state()["position"][0].tolist()
    print(json.dumps(out))
""")


@pytest.mark.launches(4_000)
def test_every_joint_law_agrees_on_cpu_and_vulkan(arch):
    """A mechanism with every joint type and row law (a PD revolute joint with limits, damping
    and friction resting on its upper limit, a welded weight, an effort-driven prismatic slider
    on its limit, a damped ball joint whose bob rests on the floor): 150 steps on vulkan (float32
    solve) and on cpu (float64 solve, a subprocess) agree, joint positions to 1e-4 and efforts
    to 1e-3 relative of their scale (float32 rounding through a stiff, damped system settling
    on its limits; observed differences are reported). Run from the vulkan pass, whose worker
    has compiled the jointed step for this file's other tests (conftest.COMPILE_GROUPS): run
    from the cpu pass, the vulkan subprocess compiled it again, about 6 minutes of lavapipe
    from cold caches (about 40 s after another jointed scene in the same process)."""
    if arch != "vulkan":
        pytest.skip("compared from the vulkan run")
    steps = 150
    run = subprocess.run([sys.executable, "-c", MECHANISM_SCRIPT, "cpu", json.dumps(MECHANISM), str(steps)],
                         capture_output=True, text=True, check=True)
    cpu = {k: np.asarray(v) for k, v in json.loads(run.stdout.strip().splitlines()[-1]).items()}
    sim = th.Simulator(th.scene_from_dict(MECHANISM))
    sim.step(steps)
    dev = sim.joint_state()
    print("dofs", sim.joint_names)
    for key in ("position", "velocity", "effort"):
        print(f"{key}: cpu {np.round(cpu[key][0], 6).tolist()}, vulkan {np.round(dev[key][0], 6).tolist()}")
    np.testing.assert_allclose(dev["position"][0], cpu["position"][0], rtol=0, atol=1e-4)
    np.testing.assert_allclose(dev["velocity"][0], cpu["velocity"][0], rtol=1e-3, atol=1e-4)
    # Efforts: the shoulder rests on its limit, whose impulse -(u - bias) / R moves by du / R for
    # a velocity difference du, R = 1 / (4 pi^2 I) (I: the arm's inertia about the axis): the
    # two runs' velocities differ by their float32 rounding, so their efforts differ by
    # du 4 pi^2 I / dt; elsewhere by 1e-3 of the largest effort.
    I_arm = 1.0 * (0.3 ** 2 + 0.04 ** 2) / 12
    du = abs(dev["velocity"][0, 0] - cpu["velocity"][0, 0])
    scale = np.abs(cpu["effort"][0]).max()
    assert abs(dev["effort"][0, 0] - cpu["effort"][0, 0]) <= 2 * du * 4 * math.pi ** 2 * I_arm / 1e-3 + 1e-3 * scale
    np.testing.assert_allclose(dev["effort"][0, 1:], cpu["effort"][0, 1:], rtol=0, atol=1e-3 * scale)
    np.testing.assert_allclose(sim.get_state()["position"][0], cpu["body_position"], rtol=0, atol=1e-4)
    # The mechanism did what it was built for: shoulder on its upper limit, slider on its bound.
    assert cpu["position"][0, 0] == pytest.approx(0.25, abs=1e-4)
    assert cpu["position"][0, 1] == pytest.approx(0.05, abs=1e-4)
