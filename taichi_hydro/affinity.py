"""Pinning the cpu backend's pool threads to distinct cores (Linux; elsewhere nothing is done).

Why: Taichi 1.7's thread pool wakes its workers through one condition variable at every
launch, and unpinned they sometimes ran a whole launch on one core while the other idled (on
a 2-core machine a launch took either half or all of the one-thread time, by chance, launch by
launch). Each worker pinned to a core of its own removes the scheduler's choice, and with it
the slow launches (README, "Pool threads on cores of their own").

The pool's threads are not named, so they are found by what they do: the threads that
backend.init's ti.init created and that run while a probe kernel spreads over the pool
(probe.spread_work) are the pool's; the others (Taichi's compilation workers) sleep through
it. Each is then pinned to one core of the process's allowed set, in turn. Nothing is pinned
when the count found differs from the pool's size (the answer says why): the pinning then
changes no thread it is not sure of."""

from __future__ import annotations

import os

__all__ = ["thread_ids", "run_times_ns", "busy_threads", "assignment", "pin_pool"]

_TASKS = "/proc/self/task"
PROBES = 3
"""Probe launches pin_pool watches at most, until exactly the pool's number of threads ran in
one (a thread that compiled the probe may still be winding down during the first)."""


def thread_ids() -> set[int]:
    """This process's thread ids (empty where /proc does not list them)."""
    try:
        return {int(t) for t in os.listdir(_TASKS)}
    except OSError:
        return set()


def run_times_ns(tids) -> dict[int, int]:
    """Time each thread has run on a core so far [ns] (/proc's schedstat); threads that ended or
    that the kernel does not account for are left out."""
    out = {}
    for t in tids:
        try:
            with open(f"{_TASKS}/{t}/schedstat") as f:
                out[t] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def busy_threads(before: dict[int, int], after: dict[int, int]) -> list[int]:
    """The threads, in id order, whose run time grew from `before` to `after` (both from
    run_times_ns over the same candidates)."""
    return sorted(t for t in before if t in after and after[t] > before[t])


def assignment(tids: list[int], cpus: list[int]) -> dict[int, int]:
    """Thread -> core: the threads in id order take the cores in order, round and round (a core
    of its own each while there are enough)."""
    if not cpus:
        raise ValueError("assignment: no cores to pin to")
    order = sorted(cpus)
    return {t: order[i % len(order)] for i, t in enumerate(sorted(tids))}


def pin_pool(created: set[int], pool_size: int, run_probe) -> dict[int, int] | str:
    """Pin the pool's threads among `created` (the threads ti.init made) to cores of their own.
    run_probe() must launch a kernel over the pool and wait for it (called up to PROBES + 1
    times; the first may compile). Returns the thread -> core map that was applied, or why
    nothing was pinned (a thread that refuses its core undoes the others' pinning)."""
    if not hasattr(os, "sched_setaffinity"):
        return "this platform has no sched_setaffinity"
    candidates = created - {os.getpid()}
    run_probe()  # compiled (or loaded) now, by threads that may still run for a while after
    found = []
    for _ in range(PROBES):
        before = run_times_ns(candidates)
        if len(before) < pool_size:
            return f"found {len(before)} new threads with run times, fewer than the pool's {pool_size}"
        run_probe()
        pool = busy_threads(before, run_times_ns(candidates))
        if len(pool) == pool_size:
            break
        found.append(len(pool))
    else:
        return f"{found} new threads ran during {PROBES} probes, never the pool's {pool_size}"
    allowed = sorted(os.sched_getaffinity(0))
    if len(pool) > len(allowed):
        return f"the pool's {len(pool)} threads outnumber this process's {len(allowed)} cores: left to the scheduler"
    cores = assignment(pool, allowed)
    try:
        for t, core in cores.items():
            os.sched_setaffinity(t, {core})
    except OSError as exc:
        for t in cores:
            try:
                os.sched_setaffinity(t, allowed)
            except OSError:
                pass
        return f"a pool thread could not be pinned ({exc}): left to the scheduler"
    return cores
