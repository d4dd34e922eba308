"""Batches, schedules, divergence isolation, contact-rich scenes and the `run` command."""

import json
import subprocess
import sys
import tomllib

import numpy as np
import pytest

import taichi_hydro as th

from conftest import ROOT, ball, ground, scene


def small_pile(n=4, solver=None):
    """n spheres dropped onto each other on a floor."""
    bodies = [ground()] + [ball(f"b{i}", radius=0.03, z=0.04 + 0.065 * i, resolution=0.02, position=[0.004 * i, -0.003 * i, 0.04 + 0.065 * i])
                           for i in range(n)]
    return scene(bodies, dt=2e-3, solver=solver)


def one_step_from_the_same_state(a, b, settle_steps=40):
    """Steps a until the spheres of small_pile have met, resets both to that state (a reset
    world starts cold: no warm start) and steps both once more: two solver settings compared
    on the same contact problem from the same initial guess."""
    a.step(settle_steps)
    state = a.get_state()
    for sim in (a, b):
        sim.reset(state=state)
        sim.step(1)
    assert a.solver_stats()["contacts"][0] > 10


def test_batch_equals_separate_runs(arch, tol):
    """A step of W worlds gives, world by world, what W one-world simulators give (each world
    starts from its own state). Polygons take pool slots through atomics, so a world's contacts
    may be visited in another order in a batch than alone: the results agree to float32
    round-off, which the falling pile amplifies chaotically (1e-9 m after 20 steps, 1e-6 to
    1e-5 m after 150, varying run to run). So compare over 40 steps (0.08 s, the lowest spheres
    already in contact) to tol.pos per metre, the float32 bound for this 0.3 m scene."""
    steps, W = 40, 3
    batch = th.Simulator(small_pile(), worlds=W)
    state = batch.get_state()
    rng = np.random.default_rng(7)
    state["velocity"][:, 1:] += rng.normal(0, 0.3, size=(W, 4, 3))
    batch.set_state(velocity=state["velocity"])
    batch.step(steps)
    assert batch.step_totals()["polygons"] > 0
    out = batch.get_state()
    for w in range(W):
        single = th.Simulator(small_pile())
        s = single.get_state()
        s["velocity"][0] = state["velocity"][w]
        single.set_state(velocity=s["velocity"])
        single.step(steps)
        np.testing.assert_allclose(single.get_state()["position"][0], out["position"][w], atol=tol.pos * 1.0)


@pytest.mark.parametrize("method", ["jacobi", "accelerated"])
def test_world_and_contact_schedules_agree(arch, method):
    """The one-thread-per-world and one-thread-per-contact schedules run the same (plain or
    accelerated) Jacobi iteration: after the spheres meet (step 40), one step of each from the
    same state agrees to float32 summation order (the falling pile is chaotic, so longer runs
    drift apart)."""
    solver = {"method": method, "iterations": 60, "tolerance": 1e-7}
    a = th.Simulator(small_pile(solver={**solver, "schedule": "world"}))
    b = th.Simulator(small_pile(solver={**solver, "schedule": "contact"}))
    one_step_from_the_same_state(a, b)
    np.testing.assert_allclose(a.get_state()["velocity"], b.get_state()["velocity"], atol=1e-5)
    assert abs(int(a.solver_stats()["iterations"][0]) - int(b.solver_stats()["iterations"][0])) <= 1


def test_a_diverging_world_is_flagged_and_isolated(arch):
    """World 1 gets an absurd velocity: it is marked diverged and frozen; world 0 and 2 step
    exactly as without it."""
    W = 3
    sim = th.Simulator(small_pile(), worlds=W)
    state = sim.get_state()
    state["velocity"][1, 2] = [0.0, 0.0, -5e4]
    sim.set_state(velocity=state["velocity"])
    sim.step(60)
    status = sim.world_status()
    assert status.tolist() == [0, 1, 0]
    out = sim.get_state()
    assert np.all(np.isfinite(out["position"]))
    ref = th.Simulator(small_pile())
    ref.step(60)
    np.testing.assert_allclose(out["position"][0], ref.get_state()["position"][0], atol=1e-6)
    np.testing.assert_allclose(out["position"][2], ref.get_state()["position"][0], atol=1e-6)


@pytest.mark.launches(12_500)
def test_pile_settles_without_nan_or_tunnelling(arch):
    """The bundled 27-sphere pile settles in its bin: no NaN, no diverged world, every sphere
    above the floor (centre above r minus the compliance depth) and inside the walls."""
    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "pile.toml"))
    sim.step(400)
    s = sim.get_state()
    p = s["position"][0, 5:]
    assert (sim.world_status() == 0).all() and np.all(np.isfinite(p))
    assert p[:, 2].min() > 0.02 - 0.005
    assert np.abs(p[:, :2]).max() < 0.09 - 0.02 + 0.005
    speed = np.linalg.norm(s["velocity"][0, 5:], axis=1).max()
    print(f"pile after 0.8 s: lowest centre {p[:, 2].min():.4f} m, fastest sphere {speed:.3f} m/s, "
          f"{sim.step_totals()['polygons'] / sim.step_totals()['steps']:.0f} polygons/step")
    assert speed < 0.5


