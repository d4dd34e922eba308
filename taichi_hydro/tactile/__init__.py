"""Tactile images: the contact pressure and friction over a rectangular face of a body (a
compliant pad), for every world at once, rasterised from the contact polygons on the device
(face: which rectangle; raster: the kernels; sensor: the images and their reads)."""

from .face import SIDES, TactileFace, resolve_face
from .sensor import TactileSensor, TactileSensors

__all__ = ["SIDES", "TactileFace", "TactileSensor", "TactileSensors", "resolve_face"]
