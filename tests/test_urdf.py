"""Robots from URDF files ([[robot]] tables: taichi_hydro.robot).

The round trip compares what a URDF states with the scene and the static model it becomes, the
expected values computed here independently (scipy's rotations, the URDF specification's
conventions written out): float64 host arithmetic of a few products, so to 1e-12. The URDF
pendulum is compared with the same pendulum written by hand as [[body]] and [[joint]] tables in
the most natural frames (bodies at their centres of mass, not at URDF link frames): both run in
float32 on the device from the same physical state, so they agree to round-off (bound in the
test). The gripper scene is run briefly and checked against its statics."""

import math
import textwrap

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import taichi_hydro as th
from taichi_hydro.model import build_model
from taichi_hydro.rotation import rotation_matrices

from conftest import ROOT

G = 9.81
EPS32 = float(np.finfo(np.float32).eps)


def host_only(arch):
    if arch != "cpu":
        pytest.skip("host-side parsing: checked in the cpu session")


def R_rpy(rpy):
    """URDF's fixed-axis roll-pitch-yaw: extrinsic rotations about x, then y, then z."""
    return Rotation.from_euler("xyz", rpy).as_matrix()


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def robot_scene(urdf, tmp_path, extra_robot="", extra="", name="r"):
    """A validated scene of one [[robot]] (the scene file beside the URDF's folder)."""
    scene_file = write(tmp_path / "scene.toml", f"""
        [[robot]]
        name = "{name}"
        urdf = "{urdf}"
        {extra_robot}
        {extra}
        """)
    return th.load_scene(scene_file)


# ------------------------------------------------------------------------------ round trip

BASE_P, BASE_RPY = np.array([0.3, -0.2, 0.5]), np.array([0.1, -0.2, 0.7])
INERTIAL = {  # link: (mass, xyz, rpy, (ixx, ixy, ixz, iyy, iyz, izz))
    "base": (2.0, [0.01, 0.02, -0.03], [0.3, 0.0, 0.5], (0.02, 0.001, -0.002, 0.03, 0.0015, 0.025)),
    "arm": (0.7, [0.1, 0.0, 0.0], [0.0, 0.4, 0.0], (0.001, 0.0, 0.0, 0.004, 0.0, 0.0045)),
    "slider": (0.3, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], (0.0004, 0.0, 0.0, 0.0004, 0.0, 0.0006)),
    "wheel": (0.2, [0.0, 0.0, 0.01], [1.2, -0.3, 0.2], (0.0002, 0.0, 0.0, 0.0002, 0.0, 0.0003)),
    "free": (0.5, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], (0.001, 0.0, 0.0, 0.001, 0.0, 0.001)),
}
JOINTS = {  # joint: (type, parent, child, xyz, rpy, axis, limit attributes, dynamics attributes)
    "shoulder": ("revolute", "base", "arm", [0.0, 0.1, 0.2], [0.0, 0.0, 0.6], [0.0, 1.0, 1.0],
                 'lower="-1.2" upper="0.8" effort="15" velocity="2"', 'damping="0.3" friction="0.05"'),
    "extend": ("prismatic", "arm", "slider", [0.25, 0.0, 0.0], [0.2, 0.0, 0.0], [1.0, 0.0, 0.0],
               'lower="-0.05" upper="0.1" effort="40" velocity="1"', 'damping="4"'),
    "spin": ("continuous", "slider", "wheel", [0.0, 0.0, 0.05], [0.0, 0.5, 0.0], [0.0, 0.0, 1.0], 'effort="1" velocity="9"', ""),
    "mount": ("fixed", "arm", "tool", [0.3, 0.0, 0.02], [0.0, 0.0, 1.5707963267948966], [1.0, 0.0, 0.0], "", ""),
    "release": ("floating", "base", "free", [0.0, -0.4, 0.1], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0], "", ""),
}
COLLISIONS = {  # link: [(name, xyz, rpy, geometry XML)]
    "base": [("plate", [0.0, 0.0, -0.02], [0.0, 0.0, 0.3], '<box size="0.2 0.1 0.04"/>'),
             (None, [0.05, 0.0, 0.03], [1.5707963267948966, 0.0, 0.0], '<cylinder radius="0.02" length="0.06"/>')],
    "arm": [("bone", [0.12, 0.0, 0.0], [0.0, 1.5707963267948966, 0.0], '<capsule radius="0.015" length="0.2"/>')],
    "slider": [("shell", [0.0, 0.01, 0.0], [0.2, 0.3, -0.4],
                '<mesh filename="package://kit/meshes/shell.obj" scale="2 1 0.5"/>')],
    "wheel": [("rim", [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], '<sphere radius="0.03"/>')],
    "tool": [("tip", [0.01, 0.0, 0.0], [0.0, 0.2, 0.0], '<sphere radius="0.01"/>')],
}


