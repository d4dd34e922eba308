"""BilateralRows: scalar velocity constraints solved with the contacts by the Newton solver
(solver.newton): the rows of joints (joint.kernels writes them every step) or any other
constraint on body velocities.

Row j couples body a (or none: the world) and body b through its Jacobian,

    u_j = Ja_j . (v_a, w_a) + Jb_j . (v_b, w_b)       (centre-of-mass velocities, world frame),

and adds to the solver's cost the convex function whose derivative is -gamma_j(u_j), with the
impulse law

    gamma(u) = clamp(-(u - bias) / R, lower, upper)    [N s, or N m s for an angular row]

(R > 0 the row's compliance [u per unit impulse], bias the velocity it is driven to). With
unbounded lower/upper this is the quadratic (u - bias)^2 / (2R): a stiff spring-damper on a
constraint velocity, whose bias carries the drift correction of a position error C
(Baumgarte-style: bias = -C / tau). lower = 0 makes a one-sided row (a joint limit), finite
symmetric bounds a Huber-like row (joint friction, an effort-limited actuator), and
lower = upper a constant impulse (an effort), whatever R is."""

from __future__ import annotations

import numpy as np
import taichi as ti

from .. import hostcopy
from ..errors import SceneError
from ..types import ID_A, ID_B, ID_WORLD, L_R, UNBOUNDED, host_float, ivec4, vec4, vec6

__all__ = ["BilateralRows"]


class BilateralRows:
    """Rows of world w are [bilateral_start[w], bilateral_start[w + 1]).

    b_ids (J,) ivec4: columns types.ID_* (world, body a or -1 for none, body b; the fourth
      unused);
    b_Ja, b_Jb (J,) vec6: the row's Jacobian on (v, w) of body a and of body b at their centres
      of mass, world frame (linear part [-], angular part [m]; for an angular row [-] and 0);
    b_law (J,) vec4: columns types.L_* (R, bias, lower, upper; see the module docstring);
    b_gamma (J,) [N s or N m s]: the solved impulse, and the next solve's warm start.
    Allocated for at least one row; set_points() uploads rows that hold points together."""

    def __init__(self, worlds: int, bodies: int, capacity: int = 1):
        self.worlds, self.bodies = worlds, bodies
        self.bilateral_start = ti.ndarray(ti.i32, worlds + 1)
        self.bilateral_start.fill(0)
        self._allocate(max(capacity, 1))

    def _allocate(self, capacity: int) -> None:
        self.capacity = capacity
        self.b_ids = ti.ndarray(ivec4, capacity)
        self.b_Ja = ti.ndarray(vec6, capacity)
        self.b_Jb = ti.ndarray(vec6, capacity)
        self.b_law = ti.ndarray(vec4, capacity)
        self.b_gamma = ti.ndarray(float, capacity)
        self.b_gamma.fill(0.0)

    def uniform(self, rows_per_world: int) -> None:
        """Make room for the same number of rows in every world: world w's rows are
        [w rows_per_world, (w + 1) rows_per_world) (their contents are written on the device)."""
        J = self.worlds * rows_per_world
        if J > self.capacity:
            self._allocate(J)
        hostcopy.from_numpy(self.bilateral_start, np.arange(self.worlds + 1, dtype=np.int32) * rows_per_world)

    def set_points(self, world, body_a, body_b, r_a, r_b, compliance, bias=None, frame=None) -> None:
        """Replace the rows by point constraints: per constraint its world, bodies a and b
        (indices), the point as offsets r_a, r_b (n, 3) [m] from each body's centre of mass
        (world frame), compliance (n, 3) or (n,) [s/kg], bias (n, 3) [m/s] (default 0) and the
        directions, rows of frame (n, 3, 3) (default the world axes): three rows each,
        u_k = f_k . ((v_b + w_b x r_b) - (v_a + w_a x r_a)), unbounded. Rows are grouped by
        world. SceneError names the first bad value."""
        world = np.asarray(world, np.int64).reshape(-1)
        n = len(world)
        body_a, body_b = (np.asarray(x, np.int64).reshape(n) for x in (body_a, body_b))
        r_a, r_b = (np.asarray(x, np.float64).reshape(n, 3) for x in (r_a, r_b))
        compliance = np.broadcast_to(np.asarray(compliance, np.float64).reshape(n, -1), (n, 3))
        bias = np.zeros((n, 3)) if bias is None else np.asarray(bias, np.float64).reshape(n, 3)
        frame = np.broadcast_to(np.eye(3), (n, 3, 3)) if frame is None else np.asarray(frame, np.float64).reshape(n, 3, 3)
        checks = (("world", world, (world >= 0) & (world < self.worlds)),
                  ("body_a", body_a, (body_a >= -1) & (body_a < self.bodies)),
                  ("body_b", body_b, (body_b >= 0) & (body_b < self.bodies) & (body_b != body_a)),
                  ("compliance", compliance, np.isfinite(compliance) & (compliance > 0)),
                  ("r_a", r_a, np.isfinite(r_a)), ("r_b", r_b, np.isfinite(r_b)), ("bias", bias, np.isfinite(bias)),
                  ("frame", frame, np.isfinite(frame)))
        for name, value, ok in checks:
            ok = ok.reshape(n, -1).all(axis=1)
            if not ok.all():
                k = int(np.argmin(ok))
                raise SceneError(f"bilateral point {k}: bad {name} {value[k].tolist()}")
        order = np.argsort(world, kind="stable")
        J = 3 * n
        if J > self.capacity:
            self._allocate(J)
        ids = np.zeros((self.capacity, 4), np.int32)
        Ja, Jb = np.zeros((self.capacity, 6)), np.zeros((self.capacity, 6))
        law = np.zeros((self.capacity, 4))
        law[:, L_R] = 1.0
        for i, c in enumerate(order):
            for k in range(3):
                row, f = 3 * i + k, frame[c, k]
                ids[row, ID_WORLD], ids[row, ID_A], ids[row, ID_B] = world[c], body_a[c], body_b[c]
                Ja[row] = np.concatenate([-f, -np.cross(r_a[c], f)])
                Jb[row] = np.concatenate([f, np.cross(r_b[c], f)])
                law[row] = (compliance[c, k], bias[c, k], -UNBOUNDED, UNBOUNDED)
        hostcopy.from_numpy(self.b_ids, ids)
        for name, value in (("b_Ja", Ja), ("b_Jb", Jb), ("b_law", law)):
            hostcopy.from_numpy(getattr(self, name), value.astype(host_float()))
        self.b_gamma.fill(0.0)
        start = np.zeros(self.worlds + 1, np.int32)
        start[1:] = np.cumsum(3 * np.bincount(world, minlength=self.worlds))
        hostcopy.from_numpy(self.bilateral_start, start)

    def arrays(self) -> dict:
        return {k: v for k, v in vars(self).items() if isinstance(v, ti.Ndarray)}
