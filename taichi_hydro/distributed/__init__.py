"""Batches sharded over processes, GPUs and nodes with Ray (optional: pip install
"taichi-hydro[distributed]").

    from taichi_hydro.distributed import ShardedSimulator
    sim = ShardedSimulator(th.load_scene("scenes/pile.toml"), worlds=100_000, shards=8, arch="cuda")
    sim.sample_parameters(seed=0, friction=(0.3, 0.6))   # the same per-world values for any shard count
    sim.step(1000)                                       # every shard at once
    state = sim.get_state()                              # (worlds, bodies, 3|4), global world order

ShardedSimulator has Simulator's batch API over K Ray actors, each with its own Taichi runtime
and a Simulator over a contiguous slice of the worlds (one GPU each with cuda). A shard that
dies is reported with its worlds, and raised or restarted from the driver's checkpoint
(faults.FaultRecord says which steps were lost); every remote call has a timeout (Timeouts).

Importing this package does not import Ray; ShardedSimulator and connect raise BackendError
saying how to install it when it is missing."""

from .cluster import connect
from .faults import ON_FAULT, FaultRecord, Timeouts
from .layout import Layout, shard_ranges
from .sharded import ShardedSimulator

__all__ = ["ShardedSimulator", "Timeouts", "FaultRecord", "ON_FAULT", "Layout", "shard_ranges", "connect"]
