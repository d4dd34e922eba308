"""History (samples over time), energies, pair_forces and the run plot."""

import subprocess
import sys

import imageio.v2 as imageio
import numpy as np
import pytest

import taichi_hydro as th
from taichi_hydro.history import History, energies

from conftest import ROOT, ball, ground, scene

G = 9.81


@pytest.fixture
def arch(arch):
    """History, energies and the plot are host-side arithmetic over get_state, pair_forces and
    solver_stats, whose device side the rest of the suite covers on every backend: these run in
    the cpu session only (lavapipe's launch budget)."""
    if arch != "cpu":
        pytest.skip("host-side: checked in the cpu run")
    return arch


def test_energies_of_known_states(arch):
    """A box lifted by h and spinning about its z axis: PE = m g z_cm, KE = 1/2 I_zz w^2 with
    I_zz = m (a^2 + b^2) / 12, plus 1/2 m v^2 of its translation; a world with twice the mass
    has twice both."""
    m, (a, b, c) = 0.4, (0.2, 0.1, 0.05)
    box = {"name": "box", "mass": m, "position": [0.0, 0.0, 1.0], "shape": {"type": "box", "size": [a, b, c]},
           "contact": {"modulus": 1e6}}
    sim = th.Simulator(scene([ground(), box]), worlds=2)
    state = sim.get_state()
    state["velocity"][:, 1] = [0.3, 0.0, -0.4]
    state["angular_velocity"][:, 1] = [0.0, 0.0, 5.0]
    sim.set_state(velocity=state["velocity"], angular_velocity=state["angular_velocity"])
    sim.set_parameters(mass=np.array([[np.nan, m], [np.nan, 2 * m]]))
    kinetic, potential = energies(sim)
    expected_k = 0.5 * m * 0.25 + 0.5 * m * (a * a + b * b) / 12 * 25.0
    np.testing.assert_allclose(kinetic, [expected_k, 2 * expected_k], rtol=1e-6)
    np.testing.assert_allclose(potential, [m * G * 1.0, 2 * m * G * 1.0], rtol=1e-6)


def test_free_fall_keeps_the_energy_semi_implicit_euler_gives(arch):
    """Free fall, n steps of semi-implicit Euler: v_n = -g n dt, z_n = z0 - g dt^2 n (n + 1) / 2,
    so KE + PE changes by exactly -m g^2 dt^2 n / 2 (the method's known drift)."""
    dt, n, m = 1e-3, 200, 0.5
    sim = th.Simulator(scene([ball(z=5.0, mass=m)], dt=dt))
    history = History(sim)
    history.record()
    for _ in range(4):
        sim.step(n // 4)
        history.record()
    a = history.arrays()
    total = a["kinetic"][:, 0] + a["potential"][:, 0]
    steps = np.arange(5) * (n // 4)
    np.testing.assert_allclose(total - total[0], -m * G * G * dt * dt * steps / 2, atol=2e-6 * m * G * 5.0)
    assert a["time"].tolist() == pytest.approx(steps * dt)


@pytest.mark.launches(6_000)
def test_pair_forces_of_a_resting_ball_carry_its_weight(arch):
    m = 0.5
    sim = th.Simulator(scene([ground(), ball(mass=m, contact={"dissipation": 200.0})], dt=1e-3), worlds=2)
    sim.set_parameters(mass=np.array([[np.nan, m], [np.nan, 2 * m]]))
    sim.step(300)
    names, forces = sim.pair_forces()
    assert names == [("ground", "ball")] and forces.shape == (2, 1, 3)
    np.testing.assert_allclose(forces[:, 0, 2], [m * G, 2 * m * G], rtol=1e-3)
    np.testing.assert_array_equal(sim.contact_forces(world=1)[("ground", "ball")], forces[1, 0])


def test_the_figure_has_its_four_panels_and_the_plot_is_a_png(arch, tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    sim = th.Simulator(scene([ground(), ball()], dt=1e-3), worlds=3)
    history = History(sim)
    with pytest.raises(th.HydroError, match="record at least two"):
        history.figure()
    for _ in range(5):
        sim.step(20)
        history.record()
    fig = history.figure()
    assert len(fig.axes) == 4 and "contact force" in fig.axes[0].get_ylabel() and "energy" in fig.axes[3].get_ylabel()
    plt.close(fig)
    image = imageio.imread(history.plot(tmp_path / "run.png"))
    assert image.ndim == 3 and image.shape[0] > 500 and image.std() > 10


def test_cli_run_writes_the_plot_and_the_animation_in_one_run(arch, tmp_path):
    """run --plot --record: one simulation, sampled for the plot and rendered at 25 frames per
    simulated second (300 steps of 1 ms: frames at steps 0, 40, ..., 280 and the last, 9)."""
    pytest.importorskip("matplotlib")
    from taichi_hydro.vulkan_info import vulkan_devices

    out, gif = tmp_path / "plots" / "drop.png", tmp_path / "drop.gif"
    command = [sys.executable, "-m", "taichi_hydro.cli", "run", "scenes/ball_drop.toml", "--steps", "300", "--plot", str(out)]
    if vulkan_devices():
        command += ["--record", str(gif)]
    r = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert imageio.imread(out).ndim == 3 and "plot written to" in r.stdout
    if vulkan_devices():
        assert len(imageio.mimread(gif)) == 9 and "9 frame(s) written to" in r.stdout
    bad = subprocess.run([sys.executable, "-m", "taichi_hydro.cli", "run", "scenes/ball_drop.toml", "--plot", "x.jpg"],
                         capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "--plot" in bad.stderr and "Traceback" not in bad.stderr


def test_the_plot_process_draws_what_history_plot_draws_and_reports_errors(arch, tmp_path):
    """PlotProcess (the run's plot on another core): the same pixels as History.plot from the
    same samples; a failure in the child comes back as HydroError with the child's message; a
    process closed without a plot ends."""
    pytest.importorskip("matplotlib")
    from taichi_hydro.plot_process import PlotProcess

    sim = th.Simulator(scene([ground(), ball()], dt=1e-3), worlds=2)
    history = History(sim)
    for _ in range(4):
        sim.step(20)
        history.record()
    here = history.plot(tmp_path / "here.png")
    drawing, failing, idle = PlotProcess(), PlotProcess(), PlotProcess()
    drawing.submit(tmp_path / "child.png", history.arrays(), history.pairs, sim.scene.source)
    one_sample = {k: v[:1] for k, v in history.arrays().items()}
    failing.submit(tmp_path / "bad.png", one_sample, history.pairs, sim.scene.source)
    assert drawing.result() == tmp_path / "child.png"
    np.testing.assert_array_equal(imageio.imread(tmp_path / "child.png"), imageio.imread(here))
    with pytest.raises(th.HydroError, match="1 sample"):
        failing.result()
    assert not (tmp_path / "bad.png").exists()
    idle.close()
    assert idle._process.exitcode == 0
