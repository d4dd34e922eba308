"""The saved start states of the settled benchmark cases (bench/states.py), and the bench tools' shared plumbing."""

import dataclasses
import re
import shutil

import numpy as np
import pytest

import taichi_hydro as th
from bench import cases as registry
from bench import cli, run, states

SETTLED = [c for c in registry.DYNAMICS_CASES if c.settle]


def host_only(arch):
    if arch != "cpu":
        pytest.skip("host-side bench plumbing: checked on cpu")


@pytest.mark.parametrize("case", SETTLED, ids=lambda c: c.name)
def test_saved_state_belongs_to_its_case_and_is_at_rest(arch, case):
    """Every settled case has a committed state whose fingerprint matches the case's scene today
    (a scene change without remaking the file fails here), and every dynamic body in it moves
    slower than states.REST_SPEED (1 mm/s), read from the arrays, not from the file's notes."""
    host_only(arch)
    data = states.load(case)
    dynamic = [i for i, b in enumerate(case.scene().bodies) if b.type == "dynamic"]
    assert data["position"].shape == (1, len(case.scene().bodies), 3)
    assert np.linalg.norm(data["velocity"][0, dynamic], axis=-1).max() < states.REST_SPEED


def test_a_state_made_for_another_case_or_scene_is_refused(arch, tmp_path):
    """load() names the file and the case when the file is another case's, when the case's
    scene is not the one the file was made for, and when there is no file."""
    host_only(arch)
    pile, stack = registry.find_dynamics("pile_27_settled"), registry.find_dynamics("box_stack_held")
    with pytest.raises(th.SceneError, match=r"pile_27_settled\.npz.*'pile_27_settled', not 'box_stack_held'"):
        states.load(stack, states.path_of(pile))
    other_scene = dataclasses.replace(pile, scene=lambda: registry.pile(2))
    with pytest.raises(th.SceneError, match=r"pile_27_settled\.npz.*'pile_27_settled'.*another scene"):
        states.load(other_scene, states.path_of(pile))
    longer = dataclasses.replace(pile, settle=pile.settle + 1)
    with pytest.raises(th.SceneError, match="another scene or settle time"):
        states.load(longer, states.path_of(pile))
    with pytest.raises(th.SceneError, match=r"nope\.npz: no saved start state for case 'pile_27_settled'"):
        states.load(pile, tmp_path / "nope.npz")
    copy = tmp_path / "copy.npz"
    shutil.copy(states.path_of(pile), copy)
    assert states.load(pile, copy)["fingerprint"] == states.load(pile)["fingerprint"]


def test_every_method_is_timed_from_the_same_state(arch):
    """The dynamics runner's simulators for Gauss-Seidel and Newton, reset to the case's start
    as the runner resets them, hold the same state, the saved one (float32 on the device, the
    file holding float32 values: equal exactly), in every world."""
    host_only(arch)
    case = registry.find_dynamics("box_stack_held")
    saved = states.load(case)
    got = {}
    for method in ("gauss_seidel", "newton"):
        sim = th.Simulator(run.timed_scene(case, method=method), worlds=2)
        sim.reset(state=states.start_state(case, 2))
        got[method] = sim.get_state()
    for name in ("position", "orientation", "velocity", "angular_velocity"):
        np.testing.assert_array_equal(got["gauss_seidel"][name], got["newton"][name])
        np.testing.assert_array_equal(got["newton"][name], np.repeat(saved[name], 2, axis=0))


def test_method_ab_times_variants_over_the_same_interval(arch, tmp_path):
    """bench.method_ab (solver variants interleaved in one process): one row per variant, each
    over the whole interval from the case's start, its settings applied, and each ratio against
    the first variant; a setting that [solver] does not have is refused by name."""
    import json
    import subprocess
    import sys

    from conftest import ROOT

    host_only(arch)
    # The runtime's end writes the kernels this process compiled to the offline cache (Taichi
    # writes it only then), where the bench process reads them instead of compiling the step's
    # solver variants again.
    th.backend.restart()
    out = tmp_path / "ab.json"

    def ab(variants):
        return subprocess.run([sys.executable, "-m", "bench.method_ab", "--case", "pile_1", "--worlds", "2", "--steps", "30",
                               "--chunk", "10", "--variants", variants, "--out", str(out)], capture_output=True, text=True,
                              cwd=ROOT)

    # A setting that keeps the kernels (the iteration cap), so that no variant compiles more.
    r = ab("newton,newton:iterations=1,gauss_seidel")
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())
    assert [row["solver"] for row in rows] == ["newton/world", "newton/world", "gauss_seidel/world"]
    assert rows[0]["iterations_mean_p95_max"][2] > 1 and rows[1]["iterations_mean_p95_max"][2] == 1
    for row in rows:
        assert row["steps"] == 30 and row["diverged_worlds"] == 0
        assert all(t > 0 for t in row["stage_ms"].values()) and row["step_ms"] == sum(row["stage_ms"].values())
        assert row["this_solve_over_first"] == row["stage_ms"]["solve"] / rows[0]["stage_ms"]["solve"]
    assert rows[0]["this_solve_over_first"] == 1.0 and "newton:iterations=1: solve" in r.stdout
    # Newton's landing sphere converges in every step below its cap of 100 (max 2-3 iterations).
    assert rows[0]["capped_world_steps"] == 0
    assert all(0 <= row["capped_world_steps"] <= 2 * 30 for row in rows)
    bad = ab("newton,newton:sweeps=2")
    assert bad.returncode == 2 and "'sweeps' is not a [solver] setting" in bad.stderr


