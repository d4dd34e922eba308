"""Taichi GGUI viewer and headless recorder: bodies, pressure-coloured contact patches, an
overlay, and a colour bar.

Bodies are drawn from their surface meshes (a compliant body's tet-mesh boundary), posed on
the host from Simulator.get_state(); half-spaces are drawn as a square tile of the plane.
Contact polygons come from Simulator.contact_surfaces(world), fan-triangulated and coloured
by vertex pressure on a fixed colour map, lifted a little along their normal so that they show
through the surfaces they lie on. Headless recording renders with
ti.ui.Window(show_window=False) (Mesa's Vulkan driver is enough, no display needed) and writes
PNG (last frame), GIF or MP4 (imageio with its ffmpeg plugin) through imageio."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .checks import integer
from .errors import ArgumentError, HydroError, SceneError
from .output import atomic_write, check_output
from .progress import progress_bar
from .rotation import rotation_matrices
from .types import HALFSPACE

__all__ = ["ViewerError", "Viewer", "NullViewer", "Renderer", "record", "write_frames", "tet_edges", "arrow_segments", "view",
           "pressure_colors", "rotation_matrices", "fan_triangles", "flat_triangles", "joint_axis_segments", "inset_triangles"]

# Colour map anchors (low -> high pressure): dark blue, cyan, green, yellow, red.
_MAP = np.array([[0.10, 0.10, 0.55], [0.00, 0.65, 0.90], [0.20, 0.75, 0.30], [0.98, 0.85, 0.10], [0.85, 0.10, 0.10]])
_BODY_COLORS = np.array([[0.75, 0.75, 0.78], [0.55, 0.62, 0.80], [0.80, 0.62, 0.50], [0.60, 0.78, 0.60], [0.78, 0.60, 0.78]])
_GROUND_COLOR = (0.42, 0.45, 0.48)
_NORMAL_COLOR = (0.10, 0.25, 0.85)
_FORCE_COLOR = (0.55, 0.0, 0.55)
_TET_COLOR = (0.25, 0.25, 0.25)
_JOINT_COLOR = (0.95, 0.45, 0.0)
FORMATS = (".png", ".gif", ".mp4")  # what record() writes: the last frame, or an animation


class ViewerError(HydroError, RuntimeError):
    """The viewer cannot run here (no display, no Vulkan, unsupported output format)."""


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


@dataclass
class _Buffer:
    """Taichi fields for one flat-shaded draw call, grown by doubling (fields cannot be resized).

    Drawn through scene.mesh_instance with one identity model matrix, never scene.mesh: GGUI's
    mesh vertex shader (Mesh_vk.vert, taichi 1.7) always reads a model matrix from the mesh's
    instance-transform storage buffer and blends it as I (1 - a) + M a with a = 0 when no
    transforms are given, but that buffer is freshly allocated for every draw call of every frame
    and never written then. Its bytes are whatever the driver's allocator left there (on Mesa's
    lavapipe, host memory of earlier frames); when they hold a NaN or an infinity, M * 0 is NaN,
    every vertex position is NaN and the whole draw call vanishes (measured on main: 68 of 120
    renders lost the shaded bodies and floor or the patches, bench/viewer_stress.py). Passing the
    matrix makes GGUI copy it into that buffer before the draw, so the shader reads only
    initialised data."""

    capacity: int = 0
    count: int = 0
    vertices: object = None
    colors: object = None
    normals: object = None
    identity: object = None  # (1,) 4x4 f32 field: the one instance's model matrix

    def upload(self, vertices: np.ndarray, colors: np.ndarray, triangles: np.ndarray) -> None:
        import taichi as ti

        v, c, n = flat_triangles(vertices, colors, triangles)
        self.count = len(v)
        if self.count > self.capacity or self.vertices is None:
            self.capacity = max(96, 1 << int(np.ceil(np.log2(max(self.count, 1)))))
            self.vertices, self.colors, self.normals = (ti.Vector.field(3, ti.f32, self.capacity) for _ in range(3))
        if self.identity is None:
            self.identity = ti.Matrix.field(4, 4, ti.f32, shape=1)
            self.identity.from_numpy(np.eye(4, dtype=np.float32)[None])
        for field, data in ((self.vertices, v), (self.colors, c), (self.normals, n)):
            full = np.zeros((self.capacity, 3), np.float32)
            full[: self.count] = data
            field.from_numpy(full)

    def draw(self, scene, wireframe: bool = False) -> None:
        scene.mesh_instance(self.vertices, normals=self.normals, per_vertex_color=self.colors, vertex_count=self.count,
                            two_sided=True, transforms=self.identity, show_wireframe=wireframe)


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


class _Triangles2D:
    """Taichi fields of canvas triangles (2D vertices, colours), grown by doubling."""

    capacity: int = 0
    count: int = 0
    vertices: object = None
    colors: object = None

    def draw(self, canvas, vertices: np.ndarray, colors: np.ndarray) -> None:
        import taichi as ti

        self.count = len(vertices)
        if self.count == 0:
            return
        if self.count > self.capacity:
            self.capacity = max(96, 1 << int(np.ceil(np.log2(self.count))))
            self.vertices, self.colors = ti.Vector.field(2, ti.f32, self.capacity), ti.Vector.field(3, ti.f32, self.capacity)
        v, c = np.zeros((self.capacity, 2), np.float32), np.zeros((self.capacity, 3), np.float32)
        v[: self.count], c[: self.count] = vertices, colors
        # Unused slots: degenerate triangles at the origin.
        self.vertices.from_numpy(v)
        self.colors.from_numpy(c)
        canvas.triangles(self.vertices, per_vertex_color=self.colors)


class _Lines:
    """A Taichi field of segment end points (pairs) for one scene.lines call, grown by doubling."""

    capacity: int = 0
    count: int = 0
    field: object = None

    def draw(self, scene, segments: np.ndarray, color, width: float = 2.0) -> None:
        """segments: (k, 2, 3) world points [m]."""
        import taichi as ti

        points = np.asarray(segments, np.float32).reshape(-1, 3)
        self.count = len(points)
        if self.count == 0:
            return
        if self.count > self.capacity:
            self.capacity = max(64, 1 << int(np.ceil(np.log2(self.count))))
            self.field = ti.Vector.field(3, ti.f32, self.capacity)
        full = np.zeros((self.capacity, 3), np.float32)
        full[: self.count] = points
        self.field.from_numpy(full)
        scene.lines(self.field, width=width, color=tuple(color), vertex_count=self.count)


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

    def draw(self, scene, state: dict, world: int, wireframe: bool) -> None:
        if not self.meshes:
            return
        self.buffer.upload(self.posed_vertices(state, world), self.colors, self.triangles)
        self.buffer.draw(scene, wireframe)


class Renderer:
    """Draws one world of a Simulator into a GGUI scene and canvas."""

    def __init__(self, sim, world: int = 0, patches: bool = True, normals: bool = False, forces: bool = False,
                 tets: bool = False, joints: bool = False, tactile=(), aspect: float = 4.0 / 3.0):
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
        self.aspect = aspect    # canvas width / height (insets keep their faces' proportions)
        self._insets = _Triangles2D()
        self._lines = {k: _Lines() for k in ("normals", "forces", "tets", "joints")}
        host = sim.model.host
        geom_body = host.geom_body  # geometries are drawn at their body's pose
        # The scene's geometries (the compliant twins of rigid ones, geometry.twin, are not drawn).
        drawn = [(i, host.geometries[i]) for i in range(host.scene_geom_count)]
        self._tet_edges = [(int(geom_body[i]), g.tets.vertices, tet_edges(g.tets.tets)) for i, g in drawn if g.tets is not None]
        state = sim.get_state()
        solid = [i for i, g in drawn if g.kind != HALFSPACE]
        dynamic = sorted({int(geom_body[i]) for i in solid})
        points = state["position"][world, dynamic] if dynamic else np.zeros((1, 3))
        self.center = points.mean(axis=0)
        extent = max(float(np.ptp(points, axis=0).max()), 0.1)
        radius = extent
        for i in solid:
            surface = host.geometries[i].surface
            if surface is not None:
                radius = max(radius, float(np.linalg.norm(surface.vertices, axis=1).max()) * 4)
        self.radius = radius
        meshes = []  # (body index, vertices B, triangles, colours, group)
        R0 = rotation_matrices(state["orientation"][world])
        for i, g in drawn:
            b = int(geom_body[i])
            if g.kind == HALFSPACE:
                floor = R0[b][2, 2] > 0.9  # its normal (body z) points up
                v, t = _plane_tile((2.0 * radius + 0.5 * extent) if floor else 0.5 * radius)
                meshes.append((b, v, t, np.tile(_GROUND_COLOR, (len(v), 1)), 0 if floor else 2))
            elif g.surface is not None:
                color = np.tile(_BODY_COLORS[b % len(_BODY_COLORS)], (len(v := g.surface.vertices), 1))
                meshes.append((b, v, g.surface.triangles.astype(np.int32), color, 1 if g.compliant else 0))
        # Draw calls: 0 rigid bodies and floors, solid; 1 compliant bodies, solid or, while
        # patches are shown, a wireframe (the patches lie inside them); 2 other half-spaces
        # (walls), always a wireframe so that they do not hide the scene.
        self._groups = [_MeshGroup([m for m in meshes if m[4] == k]) for k in range(3)]
        self._patch = _Buffer()
        self.pressure_range = (0.0, 0.0)
        self.polygons = 0
        self.eye = self.camera_position()  # patches are lifted towards it (no z-fighting)

    def camera_position(self, azimuth: float = -0.9, elevation: float = 0.45) -> np.ndarray:
        d = 2.8 * self.radius
        return self.center + d * np.array([np.cos(elevation) * np.cos(azimuth), np.cos(elevation) * np.sin(azimuth), np.sin(elevation)])

    def _patch_mesh(self, surfaces):
        verts, press, sizes = [], [], []
        lift = 2e-3 * self.radius
        for s in surfaces:
            poly = s.polygons
            for vertices, pressure in zip(poly.get("vertices", []), poly.get("vertex_pressure", [])):
                v = np.asarray(vertices)
                to_eye = self.eye - v
                verts.append(v + lift * to_eye / np.linalg.norm(to_eye, axis=1, keepdims=True))
                press.append(np.asarray(pressure))
                sizes.append(len(vertices))
        self.polygons = len(sizes)
        if not sizes:
            return None
        v = np.concatenate(verts)
        p = np.concatenate(press)
        positive = p[p > 0]
        self.pressure_range = (0.0, float(positive.max()) if positive.size else 0.0)
        return v, pressure_colors(p, *self.pressure_range), fan_triangles(sizes)

    def draw(self, scene, canvas) -> None:
        state = self.sim.get_state()
        for k, group in enumerate(self._groups):
            # Compliant bodies turn to wireframes while anything drawn inside them is shown.
            inside = self.patches or self.tets or self.normals or self.forces
            group.draw(scene, state, self.world, wireframe=(k == 2 or (k == 1 and inside)))
        # The contact-surface query runs only when something shown needs it.
        surfaces = self.sim.contact_surfaces(self.world) if (self.patches or self.normals or self.forces) else []
        if self.patches:
            mesh = self._patch_mesh(surfaces)
            if mesh is not None:
                v, c, t = mesh
                self._patch.upload(v, c, t)
                self._patch.draw(scene)
        if self.normals:
            self._lines["normals"].draw(scene, self.normal_segments(surfaces), _NORMAL_COLOR, 1.5)
        if self.forces:
            self._lines["forces"].draw(scene, self.force_segments(surfaces), _FORCE_COLOR, 3.0)
        if self.tets:
            self._lines["tets"].draw(scene, self.tet_segments(state), _TET_COLOR, 1.0)
        if self.joints:
            self._lines["joints"].draw(scene, self.joint_segments(state), _JOINT_COLOR, 3.0)
        canvas.scene(scene)
        if self.patches:
            self._draw_colour_bar(canvas)
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

    def _draw_colour_bar(self, canvas, steps: int = 16) -> None:
        """A vertical colour bar at the right edge of the canvas (normalised coordinates)."""
        x0, x1, y0, y1 = 0.95, 0.975, 0.2, 0.8
        ys = np.linspace(y0, y1, steps + 1)
        verts, cols, tris = [], [], []
        for k in range(steps):
            base = len(verts)
            verts += [[x0, ys[k], 0], [x1, ys[k], 0], [x1, ys[k + 1], 0], [x0, ys[k + 1], 0]]
            cols += [pressure_colors(np.array(k / steps), 0, 1)] * 2 + [pressure_colors(np.array((k + 1) / steps), 0, 1)] * 2
            tris += [[base, base + 1, base + 2], [base, base + 2, base + 3]]
        import taichi as ti

        tri = np.array(tris)
        v, c = np.array(verts)[tri].reshape(-1, 3), np.array(cols)[tri].reshape(-1, 3)
        if not hasattr(self, "_bar_v"):
            self._bar_v, self._bar_c = ti.Vector.field(2, ti.f32, len(v)), ti.Vector.field(3, ti.f32, len(v))
            self._bar_v.from_numpy(v[:, :2].astype(np.float32))
            self._bar_c.from_numpy(c.astype(np.float32))
        canvas.triangles(self._bar_v, per_vertex_color=self._bar_c)

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
        stats = self.sim.solver_stats()
        lines = [
            f"t = {self.sim.time:.3f} s   world {self.world} of {self.sim.worlds}",
            f"polygons {self.polygons}   solver iterations {int(stats['iterations'][self.world])}",
        ]
        if self.patches:
            lines.append(f"pressure 0 .. {self.pressure_range[1]:.4g} Pa (colour bar)")
        if self.forces:
            lines.append(f"largest pair force {getattr(self, 'force_max', 0.0):.4g} N (longest arrow)")
        for sensor in self.tactile:
            lines.append(f"tactile {sensor.face.label}: up to {sensor.pressure()[self.world].max():.4g} Pa")
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


def _window(size, show: bool):
    import taichi as ti

    try:
        return ti.ui.Window("taichi-hydro", size, show_window=show, vsync=False)
    except Exception as exc:  # GGUI raises RuntimeError without a Vulkan driver
        raise ViewerError(f"cannot open a GGUI window ({exc}); GGUI needs a Vulkan driver (e.g. apt install libvulkan1 mesa-vulkan-drivers)") from exc


_OFFSCREEN: dict = {}


def _offscreen_window(size):
    """The process's one hidden GGUI window, reused while the size stays the same (GGUI on
    Mesa's lavapipe crashes intermittently when several windows live in one process)."""
    size = tuple(int(x) for x in size)
    current = _OFFSCREEN.get("window")
    if current is not None and _OFFSCREEN.get("size") == size:
        return current
    if current is not None:
        current.destroy()
        _OFFSCREEN.clear()
    window = _window(size, show=False)
    _OFFSCREEN.update(window=window, size=size)
    return window