def round_trip_urdf(tmp_path):
    """tmp/kit/urdf/robot.urdf with the links, joints and collisions above; the mesh in
    tmp/kit/meshes (found through package://kit/...)."""
    import trimesh

    (tmp_path / "kit" / "meshes").mkdir(parents=True)
    trimesh.creation.box(extents=(0.02, 0.03, 0.04)).export(tmp_path / "kit" / "meshes" / "shell.obj")
    parts = []
    for link in ["base", "arm", "slider", "wheel", "tool", "free"]:
        xml = f'<link name="{link}">'
        if link in INERTIAL:
            m, xyz, rpy, (ixx, ixy, ixz, iyy, iyz, izz) = INERTIAL[link]
            xml += (f'<inertial><origin xyz="{" ".join(map(str, xyz))}" rpy="{" ".join(map(str, rpy))}"/><mass value="{m}"/>'
                    f'<inertia ixx="{ixx}" ixy="{ixy}" ixz="{ixz}" iyy="{iyy}" iyz="{iyz}" izz="{izz}"/></inertial>')
        for name, xyz, rpy, geometry in COLLISIONS.get(link, []):
            xml += (f'<collision{f" name={chr(34)}{name}{chr(34)}" if name else ""}><origin xyz="{" ".join(map(str, xyz))}" '
                    f'rpy="{" ".join(map(str, rpy))}"/><geometry>{geometry}</geometry></collision>')
        parts.append(xml + "</link>")
    for name, (kind, parent, child, xyz, rpy, axis, limit, dynamics) in JOINTS.items():
        parts.append(f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
                     f'<origin xyz="{" ".join(map(str, xyz))}" rpy="{" ".join(map(str, rpy))}"/>'
                     f'<axis xyz="{" ".join(map(str, axis))}"/>' + (f"<limit {limit}/>" if limit else "")
                     + (f"<dynamics {dynamics}/>" if dynamics else "") + "</joint>")
    return write(tmp_path / "kit" / "urdf" / "robot.urdf", '<?xml version="1.0"?>\n<robot name="kit">\n' + "\n".join(parts)
                 + "\n</robot>\n")


def expected_link_frames():
    """X_WL (p, R) of every link at the zero configuration, the base at BASE_P, BASE_RPY: a
    child link's frame is its joint's frame, X_WC = X_WP X_PJ."""
    X = {"base": (BASE_P, R_rpy(BASE_RPY))}
    for kind, parent, child, xyz, rpy, *_ in JOINTS.values():
        p, R = X[parent]
        X[child] = (p + R @ np.array(xyz), R @ R_rpy(rpy))
    return X


