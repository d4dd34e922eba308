"""Simulator: the containers of a batch of worlds, and the stages of a step."""

from __future__ import annotations

import time

import numpy as np
import taichi as ti

from . import hostcopy
from . import integrator as ig
from .access import WorldAccess, live
from .advice import warn_unlikely
from .backend import current_arch, generation, require_init, spend_launches
from .checks import integer
from .collision import Capacities, Collision
from .collision.surfaces import ContactSurface, group_surfaces
from .contact import ContactRows, WarmStartTable
from .contact import assemble as ca
from .contact import ordering as co
from .contact import patch_point as cp
from .contact import warmstart as cw
from .errors import BindingError, CapacityError, SceneError
from .joint import Joints, build_joint_layout
from .joint import kernels as jk
from .memory import backend_capacity_bytes, device_bytes
from .model import Model, build_model, check_supported
from .params import WorldParams
from .plan import Plan
from .scan import add_scan
from .scene import Scene
from .solver import BilateralRows, SolverData, SolverOptions, add_solve
from .solver.data import resolve_linear
from .state import Control, State
from .stats import track_counts
from .tactile import TactileSensor, TactileSensors, resolve_face
from .tactile.sensor import checked_grid
from .types import C_POLYGONS, COUNTER_SLOTS, S_CONTACTS, S_ITERATIONS, S_POLYGONS, S_STEPS, host_float

__all__ = ["Simulator"]


