"""ShardedSimulator: one batch of worlds split over several processes, GPUs and nodes with Ray,
behind the batch API of Simulator (global world indices, NumPy arrays in global world order).

The driver (this process) keeps no Taichi runtime. It checks every argument against the scene's
host model before any shard is called, so a bad argument changes no shard; it keeps what it
sent (parameters, controls) and the last state it has of every world (a checkpoint, refreshed
by get_state, checkpoint() and every `checkpoint_every` steps), so that a shard that dies can be
restarted where the driver last saw its worlds."""

from __future__ import annotations

import time
import warnings

import numpy as np

from ..backend import ARCHES
from ..checks import integer
from ..errors import ArgumentError, BackendError, HydroError, SceneError, ShardError, ShardWarning
from ..advice import warn_unlikely
from ..joint import build_joint_layout
from ..model import build_model, check_supported
from ..params import parse_parameters, sample_values, scene_parameters
from ..scene import Scene
from ..solver import SolverOptions
from ..state import STATE_FIELDS, checked_checkpoint, checked_reset_state, checked_state, select_worlds
from ..types import FROZEN_REASONS
from .cluster import connect, shard_resources
from .faults import ON_FAULT, FaultRecord, Timeouts, is_fault, one_line
from .layout import Layout
from .worker import ShardWorker

__all__ = ["ShardedSimulator"]

CLOSE_WAIT_S = 30.0
"""How long close() waits for the shards to end their Taichi runtimes (ShardWorker.close,
which writes their compiled kernels to the offline cache) before it kills them [s]."""

SIMULATOR_OPTIONS = ("capacities", "max_capacity", "graph")
"""Keyword arguments of Simulator that ShardedSimulator(simulator_options) passes to each shard."""


