"""Taichi GGUI viewer and headless recorder: bodies, pressure-coloured contact patches, an
overlay, and a colour bar, of one world or of a batch tiled side by side.

Bodies are drawn from their surface meshes (a compliant body's tet-mesh boundary), posed on
the host from Simulator.get_state(); half-spaces are drawn as a square tile of the plane.
Contact polygons come from Simulator.contact_surfaces(world), fan-triangulated and coloured
by vertex pressure on a fixed colour map, lifted a little towards the camera so that they show
through the surfaces they lie on. GGUI blends no transparent meshes, so while patches (or
normals, forces, tets) are shown a compliant body is cut away: only its faces turned away from
the camera are drawn, shaded, and the patches inside show. The camera frames the bodies
(framing.py); the text, colour bar and tiles are drawn with Pillow (annotate.py) on every
frame, recorded or live. Headless recording renders with
ti.ui.Window(show_window=False) (Mesa's Vulkan driver is enough, no display needed) and writes
PNG (last frame), GIF or MP4 (imageio with its ffmpeg plugin) through imageio."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .annotate import compose, panel_grid, parameter_labels, tile
from .checks import integer
from .errors import ArgumentError, HydroError, SceneError
from .framing import FOV_DEG, framed
from .output import atomic_write, check_output
from .progress import progress_bar
from .rotation import rotation_matrices
from .types import HALFSPACE

__all__ = ["ViewerError", "Viewer", "NullViewer", "Renderer", "record", "write_frames", "tet_edges", "arrow_segments", "view",
           "pressure_colors", "rotation_matrices", "fan_triangles", "flat_triangles", "back_faces", "surface_pressure_max",
           "centre_crop", "show_image", "joint_axis_segments", "inset_triangles"]

# Colour map anchors (low -> high pressure): dark blue, cyan, green, yellow, red.
_MAP = np.array([[0.10, 0.10, 0.55], [0.00, 0.65, 0.90], [0.20, 0.75, 0.30], [0.98, 0.85, 0.10], [0.85, 0.10, 0.10]])
_BODY_COLORS = np.array([[0.75, 0.75, 0.78], [0.55, 0.62, 0.80], [0.80, 0.62, 0.50], [0.60, 0.78, 0.60], [0.78, 0.60, 0.78]])
_GROUND_COLOR = (0.42, 0.45, 0.48)
_NORMAL_COLOR = (0.10, 0.25, 0.85)
_FORCE_COLOR = (0.55, 0.0, 0.55)
_TET_COLOR = (0.25, 0.25, 0.25)
_JOINT_COLOR = (0.95, 0.45, 0.0)
FORMATS = (".png", ".gif", ".mp4")  # what record() writes: the last frame, or an animation
RECORD_FPS = 25
"""Frame rate of recordings [1/s]: a GIF stores each frame's delay in whole hundredths of a
second, so 25 fps (4 cs) plays at its rate, where 30 fps (3.33 cs, stored as 3) would play 11 % fast."""


class ViewerError(HydroError, RuntimeError):
    """The viewer cannot run here (no display, no Vulkan, unsupported output format)."""


def has_ffmpeg() -> bool:
    """imageio's ffmpeg plugin is installed (MP4 recordings)."""
    import importlib.util

    return importlib.util.find_spec("imageio_ffmpeg") is not None


def check_record(path: str | Path) -> Path:
    """The --record path checked before anything is simulated (output.check_output: its
    format, a folder that can be written), and for .mp4 that imageio's ffmpeg plugin is
    installed (the `video` extra), so that a long run never ends without its video."""
    path = check_output(path, FORMATS, "--record", create_folder=True)
    if path.suffix.lower() == ".mp4" and not has_ffmpeg():
        raise ViewerError(f"--record {path}: MP4 needs the imageio-ffmpeg package: pip install \"taichi-hydro[video]\" "
                          "(or record .gif)")
    return path


def pressure_colors(pressure: np.ndarray, p_min: float, p_max: float) -> np.ndarray:
    """RGB in [0, 1] for pressures [Pa] on the colour map spanning [p_min, p_max] (clamped;
    a degenerate range maps everything to the top colour)."""
    p = np.asarray(pressure, dtype=np.float64)
    span = p_max - p_min
    t = np.ones_like(p) if span <= 0 else np.clip((p - p_min) / span, 0.0, 1.0)
    x = t * (len(_MAP) - 1)
    i = np.minimum(x.astype(int), len(_MAP) - 2)
    f = (x - i)[..., None]
    return _MAP[i] * (1 - f) + _MAP[i + 1] * f


def fan_triangles(sizes: np.ndarray) -> np.ndarray:
    """Triangle indices (sum(k - 2), 3) fanning polygons of `sizes` vertices stored one after
    another in a vertex array."""
    tris = []
    start = 0
    for k in np.asarray(sizes, dtype=int):
        for j in range(1, k - 1):
            tris.append((start, start + j, start + j + 1))
        start += k
    return np.array(tris, dtype=np.int32).reshape(-1, 3)


def _plane_tile(half_size: float) -> tuple[np.ndarray, np.ndarray]:
    """A square of the z = 0 plane (body frame of a half-space), as vertices and triangles."""
    h = half_size
    v = np.array([[-h, -h, 0], [h, -h, 0], [h, h, 0], [-h, h, 0]], dtype=np.float64)
    return v, np.array([[0, 1, 2], [0, 2, 3]], dtype=np.int32)


def flat_triangles(vertices: np.ndarray, colors: np.ndarray, triangles: np.ndarray):
    """Unshared vertices, colours and face normals (3 per triangle) for flat shading."""
    tri = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
    v = np.asarray(vertices, dtype=np.float64)[tri]
    n = np.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0])
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-30)
    return v.reshape(-1, 3), np.asarray(colors)[tri].reshape(-1, 3), np.repeat(n, 3, axis=0)


