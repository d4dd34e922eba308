"""The benchmark registry: named scenes with the parameters they sweep."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import taichi_hydro as th


def _sphere(name, z, resolution, radius=0.1, modulus=1e5, x=0.0):
    return {
        "name": name,
        "mass": 0.5,
        "position": [x, 0.0, z],
        "shape": {"type": "sphere", "radius": radius},
        "contact": {"modulus": modulus, "resolution": resolution},
    }


def sphere_plane(resolution: float) -> th.Scene:
    """Compliant sphere R = 0.1 m, E = 100 kPa, 5 mm into a rigid half-space (tet-plane path)."""
    ground = {"name": "ground", "type": "static", "shape": {"type": "halfspace"}}
    return th.scene_from_dict({"body": [ground, _sphere("ball", 0.095, resolution)]}, source="sphere_plane")


def sphere_sphere(resolution: float) -> th.Scene:
    """Two compliant spheres R = 0.1 m overlapping 5 mm, off-axis (tet-tet path, spatial hash)."""
    return th.scene_from_dict(
        {"body": [_sphere("lower", 0.0, resolution), _sphere("upper", 0.1945, resolution, x=0.02)]}, source="sphere_sphere"
    )


def box_table(resolution: float) -> th.Scene:
    """Compliant box 0.2 x 0.15 x 0.08 m, 1 mm into a rigid table box (tet-triangle path).
    Boxes are exact: `resolution` is unused and kept for a uniform signature."""
    del resolution
    return th.scene_from_dict(
        {
            "body": [
                {"name": "table", "type": "static", "position": [0, 0, -0.05], "shape": {"type": "box", "size": [0.5, 0.5, 0.1]}},
                {"name": "box", "mass": 0.2, "position": [0, 0, 0.039], "shape": {"type": "box", "size": [0.2, 0.15, 0.08]},
                 "contact": {"modulus": 1e5}},
            ]
        },
        source="box_table",
    )


@dataclass(frozen=True)
class ContactCase:
    """A contact-query benchmark: scene(resolution), swept over worlds and resolutions."""

    name: str
    scene: Callable[[float], th.Scene]
    resolutions: tuple[float, ...]
    worlds: tuple[int, ...]
    notes: str = ""


CONTACT_CASES = [
    ContactCase("sphere_plane", sphere_plane, (0.02, 0.01, 0.005, 0.0025), (1, 16, 256, 4096)),
    ContactCase("sphere_sphere", sphere_sphere, (0.02, 0.01, 0.005), (1, 16, 256, 4096)),
    ContactCase("box_table", box_table, (0.0,), (1, 16, 256, 4096)),
]


def contact_points(case: ContactCase, quick: bool = False) -> list[tuple[float, int]]:
    """(resolution, worlds) pairs: every world count at the middle resolution, every
    resolution at 1 and 256 worlds. `quick` keeps the smallest of each."""
    mid = case.resolutions[min(1, len(case.resolutions) - 1)]
    pts = {(mid, w) for w in case.worlds} | {(r, w) for r in case.resolutions for w in (1, 256) if w in case.worlds}
    if quick:
        pts = {(mid, 1), (mid, 16)}
    return sorted(pts, key=lambda p: (-p[0], p[1]))


def find(name: str) -> ContactCase:
    for c in CONTACT_CASES:
        if c.name == name:
            return c
    raise KeyError(f"unknown case {name!r}; cases: {[c.name for c in CONTACT_CASES]}")



# --------------------------------------------------------------------------- dynamics

SCENES = Path(__file__).resolve().parents[1] / "scenes"


PILE_DT = 2e-3
"""The piles' time step [s]."""


def pile(per_side: int) -> th.Scene:
    """per_side**3 compliant spheres (r = 2 cm, 40 g, E = 1 MPa, mesh 1 cm) in a lattice of
    5 cm pitch, each column slightly sheared, dropped into a rigid square bin (floor and four
    walls, 1.5 cm of clearance): scenes/pile.toml is per_side = 3. Time step PILE_DT."""
    half = 0.025 * (per_side - 1) + 0.04
    walls = {  # name: (position, orientation) of a half-space whose solid side faces outward
        "wall_px": ([half, 0, 0], [0.7071067811865476, 0, -0.7071067811865476, 0]),
        "wall_nx": ([-half, 0, 0], [0.7071067811865476, 0, 0.7071067811865476, 0]),
        "wall_py": ([0, half, 0], [0.7071067811865476, 0.7071067811865476, 0, 0]),
        "wall_ny": ([0, -half, 0], [0.7071067811865476, -0.7071067811865476, 0, 0]),
    }
    static = {"type": "static", "shape": {"type": "halfspace"}, "contact": {"friction": 0.4}}
    bodies = [{"name": "floor", **static}]
    bodies += [{"name": n, **static, "position": p, "orientation": q} for n, (p, q) in walls.items()]
    offset = 0.025 * (per_side - 1)
    for i in range(per_side):
        for j in range(per_side):
            for k in range(per_side):
                bodies.append({
                    "name": f"ball_{i}{j}{k}",
                    "mass": 0.04,
                    "position": [0.05 * i - offset + 0.002 * k, 0.05 * j - offset - 0.002 * k, 0.03 + 0.05 * k],
                    "shape": {"type": "sphere", "radius": 0.02},
                    "contact": {"modulus": 1e6, "resolution": 0.01, "friction": 0.4},
                })
    return th.scene_from_dict({"sim": {"dt": PILE_DT}, "body": bodies}, source=f"pile_{per_side ** 3}")