def test_urdf_round_trip_keeps_masses_inertias_shapes_and_joints(arch, tmp_path):
    """Every number of the URDF reaches the scene and the model as written: masses; centres of
    mass and inertias in the link frame (I_L = R_LC I_C R_LC^T, R_LC from the inertial's rpy);
    body poses from the zero-configuration kinematics at the base pose; collision poses
    (X_BG = X_LG, and for the massless fixed 'tool' link merged into 'arm', X_B,tool X_tool,G);
    shapes and the mesh's scale and package:// path; joint origins, axes (normalised, turned
    into the world), limits, damping, friction; the effort limit on an actuator; a continuous
    joint without limits, a floating joint as no joint, a fixed base as a weld."""
    host_only(arch)
    urdf = round_trip_urdf(tmp_path)
    q_WR = Rotation.from_euler("xyz", BASE_RPY).as_quat()[[3, 0, 1, 2]]
    scene = robot_scene("kit/urdf/robot.urdf", tmp_path, extra_robot=f"""
        position = {BASE_P.tolist()}
        orientation = {q_WR.tolist()}
        fixed_base = true
        [robot.actuator.shoulder]
        type = "pd"
        kp = 10.0
        [robot.actuator.spin]
        type = "effort"
        effort_limit = 0.5
        [robot.contact.wheel]
        modulus = 2e5
        friction = 0.9
        """)
    X = expected_link_frames()
    bodies = {b.name: b for b in scene.bodies}
    assert sorted(bodies) == ["r/arm", "r/base", "r/free", "r/slider", "r/wheel"]  # 'tool' merged into 'arm'
    robot = scene.robots[0]
    assert robot.links["tool"] == "r/arm" and robot.joints["mount"] is None and robot.joints["release"] is None
    assert robot.urdf == str(urdf.resolve())
    model = build_model(scene)
    for link, (m, xyz, rpy, (ixx, ixy, ixz, iyy, iyz, izz)) in INERTIAL.items():
        body = bodies[f"r/{link}"]
        I_C = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        I_L = R_rpy(rpy) @ I_C @ R_rpy(rpy).T
        b = scene.body_index(body.name)
        assert body.type == "dynamic" and body.mass == m
        np.testing.assert_allclose(body.center_of_mass, xyz, rtol=0, atol=1e-15)
        np.testing.assert_allclose(model.body_inertia_B[b], I_L, rtol=0, atol=1e-12 * np.abs(I_C).max())
        np.testing.assert_allclose(model.body_com_B[b], xyz, rtol=0, atol=1e-15)
        assert model.body_mass[b] == pytest.approx(m, rel=1e-15)
        p, R = X[link]
        np.testing.assert_allclose(body.p_WB, p, rtol=0, atol=1e-12)
        np.testing.assert_allclose(rotation_matrices(body.q_WB), R, rtol=0, atol=1e-12)
    # Collision shapes: their poses in the body frame, shapes, materials.
    for link, collisions in COLLISIONS.items():
        body = bodies[robot.links[link]]
        p_WB, R_WB = X["arm" if link == "tool" else link]
        p_WL, R_WL = X[link]
        R_BL, p_BL = R_WB.T @ R_WL, R_WB.T @ (p_WL - p_WB)
        for i, (name, xyz, rpy, _) in enumerate(collisions):
            expected_name = (name or f"collision{i}") if link != "tool" else f"tool/{name}"
            g = next(g for g in body.geometries if g.name == expected_name)
            np.testing.assert_allclose(g.p_BG, p_BL + R_BL @ np.array(xyz), rtol=0, atol=1e-12)
            np.testing.assert_allclose(rotation_matrices(g.q_BG), R_BL @ R_rpy(rpy), rtol=0, atol=1e-12)
            assert g.contact.compliant == (link == "wheel")
            assert g.contact.friction == (0.9 if link == "wheel" else 0.5)
    shapes = {g.name: g.shape for b in scene.bodies for g in b.geometries}
    assert shapes["plate"].type == "box" and shapes["plate"].size == (0.2, 0.1, 0.04)
    assert shapes["collision1"].type == "cylinder" and (shapes["collision1"].radius, shapes["collision1"].length) == (0.02, 0.06)
    assert shapes["bone"].type == "capsule" and shapes["rim"].radius == 0.03 and shapes["tool/tip"].radius == 0.01
    assert shapes["shell"].file == str((tmp_path / "kit" / "meshes" / "shell.obj").resolve())
    assert shapes["shell"].scale == (2.0, 1.0, 0.5)
    # Joints.
    joints = {j.name: j for j in scene.joints}
    assert sorted(joints) == ["r/extend", "r/fixed_base", "r/shoulder", "r/spin"]
    weld = joints["r/fixed_base"]
    assert (weld.type, weld.parent, weld.child) == ("fixed", "world", "r/base")
    np.testing.assert_allclose(weld.p_WJ, BASE_P, rtol=0, atol=0)
    for name, (kind, parent, child, xyz, rpy, axis, _, _) in JOINTS.items():
        if kind in ("fixed", "floating"):
            continue
        j = joints[f"r/{name}"]
        assert j.type == {"continuous": "revolute"}.get(kind, kind)
        assert (j.parent, j.child) == (f"r/{parent}", f"r/{child}")
        p_WC, R_WC = X[child]
        np.testing.assert_allclose(j.p_WJ, p_WC, rtol=0, atol=1e-12)
        np.testing.assert_allclose(j.axis_W, R_WC @ (np.array(axis) / np.linalg.norm(axis)), rtol=0, atol=1e-12)
    shoulder, extend, spin = joints["r/shoulder"], joints["r/extend"], joints["r/spin"]
    assert shoulder.limits == (-1.2, 0.8) and shoulder.damping == 0.3 and shoulder.friction == 0.05
    assert shoulder.actuator.type == "pd" and shoulder.actuator.kp == 10.0 and shoulder.actuator.effort_limit == 15.0
    assert extend.limits == (-0.05, 0.1) and extend.damping == 4.0 and extend.friction == 0.0 and extend.actuator is None
    assert spin.limits is None and spin.actuator.effort_limit == 0.5  # the scene's value wins over the URDF's 1
    # Every pair of the robot's bodies is filtered (self_collision = false); the free link is
    # jointless but still in the robot's filter.
    assert frozenset(bodies) in scene.collision_filters