VBO_COLUMNS = 12
"""Floats per vertex in GGUI's vertex buffer (taichi 1.7): position 3, normal 3, texture
coordinates 2, RGBA 4."""


def _field_info(array):
    """GGUI's description of a host array (a host pointer it reads while drawing), or of none."""
    from taichi.ui.utils import get_field_info

    return get_field_info(array)


@dataclass
class _HostVBO:
    """A vertex buffer in GGUI's own layout (VBO_COLUMNS floats per vertex) in host memory,
    grown by doubling, which GGUI's renderer reads through a pointer.

    GGUI's Python drawing calls (scene.mesh_instance, scene.lines, canvas.triangles; taichi
    1.7) would copy Taichi fields into such an array with kernels templated on the fields, so
    every field compiles its own copy kernels on first use (the pile's first frame compiled 28,
    about 3.5 s on a cold cache) and launches them every frame; filling the array with NumPy
    compiles and launches nothing. The array stays as it is until the frame is drawn
    (canvas.scene or the window's image), since the next fill comes after it."""

    minimum: int = 96
    count: int = 0
    rows: np.ndarray | None = None  # (capacity, VBO_COLUMNS) float32; rows past count are zero

    def fill(self, positions: np.ndarray, colors: np.ndarray | None = None, normals: np.ndarray | None = None) -> None:
        """positions (n, 2 or 3) (2: canvas coordinates, z = 0), colors (n, 3) RGB in [0, 1],
        normals (n, 3); alpha 1."""
        n = len(positions)
        if self.rows is None or n > len(self.rows):
            self.rows = np.zeros((max(self.minimum, 1 << int(np.ceil(np.log2(max(n, 1))))), VBO_COLUMNS), np.float32)
        else:
            self.rows[n: self.count] = 0.0
        self.count = n
        rows = self.rows[:n]
        rows[:, : positions.shape[1]] = positions
        if normals is not None:
            rows[:, 3:6] = normals
        if colors is not None:
            rows[:, 8:11] = colors
        rows[:, 11] = 1.0


@dataclass
class _Buffer:
    """One flat-shaded draw call of triangles (a _HostVBO).

    Drawn with one identity model matrix, never as a plain mesh: GGUI's mesh vertex shader
    (Mesh_vk.vert, taichi 1.7) always reads a model matrix from the mesh's instance-transform
    storage buffer and blends it as I (1 - a) + M a with a = 0 when no transforms are given, but
    that buffer is freshly allocated for every draw call of every frame and never written then.
    Its bytes are whatever the driver's allocator left there (on Mesa's lavapipe, host memory of
    earlier frames); when they hold a NaN or an infinity, M * 0 is NaN, every vertex position is
    NaN and the whole draw call vanishes (measured on main: 68 of 120 renders lost the shaded
    bodies and floor or the patches, bench/viewer_stress.py). Passing the matrix makes GGUI copy
    it into that buffer before the draw, so the shader reads only initialised data."""

    vbo: _HostVBO = dataclasses.field(default_factory=_HostVBO)
    identity: np.ndarray = dataclasses.field(default_factory=lambda: np.eye(4, dtype=np.float32)[None])  # (1, 4, 4)

    @property
    def count(self) -> int:
        return self.vbo.count

    def upload(self, vertices: np.ndarray, colors: np.ndarray, triangles: np.ndarray) -> None:
        v, c, n = flat_triangles(vertices, colors, triangles)
        self.vbo.fill(v, c, n)

    def draw(self, scene, wireframe: bool = False) -> None:
        """One instance of the uploaded triangles (scene: the window's taichi.ui SceneV2)."""
        count = self.vbo.count
        scene.scene.mesh_instance(_field_info(self.vbo.rows), True, _field_info(None), (0.5, 0.5, 0.5), True,
                                  _field_info(self.identity), 1, 0, count, 0, count, 0, wireframe)


def inset_triangles(image: np.ndarray, x0: float, y0: float, width: float, height: float):
    """A tactile image (rows, cols) [Pa] as a heat map of flat-coloured quads in canvas
    coordinates (x right, y up, both in [0, 1]): (6 rows x cols, 2) vertices and their colours,
    row 0 at the bottom, column 0 at the left, on the pressure colour map from 0 to the image's
    largest value."""
    rows, cols = image.shape
    xs = x0 + width * np.arange(cols + 1) / cols
    ys = y0 + height * np.arange(rows + 1) / rows
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    corners = [(i, j), (i, j + 1), (i + 1, j + 1), (i, j), (i + 1, j + 1), (i + 1, j)]
    v = np.stack([np.stack([xs[c], ys[r]], axis=-1) for r, c in corners], axis=2).reshape(-1, 2)
    top = float(image.max())
    colors = np.repeat(pressure_colors(image, 0.0, top if top > 0 else 1.0).reshape(-1, 1, 3), 6, axis=1).reshape(-1, 3)
    return v, colors


@dataclass
class _Triangles2D:
    """Canvas triangles (2D vertices, colours) drawn from a _HostVBO."""

    vbo: _HostVBO = dataclasses.field(default_factory=_HostVBO)

    def draw(self, canvas, vertices: np.ndarray, colors: np.ndarray) -> None:
        if len(vertices) == 0:
            return
        self.vbo.fill(np.asarray(vertices, np.float32), np.asarray(colors, np.float32))
        # Unused rows are degenerate triangles at the origin (GGUI draws the whole buffer).
        canvas.canvas.triangles(_field_info(self.vbo.rows), _field_info(None), True, (0.5, 0.5, 0.5))


