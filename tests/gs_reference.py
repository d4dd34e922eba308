"""Gauss-Seidel references for the Newton solver's equivalence test (test_newton.py): the
prototype's projected Gauss-Seidel (float64, shared/reference/solver_prototype/solvers.py pgs),
run on the hardest dumped step of each scene (hardest()) until a sweep
changes no body point by more than 1e-12 m/s. In Python that takes minutes per step (the pile's
takes thousands of sweeps over ~600 rows), too long for the suite, so the solutions are stored
in tests/data/gs_reference.npz, each with a fingerprint of the problem it solved:

    python tests/gs_reference.py [landing box pile]

Keys per scene NAME: NAME_step, NAME_fingerprint (sha256 of the step's arrays, hex),
NAME_v (the dynamic bodies' velocities, (6 B',) as Problem orders them), NAME_gamma (impulses
(n, 3), contact frame), NAME_sweeps, NAME_residual (the prototype's coulomb_residual of v
[m/s]: how far Gauss-Seidel stopped from the fixed point), NAME_seconds (its run time)."""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

PATH = Path(__file__).parent / "data" / "gs_reference.npz"
SCENES = ("landing", "box", "pile")
"""The coin is not among them: on its hardest step (306 rows, sliding) this Gauss-Seidel does not
converge. From the warm start, over 24 000 sweeps in blocks of 2000, each block still moved a
body point by 1e-4 to 4e-4 m/s and the Coulomb residual stayed at 1e-3 to 5e-3 m/s, without a
trend (2026-11-29). Newton's coin solutions are checked against the prototype's float64 Newton
and the Coulomb residual instead (test_newton.py, the dumped-step test)."""
TOLERANCE = 1e-12  # [m/s] per sweep
MAX_SWEEPS = 400_000


def fingerprint(rec: dict) -> str:
    """sha256 of the arrays of a dumped step that its Problem reads, in key order."""
    h = hashlib.sha256()
    for key in ("ids", "frame", "ra", "rb", "reg", "gamma0", "vc", "wc", "inv_mass", "inv_I", "reach"):
        h.update(key.encode())
        h.update(np.ascontiguousarray(rec[key]).tobytes())
    return h.hexdigest()


def hardest(name: str) -> dict:
    """The dumped step of `name` on which the engine took the most Gauss-Seidel sweeps, of those
    the one with the most contacts (the pile's and the coin's sweeps reach the engine's cap on
    many steps: the largest of them, not the first)."""
    from newton_problems import problems

    return max(problems(name), key=lambda r: (r["sweeps"], r["n"]))


def reference(name: str) -> dict[str, np.ndarray]:
    from newton_problems import oracle, prototype

    P = prototype()
    rec = hardest(name)
    p = oracle(P, rec)
    t0 = time.perf_counter()
    v, gamma, sweeps = P.pgs(p, tol=TOLERANCE, max_it=MAX_SWEEPS)
    seconds = time.perf_counter() - t0
    if sweeps >= MAX_SWEEPS:
        raise RuntimeError(f"{name} step {rec['step']}: Gauss-Seidel did not reach {TOLERANCE} m/s in {MAX_SWEEPS} sweeps")
    residual = P.coulomb_residual(p, v)
    print(f"{name} step {rec['step']}: {rec['n']} contacts, {sweeps} sweeps in {seconds:.0f} s, residual {residual:.1e} m/s",
          flush=True)
    return {f"{name}_step": np.int64(rec["step"]), f"{name}_fingerprint": np.str_(fingerprint(rec)), f"{name}_v": v,
            f"{name}_gamma": gamma, f"{name}_sweeps": np.int64(sweeps), f"{name}_residual": np.float64(residual),
            f"{name}_seconds": np.float64(seconds)}


def main(names: list[str]) -> None:
    """Compute the references of `names` and write them with those already stored (atomic)."""
    out = dict(np.load(PATH)) if PATH.is_file() else {}
    for name in names:
        if name not in SCENES:
            raise SystemExit(f"unknown scene {name!r}; scenes: {', '.join(SCENES)}")
        out.update(reference(name))
    PATH.parent.mkdir(exist_ok=True)
    tmp = PATH.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, **out)
    tmp.replace(PATH)


if __name__ == "__main__":
    main(sys.argv[1:] or list(SCENES))