def test_massless_root_is_static_with_a_fixed_base_and_self_collision_keeps_only_joint_filters(arch, tmp_path):
    """A massless root of a fixed-base robot is a static body (nothing to weld); with
    self_collision = true the robot adds no filter of its own (parent-child pairs are filtered
    by their joints, Scene.filtered), so two rigid links that are not jointed can collide
    (through the compliant twin of one of them, tests/test_rigid_contact.py)."""
    host_only(arch)
    write(tmp_path / "two.urdf", """
        <robot name="two">
          <link name="world_mount"><collision><geometry><box size="0.1 0.1 0.01"/></geometry></collision></link>
          <link name="a"><inertial><mass value="1"/><inertia ixx="1e-3" ixy="0" ixz="0" iyy="1e-3" iyz="0" izz="1e-3"/></inertial>
            <collision><geometry><sphere radius="0.02"/></geometry></collision></link>
          <link name="b"><inertial><mass value="1"/><inertia ixx="1e-3" ixy="0" ixz="0" iyy="1e-3" iyz="0" izz="1e-3"/></inertial>
            <collision><geometry><sphere radius="0.02"/></geometry></collision></link>
          <joint name="ja" type="revolute"><parent link="world_mount"/><child link="a"/><origin xyz="0 0 0.1"/>
            <axis xyz="0 1 0"/></joint>
          <joint name="jb" type="revolute"><parent link="a"/><child link="b"/><origin xyz="0.1 0 0"/><axis xyz="0 1 0"/></joint>
        </robot>""")
    scene = robot_scene("two.urdf", tmp_path, extra_robot="fixed_base = true")
    root = scene.bodies[scene.body_index("r/world_mount")]
    assert root.type == "static" and root.mass is None
    assert [j.name for j in scene.joints] == ["r/ja", "r/jb"] and scene.joints[0].parent == "r/world_mount"
    assert scene.joints[0].limits is None  # a revolute joint whose <limit> is absent has no position limit
    assert scene.collision_filters == (frozenset({"r/world_mount", "r/a", "r/b"}),)
    scene = robot_scene("two.urdf", tmp_path, extra_robot="fixed_base = true\nself_collision = true")
    assert scene.collision_filters == ()
    assert scene.filtered("r/a", "r/b") and scene.filtered("r/world_mount", "r/a") and not scene.filtered("r/world_mount", "r/b")
    from taichi_hydro.model import check_supported
    from taichi_hydro.types import P_BODY_HI, P_BODY_LO, P_TWIN

    data = build_model(scene)
    check_supported(data)
    names = [b.name for b in scene.bodies]
    pairs = {(names[lo], names[hi]): twin for lo, hi, twin in data.pair_i[:, [P_BODY_LO, P_BODY_HI, P_TWIN]]}
    assert pairs == {("r/world_mount", "r/b"): 1}


# -------------------------------------------------------------------- URDF vs hand-written

L1, L2, M1, M2 = 0.4, 0.3, 1.0, 0.6


def pendulum_urdf(tmp_path):
    """Two links hanging from a fixed base: link frames at the joints (URDF style), the
    inertials at the links' middles with their principal axes turned (rpy) so that the inertia
    in the link frame is that of a rod along x plus a small diagonal part."""
    rows = []
    for name, m, L in (("upper", M1, L1), ("lower", M2, L2)):
        I_L = np.diag([1e-4, m * L * L / 12 + 1e-4, m * L * L / 12 + 1e-4])
        Rc = R_rpy([0.3, 0.2, -0.4])  # the inertial's axes: I_C = Rc^T I_L Rc
        I_C = Rc.T @ I_L @ Rc
        six = " ".join(f'{k}="{float(I_C[a, b])!r}"' for k, (a, b) in
                       {"ixx": (0, 0), "ixy": (0, 1), "ixz": (0, 2), "iyy": (1, 1), "iyz": (1, 2), "izz": (2, 2)}.items())
        rows.append(f'<link name="{name}"><inertial><origin xyz="{L / 2} 0 0" rpy="0.3 0.2 -0.4"/><mass value="{m}"/>'
                    f'<inertia {six}/></inertial></link>')
    return write(tmp_path / "pendulum.urdf", f"""
        <robot name="pendulum">
          <link name="mount"/>
          {rows[0]}
          {rows[1]}
          <joint name="hinge1" type="continuous"><parent link="mount"/><child link="upper"/><axis xyz="0 1 0"/></joint>
          <joint name="hinge2" type="revolute"><parent link="upper"/><child link="lower"/><origin xyz="{L1} 0 0"/>
            <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="5" velocity="10"/><dynamics damping="0.01"/></joint>
        </robot>""")


