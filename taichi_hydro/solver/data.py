"""SolverData: the arrays the dynamics stages share within a step (free velocities, the
solve's scratch) and the solver's per-world statistics."""

from __future__ import annotations

import taichi as ti

from ..types import mat3, vec3
from .options import SolverOptions

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
    (accelerated Jacobi's t, beta and restart sum)."""

    def __init__(self, options: SolverOptions, worlds: int, bodies: int):
        W, B = worlds, bodies
        for name in ("body_vc", "body_wc", "body_vx", "body_wx", "body_dv", "body_dw"):
            setattr(self, name, ti.ndarray(vec3, (W, B)))
        self.body_inv_inertia_W = ti.ndarray(mat3, (W, B))
        self.body_awake = ti.ndarray(ti.i32, (W, B) if options.sleep else (1, 1))
        for name in ("world_iterations", "world_contacts", "world_updates", "world_converged", "world_swept"):
            setattr(self, name, ti.ndarray(ti.i32, W))
        for name in ("world_residual", "world_momentum", "world_beta", "world_restart"):
            setattr(self, name, ti.ndarray(float, W))

    def arrays(self) -> dict:
        return {k: v for k, v in vars(self).items() if isinstance(v, ti.Ndarray)}