def test_capped_worlds_counts_solves_unconverged_at_the_cap():
    """A world counts when its solve used the whole cap and its residual is above the tolerance;
    one that met the tolerance at its last allowed iteration does not."""
    from bench.stage_record import capped_worlds
    stats = {"iterations": np.array([100, 100, 7, 100]), "residual": np.array([2e-3, 1e-7, 5e-3, 1e-6])}
    assert capped_worlds(stats, 100, 1e-6) == 1
    assert capped_worlds(stats, 7, 1e-6) == 2


def test_mean_p95_max_pools_the_arrays_of_every_step():
    from bench.stage_record import mean_p95_max

    mean, p95, top = mean_p95_max([np.array([1, 2]), np.array([3, 4, 10])])
    assert mean == 4.0 and p95 == pytest.approx(np.percentile([1, 2, 3, 4, 10], 95)) and top == 10
    assert isinstance(top, int)  # iteration counts stay integers in the JSON


@pytest.mark.parametrize("argv, fragment", [(["--case", "pile_2"], "'pile_2'"), (["--worlds", "0"], "'0'"),
                                            (["--arch", "gpu"], "'gpu'")])
def test_bench_options_refuse_bad_values_by_name(argv, fragment, capsys):
    """The bench tools' shared options (bench/cli.py) refuse an unknown case, a batch of no
    worlds and an unknown backend with argparse's error naming the option and the value."""
    p = cli.parser("bench.example", "doc")
    cli.add_case(p, "pile_27", 64)
    assert vars(p.parse_args([])) == {"arch": "cpu", "case": "pile_27", "worlds": 64}
    with pytest.raises(SystemExit):
        p.parse_args(argv)
    err = capsys.readouterr().err
    assert argv[0] in err and fragment in err


def test_replay_kernel_starts_two_checkouts_from_one_saved_state(arch, tmp_path):
    """bench.replay_kernel --save-state writes the batch's state after its steps, --state starts
    from it (so two code versions replay the same problem); a state of another case or world
    count is refused, naming the file. No steps are taken and a small kernel is replayed, so
    that the three processes compile little: the state given is the start moved by a
    different offset in each world, which only a state that is read and applied comes back as."""
    import subprocess
    import sys

    from conftest import ROOT

    from bench.replay_kernel import save_batch_state

    host_only(arch)
    start, given, again = tmp_path / "start.npz", tmp_path / "given.npz", tmp_path / "again.npz"

    def replay(*extra, worlds=2):
        return subprocess.run([sys.executable, "-m", "bench.replay_kernel", "--one", "1", "--case", "pile_1", "--worlds",
                               str(worlds), "--kernel", "integrate", "--launches", "2", "--restore", "arguments", "--steps",
                               "0", *extra], capture_output=True, text=True, cwd=ROOT)

    first = replay("--save-state", str(start))
    assert first.returncode == 0, first.stderr
    with np.load(start) as f:
        state = {k: f[k] for k in f.files if k != "case"}
        assert str(f["case"]) == "pile_1"
    assert state["position"].shape[0] == 2
    state["position"] = state["position"] + np.array([[[0.01, 0.0, 0.02]], [[-0.03, 0.01, 0.05]]])
    save_batch_state(str(given), "pile_1", state)
    read = replay("--state", str(given), "--save-state", str(again))
    assert read.returncode == 0, read.stderr
    with np.load(again) as f:
        for name, value in state.items():
            np.testing.assert_allclose(f[name], value, rtol=0, atol=1e-6 * (1 + np.abs(value).max()), err_msg=name)
    wrong = replay("--state", str(given), worlds=3)
    assert wrong.returncode != 0 and str(given) in wrong.stderr and "3 worlds" in wrong.stderr


def test_cpu_model_names_the_family_and_model_of_the_first_processor():
    """A bench row's device names the CPU's family and model (a VM may show only "AMD EPYC",
    and the family decides how Taichi's LLVM optimises: bench.machine.cpu_model)."""
    from bench.machine import cpu_model

    text = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC\n\n"
            "processor\t: 1\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: other\n")
    assert cpu_model(text) == "AMD EPYC (family 26, model 2)"
    assert cpu_model("processor\t: 0\nmodel name\t: Some CPU\n") == "Some CPU"


INTERVALS_S = {"pile_27_1s": 1.0, "pile_27_1_5s": 1.5, "pile_27_2s": 2.0, "pile_27_3s": 3.0}
"""The cases named for their simulated interval [s]."""


def test_a_case_named_for_its_interval_simulates_that_interval(arch):
    """A case whose name ends in its simulated interval times that many seconds of its scene:
    steps x dt, with the scene's own dt (the issue's targets are stated per interval; 1000 steps
    of the pile's 2 ms step once ran as "1 s"). A new case so named must be listed here."""
    host_only(arch)
    named = {c.name for c in registry.DYNAMICS_CASES if re.search(r"_\d+s$", c.name) and not c.settle}
    assert named == set(INTERVALS_S)
    for name, seconds in INTERVALS_S.items():
        case = registry.find_dynamics(name)
        dt = case.scene().dt
        assert case.steps * dt == pytest.approx(seconds, abs=dt / 2), (name, case.steps, dt)
