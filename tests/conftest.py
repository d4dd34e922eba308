"""pytest set-up: `--arch cpu|vulkan|cuda` picks the Taichi backend of the whole session (one
ti.init per process, so kernels compile once and are reused by every test)."""

import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _find_shared() -> Path:
    """The project's shared folder (design, papers, reference data): $TH_SHARED, else the
    `shared` beside the checkout, else the workplace's /work/shared."""
    for candidate in (os.environ.get("TH_SHARED"), ROOT.parent / "shared", "/work/shared"):
        if candidate and (Path(candidate) / "reference").is_dir():
            return Path(candidate)
    return ROOT.parent / "shared"


SHARED = _find_shared()
REFERENCE = SHARED / "reference"


def pytest_addoption(parser):
    parser.addoption("--arch", default="cpu", choices=["cpu", "vulkan", "cuda"], help="Taichi backend for device tests")


class Tolerances:
    """Per-arch tolerances for results computed in float32 on the device.

    rel: relative error of a sum of O(100) float32 terms, each exact to ~1e-7 relative, whose
    inputs (world coordinates) carry 1e-7 relative rounding too: 1e-5 covers both with margin.
    pos: absolute position error [m] per metre of scene size (float32 epsilon x 10)."""

    def __init__(self, arch):
        self.arch = arch
        self.rel = 1e-5
        self.pos = 1.2e-6


def _init_backend(config) -> str:
    """ti.init on the session's --arch (again: a no-op); returns the arch's name."""
    import taichi_hydro as th

    name = config.getoption("--arch")
    # TH_DEBUG=1: Taichi's debug mode (bounds-checked indexing, kernel asserts); slow.
    th.init(name, debug=os.environ.get("TH_DEBUG") == "1")
    return name


@pytest.fixture(scope="session")
def arch(request):
    return _init_backend(request.config)


@pytest.fixture(scope="session", autouse=True)
def _first_step_compiled_once(request, tmp_path_factory):
    """Under pytest-xdist on Vulkan (scripts/test.sh's lavapipe pass: two workers), the first
    worker here compiles the common step (a ball on the ground: the kernels most tests launch)
    and restarts its runtime, which writes them to Taichi's offline cache; the other waits on a
    file lock meanwhile and starts its runtime after, so that it reads them from that cache
    (Taichi reads the cache's index when a runtime starts, and writes the cache only when one
    ends). Two workers that start cold otherwise both compile the same kernels from SPIR-V on
    lavapipe at the same time: about 5.5 minutes of one core each, against 3 s from the cache."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if request.config.getoption("--arch") != "vulkan" or worker is None or sys.platform == "win32":
        return
    import fcntl

    import taichi_hydro as th
    from taichi_hydro import backend

    shared = tmp_path_factory.getbasetemp().parent  # the same folder for every worker of this run
    with open(shared / "first_step.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "first_step.done"
        if done.exists():
            if backend.is_initialized():
                backend.restart()  # a runtime started before the kernels were written misses them
            return
        _init_backend(request.config)
        th.Simulator(scene([ground(), ball("ball", z=0.2)]), worlds=2).step(1)
        backend.restart()
        done.write_text(worker)


@pytest.fixture(scope="session", autouse=True)
def _mesh_cache(tmp_path_factory):
    """Tetrahedralised meshes are cached on disk (taichi_hydro.diskcache): the suite keeps its
    entries in a folder of its own, never in the user's ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TAICHI_HYDRO_CACHE", str(tmp_path_factory.mktemp("taichi_hydro_cache")))
        yield


@pytest.fixture(scope="session")
def tol(arch):
    return Tolerances(arch)


@pytest.fixture(scope="session")
def reference():
    import json

    path = REFERENCE / "drake_reference.json"
    if not path.is_file():
        pytest.skip(f"reference data not found at {path}")
    return json.loads(path.read_text())


def edited(data, path, value=None, delete=False):
    """A deep copy of the nested scene dict `data` with the entry at `path` (a tuple of keys and
    list indices) replaced by `value`, or deleted."""
    import copy

    data = copy.deepcopy(data)
    node = data
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


def scene(bodies, solver=None, **sim):
    """A validated scene from a list of body dicts; `solver` is the [solver] table, keyword
    arguments the [sim] table."""
    import taichi_hydro as th

    data = {"body": bodies}
    if sim:
        data["sim"] = sim
    if solver:
        data["solver"] = solver
    return th.scene_from_dict(data, source="<test>")


