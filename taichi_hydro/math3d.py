"""Pure ti.func helpers: quaternions (w, x, y, z), rotations, contact frames. No fields."""

import taichi as ti

from .types import mat3, vec3, vec4


@ti.func
def finite(x: float) -> ti.i32:
    """1 when x is finite (not NaN, not +-inf; float32's largest value is 3.4e38)."""
    return 1 if ti.abs(x) < 3.0e38 else 0  # a comparison with NaN is false


@ti.func
def finite_pose(p: vec3, q: vec4) -> ti.i32:
    """1 when every component of a pose (position p, quaternion q) is finite."""
    ok = 1
    for k in ti.static(range(3)):
        ok &= finite(p[k])
    for k in ti.static(range(4)):
        ok &= finite(q[k])
    return ok


@ti.func
def skew(v: vec3) -> mat3:
    """[v]x: skew(v) @ x = v.cross(x)."""
    return mat3([0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0])


@ti.func
def quat_to_mat(q: vec4) -> mat3:
    """Rotation matrix R of a unit quaternion q = (w, x, y, z)."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    return mat3(
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    )


@ti.func
def quat_mul(a: vec4, b: vec4) -> vec4:
    """Hamilton product a (x) b."""
    return vec4(
        a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
        a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
        a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
        a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
    )


@ti.func
def orthonormal_frame(n: vec3):
    """Two unit tangents t1, t2 with (t1, t2, n) right-handed, continuous in n except near
    n = -z (Frisvad-style branch on the sign of n_z)."""
    sign = 1.0 if n[2] >= 0.0 else -1.0
    a = -1.0 / (sign + n[2])
    b = n[0] * n[1] * a
    t1 = vec3(1.0 + sign * n[0] * n[0] * a, sign * b, -sign * n[0])
    t2 = vec3(b, sign + n[1] * n[1] * a, -n[1])
    return t1, t2