@dataclass
class _Lines:
    """Segment end points (pairs) for one scene.lines call, drawn from a _HostVBO."""

    vbo: _HostVBO = dataclasses.field(default_factory=lambda: _HostVBO(minimum=64))

    def draw(self, scene, segments: np.ndarray, color, width: float = 2.0) -> None:
        """segments: (k, 2, 3) world points [m]."""
        points = np.asarray(segments, np.float32).reshape(-1, 3)
        if len(points) == 0:
            return
        self.vbo.fill(points)
        count = self.vbo.count
        scene.scene.lines(_field_info(self.vbo.rows), _field_info(None), False, tuple(color), width, count, 0, count, 0)


def tet_edges(tets: np.ndarray) -> np.ndarray:
    """(e, 2) unique vertex pairs of the six edges of every tet (m, 4)."""
    pairs = np.concatenate([tets[:, [i, j]] for i, j in ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))])
    return np.unique(np.sort(pairs, axis=1), axis=0)


def arrow_segments(start: np.ndarray, vector: np.ndarray, head: float = 0.2) -> np.ndarray:
    """(3, 2, 3) segments of an arrow from `start` along `vector`: the shaft and two head barbs
    of `head` times its length, in a plane containing the arrow."""
    end = start + vector
    length = float(np.linalg.norm(vector))
    if length == 0.0:
        return np.zeros((0, 2, 3))
    d = vector / length
    side = np.cross(d, [0.0, 0.0, 1.0] if abs(d[2]) < 0.9 else [1.0, 0.0, 0.0])
    side /= np.linalg.norm(side)
    back = end - head * length * d
    return np.array([[start, end], [end, back + 0.5 * head * length * side], [end, back - 0.5 * head * length * side]])


class _MeshGroup:
    """Surface meshes of several bodies posed into one vertex buffer (one draw call)."""

    def __init__(self, meshes: list):
        self.meshes = meshes
        offsets = np.cumsum([0] + [len(m[1]) for m in meshes])
        self.triangles = np.concatenate([m[2] + o for m, o in zip(meshes, offsets)]) if meshes else np.zeros((0, 3), np.int32)
        self.colors = np.concatenate([m[3] for m in meshes]) if meshes else np.zeros((0, 3))
        self.buffer = _Buffer()

    def posed_vertices(self, state: dict, world: int) -> np.ndarray:
        """World-frame vertices [m] of every mesh at the bodies' poses in `world`."""
        R = rotation_matrices(state["orientation"][world])
        return np.concatenate([v @ R[i].T + state["position"][world, i] for i, v, *_ in self.meshes])

    def draw(self, scene, state: dict, world: int, wireframe: bool, eye=None) -> None:
        """eye [m]: draw only the faces turned away from it (back_faces, the cut-away)."""
        if not self.meshes:
            return
        vertices = self.posed_vertices(state, world)
        triangles = self.triangles if eye is None else self.triangles[back_faces(vertices, self.triangles, eye)]
        self.buffer.upload(vertices, self.colors, triangles)
        self.buffer.draw(scene, wireframe)


def back_faces(vertices: np.ndarray, triangles: np.ndarray, eye) -> np.ndarray:
    """Mask (t,) of the triangles whose outward normal points away from `eye` [m]: the far
    half of a closed surface, inside showing. Drawn alone, they cut a compliant body away so
    that the contact patches inside it show, while its back walls stay shaded."""
    v = np.asarray(vertices, np.float64)[np.asarray(triangles, np.int64).reshape(-1, 3)]
    n = np.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0])
    return np.einsum("ij,ij->i", n, np.asarray(eye, np.float64) - v.mean(axis=1)) < 0