def pendulum_by_hand(z0):
    """The same pendulum as [[body]] and [[joint]] tables: each body placed at its centre of mass
    with the rod's inertia in world-aligned axes."""
    bodies, joints = [], []
    for name, m, L, x0, parent, hinge in (("upper", M1, L1, 0.0, "world", "hinge1"), ("lower", M2, L2, L1, "upper", "hinge2")):
        bodies.append({"name": name, "mass": m, "position": [x0 + L / 2, 0.0, z0], "geometry": [],
                       "inertia": [1e-4, m * L * L / 12 + 1e-4, m * L * L / 12 + 1e-4, 0.0, 0.0, 0.0]})
        joints.append({"name": hinge, "type": "revolute", "parent": parent, "child": name, "position": [x0, 0.0, z0],
                       "axis": [0.0, 1.0, 0.0]})
    joints[1].update(limits=[-3.0, 3.0], damping=0.01)
    return th.scene_from_dict({"body": bodies, "joint": joints, "solver": {"deterministic": True}}, source="<by hand>")


def test_urdf_pendulum_moves_as_the_same_pendulum_written_by_hand(arch, tmp_path):
    """Released horizontal, both double pendulums swing for 150 steps (0.15 s, the links fall
    through about 0.35 and 0.45 rad) and keep the same centres of mass, orientations and joint angles.
    They start from the same physical state described in other frames (body origins at the link
    frames vs at the centres of mass, inertia turned by rpy vs given in world axes), so the
    device arithmetic differs by float32 round-off: about EPS32 on coordinates of ~1 m per step,
    gathered over n steps (the motion is far from chaotic in this short time): n EPS32 (1.8e-5
    m or rad; measured: 2e-7 m, 3e-6 rad), while an inertia left in the inertial's axes or a
    centre of mass left at the link origin changes the angles by more than 1e-3 rad."""
    if arch != "cpu":
        pytest.skip("the conversion is host-side and the device steps are test_joints' (lavapipe: ~100 ms a step): cpu only")
    z0, n = 1.0, 150
    pendulum_urdf(tmp_path)
    urdf = robot_scene("pendulum.urdf", tmp_path, extra_robot=f"position = [0.0, 0.0, {z0}]\nfixed_base = true",
                       extra='[solver]\ndeterministic = true')
    by_urdf, by_hand = th.Simulator(urdf), th.Simulator(pendulum_by_hand(z0))
    assert by_urdf.joint_names == ["r/hinge1", "r/hinge2"] and by_hand.joint_names == ["hinge1", "hinge2"]
    com_B = {b: np.array(by_urdf.scene.bodies[by_urdf.scene.body_index(b)].center_of_mass) for b in ("r/upper", "r/lower")}
    by_urdf.step(n)
    by_hand.step(n)
    su, sh = by_urdf.get_state(), by_hand.get_state()
    worst = 0.0
    for link in ("upper", "lower"):
        u, h = by_urdf.scene.body_index(f"r/{link}"), by_hand.scene.body_index(link)
        R_u = rotation_matrices(su["orientation"][0, u])
        com_u = su["position"][0, u] + R_u @ com_B[f"r/{link}"]
        worst = max(worst, float(np.abs(com_u - sh["position"][0, h]).max()))
        # The URDF body's axes are the hand-written body's axes (both start world-aligned).
        np.testing.assert_allclose(R_u, rotation_matrices(sh["orientation"][0, h]), rtol=0, atol=n * EPS32)
    angles_u, angles_h = by_urdf.joint_state()["position"][0], by_hand.joint_state()["position"][0]
    print(f"after {n} steps: joint angles {angles_u} vs {angles_h}; worst centre-of-mass difference {worst:.2e} m")
    assert angles_h[0] > 0.3  # it swung
    assert worst <= n * EPS32
    np.testing.assert_allclose(angles_u, angles_h, rtol=0, atol=n * EPS32)


# ------------------------------------------------------------------------------- gripper