def test_a_collision_filter_lifts_a_rigid_rigid_contact(arch):
    """A rigid stone touching a rigid floor rests on it (through a compliant twin,
    tests/test_rigid_contact.py); listed with the floor in a collision filter, it falls
    through as in free fall: semi-implicit Euler from rest gives z_n = z_0 - g dt^2 n (n + 1) / 2."""
    rigid_ball = {"name": "stone", "mass": 1.0, "position": [0, 0, 0.05], "shape": {"type": "sphere", "radius": 0.05}}
    sim = th.Simulator(scene([ground(), rigid_ball]))
    sim.step(100)
    assert abs(sim.get_state()["position"][0, 1, 2] - 0.05) < 1e-4
    data = {"body": [ground(), rigid_ball], "collision_filter": [{"bodies": ["ground", "stone"]}]}
    sim = th.Simulator(th.scene_from_dict(data))
    sim.step(100)
    assert sim.get_state()["position"][0, 1, 2] == pytest.approx(0.05 - 9.81 * 1e-6 * 100 * 101 / 2, abs=1e-6)


def test_control_forces_act_on_dynamic_bodies(arch):
    """A constant force F on a free body: v = F/m t (no gravity, no contact)."""
    sim = th.Simulator(scene([ball(z=5.0)], dt=1e-3, gravity=[0, 0, 0]))
    force = np.zeros((1, 1, 3))
    force[0, 0] = [1.0, 0.0, 0.0]
    sim.set_control(force=force)
    sim.step(100)
    assert sim.get_state()["velocity"][0, 0, 0] == pytest.approx(1.0 / 0.5 * 0.1, rel=1e-5)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "taichi_hydro.cli", *args], capture_output=True, text=True, cwd=ROOT)