class Renderer:
    """Draws one world of a Simulator into a GGUI scene: bodies, pressure-coloured patches and
    the optional normals, force arrows, tet edges and joint axes, and on the canvas the tactile
    insets. The camera is framed (framing.py) on the bodies of `worlds` (default: `world`) at
    their poses when the renderer is made, for images of width / height `aspect`; `camera` =
    (position, target) [m], either None, overrides."""

    def __init__(self, sim, world: int = 0, patches: bool = True, normals: bool = False, forces: bool = False,
                 tets: bool = False, joints: bool = False, tactile=(), aspect: float = 4 / 3, camera=(None, None),
                 worlds=None, fov: float = FOV_DEG):
        if not 0 <= world < sim.worlds:
            raise SceneError(f"world must be in [0, {sim.worlds - 1}], got {world}")
        self.sim = sim
        self.world = world
        self.patches = patches  # contact polygons coloured by pressure, and the colour bar
        self.normals = normals  # polygon normals at the centroids (out of body A into body B)
        self.forces = forces    # net contact force per body pair, at its patch centroid
        self.tets = tets        # edges of the compliant bodies' tet meshes
        self.joints = joints    # joint axes at the joint origins
        self.tactile = list(tactile)  # tactile.TactileSensor insets, bottom left, one above the other
        self.aspect = aspect    # image width / height (insets keep their faces' proportions)
        self._insets = _Triangles2D()
        self._lines = {k: _Lines() for k in ("normals", "forces", "tets", "joints")}
        host = sim.model.host
        geom_body = host.geom_body  # geometries are drawn at their body's pose
        # The scene's geometries (the compliant twins of rigid ones, geometry.twin, are not drawn).
        drawn = [(i, host.geometries[i]) for i in range(host.scene_geom_count)]
        self._tet_edges = [(int(geom_body[i]), g.tets.vertices, tet_edges(g.tets.tets)) for i, g in drawn if g.tets is not None]
        state = sim.get_state()
        meshes = []  # (body index, vertices B, triangles, colours, group)
        for i, g in drawn:
            b = int(geom_body[i])
            if g.kind != HALFSPACE and g.surface is not None:
                color = np.tile(_BODY_COLORS[b % len(_BODY_COLORS)], (len(v := g.surface.vertices), 1))
                meshes.append((b, v, g.surface.triangles.astype(np.int32), color, 1 if g.compliant else 0))
        self._bodies = _MeshGroup(list(meshes))
        self._framing = (aspect, tuple(camera), fov)
        self._box = None
        self.reframe(state, [world] if worlds is None else list(worlds))
        R0 = rotation_matrices(state["orientation"][world])
        for i, g in drawn:
            b = int(geom_body[i])
            if g.kind == HALFSPACE:
                floor = R0[b][2, 2] > 0.9  # its normal (body z) points up
                v, t = _plane_tile(6.0 * (self.pose.distance + self.pose.radius) if floor else 0.5 * self.pose.radius)
                meshes.append((b, v, t, np.tile(_GROUND_COLOR, (len(v), 1)), 0 if floor else 2))
        # Draw calls: 0 rigid bodies and floors, solid; 1 compliant bodies, solid or, while
        # anything inside them is shown, cut away (back_faces); 2 other half-spaces (walls),
        # always a wireframe so that they do not hide the scene.
        self._groups = [_MeshGroup([m for m in meshes if m[4] == k]) for k in range(3)]
        self._patch = _Buffer()
        self.pressure_max = 0.0
        self.polygons = 0

    @property
    def radius(self) -> float:
        return self.pose.radius

    def reframe(self, state: dict, worlds: list[int]) -> bool:
        """Grow the framed box to hold the bodies of `worlds` in `state`, and frame the camera
        on it again (framing.py) when it grew, so that a body that slides away stays in view:
        the view only ever zooms out. Returns whether the camera moved (never while both its
        position and target are given)."""
        posed = [self._bodies.posed_vertices(state, w) for w in worlds] if self._bodies.meshes else [np.zeros((1, 3))]
        points = np.concatenate(posed)
        lo, hi = points.min(axis=0), points.max(axis=0)
        if self._box is not None:
            if np.all(lo >= self._box[0]) and np.all(hi <= self._box[1]):
                return False
            lo, hi = np.minimum(lo, self._box[0]), np.maximum(hi, self._box[1])
        first = self._box is None
        self._box = (lo, hi)
        aspect, camera, fov = self._framing
        if not first and None not in camera:
            return False
        try:
            self.pose = framed(lo, hi, aspect, *camera, fov=fov)
        except ValueError as exc:
            raise ArgumentError(f"camera: {exc}") from None
        self.eye = np.array(self.pose.eye)  # patches are lifted towards it (no z-fighting); the cut-away faces away from it
        return True

    def look(self, eye, target) -> None:
        """Fix the camera at `eye` looking at `target` [m] (reframe keeps it from then on)."""
        aspect, _, fov = self._framing
        self._framing = (aspect, (tuple(np.asarray(eye, np.float64)), tuple(np.asarray(target, np.float64))), fov)
        try:
            self.pose = framed(*self._box, aspect, *self._framing[1], fov=fov)
        except ValueError as exc:
            raise ArgumentError(f"camera: {exc}") from None
        self.eye = np.array(self.pose.eye)

    def surfaces(self, world: int) -> list:
        """The contact surfaces of `world` when something shown needs them (patches, normals or forces)."""
        return self.sim.contact_surfaces(world) if (self.patches or self.normals or self.forces) else []

    def _patch_mesh(self, surfaces, p_max: float):
        verts, press, sizes = [], [], []
        for s in surfaces:
            poly = s.polygons
            verts += poly.get("vertices", [])
            press += poly.get("vertex_pressure", [])
        sizes = [len(v) for v in verts]
        self.polygons = len(sizes)
        if not sizes:
            return None
        v = np.concatenate(verts)
        to_eye = self.eye - v
        v = v + (2e-3 * self.radius) * to_eye / np.linalg.norm(to_eye, axis=1, keepdims=True)  # lifted towards the eye
        return v, pressure_colors(np.concatenate(press), 0.0, p_max), fan_triangles(sizes)

    def draw(self, scene, surfaces=None, p_max: float | None = None) -> None:
        """Draw `self.world`; `surfaces`: its contact surfaces (default: queried), p_max [Pa]:
        the top of the colour map (default: the largest pressure drawn, surface_pressure_max)."""
        state = self.sim.get_state()
        surfaces = self.surfaces(self.world) if surfaces is None else surfaces
        inside = self.patches or self.tets or self.normals or self.forces
        for k, group in enumerate(self._groups):
            group.draw(scene, state, self.world, wireframe=k == 2, eye=self.eye if k == 1 and inside else None)
        self.pressure_max = surface_pressure_max(surfaces) if p_max is None else p_max
        self.polygons = 0
        if self.patches:
            mesh = self._patch_mesh(surfaces, self.pressure_max)
            if mesh is not None:
                self._patch.upload(*mesh)
                self._patch.draw(scene)
        if self.normals:
            self._lines["normals"].draw(scene, self.normal_segments(surfaces), _NORMAL_COLOR, 1.5)
        if self.forces:
            self._lines["forces"].draw(scene, self.force_segments(surfaces), _FORCE_COLOR, 3.0)
        if self.tets:
            self._lines["tets"].draw(scene, self.tet_segments(state), _TET_COLOR, 1.0)
        if self.joints:
            self._lines["joints"].draw(scene, self.joint_segments(state), _JOINT_COLOR, 3.0)

    def draw_insets(self, canvas) -> None:
        """The tactile insets of `self.world` on the canvas (after the scene: drawn over it)."""
        if self.tactile:
            self._insets.draw(canvas, *self.inset_geometry())

    def inset_geometry(self) -> tuple[np.ndarray, np.ndarray]:
        """Canvas triangles and colours of every tactile inset of this world: each image (from the
        last step) in a box 0.3 of the canvas high (or less, to fit), its face's proportions
        kept, stacked upwards from the bottom left corner."""
        verts, cols = [], []
        y = 0.02
        for sensor in self.tactile:
            image = sensor.pressure()[self.world]
            width_m, height_m = sensor.face.size
            h = min(0.3, 0.9 / max(len(self.tactile), 1))
            w = h * (width_m / height_m) / self.aspect
            if w > 0.3:
                w, h = 0.3, 0.3 * self.aspect * height_m / width_m
            v, c = inset_triangles(image, 0.02, y, w, h)
            verts.append(v)
            cols.append(c)
            y += h + 0.02
        if not verts:
            return np.zeros((0, 2)), np.zeros((0, 3))
        return np.concatenate(verts), np.concatenate(cols)

    def normal_segments(self, surfaces) -> np.ndarray:
        """(k, 2, 3): each polygon's unit normal drawn from its centroid, 5 % of the scene size long."""
        segs = []
        for surface in surfaces:
            c = np.asarray(surface.polygons.get("centroid", np.zeros((0, 3))), dtype=np.float64).reshape(-1, 3)
            n = np.asarray(surface.polygons.get("normal", np.zeros((0, 3))), dtype=np.float64).reshape(-1, 3)
            segs.append(np.stack([c, c + 0.05 * self.radius * n], axis=1))
        return np.concatenate(segs) if segs else np.zeros((0, 2, 3))

    def force_segments(self, surfaces) -> np.ndarray:
        """Arrows of the mean contact force of the last step on each pair's second body, from its
        patch centroid; the largest is 40 % of the scene size long (scale in the overlay)."""
        forces = self.sim.contact_forces(self.world) if self.sim.step_count else {}
        centroid = {(s.body_a, s.body_b): s.centroid for s in surfaces if s.faces}
        pairs = [(centroid[k], f) for k, f in forces.items() if k in centroid]
        self.force_max = max((float(np.linalg.norm(f)) for _, f in pairs), default=0.0)
        if not pairs or self.force_max == 0.0:
            return np.zeros((0, 2, 3))
        scale = 0.4 * self.radius / self.force_max
        return np.concatenate([arrow_segments(np.asarray(c), scale * np.asarray(f)) for c, f in pairs])

    def tet_segments(self, state: dict) -> np.ndarray:
        """(e, 2, 3): the tet-mesh edges of every compliant body at its pose in this world."""
        R = rotation_matrices(state["orientation"][self.world])
        segs = [(v @ R[i].T + state["position"][self.world, i])[edges] for i, v, edges in self._tet_edges]
        return np.concatenate(segs) if segs else np.zeros((0, 2, 3))

    def joint_segments(self, state: dict) -> np.ndarray:
        """(k, 2, 3): each revolute or prismatic joint's axis, and a ball joint's three frame
        axes, as segments through the joint origin (on the child body, at its pose in this world),
        20 % of the scene size long; fixed joints have no axis and are not drawn."""
        return joint_axis_segments(self.sim.joint_layout, state, self.world, 0.2 * self.radius)

    def overlay_lines(self, steps_per_s: float | None = None) -> list[str]:
        """The overlay: time, world, polygons and solver iterations of the world drawn last,
        the step rate when known, and the force arrows' scale when they are shown."""
        stats = self.sim.solver_stats()
        lines = [
            f"t = {self.sim.time:.3f} s   world {self.world} of {self.sim.worlds}",
            f"polygons {self.polygons}   solver iterations {int(stats['iterations'][self.world])}",
        ]
        if self.forces:
            lines.append(f"largest pair force {getattr(self, 'force_max', 0.0):.4g} N (longest arrow)")
        for sensor in self.tactile:
            lines.append(f"tactile {sensor.face.label}: up to {sensor.pressure()[self.world].max():.4g} Pa (inset)")
        if steps_per_s is not None:
            lines.append(f"{steps_per_s:.0f} steps/s")
        return lines