@pytest.mark.launches(6_000)
def test_gripper_holds_its_box_with_friction_balancing_the_weight(arch):
    """scenes/gripper.toml: the PD-driven fingers squeeze the compliant box between their
    compliant pads and it hangs on friction. After 0.05 s of settling, over the next T = 0.1 s:
    - the box moves by less than 1 um (at rest within the solver tolerance, 1e-7 m/s x 0.1 s
      = 1e-8 m, plus float32 spacing of its coordinates, 3e-8 m; a slipping box would fall
      g t^2 / 2 = 0.05 m);
    - the pads' forces on the box, averaged over the window, sum to its weight (0, 0, m g).
      The box's momentum says by how much: mean force - m g = m (v_end - v_start) / T plus the
      solve's unbalanced impulse per step, which the stopping test keeps below m tol (M^-1 r
      moves no point by more than tol): m tol / dt. The box's velocity is bounded by the
      float32 state: a finger that its joint's drift correction holds in z hops between two
      adjacent float32 values of its height (spacing h = 2^-26 m at 0.245 m) at up to one
      spacing per step, and the stuck box follows, |v| <= h / dt. Together: 2 m h / (dt T) +
      m tol / dt = 4e-5 N. (One step's force is not a steady reading: such a hop changes the
      box's velocity by h / dt in one step, m h / dt^2 = 1.5e-3 N, measured 1.4-1.6e-3 N
      in 1-2 % of steps with float32 Newton arithmetic (vulkan), in none of 400 with float64.)
    - the fingers rest: their joint velocities stay within the same float32 bound h / dt
      (measured up to 7e-6 m/s: a velocity that moves a coordinate by less than its spacing
      may persist);
    - each pad's mean normal force is the PD actuator's kp (target - q) at the finger's mean
      joint position, to the finger's momentum bound as above (its mass, h / dt) plus what
      damping and the implicit spring see of such a velocity, (kd + kp dt) h / dt: 1e-4 N; and
      each pad's mean tangential force (half the weight) lies inside its friction cone (mu = 1)."""
    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "gripper.toml"))
    box = sim.scene.body_index("box")
    finger = sim.scene.body_index("gripper/left_finger")
    m, m_finger = sim.scene.bodies[box].mass, sim.scene.bodies[finger].mass
    dt, tol, steps = sim.dt, sim.options.tolerance, 100
    duration = steps * dt
    sim.step(50)
    p0 = sim.get_state()["position"][0, box].copy()
    left, right, q, joint_speed = np.zeros(3), np.zeros(3), np.zeros(2), 0.0
    for _ in range(steps):
        sim.step(1)
        forces = sim.contact_forces()
        left += forces[("box", "gripper/left_finger")] / steps
        right += forces[("box", "gripper/right_finger")] / steps
        joints = sim.joint_state()
        q += joints["position"][0] / steps
        joint_speed = max(joint_speed, float(np.abs(joints["velocity"][0]).max()))
    drift = float(np.linalg.norm(sim.get_state()["position"][0, box] - p0))
    print(f"drift {drift:.2e} m; mean pad forces on the fingers {left} {right} N; mean joint positions {q} m; "
          f"fastest joint {joint_speed:.2e} m/s; weight error {-(left + right) - [0.0, 0.0, m * G]} N")
    assert drift < 1e-6
    height = sim.get_state()["position"][0, finger, 2]
    hop_speed = float(np.spacing(np.float32(height))) / dt  # one float32 spacing of the fingers' height per step [m/s]
    assert joint_speed <= hop_speed
    np.testing.assert_allclose(-(left + right), [0.0, 0.0, m * G], rtol=0, atol=2 * m * hop_speed / duration + m * tol / dt)
    kp, kd, target = 400.0, 5.0, 0.005
    bound_finger = 2 * m_finger * hop_speed / duration + m_finger * tol / dt + (kd + kp * dt) * hop_speed
    for force, qi in ((left, q[0]), (right, q[1])):
        normal = abs(force[0])
        assert normal == pytest.approx(kp * (target - qi), abs=bound_finger)
        assert math.hypot(force[1], force[2]) < 1.0 * normal
    assert left[0] < 0 < right[0]  # the box pushes each finger outwards


# ------------------------------------------------------------------------------ errors

INERTIA = '<inertia ixx="1e-3" ixy="0" ixz="0" iyy="1e-3" iyz="0" izz="1e-3"/>'
ARM_INERTIAL = f'<link name="arm"><inertial><mass value="1"/>{INERTIA}</inertial>'
GOOD = f"""<?xml version="1.0"?>
<robot name="bad">
  <link name="base"><inertial><mass value="1"/>{INERTIA}</inertial>
    <collision><geometry><box size="0.1 0.1 0.1"/></geometry></collision></link>
  {ARM_INERTIAL}
    <collision><geometry>GEOMETRY</geometry></collision></link>
  <joint name="elbow" type="revolute"><parent link="base"/><child link="arm"/><origin xyz="0 0 0.2"/>
    <axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="3" velocity="1"/></joint>
</robot>
"""
SPHERE = '<sphere radius="0.05"/>'