class ShardedSimulator:
    """`worlds` copies of `scene` split over `shards` Ray actors, each with its own Taichi
    runtime and a Simulator over a contiguous slice of the worlds (layout.shard_ranges), with
    Simulator's batch API in global world indices: step, get_state, set_state, set_control,
    reset, set_parameters, sample_parameters, parameters, reset_parameters, checkpoint,
    restore, solver_stats, world_status, frozen_reasons, world_steps, step_totals, pair_forces,
    contact_forces, contact_surfaces. Each call goes to every shard at once and waits for all;
    results come back through Ray's object store (NumPy arrays read there without a copy) and
    are gathered into one array in global world order (one copy).

    arch: each shard's Taichi backend ("cpu", "vulkan", "cuda"); precision "f32" | "f64".
    cpus_per_shard, gpus_per_shard: the Ray resources of each shard (cluster.shard_resources:
      one GPU per shard for cuda; an equal share of the cluster's CPUs, and as many Taichi CPU
      threads, for cpu).
    cpu_threads: Taichi CPU threads of each cpu shard: "share" (default: as many as its whole
      CPUs, at least one), an integer, or None (Taichi's default, one per core of the node: the
      kernels a process on that node compiled with the default are then read from Taichi's
      offline cache, whose key includes the thread count, instead of compiled again).
    on_fault: "raise" (default): a shard that dies or misses its timeout raises ShardError
      naming its worlds, and stays down (every call raises) until recover() restarts it from
      the driver's checkpoint; "restart": it is restarted from that checkpoint at once, the
      call goes on (a step call is not repeated for it) and a ShardWarning says which worlds
      lost how many steps. Every fault is kept in `faults` (FaultRecord); world_steps() shows
      the steps each world has really taken.
    checkpoint_every: steps between two checkpoints taken during step() (each costs one
      transfer of the state); None: only get_state() and checkpoint() refresh it.
    timeouts: faults.Timeouts for starting a shard, every call, and step calls per world-step.
    address: the Ray cluster to join when Ray is not initialised in this process yet (None:
      Ray's default, a new local instance unless a cluster is running; cluster.connect). The
      package, and any mesh file the scene names (at the same path), must be on every node.
    simulator_options: Simulator keyword arguments for every shard (capacities, max_capacity,
      graph).

    What a restart cannot bring back: the warm start (the restarted worlds' next step starts
    cold, as after reset) and the solver statistics and step_totals sums of the shard before
    it died. Parameters and controls are the driver's copies, so they are exact."""

    def __init__(self, scene: Scene, worlds: int = 1, shards: int = 1, arch: str = "cpu", *, precision: str = "f32",
                 cpus_per_shard: float | None = None, gpus_per_shard: float | None = None, on_fault: str = "raise",
                 checkpoint_every: int | None = None, timeouts: Timeouts | None = None, address: str | None = None,
                 simulator_options: dict | None = None, cpu_threads: int | str | None = "share"):
        if not isinstance(scene, Scene):
            raise SceneError(f"ShardedSimulator needs a Scene (th.load_scene or th.scene_from_dict), got {type(scene).__name__}")
        self.layout = Layout(worlds, shards)
        if arch not in ARCHES:
            raise BackendError(f"unknown arch {arch!r}; choose one of {list(ARCHES)}")
        if precision not in ("f32", "f64") or (precision == "f64" and arch == "vulkan"):
            raise BackendError(f"precision {precision!r} is not available on {arch}; choose 'f32'"
                               + ("" if arch == "vulkan" else " or 'f64'"))
        if cpu_threads != "share" and cpu_threads is not None:
            cpu_threads = integer(cpu_threads, "ShardedSimulator(cpu_threads)", 1)
        if on_fault not in ON_FAULT:
            raise ArgumentError(f"ShardedSimulator(on_fault) must be one of {list(ON_FAULT)}, got {on_fault!r}")
        if checkpoint_every is not None:
            checkpoint_every = integer(checkpoint_every, "ShardedSimulator(checkpoint_every)", 1)
        timeouts = Timeouts() if timeouts is None else timeouts
        if not isinstance(timeouts, Timeouts):
            raise ArgumentError(f"ShardedSimulator(timeouts) must be a distributed.Timeouts, got {type(timeouts).__name__}")
        options = dict(simulator_options or {})
        unknown = sorted(set(options) - set(SIMULATOR_OPTIONS))
        if unknown:
            raise ArgumentError(f"ShardedSimulator(simulator_options): unknown key {unknown[0]!r}; choose from "
                                f"{list(SIMULATOR_OPTIONS)}")
        self.scene, self.worlds, self.shards = scene, self.layout.worlds, self.layout.shards
        self.arch, self.precision = arch, precision
        self.dt, self.on_fault, self.checkpoint_every, self.timeouts = scene.dt, on_fault, checkpoint_every, timeouts
        self._float = np.float64 if precision == "f64" else np.float32
        # The host model: checks and parameter arithmetic on the driver; warnings issued once here.
        self._data = build_model(scene)
        check_supported(self._data)
        warn_unlikely(scene, self._data, SolverOptions.resolve(scene.solver, arch, scene.source, joints=bool(scene.joints)),
                      precision)
        self._joint_layout = build_joint_layout(scene) if scene.joints else None
        self._joint_names = self._joint_layout.dof_names if scene.joints else []
        self._ray = connect(address)
        self._resources = shard_resources(arch, self.shards, cpus_per_shard, gpus_per_shard, self._ray.cluster_resources(),
                                          self._ray.available_resources())
        self._options = options
        self._cpu_threads = cpu_threads
        self._actor_class = self._ray.remote(ShardWorker)
        self._scene_ref = self._ray.put(scene)
        self._closed = False
        # What the driver keeps (see the module docstring).
        self.time, self.step_count = 0.0, 0
        self._world_steps = np.zeros(self.worlds, dtype=np.int64)
        self._params = scene_parameters(self._data, self.worlds)
        self._params_set: set[str] = set()  # parameters given since the start: a restarted shard gets exactly these
        self._controls: dict[str, np.ndarray | None] = {"force": None, "torque": None}  # None: zero
        self._joint_controls: dict[str, np.ndarray] = {}  # set_joint_control's values given since the start
        self._initial = self._initial_rows()
        self._checkpoint = [self._initial_checkpoint(b - a) for a, b in self.layout.ranges]
        self._since_checkpoint = 0
        self.faults: list[FaultRecord] = []
        self._down: dict[int, FaultRecord] = {}
        self._timing = {"calls": 0, "wall_s": 0.0, "slowest_shard_s": 0.0}
        self._shard_step_s = np.zeros(self.shards)
        self._shard_steps = np.zeros(self.shards, dtype=np.int64)
        self._restarts = np.zeros(self.shards, dtype=np.int64)
        self._actors: list = [None] * self.shards
        self._info: list[dict] = [{}] * self.shards
        self._start_shards(list(range(self.shards)))

    def __repr__(self) -> str:
        return (f"ShardedSimulator({self.scene.source!r}, worlds={self.worlds}, shards={self.shards}, arch={self.arch!r}, "
                f"on_fault={self.on_fault!r})")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def body_names(self) -> list[str]:
        return [b.name for b in self.scene.bodies]

    @property
    def ranges(self) -> tuple[tuple[int, int], ...]:
        """(first, stop) of each shard's worlds."""
        return self.layout.ranges

    # ----------------------------------------------------------------------------- shards

    def _initial_rows(self) -> dict[str, np.ndarray]:
        """The scene's initial state, (1, B, 3|4) in the device float, as a Simulator uploads it."""
        b, names = self.scene.bodies, self.body_names
        rows = ([x.p_WB for x in b], [x.q_WB for x in b], [x.v_WB for x in b], [x.w_WB for x in b])
        return {name: checked_state(name, [r], width, np.zeros(1, dtype=int), names, "scene", self._float).astype(self._float)
                for (name, width), r in zip(STATE_FIELDS, rows)}

    def _initial_checkpoint(self, n: int) -> dict[str, np.ndarray]:
        out = {name: np.repeat(rows, n, axis=0) for name, rows in self._initial.items()}
        out.update(world_status=np.zeros(n, dtype=np.int32), world_steps=np.zeros(n, dtype=np.int64))
        return out

    def _where(self, k: int) -> str:
        a, b = self.layout.ranges[k]
        return f"shard {k} (worlds {a}..{b - 1})"

    def _start_shards(self, shards: list[int]) -> None:
        """Start the given shards' actors and Simulators at once; on any failure kill the ones
        this call started and raise (the shard's own HydroError, or ShardError)."""
        cpus, gpus, threads = self._resources
        if self._cpu_threads != "share":
            threads = self._cpu_threads
        sizes = self.layout.sizes()
        actors = {k: self._actor_class.options(num_cpus=cpus, num_gpus=gpus, max_restarts=0, max_task_retries=0).remote()
                  for k in shards}
        refs = {k: actors[k].start.remote(self._scene_ref, sizes[k], self.arch, self.precision, threads, self._options)
                for k in shards}
        deadline = time.monotonic() + self.timeouts.start_s
        error = None
        for k, ref in refs.items():
            try:
                self._info[k] = self._ray.get(ref, timeout=max(0.0, deadline - time.monotonic()))
            except Exception as exc:  # noqa: BLE001 - every failure is reported, named by shard
                if error is None:
                    error = self._failure(k, "start", exc, self.timeouts.start_s)
        if error is not None:
            for actor in actors.values():
                self._kill(actor)
            raise error
        for k, actor in actors.items():
            self._actors[k] = actor

    def _kill(self, actor) -> None:
        try:
            self._ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - it may be gone already
            pass

    def _failure(self, k: int, label: str, exc: BaseException, timeout: float) -> HydroError:
        """The error to raise for shard k's failed `label`: its own HydroError re-raised with the
        shard named, or ShardError (dead, silent past its timeout, or another exception)."""
        a, b = self.layout.ranges[k]
        from ray.exceptions import GetTimeoutError

        if isinstance(exc, GetTimeoutError):
            cause = f"no answer to {label} within {timeout:.4g} s (distributed.Timeouts)"
            if label == "start":
                cause += self._waiting_for_resources()
            return ShardError(f"{self._where(k)}: {cause}", k, (a, b), cause)
        if is_fault(exc):
            cause = one_line(exc)
            return ShardError(f"{self._where(k)} died during {label}: {cause}", k, (a, b), cause)
        cause = getattr(exc, "cause", None) or exc
        where = f"{self._where(k)}, where world i is world {a} + i"
        if isinstance(cause, HydroError) and not isinstance(cause, ShardError):
            try:
                error = type(cause)(f"{where}: {cause}")
            except TypeError:
                error = ShardError(f"{where}: {label}: {cause}", k, (a, b), str(cause))
        else:
            error = ShardError(f"{where}: {label} raised {type(cause).__name__}: {one_line(cause)}", k, (a, b), one_line(cause))
        error.__cause__ = exc
        return error

    def _waiting_for_resources(self) -> str:
        """What a shard that did not start may be waiting for: the resources it asked Ray for and
        those the cluster has free now (Ray starts an actor only once its resources are free)."""
        cpus, gpus, _ = self._resources
        try:
            free = self._ray.available_resources()
        except Exception:  # noqa: BLE001 - the cluster itself may be gone: the timeout is the news
            return ""
        return (f"; it asked Ray for {cpus:g} CPU and {gpus:g} GPU, and the cluster has {free.get('CPU', 0.0):g} CPU and "
                f"{free.get('GPU', 0.0):g} GPU free now (a shard starts only once its resources are free: see "
                f"cpus_per_shard, gpus_per_shard)")

    def _require_open(self) -> None:
        if self._closed:
            raise BackendError("this ShardedSimulator was closed; make a new one")

    def _require_up(self) -> None:
        self._require_open()
        if self._down:
            k, record = next(iter(self._down.items()))
            raise ShardError(f"{self._where(k)} is down since {record.call} ({record.cause}); call recover() to restart "
                             f"it from the driver's checkpoint (world steps {_span(record.restored)})", k, record.worlds,
                             record.cause)

    def _call(self, method: str, args: dict[int, tuple], timeout, label: str, *, advance: int = 0, repeat: bool = True):
        """Call `method` with args[k] on every shard k of `args` at once; wait for each at most
        timeout(k) s. Returns ({shard: result}, error): error (None if all went well) is to be
        raised by the caller after its bookkeeping. A shard that died or missed its timeout is
        killed and handled by on_fault (_fault): restarted, and then, with `repeat`, asked again
        (its result is then in the dict); or marked down, with a ShardError. `advance`: steps
        the call would have advanced the shard's worlds (for the record of lost steps)."""
        refs = {k: getattr(self._actors[k], method).remote(*a) for k, a in args.items()}
        start = time.monotonic()
        results, faults, error = {}, {}, None
        for k, ref in refs.items():
            try:
                results[k] = self._ray.get(ref, timeout=max(0.0, start + timeout(k) - time.monotonic()))
            except Exception as exc:  # noqa: BLE001 - sorted below
                failure = self._failure(k, label, exc, timeout(k))
                if is_fault(exc):
                    faults[k] = failure
                elif error is None:
                    error = failure
        for k, failure in faults.items():
            self._kill(self._actors[k])
            record = self._record(k, label, failure.cause, advance)
            if self.on_fault == "raise":
                self._down[k] = record
                error = error or ShardError(f"{failure}. The driver's checkpoint of these worlds is at world steps "
                                            f"{_span(record.restored)} (they lose {_span(record.steps_lost)} steps): "
                                            "recover() restarts the shard from it; on_fault='restart' does so at once",
                                            k, record.worlds, record.cause)
                continue
            try:
                self._restart(k, record)
                warnings.warn(f"{failure}; restarted from the driver's checkpoint at world steps {_span(record.restored)}: its "
                              f"worlds lost {_span(record.steps_lost)} steps", ShardWarning, stacklevel=3)
                if repeat:
                    results[k] = self._ray.get(getattr(self._actors[k], method).remote(*args[k]), timeout=timeout(k))
            except Exception as exc:  # noqa: BLE001 - the restarted shard failed too: it is down
                self._down[k] = record
                error = error or (exc if isinstance(exc, HydroError) else self._failure(k, label, exc, timeout(k)))
        return results, error

    def _all(self, method: str, args=(), label: str | None = None) -> list:
        """`method`(*args) on every shard (the same arguments), results in shard order."""
        self._require_up()
        label = label or f"{method}()"
        results, error = self._call(method, {k: tuple(args) for k in range(self.shards)}, lambda k: self.timeouts.call_s, label)
        if error is not None:
            raise error
        return [results[k] for k in range(self.shards)]

    def _record(self, k: int, label: str, cause: str, advance: int) -> FaultRecord:
        a, b = self.layout.ranges[k]
        record = FaultRecord(shard=k, worlds=(a, b), call=label, cause=cause, step_count=self.step_count,
                             reached=self._world_steps[a:b] + advance, restored=self._checkpoint[k]["world_steps"].copy(),
                             wall_time=time.time())
        self.faults.append(record)
        return record

    def _restart(self, k: int, record: FaultRecord) -> None:
        """A new actor for shard k, given the driver's parameters, checkpoint and controls of its
        worlds; the record is marked restarted."""
        a, b = self.layout.ranges[k]
        self._start_shards([k])
        values = self._params.as_dict()
        parameters = {name: values[name][a:b] for name in self._params_set}
        force, torque = (None if v is None else v[a:b] for v in (self._controls["force"], self._controls["torque"]))
        try:
            self._ray.get(self._actors[k].restore.remote(self._checkpoint[k], force, torque, parameters),
                          timeout=self.timeouts.call_s)
        except Exception as exc:  # noqa: BLE001
            self._kill(self._actors[k])
            raise self._failure(k, "restore", exc, self.timeouts.call_s) from exc
        if self._joint_controls:
            values = {key: v[a:b] for key, v in self._joint_controls.items()}
            self._ray.get(self._actors[k].set_joint_control.remote(values), timeout=self.timeouts.call_s)
        self._world_steps[a:b] = self._checkpoint[k]["world_steps"]
        self._restarts[k] += 1
        record.restarted = True

    def recover(self) -> list[FaultRecord]:
        """Restart every shard that is down (on_fault="raise") from the driver's checkpoint of
        its worlds, with its parameters and controls; returns their fault records."""
        self._require_open()
        done = []
        for k, record in list(self._down.items()):
            self._restart(k, record)
            del self._down[k]
            done.append(record)
        return done

    def close(self) -> None:
        """End every shard's process (their device memory is freed); the object is unusable after.
        Each live shard first ends its Taichi runtime (ShardWorker.close: its compiled kernels
        go to Taichi's offline cache, for later shards and runs), waited for up to CLOSE_WAIT_S."""
        if self._closed:
            return
        live = [actor for k, actor in enumerate(self._actors) if actor is not None and k not in self._down]
        if live:
            try:
                self._ray.wait([actor.close.remote() for actor in live], num_returns=len(live), timeout=CLOSE_WAIT_S)
            except Exception:  # noqa: BLE001 - a shard that cannot end its runtime is killed below all the same
                pass
        for actor in self._actors:
            if actor is not None:
                self._kill(actor)
        self._closed = True

    # ----------------------------------------------------------------------------- stepping

    def step(self, steps: int = 1) -> None:
        """Advance every world by `steps` time steps, all shards at once (in chunks of
        checkpoint_every steps, with a checkpoint after each, when it is set)."""
        steps = integer(steps, "step(steps)", 0)
        self._require_up()
        done = 0
        while done < steps:
            n = steps - done
            if self.checkpoint_every is not None:
                n = min(n, self.checkpoint_every - self._since_checkpoint)
            self._step_call(n)
            done += n
            if self.checkpoint_every is not None:
                self._since_checkpoint += n
                if self._since_checkpoint >= self.checkpoint_every:
                    self._fetch_checkpoint()

    def _step_call(self, n: int) -> None:
        sizes = self.layout.sizes()
        t0 = time.perf_counter()
        results, error = self._call("step", {k: (n,) for k in range(self.shards)}, lambda k: self.timeouts.step(n, sizes[k]),
                                    f"step({n})", advance=n, repeat=False)
        wall = time.perf_counter() - t0
        for k, elapsed in results.items():
            a, b = self.layout.ranges[k]
            self._world_steps[a:b] += n
            self._shard_step_s[k] += elapsed
            self._shard_steps[k] += n
        self.step_count += n
        self.time += n * self.dt
        if len(results) == self.shards and error is None:  # timing of calls without faults only
            self._timing["calls"] += 1
            self._timing["wall_s"] += wall
            self._timing["slowest_shard_s"] += max(results.values())
        if error is not None:
            raise error

    def shard_timings(self) -> dict:
        """Where the time of the step calls went (calls in which every shard answered):
        calls; wall_s, their total on the driver; slowest_shard_s, the sum over calls of the
        slowest shard's own step time; overhead_s_per_call = (wall_s - slowest_shard_s) / calls,
        what Ray and the driver add to a step call. cpus_per_shard, gpus_per_shard: the resources
        Ray reserved for each shard. per_shard, for each shard: first_world, worlds, steps and
        step_s (its own stepping time, every call), world_steps_per_s, restarts, pid, host, node
        and gpus (of its current process)."""
        t = self._timing
        per_shard = []
        for k, (a, b) in enumerate(self.layout.ranges):
            step_s, steps = float(self._shard_step_s[k]), int(self._shard_steps[k])
            per_shard.append({"shard": k, "first_world": a, "worlds": b - a, "steps": steps, "step_s": step_s,
                              "world_steps_per_s": (b - a) * steps / step_s if step_s > 0 else None,
                              "restarts": int(self._restarts[k]), **self._info[k]})
        overhead = (t["wall_s"] - t["slowest_shard_s"]) / t["calls"] if t["calls"] else None
        cpus, gpus, _ = self._resources
        return {"calls": t["calls"], "wall_s": t["wall_s"], "slowest_shard_s": t["slowest_shard_s"],
                "overhead_s_per_call": overhead, "cpus_per_shard": cpus, "gpus_per_shard": gpus, "per_shard": per_shard}

    # ----------------------------------------------------------------------------- state

    def _fetch_checkpoint(self) -> list[dict]:
        """Every shard's checkpoint (its arrays stay in Ray's object store, read in place), kept
        as the driver's checkpoint with the driver's world step counts."""
        parts = self._all("checkpoint")
        for k, part in enumerate(parts):
            a, b = self.layout.ranges[k]
            self._checkpoint[k] = {**part, "world_steps": self._world_steps[a:b].copy()}
        self._since_checkpoint = 0
        return self._checkpoint

    def get_state(self) -> dict[str, np.ndarray]:
        """The state arrays of every world, (worlds, bodies, 3|4) float64 in global world order,
        keyed as in set_state (Simulator.get_state); also the driver's new checkpoint."""
        parts = self._fetch_checkpoint()
        return {name: self.layout.gather([p[name] for p in parts], dtype=np.float64) for name, _ in STATE_FIELDS}

    def checkpoint(self) -> dict[str, np.ndarray]:
        """Simulator.checkpoint() of the whole batch, in global world order (restore() of this
        or of a Simulator of the same scene and world count takes it); also the driver's new
        checkpoint."""
        parts = self._fetch_checkpoint()
        return {name: self.layout.gather([p[name] for p in parts]) for name in parts[0]}

    def restore(self, checkpoint: dict, force=None, torque=None) -> None:
        """Simulator.restore over the shards: every world as `checkpoint` has it, controls zero
        unless given; time and step_count restart from 0. Checked before any shard is called."""
        self._require_up()
        c = checked_checkpoint(checkpoint, self.worlds, len(self.body_names), self._float)
        controls = self._checked_controls(force, torque, "restore")
        self._checkpoint = [{name: v[a:b] for name, v in c.items()} for a, b in self.layout.ranges]
        self._world_steps[:] = c["world_steps"]
        self._controls = {name: controls.get(name) for name in ("force", "torque")}
        self._since_checkpoint = 0
        args = {}
        for k, (a, b) in enumerate(self.layout.ranges):
            part = self._checkpoint[k]
            f, t = (None if self._controls[n] is None else self._controls[n][a:b] for n in ("force", "torque"))
            args[k] = (part, f, t)
        self._each("restore", args, "restore()")
        self.time, self.step_count = 0.0, 0

    def _each(self, method: str, args: dict[int, tuple], label: str) -> dict:
        """`method` with per-shard arguments; raises the first error."""
        self._require_up()
        results, error = self._call(method, args, lambda k: self.timeouts.call_s, label)
        if error is not None:
            raise error
        return results

    def set_state(self, position=None, orientation=None, velocity=None, angular_velocity=None) -> None:
        """Simulator.set_state over the shards: arrays of shape (worlds, bodies, 3|4) in global
        world order [SI, world frame], every one checked before any shard is called (SceneError
        naming the body and world). The driver's checkpoint is then taken anew."""
        self._require_up()
        given = {name: value for (name, width), value in zip(STATE_FIELDS, (position, orientation, velocity, angular_velocity))
                 if value is not None}
        every = np.arange(self.worlds)
        raw = {}
        for name, width in STATE_FIELDS:
            if name in given:
                checked_state(name, given[name], width, every, self.body_names, "set_state", self._float)
                raw[name] = np.asarray(given[name], dtype=np.float64)  # the shard normalises exactly as Simulator does
        if not raw:
            return
        self._each("set_state", {k: ({n: v[a:b] for n, v in raw.items()},) for k, (a, b) in enumerate(self.layout.ranges)},
                   "set_state()")
        self._fetch_checkpoint()

    def _checked_controls(self, force, torque, caller: str) -> dict[str, np.ndarray]:
        every = np.arange(self.worlds)
        return {name: checked_state(name, value, 3, every, self.body_names, caller, self._float)
                for name, value in (("force", force), ("torque", torque)) if value is not None}

    def set_control(self, force=None, torque=None) -> None:
        """Simulator.set_control over the shards: force [N] and torque [N m] of shape (worlds,
        bodies, 3) at each body's centre of mass, world frame, kept until changed (the driver
        keeps a copy for restarts)."""
        self._require_up()
        controls = self._checked_controls(force, torque, "set_control")
        if not controls:
            return
        self._controls.update(controls)
        args = {k: tuple(controls[n][a:b] if n in controls else None for n in ("force", "torque"))
                for k, (a, b) in enumerate(self.layout.ranges)}
        self._each("set_control", args, "set_control()")

    def reset(self, worlds=None, state: dict | None = None) -> None:
        """Simulator.reset over the shards, `worlds` in global indices (None, a boolean mask of
        shape (worlds,), an index or an array of distinct indices) and state rows in the order
        given; only the shards holding a selected world are called (all with worlds=None, whose
        global clock restarts). Checked before any shard is called."""
        self._require_up()
        selected = select_worlds(worlds, self.worlds)
        checked = checked_reset_state(state, selected, self.body_names, self._float)
        if len(selected) == 0:
            return
        raw = {name: np.asarray(state[name], dtype=np.float64) for name in checked}  # the shard normalises as Simulator does
        args = {}
        for k, (positions, local) in enumerate(self.layout.split_selection(selected)):
            if len(local) == 0:
                continue
            part = {name: np.array(v) for name, v in self._checkpoint[k].items()}  # writable copies
            for name, _ in STATE_FIELDS:
                part[name][local] = checked[name][positions] if name in checked else self._initial[name][0]
            part["world_status"][local] = 0
            part["world_steps"][local] = 0
            self._checkpoint[k] = part
            rows = {name: v[positions] for name, v in raw.items()} if raw else None
            args[k] = (None if worlds is None else local, rows)
        for v in self._controls.values():
            if v is not None:
                v[selected] = 0.0
        for key, v in self._joint_controls.items():  # reset restores the scene's joint controls
            v[selected] = getattr(self._joint_layout, key)
        self._world_steps[selected] = 0
        self._each("reset", args, "reset()")
        if worlds is None:
            self.time, self.step_count = 0.0, 0

    def world_steps(self) -> np.ndarray:
        """(worlds,) int64: steps each world has taken since its last reset; a world of a
        restarted shard counts from its checkpoint (FaultRecord.steps_lost)."""
        self._require_up()
        return self._world_steps.copy()

    # ----------------------------------------------------------------------------- parameters

    def set_parameters(self, mass=None, friction=None, modulus=None, dissipation=None, gravity=None) -> None:
        """Simulator.set_parameters over the shards, arrays in global world order; every value
        is checked on the driver before any shard is called (SceneError naming the parameter,
        body, world and value)."""
        self._require_up()
        parsed = parse_parameters(self._data, self.worlds, self._float, mass=mass, friction=friction, modulus=modulus,
                                  dissipation=dissipation, gravity=gravity)
        if not parsed:
            return
        for name, value in parsed.items():
            setattr(self._params, name, value)
        self._params_set |= set(parsed)
        args = {k: ({n: v[a:b] for n, v in parsed.items()},) for k, (a, b) in enumerate(self.layout.ranges)}
        self._each("set_parameters", args, "set_parameters()")

    def sample_parameters(self, seed: int, **ranges) -> dict[str, np.ndarray]:
        """Simulator.sample_parameters: the draws are made on the driver for all worlds, so a
        seed gives every world the same values whatever the number of shards (and the values a
        Simulator of the same worlds draws)."""
        self._require_up()
        values = sample_values(seed, ranges, self._data, self.worlds)
        self.set_parameters(**values)
        return values

    def parameters(self) -> dict[str, np.ndarray]:
        """Current per-world values (copies; the driver's, which the shards hold):
        Simulator.parameters()."""
        self._require_open()
        return self._params.as_dict()

    def reset_parameters(self) -> None:
        """Every world back to the scene's parameters."""
        scene = scene_parameters(self._data, self.worlds)
        self.set_parameters(mass=scene.mass, friction=scene.friction, dissipation=scene.dissipation, modulus=scene.modulus,
                            gravity=scene.gravity)

    # ----------------------------------------------------------------------------- results

    def world_status(self) -> np.ndarray:
        """(worlds,) int32: Simulator.world_status of every world."""
        return self.layout.gather(self._all("world_status"))

    def frozen_reasons(self) -> dict[int, str]:
        """{world index: why it was frozen} for every frozen world."""
        status = self.world_status()
        return {int(w): FROZEN_REASONS.get(int(status[w]), f"status {int(status[w])}") for w in np.flatnonzero(status)}

    def solver_stats(self) -> dict[str, np.ndarray]:
        """Simulator.solver_stats of every world, (worlds,) arrays in global world order."""
        parts = self._all("solver_stats")
        return {key: self.layout.gather([p[key] for p in parts]) for key in parts[0]}

    def step_totals(self) -> dict[str, float]:
        """Sums over the shards since the last reset(): steps (the driver's step_count),
        polygons, contacts, solver iterations (all worlds). A restarted shard's sums start again
        at its restart."""
        parts = self._all("step_totals")
        totals = {key: float(sum(p[key] for p in parts)) for key in ("polygons", "contacts", "iterations")}
        return {"steps": float(self.step_count), **totals}

    def pair_forces(self) -> tuple[list[tuple[str, str]], np.ndarray]:
        """Simulator.pair_forces: the body pairs that can touch and every world's mean force
        over the last step on each pair's second body [N], (worlds, pairs, 3)."""
        parts = self._all("pair_forces")
        return parts[0][0], self.layout.gather([forces for _, forces in parts])

    def _one(self, method: str, world: int):
        """`method`(local index) on the shard holding global `world`."""
        if isinstance(world, bool) or not isinstance(world, (int, np.integer)) or not 0 <= world < self.worlds:
            raise SceneError(f"world must be an integer in [0, {self.worlds}), got {world!r}")
        k, local = self.layout.locate(int(world))
        return self._each(method, {k: (local,)}, f"{method}(world={world})")[k]

    def contact_forces(self, world: int = 0) -> dict[tuple[str, str], np.ndarray]:
        """Simulator.contact_forces of global world `world`."""
        return {pair: np.array(force) for pair, force in self._one("contact_forces", world).items()}

    def contact_surfaces(self, world: int = 0) -> list:
        """Simulator.contact_surfaces of global world `world` (computed by its shard)."""
        return self._one("contact_surfaces", world)

    # ----------------------------------------------------------------------------- joints

    @property
    def joint_names(self) -> list[str]:
        """Simulator.joint_names: the joints' degrees of freedom, in column order."""
        return list(self._joint_names)

    def joint_state(self) -> dict[str, np.ndarray]:
        """Simulator.joint_state of every world: position, velocity, effort (worlds, dofs), global
        world order."""
        parts = self._all("joint_state")
        return {key: self.layout.gather([p[key] for p in parts], dtype=np.float64) for key in parts[0]}

    def joint_forces(self) -> dict[str, np.ndarray]:
        """Simulator.joint_forces of every world: force, torque (worlds, joints, 3), global order."""
        parts = self._all("joint_forces")
        return {key: self.layout.gather([p[key] for p in parts], dtype=np.float64) for key in parts[0]}

    def set_joint_control(self, target=None, target_velocity=None, effort=None) -> None:
        """Simulator.set_joint_control over the shards: each value (worlds, dofs) in global world
        order or (dofs,) for every world; checked by the shards as Simulator checks it (the
        first error is raised). The driver keeps the values for restarts."""
        self._require_up()
        D = len(self._joint_names)
        given = {}
        for key, value in (("target", target), ("target_velocity", target_velocity), ("effort", effort)):
            if value is None:
                continue
            try:
                v = np.array(value, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise SceneError(f"set_joint_control: {key} must be numeric, got {value!r}") from exc
            if v.shape == (D,):
                v = np.broadcast_to(v, (self.worlds, D)).copy()
            if v.shape != (self.worlds, D):
                raise SceneError(f"set_joint_control: {key} must have shape ({D},) or ({self.worlds}, {D}) (worlds, dofs "
                                 f"{self._joint_names}), got shape {v.shape}")
            given[key] = v
        if not given:
            return
        self._each("set_joint_control", {k: ({key: v[a:b] for key, v in given.items()},)
                                         for k, (a, b) in enumerate(self.layout.ranges)}, "set_joint_control()")
        self._joint_controls.update(given)


def _span(values: np.ndarray) -> str:
    """'n' when every value is n, else 'lo..hi'."""
    lo, hi = int(np.min(values)), int(np.max(values))
    return f"{lo}" if lo == hi else f"{lo}..{hi}"
