"""Run the Newton solve kernel (taichi_hydro.solver.newton) directly on one world's contact
problem: the dumped problems of shared/reference/solver_prototype, or one built by a test."""

import importlib.util

import numpy as np
import pytest
import taichi as ti

import taichi_hydro as th
from taichi_hydro.backend import current_arch
from taichi_hydro.plan import kernel_parameters
from taichi_hydro.solver import BilateralRows, SolverData, SolverOptions
from taichi_hydro.solver.newton import newton_solver
from taichi_hydro.solver.newton_cg import newton_cg_solver
from taichi_hydro.solver.newton_block import newton_block_solver

from conftest import REFERENCE

PROTOTYPE = REFERENCE / "solver_prototype"


def prototype():
    """The float64 NumPy prototype (solvers.py) beside the dumped problems; skips without it."""
    path = PROTOTYPE / "solvers.py"
    if not path.is_file():
        pytest.skip(f"solver prototype not found at {path}")
    spec = importlib.util.spec_from_file_location("solver_prototype", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.Problem.blockdiag_JGJ = _blockdiag_JGJ
    return module


def _blockdiag_JGJ(self, G):
    """sum_i J_i^T G_i J_i, the prototype's Problem.blockdiag_JGJ as one matrix product: the same
    sum, in BLAS's order of the terms. The prototype's three-operand einsum took most of the
    oracle's time (0.35-0.56 s per Hessian on a pile step, 3 ms here: 27 of the 34 s of a six-step test)."""
    J = self.J.reshape(self.n, 3, -1)
    return self.J.T @ np.matmul(G, J).reshape(3 * self.n, -1)


def oracle(P, rec):
    """The prototype's Problem (P: prototype()) for the record `rec`, with the mass matrix the
    kernels use: each inertia the symmetrised float64 inverse of the dumped float32 inverse
    (solver.newton.newton_funcs.inertia). The dumped inverses are symmetric only to float32
    round-off, and the prototype's M = inv(inv_I) keeps that asymmetric part: the two fixed
    points then differ by ~1e-8 of the velocities."""
    inv_I = np.asarray(rec["inv_I"], np.float32).astype(np.float64)
    mobile = np.asarray(rec["inv_mass"]) > 0  # the others have no inertia (inv_I may be 0)
    inertia = np.linalg.inv(inv_I[mobile])
    inv_I[mobile] = np.linalg.inv(0.5 * (inertia + np.swapaxes(inertia, 1, 2)))
    return P.Problem({**rec, "inv_I": inv_I})


def problems(name):
    """The records of `name`_problems.npz with at least one contact."""
    return [r for r in prototype().load_problems(PROTOTYPE / f"{name}_problems.npz") if r["n"] > 0]


def kernel_for(data, schedule, presweeps=0):
    """The solve kernel that a Simulator would launch for `data` (solver.add_solve)."""
    if schedule == "block":
        return newton_block_solver(data.real, current_arch() != "cuda")
    return newton_cg_solver(data.real, presweeps > 0) if data.cg else newton_solver(data.real, presweeps > 0)


def offer_last(data, last):
    """World 0's previous solution (newton_last) is `last` (B, 6), or there is none."""
    data.newton_kept.fill(0 if last is None else 1)
    if last is not None:
        data.newton_last.from_numpy(np.asarray(last, np.float64 if data.real == ti.f64 else np.float32).reshape(1, -1))


def solve(rec, iterations=100, tolerance=1e-6, timed=False, bilateral=None, schedule="world", linear="auto", presweeps=0,
          last=None):
    """Solve the problem `rec` (keys ids, frame, ra, rb, reg, gamma0, vc, wc, inv_mass, inv_I,
    reach, as in the prototype's records) with the package's Newton kernel in one world.
    Returns (v (B, 6) float64: linear and angular velocity, gamma (n, 3) contact frame,
    iterations, contact evaluations); timed: a function that runs the kernel again on the same
    arrays instead (for timing; its attribute `launch` runs the kernel alone, without resetting
    the arrays). bilateral: keyword arguments of BilateralRows.set_points (world 0),
    whose solved impulses come back as rec["b_gamma"] (points, 3 directions). schedule: "world"
    (solver.newton's kernel) or "block" (solver.newton_block's: cuda and vulkan only); linear:
    [solver] linear ("cg": solver.newton_cg's kernel; its CG iterations come back as
    rec["linear_iterations"]); presweeps: [solver] presweeps. The solve's residual
    [m/s] (the stopping test's) comes back as rec["residual"]. last: velocities (B, 6) offered
    as the previous solve's solution (newton_last, the candidate start of the world kernels);
    by default there is none, as on a simulator's first step."""
    n, B = len(rec["ids"]), len(rec["inv_mass"])
    given = rec
    if n == 0:  # no contact rows: one zero row that no world owns
        rec = {**rec, "ids": np.zeros((1, 4), np.int32), "frame": np.eye(3)[None], "ra": np.zeros((1, 3)), "rb": np.zeros((1, 3)),
               "reg": np.ones((1, 8)), "gamma0": np.zeros((1, 3))}
    settings = th.SolverSettings(method="newton", schedule=schedule, iterations=iterations, tolerance=tolerance, linear=linear,
                                 presweeps=presweeps)
    options = SolverOptions.resolve(settings, current_arch())
    data = SolverData(options, 1, B, max(n, 1))

    def array(dtype, value):
        value = np.ascontiguousarray(value)
        a = ti.ndarray(dtype, value.shape[: value.ndim - (dtype.ndim if hasattr(dtype, "ndim") else 0)])
        a.from_numpy(value)
        return a

    vec3, mat3 = ti.types.vector(3, float), ti.types.matrix(3, 3, float)
    ids = np.asarray(rec["ids"], np.int32).copy()
    ids[:, 0] = 0  # world 0
    args = dict(
        world_start=array(ti.i32, np.array([0, n], np.int32)),
        world_status=array(ti.i32, np.zeros(1, np.int32)),
        c_ids=array(ti.types.vector(4, ti.i32), ids),
        c_frame=array(mat3, np.asarray(rec["frame"], np.float32)),
        c_ra=array(vec3, np.asarray(rec["ra"], np.float32)),
        c_rb=array(vec3, np.asarray(rec["rb"], np.float32)),
        c_reg=array(ti.types.vector(8, float), np.asarray(rec["reg"], np.float32)),
        c_gamma=array(vec3, np.asarray(rec["gamma0"], np.float32)),
        body_reach=array(float, np.asarray(rec["reach"], np.float32)),
        body_inv_mass=array(float, np.asarray(rec["inv_mass"], np.float32)[None]),
        iterations=iterations,
        tolerance=tolerance,
        omega=options.relaxation,
        presweeps=options.presweeps,
    )
    rows = BilateralRows(1, B)
    if bilateral:
        rows.set_points(world=np.zeros(len(bilateral["body_a"]), int), **bilateral)
    args.update(rows.arrays())
    data.body_vc.from_numpy(np.asarray(rec["vc"], np.float32)[None])
    data.body_wc.from_numpy(np.asarray(rec["wc"], np.float32)[None])
    data.body_inv_inertia_W.from_numpy(np.asarray(rec["inv_I"], np.float32)[None])
    offer_last(data, last)
    kernel = kernel_for(data, schedule, options.presweeps)
    own = data.arrays()
    call = [args[k] if k in args else own[k] for k in kernel_parameters(kernel)]
    kernel(*call)
    if timed:  # the same solve again: from the dumped warm start and free velocities
        def again():
            args["c_gamma"].from_numpy(np.asarray(rec["gamma0"], np.float32))
            data.body_vc.from_numpy(np.asarray(rec["vc"], np.float32)[None])
            data.body_wc.from_numpy(np.asarray(rec["wc"], np.float32)[None])
            offer_last(data, last)  # not the solution of the run before
            kernel(*call)
            return int(data.world_iterations.to_numpy()[0]), int(data.world_updates.to_numpy()[0])

        def launch():  # the kernel alone, on whatever its arrays hold now (no copies)
            kernel(*call)
            ti.sync()
        again.launch = launch
        return again
    points = len(bilateral["body_a"]) if bilateral else 0
    given["b_gamma"] = rows.b_gamma.to_numpy()[:3 * points].reshape(points, 3)
    given["linear_iterations"] = int(data.world_linear_iterations.to_numpy()[0]) if data.cg else 0
    given["residual"] = float(data.world_residual.to_numpy()[0])
    given["islands"] = int(data.world_islands.to_numpy()[0]) if schedule == "world" else 1
    # The float64 iterate, by body (newton_pos orders the blocks).
    pos = data.newton_pos.to_numpy()[0]
    x = data.newton_v.to_numpy()[0].reshape(-1, 6)[pos]
    return (x.astype(np.float64), args["c_gamma"].to_numpy().astype(np.float64), int(data.world_iterations.to_numpy()[0]),
            int(data.world_updates.to_numpy()[0]))


def solve_batch(recs, iterations=100, tolerance=1e-6, schedule="world", linear="auto"):
    """Solve the problems `recs` (as solve(), same body count, no bilateral rows) as the worlds
    of one launch. Returns [(v (B, 6) float64, gamma (n, 3), iterations)] per world."""
    W, B = len(recs), len(recs[0]["inv_mass"])
    counts = [len(r["ids"]) for r in recs]
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    settings = th.SolverSettings(method="newton", schedule=schedule, iterations=iterations, tolerance=tolerance, linear=linear)
    options = SolverOptions.resolve(settings, current_arch())
    data = SolverData(options, W, B, int(starts[-1]))

    def array(dtype, value):
        value = np.ascontiguousarray(value)
        a = ti.ndarray(dtype, value.shape[: value.ndim - (dtype.ndim if hasattr(dtype, "ndim") else 0)])
        a.from_numpy(value)
        return a

    def rows(key, dtype=np.float32):
        return np.concatenate([np.asarray(r[key], dtype) for r in recs])

    vec3, mat3 = ti.types.vector(3, float), ti.types.matrix(3, 3, float)
    ids = rows("ids", np.int32).copy()
    ids[:, 0] = np.repeat(np.arange(W), counts)
    args = dict(
        world_start=array(ti.i32, starts), world_status=array(ti.i32, np.zeros(W, np.int32)),
        c_ids=array(ti.types.vector(4, ti.i32), ids), c_frame=array(mat3, rows("frame")), c_ra=array(vec3, rows("ra")),
        c_rb=array(vec3, rows("rb")), c_reg=array(ti.types.vector(8, float), rows("reg")), c_gamma=array(vec3, rows("gamma0")),
        body_reach=array(float, np.asarray(recs[0]["reach"], np.float32)),
        body_inv_mass=array(float, np.stack([np.asarray(r["inv_mass"], np.float32) for r in recs])),
        iterations=iterations, tolerance=tolerance, omega=options.relaxation,
        presweeps=options.presweeps,
    )
    args.update(BilateralRows(W, B).arrays())
    data.body_vc.from_numpy(np.stack([np.asarray(r["vc"], np.float32) for r in recs]))
    data.body_wc.from_numpy(np.stack([np.asarray(r["wc"], np.float32) for r in recs]))
    data.body_inv_inertia_W.from_numpy(np.stack([np.asarray(r["inv_I"], np.float32) for r in recs]))
    kernel = kernel_for(data, schedule, options.presweeps)
    own = data.arrays()
    kernel(*[args[k] if k in args else own[k] for k in kernel_parameters(kernel)])
    pos, v = data.newton_pos.to_numpy(), data.newton_v.to_numpy()
    gamma, its = args["c_gamma"].to_numpy().astype(np.float64), data.world_iterations.to_numpy()
    return [(v[w].reshape(-1, 6)[pos[w]].astype(np.float64), gamma[starts[w]:starts[w + 1]], int(its[w])) for w in range(W)]