def ball(name="ball", radius=0.1, z=0.095, modulus=1e5, resolution=0.02, contact=None, **kw):
    """A compliant sphere body; `contact` entries extend [body.contact], `kw` the body table."""
    body = {
        "name": name,
        "mass": 0.5,
        "position": [0.0, 0.0, z],
        "shape": {"type": "sphere", "radius": radius},
        "contact": {"modulus": modulus, "resolution": resolution, **(contact or {})},
    }
    body.update(kw)
    return body


def ground(name="ground", **contact):
    body = {"name": name, "type": "static", "shape": {"type": "halfspace"}}
    if contact:
        body["contact"] = contact
    return body


def sphere_plane_force(R, E, depth):
    """Exact pressure force of a compliant sphere with p = E (1 - r/R) pressed `depth` into a
    rigid plane: F = 2 pi E [a^2/2 - (R^3 - h^3)/(3R)], h = R - depth, a^2 = R^2 - h^2."""
    h = R - depth
    return 2 * np.pi * E * ((R * R - h * h) / 2 - (R**3 - h**3) / (3 * R))


LAVAPIPE_TEST_CAP = 12_500
"""The most kernel launches a test marked launches(n) may make in the lavapipe pass of the
suite. A launch costs lavapipe about 2.5 ms on the CI's 2 cores, so a longer test would cost
more than half a minute there; it runs on the cpu backend (and GPU drivers), and the kernels
it uses run on lavapipe in shorter tests and in the cpu-vs-vulkan comparisons
(test_pipeline.test_cpu_and_vulkan_agree, test_joints.test_every_joint_law_agrees_on_cpu_and_vulkan)."""

ON_LAVAPIPE_ELSEWHERE = pytest.mark.lavapipe_elsewhere(
    "the default method's run of this test and test_dynamics.py::test_solver_methods_agree run this method's kernels here")
"""The mark of a test's parameter set that repeats, with another solver method, a test that the
lavapipe pass runs with the default one (Newton): skipped on lavapipe only, where each test
costs about 2.5 ms per launch and the method's kernels already run in
test_solver_methods_agree (every method from one state) and in its own tests; it runs on the
cpu backend and on GPU drivers."""

UNMARKED_SHARE = 3
"""On lavapipe, a test without a launches(n) marker starts in a runtime with at least 1/3 of the
launch budget left (else the runtime is restarted first)."""


COMPILE_GROUPS = (("tests/test_joints.py", "tests/test_urdf.py", "tests/test_rigid_contact.py", "tests/test_interop.py"),
                  ("tests/test_newton.py", "tests/test_newton_cg.py", "tests/test_islands.py"))
"""Test files that pytest-xdist's --dist loadfile (scripts/test.sh's vulkan pass) sends to one
worker together, because each file of a group compiles the same large kernels, minutes of
lavapipe's SPIR-V compile from a cold cache that two workers would otherwise both pay: the
first group steps scenes with joints on the device (the Newton-with-joints step); the second
runs Newton's kernels on dumped problems, the conjugate-gradient one among them (one clean-clone
run: 376 s for test_newton_cg.py's first CG solve in one worker while test_newton.py's presweeps
test compiled it in the other). Other files go whole to a worker each, as before. (Not
xdist_group markers: pytest-xdist 3.8's --dist loadgroup tags node ids through an attribute
that pytest 9 no longer reads, so the groups were silently ignored.)"""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, with each of COMPILE_GROUPS as one work unit (see there)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    missing = [path for group in COMPILE_GROUPS for path in group if not (config.rootpath / path).is_file()]
    if missing:  # a renamed file would silently leave its group
        raise pytest.UsageError(f"tests/conftest.py: COMPILE_GROUPS names no such test file: {', '.join(missing)}")
    unit = {path: group[0] for group in COMPILE_GROUPS for path in group}

    class CompileGroupScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return unit.get(path, path)

    return CompileGroupScheduling(config, log)


def _defer_to_fresh_process(nodeid: str) -> bool:
    """Write the test's id to $TH_RERUN_FILE (scripts/test.sh reruns those in fresh processes)."""
    rerun = os.environ.get("TH_RERUN_FILE")
    if rerun:
        with open(rerun, "a") as f:
            f.write(nodeid + "\n")
    return bool(rerun)


