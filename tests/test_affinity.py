"""Pinning the cpu pool's threads (taichi_hydro.affinity, backend.init(pin_threads)): the pure
parts alone, the finding of the pool's threads on threads this test controls, and the real pool
in a fresh process."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from taichi_hydro import affinity

ROOT = Path(__file__).resolve().parents[1]
LINUX_PROC = hasattr(os, "sched_setaffinity") and bool(affinity.run_times_ns([threading.get_native_id()]))
needs_proc = pytest.mark.skipif(not LINUX_PROC, reason="needs /proc schedstat and sched_setaffinity (Linux)")


def test_assignment_gives_each_thread_a_core_in_turn():
    assert affinity.assignment([12, 10, 11], [3, 1]) == {10: 1, 11: 3, 12: 1}
    assert affinity.assignment([7, 5], [0, 1, 2, 3]) == {5: 0, 7: 1}
    with pytest.raises(ValueError, match="no cores"):
        affinity.assignment([1], [])


def test_busy_threads_are_those_whose_run_time_grew():
    before = {1: 100, 2: 50, 3: 7}
    after = {1: 100, 2: 80, 4: 9}  # 3 ended, 4 is new: neither counts
    assert affinity.busy_threads(before, after) == [2]


class Workers:
    """Two threads that spin for 30 ms each time they are told to (by index), else sleep."""

    def __init__(self, count: int = 2):
        self.go = [threading.Event() for _ in range(count)]
        self.done = [threading.Event() for _ in range(count)]
        self.ids = [0] * count
        self.stop = False
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(count)]
        for t in self.threads:
            t.start()
        while not all(self.ids):
            time.sleep(0.001)

    def _run(self, i: int):
        self.ids[i] = threading.get_native_id()
        while True:
            self.go[i].wait()
            self.go[i].clear()
            if self.stop:
                return
            end = time.perf_counter() + 0.03
            while time.perf_counter() < end:
                pass
            self.done[i].set()

    def probe(self, which):
        for i in which:
            self.done[i].clear()
            self.go[i].set()
        for i in which:
            self.done[i].wait()

    def close(self):
        self.stop = True
        for e in self.go:
            e.set()


@needs_proc
def test_pin_pool_pins_the_threads_that_ran_and_nothing_when_unsure():
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two cores")
    w = Workers()
    try:
        # One of two expected threads runs in every probe: not the pool, nothing is pinned.
        answer = affinity.pin_pool(set(w.ids), 2, lambda: w.probe([0]))
        assert isinstance(answer, str) and "never the pool's 2" in answer
        assert all(os.sched_getaffinity(t) == set(cores) for t in w.ids)
        # Both run: each is pinned to a core of its own, in id order.
        answer = affinity.pin_pool(set(w.ids), 2, lambda: w.probe([0, 1]))
        assert answer == affinity.assignment(w.ids, cores)
        assert len(set(answer.values())) == 2
        for t, core in answer.items():
            assert os.sched_getaffinity(t) == {core}
    finally:
        w.close()


@needs_proc
def test_init_pins_the_cpu_pool_to_cores_of_its_own():
    """In a fresh process: init on cpu with two threads pins the two pool threads, one per core
    (their affinities read back from the kernel); pin_threads=False and one serial thread leave
    every thread as it was and say why."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores")
    code = (
        "import json, os, taichi_hydro as th\n"
        "out = {}\n"
        "for threads, pin in ((2, True), (2, False), (1, True)):\n"
        "    th.init('cpu', cpu_threads=threads, pin_threads=pin)\n"
        "    got = th.backend.pinned_threads()\n"
        "    out[f'{threads}-{pin}'] = got if isinstance(got, str) else {str(t): [c, sorted(os.sched_getaffinity(t))] for t, c in got.items()}\n"
        "print(json.dumps(out))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    pinned = out["2-True"]
    assert isinstance(pinned, dict) and len(pinned) == 2, pinned
    assert len({c for c, _ in pinned.values()}) == 2
    for core, now in pinned.values():
        assert now == [core]
    assert out["2-False"] == "not asked (pin_threads=False)"
    assert out["1-True"].startswith("no thread pool")


@needs_proc
def test_pin_pool_undoes_its_pinning_when_a_thread_refuses(monkeypatch):
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two cores")
    w = Workers()
    real = os.sched_setaffinity

    def refuse_second(tid, mask):
        if tid == max(w.ids) and len(mask) == 1:
            raise OSError(3, "No such process")
        real(tid, mask)

    monkeypatch.setattr(affinity.os, "sched_setaffinity", refuse_second)
    try:
        answer = affinity.pin_pool(set(w.ids), 2, lambda: w.probe([0, 1]))
        assert isinstance(answer, str) and "could not be pinned" in answer
        assert all(os.sched_getaffinity(t) == set(cores) for t in w.ids)
    finally:
        w.close()
