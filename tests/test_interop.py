"""State exchange with external arrays: the device copy kernels (with NumPy arrays, always)
and the torch tensor paths of get_state / set_state / set_control (skipped without torch)."""

import numpy as np
import pytest
import taichi as ti

import taichi_hydro as th
from taichi_hydro.interop import rows_from_external, rows_to_external
from conftest import ball, ground, scene


def test_rows_round_trip_and_bad_rows_are_counted_and_kept(arch):
    arr = ti.ndarray(ti.math.vec4, (2, 3))
    values = np.arange(24, dtype=np.float32).reshape(2, 3, 4) + 1.0
    bad = np.array([0, np.iinfo(np.int32).max], dtype=np.int32)
    assert rows_from_external(values, arr, 4, False, bad) == 0
    out = np.zeros_like(values)
    rows_to_external(arr, out, 4)
    np.testing.assert_array_equal(out, values)
    broken = np.ones((2, 3, 4), dtype=np.float32)
    broken[1, 1, 2] = np.nan
    broken[0, 2] = 0.0  # a zero quaternion cannot be normalised
    bad = np.array([0, np.iinfo(np.int32).max], dtype=np.int32)
    assert rows_from_external(broken, arr, 4, True, bad) == 2
    assert bad[1] == 0 * 3 + 2  # the first bad row, flattened (world 0, body 2)
    got = arr.to_numpy()
    np.testing.assert_array_equal(got[1, 1], values[1, 1])  # bad rows keep their old value
    np.testing.assert_array_equal(got[0, 2], values[0, 2])
    np.testing.assert_allclose(got[0, 0], np.full(4, 0.5), rtol=1e-6)  # normalised


@pytest.fixture
def torch_sim(arch):
    torch = pytest.importorskip("torch")
    if arch == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    return torch, th.Simulator(scene([ground(), ball("ball", z=0.2)]), worlds=3)


def test_get_state_as_torch_matches_numpy(torch_sim):
    torch, sim = torch_sim
    sim.step(5)
    host = sim.get_state()
    tensors = sim.get_state(as_torch=True)
    for name, value in host.items():
        t = tensors[name]
        assert t.device.type == ("cuda" if th.current_arch() == "cuda" else "cpu")
        np.testing.assert_array_equal(t.cpu().numpy(), value.astype(np.float32))


def test_set_state_and_control_from_torch_equal_numpy(torch_sim):
    torch, sim = torch_sim
    dev = "cuda" if th.current_arch() == "cuda" else "cpu"
    state = sim.get_state()
    state["position"][:, 1, 2] += np.array([0.0, 0.01, 0.02])
    state["orientation"][:, 1] = [2.0, 0.0, 0.0, 0.0]  # normalised on the way in
    force = np.zeros((3, 2, 3))
    force[:, 1, 0] = [0.0, 1.0, 2.0]
    sim.set_state(**{k: torch.tensor(v, dtype=torch.float32, device=dev) for k, v in state.items()})
    sim.set_control(force=torch.tensor(force, dtype=torch.float32, device=dev))
    sim.step(10)
    via_torch = sim.get_state()
    sim.reset()
    sim.set_state(**state)
    sim.set_control(force=force)
    sim.step(10)
    np.testing.assert_array_equal(sim.get_state()["position"], via_torch["position"])


def test_torch_inputs_are_checked(torch_sim):
    torch, sim = torch_sim
    dev = "cuda" if th.current_arch() == "cuda" else "cpu"
    before = sim.get_state()["velocity"]
    bad = torch.zeros((3, 2, 3), device=dev)
    bad[2, 1, 0] = float("nan")
    with pytest.raises(th.SceneError, match=r"velocity of body 'ball' in world 2 is not finite"):
        sim.set_state(velocity=bad)
    np.testing.assert_array_equal(sim.get_state()["velocity"][2, 1], before[2, 1])
    with pytest.raises(th.SceneError, match=r"force must have shape \(3, 2, 3\), got \(3, 2\)"):
        sim.set_control(force=torch.zeros((3, 2), device=dev))
    with pytest.raises(th.SceneError, match="zero norm"):
        sim.set_state(orientation=torch.zeros((3, 2, 4), device=dev))


def test_state_views_are_the_state(torch_sim):
    """state_tensors() are the state arrays themselves: steps and resets show in them without a
    call, and an in-place write is what the next step starts from (the same run as set_state)."""
    torch, sim = torch_sim
    if th.current_arch() == "vulkan":
        with pytest.raises(th.SceneError, match="tensor views need the cpu or cuda backend"):
            sim.state_tensors()
        return
    views = sim.state_tensors()
    addresses = {name: t.data_ptr() for name, t in views.items()}
    sim.step(5)
    for name, value in sim.get_state().items():
        assert views[name].shape == value.shape and views[name].dtype == torch.float32
        np.testing.assert_array_equal(views[name].cpu().numpy(), value.astype(np.float32))
    moved = sim.get_state()  # the same writes in float32, as the views make them
    moved["position"][:, 1, 2] = (moved["position"][:, 1, 2].astype(np.float32) + np.float32([0.0, 0.01, 0.02])).astype(np.float64)
    moved["velocity"][:, 1, 0] = [0.0, 0.5, -0.5]
    views["position"][:, 1, 2] += torch.tensor([0.0, 0.01, 0.02], device=views["position"].device)
    views["velocity"][:, 1, 0] = torch.tensor([0.0, 0.5, -0.5], device=views["velocity"].device)
    np.testing.assert_array_equal(sim.get_state()["velocity"][:, 1, 0], [0.0, 0.5, -0.5])
    sim.step(10)
    via_views = sim.get_state()
    sim.reset()
    np.testing.assert_array_equal(views["position"].cpu().numpy(), sim.get_state()["position"].astype(np.float32))
    sim.step(5)
    sim.set_state(**moved)
    sim.step(10)
    for name, value in sim.get_state().items():
        np.testing.assert_array_equal(value, via_views[name])
    assert {name: t.data_ptr() for name, t in sim.state_tensors().items()} == addresses


