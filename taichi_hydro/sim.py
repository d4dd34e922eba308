"""Simulator: the model, the batched state of every world, and the stages of a step."""

from __future__ import annotations

import functools
import time

import numpy as np
import taichi as ti

from . import batch
from . import contacts as ct
from . import deterministic as dm
from . import integrator as ig
from . import interop
from . import solver as sv
from . import warmstart as ws
from .backend import current_arch, current_precision, generation, require_generation, require_init, spend_launches
from .broadphase import C_POLYGONS
from .collision import Capacities, Collision
from .errors import CapacityError, SceneError
from .model import P_BODY_HI, P_BODY_LO, DeviceModel, build_model, check_supported
from .plan import Plan, ndarray_dtype
from .scan import block_count, block_sum_size, scan_add, scan_blocks, scan_sums
from .scene import Scene
from .stats import track_counts
from .surfaces import ContactSurface, group_surfaces

__all__ = ["Simulator"]


def _live(method):
    """Refuse (BackendError) a call on a Simulator whose Taichi runtime has ended."""

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        require_generation(self._generation, "this Simulator")
        return method(self, *args, **kwargs)

    return call


class Simulator:
    """`worlds` independent copies of `scene`, stepped together on the device.

    State per world (shape (worlds, bodies, ...)): body_p_WB [m], body_q_WB (w, x, y, z),
    body_v_WB [m/s], body_w_WB [rad/s], all in the world frame, for the body frame origin as
    the scene places it.

    Per-world physical parameters (set_parameters, sample_parameters, parameters): body mass
    [kg], friction [-], Hunt-Crossley dissipation [s/m], hydroelastic modulus [Pa] and gravity
    [m/s^2] may differ from world to world; a world then behaves as a one-world simulation of
    the scene with its values (to float32 round-off). They start at the scene's values and
    persist across reset(), which restores state only (reset_parameters restores them).

    Partial resets: reset(worlds, state) puts selected worlds back to the initial state (or a
    given one) on the device and leaves the others untouched bit for bit. time and step_count
    are global (steps since the last full reset); world_steps() counts per world the steps
    since that world's last reset (episode lengths).

    capacities / max_capacity: initial pool sizes and the size no pool may grow past
    (collision.Capacities). graph: run each stage as one Taichi compute graph (faster launches;
    False runs kernels one by one, same results). chunk: steps between two checks of the pool
    counters; an overflow anywhere in a chunk restores the chunk's start state, grows the pools
    and reruns it, so no contact is ever dropped."""

    CHUNK = 16

    def __init__(self, scene: Scene, worlds: int = 1, *, capacities: Capacities | None = None, max_capacity: int = 1 << 28,
                 graph: bool = True):
        require_init()
        self._generation = generation()
        if not isinstance(worlds, (int, np.integer)) or worlds < 1:
            raise SceneError(f"worlds must be a positive integer, got {worlds!r}")
        self.scene = scene
        self.worlds = int(worlds)
        self.data = build_model(scene)
        check_supported(self.data)
        self.model = DeviceModel(self.data)
        B = len(scene.bodies)
        self.body_p_WB = ti.ndarray(ti.math.vec3, (self.worlds, B))
        self.body_q_WB = ti.ndarray(ti.math.vec4, (self.worlds, B))
        self.body_v_WB = ti.ndarray(ti.math.vec3, (self.worlds, B))
        self.body_w_WB = ti.ndarray(ti.math.vec3, (self.worlds, B))
        self.world_status_array = ti.ndarray(ti.i32, self.worlds)
        self.collision = Collision(self.model, self.worlds, capacities, max_capacity, use_graph=graph,
                                   world_status=self.world_status_array)
        self.graph = graph
        self.settings = scene.solver
        self.schedule = self.settings.schedule
        if self.schedule == "auto":
            self.schedule = "contact" if current_arch() == "cuda" else "world"
        self.method = self.settings.method
        if self.method == "auto":
            self.method = "gauss_seidel" if self.schedule == "world" else "accelerated"
        if self.method == "gauss_seidel" and self.schedule == "contact":
            raise SceneError(f"{scene.source}: [solver] method gauss_seidel needs schedule \"world\"")
        self.dt = scene.dt
        self._allocate_dynamics()
        self._init_parameters()
        self.reset()

    def _allocate_dynamics(self) -> None:
        """Arrays of the dynamics stages (per world, per body, per pair)."""
        W, B, P = self.worlds, len(self.scene.bodies), max(self.model.pair_count, 1)
        vec3, vec4, mat3 = ti.math.vec3, ti.math.vec4, ti.math.mat3
        self.body_vc = ti.ndarray(vec3, (W, B))
        self.body_wc = ti.ndarray(vec3, (W, B))
        self.body_dv = ti.ndarray(vec3, (W, B))
        self.body_dw = ti.ndarray(vec3, (W, B))
        self.body_inv_inertia_W = ti.ndarray(mat3, (W, B))
        self.body_force = ti.ndarray(vec3, (W, B))
        self.body_torque = ti.ndarray(vec3, (W, B))
        self.world_stats = ti.ndarray(vec4, W)
        self.world_residual = ti.ndarray(float, W)
        self.world_momentum = ti.ndarray(float, W)
        self.world_beta = ti.ndarray(float, W)
        self.body_vx = ti.ndarray(vec3, (W, B))
        self.body_awake = ti.ndarray(ti.i32, (W, B) if self.schedule == "world" else (1, 1))  # Gauss-Seidel's sleep
        self.body_wx = ti.ndarray(vec3, (W, B))
        self.world_restart = ti.ndarray(float, W)
        self.world_start = ti.ndarray(ti.i32, W + 1)
        self.world_cursor = ti.ndarray(ti.i32, W + 1)
        self.world_scratch = ti.ndarray(ti.i32, block_sum_size(W))
        self.body_contacts = ti.ndarray(ti.i32, (W, B))
        self.pair_scale = ti.ndarray(float, (W, P))
        self.pair_weight = ti.ndarray(float, (W, P))
        self.pair_impulse = ti.ndarray(vec3, (W, P))
        self.pair_rows = ti.ndarray(ti.i32, (W, P))
        self.pair_first = ti.ndarray(ti.i32, (W, P))
        self.pair_end = ti.ndarray(ti.i32, (W, P))
        self.body_pair_start, self.body_pairs = self._body_pairs()
        self.max_counts = ti.ndarray(ti.i32, 8)
        self.stat_sums = ti.ndarray(float, 8)
        self._snapshot = {k: ti.ndarray(ndarray_dtype(v), v.shape) for k, v in self._state_arrays().items()}
        self.world_row = ti.ndarray(ti.i32, W)
        self._initial = self._initial_state()
        self._rows_capacity = -1
        self._step_plan = None
        self.time = 0.0
        self.step_count = 0
        self._world_steps = np.zeros(W, dtype=np.int64)

    def _body_pairs(self):
        """The pairs each body takes part in, as device arrays (start (B + 1,), pairs): the
        gather lists of the deterministic mode."""
        B, pair_i = len(self.scene.bodies), self.data.pair_i
        bodies = np.concatenate([pair_i[:, P_BODY_LO], pair_i[:, P_BODY_HI]])
        pairs = np.tile(np.arange(len(pair_i), dtype=np.int32), 2)
        order = np.lexsort((pairs, bodies))  # by body, then pair
        start = np.concatenate([[0], np.cumsum(np.bincount(bodies, minlength=B))]).astype(np.int32)
        flat = pairs[order] if len(order) else np.zeros(1, dtype=np.int32)
        out = ti.ndarray(ti.i32, B + 1), ti.ndarray(ti.i32, len(flat))
        spend_launches(2)
        out[0].from_numpy(start)
        out[1].from_numpy(flat)
        return out

    def _initial_state(self) -> dict:
        """The scene's initial state as one-row device arrays (1, B), the staging rows of reset."""
        b = self.scene.bodies
        out = {}
        for (name, width), rows in zip(batch.STATE_FIELDS, ([x.p_WB for x in b], [x.q_WB for x in b], [x.v_WB for x in b],
                                                           [x.w_WB for x in b])):
            v = batch.checked_state(name, [rows], width, np.zeros(1, dtype=int), self.body_names, "scene")
            out[name] = self._upload_rows(v)
        return out

    def _upload_rows(self, v: np.ndarray):
        """A new (n, B) vec3/vec4 ndarray holding v (n, B, 3|4), in the device float type."""
        arr = ti.ndarray(ti.types.vector(v.shape[2], float), v.shape[:2])
        spend_launches(1)
        arr.from_numpy(np.ascontiguousarray(v, dtype=self._float()))
        return arr

    def _state_arrays(self) -> dict:
        return {"body_p": self.body_p_WB, "body_q": self.body_q_WB, "body_v": self.body_v_WB, "body_w": self.body_w_WB,
                "pair_impulse": self.pair_impulse, "world_status": self.world_status_array}

    def _state_fields(self) -> dict:
        """The state arrays keyed as get_state / set_state name them."""
        return {"position": self.body_p_WB, "orientation": self.body_q_WB, "velocity": self.body_v_WB,
                "angular_velocity": self.body_w_WB}

    @property
    def body_names(self) -> list[str]:
        return [b.name for b in self.scene.bodies]

    def _float(self):
        return np.float64 if current_precision() == "f64" else np.float32

    @_live
    def reset(self, worlds=None, state: dict | None = None) -> None:
        """Put worlds back to the scene's initial state, or to `state`, on the device.

        worlds: None (every world), a boolean mask of shape (worlds,), a world index or an array
        of distinct indices. state: None, or a dict with any of the keys position (n, B, 3) [m],
        orientation (n, B, 4) (w, x, y, z; normalised), velocity (n, B, 3) [m/s],
        angular_velocity (n, B, 3) [rad/s] (world frame, body frame origin; row i for the i-th
        selected world, in the order given, ascending for a mask); missing keys take the scene's
        initial values. Only the selected rows are uploaded.

        A reset world also loses its controls (set_control), its warm start (pair impulses and
        stored per-polygon impulses: its next step starts cold, like a fresh simulator), its
        divergence flag and solver statistics, and its world_steps() count; every other world
        is untouched bit for bit. Per-world parameters persist (reset_parameters restores
        them). With worlds=None the global clock also restarts: time, step_count and
        step_totals() go to 0. Raises SceneError for a bad selection or state."""
        selected = batch.select_worlds(worlds, self.worlds)
        stage = self._stage_state(state, selected)
        if len(selected) == 0:
            return
        rows = np.full(self.worlds, -1, dtype=np.int32)
        rows[selected] = np.arange(len(selected), dtype=np.int32)
        spend_launches(2)
        self.world_row.from_numpy(rows)
        batch.reset_worlds(self.world_row, stage["position"], stage["orientation"], stage["velocity"], stage["angular_velocity"],
                           self.body_p_WB, self.body_q_WB, self.body_v_WB, self.body_w_WB, self.body_force, self.body_torque,
                           self.pair_impulse, self.world_status_array, self.world_stats)
        if self._rows_capacity >= 0:
            spend_launches(1)
            ws.forget_worlds(self.world_row, self.table_key, self.table_occ)
        self._world_steps[selected] = 0
        if worlds is None:
            spend_launches(1)
            self.stat_sums.fill(0)
            self.time = 0.0
            self.step_count = 0

    def _stage_state(self, state: dict | None, selected: np.ndarray) -> dict:
        """Staging arrays of reset: the given rows (n, B) uploaded, the scene's (1, B) otherwise."""
        state = {} if state is None else state
        keys = [name for name, _ in batch.STATE_FIELDS]
        if not isinstance(state, dict):
            raise SceneError(f"reset: state must be a dict with keys {keys}, got {type(state).__name__}")
        unknown = sorted(set(state) - set(keys))
        if unknown:
            raise SceneError(f"reset: unknown state key {unknown[0]!r}; choose from {keys}")
        checked = {name: batch.checked_state(name, state[name], width, selected, self.body_names, "reset")
                   for name, width in batch.STATE_FIELDS if name in state}
        if len(selected) == 0:
            return {}
        return {name: self._upload_rows(checked[name]) if name in checked else self._initial[name] for name in keys}

    def world_steps(self) -> np.ndarray:
        """(worlds,) int64: steps each world has taken since its last reset (a diverged world is
        frozen but still counts)."""
        return self._world_steps.copy()

    @_live
    def set_state(self, position=None, orientation=None, velocity=None, angular_velocity=None) -> None:
        """Overwrite state arrays of shape (worlds, bodies, 3) or (worlds, bodies, 4) [SI,
        world frame]; orientations are normalised. Non-finite values raise SceneError.

        Each value is array-like (copied from the host) or a torch tensor on the device the
        backend reads in place (cuda tensors with "cuda", cpu tensors otherwise): then one
        kernel copies it on the device and checks it there (no host copy of the state)."""
        every = np.arange(self.worlds)
        for (name, width), value, arr in zip(batch.STATE_FIELDS, (position, orientation, velocity, angular_velocity),
                                             self._state_fields().values()):
            if value is None:
                continue
            if interop.is_tensor(value):
                self._rows_from_tensor(name, value, arr, width, normalise=width == 4)
                continue
            v = batch.checked_state(name, value, width, every, self.body_names, "set_state")
            spend_launches(1)
            arr.from_numpy(np.ascontiguousarray(v, dtype=self._float()))

    def _rows_from_tensor(self, name: str, value, arr, width: int, normalise: bool = False) -> None:
        """arr[w, b] = value[w, b, :] on the device; a non-finite row (or a zero quaternion)
        raises SceneError naming the world and body, and leaves that row unchanged."""
        B = len(self.scene.bodies)
        interop.check_tensor_shape(name, value, (self.worlds, B, width))
        bad = np.array([0, np.iinfo(np.int32).max], dtype=np.int32)
        spend_launches(2)
        if interop.rows_from_external(value.contiguous(), arr, width, normalise, bad) > 0:
            w, b = divmod(int(bad[1]), B)
            row = value[w, b].detach().cpu().tolist()
            raise SceneError(f"{name} of body '{self.scene.bodies[b].name}' in world {w} is not finite"
                             f"{' or has zero norm' if normalise else ''}: {row} ({int(bad[0])} such rows; the others were written)")

    # ----------------------------------------------------------------------------- parameters

    def _init_parameters(self) -> None:
        """The scene's parameters; device arrays shared by all worlds until set_parameters."""
        m = self.model
        self._params = batch.scene_parameters(self.data, self.worlds)
        self.body_inv_mass = m.body_inv_mass
        self.body_inv_inertia_B = m.body_inv_inertia_B
        self.pair_f = m.pair_f
        self.gravity = ti.ndarray(ti.math.vec3, 1)
        spend_launches(1)
        self.gravity.from_numpy(np.array([self.scene.gravity], dtype=self._float()))
        self._per_world: set[str] = set()

    def _upload_parameter(self, name: str, dtype, shape: tuple, values: np.ndarray) -> None:
        """Upload `values` into the per-world array `name` of element type `dtype` and shape
        `shape` (leading dimension: worlds), allocated on first use in place of the shared one."""
        if name not in self._per_world:
            setattr(self, name, ti.ndarray(dtype, shape))
            self._per_world.add(name)
        spend_launches(1)
        getattr(self, name).from_numpy(np.ascontiguousarray(values, dtype=self._float()))

    @_live
    def set_parameters(self, mass=None, friction=None, modulus=None, dissipation=None, gravity=None) -> None:
        """Per-world physical parameters, each optional (None keeps the current values):

        mass [kg]: of dynamic bodies; inertia scales in proportion (same density
          distribution, I = I_scene m / m_scene) and the centre of mass does not move.
        friction [-]: Coulomb coefficient of each body, combined per pair as the scene does
          (mu = 2 mu_a mu_b / (mu_a + mu_b)).
        modulus [Pa]: hydroelastic modulus E of compliant bodies; scales the body's pressure
          field by E / E_scene in that world (a slab's E/H too).
        dissipation [s/m]: Hunt-Crossley d of each body, combined per pair as the scene does
          (the compliant side's d against a rigid body, else weighted by the moduli).
        gravity [m/s^2]: shape (3,) (every world) or (worlds, 3).

        Body parameters take a scalar (every body it applies to, every world), a (bodies,) row
        (every world) or a (worlds, bodies) array, bodies in scene order. A parameter that does
        not apply to a body (the mass of a static or kinematic body, the modulus of a rigid
        one) must be NaN there (parameters() reports NaN). Every value is checked before any is
        applied: a wrong shape or a non-finite, negative (or zero mass or modulus) value raises
        SceneError naming the parameter, body, world and value. Persist across reset()."""
        parsed = {name: batch.parse_body_parameter(name, value, self.data, self.worlds)
                  for name, value in (("mass", mass), ("friction", friction), ("dissipation", dissipation), ("modulus", modulus))
                  if value is not None}
        g = batch.parse_gravity(gravity, self.worlds) if gravity is not None else None
        W, B = self.worlds, self.data.body_count
        for name, value in parsed.items():
            setattr(self._params, name, value)
        if g is not None:
            self._params.gravity = g
            self._upload_parameter("gravity", ti.math.vec3, (W,), g)
        if "mass" in parsed:
            inv_mass, inv_inertia = batch.inverse_mass_inertia(self.data, self._params.mass)
            self._upload_parameter("body_inv_mass", float, (W, B), inv_mass)
            self._upload_parameter("body_inv_inertia_B", ti.math.mat3, (W, B), inv_inertia)
        if {"friction", "dissipation", "modulus"} & set(parsed) and self.data.pair_count:
            pair_f = batch.pair_parameters(self.data, self._params)
            self._upload_parameter("pair_f", ti.math.vec4, (W, self.data.pair_count), pair_f)
        if "modulus" in parsed:
            scale = batch.pressure_scale(self.data, self._params.modulus)
            self._upload_parameter("geom_scale", float, (W, self.model.geom_count), scale)
            self.collision.set_geom_scale(self.geom_scale)

    def sample_parameters(self, seed: int, **ranges) -> dict[str, np.ndarray]:
        """Draw per-world parameters uniformly and apply them (set_parameters); returns the
        applied arrays (keyed as set_parameters takes them) so they can be logged. Keys (each
        a (low, high) pair): mass, modulus: factor of the scene's value, drawn per (world,
        body); friction [-], dissipation [s/m]: absolute, per (world, body); gravity_x,
        gravity_y, gravity_z [m/s^2]: absolute, per world (components not given keep the
        scene's value). Deterministic for a seed; each key has its own random stream, so a
        key's draws do not depend on the other keys given. Example:
        sim.sample_parameters(0, mass=(0.8, 1.2), friction=(0.3, 0.6), gravity_z=(-10, -9.6))."""
        values = batch.sample_values(seed, ranges, self.data, self.worlds)
        self.set_parameters(**values)
        return values

    def parameters(self) -> dict[str, np.ndarray]:
        """Current per-world values (copies): mass, friction, dissipation, modulus (worlds,
        bodies) [kg, -, s/m, Pa; NaN where a parameter does not apply], gravity (worlds, 3)
        [m/s^2]."""
        return self._params.as_dict()

    def reset_parameters(self) -> None:
        """Every world back to the scene's parameters."""
        scene = batch.scene_parameters(self.data, self.worlds)
        self.set_parameters(mass=scene.mass, friction=scene.friction, dissipation=scene.dissipation, modulus=scene.modulus,
                            gravity=scene.gravity)

    @_live
    def get_state(self, as_torch: bool = False) -> dict:
        """The state arrays, keyed as in set_state: host copies (float64 NumPy), or with
        as_torch=True new float32 torch tensors on the backend's torch device ("cuda" for the
        cuda backend, else "cpu") filled by one device kernel each, with no trip through the
        host on cuda (torch is an optional dependency)."""
        fields = self._state_fields()
        spend_launches(len(fields))
        if as_torch:
            torch = interop.torch_module()
            out = {}
            for name, arr in fields.items():
                t = torch.empty((*arr.shape, arr.n), dtype=torch.float32 if self._float() == np.float32 else torch.float64,
                                device=interop.torch_device())
                interop.rows_to_external(arr, t, arr.n)
                out[name] = t
            return out
        return {name: arr.to_numpy().astype(np.float64) for name, arr in fields.items()}

    @_live
    def state_tensors(self) -> dict:
        """The state itself as torch tensors (zero-copy views, cpu and cuda backends), keyed as
        get_state: position (worlds, bodies, 3) [m], orientation (worlds, bodies, 4) (w, x, y,
        z), velocity [m/s], angular_velocity [rad/s], world frame, body frame origin; dtype
        float32 (float64 with precision "f64"), on the backend's torch device.

        Made once, they stay valid for the Simulator's life: every step, reset and set_state
        shows in them with no call and no copy, and an in-place write to them (t[...] = x, not
        t = x) is the state the next step starts from. Such writes are not checked: keep
        orientations unit quaternions; a world given a non-finite pose or velocity is marked
        diverged at its next step and frozen (world_status). step() returns after its device
        work is done (it reads the pool counters), so the views are current when it returns.
        On cuda, torch's work on a view is expected to be ordered with Taichi's by the default
        stream both use (not yet run on a GPU; the address is checked when a view is made,
        interop.check_view, the stream ordering is not). After th.init
        restarts Taichi the views point at freed memory: get new ones from a new Simulator.
        SceneError on vulkan (use get_state(as_torch=True), a device copy)."""
        return {name: interop.tensor_view(arr) for name, arr in self._state_fields().items()}

    @_live
    def control_tensors(self) -> dict:
        """The controls of set_control as torch tensors (zero-copy views, as state_tensors):
        force [N] and torque [N m] of shape (worlds, bodies, 3), at each body's centre of mass,
        world frame. Writing actions into them in place is set_control without a copy or a
        check (non-finite values make the world diverge at its next step); reset() zeroes the
        rows of the worlds it resets."""
        return {"force": interop.tensor_view(self.body_force), "torque": interop.tensor_view(self.body_torque)}

    @_live
    def collide(self) -> np.ndarray:
        """Compute the contact polygons of every world at the current poses (the collision
        stage of a step). Returns the pool counters."""
        return self.collision.run(self.body_p_WB, self.body_q_WB)

    @_live
    def contact_surfaces(self, world: int = 0) -> list[ContactSurface]:
        """Contact surfaces of `world` at the current poses, per body pair in scene order."""
        if not 0 <= world < self.worlds:
            raise SceneError(f"world must be in [0, {self.worlds}), got {world}")
        counts = self.collide()
        pool = self.collision.pool.to_numpy(int(counts[3]))
        return group_surfaces(pool, world, self.data)

    # ----------------------------------------------------------------------------- stepping

    def _allocate_rows(self) -> None:
        """Contact rows sized like the polygon pool (a polygon makes at most one contact)."""
        C = self.collision.pool.capacity
        vec3, vec4, mat3 = ti.math.vec3, ti.math.vec4, ti.math.mat3
        self.poly_slot = ti.ndarray(ti.i32, C)
        self.row_poly = ti.ndarray(ti.i32, C)
        self.c_ids = ti.ndarray(ti.types.vector(4, ti.i32), C)
        self.c_key = ti.ndarray(ti.types.vector(4, ti.i32), C)
        slots = 1 << max(4, (2 * C - 1).bit_length())
        old = self._table() if self._rows_capacity >= 0 else None
        self.table_key = ti.ndarray(ti.types.vector(4, ti.i32), slots)
        self.table_val = ti.ndarray(vec3, slots)
        self.table_occ = ti.ndarray(ti.i32, slots)
        self._table_snapshot = tuple(ti.ndarray(ndarray_dtype(a), slots) for a in self._table())
        spend_launches(1)
        self.table_occ.fill(0)
        if old is not None:  # keep the warm start across growth
            spend_launches(1)
            ws.rehash(*old, *self._table())
        self.c_frame = ti.ndarray(mat3, C)
        self.c_ra = ti.ndarray(vec3, C)
        self.c_rb = ti.ndarray(vec3, C)
        self.c_model = ti.ndarray(vec4, C)
        self.c_reg = ti.ndarray(ti.types.vector(8, float), C)
        self.c_gamma = ti.ndarray(vec3, C)
        self.c_delta = ti.ndarray(vec3, C)
        self.c_prev = ti.ndarray(vec3, C)
        self.c_restart = ti.ndarray(float, C)
        self._rows_capacity = C

    def _table(self) -> tuple:
        """The warm-start hash table (keys, world-frame impulses, occupancy)."""
        return self.table_key, self.table_val, self.table_occ

    def _step_args(self) -> dict:
        if self._rows_capacity != self.collision.pool.capacity:
            self._allocate_rows()
        m, st = self.model, self.settings
        args = dict(self.collision.args)
        args.update(
            body_p=self.body_p_WB, body_q=self.body_q_WB, body_v=self.body_v_WB, body_w=self.body_w_WB,
            body_kind=m.body_kind, body_com_B=m.body_com_B, body_reach=m.body_reach, body_inv_mass=self.body_inv_mass,
            body_inv_inertia_B=self.body_inv_inertia_B, pair_f=self.pair_f, gravity=self.gravity, body_force=self.body_force, body_torque=self.body_torque,
            body_vc=self.body_vc, body_wc=self.body_wc, body_dv=self.body_dv, body_dw=self.body_dw,
            body_inv_inertia_W=self.body_inv_inertia_W, world_status=self.world_status_array, world_stats=self.world_stats,
            world_residual=self.world_residual, world_start=self.world_start, world_cursor=self.world_cursor,
            world_scratch=self.world_scratch, world_count=int(self.worlds), world_blocks=int(block_count(self.worlds)),
            body_contacts=self.body_contacts, pair_scale=self.pair_scale, pair_weight=self.pair_weight,
            pair_impulse=self.pair_impulse, max_counts=self.max_counts, stat_sums=self.stat_sums,
            poly_slot=self.poly_slot, c_ids=self.c_ids, c_key=self.c_key, table_key=self.table_key, table_val=self.table_val,
            table_occ=self.table_occ, c_frame=self.c_frame, c_ra=self.c_ra, c_rb=self.c_rb,
            c_model=self.c_model, c_reg=self.c_reg, c_gamma=self.c_gamma, c_delta=self.c_delta, c_prev=self.c_prev, c_restart=self.c_restart,
            world_momentum=self.world_momentum, world_restart=self.world_restart, world_beta=self.world_beta, body_vx=self.body_vx,
            body_awake=self.body_awake, sleep=int(self.method == "gauss_seidel" and st.sleep),
            body_wx=self.body_wx, accelerated=int(self.method == "accelerated"),
            dt=float(self.dt), beta=float(st.beta), sigma=float(st.sigma), warm_start=int(st.warm_start),
            iterations=int(st.iterations), tolerance=float(st.tolerance), omega=float(st.relaxation),
            coulomb=int(st.mode == "coulomb"), gauss_seidel=int(self.method == "gauss_seidel"),
            split=int(self.method != "gauss_seidel"), deterministic=int(st.deterministic), pair_rows=self.pair_rows,
            pair_first=self.pair_first, pair_end=self.pair_end, row_poly=self.row_poly,
            body_pair_start=self.body_pair_start, body_pairs=self.body_pairs, n_polygons=int(C_POLYGONS), zero=0, one=1,
        )
        return args

    def _build_step_plan(self) -> Plan:
        """One time step (DESIGN §3): collide -> assemble -> solve -> integrate."""
        plan = Plan("step")
        plan.launches.extend(self.collision.plan.launches)
        plan.add(track_counts, "counts", "max_counts", "world_start", "world_stats", "stat_sums")
        stages = [("collide", len(plan.launches))]
        plan.add(ig.free_velocity, "world_status", "body_kind", "body_p", "body_q", "body_v", "body_w", "body_com_B", "body_inv_mass",
                 "body_inv_inertia_B", "gravity", "body_force", "body_torque", "dt", "body_vc", "body_wc", "body_inv_inertia_W")
        det = self.settings.deterministic
        plan.add(ct.count_contacts, "counts", "poly_i", "poly_g", "pair_i", "body_kind", "world_status", "world_start", "body_contacts",
                 "pair_scale", "pair_weight", "poly_slot", "pair_rows", "deterministic")
        plan.add(scan_blocks, "world_start", "world_scratch", "world_count")
        plan.add(scan_sums, "world_scratch", "world_blocks")
        plan.add(scan_add, "world_start", "world_cursor", "world_scratch", "world_count")
        if det:
            plan.add(dm.pair_offsets, "world_start", "pair_rows", "pair_first", "pair_end")
            plan.add(dm.scatter_rows, "counts", "poly_i", "poly_slot", "pair_first", "row_poly", "n_polygons")
            plan.add(dm.rank_rows, "world_start", "poly_i", "pair_first", "pair_end", "row_poly", "poly_slot")
        plan.add(ct.assemble_contacts, "counts", "poly_i", "poly_g", "poly_c", "poly_n", "poly_slot", "world_start", "pair_i", "pair_f",
                 "body_p", "body_q", "body_com_B", "body_inv_mass", "body_inv_inertia_W", "dt", "beta", "pair_scale", "pair_weight",
                 "c_ids", "c_key", "c_frame", "c_ra", "c_rb", "c_model", "deterministic")
        if det:
            plan.add(dm.sum_pair_rows, "pair_first", "pair_end", "c_frame", "c_gamma", "c_model", "pair_weight", "pair_impulse", "zero")
        plan.add(ct.finalize_contacts, "world_start", "c_ids", "c_key", "c_frame", "c_ra", "c_rb", "c_model", "pair_f", "pair_scale",
                 "pair_weight", "pair_impulse", "body_contacts", "body_inv_mass", "body_inv_inertia_W", "dt", "sigma", "warm_start", "split",
                 "table_key", "table_val", "table_occ", "c_reg", "c_gamma")
        plan.add(ws.clear_table, "table_occ")
        stages.append(("assemble", len(plan.launches)))
        if self.schedule == "world":
            plan.add(sv.solve_world_serial, "world_start", "world_status", "c_ids", "c_frame", "c_ra", "c_rb", "c_reg", "c_gamma", "c_delta",
                     "body_vc", "body_wc", "body_vx", "body_wx", "body_reach", "body_inv_mass", "body_inv_inertia_W", "iterations", "tolerance", "omega", "coulomb",
                     "gauss_seidel", "accelerated", "c_prev", "world_stats", "body_awake", "sleep")
        else:
            gather = ("world_status", "world_stats", "body_pair_start", "body_pairs", "pair_i", "pair_first", "pair_end", "c_frame",
                      "c_ra", "c_rb")
            gather_end = ("body_vc", "body_wc", "body_inv_mass", "body_inv_inertia_W")
            if det:
                plan.add(dm.gather_impulses, *gather, "c_gamma", *gather_end, "zero")
            else:
                plan.add(sv.apply_impulses, "world_start", "c_ids", "c_frame", "c_ra", "c_rb", "c_gamma", "body_vc", "body_wc",
                         "body_inv_mass", "body_inv_inertia_W")
            plan.add(sv.start_contact_schedule, "world_start", "world_stats", "world_residual", "world_momentum", "world_beta",
                     "world_restart", "body_vc", "body_wc", "body_vx", "body_wx")
            accelerated = self.method == "accelerated"
            for _ in range(self.settings.iterations):
                plan.add(sv.jacobi_contacts, "world_start", "world_status", "world_stats", "c_ids", "c_frame", "c_ra", "c_rb", "c_reg",
                         "c_gamma", "c_prev", "body_vc", "body_wc", "body_dv", "body_dw", "body_inv_mass", "body_inv_inertia_W",
                         "world_beta", "world_restart", "c_restart", "omega", "coulomb", "c_delta", "deterministic",
                         "accelerated")
                if accelerated and det:
                    plan.add(sv.sum_world_restart, "world_start", "world_status", "world_stats", "c_restart", "world_restart")
                if det:
                    plan.add(dm.gather_impulses, *gather, "c_delta", *gather_end, "one")
                plan.add(sv.jacobi_bodies, "world_start", "world_status", "body_vc", "body_wc", "body_dv", "body_dw", "body_vx", "body_wx",
                         "body_reach", "world_residual", "world_stats", "world_momentum", "world_beta", "world_restart", "tolerance", "iterations",
                         "accelerated")
        stages.append(("solve", len(plan.launches)))
        plan.add(ig.check_divergence, "world_status", "body_p", "body_q", "body_vc", "body_wc")
        plan.add(ig.integrate, "world_status", "body_kind", "body_com_B", "body_vc", "body_wc", "dt", "body_p", "body_q", "body_v", "body_w")
        if det:
            plan.add(dm.sum_pair_rows, "pair_first", "pair_end", "c_frame", "c_gamma", "c_model", "pair_weight", "pair_impulse", "one")
        else:
            plan.add(sv.accumulate_pair_impulses, "world_start", "c_ids", "c_frame", "c_gamma", "pair_impulse")
        plan.add(ws.store_impulses, "world_start", "c_key", "c_frame", "c_gamma", "table_key", "table_val", "table_occ")
        stages.append(("integrate", len(plan.launches)))
        self._stage_ends = stages
        return plan

    @_live
    def step(self, steps: int = 1) -> None:
        """Advance every world by `steps` time steps of scene.dt. Pools that overflow grow and
        the affected chunk of steps is recomputed from its start (never a dropped contact)."""
        if steps < 0:
            raise SceneError(f"steps must be >= 0, got {steps}")
        if self._step_plan is None:
            self._step_plan = self._build_step_plan()
        spend_launches(steps * len(self._step_plan.launches), check_only=True)
        done = 0
        while done < steps:
            chunk = min(self.CHUNK, steps - done)
            args = self._step_args()
            for name, arr in self._state_arrays().items():
                self._snapshot[name].copy_from(arr)
            for saved, arr in zip(self._table_snapshot, self._table()):
                saved.copy_from(arr)
            sums_before = self.stat_sums.to_numpy()
            while True:
                self.max_counts.fill(0)
                for _ in range(chunk):
                    self._step_plan.run(args, graph=self.graph)
                grown = self.collision.overflow(self.max_counts.to_numpy())
                if grown is None:
                    break
                # Back to the chunk's start, warm-start table included (rehashed if it grows).
                for name, arr in self._state_arrays().items():
                    arr.copy_from(self._snapshot[name])
                for saved, arr in zip(self._table_snapshot, self._table()):
                    arr.copy_from(saved)
                self.stat_sums.from_numpy(sums_before)
                self.collision.grow(grown)
                args = self._step_args()
                for saved, arr in zip(self._table_snapshot, self._table()):
                    saved.copy_from(arr)
            done += chunk
            self.step_count += chunk
            self._world_steps += chunk
            self.time += chunk * self.dt

    @_live
    def profile_stages(self, steps: int = 1) -> dict[str, float]:
        """Advance `steps` time steps with one kernel launch at a time and a device sync after
        each, and return the wall time per stage [s per step]: collide (broad and narrow phase),
        assemble (contact rows, warm start), solve (cone complementarity), integrate. The sync
        makes this slower than step(); use it for where the time goes, not for throughput.
        Pools must already fit (call step() first); an overflow here raises."""
        if steps < 1:
            raise SceneError(f"steps must be >= 1, got {steps}")
        if self._step_plan is None:
            self._step_plan = self._build_step_plan()
        totals = dict.fromkeys((name for name, _ in self._stage_ends), 0.0)
        args = self._step_args()
        self.max_counts.fill(0)
        ti.sync()
        for _ in range(steps):
            start = 0
            for name, end in self._stage_ends:
                t0 = time.perf_counter()
                for kernel, names in self._step_plan.launches[start:end]:
                    kernel(*(args[n] for n in names))
                ti.sync()
                totals[name] += time.perf_counter() - t0
                start = end
        if self.collision.overflow(self.max_counts.to_numpy()) is not None:
            raise CapacityError("profile_stages: a pool overflowed; call step() first so the pools grow")
        self.step_count += steps
        self._world_steps += steps
        self.time += steps * self.dt
        return {name: t / steps for name, t in totals.items()}

    @_live
    def set_control(self, force=None, torque=None) -> None:
        """External force [N] and torque [N m] on each body, at its centre of mass, world frame,
        shape (worlds, bodies, 3); they act on dynamic bodies at every step until changed.
        Array-like values are copied from the host, torch tensors on the device (see set_state)."""
        for name, value, arr in (("force", force, self.body_force), ("torque", torque, self.body_torque)):
            if value is None:
                continue
            if interop.is_tensor(value):
                self._rows_from_tensor(name, value, arr, 3)
                continue
            v = np.asarray(value, dtype=np.float64)
            if v.shape != (self.worlds, len(self.scene.bodies), 3) or not np.all(np.isfinite(v)):
                raise SceneError(f"{name} must be a finite array of shape {(self.worlds, len(self.scene.bodies), 3)}")
            spend_launches(1)
            arr.from_numpy(v.astype(self._float()))

    @_live
    def world_status(self) -> np.ndarray:
        """Per world: 0 running, 1 diverged (a non-finite pose, non-finite or absurd velocities;
        frozen)."""
        spend_launches(1)
        return self.world_status_array.to_numpy()

    @_live
    def solver_stats(self) -> dict[str, np.ndarray]:
        """Last step, per world: solver iterations (sweeps), final residual [m/s], contact count,
        and contact updates (Gauss-Seidel skips the contacts of bodies that have settled, so
        updates <= iterations x contacts; the contact schedule updates every contact of a
        world each sweep)."""
        spend_launches(1)
        s = self.world_stats.to_numpy()
        iterations, contacts = s[:, 0].astype(int), s[:, 2].astype(int)
        updates = s[:, 3].astype(int) if self.schedule == "world" else iterations * contacts
        return {"iterations": iterations, "residual": s[:, 1], "contacts": contacts, "updates": updates}

    @_live
    def step_totals(self) -> dict[str, float]:
        """Sums since reset: steps, polygons (all worlds), contacts, solver iterations."""
        spend_launches(1)
        s = self.stat_sums.to_numpy()
        return {"steps": float(s[0]), "polygons": float(s[1]), "contacts": float(s[2]), "iterations": float(s[3])}

    @_live
    def contact_forces(self, world: int = 0) -> dict[tuple[str, str], np.ndarray]:
        """Mean contact force over the last step between each body pair in contact, on the pair's
        second body (scene order) from the first: total solved impulse / dt [N], world frame."""
        if not 0 <= world < self.worlds:
            raise SceneError(f"world must be in [0, {self.worlds}), got {world}")
        spend_launches(1)
        impulse = self.pair_impulse.to_numpy()[world].astype(np.float64)
        out = {}
        for p in range(self.data.pair_count):
            if np.any(impulse[p] != 0):
                out[self.data.pair_names(p)] = impulse[p] / self.dt
        return out
