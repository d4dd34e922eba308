"""Rotations on the host (NumPy, float64): quaternions (w, x, y, z) to rotation matrices. The
device's counterparts are the ti.func helpers of math3d."""

from __future__ import annotations

import numpy as np

__all__ = ["rotation_matrices"]


def rotation_matrices(q) -> np.ndarray:
    """Rotation matrices (..., 3, 3) of unit quaternions (..., 4) given as (w, x, y, z): R q
    rotates a vector of the rotated frame into the reference frame (R_WB from q_WB)."""
    q = np.asarray(q, dtype=np.float64)
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], -2)
