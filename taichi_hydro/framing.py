"""Viewer camera: automatic framing of a scene from its bodies' bounds, and the projection of
world points to pixels with the same pinhole model as GGUI (vertical field of view, z up).

The framing rule: the target is the centre of the axis-aligned box bounding every posed
surface vertex of the bodies that are not half-spaces (floors and walls are unbounded and
ignored); the camera looks at it from azimuth -0.9 rad and elevation 0.45 rad (front right,
slightly above), at the distance where the sphere circumscribing that box, enlarged by
MARGIN, just fits the narrower of the vertical and horizontal fields of view. Either end can
be overridden (`view --camera`, a scene's [view] table); the other is then kept from the rule
(a given position looks at the framed target; a given target is seen from the framed
direction and distance)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CameraPose", "FOV_DEG", "framed", "project"]

FOV_DEG = 40.0   # vertical field of view [deg]
AZIMUTH = -0.9   # direction of the camera from its target, about z from +x [rad]
ELEVATION = 0.45  # above the horizontal [rad]
MARGIN = 1.15    # the bounding sphere's radius is enlarged by this factor before fitting
MIN_RADIUS = 1e-3  # [m]: a scene of points still gets a finite view


@dataclass(frozen=True)
class CameraPose:
    """A pinhole camera in the world frame W: eye and target [m], z up, vertical field of
    view fov [deg]; radius [m] is the framed bounding sphere's (scales lights and lifts)."""

    eye: tuple[float, float, float]
    target: tuple[float, float, float]
    radius: float
    fov: float = FOV_DEG

    @property
    def distance(self) -> float:
        return float(np.linalg.norm(np.subtract(self.eye, self.target)))

    def clip_planes(self) -> tuple[float, float]:
        """Near and far clip distances [m]: 1 % of the distance to the target, and far
        enough for a floor tile 100 times the scene's size."""
        d = max(self.distance, MIN_RADIUS)
        return 0.01 * d, 100.0 * (d + self.radius)


def framed(lo, hi, aspect: float, position=None, target=None, fov: float = FOV_DEG) -> CameraPose:
    """The camera framing the box [lo, hi] [m] (the rule of this module) in an image of
    width / height `aspect`; `position` / `target` [m] override either end."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    centre = 0.5 * (lo + hi)
    radius = max(0.5 * float(np.linalg.norm(hi - lo)), MIN_RADIUS)
    half_v = np.radians(fov) / 2
    half = min(half_v, np.arctan(np.tan(half_v) * aspect))
    direction = np.array([np.cos(ELEVATION) * np.cos(AZIMUTH), np.cos(ELEVATION) * np.sin(AZIMUTH), np.sin(ELEVATION)])
    aim = centre if target is None else np.asarray(target, np.float64)
    eye = aim + MARGIN * radius / np.sin(half) * direction if position is None else np.asarray(position, np.float64)
    if np.allclose(eye, aim):
        raise ValueError(f"the camera position {eye.tolist()} is its target: they must differ")
    return CameraPose(tuple(eye.tolist()), tuple(aim.tolist()), radius, fov)


def view_axes(pose: CameraPose) -> np.ndarray:
    """Rows: the camera's right, up and backward unit vectors in W (OpenGL's lookAt, z up;
    looking straight down, +y is the image's up)."""
    back = np.subtract(pose.eye, pose.target)
    back = back / np.linalg.norm(back)
    right = np.cross([0.0, 0.0, 1.0], back)
    if np.linalg.norm(right) < 1e-9:
        right = np.array([1.0, 0.0, 0.0])
    right /= np.linalg.norm(right)
    return np.stack([right, np.cross(back, right), back])


def project(points, pose: CameraPose, size) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates (n, 2) (x right, y down, pixel centres at +0.5) of world points
    (n, 3) [m] in an image of `size` (width, height), and their depth in front of the
    camera (n,) [m] (negative: behind it)."""
    width, height = size
    p = (np.asarray(points, np.float64).reshape(-1, 3) - pose.eye) @ view_axes(pose).T
    depth = -p[:, 2]
    f = 0.5 * height / np.tan(np.radians(pose.fov) / 2)  # focal length [px]
    with np.errstate(divide="ignore", invalid="ignore"):
        x = 0.5 * width + f * p[:, 0] / depth
        y = 0.5 * height - f * p[:, 1] / depth
    return np.stack([x, y], axis=1), depth