def _setup(window, renderer: Renderer, camera_xyz) -> tuple:
    import taichi as ti

    scene = window.get_scene()
    camera = ti.ui.Camera()
    camera.position(*camera_xyz)
    camera.lookat(*renderer.center)
    camera.up(0, 0, 1)
    camera.fov(40)
    return scene, camera


def _light(scene, renderer: Renderer, camera) -> None:
    scene.set_camera(camera)
    scene.ambient_light((0.45, 0.45, 0.45))
    scene.point_light(tuple(renderer.center + np.array([1.0, -1.5, 3.0]) * renderer.radius * 3), (0.9, 0.9, 0.9))


def _image(window) -> np.ndarray:
    """The window's last frame as (height, width, 3) uint8, top row first."""
    img = window.get_image_buffer_as_numpy()  # (width, height, 4) float, bottom row first
    rgb = np.clip(img[:, :, :3], 0, 1).transpose(1, 0, 2)[::-1]
    return np.ascontiguousarray((rgb * 255 + 0.5).astype(np.uint8))


class Viewer:
    """Offscreen renderer of a Simulator for notebooks and logging (GGUI through the Vulkan
    driver; no display needed):

        frame = Viewer(sim).render(world=0)     # (height, width, 3) uint8, top row first

    Each render draws the simulator's current state (bodies, and the contact patches of that
    world coloured by pressure when `patches`); tactile: sensors (Simulator.tactile_sensor)
    whose last pressure images are drawn as insets, bottom left. Raises ViewerError without a
    Vulkan driver."""

    def __init__(self, sim, world: int = 0, size=(640, 480), patches: bool = True, normals: bool = False,
                 forces: bool = False, tets: bool = False, joints: bool = False, tactile=()):
        self.sim = sim
        self.size = checked_size(size)
        self.renderer = Renderer(sim, world, patches, normals, forces, tets, joints, tactile, self.size[0] / self.size[1])
        self.window = _offscreen_window(self.size)
        self.scene, self.camera = _setup(self.window, self.renderer, self.renderer.camera_position())
        self.canvas = self.window.get_canvas()

    def look(self, eye, target) -> None:
        """Place the camera at `eye` looking at `target` (world points [m]; z stays up)."""
        eye, target = np.asarray(eye, dtype=np.float64), np.asarray(target, dtype=np.float64)
        self.camera.position(*eye)
        self.camera.lookat(*target)
        self.renderer.eye = eye  # patches are lifted towards it
        self.renderer.center = target

    def render(self, world: int | None = None) -> np.ndarray:
        """The current state of `world` (default: the last one drawn) as an RGB image."""
        if world is not None:
            if not 0 <= world < self.sim.worlds:
                raise SceneError(f"world must be in [0, {self.sim.worlds - 1}], got {world}")
            self.renderer.world = world
        self.canvas.set_background_color((0.97, 0.97, 0.98))
        _light(self.scene, self.renderer, self.camera)
        self.renderer.draw(self.scene, self.canvas)
        return _image(self.window)


