"""The contact solve of a step (DESIGN §3 step 5): projected iterations on the regularised cone
complementarity problem, on one of two schedules that share the per-contact arithmetic
(solver.cone): "world" (one thread per world, world_schedule) and "contact" (one launch per
sweep over all contacts, contact_schedule); or Newton's method on the body velocities (newton:
one thread per world on the world schedule, its step by a block Cholesky factor or, past
solver.data.DENSE_BYTES or on request, by preconditioned conjugate gradients (newton_cg); newton_block: one block of threads per world on
the "block" schedule, cuda and vulkan)."""

from __future__ import annotations

from ..plan import Plan
from . import contact_schedule as cs
from .bilateral import BilateralRows
from .data import SolverData
from ..backend import current_arch
from .newton import newton_solver
from .newton_cg import newton_cg_solver
from .newton_block import newton_block_solver
from .options import SolverOptions
from .world_schedule import world_solver

__all__ = ["BilateralRows", "SolverData", "SolverOptions", "add_solve"]


def add_solve(plan: Plan, options: SolverOptions, data: SolverData) -> None:
    """Append the launches of one solve to `plan`: they read the assembled rows and the free
    velocities (body_vc, body_wc) and leave the solved velocities and impulses (c_gamma)."""
    o = options
    if o.method == "newton":
        if o.schedule == "block":
            plan.add(newton_block_solver(data.real, current_arch() != "cuda"))
        else:
            sweeps = o.presweeps > 0  # the kernel holds the sweeps' code only when they may run
            plan.add(newton_cg_solver(data.real, sweeps) if data.cg else newton_solver(data.real, sweeps), omega="relaxation")
        return
    if o.schedule == "world":
        plan.add(world_solver(o.gauss_seidel, o.accelerated, o.sleep, o.coulomb), iterations="iterations", tolerance="tolerance",
                 omega="relaxation")
        return
    if o.deterministic:
        plan.add(cs.gather_impulses(False), source="c_gamma")
    else:
        plan.add(cs.apply_impulses)
    plan.add(cs.start_sweeps)
    sweep = cs.sweep_contacts(o.accelerated, o.coulomb, o.deterministic)
    for _ in range(o.iterations):
        plan.add(sweep, omega="relaxation")
        if o.accelerated and o.deterministic:
            plan.add(cs.sum_world_restart)
        if o.deterministic:
            plan.add(cs.gather_impulses(True), source="c_delta")
        plan.add(cs.sweep_bodies(o.accelerated))
