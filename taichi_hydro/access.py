"""The batch interface of a Simulator: state, controls and per-world parameters of selected
worlds, read and written as NumPy arrays or torch tensors, and partial resets."""

from __future__ import annotations

import functools

import numpy as np
import taichi as ti

from . import hostcopy, interop
from .backend import require_generation, spend_launches
from .checks import range_problem
from .errors import SceneError
from .joint import kernels as jk
from .params import sample_values, scene_parameters
from .plan import Plan
from .solver.newton import seed_solutions
from .state import STATE_FIELDS, checked_checkpoint, checked_reset_state, checked_state, reset_worlds, select_worlds
from .types import FROZEN_REASONS, host_float

__all__ = ["WorldAccess", "live"]


def live(method):
    """Refuse (BackendError) a call on a Simulator whose Taichi runtime has ended."""

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        require_generation(self._generation, "this Simulator")
        return method(self, *args, **kwargs)

    return call


class WorldAccess:
    """Mixed into Simulator: everything here reads or writes its state, control, params and
    warm containers."""

    def _init_access(self) -> None:
        """The scene's initial state as one-row device arrays (1, B), the staging rows of
        reset, and the reset launch."""
        b = self.scene.bodies
        self._initial = {}
        for (name, width), rows in zip(STATE_FIELDS, ([x.p_WB for x in b], [x.q_WB for x in b], [x.v_WB for x in b],
                                                     [x.w_WB for x in b])):
            v = checked_state(name, [rows], width, np.zeros(1, dtype=int), self.body_names, "scene", host_float())
            self._initial[name] = self._upload_rows(v)
        self.world_row = ti.ndarray(ti.i32, self.worlds)
        stage = {f"stage_{k}": self._initial[name] for k, (name, _) in zip("pqvw", STATE_FIELDS)}
        self._reset_plan = Plan("reset", {**self.bindings(), **stage, "world_row": self.world_row}).add(reset_worlds)
        if self.joints is not None:
            self._reset_plan.add(jk.reset_joints).add(jk.joint_state)

    @property
    def body_names(self) -> list[str]:
        return [b.name for b in self.scene.bodies]

    def _check_world(self, world: int) -> None:
        if isinstance(world, bool) or not isinstance(world, (int, np.integer)) or not 0 <= world < self.worlds:
            raise SceneError(f"world must be an integer in [0, {self.worlds}), got {world!r}")

    def _upload_rows(self, v: np.ndarray):
        """A new (n, B) vec3/vec4 ndarray holding v (n, B, 3|4), in the device float type."""
        arr = ti.ndarray(ti.types.vector(v.shape[2], float), v.shape[:2])
        spend_launches(1)
        hostcopy.from_numpy(arr, np.ascontiguousarray(v, dtype=host_float()))
        return arr

    @live
    def reset(self, worlds=None, state: dict | None = None) -> None:
        """Put worlds back to the scene's initial state, or to `state`, on the device.

        worlds: None (every world), a boolean mask of shape (worlds,), a world index or an array
        of distinct indices. state: None, or a dict with any of the keys position (n, B, 3) [m],
        orientation (n, B, 4) (w, x, y, z; normalised), velocity (n, B, 3) [m/s],
        angular_velocity (n, B, 3) [rad/s] (world frame, body frame origin; row i for the i-th
        selected world, in the order given, ascending for a mask); missing keys take the scene's
        initial values. Only the selected rows are uploaded.

        A reset world also loses its controls (set_control; set_joint_control's go back to the
        scene's values), its warm start (pair impulses and stored per-polygon and joint
        impulses, and Newton's previous solution: its next step starts cold, like a fresh
        simulator), its
        divergence flag and solver statistics, its tactile images (zero until its next step)
        and its world_steps() count; every other world
        is untouched bit for bit. Per-world parameters persist (reset_parameters restores
        them). With worlds=None the global clock also restarts: time, step_count and
        step_totals() go to 0. Raises SceneError for a bad selection or state."""
        selected = select_worlds(worlds, self.worlds)
        stage = self._stage_state(state, selected)
        if len(selected) == 0:
            return
        rows = np.full(self.worlds, -1, dtype=np.int32)
        rows[selected] = np.arange(len(selected), dtype=np.int32)
        spend_launches(1)
        hostcopy.from_numpy(self.world_row, rows)
        args = {**self.bindings(), "world_row": self.world_row}
        args.update({f"stage_{k}": stage[name] for k, (name, _) in zip("pqvw", STATE_FIELDS)})
        self._reset_plan.run(args)
        self.warm.forget(self.world_row)
        self._seed_solutions()
        self.tactile_sensors.clear(self.world_row)
        self._contact_fresh = False
        self._world_steps[selected] = 0
        if worlds is None:
            spend_launches(1)
            self.stat_sums.fill(0)
            self.time = 0.0
            self.step_count = 0

    def _stage_state(self, state: dict | None, selected: np.ndarray) -> dict:
        """Staging arrays of reset: the given rows (n, B) uploaded, the scene's (1, B) otherwise."""
        checked = checked_reset_state(state, selected, self.body_names, host_float())
        if len(selected) == 0:
            return {}
        return {name: self._upload_rows(checked[name]) if name in checked else self._initial[name] for name, _ in STATE_FIELDS}

    def world_steps(self) -> np.ndarray:
        """(worlds,) int64: steps each world has taken since its last reset (a diverged world is
        frozen but still counts)."""
        return self._world_steps.copy()

    @live
    def checkpoint(self) -> dict[str, np.ndarray]:
        """What restore() needs to put every world back where it is now: the state arrays keyed
        as in get_state, (worlds, bodies, 3|4), as the device stores them (float32 unless
        th.init(..., precision="f64"); a frozen world's non-finite values too); world_status
        (worlds,) int32 (see world_status()); world_steps (worlds,) int64. Controls, parameters
        and the warm start are not included: the caller sets the first two and keeps them
        (parameters() reads them back); the warm start is the solver's initial guess only."""
        fields = self.state.fields()
        spend_launches(len(fields) + 1)
        out = {name: hostcopy.to_numpy(arr) for name, arr in fields.items()}
        out["world_status"] = hostcopy.to_numpy(self.state.world_status)
        out["world_steps"] = self._world_steps.copy()
        return out

    @live
    def restore(self, checkpoint: dict, force=None, torque=None) -> None:
        """Every world as `checkpoint` (checkpoint() of a simulator of this scene and world
        count) recorded it: state, frozen flags and step counts, the values written as recorded
        (a frozen world's non-finite state stays frozen). Controls are zero unless force / torque
        are given (as set_control takes them). As after reset(), each world's next step starts
        cold (no warm start), its solver statistics are zero, and time, step_count and
        step_totals() restart from 0; parameters are untouched. Every key, shape and status code
        is checked before anything is written: SceneError otherwise."""
        c = checked_checkpoint(checkpoint, self.worlds, len(self.scene.bodies), host_float())
        every = np.arange(self.worlds)
        force, torque = (None if v is None else checked_state(name, v, 3, every, self.body_names, "restore", host_float())
                         for name, v in (("force", force), ("torque", torque)))
        self.reset()
        spend_launches(len(STATE_FIELDS) + 1)
        for name, arr in self.state.fields().items():
            hostcopy.from_numpy(arr, c[name])
        hostcopy.from_numpy(self.state.world_status, c["world_status"])
        self._world_steps[:] = c["world_steps"]
        self.set_control(force=force, torque=torque)

    @live
    def set_state(self, position=None, orientation=None, velocity=None, angular_velocity=None) -> None:
        """Overwrite state arrays of shape (worlds, bodies, 3) or (worlds, bodies, 4) [SI,
        world frame]; orientations are normalised. Non-finite values raise SceneError.

        Each value is array-like (copied from the host) or a torch tensor on the device the
        backend reads in place (cuda tensors with "cuda", cpu tensors otherwise): then one
        kernel copies it on the device and checks it there (no host copy of the state)."""
        every = np.arange(self.worlds)
        for (name, width), value, arr in zip(STATE_FIELDS, (position, orientation, velocity, angular_velocity),
                                             self.state.fields().values()):
            if value is None:
                continue
            if interop.is_tensor(value):
                self._rows_from_tensor(name, value, arr, width, normalise=width == 4)
                continue
            v = checked_state(name, value, width, every, self.body_names, "set_state", host_float())
            spend_launches(1)
            hostcopy.from_numpy(arr, np.ascontiguousarray(v, dtype=host_float()))
        spend_launches(1)
        hostcopy.from_numpy(self.world_row, every.astype(np.int32))
        self._seed_solutions()
        self._measure_joints()

    def _seed_solutions(self) -> None:
        """Newton's candidate start of the worlds in self.world_row (>= 0) from their state as
        the host wrote it (solver.newton.seed_solutions); nothing for the other methods."""
        args = self.bindings()
        if "newton_kept" in args:
            spend_launches(1)
            seed_solutions(self.world_row, args["body_com_B"], args["body_q"], args["body_v"], args["body_w"], args["newton_last"],
                           args["newton_kept"])

    def _measure_joints(self) -> None:
        """Joint positions and velocities from the current state (after set_state)."""
        if self.joints is not None:
            Plan("joints", self.bindings()).add(jk.joint_state).run(self.bindings())

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
                             f"{' or has zero norm' if normalise else ''}: {row} "
                             f"({int(bad[0])} such rows; the others were written)")

    @live
    def set_control(self, force=None, torque=None) -> None:
        """External force [N] and torque [N m] on each body, at its centre of mass, world frame,
        shape (worlds, bodies, 3); they act on dynamic bodies at every step until changed.
        Array-like values are copied from the host, torch tensors on the device (see set_state)."""
        for (name, arr), value in zip(self.control.fields().items(), (force, torque)):
            if value is None:
                continue
            if interop.is_tensor(value):
                self._rows_from_tensor(name, value, arr, 3)
                continue
            v = checked_state(name, value, 3, np.arange(self.worlds), self.body_names, "set_control", host_float())
            spend_launches(1)
            hostcopy.from_numpy(arr, v.astype(host_float()))

    @live
    def world_status(self) -> np.ndarray:
        """Per world: 0 running, else frozen (diverged), the code naming the check that tripped:
        FROZEN_SPEED (1) a non-finite or absurd velocity, FROZEN_SPIN (2) angular velocity,
        FROZEN_POSE (3) a non-finite pose (taichi_hydro.FROZEN_REASONS, frozen_reasons())."""
        spend_launches(1)
        return hostcopy.to_numpy(self.state.world_status)

    def frozen_reasons(self) -> dict[int, str]:
        """{world index: why it was frozen} for every frozen world (empty when all run)."""
        status = self.world_status()
        return {int(w): FROZEN_REASONS.get(int(status[w]), f"status {int(status[w])}") for w in np.flatnonzero(status)}

    # ----------------------------------------------------------------------------- parameters

    @live
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
        self.params.set(mass=mass, friction=friction, modulus=modulus, dissipation=dissipation, gravity=gravity)
        if modulus is not None:
            self.collision.forget_lists()  # a skin's lists were filtered with the old pressure scales

    def sample_parameters(self, seed: int, **ranges) -> dict[str, np.ndarray]:
        """Draw per-world parameters uniformly and apply them (set_parameters); returns the
        applied arrays (keyed as set_parameters takes them) so they can be logged. Keys (each
        a (low, high) pair): mass, modulus: factor of the scene's value, drawn per (world,
        body); friction [-], dissipation [s/m]: absolute, per (world, body); gravity_x,
        gravity_y, gravity_z [m/s^2]: absolute, per world (components not given keep the
        scene's value). Deterministic for a seed; each key has its own random stream, so a
        key's draws do not depend on the other keys given. Example:
        sim.sample_parameters(0, mass=(0.8, 1.2), friction=(0.3, 0.6), gravity_z=(-10, -9.6))."""
        values = sample_values(seed, ranges, self.model.host, self.worlds)
        self.set_parameters(**values)
        return values

    def parameters(self) -> dict[str, np.ndarray]:
        """Current per-world values (copies): mass, friction, dissipation, modulus (worlds,
        bodies) [kg, -, s/m, Pa; NaN where a parameter does not apply], gravity (worlds, 3)
        [m/s^2]."""
        return self.params.values.as_dict()

    def reset_parameters(self) -> None:
        """Every world back to the scene's parameters."""
        scene = scene_parameters(self.model.host, self.worlds)
        self.set_parameters(mass=scene.mass, friction=scene.friction, dissipation=scene.dissipation, modulus=scene.modulus,
                            gravity=scene.gravity)

    @live
    def get_state(self, as_torch: bool = False) -> dict:
        """The state arrays, keyed as in set_state: host copies (float64 NumPy), or with
        as_torch=True new float32 torch tensors on the backend's torch device ("cuda" for the
        cuda backend, else "cpu") filled by one device kernel each, with no trip through the
        host on cuda (torch is an optional dependency)."""
        fields = self.state.fields()
        spend_launches(len(fields))
        if as_torch:
            torch = interop.torch_module()
            out = {}
            for name, arr in fields.items():
                t = torch.empty((*arr.shape, arr.n), dtype=torch.float32 if host_float() == np.float32 else torch.float64,
                                device=interop.torch_device())
                interop.rows_to_external(arr, t, arr.n)
                out[name] = t
            return out
        return {name: hostcopy.to_numpy(arr).astype(np.float64) for name, arr in fields.items()}

    @live
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
        return {name: interop.tensor_view(arr) for name, arr in self.state.fields().items()}

    @live
    def control_tensors(self) -> dict:
        """The controls of set_control as torch tensors (zero-copy views, as state_tensors):
        force [N] and torque [N m] of shape (worlds, bodies, 3), at each body's centre of mass,
        world frame. Writing actions into them in place is set_control without a copy or a
        check (non-finite values make the world diverge at its next step); reset() zeroes the
        rows of the worlds it resets."""
        return {name: interop.tensor_view(arr) for name, arr in self.control.fields().items()}

    # ----------------------------------------------------------------------------- joints

    @property
    def joint_names(self) -> list[str]:
        """The joints' degrees of freedom, in the order of the columns of joint_state() and
        set_joint_control(): a revolute or prismatic joint's name, a ball joint's name[0],
        name[1], name[2] (fixed joints have none)."""
        return list(self.joint_layout.dof_names) if self.joint_layout is not None else []

    def _joint_rows(self, a) -> np.ndarray:
        return hostcopy.to_numpy(a)[:, : len(self.joint_names)].astype(np.float64)

    @live
    def joint_state(self, as_torch: bool = False) -> dict[str, np.ndarray]:
        """Every degree of freedom of every world after the last step, shape (worlds, dofs),
        columns as joint_names: position [rad or m] (0 in the scene's initial state; a revolute
        joint's angle counts whole turns; a ball joint's is the rotation vector of the child's
        joint frame in the parent's), velocity [rad/s or m/s] (a ball joint's: the relative
        angular velocity in the parent's joint frame) and effort [N m or N]: what the joint's
        actuator, limits, damping and friction applied along it over the step, / dt.
        as_torch=True: torch tensor copies (float32, or float64 with precision "f64") on the
        backend's torch device."""
        if self.joints is None:
            out = {k: np.zeros((self.worlds, 0)) for k in ("position", "velocity", "effort")}
        else:
            spend_launches(3)
            j = self.joints
            out = {"position": self._joint_rows(j.joint_q), "velocity": self._joint_rows(j.joint_qd),
                   "effort": self._joint_rows(j.joint_effort)}
        if as_torch:
            torch = interop.torch_module()
            dtype = torch.float32 if host_float() == np.float32 else torch.float64
            return {k: torch.tensor(v, dtype=dtype, device=interop.torch_device()) for k, v in out.items()}
        return out

    def _joint_views(self, arrays: dict) -> dict:
        if self.joints is None:
            raise SceneError("the scene has no joints: there is nothing to view")
        D = len(self.joint_names)
        return {name: interop.tensor_view(arr)[:, :D] for name, arr in arrays.items()}

    @live
    def joint_state_tensors(self) -> dict:
        """Zero-copy torch views (cpu and cuda backends; see state_tensors) of joint_state():
        position, velocity, effort (worlds, dofs), current after every step. Read-only in
        meaning: a write is overwritten by the next step's measurement."""
        j = self.joints
        return self._joint_views({"position": j.joint_q, "velocity": j.joint_qd, "effort": j.joint_effort} if j else {})

    @live
    def joint_control_tensors(self) -> dict:
        """Zero-copy torch views (cpu and cuda backends; see control_tensors) of the joint
        controls: target, target_velocity, effort (worlds, dofs). Writing into them in place is
        set_joint_control without a copy or a check: the next step uses the values (a value
        for a degree of freedom whose actuator does not use it is ignored); reset() writes the
        scene's values into the rows of the worlds it resets."""
        return self._joint_views(self.joints.controls if self.joints else {})

    @live
    def joint_forces(self) -> dict[str, np.ndarray]:
        """Each joint's wrench on its child body over the last step (every row of the joint:
        the constraint, and its actuator, limits, damping and friction), at the joint origin,
        world frame: force (worlds, joints, 3) [N], torque (worlds, joints, 3) [N m]; joints in
        scene order (scene.joints)."""
        n = len(self.scene.joints)
        if self.joints is None:
            return {"force": np.zeros((self.worlds, 0, 3)), "torque": np.zeros((self.worlds, 0, 3))}
        spend_launches(2)
        return {"force": hostcopy.to_numpy(self.joints.joint_force)[:, :n].astype(np.float64),
                "torque": hostcopy.to_numpy(self.joints.joint_torque)[:, :n].astype(np.float64)}

    @live
    def set_joint_control(self, target=None, target_velocity=None, effort=None) -> None:
        """Joint-space commands, each optional, shape (worlds, dofs) or (dofs,) (every world),
        columns as joint_names; they act at every step until changed (reset restores the
        scene's values): target [rad or m] and target_velocity [rad/s or m/s] of pd actuators,
        effort [N m or N] of effort actuators (the feed-forward effort of pd actuators). A
        value for a degree of freedom whose actuator does not use it must be NaN (or equal
        the scene's value, e.g. 0). SceneError names the joint, the world and the value. Torch
        tensors are accepted (copied through the host; joint_control_tensors() writes in place)."""
        from .joint.layout import ACT_EFFORT, ACT_PD, J_ACTUATOR

        names = self.joint_names
        D, W = len(names), self.worlds
        layout = self.joint_layout
        for key, value in (("target", target), ("target_velocity", target_velocity), ("effort", effort)):
            if value is None:
                continue
            if interop.is_tensor(value):
                value = value.detach().cpu().numpy()
            try:
                v = np.array(value, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise SceneError(f"set_joint_control: {key} must be numeric, got {value!r}") from exc
            if v.shape == (D,):
                v = np.broadcast_to(v, (W, D)).copy()
            if v.shape != (W, D):
                raise SceneError(f"set_joint_control: {key} must have shape ({D},) or ({W}, {D}) (worlds, dofs {names}), "
                                 f"got shape {v.shape}")
            scene_value = getattr(layout, key)
            for d in range(D):
                kind = layout.joint_i[layout.dof_joint[d], J_ACTUATOR]
                uses = kind == ACT_PD if key != "effort" else kind in (ACT_PD, ACT_EFFORT)
                column = v[:, d]
                if uses:
                    bad = ~np.isfinite(column)
                    if bad.any():
                        w = int(np.argmax(bad))
                        raise SceneError(f"set_joint_control: {key} of joint '{names[d]}' in world {w} is not finite: "
                                         f"{float(column[w])!r}")
                    problem = range_problem(column, host_float())
                    if problem:
                        raise SceneError(f"set_joint_control: {key} of joint '{names[d]}': {problem}")
                else:
                    stray = ~np.isnan(column) & (column != scene_value[d])
                    if stray.any():
                        w = int(np.argmax(stray))
                        need = "pd actuator" if key != "effort" else "actuator"
                        raise SceneError(f"set_joint_control: {key} of joint '{names[d]}' in world {w} is {float(column[w])!r}, "
                                         f"but the joint has no {need}; give NaN")
                    v[:, d] = scene_value[d]
            full = np.zeros((W, max(D, 1)), dtype=host_float())
            full[:, :D] = v
            spend_launches(1)
            hostcopy.from_numpy(self.joints.controls[key], full)