BAD_URDFS = [  # (edit of GOOD: (old, new) pairs, fragments the message must hold)
    ([("</robot>", "</robt>")], ["robot.urdf", "not well-formed XML", "line"]),
    ([('<child link="arm"/>', '<child link="forearm"/>')], ["robot.urdf", "joint 'elbow'", "forearm"]),
    ([('type="revolute"', 'type="planar"')], ["robot.urdf", "joint 'elbow'", "planar"]),
    ([('type="revolute"', 'type="hinge"')], ["robot.urdf", "joint 'elbow'", "'type'", "hinge"]),
    ([("GEOMETRY", '<mesh filename="meshes/missing.stl"/>')], ["robot.urdf", "link 'arm'", "missing.stl", "not found"]),
    ([("GEOMETRY", '<mesh filename="package://nopkg/m.stl"/>')], ["robot.urdf", "link 'arm'", "package://nopkg/m.stl"]),
    ([('<axis xyz="0 1 0"/>', '<axis xyz="0 0 0"/>')], ["robot.urdf", "joint 'elbow'", "<axis>", "nonzero"]),
    ([('lower="-1" upper="1"', 'lower="1" upper="-1"')], ["robot.urdf", "joint 'elbow'", "<limit>", "lower"]),
    ([('<axis xyz="0 1 0"/>', '<axis xyz="0 1 0"/><mimic joint="other"/>')], ["robot.urdf", "joint 'elbow'", "mimic"]),
    ([(ARM_INERTIAL, ARM_INERTIAL.replace('value="1"', 'value="-1"'))],
     ["robot.urdf", "link 'arm'", "<mass>", "'value'", ">= 0"]),
    ([(ARM_INERTIAL, ARM_INERTIAL.replace('ixx="1e-3"', 'ixx="5e-3"'))],
     ["robot.urdf", "link 'arm'", "<inertia>", "triangle inequality"]),
    ([(ARM_INERTIAL, '<link name="arm">')], ["robot.urdf", "joint 'elbow'", "'arm'", "no mass", "revolute"]),
    ([(INERTIA, '<inertia ixx="1e-3" iyy="1e-3" izz="1e-3"/>')],
     ["robot.urdf", "link 'base'", "<inertia>", "'ixy' is required"]),
    ([("GEOMETRY", '<box size="0.1 0.1"/>')], ["robot.urdf", "link 'arm'", "<box>", "'size'", "3 numbers"]),
    ([("GEOMETRY", '<cone radius="1"/>')], ["robot.urdf", "link 'arm'", "cone"]),
    ([('<child link="arm"/>', '<child link="base"/>')], ["robot.urdf", "joint 'elbow'", "same link"]),
    ([('<origin xyz="0 0 0.2"/>', '<origin xyz="0 0 ${h}"/>')], ["robot.urdf", "joint 'elbow'", "xacro"]),
    ([('<robot name="bad">', '<robot name="bad"><link name="spare"/>')], ["robot.urdf", "one tree", "spare"]),
    ([('<robot name="bad">', '<robot name="bad"><joint name="loop" type="fixed"><parent link="arm"/><child link="base"/>'
                            '</joint>')],
     ["robot.urdf", "loop"]),
    ([('<robot name="bad">', '<robot name="bad"><joint name="twice" type="fixed"><parent link="base"/><child link="arm"/>'
                            '</joint>')],
     ["robot.urdf", "joint 'elbow'", "'arm'", "already the child of joint 'twice'"]),
    ([("<robot ", "<model ")] + [("</robot>", "</model>")], ["scene.toml", "robot 'r'", "robot.urdf", "<model>", "not a URDF"]),
]


@pytest.mark.parametrize("edits, fragments", BAD_URDFS, ids=[f[-1] for _, f in BAD_URDFS])
def test_bad_urdfs_are_refused_naming_the_file_and_the_link_or_joint(arch, tmp_path, edits, fragments):
    """Every mistake in a URDF is a SceneError naming the scene, the URDF file and the link or
    joint (with the element and attribute where there is one)."""
    host_only(arch)
    text = GOOD
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    write(tmp_path / "robot.urdf", text.replace("GEOMETRY", SPHERE))
    with pytest.raises(th.SceneError) as err:
        robot_scene("robot.urdf", tmp_path, extra_robot="fixed_base = true")
    message = str(err.value)
    for fragment in ["scene.toml: robot 'r'", *fragments]:
        assert fragment in message, (fragment, message)


BAD_ROBOT_TABLES = [  # (lines of the [[robot]] table, fragments)
    ('urdf = "nothere.urdf"', ["scene.toml", "robot 'r'", "'urdf'", "nothere.urdf", "not found"]),
    ("[robot.contact.forearm]\nmodulus = 1e5", ["scene.toml", "robot 'r'", "robot.urdf", "[robot.contact.forearm]", "no link"]),
    ("[robot.contact.arm]\nmodulus = -1.0", ["scene.toml", "body 'r/arm'", "contact", "'modulus'"]),
    ("[robot.actuator.wrist]\ntype = \"pd\"\nkp = 1.0", ["scene.toml", "robot 'r'", "[robot.actuator.wrist]", "no joint"]),
    ("[robot.actuator.elbow]\ntype = \"pd\"", ["scene.toml", "joint 'r/elbow'", "actuator", "'kp'"]),
    ("[robot.actuator.elbow]\ntype = \"effort\"\nkp = 3.0", ["scene.toml", "joint 'r/elbow'", "actuator", "'kp'"]),
    ("fixed_base = 1", ["scene.toml", "robot 'r'", "'fixed_base'", "true or false"]),
    ("wheels = 4", ["scene.toml", "robot 'r'", "unknown key 'wheels'"]),
    ("orientation = [1.0, 1.0, 0.0, 0.0]", ["scene.toml", "robot 'r'", "'orientation'", "unit quaternion"]),
    ("contact = 3", ["scene.toml", "robot 'r'", "'contact'", "[robot.contact.NAME]"]),
]


