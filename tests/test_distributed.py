"""taichi_hydro.distributed: a batch sharded over Ray actors (ShardedSimulator), its layout,
resources, faults and command line.

Tolerances: none. In deterministic mode a world's result does not depend on the batch it is
stepped in (test_deterministic.py), so K shards give, bit for bit, what one Simulator of all the
worlds gives: results are compared with np.array_equal.

These tests run in the cpu pass only. The shards start their own Taichi runtimes (on the cpu
backend) in Ray worker processes, and every other check here is host-side. One local Ray
instance (num_cpus=2, no network beyond this machine) serves the module; each shard asks for
half a CPU so that the simulators of the module fit in it together."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import numpy as np
import pytest

import taichi_hydro as th
from taichi_hydro.distributed import FaultRecord, Layout, ShardedSimulator, Timeouts, shard_ranges
from taichi_hydro.distributed.cluster import connect, shard_resources
from taichi_hydro.state import STATE_FIELDS

from test_simulation import small_pile

ROOT = Path(__file__).resolve().parents[1]
W = 3  # worlds: shards of 2 and 1 worlds with K = 2
CPUS = 0.5  # per shard
# Shards run Taichi's default thread count, so they read the kernels this process compiled from
# the offline cache (its key includes the thread count) instead of compiling them again.


@pytest.fixture(autouse=True)
def cpu_only(arch):
    if arch != "cpu":
        pytest.skip("distributed tests run in the cpu pass only: shards start their own cpu Taichi runtimes, the rest is "
                    "host-side")


@pytest.fixture(scope="module")
def cluster(arch):
    if arch != "cpu":
        pytest.skip("distributed tests run in the cpu pass only")
    pytest.importorskip("ray", reason="ray is not installed: pip install 'taichi-hydro[distributed]'")
    ray = connect(num_cpus=2, include_dashboard=False, object_store_memory=100 * 2**20, log_to_driver=False)
    yield ray
    ray.shutdown()


def pile():
    """Two compliant spheres dropped onto a floor (they land from step ~20) and, beside them, a
    link on a PD-actuated revolute joint: contacts and joints in one Newton solve,
    deterministic mode."""
    base = small_pile(n=2, solver={"deterministic": True})
    arm = th.scene_from_dict({"body": [{"name": "arm", "mass": 1.0, "position": [1.15, 0.0, 0.5],
                                        "shape": {"type": "box", "size": [0.3, 0.04, 0.04]}}],
                              "joint": [{"name": "hinge", "type": "revolute", "parent": "world", "child": "arm",
                                         "position": [1.0, 0.0, 0.5], "axis": [0.0, 1.0, 0.0],
                                         "actuator": {"type": "pd", "kp": 50.0, "kd": 1.0}}]})
    return dataclasses.replace(base, bodies=base.bodies + arm.bodies, joints=arm.joints,
                               collision_filters=(frozenset({"ground", "arm"}),))  # both rigid, and apart


B = 4  # floor, two spheres, the arm
FORCE = np.zeros((W, B, 3))
FORCE[1, 2] = [0.3, 0.0, 0.0]  # on the upper sphere of world 1
TARGETS = np.array([[0.1], [-0.2], [0.3]])  # the arm's PD target in each world [rad]


def randomise(sim):
    return sim.sample_parameters(5, mass=(0.8, 1.2), friction=(0.2, 0.6), gravity_z=(-10.0, -9.6))


def drive(sim):
    """The same calls on a Simulator or a ShardedSimulator: sampled parameters, perturbed
    velocities, a force in world 1, 20 steps, a reset of world 2 with its own velocities, 20
    steps. Returns the sampled parameters."""
    values = randomise(sim)
    state = sim.get_state()
    state["velocity"][:, 1:3] += np.random.default_rng(7).normal(0.0, 0.3, size=(W, 2, 3))
    sim.set_state(velocity=state["velocity"])
    sim.set_control(force=FORCE)
    sim.set_joint_control(target=TARGETS)
    sim.step(20)
    velocity = np.zeros((1, B, 3))
    velocity[0, 1:3] = [0.1, 0.0, -0.2]
    sim.reset(worlds=[2], state={"velocity": velocity})
    sim.step(20)
    return values


def outcome(sim) -> dict:
    names, forces = sim.pair_forces()
    return {**sim.get_state(), **{f"stats_{k}": v for k, v in sim.solver_stats().items()},
            **{f"joint_{k}": v for k, v in {**sim.joint_state(), **sim.joint_forces()}.items()},
            "status": sim.world_status(), "world_steps": sim.world_steps(), "pair_forces": forces,
            "totals": np.array(list(sim.step_totals().values())), "pairs": np.array(names),
            **{f"param_{k}": v for k, v in sim.parameters().items()}}


@pytest.fixture(scope="module")
def reference(cluster):
    """One Simulator of all the worlds, driven like the shards: its sampled parameters, its
    outcome and world 2's contact forces. The runtime is then restarted, which writes the
    kernels it compiled to the offline cache, so that the shards (started next) read them
    instead of each compiling them again (a clean checkout starts with an empty cache)."""
    sim = th.Simulator(pile(), worlds=W)
    values = drive(sim)
    result = values, outcome(sim), sim.contact_forces(world=2)
    th.backend.restart()
    return result


@pytest.fixture(scope="module")
def sharded(cluster, reference):
    """K = 1 (restarts a shard that dies) and K = 2 (raises), both driven like the reference."""
    sims = {1: ShardedSimulator(pile(), worlds=W, shards=1, cpus_per_shard=CPUS, cpu_threads=None, on_fault="restart"),
            2: ShardedSimulator(pile(), worlds=W, shards=2, cpus_per_shard=CPUS, cpu_threads=None)}
    values = {k: drive(sim) for k, sim in sims.items()}
    yield sims, values
    for sim in sims.values():
        sim.close()


def assert_same(a: dict, b: dict, label: str):
    assert a.keys() == b.keys()
    for key in a:
        assert np.array_equal(a[key], b[key], equal_nan=a[key].dtype.kind == "f"), f"{label}: {key} differs"


def test_shards_give_one_simulators_results_bit_for_bit(sharded, reference):
    """K = 1 and 2 shards: state, solver statistics, frozen flags, world steps, pair forces,
    step totals and parameters equal those of one Simulator of the same worlds, bit for bit,
    after sampled parameters, set_state, set_control, a partial reset and 40 steps; the
    sampled parameters are the same for every K. The worlds differ from each other, and the
    spheres are in contact, so the comparison has something to compare."""
    sims, values = sharded
    ref_values, expected, want = reference
    assert expected["stats_contacts"].min() > 0
    assert not np.array_equal(expected["position"][0], expected["position"][1])
    for k, sim in sims.items():
        assert_same(values[k], ref_values, f"sampled parameters, {k} shard(s)")
        assert_same(outcome(sim), expected, f"{k} shard(s)")
        got = sim.contact_forces(world=2)
        assert got.keys() == want.keys() and all(np.array_equal(got[p], want[p]) for p in want)
    timings = sims[2].shard_timings()
    assert [s["worlds"] for s in timings["per_shard"]] == [2, 1] and timings["calls"] == 2
    assert len({s["pid"] for s in timings["per_shard"]}) == 2
    # the shards run at this process's priority, not at Ray's default worker niceness (15)
    assert {os.getpriority(os.PRIO_PROCESS, s["pid"]) for s in timings["per_shard"]} == {os.getpriority(os.PRIO_PROCESS, 0)}


def kill(sim, shard: int, sig=signal.SIGKILL) -> int:
    pid = sim.shard_timings()["per_shard"][shard]["pid"]
    os.kill(pid, sig)
    return pid


def test_a_killed_shard_raises_and_recovers_from_the_checkpoint(sharded):
    """on_fault="raise": shard 1's process killed between two step calls is reported with its
    worlds; the other shard's worlds still advance; every call raises until recover(), which
    restarts it from the driver's checkpoint with its parameters and controls. Its world then
    steps, bit for bit, as a Simulator restored from the same checkpoint (both start cold)."""
    sim = sharded[0][2]
    before = sim.checkpoint()
    sim.step(5)
    kill(sim, 1)
    with pytest.raises(th.ShardError, match=r"shard 1 \(worlds 2\.\.2\) died during step\(5\).*lose 10 steps") as info:
        sim.step(5)
    assert (info.value.shard, info.value.worlds) == (1, (2, 3))
    record = sim.faults[-1]
    assert (record.shard, record.worlds, record.steps_lost.tolist(), record.restarted) == (1, (2, 3), [10], False)
    with pytest.raises(th.ShardError, match="shard 1 .* is down since step"):
        sim.get_state()
    assert sim.recover() == [record] and record.restarted
    assert sim.world_steps().tolist() == (before["world_steps"] + [10, 10, 0]).tolist()
    after = sim.checkpoint()
    for name, _ in STATE_FIELDS:
        assert np.array_equal(after[name][2], before[name][2]), name
        assert not np.array_equal(after[name][:2], before[name][:2]), name
    ref = th.Simulator(pile(), worlds=W)
    randomise(ref)
    ref.restore(after, force=FORCE)
    sim.step(5)
    ref.step(5)
    got, want = sim.get_state(), ref.get_state()
    for name, _ in STATE_FIELDS:
        assert np.array_equal(got[name][2], want[name][2]), name
    assert sim.shard_timings()["per_shard"][1]["restarts"] == 1


def state_of(pid: int) -> str:
    """The process state letter from /proc (T: stopped, Z: zombie), or "" once it is gone."""
    with suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return ""


def wait_until(condition, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.2)
    return True


def test_a_silent_shard_times_out_and_is_restarted(sharded):
    """on_fault="restart": a shard whose process stops answering (SIGSTOP) is given up after
    Timeouts.call_s, killed, and restarted from the checkpoint with a ShardWarning; the step
    call returns, the record says 2 steps were lost in every world."""
    sim = sharded[0][1]
    before = sim.checkpoint()
    saved = sim.timeouts
    sim.timeouts = Timeouts(call_s=4.0, world_step_s=1e-6)
    pid = kill(sim, 0, signal.SIGSTOP)
    try:
        with pytest.warns(th.ShardWarning, match=r"no answer to step\(2\) within 4 s.*lost 2 steps"):
            sim.step(2)
        gone = wait_until(lambda: state_of(pid) in ("", "Z"), 20.0)
    finally:
        sim.timeouts = saved
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert gone, f"the stopped shard process {pid} was left behind"
    record = sim.faults[-1]
    assert record.restarted and record.steps_lost.tolist() == [2, 2, 2]
    assert np.array_equal(sim.world_steps(), before["world_steps"])
    assert_same(sim.checkpoint(), before, "restarted shard")
    assert sim.shard_timings()["per_shard"][0]["pid"] != pid


def test_a_shard_waiting_for_resources_times_out_saying_so(sharded, cluster):
    """A shard whose resources Ray cannot free (the module's three shards hold 1.5 of the two
    CPUs, this one asks for one) is given up after Timeouts.start_s, and the error names what it
    asked for and what is free; the actor is removed, so its request does not linger. (Ray's
    count of free resources lags a shard's restart, hence the waits for the settled count.)"""
    free = 2.0 - 3 * CPUS

    def settled():
        return wait_until(lambda: cluster.available_resources().get("CPU", 0.0) == free, 20.0)

    assert settled()
    with pytest.raises(th.ShardError, match=r"no answer to start within 3 s .*asked Ray for 1 CPU and 0 GPU, and the "
                                            r"cluster has 0\.5 CPU and 0 GPU free now"):
        ShardedSimulator(pile(), worlds=1, shards=1, cpus_per_shard=1.0, timeouts=Timeouts(start_s=3.0))
    assert settled()


def test_bad_arguments_are_refused_before_any_shard_is_called(sharded):
    """Constructor arguments are checked before any shard starts; a bad argument of a call
    raises the error a Simulator raises, naming the global world, and changes nothing."""
    scene = pile()
    for kwargs, error, match in [
        ({"worlds": 3, "shards": 4}, th.ArgumentError, r"shards\) must be at most worlds = 3"),
        ({"worlds": 3, "shards": 0}, th.ArgumentError, r"shards\) must be in \[1"),
        ({"on_fault": "retry"}, th.ArgumentError, "on_fault"),
        ({"checkpoint_every": 0}, th.ArgumentError, "checkpoint_every"),
        ({"timeouts": 5}, th.ArgumentError, "Timeouts"),
        ({"arch": "metal"}, th.BackendError, "unknown arch 'metal'"),
        ({"arch": "vulkan", "precision": "f64"}, th.BackendError, "f64"),
        ({"simulator_options": {"chunk": 4}}, th.ArgumentError, "'chunk'"),
        ({"cpus_per_shard": 5}, th.ArgumentError, r"5 CPUs, and the Ray cluster has 2"),
        ({"arch": "cuda"}, th.ArgumentError, "GPU"),
    ]:
        with pytest.raises(error, match=match):
            ShardedSimulator(scene, **{"worlds": 2, "shards": 1, **kwargs})
    with pytest.raises(th.SceneError, match="needs a Scene"):
        ShardedSimulator("scenes/pile.toml")
    with pytest.raises(th.ArgumentError, match="call_s"):
        Timeouts(call_s=-1.0)
    sim = sharded[0][2]
    before, params = sim.checkpoint(), sim.parameters()
    mass = params["mass"].copy()
    mass[2, 1] = -1.0
    calls = [
        (lambda: sim.set_parameters(mass=mass), th.SceneError, "mass of body 'b0' in world 2 must be finite and positive"),
        (lambda: sim.set_state(position=np.zeros((W, 2, 3))), th.SceneError, r"position must have shape \(3, 4, 3\)"),
        (lambda: sim.set_control(force=np.full((W, B, 3), np.nan)), th.SceneError, "force of body 'ground' in world 0"),
        (lambda: sim.set_joint_control(target=np.zeros((W, 2))), th.SceneError, r"target must have shape \(1,\) or \(3, 1\)"),
        (lambda: sim.reset(worlds=[5]), th.SceneError, r"world index 5 is out of range \[0, 3\)"),
        (lambda: sim.reset(worlds=[0, 0]), th.SceneError, "more than once"),
        (lambda: sim.sample_parameters(-1, mass=(1, 2)), th.SceneError, "seed"),
        (lambda: sim.contact_forces(world=3), th.SceneError, r"world must be an integer in \[0, 3\)"),
        (lambda: sim.step(-1), th.ArgumentError, "step"),
        (lambda: sim.restore({"position": before["position"]}), th.SceneError, "missing"),
    ]
    for call, error, match in calls:
        with pytest.raises(error, match=match):
            call()
    assert_same(sim.checkpoint(), before, "after refused calls")
    assert_same(sim.parameters(), params, "after refused calls")


# ------------------------------------------------------------------ host-side parts (no Ray)


def test_shard_ranges_are_contiguous_and_balanced():
    """Every world in exactly one shard, in order, sizes differing by at most one."""
    assert shard_ranges(10, 3) == ((0, 4), (4, 7), (7, 10))
    for worlds in (1, 2, 7, 64, 1000):
        for shards in {1, 2, 3, worlds}:
            if shards > worlds:
                continue
            ranges = shard_ranges(worlds, shards)
            assert ranges[0][0] == 0 and ranges[-1][1] == worlds
            assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
            sizes = [b - a for a, b in ranges]
            assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1


def test_layout_maps_global_and_local_worlds():
    layout = Layout(7, 3)  # (0, 3), (3, 5), (5, 7)
    assert [layout.locate(w) for w in (0, 2, 3, 6)] == [(0, 0), (0, 2), (1, 0), (2, 1)]
    parts = layout.split_selection(np.array([6, 0, 4, 5]))
    assert [(p.tolist(), local.tolist()) for p, local in parts] == [([1], [0]), ([2], [1]), ([0, 3], [1, 0])]
    rows = np.arange(14.0).reshape(7, 2)
    assert np.array_equal(layout.gather(layout.split(rows)), rows)
    assert layout.gather(layout.split(rows.astype(np.float32)), dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="gather needs rows"):
        layout.gather([rows[:3], rows[3:]])


def test_shard_resources():
    """Defaults: an equal share of the free CPUs for cpu shards (as many Taichi threads, at
    least one), a GPU each for cuda; requests the cluster cannot meet are refused."""
    cluster = {"CPU": 16.0, "GPU": 4.0}
    assert shard_resources("cpu", 4, None, None, cluster) == (4.0, 0.0, 4)
    assert shard_resources("cpu", 3, None, None, cluster, {"CPU": 7.0}) == (2.0, 0.0, 2)
    assert shard_resources("cpu", 4, None, None, {"CPU": 2.0}) == (0.5, 0.0, 1)
    assert shard_resources("cuda", 4, None, None, cluster) == (1.0, 1.0, 1)
    assert shard_resources("vulkan", 2, None, None, cluster)[1] == 1.0
    assert shard_resources("vulkan", 2, None, None, {"CPU": 4.0})[1] == 0.0
    with pytest.raises(th.ArgumentError, match=r"8 shard\(s\) x 1 GPU = 8 GPUs, and the Ray cluster has 4"):
        shard_resources("cuda", 8, None, None, cluster)
    with pytest.raises(th.ArgumentError, match="gpus_per_shard > 0"):
        shard_resources("cuda", 1, None, 0, cluster)
    with pytest.raises(th.ArgumentError, match="cpus_per_shard"):
        shard_resources("cpu", 1, -1, None, cluster)


def test_fault_record_counts_the_steps_lost():
    record = FaultRecord(shard=1, worlds=(4, 7), call="step(10)", cause="killed", step_count=30,
                         reached=np.array([40, 40, 12]), restored=np.array([20, 20, 0]))
    assert record.steps_lost.tolist() == [20, 20, 12]
    summary = record.summary()
    assert (summary["steps_lost_min"], summary["steps_lost_max"], summary["worlds"]) == (12, 20, [4, 7])
    json.dumps(summary)


# ------------------------------------------------------------------ command line


def run_cli(args, capsys):
    from taichi_hydro.cli import main

    code = main(["run", *args])
    return code, capsys.readouterr()


def test_cli_refuses_bad_sharding_options(capsys):
    scene = str(ROOT / "scenes" / "ball_drop.toml")
    for args, message in [
        (["--address", "localhost:6379"], "--address applies to a sharded run and needs --shards"),
        (["--checkpoint-every", "10"], "--checkpoint-every applies to a sharded run and needs --shards"),
        (["--cpus-per-shard", "1"], "--cpus-per-shard applies to a sharded run and needs --shards"),
        (["--gpus-per-shard", "1"], "--gpus-per-shard applies to a sharded run and needs --shards"),
        (["--worlds", "2", "--shards", "3"], "must be at most worlds = 2"),
        (["--shards", "1", "--plot", "p.png"], "--plot draws from a simulator in this process"),
        (["--shards", "1", "--quick-compile"], "--quick-compile applies to a run in this process"),
    ]:
        code, out = run_cli([scene, "--steps", "1", *args], capsys)
        assert code == 2 and message in out.err and "Traceback" not in out.err


def test_cli_run_with_shards_prints_the_summary_and_per_shard_timing(cluster, capsys, tmp_path):
    """`run --shards` keeps every key of the run summary and adds "sharding" (per-shard timing,
    the overhead per step call, faults, the resources of each shard). The shard asks for the
    module's CPUS, so that it fits beside the module's other shards, which are still running."""
    scene = str(ROOT / "scenes" / "ball_drop.toml")
    code, out = run_cli([scene, "--worlds", "2", "--shards", "1", "--steps", "4", "--checkpoint-every", "2",
                         "--cpus-per-shard", str(CPUS), "--json"], capsys)
    assert code == 0, out.err
    summary = json.loads(out.out)
    for key in ("steps", "wall_s", "world_steps_per_s", "polygons_mean", "bodies", "frozen_worlds", "diverged_worlds"):
        assert key in summary
    assert summary["steps"] == 4 and summary["worlds"] == 2
    sharding = summary["sharding"]
    assert sharding["shards"] == 1 and sharding["address"] == "local" and sharding["faults"] == []
    assert sharding["calls"] >= 1 and sharding["overhead_s_per_call"] >= 0.0
    assert (sharding["cpus_per_shard"], sharding["gpus_per_shard"]) == (CPUS, 0.0)
    (shard,) = sharding["per_shard"]
    assert (shard["first_world"], shard["worlds"], shard["steps"]) == (0, 2, 4) and shard["step_s"] > 0


KILLED_PROCESS = """
import os, sys
import taichi as ti
import taichi_hydro as th
from taichi_hydro.distributed.worker import ShardWorker

th.init("cpu")


@ti.kernel
def double(x: ti.types.ndarray()):
    for i in x:
        x[i] *= 2.0


double(ti.ndarray(ti.f32, 4))
if sys.argv[1] == "close":
    ShardWorker().close()
os._exit(0)  # ended from outside, as a driver ends a shard's actor: no interpreter teardown
"""


def test_a_closed_shard_leaves_its_compiled_kernels_in_the_offline_cache(tmp_path):
    """Taichi writes its offline cache only when a runtime ends, and a shard's process is
    killed by its driver: ShardWorker.close (called by ShardedSimulator.close) ends the runtime
    first. A process that compiled a kernel and was ended without teardown leaves an empty
    cache folder empty; one that called close() first leaves the kernel there."""
    script = tmp_path / "shard.py"  # a file: Taichi reads a kernel's source
    script.write_text(KILLED_PROCESS)
    written = {}
    for mode in ("kill", "close"):
        cache = tmp_path / mode
        env = {**os.environ, "TI_OFFLINE_CACHE_FILE_PATH": str(cache)}
        subprocess.run([sys.executable, str(script), mode], env=env, check=True, capture_output=True, timeout=300)
        written[mode] = [p for p in cache.rglob("*") if p.is_file()] if cache.exists() else []
    assert written["kill"] == [], written["kill"]
    assert written["close"], "close() wrote nothing to the offline cache"