def test_control_views_act_like_set_control_and_reset_clears_them(torch_sim):
    torch, sim = torch_sim
    if th.current_arch() == "vulkan":
        with pytest.raises(th.SceneError, match="use get_state"):
            sim.control_tensors()
        return
    force = np.zeros((3, 2, 3))
    force[:, 1, 0] = [0.0, 1.0, 2.0]
    controls = sim.control_tensors()
    controls["force"][:, 1, 0] = torch.tensor([0.0, 1.0, 2.0], device=controls["force"].device)
    sim.step(10)
    via_view = sim.get_state()
    assert via_view["velocity"][2, 1, 0] > via_view["velocity"][1, 1, 0] > 0.0  # pushed along x in proportion
    sim.reset(worlds=[2])
    np.testing.assert_array_equal(controls["force"][:, 1, 0].cpu().numpy(), [0.0, 1.0, 0.0])
    sim.reset()
    sim.set_control(force=force)
    sim.step(10)
    np.testing.assert_array_equal(sim.get_state()["position"], via_view["position"])


def test_non_finite_pose_written_through_a_view_freezes_only_its_world(torch_sim):
    torch, sim = torch_sim
    if th.current_arch() == "vulkan":
        pytest.skip(f"{th.current_arch()}: no tensor views")
    reference = th.Simulator(sim.scene, worlds=3)
    sim.state_tensors()["position"][1, 1, 0] = float("nan")
    sim.step(3)
    reference.step(3)
    np.testing.assert_array_equal(sim.world_status(), [0, th.FROZEN_POSE, 0])
    assert np.isnan(sim.get_state()["position"][1, 1, 0])
    for w in (0, 2):
        np.testing.assert_array_equal(sim.get_state()["position"][w], reference.get_state()["position"][w])


def test_a_view_that_misses_the_array_is_refused(torch_sim, monkeypatch):
    """Each view is checked when made: one over other memory (here a decoy array of the same
    shape standing in for a wrong address) raises, and the state is left as it was."""
    torch, sim = torch_sim
    if th.current_arch() == "vulkan":
        pytest.skip(f"{th.current_arch()}: no tensor views")
    from taichi_hydro import interop

    sim.step(3)
    before = sim.get_state()
    decoy = ti.ndarray(ti.math.vec3, (3, 2))
    right = interop.ndarray_address
    monkeypatch.setattr(interop, "ndarray_address", lambda arr: right(decoy))
    with pytest.raises(th.SceneError, match=r"does not read the array's memory"):
        sim.state_tensors()
    monkeypatch.setattr(interop, "ndarray_address", right)
    for name, value in sim.get_state().items():
        np.testing.assert_array_equal(value, before[name])
    views = sim.state_tensors()
    np.testing.assert_array_equal(views["velocity"].cpu().numpy(), before["velocity"].astype(np.float32))


def test_joint_views_and_tensor_controls_act_like_set_joint_control(arch):
    """joint_control_tensors() written in place acts as set_joint_control with the same values
    (bit for bit), and so does set_joint_control given a tensor; joint_state_tensors() is
    joint_state() after every step; reset writes the scene's targets into the views' rows."""
    torch = pytest.importorskip("torch")
    from test_joints import rotor

    scene_dict = {"body": [rotor(radius=0.1, mass=2.0)],
                  "joint": [{"name": "spin", "type": "revolute", "parent": "world", "child": "rotor", "position": [0, 0, 1.0],
                             "axis": [0, 0, 1], "actuator": {"type": "pd", "kp": 5.0, "kd": 0.5, "target": 0.2}}]}
    a, b, c = (th.Simulator(th.scene_from_dict(scene_dict), worlds=2) for _ in range(3))
    targets = np.array([[0.5], [-1.0]])
    a.set_joint_control(target=targets)
    b.set_joint_control(target=torch.tensor(targets, dtype=torch.float32))
    if th.current_arch() == "vulkan":
        with pytest.raises(th.SceneError, match="use get_state"):
            c.joint_control_tensors()
        return
    views = c.joint_control_tensors()
    views["target"][:, 0] = torch.tensor(targets[:, 0], dtype=views["target"].dtype)
    for sim in (a, b, c):
        sim.step(30)
    expected = a.joint_state()
    for sim in (b, c):
        for key, value in sim.joint_state().items():
            np.testing.assert_array_equal(value, expected[key])
    measured = c.joint_state_tensors()
    np.testing.assert_array_equal(measured["position"].cpu().numpy(), expected["position"].astype(np.float32))
    c.step(1)
    np.testing.assert_array_equal(measured["position"].cpu().numpy(), c.joint_state()["position"].astype(np.float32))
    c.reset(worlds=[1])
    np.testing.assert_allclose(views["target"][:, 0].cpu().numpy(), [0.5, 0.2], rtol=1e-7)
    copies = c.joint_state(as_torch=True)
    assert copies["position"].shape == (2, 1)