@dataclass(frozen=True)
class Probe:
    """A case's outcome, read the same way from our run and from Drake's, so that a speed
    comparison can be checked to be like for like: `body`'s displacement over the timed
    interval [m] (a held object's drift) and, at its end, the contact force on the second body
    of each pair from the first [N, world frame] (scene body names)."""

    body: str | None = None
    pairs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class DynamicsCase:
    """A time-stepping benchmark: `steps` steps from the scene's initial state, or, with
    `settle` > 0, from the state after `settle` steps (the contact-rich regime: a settled pile,
    a held stack, a held grasp), the same simulated interval for us and for Drake, swept over
    world counts. That state is made once and saved (bench.states: bench/states/<name>.npz,
    settled in deterministic mode with the scene's own solver settings), so that every method,
    schedule, backend and run is timed from the same one.

    world_step_budget: at most this many world-steps per timed run: a batch of W worlds is
    timed over min(steps, budget // W) steps (the JSON row says so), which keeps the large
    batches of a slow scene within minutes on a small machine. probe: the outcome reported
    next to the speed (Probe)."""

    name: str
    scene: Callable[[], th.Scene]
    steps: int
    worlds: tuple[int, ...]
    settle: int = 0
    world_step_budget: int | None = None
    probe: Probe | None = None

    def timed_steps(self, worlds: int) -> int:
        """The steps timed for a batch of `worlds` worlds (world_step_budget)."""
        if self.world_step_budget is None:
            return self.steps
        return max(1, min(self.steps, self.world_step_budget // worlds))


DYNAMICS_CASES = [
    DynamicsCase("box_stack", lambda: th.load_scene(SCENES / "box_stack.toml"), 50, (1, 8, 64, 512)),
    DynamicsCase("coin", lambda: th.load_scene(SCENES / "coin.toml"), 300, (1, 8, 64)),
    *(DynamicsCase(f"pile_{n ** 3}", lambda n=n: pile(n), 150, (1, 8, 64) if n <= 3 else (1,)) for n in (1, 2, 3, 4, 6)),
    # The long runs of the pile from its start (spheres falling, landing, settling):
    # 1 s (the Drake ratio's interval) and 1.5 s (the iterations' interval), 64 worlds. Until
    # 2026-12-04 these two ran 1000 and 1500 steps, 2 s and 3 s at the pile's 2 ms step: those
    # runs are pile_27_2s and pile_27_3s (README, "Benchmarks": the correction).
    # A name's interval is checked against its steps and the scene's dt (tests/test_bench_states.py).
    DynamicsCase("pile_27_1s", lambda: pile(3), round(1.0 / PILE_DT), (64,)),
    DynamicsCase("pile_27_1_5s", lambda: pile(3), round(1.5 / PILE_DT), (64,)),
    DynamicsCase("pile_27_2s", lambda: pile(3), round(2.0 / PILE_DT), (64,)),
    DynamicsCase("pile_27_3s", lambda: pile(3), round(3.0 / PILE_DT), (64,)),
    # The pile after 1.5 s (settled: every sphere resting on others, the fastest at 1.3e-5 m/s
    # in the saved state), timed over the next 0.5 s; the box stack held for 1 s, timed over
    # the next 2 s.
    DynamicsCase("pile_27_settled", lambda: pile(3), 250, (1, 64), settle=750),
    DynamicsCase("box_stack_held", lambda: th.load_scene(SCENES / "box_stack.toml"), 200, (1, 64), settle=100),
    # Articulated robots (URDF), timed over 0.2 s once settled: the gripper holding its box
    # after 0.05 s (the grasp is at rest by then: tests/test_urdf.py), and the 7-link arm
    # pressing its fingertip on the table after 1 s (at rest from 0.6 s: scenes/arm7_table.toml).
    DynamicsCase("gripper_hold", lambda: th.load_scene(SCENES / "gripper.toml"), 200, (1, 64, 1024), settle=50,
                 world_step_budget=25_600,
                 probe=Probe("box", (("box", "gripper/left_finger"), ("box", "gripper/right_finger")))),
    DynamicsCase("arm7_table", lambda: th.load_scene(SCENES / "arm7_table.toml"), 200, (1, 64, 1024), settle=1000,
                 world_step_budget=25_600, probe=Probe("arm/link7", (("table", "arm/link7"),))),
]


def find_dynamics(name: str) -> DynamicsCase:
    for c in DYNAMICS_CASES:
        if c.name == name:
            return c
    raise KeyError(f"unknown case {name!r}; cases: {[c.name for c in DYNAMICS_CASES]}")
