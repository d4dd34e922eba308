"""Per-step records of a simulator's run for the benchmarks: the time of each stage
(Simulator.profile_stages: one launch at a time, a sync after each stage, so a stage's time
includes no other's) and the solver's iterations per world after every step (solver_stats),
summed over as many steps as are taken. bench.run takes them over a dynamics case's timed
interval again; bench.method_ab over interleaved chunks of several solver variants."""

from __future__ import annotations

import numpy as np


def mean_p95_max(values) -> list:
    """[mean, 95th percentile, max] of the values (arrays of any shape, pooled)."""
    values = np.concatenate([np.ravel(v) for v in values])
    return [float(values.mean()), float(np.percentile(values, 95)), values.max().item()]


def capped_worlds(stats: dict, cap: int, tolerance: float) -> int:
    """The worlds of one step (solver_stats()) whose solve stopped at the iteration cap with its
    residual above the tolerance [m/s]."""
    return int(np.count_nonzero((stats["iterations"] >= cap) & (stats["residual"] > tolerance)))


class StageRecord:
    """The stage times [s] and the iteration counts of `sim`'s steps taken through step(), and
    how many world-steps ended at the solver's iteration cap ([solver] iterations) with their
    residual above its tolerance (unconverged: `capped`; a rare event on a pile, which a mean,
    p95 and max alone do not count)."""

    def __init__(self, sim):
        self.sim = sim
        self.steps = 0
        self.stage_s = dict.fromkeys((name for name, _ in sim.stages), 0.0)
        self.iterations: list[np.ndarray] = []
        self.linear_iterations: list[np.ndarray] = []
        self.capped = 0

    def step(self, n: int = 1) -> None:
        """n steps, one at a time: each stage's time, then the iterations of every world (Newton's
        iterations, or Gauss-Seidel's sweeps) and the CG iterations (0 but for linear = "cg")."""
        for _ in range(n):
            for name, t in self.sim.profile_stages(1).items():
                self.stage_s[name] += t
            stats = self.sim.solver_stats()
            self.iterations.append(stats["iterations"].copy())
            self.linear_iterations.append(stats["linear_iterations"].copy())
            self.capped += capped_worlds(stats, self.sim.options.iterations, self.sim.options.tolerance)
            self.steps += 1

    def stage_mean_s(self) -> dict[str, float]:
        """Mean time per step of each stage [s]."""
        return {name: t / self.steps for name, t in self.stage_s.items()}