def joint_axis_segments(layout, state: dict, world: int, length: float) -> np.ndarray:
    """(k, 2, 3) world segments [m] of the joints of a joint.JointLayout (None: no joints) at the
    poses of `state` (get_state()) in `world`: a revolute or prismatic joint's axis (the z axis of
    its frame J on the child, p_WJ = p_WC + R_WC p_CJ), or a ball joint's three axes of J,
    centred on the joint origin, `length` long. Fixed joints give none."""
    from .joint.layout import BALL, FIXED, J_CHILD, J_TYPE

    if layout is None or layout.count == 0:
        return np.zeros((0, 2, 3))
    child = layout.joint_i[:, J_CHILD]
    R_WC = rotation_matrices(state["orientation"][world, child])
    p_WJ = state["position"][world, child] + np.einsum("jab,jb->ja", R_WC, layout.joint_p_CJ)
    R_WJ = R_WC @ rotation_matrices(layout.joint_q_CJ)
    segments = []
    for j, kind in enumerate(layout.joint_i[:, J_TYPE]):
        if kind == FIXED:
            continue
        for k in (range(3) if kind == BALL else (2,)):
            half = 0.5 * length * R_WJ[j, :, k]
            segments.append([p_WJ[j] - half, p_WJ[j] + half])
    return np.array(segments, dtype=np.float64).reshape(-1, 2, 3)


