"""Pools, backends and the command line."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import taichi_hydro as th
from taichi_hydro.collision import Capacities

from conftest import ROOT, ball, ground, scene

PILE = [ground()] + [ball(f"b{i}", radius=0.03, z=0.028 + 0.055 * (i // 4), resolution=0.015,
                          position=[0.056 * (i % 2) - 0.028, 0.056 * ((i // 2) % 2) - 0.028, 0.028 + 0.055 * (i // 4)]) for i in range(8)]


def summaries(sim, world=0):
    return [s.summary() for s in sim.contact_surfaces(world)]


def test_pools_grow_on_overflow_and_lose_nothing(arch):
    """Capacities of one row overflow every pool: the pass is redone with grown pools and gives
    exactly the result of generous pools."""
    reference = th.Simulator(scene(PILE), worlds=3)
    tiny = th.Simulator(scene(PILE), worlds=3, capacities=Capacities(1, 1))
    for w in range(3):
        assert summaries(tiny, w) == summaries(reference, w)
    assert tiny.collision.passes > reference.collision.passes
    assert all(c >= n for c, n in zip(tiny.collision.caps.as_tuple(), tiny.collision.last_counts[:2]))
    assert sum(s["faces"] for s in summaries(reference)) > 20


def test_graph_and_eager_launches_agree(arch):
    """The compute-graph dispatch and kernel-by-kernel dispatch give the same pool."""
    graph = th.Simulator(scene(PILE), worlds=2, graph=True)
    eager = th.Simulator(scene(PILE), worlds=2, graph=False)
    for w in range(2):
        assert summaries(graph, w) == summaries(eager, w)


def test_pool_limit_raises_naming_the_capacity(arch):
    with pytest.raises(th.CapacityError, match="needs .* rows, above max_capacity=64"):
        th.Simulator(scene(PILE), worlds=2, capacities=Capacities(1, 1), max_capacity=64).contact_surfaces()


CROSS_ARCH_SCRIPT = textwrap.dedent("""
    import json, sys
    import taichi_hydro as th
    th.init(sys.argv[1])
    out = {}
    for path in sys.argv[2:]:
        out[path] = [s.summary() for s in th.Simulator(th.load_scene(path)).contact_surfaces()]
    print(json.dumps(out))
""")


def test_cpu_and_vulkan_agree(arch, tol):
    """The bundled scenes on cpu and vulkan (the other backend runs in a subprocess)."""
    if arch != "cpu":
        pytest.skip("compared from the cpu run")
    probe = subprocess.run([sys.executable, "-c", "import taichi_hydro as th; th.init('vulkan')"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"vulkan unavailable: {probe.stderr.strip().splitlines()[-1:]}")
    paths = [str(p) for p in sorted((ROOT / "scenes").glob("*.toml"))]
    run = subprocess.run([sys.executable, "-c", CROSS_ARCH_SCRIPT, "vulkan", *paths], capture_output=True, text=True, check=True)
    other = json.loads(run.stdout.strip().splitlines()[-1])
    for path in paths:
        ours = summaries(th.Simulator(th.load_scene(path)))
        theirs = other[path]
        assert [s["faces"] for s in ours] == [s["faces"] for s in theirs], path
        for a, b in zip(ours, theirs):
            scale = max(abs(x) for x in a["force"])
            # A body placed exactly touching (box_on_incline) has a depth of float32 round-off,
            # ~1e-8 m at 4 cm: with E/H = 2.5e8 Pa/m over 0.03 m^2 that is ~0.1 N of noise.
            np.testing.assert_allclose(a["force"], b["force"], rtol=tol.rel, atol=tol.rel * scale + 0.1)
            assert a["area"] == pytest.approx(b["area"], rel=tol.rel)


def cli(*args):
    # Compile-time SyntaxWarnings of a dependency installed without byte-code (Python 3.12,
    # pip --no-compile) are not ours to test: they would add lines to stderr.
    env = {**os.environ, "PYTHONWARNINGS": "ignore::SyntaxWarning"}
    return subprocess.run([sys.executable, "-m", "taichi_hydro.cli", *args], capture_output=True, text=True, cwd=ROOT, env=env)


def test_cli_contact_json(arch, tol):
    r = cli("contact", "scenes/sphere_on_plane.toml", "--arch", arch, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["arch"] == arch
    (s,) = out["surfaces"]
    assert set(s) == {"body_a", "body_b", "faces", "area", "force", "centroid", "max_pressure", "mean_pressure"}
    assert (s["body_a"], s["body_b"], s["faces"]) == ("ground", "ball", 28)
    assert s["force"][2] == pytest.approx(5.83072569869293, rel=tol.rel)  # Drake's value on this mesh


@pytest.mark.parametrize("args, fragment", [
    (("contact", "scenes/missing.toml"), "scene file not found"),
    (("contact", "BAD"), "key 'radiu': is not a parameter of a sphere"),
])
def test_cli_errors_are_one_line_without_traceback(arch, tmp_path, args, fragment):
    if args[1] == "BAD":
        bad = tmp_path / "bad.toml"
        bad.write_text('[[body]]\nname = "b"\nmass = 1.0\n[body.shape]\ntype = "sphere"\nradiu = 0.1\n')
        args = ("contact", str(bad))
    r = cli(*args, "--arch", arch)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and fragment in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_cli_bench_forwards_to_the_runner(arch, tmp_path):
    out = tmp_path / "bench.json"
    r = cli("bench", "dynamics", "--arch", arch, "--cases", "pile_1", "--worlds", "2", "--quick", "--out", str(out))
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert "meta" in rows[0] and rows[0]["meta"]["command"].endswith(str(out))
    (row,) = rows[1:]
    assert (row["case"], row["arch"], row["worlds"], row["diverged_worlds"]) == ("pile_1", arch, 2, 0)
    assert row["world_steps_per_s"] > 0 and row["device_bytes_per_world"] > 0
    assert list(row["stage_ms"]) == ["collide", "assemble", "solve", "integrate"]  # over the timed interval
    assert all(t > 0 for t in row["stage_ms"].values()) and abs(sum(row["stage_share"].values()) - 1) < 1e-9
    bad = cli("bench", "dynamics", "--cases", "nope")
    assert bad.returncode == 2 and "unknown case(s) ['nope']" in bad.stderr
