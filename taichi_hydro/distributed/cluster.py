"""Ray, the engine the shards run on: importing it (an optional dependency), starting or joining
a cluster, and the resources each shard asks for."""

from __future__ import annotations

import math
import os

from ..checks import real_problem
from ..errors import ArgumentError, BackendError

__all__ = ["require_ray", "connect", "shard_resources"]

INSTALL = "pip install 'taichi-hydro[distributed]'"


def require_ray():
    """The ray module; BackendError saying how to install it when it is missing."""
    try:
        import ray
    except ImportError as exc:
        raise BackendError(f"taichi_hydro.distributed runs on Ray, which is not installed here: {INSTALL}") from exc
    return ray


def connect(address: str | None = None, **init_options):
    """Ray, joined to a running cluster (address "HOST:PORT" of its head; "auto": the one
    `ray start` made on this machine, an error if there is none) or, with address None, Ray's
    default: the cluster named by $RAY_ADDRESS or last started on this machine, else a new
    local instance. When Ray is already initialised in this process, it is used as it is and
    the arguments are ignored. init_options go to ray.init (e.g. num_cpus, log_to_driver=False). BackendError
    naming the address when Ray cannot start or connect."""
    ray = require_ray()
    if ray.is_initialized():
        return ray
    # Ray starts its worker processes at niceness 15 (meant for background tasks); our shards are
    # the simulation itself, so a local instance started here runs them at the driver's priority
    # (else any other job on the machine starves them, and their calls time out). A value the
    # user set in the environment wins; a running cluster keeps its own setting.
    os.environ.setdefault("RAY_worker_niceness", "0")
    try:
        ray.init(address=address, **init_options)
    except Exception as exc:  # ray raises ConnectionError, ValueError, RuntimeError... for a bad address
        where = f"the cluster at {address!r}" if address else "a local Ray instance"
        raise BackendError(f"cannot start or join {where}: {type(exc).__name__}: {exc}") from exc
    return ray


def _amount(value, name: str) -> float | None:
    if value is None:
        return None
    problem = real_problem(value, 0.0)
    if problem:
        raise ArgumentError(f"ShardedSimulator({name}) {problem}")
    return float(value)


def shard_resources(arch: str, shards: int, cpus_per_shard, gpus_per_shard, cluster: dict,
                    available: dict | None = None) -> tuple[float, float, int]:
    """(CPUs, GPUs, Taichi CPU threads) of each of `shards` shards on a Ray cluster whose total
    resources are `cluster` (ray.cluster_resources(): "CPU", "GPU") and whose free ones are
    `available` (ray.available_resources(); default: all).

    Defaults: a cuda shard takes one GPU and one CPU; a vulkan shard one GPU when the cluster
    has one per shard (else it runs on a CPU Vulkan driver and takes CPUs as a cpu shard); a cpu
    shard an equal share of the free CPUs, and as many Taichi threads as whole CPUs (at least
    one). ArgumentError when the shards need more than the whole cluster has: Ray would wait
    for resources that never come (when they are only busy, Ray waits for them, up to
    Timeouts.start_s)."""
    cpus, gpus = _amount(cpus_per_shard, "cpus_per_shard"), _amount(gpus_per_shard, "gpus_per_shard")
    total_cpus, total_gpus = float(cluster.get("CPU", 0.0)), float(cluster.get("GPU", 0.0))
    free_cpus = float((cluster if available is None else available).get("CPU", 0.0))
    if gpus is None:
        gpus = 1.0 if arch == "cuda" or (arch == "vulkan" and total_gpus >= shards) else 0.0
    if cpus is None:
        share = (free_cpus if free_cpus > 0 else total_cpus) / shards
        cpus = min(1.0, share) if gpus > 0 else (math.floor(share) if share >= 1 else share)
    if arch == "cuda" and gpus <= 0:
        raise ArgumentError("ShardedSimulator: arch 'cuda' needs gpus_per_shard > 0 (each shard's process must see a GPU)")
    for what, need, have in (("CPU", cpus, total_cpus), ("GPU", gpus, total_gpus)):
        if need * shards > have + 1e-9:
            hint = " (arch 'cuda' needs GPUs: start Ray on nodes that have them, or use arch 'cpu')" if what == "GPU" else ""
            raise ArgumentError(f"ShardedSimulator: {shards} shard(s) x {need:g} {what} = {need * shards:g} {what}s, and the Ray "
                                f"cluster has {have:g}{hint}: use fewer shards or a smaller {what.lower()}s_per_shard")
    if cpus <= 0 and gpus <= 0:
        raise ArgumentError("ShardedSimulator: a shard needs cpus_per_shard > 0 or gpus_per_shard > 0")
    return cpus, gpus, max(1, math.floor(cpus))