def _skip_for_budget(nodeid: str, used_before: int, exc: Exception) -> None:
    """Skip a test that met lavapipe's launch budget: deferred to a fresh process (its id in
    $TH_RERUN_FILE) when earlier tests used part of the budget, else for good, with the reason."""
    if used_before > 0 and _defer_to_fresh_process(nodeid):
        pytest.skip(f"{nodeid}: lavapipe launch budget used up by earlier tests: rerun in a fresh process")
    pytest.skip(f"{nodeid}: lavapipe launch budget: {exc}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """Mesa's lavapipe limits the kernel launches of a Taichi runtime (backend.LAUNCH_BUDGET). A
    test marked launches(n) (its count on the cpu backend, where it is the same) is skipped if n
    exceeds the budget; when n (a third of the budget for an unmarked test) does not fit in what
    is left, the runtime is restarted in this process first (backend.restart), instead of
    running until it meets the limit. A test or fixture that still meets the limit defers or
    skips it as before (scripts/test.sh reruns deferred tests in fresh processes). A test
    marked lavapipe_elsewhere (ON_LAVAPIPE_ELSEWHERE) is skipped on lavapipe."""
    import taichi_hydro as th
    from taichi_hydro import backend

    elsewhere = item.get_closest_marker("lavapipe_elsewhere")
    if elsewhere is not None and item.config.getoption("--arch") == "vulkan":
        _init_backend(item.config)
        if backend.launch_budget() is not None:  # lavapipe
            pytest.skip(f"{item.nodeid}: on lavapipe {elsewhere.args[0]}")
    budget = backend.launch_budget() if backend.is_initialized() else None
    marker = item.get_closest_marker("launches")
    if budget is not None:
        need, used = (marker.args[0] if marker is not None else budget // UNMARKED_SHARE), backend.launches_made()
        if need > budget:
            pytest.skip(f"{item.nodeid}: about {need} kernel launches, past lavapipe's {budget} per runtime "
                        "(backend.LAUNCH_BUDGET); it runs on the cpu backend and on GPU drivers")
        if need > LAVAPIPE_TEST_CAP:
            pytest.skip(f"{item.nodeid}: about {need} kernel launches, past the {LAVAPIPE_TEST_CAP} a test may make on "
                        "lavapipe in this suite (conftest.LAVAPIPE_TEST_CAP: ~2.5 ms each); it runs on the cpu backend "
                        "and on GPU drivers")
        if used > 0 and used + need > budget:
            backend.restart()  # a fresh runtime, with the whole budget (kernels from the offline cache)
    used_before = backend.launches_made()
    try:
        return (yield)
    except th.LaunchBudgetError as exc:
        _skip_for_budget(item.nodeid, used_before, exc)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test that meets the launch budget after earlier tests used part of it is skipped here
    and its id written to $TH_RERUN_FILE, so scripts/test.sh reruns it in a fresh process; a
    test that meets it alone is skipped with the reason (it still runs on the cpu backend).
    With $TH_LAUNCH_REPORT set, each test's kernel launches and seconds (its call, not its
    fixtures) are appended to that file (tab-separated), to see where a backend's time goes."""
    import taichi_hydro as th
    from taichi_hydro import backend

    used_before = backend.launches_made()
    generation, start = backend.generation(), time.perf_counter()
    try:
        return (yield)
    except th.LaunchBudgetError as exc:
        _skip_for_budget(pyfuncitem.nodeid, used_before, exc)
    finally:
        report = os.environ.get("TH_LAUNCH_REPORT")
        if report and backend.generation() == generation:  # launches counted in one runtime
            with open(report, "a") as f:
                f.write(f"{backend.launches_made() - used_before}\t{time.perf_counter() - start:.2f}\t{pyfuncitem.nodeid}\n")


_exit_status: list = []


def pytest_sessionfinish(session, exitstatus):
    _exit_status.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """On Vulkan, leave without the interpreter's teardown once pytest has reported: Taichi's
    and GGUI's Vulkan objects destroyed in arbitrary order at exit have aborted a finished run
    (SIGABRT after its summary, seen in a lavapipe rerun process), which would fail CI for no
    test's fault."""
    if config.getoption("--arch") == "vulkan" and _exit_status:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status[-1])
