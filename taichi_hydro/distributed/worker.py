"""One shard of a sharded batch: a Simulator over a slice of the worlds, in a Ray actor process
with its own Taichi runtime. It speaks in local world indices (0 .. its worlds - 1) and NumPy
arrays of its rows only; ShardedSimulator maps global indices and gathers the results.

Arrays it returns are the device's (float32 unless precision "f64"): Ray puts them in its
object store and the driver reads them without a copy before it gathers them."""

from __future__ import annotations

import os
import socket
import time
import warnings

__all__ = ["ShardWorker"]


class ShardWorker:
    """Made by Ray as an actor (ray.remote(ShardWorker)); start() builds the Simulator, so that
    an error there comes back to the driver as that error (an exception in an actor's
    constructor only surfaces as a dead actor)."""

    def __init__(self):
        self.sim = None
        self.step_s, self.steps, self.calls = 0.0, 0, 0

    def start(self, scene, worlds: int, arch: str, precision: str, cpu_threads: int | None, options: dict) -> dict:
        """th.init(arch) in this process (cpu_threads for the cpu backend) and a Simulator of
        `worlds` worlds; HydroWarnings are left to the driver, which issues them once for all
        shards. Returns info()."""
        import taichi_hydro as th

        warnings.simplefilter("ignore", th.HydroWarning)
        th.init(arch, precision=precision, cpu_threads=cpu_threads if arch == "cpu" else None)
        self.sim = th.Simulator(scene, worlds=worlds, **options)
        return self.info()

    def close(self) -> None:
        """End this process's Taichi runtime before the driver kills the process
        (ShardedSimulator.close): Taichi writes the kernels it compiled to its offline cache
        only then (backend.shutdown), so the next shards and runs on this machine read them
        instead of compiling them again (minutes for a step's kernels on a CPU)."""
        from taichi_hydro import backend

        self.sim = None
        backend.shutdown()

    def info(self) -> dict:
        """Where this shard runs: process id, host name, Ray node id, the GPU ids Ray gave it."""
        import ray

        context = ray.get_runtime_context()
        return {"pid": os.getpid(), "host": socket.gethostname(), "node": context.get_node_id(),
                "gpus": [str(g) for g in ray.get_gpu_ids()]}

    def step(self, steps: int) -> float:
        """Simulator.step(steps); returns the seconds it took in this process."""
        t0 = time.perf_counter()
        self.sim.step(steps)
        elapsed = time.perf_counter() - t0
        self.step_s += elapsed
        self.steps += steps
        self.calls += 1
        return elapsed

    def checkpoint(self) -> dict:
        return self.sim.checkpoint()

    def restore(self, checkpoint: dict, force, torque, parameters: dict | None = None) -> None:
        """Simulator.restore, after set_parameters(**parameters) when given (a restarted shard)."""
        if parameters:
            self.sim.set_parameters(**parameters)
        self.sim.restore(checkpoint, force=force, torque=torque)

    def set_state(self, values: dict) -> None:
        self.sim.set_state(**values)

    def set_control(self, force, torque) -> None:
        self.sim.set_control(force=force, torque=torque)

    def reset(self, worlds, state: dict | None) -> None:
        self.sim.reset(worlds=worlds, state=state)

    def set_parameters(self, values: dict) -> None:
        self.sim.set_parameters(**values)

    def world_status(self):
        return self.sim.world_status()

    def solver_stats(self) -> dict:
        return self.sim.solver_stats()

    def step_totals(self) -> dict:
        return self.sim.step_totals()

    def pair_forces(self):
        return self.sim.pair_forces()

    def contact_forces(self, world: int) -> dict:
        return self.sim.contact_forces(world=world)

    def contact_surfaces(self, world: int) -> list:
        return self.sim.contact_surfaces(world=world)

    def set_joint_control(self, values: dict) -> None:
        self.sim.set_joint_control(**values)

    def joint_state(self) -> dict:
        return self.sim.joint_state()

    def joint_forces(self) -> dict:
        return self.sim.joint_forces()