class NullViewer:
    """The Viewer interface without rendering (training runs, machines without Vulkan):
    render() returns a black image of the requested size and costs nothing on the device."""

    def __init__(self, sim, world: int = 0, size=(640, 480), **shown):
        self.sim = sim
        self.size = checked_size(size)

    def render(self, world: int | None = None) -> np.ndarray:
        if world is not None and not 0 <= world < self.sim.worlds:
            raise SceneError(f"world must be in [0, {self.sim.worlds - 1}], got {world}")
        return np.zeros((self.size[1], self.size[0], 3), dtype=np.uint8)


def record(sim, path: str | Path, frames: int = 60, steps_per_frame: int = 1, world: int = 0, size=(640, 480),
           patches: bool = True, fps: int = 30, **shown) -> Path:
    """Render `frames` frames offscreen, stepping the simulator `steps_per_frame` steps before
    each frame after the first, and write them to `path` (.png: the last frame; .gif; .mp4,
    which needs imageio-ffmpeg). `shown`: normals, forces, tets, joints, tactile (see Renderer).
    Returns the path."""
    path = check_output(path, FORMATS, "--record", create_folder=True)
    frames = integer(frames, "frames", 1)
    steps_per_frame = integer(steps_per_frame, "steps_per_frame", 0)
    fps = integer(fps, "fps", 1, 1000)
    offscreen = Viewer(sim, world, size, patches, **shown)
    images = []
    with progress_bar(frames, "frame", "recording") as bar:
        for k in range(frames):
            if k > 0 and steps_per_frame:
                sim.step(steps_per_frame)
            images.append(offscreen.render())
            bar.update(1)
    return write_frames(path, images, fps)