def test_cli_run_json_and_npz(arch, tmp_path):
    out = tmp_path / "drop.npz"
    r = run_cli("run", "scenes/ball_drop.toml", "--arch", arch, "--steps", "50", "--worlds", "2", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    for key in ("steps", "wall_s", "world_steps_per_s", "polygons_mean"):
        assert key in summary
    timing = summary["timing"]
    assert set(timing) == {"setup_s", "first_frame_s", "first_step_s", "step_s", "render_s", "sample_s", "plot_s", "write_s",
                           "total_s"}
    assert summary["wall_s"] == pytest.approx(timing["first_step_s"] + timing["step_s"])
    assert 0 < summary["wall_s"] < timing["total_s"] and summary["frames"] == 0 and summary["outputs"] == {"out": str(out)}
    ball_state = summary["bodies"]["ball"]
    assert set(ball_state) == {"position", "orientation", "velocity", "angular_velocity"}
    z = 0.25 - 9.81 * 1e-3**2 * 50 * 51 / 2
    assert ball_state["position"][2] == pytest.approx(z, abs=1e-5)
    data = np.load(out)
    assert data["position"].shape == (51, 2, 2, 3) and data["orientation"].shape == (51, 2, 2, 4)
    assert list(data["body_names"]) == ["ground", "ball"] and data["time"].shape == (51,)


def test_quick_compile_steps_the_same_physics(arch):
    """run --quick-compile (Taichi's IR optimisations off: a faster cold compile) gives the same
    motion as the default: the ball of ball_drop.toml falls 0.2 m, meets the floor at about
    0.2 s and bounces (400 steps of 1 ms). Both runs do the same float32 arithmetic up to the
    order the IR passes leave, so they may differ by round-off only: measured 1.5e-8 m and
    2.4e-7 m/s; bounds 1e-6 m (about 40 ulps of the ball's 0.19 m height) and 1e-5 m/s. A pass
    that changed what a kernel computes would show as a different bounce."""
    if arch != "cpu":
        pytest.skip("the compiler setting is backend-independent; its compile costs seconds")
    runs = {}
    for flag in ([], ["--quick-compile"]):
        r = run_cli("run", "scenes/ball_drop.toml", "--arch", arch, "--steps", "400", "--json", *flag)
        assert r.returncode == 0, r.stderr
        runs[bool(flag)] = json.loads(r.stdout)
    assert runs[True]["quick_compile"] and not runs[False]["quick_compile"]
    slow, quick = runs[False]["bodies"]["ball"], runs[True]["bodies"]["ball"]
    assert slow["position"][2] < 0.2 and runs[False]["polygons_mean"] > 0  # it fell and touched the floor
    np.testing.assert_allclose(quick["position"], slow["position"], atol=1e-6)
    np.testing.assert_allclose(quick["velocity"], slow["velocity"], atol=1e-5)
    assert quick["orientation"] == pytest.approx(slow["orientation"], abs=1e-5)
    assert runs[True]["polygons_mean"] == runs[False]["polygons_mean"]


def test_init_refuses_a_non_bool_optimize(arch):
    """th.init(optimize=...) takes True or False; anything else is a BackendError naming the
    value, raised before the running runtime is touched (the suite's Simulators stay valid)."""
    if arch != "cpu":
        pytest.skip("host-side argument check only")
    generation = th.backend.generation()
    with pytest.raises(th.BackendError, match="optimize must be True or False, got 'no'"):
        th.init(arch, optimize="no")
    assert th.backend.generation() == generation


def test_run_summary_block(arch):
    """The printed run summary is one block: where the wall time went, the work per step, the
    files written, frozen worlds; body poses only in the JSON (27 lines of them for the pile)."""
    if arch != "cpu":
        pytest.skip("host-side formatting only")
    from taichi_hydro.cli import summary_block

    timing = {"setup_s": 3.21, "first_frame_s": 20.14, "first_step_s": 8.03, "step_s": 6.02, "render_s": 5.04, "sample_s": 2.05,
              "plot_s": 3.06, "write_s": 3.07, "total_s": 50.62}
    summary = {"scene": "scenes/pile.toml", "arch": "cpu", "worlds": 2, "steps": 750, "time": 1.5, "wall_s": 14.05,
               "world_steps_per_s": 106.8, "polygons_mean": 120.31, "contacts_mean": 118.72, "solver_iterations_mean": 79.94,
               "diverged_worlds": 1, "frozen_worlds": {"1": "non-finite velocity"},
               "bodies": {"ball_00": {"position": [0.0, 0.0, 0.02]}}, "timing": timing, "frames": 46,
               "outputs": {"summary": "out/s.json", "plot": "out/p.png", "record": "out/a.gif"}}
    lines = summary_block(summary).splitlines()
    assert lines[0] == "scenes/pile.toml on cpu: 2 worlds, 750 steps of 2 ms = 1.5 s simulated"
    text = "\n".join(lines)
    for part in ("50.6 s in all", "setup 3.2 s", "first frame 20.1 s", "first step 8.0 s", "stepping 6.0 s",
                 "rendering 5.0 s (46 frames)", "sampling 2.0 s", "plot 3.1 s", "writing 3.1 s",
                 "124.4 steps/s, 248.8 world-steps/s after the first step (106.8 world-steps/s with it)",
                 "120.3 polygons, 118.7 contacts, 79.9 solver iterations", "1 diverged", "world 1 frozen: non-finite velocity",
                 "summary written to out/s.json", "plot written to out/p.png", "46 frame(s) written to out/a.gif"):
        assert part in text, part
    assert "ball_00" not in text and len(lines) == 10
    no_outputs = summary_block({**summary, "frames": 0, "outputs": {}, "frozen_worlds": {}})
    assert "first samples 20.1 s" in no_outputs and "rendering" not in no_outputs and "plot" not in no_outputs


def test_cli_run_rejects_bad_arguments(arch):
    r = run_cli("run", "scenes/ball_drop.toml", "--arch", arch, "--steps", "-3")
    assert r.returncode == 2 and "--steps: must be in [0, 2147483647], got -3" in r.stderr and "Traceback" not in r.stderr


def test_launch_budget_refuses_before_running(arch, monkeypatch):
    """On a driver with a launch budget (lavapipe), a step() that would pass it raises
    LaunchBudgetError up front and leaves the state untouched."""
    from taichi_hydro import backend

    sim = th.Simulator(small_pile(n=2))
    sim.step(2)
    before = sim.get_state()
    monkeypatch.setitem(backend._state, "launch_budget", backend.launches_made() + 10)
    with pytest.raises(th.LaunchBudgetError, match="lavapipe"):
        sim.step(5)
    after = sim.get_state()
    for key in before:
        np.testing.assert_array_equal(after[key], before[key])
    assert sim.step_count == 2


def test_a_new_runtime_refuses_old_simulators(arch):
    """init() with other arguments starts a new Taichi runtime: a Simulator made before refuses
    every call with a clear error (its device arrays are gone) instead of crashing, and one made
    after the runtime is back reproduces, bit for bit (deterministic mode), what a Simulator
    started from the same saved state did before."""
    from taichi_hydro import backend

    if arch == "vulkan":
        pytest.skip("switches the runtime to f64, which Vulkan lacks")
    pile = small_pile(n=2, solver={"deterministic": True})
    old = th.Simulator(pile)
    old.step(30)
    saved = old.get_state()

    def five_steps_from_saved():
        sim = th.Simulator(pile)
        sim.set_state(**saved)
        sim.step(5)
        assert sim.solver_stats()["contacts"][0] > 0
        return sim.get_state()

    expected = five_steps_from_saved()
    generation = backend.generation()
    try:
        th.init(arch, precision="f64")
        assert backend.generation() == generation + 1 and backend.launches_made() == 0
        for call in (old.step, old.get_state, old.solver_stats, lambda: old.set_state(**saved)):
            with pytest.raises(th.BackendError, match="made before Taichi was restarted"):
                call()
    finally:
        th.init(arch)
    got = five_steps_from_saved()
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


def test_one_cpu_thread_serialises_the_loops_and_steps_the_same(arch, tmp_path):
    """One world on cpu runs on one thread with every kernel loop serialised (backend.SERIAL_LOOPS:
    no thread-pool dispatch per launch); --cpu-threads 2 uses the pool. In deterministic mode
    ([solver] deterministic = true: sums in a fixed order) the two step the box stack alike over
    300 steps up to round-off: the compiler may vectorise a serial loop's float32 arithmetic
    differently (fast math), nothing else changes. Positions within 1e-6 m (as in
    test_quick_compile_steps_the_same_physics). Velocities: the round-off moves where each
    run's solve stops, so each is within the solver's error of the step's solution in the
    stopping test's measure |dv| + reach |dw|, at most e = 50 tol for any method
    (Gauss-Seidel's bound, test_rigid_contact's module docstring; Newton, the default, stops
    within about one tol: bench.solver_accuracy), and the two within 2 e of each other.
    Measured with Newton 2e-8 m apart, 8.5e-7 m/s and 9.2e-6 rad/s (Gauss-Seidel: 3.9e-8 m,
    2.1e-6 m/s and 2.2e-5 rad/s; 2026-11-26, this AMD EPYC; an earlier machine gave 4.4e-7 m/s
    and 2.8e-6 rad/s: the resting stack's slow rocking carries the round-off, which depends
    on the host's code generation). The polygon counts are not compared: the boxes rest face
    on face, where a few nm decide whether the two meshes' tets cut sliver polygons (measured
    83.8 against 82.0 per step with Newton). The summary says which ran; --cpu-threads on
    another backend is refused by name."""
    if arch != "cpu":
        pytest.skip("the cpu backend's threads")
    text = (ROOT / "scenes" / "box_stack.toml").read_text()
    assert "[solver]" not in text
    scene = tmp_path / "box_stack_deterministic.toml"
    scene.write_text(text + "\n[solver]\ndeterministic = true\n")
    runs = {}
    for flag in ([], ["--cpu-threads", "2"]):
        r = run_cli("run", str(scene), "--arch", "cpu", "--steps", "300", "--json", *flag)
        assert r.returncode == 0, r.stderr
        runs[len(flag)] = json.loads(r.stdout)
    serial, pooled = runs[0], runs[2]
    assert serial["cpu_threads"] == 1 and pooled["cpu_threads"] == 2
    assert serial["polygons_mean"] > 0
    tol = th.SolverSettings().tolerance  # [m/s]
    reach = 0.5 * float(np.linalg.norm(tomllib.loads(text)["body"][1]["shape"]["size"]))  # both boxes alike [m]
    for name, body in pooled["bodies"].items():
        np.testing.assert_allclose(serial["bodies"][name]["position"], body["position"], atol=1e-6)
        dv = np.linalg.norm(np.subtract(serial["bodies"][name]["velocity"], body["velocity"]))
        dw = np.linalg.norm(np.subtract(serial["bodies"][name]["angular_velocity"], body["angular_velocity"]))
        assert dv + reach * dw <= 2 * 50.0 * tol, f"{name}: |dv| {dv:.2e} m/s, |dw| {dw:.2e} rad/s"
    assert pooled["polygons_mean"] > 0
    for threads, expected in ((1, True), (2, False)):
        probe = subprocess.run([sys.executable, "-c", "import taichi_hydro as th; "
                                f"th.init('cpu', cpu_threads={threads}); print(th.backend.SERIAL_LOOPS)"],
                               capture_output=True, text=True, cwd=ROOT)
        assert probe.stdout.strip() == str(expected), probe.stderr
    r = run_cli("run", str(scene), "--arch", "vulkan", "--cpu-threads", "2", "--steps", "1")
    assert r.returncode != 0 and "--cpu-threads 2 sets threads of the cpu backend; this run uses --arch vulkan" in r.stderr