def surface_pressure_max(surfaces) -> float:
    """The largest positive polygon-vertex pressure [Pa] of contact surfaces (0 without any)."""
    pressures = [p for s in surfaces for p in s.polygons.get("vertex_pressure", [])]
    return max(0.0, float(np.concatenate(pressures).max(initial=0.0))) if pressures else 0.0


def bar_colors(steps: int = 64) -> np.ndarray:
    """(steps, 3) colours of the colour bar, low to high pressure."""
    return pressure_colors((np.arange(steps) + 0.5) / steps, 0.0, 1.0)


def centre_crop(size, aspect: float) -> tuple[int, int, int, int]:
    """The largest box (x0, y0, x1, y1) of width / height `aspect` centred in an image of `size`."""
    width, height = size
    w, h = (round(height * aspect), height) if height * aspect <= width else (width, round(width / aspect))
    x0, y0 = (width - w) // 2, (height - h) // 2
    return x0, y0, x0 + max(w, 1), y0 + max(h, 1)


def _window(size, show: bool):
    import taichi as ti

    try:
        return ti.ui.Window("taichi-hydro", size, show_window=show, vsync=False)
    except Exception as exc:  # GGUI raises RuntimeError without a Vulkan driver
        raise ViewerError(f"cannot open a GGUI window ({exc}); GGUI needs a Vulkan driver (e.g. apt install libvulkan1 "
                          "mesa-vulkan-drivers)") from exc


_OFFSCREEN: dict = {}


def _offscreen_window(size):
    """The process's one hidden GGUI window, reused while the size stays the same (GGUI on
    Mesa's lavapipe crashes intermittently when several windows live in one process) and
    destroyed before Taichi's runtime ends (backend.on_runtime_end): its Vulkan device goes
    with the runtime, and a window destroyed after it segfaulted (a viewer test after the test
    hooks' in-process restart on lavapipe)."""
    from . import backend

    size = tuple(int(x) for x in size)
    current = _OFFSCREEN.get("window")
    if current is not None and _OFFSCREEN.get("size") == size:
        return current
    _close_offscreen()
    window = _window(size, show=False)
    _OFFSCREEN.update(window=window, size=size)
    backend.on_runtime_end(_close_offscreen)
    return window


def _close_offscreen() -> None:
    """Destroy the hidden window, if there is one."""
    window = _OFFSCREEN.pop("window", None)
    _OFFSCREEN.clear()
    if window is not None:
        window.destroy()


def _camera(pose) -> object:
    import taichi as ti

    camera = ti.ui.Camera()
    camera.position(*pose.eye)
    camera.lookat(*pose.target)
    camera.up(0, 0, 1)
    camera.fov(FOV_DEG)
    camera.z_near(pose.clip_planes()[0])
    camera.z_far(pose.clip_planes()[1])
    return camera


def _light(scene, renderer: Renderer, camera) -> None:
    scene.set_camera(camera)
    scene.ambient_light((0.45, 0.45, 0.45))
    target = np.array(renderer.pose.target)
    scene.point_light(tuple(target + np.array([1.0, -1.5, 3.0]) * renderer.radius * 3), (0.9, 0.9, 0.9))


def _image(window) -> np.ndarray:
    """The window's last frame as (height, width, 3) uint8, top row first."""
    img = window.get_image_buffer_as_numpy()  # (width, height, 4) float, bottom row first
    # Rounded and clipped in the buffer's own layout, then flipped as bytes: half the time of
    # transposing the floats first.
    x = np.multiply(img, np.float32(255))
    x += np.float32(0.5)
    np.clip(x, 0, 255, out=x)
    return np.ascontiguousarray(x.astype(np.uint8)[:, ::-1, :3].transpose(1, 0, 2))


def _check_tile(tile, worlds: int):
    """(rows, cols) of a tiled view that fits `worlds` worlds, or None; ArgumentError otherwise."""
    if tile is None:
        return None
    if isinstance(tile, (str, bytes)) or not hasattr(tile, "__len__") or len(tile) != 2:
        raise ArgumentError(f"tile must be (rows, columns), got {tile!r}")
    rows, cols = integer(tile[0], "tile rows", 1, 64), integer(tile[1], "tile columns", 1, 64)
    if rows * cols > worlds:
        raise ArgumentError(f"tile {rows} x {cols} shows {rows * cols} worlds and the simulator has {worlds}: "
                            f"use --worlds {rows * cols} or more, or a smaller tile")
    return rows, cols


