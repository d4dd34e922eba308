"""Saved start states of the settled benchmark cases (cases.DynamicsCase with settle > 0).

    python -m bench.states [--cases pile_27_settled,box_stack_held]   # remake bench/states/<case>.npz

A settled case is timed from one state that is the same for every method, schedule, backend,
world count and run, and for Drake: the state after the case's `settle` steps, made once by
this script and committed as bench/states/<case>.npz. Why a file rather than settling at the
start of each run: the pile is chaotic (run 1.5 s in the default, non-deterministic mode, the
same code left it in different states from run to run, some with a ball still moving, and
Gauss-Seidel's iterations over the next 0.5 s ranged from 2 to 83 per step), and a state
settled by the method being timed differs from method to method. Settling in deterministic
mode at the start of each run would fix the chance but not the backend (cpu and vulkan round
differently) nor the code version (any change to the solver moves the pile), and would cost
the settling at every run. The file is made on the cpu backend in one world with the scene's
own solver settings and [solver] deterministic = true, so remaking it with the same code
gives the same bytes.

The file holds the state arrays (position, orientation, velocity, angular_velocity; shape
(1, bodies, 3|4), SI, world frame, body frame origin, as Simulator.get_state returns them),
the case name, the settle steps, the scene's fingerprint (scene_fingerprint) and the largest
body speeds at the end of the settling. Warm-start impulses are not part of it: the timed run
starts from it with Simulator.reset(state=...), so its first step is solved cold, for every
method alike. load() refuses a file whose case or fingerprint is not the case's (SceneError
naming the file and both cases): remake the file when a settled case's scene changes."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

import taichi_hydro as th
from taichi_hydro.diskcache import digest
from taichi_hydro.output import atomic_write
from taichi_hydro.state import STATE_FIELDS

from . import cases as registry
from . import cli

STATES = Path(__file__).resolve().parent / "states"
"""Where the committed start states are: STATES / f"{case}.npz"."""

REST_SPEED = 1e-3
"""[m/s] A settled case's bodies must all be slower than this at the saved time (|v_WB| of
the body frame origin): a faster one means the case needs more settle steps."""


def path_of(case: registry.DynamicsCase) -> Path:
    return STATES / f"{case.name}.npz"


def scene_fingerprint(scene: th.Scene, settle: int) -> str:
    """Hex digest of what a saved state belongs to: dt [s], gravity [m/s^2], the settle steps,
    and per body (scene order) its name, type, mass [kg] and initial state. Shapes are left
    out (their files are absolute paths, which differ between checkouts); a change of body
    or of initial state is enough to tell another scene."""
    parts: list = [float(scene.dt), np.asarray(scene.gravity, dtype=np.float64), int(settle)]
    for b in scene.bodies:
        parts += [b.name, b.type, repr(b.mass), np.asarray([*b.p_WB, *b.q_WB, *b.v_WB, *b.w_WB], dtype=np.float64)]
    return digest(*parts)


def settle(case: registry.DynamicsCase) -> dict:
    """The state after case.settle steps of the case's scene, one world, the scene's own
    solver settings with deterministic = true (th.init must have been called; the cpu backend
    makes the committed files). Returns the state arrays (1, B, 3|4) float64, and the largest
    |v_WB| [m/s] and |w_WB| [rad/s] over the dynamic bodies at that time."""
    scene = case.scene()
    scene = dataclasses.replace(scene, solver=dataclasses.replace(scene.solver, deterministic=True))
    sim = th.Simulator(scene, worlds=1)
    sim.step(case.settle)
    if sim.world_status()[0]:
        raise th.SceneError(f"{case.name}: the world diverged while settling ({case.settle} steps)")
    state = sim.get_state()
    dynamic = [i for i, b in enumerate(scene.bodies) if b.type == "dynamic"]
    return {**state, "max_speed": float(np.linalg.norm(state["velocity"][0, dynamic], axis=-1).max()),
            "max_angular_speed": float(np.linalg.norm(state["angular_velocity"][0, dynamic], axis=-1).max()),
            "method": sim.method}


def save(case: registry.DynamicsCase, settled: dict, path: Path) -> None:
    """Write `settled` (settle's result) for `case` to `path` (atomically)."""
    arrays = {name: settled[name] for name, _ in STATE_FIELDS}
    meta = {"case": np.array(case.name), "settle_steps": np.array(case.settle), "method": np.array(settled["method"]),
            "fingerprint": np.array(scene_fingerprint(case.scene(), case.settle)),
            "max_speed": np.array(settled["max_speed"]), "max_angular_speed": np.array(settled["max_angular_speed"])}
    atomic_write(path, lambda tmp: np.savez(tmp, **arrays, **meta))


def load(case: registry.DynamicsCase, path: Path | None = None) -> dict:
    """The saved start state of `case` (from `path`, default path_of(case)): the state arrays
    (1, B, 3|4) and the metadata save wrote. SceneError naming the file and the case when the
    file is missing, is not a saved state, or was made for another case or scene."""
    path = Path(path) if path is not None else path_of(case)
    remake = f"remake it with `python -m bench.states --cases {case.name}`"
    try:
        with np.load(path) as f:
            data = {k: f[k] for k in f.files}
    except FileNotFoundError:
        raise th.SceneError(f"{path}: no saved start state for case '{case.name}'; {remake}") from None
    except (OSError, ValueError) as exc:
        raise th.SceneError(f"{path}: not a saved start state (case '{case.name}'): {exc}") from None
    missing = [k for k in (*(name for name, _ in STATE_FIELDS), "case", "fingerprint") if k not in data]
    if missing:
        raise th.SceneError(f"{path}: not a saved start state for case '{case.name}': missing {missing}")
    made_for = str(data["case"])
    if made_for != case.name:
        raise th.SceneError(f"{path}: the saved state is for case '{made_for}', not '{case.name}'")
    if str(data["fingerprint"]) != scene_fingerprint(case.scene(), case.settle):
        raise th.SceneError(f"{path}: the saved state of case '{case.name}' was made for another scene or settle "
                            f"time (fingerprint differs); {remake}")
    return data


def start_state(case: registry.DynamicsCase, worlds: int, path: Path | None = None) -> dict:
    """The saved start state of `case` for a batch: each state array repeated to (worlds, B,
    3|4), keyed as Simulator.reset(state=...) takes it."""
    data = load(case, path)
    return {name: np.repeat(data[name], worlds, axis=0) for name, _ in STATE_FIELDS}


def with_start_state(scene: th.Scene, state: dict) -> th.Scene:
    """The scene with world 0 of `state` as its bodies' initial state (p_WB, q_WB, v_WB, w_WB):
    how the Drake harness, which builds from a scene, starts from a saved state."""
    bodies = []
    for i, b in enumerate(scene.bodies):
        values = (tuple(float(x) for x in state[name][0, i]) for name, _ in STATE_FIELDS)
        bodies.append(dataclasses.replace(b, **dict(zip(("p_WB", "q_WB", "v_WB", "w_WB"), values))))
    return dataclasses.replace(scene, bodies=tuple(bodies))


def main(argv=None) -> int:
    settled_cases = [c.name for c in registry.DYNAMICS_CASES if c.settle]
    p = cli.parser("bench.states", __doc__)
    p.add_argument("--cases", default=",".join(settled_cases), help=f"comma-separated, of {settled_cases}")
    args = p.parse_args(argv)
    names = args.cases.split(",")
    unknown = [n for n in names if n not in settled_cases]
    if unknown:
        p.error(f"--cases: {unknown} are not settled cases; choose from {settled_cases}")
    th.init("cpu")
    slow = 0
    for name in names:
        case = registry.find_dynamics(name)
        settled = settle(case)
        path = path_of(case)
        STATES.mkdir(exist_ok=True)
        save(case, settled, path)
        at_rest = settled["max_speed"] < REST_SPEED
        slow += not at_rest
        print(f"{path}: {case.name} after {case.settle} steps ({case.settle * case.scene().dt:g} s, {settled['method']}, "
              f"deterministic): largest |v_WB| {settled['max_speed']:.3g} m/s, |w_WB| {settled['max_angular_speed']:.3g} "
              f"rad/s{'' if at_rest else f' -- NOT at rest (>= {REST_SPEED} m/s): settle longer'}", flush=True)
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