@pytest.mark.parametrize("lines, fragments", BAD_ROBOT_TABLES, ids=[f[-1] for _, f in BAD_ROBOT_TABLES])
def test_bad_robot_tables_are_refused_naming_the_robot_and_key(arch, tmp_path, lines, fragments):
    """A bad [[robot]] table (missing URDF, a link or joint the URDF lacks, bad contact or
    actuator keys, wrong types) is a SceneError naming the scene file, the robot or the body or
    joint it makes, and the key."""
    host_only(arch)
    write(tmp_path / "robot.urdf", GOOD.replace("GEOMETRY", SPHERE))
    urdf = "nothere.urdf" if "nothere" in lines else "robot.urdf"
    extra_robot = "" if "nothere" in lines else lines
    with pytest.raises(th.SceneError) as err:
        robot_scene(urdf, tmp_path, extra_robot=extra_robot)
    message = str(err.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_more_robot_rules(arch, tmp_path):
    """A floating robot needs a root with mass; an actuator only on a joint that moves;
    [robot.actuators] gives every moving joint an actuator, [robot.actuator.JOINT] overrides it
    key by key; robot names are unique and free of '/'; a scene of robots only needs no
    [[body]]."""
    host_only(arch)
    write(tmp_path / "robot.urdf", GOOD.replace("GEOMETRY", SPHERE))
    scene = robot_scene("robot.urdf", tmp_path)  # fixed_base = false: the root 'base' is free
    assert [b.name for b in scene.bodies] == ["r/base", "r/arm"] and [j.name for j in scene.joints] == ["r/elbow"]
    massless_root = GOOD.replace("GEOMETRY", SPHERE).replace(f'<link name="base"><inertial><mass value="1"/>{INERTIA}</inertial>',
                                                             '<link name="base">')
    write(tmp_path / "robot.urdf", massless_root)
    with pytest.raises(th.SceneError, match="link 'base'.*root link has no mass.*fixed_base = true"):
        robot_scene("robot.urdf", tmp_path)
    write(tmp_path / "robot.urdf", GOOD.replace("GEOMETRY", SPHERE).replace('type="revolute"', 'type="fixed"'))
    with pytest.raises(th.SceneError, match=r"\[robot.actuator.elbow\].*fixed"):
        robot_scene("robot.urdf", tmp_path, extra_robot='[robot.actuator.elbow]\ntype = "effort"')
    # [robot.actuators]: defaults for every moving joint, overridden key by key per joint.
    write(tmp_path / "robot.urdf", GOOD.replace("GEOMETRY", SPHERE).replace("<robot name=\"bad\">", """<robot name="bad">
      <link name="hand"><inertial><mass value="1"/>""" + INERTIA + """</inertial></link>
      <joint name="wrist" type="continuous"><parent link="arm"/><child link="hand"/><axis xyz="0 0 1"/></joint>"""))
    scene = robot_scene("robot.urdf", tmp_path, extra_robot='[robot.actuators]\ntype = "pd"\nkp = 50.0\nkd = 2.0\n'
                                                          '[robot.actuator.wrist]\nkp = 5.0')
    actuators = {j.name: j.actuator for j in scene.joints}
    assert (actuators["r/elbow"].kp, actuators["r/elbow"].kd, actuators["r/elbow"].effort_limit) == (50.0, 2.0, 3.0)
    assert (actuators["r/wrist"].type, actuators["r/wrist"].kp, actuators["r/wrist"].kd) == ("pd", 5.0, 2.0)
    assert actuators["r/wrist"].effort_limit == math.inf
    with pytest.raises(th.SceneError, match=r"joint 'r/\w+': actuator: key 'gain'"):
        robot_scene("robot.urdf", tmp_path, extra_robot='[robot.actuators]\ntype = "pd"\nkp = 1.0\ngain = 2.0')
    with pytest.raises(th.SceneError, match="robot 'a/b'.*'name'"):
        robot_scene("robot.urdf", tmp_path, name="a/b")
    with pytest.raises(th.SceneError, match="robot name 'r' is used more than once"):
        robot_scene("robot.urdf", tmp_path, extra='[[robot]]\nname = "r"\nurdf = "robot.urdf"')
