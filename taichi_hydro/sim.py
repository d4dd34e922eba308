"""Simulator: the model, the batched state of every world, and the stages of a step."""

from __future__ import annotations

import numpy as np
import taichi as ti

from .backend import current_precision, require_init
from .collision import Capacities, Collision
from .errors import SceneError
from .model import DeviceModel, build_model
from .scene import Scene
from .surfaces import ContactSurface, group_surfaces

__all__ = ["Simulator"]


class Simulator:
    """`worlds` independent copies of `scene`, stepped together on the device.

    State per world (shape (worlds, bodies, ...)): body_p_WB [m], body_q_WB (w, x, y, z),
    body_v_WB [m/s], body_w_WB [rad/s], all in the world frame, for the body frame origin as
    the scene places it.

    capacities / max_capacity: initial pool sizes and the size no pool may grow past
    (collision.Capacities). graph: run each stage as one Taichi compute graph (faster launches;
    False runs kernels one by one, same results)."""

    def __init__(self, scene: Scene, worlds: int = 1, *, capacities: Capacities | None = None, max_capacity: int = 1 << 28,
                 graph: bool = True):
        require_init()
        if not isinstance(worlds, (int, np.integer)) or worlds < 1:
            raise SceneError(f"worlds must be a positive integer, got {worlds!r}")
        self.scene = scene
        self.worlds = int(worlds)
        self.data = build_model(scene)
        self.model = DeviceModel(self.data)
        B = len(scene.bodies)
        self.body_p_WB = ti.ndarray(ti.math.vec3, (self.worlds, B))
        self.body_q_WB = ti.ndarray(ti.math.vec4, (self.worlds, B))
        self.body_v_WB = ti.ndarray(ti.math.vec3, (self.worlds, B))
        self.body_w_WB = ti.ndarray(ti.math.vec3, (self.worlds, B))
        self.collision = Collision(self.model, self.worlds, capacities, max_capacity, use_graph=graph)
        self.reset()

    @property
    def body_names(self) -> list[str]:
        return [b.name for b in self.scene.bodies]

    def _float(self):
        return np.float64 if current_precision() == "f64" else np.float32

    def reset(self) -> None:
        """Every world back to the scene's initial state."""
        b = self.scene.bodies
        tile = lambda rows: np.broadcast_to(np.array(rows, dtype=np.float64), (self.worlds, *np.shape(rows)))  # noqa: E731
        self.set_state(
            position=tile([x.p_WB for x in b]),
            orientation=tile([x.q_WB for x in b]),
            velocity=tile([x.v_WB for x in b]),
            angular_velocity=tile([x.w_WB for x in b]),
        )

    def set_state(self, position=None, orientation=None, velocity=None, angular_velocity=None) -> None:
        """Overwrite state arrays of shape (worlds, bodies, 3) or (worlds, bodies, 4) [SI,
        world frame]; orientations are normalised. Non-finite values raise SceneError."""
        B = len(self.scene.bodies)
        for name, value, arr, width in (
            ("position", position, self.body_p_WB, 3),
            ("orientation", orientation, self.body_q_WB, 4),
            ("velocity", velocity, self.body_v_WB, 3),
            ("angular_velocity", angular_velocity, self.body_w_WB, 3),
        ):
            if value is None:
                continue
            v = np.asarray(value, dtype=np.float64)
            if v.shape != (self.worlds, B, width):
                raise SceneError(f"{name} must have shape {(self.worlds, B, width)}, got {v.shape}")
            if not np.all(np.isfinite(v)):
                w, b = np.argwhere(~np.isfinite(v))[0][:2]
                raise SceneError(f"{name} of body '{self.scene.bodies[b].name}' in world {w} is not finite: {v[w, b].tolist()}")
            if width == 4:
                norm = np.linalg.norm(v, axis=2, keepdims=True)
                if np.any(norm < 1e-12):
                    raise SceneError(f"{name}: a quaternion has zero norm")
                v = v / norm
            arr.from_numpy(np.ascontiguousarray(v, dtype=self._float()))

    def get_state(self) -> dict[str, np.ndarray]:
        """Host copies (float64) of the state arrays, keyed as in set_state."""
        return {
            "position": self.body_p_WB.to_numpy().astype(np.float64),
            "orientation": self.body_q_WB.to_numpy().astype(np.float64),
            "velocity": self.body_v_WB.to_numpy().astype(np.float64),
            "angular_velocity": self.body_w_WB.to_numpy().astype(np.float64),
        }

    def collide(self) -> np.ndarray:
        """Compute the contact polygons of every world at the current poses (the collision
        stage of a step). Returns the pool counters."""
        return self.collision.run(self.body_p_WB, self.body_q_WB)

    def contact_surfaces(self, world: int = 0) -> list[ContactSurface]:
        """Contact surfaces of `world` at the current poses, per body pair in scene order."""
        if not 0 <= world < self.worlds:
            raise SceneError(f"world must be in [0, {self.worlds}), got {world}")
        counts = self.collide()
        pool = self.collision.pool.to_numpy(int(counts[3]))
        return group_surfaces(pool, world, self.data)