def write_frames(path: str | Path, images: list[np.ndarray], fps: int = 30) -> Path:
    """Write RGB frames to `path` atomically: .png the last frame, .gif or .mp4 (imageio-ffmpeg)
    all of them at `fps`. Returns the path."""
    import imageio.v2 as imageio

    path = check_output(path, FORMATS, "--record", create_folder=True)
    if not images:
        raise ViewerError(f"--record {path}: no frame to write")

    def write(tmp: Path) -> None:
        if path.suffix.lower() == ".png":
            imageio.imwrite(tmp, images[-1])
        elif path.suffix.lower() == ".gif":
            imageio.mimsave(tmp, images, duration=1000 / fps, loop=0)
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


def view(sim, world: int = 0, size=(1280, 800), steps_per_frame: int = 1, patches: bool = True, **shown) -> None:
    """Live window. Keys: space pause/run, s single step, r reset, p patches on/off, n normals,
    f force arrows, t tet-mesh wireframe, j joint axes, [ and ] previous/next world, Esc quit;
    right mouse drag orbits, WASDQE moves the camera."""
    import taichi as ti

    if not has_display():
        raise ViewerError("no display (DISPLAY / WAYLAND_DISPLAY unset): use --record out.png|out.gif|out.mp4 to render offscreen")
    size = checked_size(size)
    renderer = Renderer(sim, world, patches, aspect=size[0] / size[1], **shown)
    window = _window(size, show=True)
    scene, camera = _setup(window, renderer, renderer.camera_position())
    canvas = window.get_canvas()
    gui = window.get_gui()
    running = True
    import time

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
            elif e.key in ("[", "]"):
                renderer.world = (renderer.world + (1 if e.key == "]" else -1)) % sim.worlds
        if running and steps_per_frame:
            sim.step(steps_per_frame)
            now = time.perf_counter()
            rate, last = steps_per_frame / max(now - last, 1e-9), now
        camera.track_user_inputs(window, movement_speed=0.01 * renderer.radius, hold_key=ti.ui.RMB)
        renderer.eye = np.array(camera.curr_position)
        canvas.set_background_color((0.97, 0.97, 0.98))
        _light(scene, renderer, camera)
        renderer.draw(scene, canvas)
        with gui.sub_window("taichi-hydro", 0.01, 0.01, 0.36, 0.14):
            for line in renderer.overlay_lines(rate):
                gui.text(line)
        window.show()
