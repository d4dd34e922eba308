"""Faults of a sharded batch: how long the driver waits for a shard (Timeouts), what it keeps
about a shard that died (FaultRecord), and which Ray errors mean a dead shard (is_fault)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..checks import real_problem
from ..errors import ArgumentError

__all__ = ["Timeouts", "FaultRecord", "ON_FAULT", "is_fault", "one_line"]

ON_FAULT = ("raise", "restart")
"""What ShardedSimulator does when a shard dies: raise ShardError (the shard stays down until
recover()), or restart it from the driver's checkpoint of its worlds and go on."""


@dataclass(frozen=True)
class Timeouts:
    """How long the driver waits for a shard before taking it for dead [s]. A shard that does
    not answer in time is killed and handled as one that died (ShardedSimulator(on_fault)).

    start_s: starting a shard (process, Taichi runtime, Simulator; kernels compile on the first
      step, not here). call_s: every call, including the kernel compilation of a first step
      (tens of seconds on a CPU). world_step_s: added to a step call for each world-step the
      shard makes (its worlds x the steps), so that long calls get proportionally longer: the
      default, 0.1 s, allows 10 world-steps/s, below the slowest case of the benchmarks."""

    start_s: float = 600.0
    call_s: float = 300.0
    world_step_s: float = 0.1

    def __post_init__(self):
        for name in ("start_s", "call_s", "world_step_s"):
            value = getattr(self, name)
            problem = real_problem(value, above=0.0)
            if problem:
                raise ArgumentError(f"Timeouts({name}) {problem}")

    def step(self, steps: int, worlds: int) -> float:
        """Seconds to wait for a step call of `steps` steps over a shard of `worlds` worlds."""
        return self.call_s + steps * worlds * self.world_step_s


@dataclass
class FaultRecord:
    """A shard found dead (its process killed, out of memory, its node gone) or silent past its
    timeout, while the driver made `call`.

    shard, worlds: the shard and its global world range (first, stop). cause: what Ray said.
    step_count: the driver's step count when the call was made. reached (n,): the world steps
    (world_steps()) its worlds had reached when it died, counting the steps of a step call
    they did not finish; restored (n,): the world steps of the checkpoint they were restarted
    from (steps_lost = reached - restored). restarted: whether the shard was restarted (with
    on_fault="raise": by recover())."""

    shard: int
    worlds: tuple[int, int]
    call: str
    cause: str
    step_count: int
    reached: np.ndarray
    restored: np.ndarray
    restarted: bool = False
    wall_time: float = field(default=0.0)

    @property
    def steps_lost(self) -> np.ndarray:
        """(n,) steps each world of the shard lost: reached - restored."""
        return self.reached - self.restored

    def summary(self) -> dict:
        """JSON-ready: the fields, with the steps lost as min and max over the shard's worlds."""
        lost = self.steps_lost
        return {"shard": self.shard, "worlds": list(self.worlds), "call": self.call, "cause": self.cause,
                "step_count": self.step_count, "steps_lost_min": int(lost.min()), "steps_lost_max": int(lost.max()),
                "restarted": self.restarted, "unix_time": self.wall_time}


def is_fault(exc: BaseException) -> bool:
    """Whether a Ray error from a call means the shard is gone (its actor died, its process
    crashed or was killed for memory, its node died, an object it held was lost), as opposed to
    an exception raised by our own code inside a living shard (RayTaskError)."""
    import ray.exceptions as rex

    return isinstance(exc, rex.RayError) and not isinstance(exc, rex.RayTaskError)


def one_line(text: str, limit: int = 600) -> str:
    """`text` with its lines joined and cut to `limit` characters (Ray's messages run to pages)."""
    joined = " ".join(line.strip() for line in str(text).splitlines() if line.strip())
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."
