"""BilateralRows: velocity constraints solved with the contacts by the Newton solver (joint rows
of articulated bodies; solver.newton). Each row couples the velocities of bodies a and b at a
point, along the three directions of its frame, with the quadratic cost

    sum_k (u_k - bias_k)^2 / (2 R_k),   u = F ((v_b + w_b x r_b) - (v_a + w_a x r_a)),

so its impulse is gamma = -(u - bias) / R: a stiff spring-damper on the velocity with
compliance R [s/kg] (R -> 0: the hard constraint u = bias). bias [m/s] carries the drift
correction of a position error C [m] (Baumgarte-style: bias = -C / tau over a time tau [s]). A
pin of a body to the world is one row with the identity frame and a static body a."""

from __future__ import annotations

import numpy as np
import taichi as ti

from ..errors import SceneError
from ..types import ID_A, ID_B, ID_WORLD, host_float, ivec4, mat3, vec3

__all__ = ["BilateralRows"]


class BilateralRows:
    """Rows of world w are [bilateral_start[w], bilateral_start[w + 1]).

    b_ids (J,) ivec4: columns types.ID_* (world, body a, body b; the fourth unused);
    b_frame (J,) mat3: rows = the constrained directions, world frame;
    b_ra, b_rb (J,) [m]: the point from each body's centre of mass, world frame;
    b_compliance (J,) vec3 [s/kg]: R per direction (> 0);
    b_bias (J,) vec3 [m/s]: the velocity each direction is driven to;
    b_gamma (J,) vec3 [N s]: the solved impulse on b (-gamma on a), row frame.
    Allocated for at least one row; set() uploads a set of rows."""

    def __init__(self, worlds: int, bodies: int, capacity: int = 1):
        self.worlds, self.bodies = worlds, bodies
        self.bilateral_start = ti.ndarray(ti.i32, worlds + 1)
        self.bilateral_start.fill(0)
        self._allocate(max(capacity, 1))

    def _allocate(self, capacity: int) -> None:
        self.capacity = capacity
        self.b_ids = ti.ndarray(ivec4, capacity)
        self.b_frame = ti.ndarray(mat3, capacity)
        for name in ("b_ra", "b_rb", "b_compliance", "b_bias", "b_gamma"):
            setattr(self, name, ti.ndarray(vec3, capacity))

    def set(self, world, body_a, body_b, r_a, r_b, compliance, bias=None, frame=None) -> None:
        """Replace the rows: per row its world, bodies a and b (indices), points r_a, r_b
        (J, 3) [m], compliance (J, 3) or (J,) [s/kg], bias (J, 3) [m/s] (default 0) and frame
        (J, 3, 3) (default the identity). Rows are grouped by world here. SceneError names
        the first bad value."""
        world = np.asarray(world, np.int64).reshape(-1)
        J = len(world)
        body_a, body_b = (np.asarray(x, np.int64).reshape(J) for x in (body_a, body_b))
        r_a, r_b = (np.asarray(x, np.float64).reshape(J, 3) for x in (r_a, r_b))
        compliance = np.broadcast_to(np.asarray(compliance, np.float64).reshape(J, -1), (J, 3))
        bias = np.zeros((J, 3)) if bias is None else np.asarray(bias, np.float64).reshape(J, 3)
        frame = np.broadcast_to(np.eye(3), (J, 3, 3)) if frame is None else np.asarray(frame, np.float64).reshape(J, 3, 3)
        checks = (("world", world, (world >= 0) & (world < self.worlds)),
                  ("body_a", body_a, (body_a >= 0) & (body_a < self.bodies)),
                  ("body_b", body_b, (body_b >= 0) & (body_b < self.bodies) & (body_b != body_a)),
                  ("compliance", compliance, np.isfinite(compliance) & (compliance > 0)),
                  ("r_a", r_a, np.isfinite(r_a)), ("r_b", r_b, np.isfinite(r_b)), ("bias", bias, np.isfinite(bias)),
                  ("frame", frame, np.isfinite(frame)))
        for name, value, ok in checks:
            ok = ok.reshape(J, -1).all(axis=1)
            if not ok.all():
                k = int(np.argmin(ok))
                raise SceneError(f"bilateral row {k}: bad {name} {value[k].tolist()}")
        order = np.argsort(world, kind="stable")
        if J > self.capacity:
            self._allocate(J)
        if J:
            ids = np.zeros((self.capacity, 4), np.int32)
            ids[:J, ID_WORLD], ids[:J, ID_A], ids[:J, ID_B] = world[order], body_a[order], body_b[order]
            self.b_ids.from_numpy(ids)
            for name, value in (("b_frame", frame), ("b_ra", r_a), ("b_rb", r_b), ("b_compliance", compliance), ("b_bias", bias)):
                full = np.zeros((self.capacity, *value.shape[1:]), host_float())
                full[:J] = value[order]
                getattr(self, name).from_numpy(full)
        start = np.zeros(self.worlds + 1, np.int32)
        start[1:] = np.cumsum(np.bincount(world, minlength=self.worlds))
        self.bilateral_start.from_numpy(start)

    def arrays(self) -> dict:
        return {k: v for k, v in vars(self).items() if isinstance(v, ti.Ndarray)}