class Simulator(WorldAccess):
    """`worlds` independent copies of `scene`, stepped together on the device.

    Containers (each allocates and documents its own arrays): model (static, model.Model, with
    the host description model.host), state and control (state.State, state.Control), params
    (per-world parameters, params.WorldParams), collision (pools, collision.Collision), rows
    (contact.ContactRows), warm (contact.WarmStartTable), solver (solver.SolverData),
    bilateral (solver.BilateralRows: the rows of the joints, for the Newton solver), joints
    (joint.Joints: the scene's joints, their controls and measurements; None without joints).
    Every kernel argument is bound by name from them (plan.Plan).

    State per world (shape (worlds, bodies, ...)), world frame, for the body frame origin as
    the scene places it: position [m], orientation (w, x, y, z), velocity [m/s], angular
    velocity [rad/s]. Per-world physical parameters, partial resets and state access: see
    access.WorldAccess.

    capacities / max_capacity: initial pool sizes and the size no pool may grow past
    (collision.Capacities). graph: run each stage as one Taichi compute graph (faster launches;
    False runs kernels one by one, same results). chunk: steps between two checks of the pool
    counters; an overflow anywhere in a chunk restores the chunk's start state, grows the pools
    and reruns it, so no contact is ever dropped."""

    CHUNK = 16
    PROBE_WORLDS = 64  # _check_memory measures batches up to this size once allocated, and extrapolates past it

    def __init__(self, scene: Scene, worlds: int = 1, *, capacities: Capacities | None = None, max_capacity: int = 1 << 28,
                 graph: bool = True):
        require_init()
        self._generation = generation()
        if not isinstance(scene, Scene):
            raise SceneError(f"Simulator needs a Scene (th.load_scene or th.scene_from_dict), got {type(scene).__name__}")
        worlds = integer(worlds, "Simulator(worlds)", 1)
        self.scene, self.worlds, self.dt, self.graph = scene, int(worlds), scene.dt, graph
        host = build_model(scene)
        check_supported(host)
        self.options = resolve_linear(SolverOptions.resolve(scene.solver, current_arch(), scene.source, joints=bool(scene.joints)),
                                      self.worlds, host.body_count, scene.source, scene.solver.schedule)
        self.joint_layout = build_joint_layout(scene) if scene.joints else None
        warn_unlikely(scene, host, self.options)
        self.model = Model(host)
        if self.worlds > self.PROBE_WORLDS:
            self._check_memory(capacities)
        containers = self._world_containers(self.worlds, capacities, max_capacity)
        if self.worlds <= self.PROBE_WORLDS:
            self._check_memory(capacities, containers)
        for name, container in containers.items():
            setattr(self, name, container)
        self.max_counts = ti.ndarray(ti.i32, COUNTER_SLOTS)
        self.stat_sums = ti.ndarray(float, 8)
        self.tactile_sensors = TactileSensors()
        self._contact_fresh = False  # the pool and rows hold the last step's polygons and impulses
        self._step_plan = self._collide_plan = None
        self.time, self.step_count = 0.0, 0
        self._world_steps = np.zeros(self.worlds, dtype=np.int64)
        self._init_access()
        self.reset()

    def _world_containers(self, W: int, capacities: Capacities | None, max_capacity: int = 1 << 28) -> dict:
        """The containers whose size follows the world count (every one but the model)."""
        host = self.model.host
        B, P = host.body_count, host.pair_count
        collision = Collision(self.model, W, capacities, max_capacity, skin=self.scene.collision_skin)
        capacity = collision.pool.capacity
        bilateral = BilateralRows(W, B)
        joints = None
        if self.joint_layout is not None:
            joints = Joints(self.joint_layout, W)
            bilateral.uniform(self.joint_layout.rows_per_world)
        rows = ContactRows(W, B, P, capacity, self.options.patch_point)
        return {"state": State(W, B), "control": Control(W, B), "params": WorldParams(host, W, host_float()),
                "collision": collision, "rows": rows, "warm": WarmStartTable(W, P, capacity),
                "solver": SolverData(self.options, W, B, capacity, self.scene.source), "bilateral": bilateral, "joints": joints,
                "_saved_state": State(W, B).arrays(),  # a chunk's start state (step restores it after a pool overflow)
                # ... and the step before it's counts, which the chunk's first step adds to stat_sums (track_counts)
                "_saved_counts": {"world_start": ti.ndarray(ti.i32, W + 1), "world_iterations": ti.ndarray(ti.i32, W)}}

    def _check_memory(self, capacities: Capacities | None, containers: dict | None = None) -> None:
        """CapacityError when the batch needs more memory than the backend holds
        (memory.backend_capacity_bytes). Up to PROBE_WORLDS worlds, the batch's own `containers`
        are measured once allocated (memory.device_bytes); a larger batch is checked before it
        is allocated, extrapolated linearly from PROBE_WORLDS / 2 and PROBE_WORLDS worlds with
        the same pool rows per world (hashed tables sized in powers of two make this an upper
        bound, within 2x for them)."""
        W, probe = self.worlds, self.PROBE_WORLDS
        model = device_bytes(self.model)

        def measured(parts: dict) -> int:  # the model is shared (reachable from collision): counted once
            return device_bytes(parts, {id(self.model)})

        if containers is not None:
            estimate = model + measured(containers)
            per = (estimate - model) / W
        else:
            caps = capacities or Capacities.for_model(self.model, W)
            per_world = caps.as_tuple()
            small, large = (measured(self._world_containers(n, Capacities(*(max(1, -(-c * n // W)) for c in per_world))))
                            for n in (probe // 2, probe))
            per = (large - small) / (probe - probe // 2)
            estimate = int(model + large + per * (W - probe))
        limit = backend_capacity_bytes(current_arch())
        if limit is not None and estimate > limit:
            raise CapacityError(f"worlds = {W}: {self.scene.source} needs about {estimate / 1e9:.3g} GB of memory "
                                f"({per / 1e6:.3g} MB per world), and the {current_arch()} backend holds {limit / 1e9:.3g} GB: "
                                f"use at most about {max(0, int((limit - model) // max(per, 1)))} worlds")

    @property
    def settings(self):
        """The scene's [solver] table as given (SolverSettings); options holds it resolved."""
        return self.scene.solver

    @property
    def method(self) -> str:
        return self.options.method

    @property
    def schedule(self) -> str:
        return self.options.schedule

    @property
    def linear_solver(self) -> str | None:
        """How method newton solves its step in this batch: "cholesky" or "cg" ([solver]
        linear, with "auto" resolved for the batch's size: solver.data.choose_linear); None for
        the other methods."""
        return self.solver.linear

    # ----------------------------------------------------------------------------- bindings

    def bindings(self) -> dict:
        """Every array and scalar a launch may bind, by its one name (BindingError if two
        containers claim a name)."""
        out: dict = {}
        o = self.options
        parts = (self.model.arrays(), self.state.arrays(), self.control.arrays(), self.params.arrays(), self.collision.arrays(),
                 self.rows.arrays(), self.warm.arrays(), self.solver.arrays(), self.bilateral.arrays(),
                 self.joints.arrays() if self.joints is not None else {}, self.tactile_sensors.arrays(),
                 {"max_counts": self.max_counts, "stat_sums": self.stat_sums},
                 {"dt": float(self.dt), "iterations": int(o.iterations), "tolerance": float(o.tolerance),
                  "relaxation": float(o.relaxation), "beta": float(o.beta), "sigma": float(o.sigma),
                  "presweeps": int(o.presweeps)})
        for part in parts:
            twice = set(out) & set(part)
            if twice:
                raise BindingError(f"the name {sorted(twice)[0]!r} is claimed by two containers")
            out.update(part)
        return out

    @property
    def step_plan(self) -> Plan:
        """The launches of one step (built on first use); `stages` names where each stage ends."""
        if self._step_plan is None:
            self._step_plan = self._build_step_plan()
        return self._step_plan

    @property
    def stages(self) -> list[tuple[str, int]]:
        """(stage name, index of the launch after its last one) for collide, assemble, solve and
        integrate, in order."""
        _ = self.step_plan  # built with its stage ends
        return self._stage_ends

    def _resize_rows(self) -> None:
        """Contact rows and the warm-start table follow the polygon pool's capacity."""
        self.rows.resize(self.collision.pool.capacity)
        self.warm.resize(self.collision.pool.capacity)
        self.solver.resize(self.collision.pool.capacity)

    def _build_step_plan(self) -> Plan:
        """One time step (DESIGN §3): collide -> assemble -> solve -> integrate; the integrate
        stage starts with the images of the tactile sensors (tactile.raster)."""
        o = self.options
        plan = Plan("step", self.bindings())
        self.collision.add_launches(plan)
        plan.add(track_counts)
        stages = [("collide", len(plan.launches))]
        plan.add(ig.free_velocity)
        plan.add(cp.count_patches if o.patch_point else ca.count_contacts(o.deterministic))
        add_scan(plan, "world_start", "world_scratch", "world_count", "world_blocks", self.worlds)
        if o.deterministic:
            plan.add(co.pair_offsets)
            plan.add(co.scatter_rows)
            plan.add(co.rank_rows)
        plan.add(cp.assemble_patches if o.patch_point else ca.assemble_contacts(o.deterministic))
        if o.deterministic:
            plan.add(co.sum_pair_weights)
        if o.warm_start:
            plan.add(cw.look_up_impulses)
        plan.add(ca.finalize_contacts(o.warm_start, o.split))
        plan.add(cw.clear_table)
        if self.joints is not None:
            plan.add(jk.joint_rows)
        stages.append(("assemble", len(plan.launches)))
        add_solve(plan, o, self.solver)
        stages.append(("solve", len(plan.launches)))
        self.tactile_sensors.add_launches(plan)  # the polygons, their poses and solved impulses
        plan.add(ig.check_divergence)
        plan.add(ig.integrate)
        if o.deterministic:
            plan.add(co.sum_pair_impulses)
        plan.add(cw.store_impulses(accumulate=not o.deterministic))
        if self.joints is not None:
            plan.add(jk.joint_state)
        stages.append(("integrate", len(plan.launches)))
        self._stage_ends = stages
        return plan

    # ----------------------------------------------------------------------------- stepping

    def _chunk_arrays(self) -> dict:
        """What a step changes besides the warm-start table: the state, Newton's last solution
        (SolverData.carried), and with joints their positions (unwrapped angles), fresh flags
        and warm-start impulses."""
        out = dict(self.state.arrays())
        out.update(self.solver.carried())
        if self.joints is not None:
            out.update(joint_q=self.joints.joint_q, joint_fresh=self.joints.joint_fresh, b_gamma=self.bilateral.b_gamma)
        return out

    def _counted(self) -> dict:
        """The arrays of the step before that track_counts adds to stat_sums."""
        return {"world_start": self.rows.world_start, "world_iterations": self.solver.world_iterations}

    def _save(self) -> None:
        for name, arr in self._chunk_arrays().items():
            if name not in self._saved_state:  # the joints' and solver's arrays (scalar): a copy made on first use
                self._saved_state[name] = ti.ndarray(arr.dtype, arr.shape)
            hostcopy.copy(self._saved_state[name], arr)
        for name, arr in self._counted().items():
            hostcopy.copy(self._saved_counts[name], arr)
        self.warm.save()

    def _restore(self) -> None:
        for name, arr in self._chunk_arrays().items():
            hostcopy.copy(arr, self._saved_state[name])
        for name, arr in self._counted().items():
            hostcopy.copy(arr, self._saved_counts[name])
        self.warm.restore()

    @live
    def step(self, steps: int = 1) -> None:
        """Advance every world by `steps` time steps of scene.dt. Pools that overflow grow and
        the affected chunk of steps is recomputed from its start (never a dropped contact)."""
        steps = integer(steps, "step(steps)", 0)
        spend_launches(steps * len(self.step_plan.launches), check_only=True)

        def run(args: dict, chunk: int) -> None:
            for _ in range(chunk):
                self._step_plan.run(args, graph=self.graph)

        self._advance(steps, run)

    def _advance(self, steps: int, run) -> list:
        """Advance `steps` steps in chunks of at most CHUNK, run(bindings, chunk) stepping each
        chunk; a chunk in which a pool overflowed goes back to its start (state, warm-start table
        and statistics), the pools grow and the chunk runs again. Returns run's results of the
        chunks kept, in order (an overflowed attempt's is dropped)."""
        done, kept = 0, []
        while done < steps:
            chunk = min(self.CHUNK, steps - done)
            self._resize_rows()
            args = self.bindings()
            self._save()
            sums_before = hostcopy.to_numpy(self.stat_sums)
            while True:
                self.max_counts.fill(0)
                result = run(args, chunk)
                grown = self.collision.overflow(hostcopy.to_numpy(self.max_counts))
                if grown is None:
                    break
                # Back to the chunk's start, warm-start table included (copied over if it grows).
                self._restore()
                hostcopy.from_numpy(self.stat_sums, sums_before)
                self.collision.grow(grown)
                self._resize_rows()
                args = self.bindings()
                self._save()
            kept.append(result)
            done += chunk
            self._contact_fresh = True
            self.step_count += chunk
            self._world_steps += chunk
            self.time += chunk * self.dt
        return kept

    @live
    def profile_stages(self, steps: int = 1) -> dict[str, float]:
        """Advance `steps` time steps with one kernel launch at a time and a device sync after
        each stage, and return the wall time per stage [s per step]: collide (broad and narrow
        phase), assemble (contact rows, warm start), solve (cone complementarity), integrate.
        The syncs make this slower than step(); use it for where the time goes, not for
        throughput. Pools that overflow grow and the chunk reruns, as in step(); the times of
        an overflowed attempt are dropped."""
        steps = integer(steps, "profile_stages(steps)", 1)
        launches = self.step_plan.launches
        spend_launches(steps * len(launches), check_only=True)

        def run(bindings: dict, chunk: int) -> dict[str, float]:
            spend_launches(chunk * len(launches))
            args = {**bindings, **self._step_plan.constants}
            totals = dict.fromkeys((name for name, _ in self._stage_ends), 0.0)
            ti.sync()
            for _ in range(chunk):
                start = 0
                for name, end in self._stage_ends:
                    t0 = time.perf_counter()
                    for kernel, names in launches[start:end]:
                        kernel(*(args[n] for n in names))
                    ti.sync()
                    totals[name] += time.perf_counter() - t0
                    start = end
            return totals

        kept = self._advance(steps, run)
        return {name: sum(t[name] for t in kept) / steps for name, _ in self._stage_ends}

    @live
    def collide(self) -> np.ndarray:
        """Compute the contact polygons of every world at the current poses (the collision
        stage of a step). Returns the pool counters."""
        if self._collide_plan is None:
            self._collide_plan = Plan("collide", self.bindings())
            self.collision.add_launches(self._collide_plan)
        self._contact_fresh = False  # the pool no longer matches the last step's rows
        return self.collision.run(self._collide_plan, self.bindings(), self.graph)

    @live
    def contact_surfaces(self, world: int = 0) -> list[ContactSurface]:
        """Contact surfaces of `world` at the current poses, per body pair in scene order."""
        self._check_world(world)
        counts = self.collide()
        pool = self.collision.pool.to_numpy(int(counts[C_POLYGONS]))
        spend_launches(1)
        return group_surfaces(pool, world, self.model.host, hostcopy.to_numpy(self.collision.pair_deep)[world])

    # ----------------------------------------------------------------------------- statistics

    @live
    def solver_stats(self) -> dict[str, np.ndarray]:
        """Last step, per world: solver iterations (sweeps), final residual [m/s], contact count,
        contact updates (Gauss-Seidel skips the contacts of bodies that have settled, so
        updates <= iterations x contacts; the contact schedule updates every contact of a
        world each sweep; Newton counts its line search's evaluations, its presweeps' updates and,
        with linear "cg", each Hessian product's rows too), and
        linear_iterations: the conjugate-gradient iterations of Newton's steps (linear "cg",
        summed over the solve's Newton iterations; 0 for every other solver, see
        linear_solver), and islands: the groups of bodies that Newton on the world schedule
        solved apart (bodies joined by contacts or joints between mobile bodies; a body alone,
        or an immobile one, is an island of its own; 0 for every other solver, and on the
        block schedule, which solves a world whole). Newton's iterations are then its slowest
        island's."""
        s = self.solver
        islands = hasattr(s, "world_islands")
        spend_launches((5 if s.cg else 4) + (1 if islands else 0))
        iterations = hostcopy.to_numpy(s.world_iterations).astype(int)
        contacts = hostcopy.to_numpy(s.world_contacts).astype(int)
        world_rows = self.options.schedule in ("world", "block")
        updates = hostcopy.to_numpy(s.world_updates).astype(int) if world_rows else iterations * contacts
        linear = hostcopy.to_numpy(s.world_linear_iterations).astype(int) if s.cg else np.zeros(self.worlds, int)
        return {"iterations": iterations, "residual": hostcopy.to_numpy(s.world_residual), "contacts": contacts,
                "updates": updates, "linear_iterations": linear,
                "islands": hostcopy.to_numpy(s.world_islands).astype(int) if islands else np.zeros(self.worlds, int)}

    @live
    def step_totals(self) -> dict[str, float]:
        """Sums since reset: steps, polygons (all worlds), contacts, solver iterations."""
        spend_launches(1)
        s = hostcopy.to_numpy(self.stat_sums)
        return {"steps": float(s[S_STEPS]), "polygons": float(s[S_POLYGONS]), "contacts": float(s[S_CONTACTS]),
                "iterations": float(s[S_ITERATIONS])}

    @live
    def contact_forces(self, world: int = 0) -> dict[tuple[str, str], np.ndarray]:
        """Mean contact force over the last step between each body pair in contact, on the pair's
        second body (scene order) from the first: total solved impulse / dt [N], world frame."""
        self._check_world(world)
        names, forces = self.pair_forces()
        return {pair: forces[world, i] for i, pair in enumerate(names) if np.any(forces[world, i] != 0)}

    @live
    def pair_forces(self) -> tuple[list[tuple[str, str]], np.ndarray]:
        """Every world's contact forces at once: the body pairs that can touch (names, scene
        order) and, for each world and pair, the mean force over the last step on the pair's
        second body from the first [N], world frame, shape (worlds, pairs, 3); zero where the pair
        is apart (contact_forces of one world, without the pairs that are apart)."""
        spend_launches(1)
        impulse = hostcopy.to_numpy(self.warm.pair_impulse).astype(np.float64)
        names, column = self.model.host.body_pairs
        out = np.zeros((self.worlds, len(names), 3))
        np.add.at(out, (slice(None), column), impulse[:, :len(column)] / self.dt)  # in pair order, as a loop would
        return names, out

    # ----------------------------------------------------------------------------- tactile

    @live
    def tactile_sensor(self, body, grid=(16, 16), geometry: str | None = None, face=None) -> TactileSensor:
        """The tactile sensor of a face of `body` (name or index), whose images every step makes
        from then on (tactile.TactileSensor: pressure and shear, (worlds, rows, cols) [Pa], as
        NumPy copies or zero-copy torch views). geometry: the name of one
        of the body's geometries (None: its only one); face: a box side "+x" ... "-z" in the
        geometry frame, a dict {"center", "normal", "u", "size"} (geometry frame, m), or None:
        the box's largest side farther from the body's centre of mass (tactile.face); grid:
        (rows, cols), rows along the face's v axis, columns along u. The same arguments give
        the same sensor. A sensor made between steps is drawn at once from the last step's
        polygons and impulses, placed at the body's current pose (it moved by v dt since
        they were computed), or is zero when there is no such step (none yet, or
        contact_surfaces() has recomputed the polygons since); from its first step on, at the
        poses the polygons were computed at. SceneError for a bad body, geometry, face or grid."""
        grid = checked_grid(grid)
        key = (body, geometry, repr(face), grid)
        sensor = self.tactile_sensors.find(key)
        if sensor is not None:
            return sensor
        sensor = self.tactile_sensors.add(key, resolve_face(self.model.host, body, geometry, face), grid, self.worlds)
        self._step_plan = None  # the step now makes its images too
        if self._contact_fresh:
            now = Plan("tactile", self.bindings())
            sensor.add_launch(now)
            now.run(self.bindings())
        return sensor

    def tactile(self, body, grid=(16, 16), geometry: str | None = None, face=None, as_torch: bool = False) -> dict:
        """The last step's tactile images of a face of `body` (arguments as tactile_sensor,
        which makes the sensor on the first call): {"pressure": (worlds, rows, cols) [Pa],
        "shear": (worlds, rows, cols, 2) [Pa]}, NumPy copies, or with as_torch=True zero-copy
        torch views (cpu and cuda backends), current after every later step as well."""
        sensor = self.tactile_sensor(body, grid, geometry, face)
        if as_torch:
            return sensor.tensors()
        return {"pressure": sensor.pressure(), "shear": sensor.shear()}
