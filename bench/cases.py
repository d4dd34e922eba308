"""The benchmark registry: named scenes with the parameters they sweep."""

from __future__ import annotations

from dataclasses import dataclass
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

