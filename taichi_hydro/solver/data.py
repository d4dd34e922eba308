"""SolverData: the arrays the dynamics stages share within a step (free velocities, the
solve's scratch) and the solver's per-world statistics."""

from __future__ import annotations

import warnings
from dataclasses import replace

import taichi as ti

from ..backend import current_arch
from ..errors import HydroWarning, SceneError
from ..types import mat3, vec3
from .options import SolverOptions

DENSE_BYTES = 2 << 30
"""The most memory the dense Newton Hessians of all worlds may take [bytes]: past it, [solver]
linear = "auto" solves Newton's step by conjugate gradients (solver.newton_cg)."""

__all__ = ["SolverData", "DENSE_BYTES", "choose_linear", "newton_real", "resolve_linear"]


def newton_real():
    """The arithmetic of the Newton solve on the backend in use: float64 where it has it,
    float32 on vulkan."""
    return ti.f32 if current_arch() == "vulkan" else ti.f64


def hessian_bytes(worlds: int, bodies: int, word: int) -> int:
    """Memory of the dense Newton Hessians of `worlds` worlds of `bodies` bodies, `word` bytes a
    number: (6B)^2 numbers per world [bytes]."""
    return worlds * (6 * bodies) ** 2 * word


def choose_linear(requested: str, block: bool, worlds: int, bodies: int, word: int, source: str = "<scene>") -> str:
    """The linear solver of Newton's step for a batch of `worlds` worlds of `bodies` bodies
    whose arithmetic takes `word` bytes a number: "cholesky" (the dense (6B, 6B) Hessian per
    world) or "cg" (matrix-free). requested: [solver] linear; "auto" is cholesky while the
    Hessians take at most DENSE_BYTES, else cg with a HydroWarning (never silently). A forced
    cholesky past DENSE_BYTES, and the block schedule (which factors only) past it, are
    SceneErrors that give the size and the ways out."""
    need = hessian_bytes(worlds, bodies, word)
    size = (f"{worlds} worlds of {bodies} bodies need {need / 2**30:.1f} GiB for the dense Newton Hessians, above "
            f"{DENSE_BYTES / 2**30:.0f} GiB")
    if block and need > DENSE_BYTES:
        raise SceneError(f"{source}: [solver] schedule \"block\" factors each world's Hessian: {size}; use fewer worlds, "
                         "or schedule = \"world\" (which solves by conjugate gradients past this size)")
    if requested == "cholesky" and need > DENSE_BYTES:
        raise SceneError(f"{source}: [solver] linear = \"cholesky\": {size}; use linear = \"cg\" (or \"auto\"), "
                         "or fewer worlds")
    if requested != "auto":
        return requested
    if need <= DENSE_BYTES:
        return "cholesky"
    warnings.warn(f"{source}: {size}: method newton solves its step by preconditioned conjugate gradients "
                  "([solver] linear = \"cg\"; set linear = \"cg\" to choose it and silence this)", HydroWarning, stacklevel=4)
    return "cg"