class Viewer:
    """Offscreen renderer of a Simulator for notebooks and logging (GGUI through the Vulkan
    driver; no display needed):

        frame = Viewer(sim).render(world=0)     # (height, width, 3) uint8, top row first

    Each render draws the simulator's current state: the bodies (compliant ones cut away while
    anything inside them is shown), the contact patches coloured by pressure when `patches`,
    and, when `labels`, the colour bar with its ticks and unit and the overlay (annotate.py).
    `tile` = (rows, cols) draws worlds 0 .. rows cols - 1 side by side, each panel labelled with
    its world index and the parameters that differ between them, on one colour scale.
    `camera` = (position, target) [m], either None, overrides the automatic framing
    (framing.py); default: the scene's [view] table. tactile: sensors
    (Simulator.tactile_sensor) whose last pressure images are drawn as insets, bottom left (of
    each panel). Raises ViewerError without a Vulkan driver."""

    def __init__(self, sim, world: int = 0, size=(640, 480), patches: bool = True, normals: bool = False,
                 forces: bool = False, tets: bool = False, joints: bool = False, tactile=(), camera=None, tile=None,
                 labels: bool = True, window=None):
        self.sim = sim
        if camera is None:  # the scene's [view] table
            camera = (sim.scene.view.camera_position, sim.scene.view.camera_target)
        self.size = checked_size(size)
        self.tile = _check_tile(tile, sim.worlds)
        self.labels = labels
        self.panels = panel_grid(self.size, *self.tile) if self.tile else [(0, 0, *self.size)]
        panel = (self.panels[0][2] - self.panels[0][0], self.panels[0][3] - self.panels[0][1])
        # A live window (`window`, internal) renders each panel at its own size and crops it.
        self.window = _offscreen_window(panel) if window is None else window
        self.live = window is not None
        rendered = self.size if self.live else panel
        self.crop = centre_crop(rendered, panel[0] / panel[1])
        fov = np.degrees(2 * np.arctan(np.tan(np.radians(FOV_DEG) / 2) * (self.crop[3] - self.crop[1]) / rendered[1]))
        worlds = range(len(self.panels)) if self.tile else None
        self.renderer = Renderer(sim, world, patches, normals, forces, tets, joints, tactile, panel[0] / panel[1], camera,
                                 worlds, fov)
        self.scene = self.window.get_scene()
        self.camera = _camera(self.renderer.pose)
        self.canvas = self.window.get_canvas()
        self.labels_of_worlds = parameter_labels(sim.parameters(), sim.body_names, list(worlds)) if self.tile else []

    def look(self, eye, target) -> None:
        """Place the camera at `eye` looking at `target` (world points [m]; z stays up); the
        automatic framing no longer moves it."""
        self.renderer.look(eye, target)
        self.camera = _camera(self.renderer.pose)

    def _draw(self, world: int, surfaces, p_max: float) -> np.ndarray:
        """One world's 3-D frame at panel size, drawn once (each draw of a fixed state gives
        the same pixels: bench/viewer_stress.py; see _Buffer for the GGUI defect that used to
        drop whole draw calls)."""
        self.renderer.world = world
        self.canvas.set_background_color((0.97, 0.97, 0.98))
        _light(self.scene, self.renderer, self.camera)
        self.renderer.draw(self.scene, surfaces, p_max)
        self.canvas.scene(self.scene)
        self.renderer.draw_insets(self.canvas)
        image = _image(self.window)
        x0, y0, x1, y1 = self.crop
        image = image[y0:y1, x0:x1]
        panel = self.panels[0]
        if image.shape[:2] != (panel[3] - panel[1], panel[2] - panel[0]):
            from PIL import Image

            image = np.asarray(Image.fromarray(image).resize((panel[2] - panel[0], panel[3] - panel[1]), Image.BILINEAR))
        return image

    def render(self, world: int | None = None, steps_per_s: float | None = None) -> np.ndarray:
        """The current state of `world` (default: the last one drawn; tiled: worlds 0 .. R C - 1)
        as an RGB image; `steps_per_s` goes into the overlay."""
        if world is not None:
            if not 0 <= world < self.sim.worlds:
                raise SceneError(f"world must be in [0, {self.sim.worlds - 1}], got {world}")
            self.renderer.world = world
        shown = list(range(len(self.panels))) if self.tile else [self.renderer.world]
        if not self.live and self.renderer.reframe(self.sim.get_state(), shown):
            self.camera = _camera(self.renderer.pose)
        surfaces = {w: self.renderer.surfaces(w) for w in shown}
        p_max = max(surface_pressure_max(s) for s in surfaces.values())
        bar = p_max if self.labels and self.renderer.patches else None
        if not self.tile:
            image = self._draw(shown[0], surfaces[shown[0]], p_max)
            return compose(image, self.renderer.overlay_lines(steps_per_s), bar, bar_colors()) if self.labels else image
        panels, labels = [], []
        iterations = self.sim.solver_stats()["iterations"]
        for w in shown:
            panels.append(self._draw(w, surfaces[w], p_max))
            labels.append([f"world {w}", f"{self.renderer.polygons} polygons, {int(iterations[w])} iterations",
                           *self.labels_of_worlds[w]] if self.labels else [])
        overlay = [f"t = {self.sim.time:.3f} s", f"{len(shown)} of {self.sim.worlds} worlds"]
        if steps_per_s is not None:
            overlay.append(f"{steps_per_s:.0f} steps/s")
        return tile(panels, *self.tile, self.size, labels, overlay if self.labels else [], bar, bar_colors())


class NullViewer:
    """The Viewer interface without rendering (training runs, machines without Vulkan):
    render() returns a black image of the requested size and costs nothing on the device."""

    def __init__(self, sim, world: int = 0, size=(640, 480), **shown):
        self.sim = sim
        self.size = checked_size(size)

    def render(self, world: int | None = None, steps_per_s: float | None = None) -> np.ndarray:
        if world is not None and not 0 <= world < self.sim.worlds:
            raise SceneError(f"world must be in [0, {self.sim.worlds - 1}], got {world}")
        return np.zeros((self.size[1], self.size[0], 3), dtype=np.uint8)


def record(sim, path: str | Path, frames: int = 60, steps_per_frame: int = 1, world: int = 0, size=(640, 480),
           patches: bool = True, fps: int = RECORD_FPS, camera=None, tile=None, **shown) -> Path:
    """Render `frames` frames offscreen, stepping the simulator `steps_per_frame` steps before
    each frame after the first, and write them to `path` (.png: the last frame; .gif; .mp4,
    which needs imageio-ffmpeg). `shown`: normals, forces, tets, joints, tactile, labels (see
    Viewer); camera, tile: see Viewer. The overlay's step rate is that of the last frame's steps. Returns the path."""
    import time

    path = check_record(path)
    frames = integer(frames, "frames", 1)
    steps_per_frame = integer(steps_per_frame, "steps_per_frame", 0)
    fps = integer(fps, "fps", 1, 1000)
    offscreen = Viewer(sim, world, size, patches, camera=camera, tile=tile, **shown)
    images = []
    rate = None
    with progress_bar(frames, "frame", "recording") as bar:
        for k in range(frames):
            if k > 0 and steps_per_frame:
                t0 = time.perf_counter()
                sim.step(steps_per_frame)
                sim.get_state()  # waits for the device
                rate = steps_per_frame / max(time.perf_counter() - t0, 1e-9)
            images.append(offscreen.render(steps_per_s=rate))
            bar.update(1)
    return write_frames(path, images, fps)


