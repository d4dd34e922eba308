"""Tactile sensors of a Simulator: the device images of each registered face, made in every step
after the solve (tactile.raster), and their reads as NumPy arrays or zero-copy torch views."""

from __future__ import annotations

import numpy as np
import taichi as ti

from .. import hostcopy, interop
from ..backend import spend_launches
from ..checks import integer
from ..errors import SceneError
from ..plan import Plan
from ..types import host_float, vec2
from .face import TactileFace
from .raster import clear_worlds, rasterise_face

__all__ = ["TactileSensor", "TactileSensors", "MAX_PIXELS"]

MAX_PIXELS = 1 << 20
"""Pixels of one image (rows x cols) at most: a face of a million pixels per world is a mistake
(a polygon thread walks every pixel its box covers)."""


def checked_grid(grid) -> tuple[int, int]:
    """(rows, cols) of an image, each >= 1, rows x cols <= MAX_PIXELS; SceneError otherwise."""
    if isinstance(grid, (str, bytes)) or not hasattr(grid, "__len__") or len(grid) != 2:
        raise SceneError(f"tactile: grid must be (rows, cols), got {grid!r}")
    rows, cols = integer(grid[0], "tactile grid rows", 1), integer(grid[1], "tactile grid cols", 1)
    if rows * cols > MAX_PIXELS:
        raise SceneError(f"tactile: grid {rows} x {cols} has more than {MAX_PIXELS} pixels")
    return rows, cols


class TactileSensor:
    """The pressure and shear images of one face (tactile.face.TactileFace) for every world:

    pressure (worlds, rows, cols) [Pa]: the hydroelastic pressure force along the face normal
      per unit face area, pixel by pixel (tactile.raster);
    shear (worlds, rows, cols, 2) [Pa]: the solved friction force on the face's body per unit
      face area, components along the face's u and v axes.
    Column j runs along u, row i along v; pixel (i, j) covers u in [-w/2 + j du, -w/2 + (j+1)
    du], v likewise (du = width / cols, dv = height / rows). The images are those of the last
    step (its contact polygons, at the poses they were computed at, and its solved impulses).

    face: the TactileFace; grid: (rows, cols); pixel_area [m^2]; name: the binding prefix."""

    def __init__(self, face: TactileFace, grid: tuple[int, int], worlds: int, index: int):
        self.face, self.grid, self.worlds = face, grid, worlds
        self.name = f"tactile{index}"
        rows, cols = grid
        self.pixel_area = (face.size[0] / cols) * (face.size[1] / rows)
        self.pressure_array = ti.ndarray(float, (worlds, rows, cols))
        self.shear_array = ti.ndarray(vec2, (worlds, rows, cols))
        self.face_array = ti.ndarray(float, 14)
        spend_launches(3)
        hostcopy.from_numpy(self.face_array, face.packed().astype(host_float()))
        self.pressure_array.fill(0.0)
        self.shear_array.fill(0.0)

    def arrays(self) -> dict:
        return {f"{self.name}_pressure": self.pressure_array, f"{self.name}_shear": self.shear_array,
                f"{self.name}_face": self.face_array}

    def add_launch(self, plan: Plan) -> None:
        """The rasterisation of this face, added to `plan` (the step's, after the solve)."""
        plan.add(rasterise_face, face_geometry=int(self.face.geometry), face_body=int(self.face.body),
                 face=f"{self.name}_face", pressure=f"{self.name}_pressure", shear=f"{self.name}_shear")

    def clear(self, world_row) -> None:
        """Zero the images of the worlds a reset selects (world_row[w] >= 0)."""
        spend_launches(1)
        clear_worlds(world_row, self.pressure_array, self.shear_array)

    def pressure(self) -> np.ndarray:
        """(worlds, rows, cols) [Pa], a host copy."""
        spend_launches(1)
        return hostcopy.to_numpy(self.pressure_array).astype(np.float64)

    def shear(self) -> np.ndarray:
        """(worlds, rows, cols, 2) [Pa] (u, v components), a host copy."""
        spend_launches(1)
        return hostcopy.to_numpy(self.shear_array).astype(np.float64)

    def tensors(self) -> dict:
        """Zero-copy torch views (cpu and cuda backends; interop.tensor_view): pressure (worlds,
        rows, cols) and shear (worlds, rows, cols, 2), current after every step. Read-only in
        meaning: the next step overwrites them."""
        return {"pressure": interop.tensor_view(self.pressure_array), "shear": interop.tensor_view(self.shear_array)}

    def pixel_centers(self) -> tuple[np.ndarray, np.ndarray]:
        """(u (cols,), v (rows,)) [m]: the face coordinates of the pixel centres."""
        rows, cols = self.grid
        w, h = self.face.size
        return (-0.5 * w + (np.arange(cols) + 0.5) * w / cols, -0.5 * h + (np.arange(rows) + 0.5) * h / rows)


class TactileSensors:
    """The sensors of a Simulator, in the order they were made (each keyed by what made it)."""

    def __init__(self):
        self.sensors: list[TactileSensor] = []
        self.keys: list[tuple] = []

    def find(self, key: tuple) -> TactileSensor | None:
        return self.sensors[self.keys.index(key)] if key in self.keys else None

    def add(self, key: tuple, face: TactileFace, grid: tuple[int, int], worlds: int) -> TactileSensor:
        sensor = TactileSensor(face, grid, worlds, len(self.sensors))
        self.sensors.append(sensor)
        self.keys.append(key)
        return sensor

    def arrays(self) -> dict:
        out: dict = {}
        for s in self.sensors:
            out.update(s.arrays())
        return out

    def add_launches(self, plan: Plan) -> None:
        for s in self.sensors:
            s.add_launch(plan)

    def clear(self, world_row) -> None:
        for s in self.sensors:
            s.clear(world_row)
