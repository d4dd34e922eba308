"""Rotations on the host (NumPy, float64): quaternions (w, x, y, z) to rotation matrices and
back, and URDF's roll-pitch-yaw angles. The device's counterparts are the ti.func helpers of
math3d."""

from __future__ import annotations

import numpy as np

__all__ = ["rotation_matrices", "quaternion_from_matrix", "rpy_matrix"]


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


def quaternion_from_matrix(R) -> np.ndarray:
    """Unit quaternion (w, x, y, z), w >= 0, of a rotation matrix (3, 3) (Shepperd's method: the
    largest of the four squared components is found first, so no division by a small one)."""
    R = np.asarray(R, dtype=np.float64)
    t = np.trace(R)
    squares = [t, R[0, 0], R[1, 1], R[2, 2]]
    i = int(np.argmax(squares))
    if i == 0:
        s = 2.0 * np.sqrt(1.0 + t)
        q = [0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s]
    elif i == 1:
        s = 2.0 * np.sqrt(1.0 + 2 * R[0, 0] - t)
        q = [(R[2, 1] - R[1, 2]) / s, 0.25 * s, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s]
    elif i == 2:
        s = 2.0 * np.sqrt(1.0 + 2 * R[1, 1] - t)
        q = [(R[0, 2] - R[2, 0]) / s, (R[0, 1] + R[1, 0]) / s, 0.25 * s, (R[1, 2] + R[2, 1]) / s]
    else:
        s = 2.0 * np.sqrt(1.0 + 2 * R[2, 2] - t)
        q = [(R[1, 0] - R[0, 1]) / s, (R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, 0.25 * s]
    q = np.array(q)
    q /= np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def rpy_matrix(rpy) -> np.ndarray:
    """Rotation matrix (3, 3) of URDF roll-pitch-yaw angles (r, p, y) [rad]: rotations about the
    fixed x, y and z axes in that order, R = Rz(y) Ry(p) Rx(r) (the URDF specification's
    <origin rpy>)."""
    r, p, y = (float(a) for a in rpy)
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])
