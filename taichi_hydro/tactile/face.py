"""The rectangle a tactile image covers: a face of one geometry of a body, resolved on the host
from what the user names (body, geometry, face) into the body frame B.

A face is given in its geometry's frame G, either
- as a side of a box geometry: "+x", "-x", "+y", "-y", "+z" or "-z" (the side whose outward
  normal is that axis of G), or None: the box's largest side whose centre lies farther from the
  body's centre of mass (the exposed side of a pad mounted on a finger); or
- as a dict {"center": p_GF [m], "normal": n_G, "u": u_G, "size": (width, height) [m]} for any
  geometry: the rectangle centred on p_GF, normal to n_G, its width along u_G (made orthogonal
  to n_G) and its height along v_G = n_G x u_G.

Image axes: (u, v, n) is right-handed; column j of an image runs along +u, row i along +v, and
pixel (0, 0) is the corner at -u/2, -v/2. A box side "+a" has u along the next axis of G
(x -> y -> z -> x) and "-a" along the negative of the next axis (so that u x v = n in both)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import SceneError
from ..rotation import rotation_matrices

__all__ = ["TactileFace", "resolve_face", "box_side", "SIDES"]

SIDES = ("+x", "-x", "+y", "-y", "+z", "-z")


@dataclass(frozen=True)
class TactileFace:
    """A rectangle on body `body` (scene index), the face of geometry `geometry` (global
    geometry index, model.ModelData order), in the body frame B: centre p_BF [m] and the
    rotation R_BF whose columns are u, v, n (n the outward normal); size (width along u,
    height along v) [m]. label: how messages and plots name it."""

    body: int
    geometry: int
    p_BF: np.ndarray
    R_BF: np.ndarray
    size: tuple[float, float]
    label: str

    def packed(self) -> np.ndarray:
        """The 14 floats the rasteriser reads: p_BF, u, v, n (body frame), width, height."""
        return np.concatenate([self.p_BF, self.R_BF[:, 0], self.R_BF[:, 1], self.R_BF[:, 2], self.size])


def box_side(size, side: str) -> tuple[np.ndarray, np.ndarray, tuple[float, float]]:
    """(centre, R_GF with columns u, v, n, (width, height)) of side `side` ("+x" ... "-z") of a
    box of full edge lengths `size` [m], in the box's frame G (module docstring for u, v)."""
    a = "xyz".index(side[1])
    sign = 1.0 if side[0] == "+" else -1.0
    half = 0.5 * np.asarray(size, dtype=np.float64)
    axes = np.eye(3)
    n = sign * axes[a]
    u = sign * axes[(a + 1) % 3]
    v = np.cross(n, u)
    b, c = (a + 1) % 3, (a + 2) % 3
    return n * half[a], np.stack([u, v, n], axis=1), (float(2 * half[b]), float(2 * half[c]))


def _explicit_face(face: dict, where: str):
    """(centre, R_GF, size) of a face given as a dict (module docstring)."""
    allowed = {"center", "normal", "u", "size"}
    stray = sorted(set(face) - allowed)
    missing = sorted(allowed - set(face))
    if stray or missing:
        raise SceneError(f"{where}: face dict needs exactly the keys {sorted(allowed)}"
                         + (f"; unknown {stray}" if stray else "") + (f"; missing {missing}" if missing else ""))
    try:
        center, normal, u = (np.asarray(face[k], dtype=np.float64).reshape(3) for k in ("center", "normal", "u"))
        size = np.asarray(face["size"], dtype=np.float64).reshape(2)
    except (TypeError, ValueError) as exc:
        raise SceneError(f"{where}: face center, normal and u must be 3 numbers and size 2 numbers ({exc})") from exc
    if not all(np.all(np.isfinite(x)) for x in (center, normal, u, size)):
        raise SceneError(f"{where}: face values must be finite, got {face!r}")
    if np.any(size <= 0):
        raise SceneError(f"{where}: face size must be positive [m], got {size.tolist()}")
    n_len = np.linalg.norm(normal)
    if n_len == 0:
        raise SceneError(f"{where}: face normal has zero length")
    n = normal / n_len
    u = u - (u @ n) * n
    u_len = np.linalg.norm(u)
    if u_len < 1e-9 * max(np.linalg.norm(face["u"]), 1e-300):
        raise SceneError(f"{where}: face u {np.asarray(face['u']).tolist()} is parallel to the normal")
    u = u / u_len
    return center, np.stack([u, np.cross(n, u), n], axis=1), (float(size[0]), float(size[1]))


