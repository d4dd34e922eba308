"""SolverData: the arrays the dynamics stages share within a step (free velocities, the
solve's scratch) and the solver's per-world statistics."""

from __future__ import annotations

import taichi as ti

from ..backend import current_arch
from ..errors import SceneError
from ..types import mat3, vec3
from .options import SolverOptions

DENSE_BYTES = 2 << 30
"""The most memory the dense Newton Hessians of all worlds may take [bytes]."""

__all__ = ["SolverData"]


class SolverData:
    """Per (world, body), world frame, at the centre of mass:

    body_vc [m/s], body_wc [rad/s]: free-motion velocities (integrator.free_velocity), then the
      solve's velocities, then integrated;
    body_inv_inertia_W (W, B) [1/(kg m^2)]: inverse inertia in the world frame at this step;
    body_vx, body_wx: velocities of the previous iterate (residual, momentum; Gauss-Seidel
      sleep: a sleeping body's velocity when it fell asleep);
    body_dv, body_dw: one sweep's accumulated changes (contact schedule);
    body_awake (W, B) i32: Gauss-Seidel sleep, 2 moving, 1 quiet for one sweep, 0 asleep
      ((1, 1) when sleep is off).
    Per world: world_iterations (sweeps of the last step), world_residual [m/s] (the last
    sweep's largest velocity change of a body point), world_contacts (rows), world_updates
    (contact updates of the last step), world_converged and world_swept (contact schedule: the
    world has stopped; it swept this sweep), world_momentum, world_beta, world_restart
    (accelerated Jacobi's t, beta and restart sum).

    Newton only (arithmetic in `real`: float64 where the backend has it): newton_H (W, 6B, 6B)
    the Hessian and its factor (stored densely, written and factored on the block pattern
    only), newton_v, newton_vs, newton_grad, newton_dv, newton_scale (W, 6B): iterate, free
    velocities, gradient, step and Jacobi scaling; the body ordering and block pattern
    newton_adj, newton_padj, newton_rows (W, B, B) and newton_pos, newton_deg, newton_row_len
    (W, B) (solver.newton.order_bodies); per contact row c_bound (friction bound g [N s]),
    c_u (J v) and c_jdv (J dv), sized by resize(). The block schedule (solver.newton_block)
    adds per contact row its world-frame terms (a run's totals at the run's first row):
    c_f [N s], c_ta, c_tb [N m s] (impulse on b and its moments about a's and b's centres of
    mass), c_A, c_AS, c_SAS (F^T G F [1/(kg s) units of G], A [r_a], [r_a] A [r_a]); and
    newton_fence (W,) i32, the SPIR-V barriers' atomic (always 0)."""

    def __init__(self, options: SolverOptions, worlds: int, bodies: int, rows: int):
        W, B = worlds, bodies
        self.newton = options.method == "newton"
        self.block = self.newton and options.schedule == "block"
        self.real = ti.f32 if current_arch() == "vulkan" else ti.f64
        self.rows = -1
        for name in ("body_vc", "body_wc", "body_vx", "body_wx", "body_dv", "body_dw"):
            setattr(self, name, ti.ndarray(vec3, (W, B)))
        self.body_inv_inertia_W = ti.ndarray(mat3, (W, B))
        self.body_awake = ti.ndarray(ti.i32, (W, B) if options.sleep else (1, 1))
        for name in ("world_iterations", "world_contacts", "world_updates", "world_converged", "world_swept"):
            setattr(self, name, ti.ndarray(ti.i32, W))
        for name in ("world_residual", "world_momentum", "world_beta", "world_restart"):
            setattr(self, name, ti.ndarray(float, W))
        if self.newton:
            N = 6 * B
            need = W * N * N * (8 if self.real == ti.f64 else 4)
            if need > DENSE_BYTES:
                raise SceneError(f"[solver] method newton stores each world's Hessian densely: {W} worlds of {B} bodies need "
                                 f"{need / 2**30:.1f} GiB for the Hessians, above {DENSE_BYTES / 2**30:.0f} GiB; use fewer "
                                 "worlds or method gauss_seidel")
            self.newton_H = ti.ndarray(self.real, (W, N, N))
            for name in ("newton_v", "newton_vs", "newton_grad", "newton_dv", "newton_scale"):
                setattr(self, name, ti.ndarray(self.real, (W, N)))
            for name in ("newton_adj", "newton_padj", "newton_rows"):
                setattr(self, name, ti.ndarray(ti.i32, (W, B, B)))
            for name in ("newton_pos", "newton_deg", "newton_row_len"):
                setattr(self, name, ti.ndarray(ti.i32, (W, B)))
        if self.block:
            self.newton_fence = ti.ndarray(ti.i32, W)
            self.newton_fence.fill(0)
        self.resize(rows)

    def resize(self, rows: int) -> None:
        """Per-row scratch for `rows` contact rows (Newton only)."""
        if not self.newton or rows == self.rows:
            return
        self.c_bound = ti.ndarray(self.real, rows)
        self.c_u = ti.ndarray(ti.types.vector(3, self.real), rows)
        self.c_jdv = ti.ndarray(ti.types.vector(3, self.real), rows)
        if self.block:
            for name in ("c_f", "c_ta", "c_tb"):
                setattr(self, name, ti.ndarray(ti.types.vector(3, self.real), rows))
            for name in ("c_A", "c_AS", "c_SAS"):
                setattr(self, name, ti.ndarray(ti.types.matrix(3, 3, self.real), rows))
        self.rows = rows

    def arrays(self) -> dict:
        return {k: v for k, v in vars(self).items() if isinstance(v, ti.Ndarray)}