GIF_PALETTE_FRAMES = 4
"""Frames, spread over the animation, whose colours make the GIF's one palette."""


def write_gif(path: Path, images: list[np.ndarray], fps: int) -> None:
    """An animated GIF of RGB frames with one 256-colour palette for all of them (median cut
    over GIF_PALETTE_FRAMES frames spread over the animation, which include the colour bar's
    whole map), each frame mapped to it without dithering. A palette per frame (imageio's
    default) took 2.4 s for the main job's 46 frames, this 0.4 s, and a shared palette keeps
    colours from flickering between frames."""
    from PIL import Image

    picks = np.unique(np.linspace(0, len(images) - 1, GIF_PALETTE_FRAMES).round().astype(int))
    sample = Image.fromarray(np.concatenate([np.asarray(images[i], dtype=np.uint8) for i in picks], axis=0))
    palette = sample.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    frames = [Image.fromarray(np.asarray(f, dtype=np.uint8)).quantize(palette=palette, dither=Image.Dither.NONE) for f in images]
    frames[0].save(path, format="GIF", save_all=True, append_images=frames[1:], duration=round(1000 / fps), loop=0,
                   optimize=False)


def write_frames(path: str | Path, images: list[np.ndarray], fps: int = RECORD_FPS) -> Path:
    """Write RGB frames to `path` atomically: .png the last frame, .gif or .mp4 (imageio-ffmpeg)
    all of them at `fps`. Returns the path."""
    import imageio.v2 as imageio

    path = check_record(path)
    if not images:
        raise ViewerError(f"--record {path}: no frame to write")

    def write(tmp: Path) -> None:
        if path.suffix.lower() == ".png":
            imageio.imwrite(tmp, images[-1])
        elif path.suffix.lower() == ".gif":
            write_gif(tmp, images, fps)
        else:
            try:
                imageio.mimsave(tmp, images, fps=fps, macro_block_size=1)
            except ImportError as exc:
                raise ViewerError(f"cannot write {path}: {exc}; MP4 needs the imageio-ffmpeg package (or record .gif)") from exc

    return atomic_write(path, write)


def checked_size(size) -> tuple[int, int]:
    """An image size (width, height) in pixels, each in [16, 16384] (the Vulkan image limits
    every driver supports); ArgumentError otherwise."""
    if isinstance(size, (str, bytes)) or not hasattr(size, "__len__") or len(size) != 2:
        raise ArgumentError(f"size must be (width, height) in pixels, got {size!r}")
    return integer(size[0], "size width", 16, 16384), integer(size[1], "size height", 16, 16384)


def has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def show_image(canvas, image: np.ndarray) -> None:
    """Put an RGB image (H, W, 3) uint8, top row first, on a GGUI canvas (Taichi's layout:
    (W, H, 3) floats, bottom row first)."""
    canvas.set_image(np.ascontiguousarray(image[::-1].transpose(1, 0, 2), dtype=np.float32) / 255.0)


def view(sim, world: int = 0, size=(1280, 800), steps_per_frame: int = 1, patches: bool = True, camera=None,
         tile=None, **shown) -> None:
    """Live window showing the frames `record` writes (the same Viewer renders each one and the
    window shows it with its labels). Keys: space pause/run, s single step, r reset, p patches
    on/off, n normals, f force arrows, t tet-mesh wireframe, j joint axes, [ and ] previous/next
    world (not tiled), Esc quit; right mouse drag orbits, WASDQE moves the camera."""
    import time

    import taichi as ti

    if not has_display():
        raise ViewerError("no display (DISPLAY / WAYLAND_DISPLAY unset): use --record out.png|out.gif|out.mp4 to render "
                          "offscreen")
    size = checked_size(size)
    tile = _check_tile(tile, sim.worlds)
    window = _window(size, show=True)
    live = Viewer(sim, world, size, patches, camera=camera, tile=tile, window=window, **shown)
    renderer, camera = live.renderer, live.camera
    running = True
    rate, last = None, time.perf_counter()
    while window.running:
        for e in window.get_events(ti.ui.PRESS):
            if e.key == ti.ui.ESCAPE:
                window.running = False
            elif e.key == ti.ui.SPACE:
                running = not running
            elif e.key == "s":
                sim.step(1)
            elif e.key == "r":
                sim.reset()
            elif e.key in ("p", "n", "f", "t", "j"):
                flag = {"p": "patches", "n": "normals", "f": "forces", "t": "tets", "j": "joints"}[e.key]
                setattr(renderer, flag, not getattr(renderer, flag))
            elif e.key in ("[", "]") and tile is None:
                renderer.world = (renderer.world + (1 if e.key == "]" else -1)) % sim.worlds
        if running and steps_per_frame:
            sim.step(steps_per_frame)
            now = time.perf_counter()
            rate, last = steps_per_frame / max(now - last, 1e-9), now
        camera.track_user_inputs(window, movement_speed=0.01 * renderer.radius, hold_key=ti.ui.RMB)
        renderer.eye = np.array(camera.curr_position)
        show_image(live.canvas, live.render(steps_per_s=rate))
        window.show()
