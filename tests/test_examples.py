"""The example scripts run end to end and do what they say."""

import re
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "examples"))


@pytest.mark.parametrize("views", [False, True], ids=["numpy", "torch_views"])
def test_push_box_rl_loop_resets_finished_worlds(arch, capsys, views):
    import push_box_rl

    if views:
        torch = pytest.importorskip("torch")
        if arch == "cuda" and not torch.cuda.is_available():
            pytest.skip("torch_views: torch has no CUDA here")
        if arch == "vulkan":
            pytest.skip("torch_views: no zero-copy tensor views on vulkan")
    # 8 worlds, 60 control steps of 10 ms: a box starting at most 0.1 m behind x = 0 under at
    # most 3 N reaches x = 0.3 m well within 0.6 s, so every world finishes at least once.
    assert push_box_rl.main(["--arch", arch, "--worlds", "8", "--iterations", "60"] + ["--torch"] * views) == 0
    out = capsys.readouterr().out
    finished, reached = map(int, re.search(r"episodes finished: (\d+), reached the target: (\d+)", out).groups())
    assert finished >= 8 and reached == finished
    assert "diverged worlds: 0" in out


def test_spatula_slip_writes_its_figures_and_series(arch, tmp_path):
    """examples/spatula_slip.py end to end on a short schedule (0.6 s, all at 16 N): the figure,
    the JSON series and a steady pitch (the grasp holds; the long runs are in test_grasp)."""
    if arch != "cpu":
        pytest.skip("a 600-contact grasp for 800 steps: cpu only (its kernels run on vulkan in test_tactile)")
    import json

    import spatula_slip

    out = tmp_path / "spatula"
    args = ["--arch", arch, "--periods", "0.1", "--resolutions", "", "--no-point", "--no-gif", "--no-tactile", "--no-onset"]
    assert spatula_slip.main(args + ["--out", str(out)]) == 0
    record = json.loads((out / "spatula_series.json").read_text())
    assert (out / "spatula_fig10.png").stat().st_size > 10_000
    (phase,) = record["summary"]["phases"]
    assert phase["force_N"] == 16.0 and abs(phase["change_deg"]) < 0.01
    assert len(record["runs"]["main"]["capacity"]) == len(record["runs"]["main"]["gravity_torque"]) > 5