def resolve_face(host, body, geometry=None, face=None) -> TactileFace:
    """The TactileFace of `body` (name or scene index) for `geometry` (its name within the body;
    None: the body's only geometry) and `face` (module docstring). host: model.ModelData.
    SceneError names the body, the geometry and what is wrong."""
    scene = host.scene
    names = [b.name for b in scene.bodies]
    if isinstance(body, (int, np.integer)) and not isinstance(body, bool):
        if not 0 <= body < len(names):
            raise SceneError(f"tactile: body index {body} is out of range [0, {len(names)})")
        b = int(body)
    elif isinstance(body, str) and body in names:
        b = names.index(body)
    else:
        raise SceneError(f"tactile: no body {body!r} in {scene.source}; bodies: {names}")
    spec_body = scene.bodies[b]
    geoms = [g for g in range(len(host.geom_name)) if int(host.geom_body[g]) == b]
    local = [host.geom_name[g] for g in geoms]
    if geometry is None:
        if len(geoms) != 1:
            raise SceneError(f"tactile: body '{names[b]}' has {len(geoms)} geometries {local}: name one (geometry=...)")
        i = 0
    elif geometry in local:
        i = local.index(geometry)
    else:
        raise SceneError(f"tactile: body '{names[b]}' has no geometry {geometry!r}; its geometries: {local}")
    g = geoms[i]
    spec = spec_body.geometries[i]
    where = f"tactile: body '{names[b]}', geometry '{local[i]}'"
    shape = spec.shape
    if isinstance(face, dict):
        center, R_GF, size = _explicit_face(face, where)
        label = f"{names[b]}/{local[i]} face"
    else:
        if shape.type != "box":
            raise SceneError(f"{where} is a {shape.type}: only a box has named sides; give face as a dict "
                             "{'center', 'normal', 'u', 'size'} in the geometry frame")
        if face is None:
            side = _default_side(host, b, shape.size, spec)
        elif face in SIDES:
            side = face
        else:
            raise SceneError(f"{where}: face must be one of {list(SIDES)}, a dict or None, got {face!r}")
        center, R_GF, size = box_side(shape.size, side)
        label = f"{names[b]}/{local[i]} {side}"
    R_BG = rotation_matrices(np.asarray(spec.q_BG, dtype=np.float64))
    p_BF = np.asarray(spec.p_BG, dtype=np.float64) + R_BG @ center
    return TactileFace(body=b, geometry=g, p_BF=p_BF, R_BF=R_BG @ R_GF, size=size, label=label)


def _default_side(host, b: int, size, spec) -> str:
    """The box's largest side (of the pair with the largest area) whose centre is farther from
    the body's centre of mass; SceneError when both are as far (a box centred on it)."""
    s = np.asarray(size, dtype=np.float64)
    areas = [s[(a + 1) % 3] * s[(a + 2) % 3] for a in range(3)]
    a = int(np.argmax(areas))
    if sum(1 for x in areas if x >= areas[a] * (1 - 1e-9)) > 1:
        raise SceneError(f"tactile: body '{host.scene.bodies[b].name}': the box {s.tolist()} has no single largest "
                         f"side pair: name the side (face='+x' ... '-z')")
    R_BG = rotation_matrices(np.asarray(spec.q_BG, dtype=np.float64))
    com = np.asarray(host.body_com_B[b], dtype=np.float64)
    dist = []
    for side in ("+" + "xyz"[a], "-" + "xyz"[a]):
        center, _, _ = box_side(s, side)
        dist.append(np.linalg.norm(np.asarray(spec.p_BG) + R_BG @ center - com))
    if abs(dist[0] - dist[1]) <= 1e-9 * max(dist):
        raise SceneError(f"tactile: body '{host.scene.bodies[b].name}': both largest sides of the box are as far from "
                         f"the centre of mass: name the side (face='+{'xyz'[a]}' or '-{'xyz'[a]}')")
    return ("+" if dist[0] > dist[1] else "-") + "xyz"[a]