def resolve_linear(options: SolverOptions, worlds: int, bodies: int, source: str = "<scene>",
                   schedule_asked: str = "auto") -> SolverOptions:
    """`options` with Newton's linear solver chosen for the whole batch (choose_linear; its
    warning points at the caller's caller, Simulator's user): the arrays of every smaller
    batch built from them (the memory probes of Simulator._check_memory) are then those the
    batch will have. A block schedule that [solver] schedule left to "auto" (schedule_asked)
    and whose Hessians would take more than DENSE_BYTES becomes the world schedule, which
    solves such a batch by conjugate gradients (warned by choose_linear); one asked for by
    name is refused there. Other methods: unchanged."""
    if options.method != "newton":
        return options
    word = 8 if newton_real() == ti.f64 else 4
    block = options.schedule == "block"
    if block and schedule_asked == "auto" and options.linear == "auto" and hessian_bytes(worlds, bodies, word) > DENSE_BYTES:
        options, block = replace(options, schedule="world"), False
    return replace(options, linear=choose_linear(options.linear, block, worlds, bodies, word, source))


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
    sweep's largest velocity change of a body point; Newton: the solution's residual, its
    stopping test's measure), world_contacts (rows), world_updates
    (contact updates of the last step), world_converged and world_swept (contact schedule: the
    world has stopped; it swept this sweep), world_momentum, world_beta, world_restart
    (accelerated Jacobi's t, beta and restart sum), world_queue (1,) i32 the worlds claimed so far
    by the world schedule's loop on the cpu pool (solver.world_schedule.world_slots).

    Newton only (arithmetic in `real`: float64 where the backend has it): `linear`, the step's
    solver ("cholesky" or "cg": choose_linear); with cholesky, newton_H (W, 6B, 6B) the Hessian
    and its factor (stored densely, written and factored on the block pattern only); with cg
    (solver.newton_cg) instead, newton_block (W, 6B, 6) each body's 6x6 preconditioner block
    and its factor, newton_r, newton_p, newton_q (W, 6B) CG's vectors, per contact row c_G (its
    curvature G, contact frame), and world_linear_iterations (W,) i32, the CG iterations of
    the last solve; newton_v, newton_vs, newton_grad, newton_dv, newton_scale (W, 6B): iterate, free
    velocities, gradient, step and Jacobi scaling; newton_last (W, 6B) the last solve's
    solution by body (at 6 b) and newton_kept (W,) i32, 1 once a solve has kept one (the next
    solve's candidate start, solver.newton.world_funcs.choose_start; world schedule); the body
    ordering and block pattern
    newton_padj, newton_rows (W, B, B) and newton_adj (W, B + 1, ceil(B / 32)), its bit masks
    (cholesky only), and newton_pos (the identity with cg), newton_deg, newton_row_len (W, B)
    (solver.newton.order_bodies); on the world schedule the islands
    (solver.newton.world_funcs.group_islands): newton_island (W, B) i32 each body's island,
    newton_body (W, B) i32 the bodies grouped by island, newton_island_start (W, B + 1, 3) i32
    where each island's bodies (in newton_body) and rows (in newton_row) start, newton_row
    (rows,) i32 the contact rows grouped by island, and world_islands (W,) i32 the islands
    of the last solve; per contact row c_bound (friction bound g [N s]),
    c_u (J v) and c_jdv (J dv), sized by resize(). The block schedule (solver.newton_block)
    adds per contact row its world-frame terms (a run's totals at the run's first row):
    c_f [N s], c_ta, c_tb [N m s] (impulse on b and its moments about a's and b's centres of
    mass), c_A, c_AS, c_SAS (F^T G F [1/(kg s) units of G], A [r_a], [r_a] A [r_a]); the
    first rows of the runs of rows, by body, c_body_runs (2 rows,) i32, and where each body's
    list ends, newton_run_end (W, B) i32 (solver.newton_block.list_runs); and newton_fence
    (W,) i32, the SPIR-V barriers' atomic (always 0)."""

    def __init__(self, options: SolverOptions, worlds: int, bodies: int, rows: int, source: str = "<scene>"):
        W, B = worlds, bodies
        self.newton = options.method == "newton"
        self.block = self.newton and options.schedule == "block"
        self.real = newton_real()
        self.linear = (choose_linear(options.linear, self.block, W, B, 8 if self.real == ti.f64 else 4, source)
                       if self.newton else None)
        self.cg = self.linear == "cg"
        self.rows = -1
        for name in ("body_vc", "body_wc", "body_vx", "body_wx", "body_dv", "body_dw"):
            setattr(self, name, ti.ndarray(vec3, (W, B)))
        self.body_inv_inertia_W = ti.ndarray(mat3, (W, B))
        self.body_awake = ti.ndarray(ti.i32, (W, B) if options.sleep else (1, 1))
        for name in ("world_iterations", "world_contacts", "world_updates", "world_converged", "world_swept"):
            setattr(self, name, ti.ndarray(ti.i32, W))
        for name in ("world_residual", "world_momentum", "world_beta", "world_restart"):
            setattr(self, name, ti.ndarray(float, W))
        self.world_queue = ti.ndarray(ti.i32, 1)
        self.world_queue.fill(0)
        if self.newton:
            N = 6 * B
            for name in ("newton_v", "newton_vs", "newton_grad", "newton_dv", "newton_scale"):
                setattr(self, name, ti.ndarray(self.real, (W, N)))
            self.newton_pos = ti.ndarray(ti.i32, (W, B))
            if not self.block:
                self.newton_island = ti.ndarray(ti.i32, (W, B))
                self.newton_body = ti.ndarray(ti.i32, (W, B))
                self.newton_island_start = ti.ndarray(ti.i32, (W, B + 1, 3))
                self.world_islands = ti.ndarray(ti.i32, W)
                self.world_islands.fill(0)
            self.newton_last = ti.ndarray(self.real, (W, N))
            self.newton_kept = ti.ndarray(ti.i32, W)
            self.newton_kept.fill(0)
        if self.cg:
            self.newton_block = ti.ndarray(self.real, (W, N, 6))
            self.world_linear_iterations = ti.ndarray(ti.i32, W)
            for name in ("newton_r", "newton_p", "newton_q"):
                setattr(self, name, ti.ndarray(self.real, (W, N)))
        elif self.newton:
            self.newton_H = ti.ndarray(self.real, (W, N, N))
            self.newton_adj = ti.ndarray(ti.i32, (W, B + 1, (B + 31) // 32))
            for name in ("newton_padj", "newton_rows"):
                setattr(self, name, ti.ndarray(ti.i32, (W, B, B)))
            for name in ("newton_deg", "newton_row_len"):
                setattr(self, name, ti.ndarray(ti.i32, (W, B)))
        if self.block:
            self.newton_fence = ti.ndarray(ti.i32, W)
            self.newton_fence.fill(0)
            self.newton_run_end = ti.ndarray(ti.i32, (W, B))
        self.resize(rows)

    def resize(self, rows: int) -> None:
        """Per-row scratch for `rows` contact rows (Newton only)."""
        if not self.newton or rows == self.rows:
            return
        self.c_bound = ti.ndarray(self.real, rows)
        self.c_u = ti.ndarray(ti.types.vector(3, self.real), rows)
        self.c_jdv = ti.ndarray(ti.types.vector(3, self.real), rows)
        if not self.block:
            self.newton_row = ti.ndarray(ti.i32, rows)
        if self.cg:
            self.c_G = ti.ndarray(ti.types.matrix(3, 3, self.real), rows)
        if self.block:
            for name in ("c_f", "c_ta", "c_tb"):
                setattr(self, name, ti.ndarray(ti.types.vector(3, self.real), rows))
            for name in ("c_A", "c_AS", "c_SAS"):
                setattr(self, name, ti.ndarray(ti.types.matrix(3, 3, self.real), rows))
            self.c_body_runs = ti.ndarray(ti.i32, 2 * rows)
        self.rows = rows

    def arrays(self) -> dict:
        return {k: v for k, v in vars(self).items() if isinstance(v, ti.Ndarray)}

    def carried(self) -> dict:
        """The arrays one solve leaves to the next: Newton's last solution and its flag
        (newton_last, newton_kept), choose_start's candidate start. A chunk of steps that reruns
        after a pool overflow restores them with the state (Simulator._advance); else the rerun
        starts from what the overflowed attempt left, a solve on a cut pool whose polygons
        depend on thread timing."""
        return {"newton_last": self.newton_last, "newton_kept": self.newton_kept} if self.newton else {}
