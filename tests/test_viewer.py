"""Viewer: pure helpers, headless recording, and its errors."""

import os
import subprocess
import sys

import numpy as np
import pytest

import taichi_hydro as th
from taichi_hydro import viewer

from conftest import ROOT


def test_pressure_colors_span_the_map():
    c = viewer.pressure_colors(np.array([-5.0, 0.0, 50.0, 100.0, 1e9]), 0.0, 100.0)
    np.testing.assert_allclose(c[0], c[1])  # clamped below
    np.testing.assert_allclose(c[3], c[4])  # clamped above
    assert c[1, 2] > c[1, 0] and c[3, 0] > c[3, 2]  # blue at zero, red at the top
    assert np.all((c >= 0) & (c <= 1))
    np.testing.assert_allclose(viewer.pressure_colors(np.array([3.0]), 1.0, 1.0), c[3:4])  # empty range: top colour


def test_rotation_matrices_match_axis_angle():
    angle = 0.7
    q = np.array([np.cos(angle / 2), 0, 0, np.sin(angle / 2)])  # about z
    R = viewer.rotation_matrices(q)
    np.testing.assert_allclose(R @ [1, 0, 0], [np.cos(angle), np.sin(angle), 0], atol=1e-15)
    rng = np.random.default_rng(1)
    qs = rng.normal(size=(5, 4))
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    Rs = viewer.rotation_matrices(qs)
    np.testing.assert_allclose(Rs @ Rs.transpose(0, 2, 1), np.broadcast_to(np.eye(3), (5, 3, 3)), atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(Rs), 1.0, atol=1e-12)


def test_fan_and_flat_triangles():
    tris = viewer.fan_triangles([3, 5])
    np.testing.assert_array_equal(tris, [[0, 1, 2], [3, 4, 5], [3, 5, 6], [3, 6, 7]])
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], float)
    fv, fc, fn = viewer.flat_triangles(v, np.eye(3), np.array([[0, 1, 2]]))
    np.testing.assert_allclose(fn, [[0, 0, 1]] * 3)
    np.testing.assert_allclose(fv, v)


def test_record_png_shows_the_patch(arch, tmp_path):
    """Headless: a compliant sphere pressed into the floor renders with its pressure patch
    (pixels in the colour map's red/yellow range appear only when patches are drawn)."""
    scene = th.load_scene(ROOT / "scenes" / "sphere_on_plane.toml")
    warm = {}
    for patches in (True, False):
        sim = th.Simulator(scene)
        try:
            path = viewer.record(sim, tmp_path / f"p{patches}.png", frames=1, patches=patches, size=(320, 240))
        except viewer.ViewerError as exc:
            pytest.skip(f"no GGUI here: {exc}")
        import imageio.v2 as imageio

        img = imageio.imread(path).astype(int)
        assert img.shape == (240, 320, 3)
        # warm colours: red clearly above blue (the ground, bodies and background are grey/blue)
        warm[patches] = int(np.count_nonzero((img[:, :-40, 0] - img[:, :-40, 2]) > 80))
    assert warm[True] > 5 and warm[False] == 0


def test_record_rejects_unknown_format(arch, tmp_path):
    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "sphere_on_plane.toml"))
    with pytest.raises(th.OutputError, match="unsupported file type '.bmp'"):
        viewer.record(sim, tmp_path / "out.bmp")
    assert not (tmp_path / "out.bmp").exists()


@pytest.mark.parametrize("size", [(0, 0), (15, 100), (100, 20000), (1.5, 100), "640x480", (640,)])
def test_an_image_size_outside_what_vulkan_can_render_is_refused(arch, size):
    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "sphere_on_plane.toml"))
    with pytest.raises(th.ArgumentError, match="size"):
        viewer.Viewer(sim, size=size)


def test_view_without_display_says_so():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    proc = subprocess.run([sys.executable, "-m", "taichi_hydro.cli", "view", str(ROOT / "scenes" / "pile.toml")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2
    assert "no display" in proc.stderr and "--record" in proc.stderr and "Traceback" not in proc.stderr


def test_mp4_without_ffmpeg_is_refused_before_the_run(arch, tmp_path, monkeypatch):
    """Without the video extra, --record x.mp4 stops at once with the path and the install
    command, before anything is simulated; .gif needs nothing more."""
    if arch != "cpu":
        pytest.skip("host-side check only")
    assert viewer.has_ffmpeg()  # the test extra has it
    monkeypatch.setattr(viewer, "has_ffmpeg", lambda: False)
    with pytest.raises(viewer.ViewerError, match=r"drop\.mp4.*taichi-hydro\[video\]"):
        viewer.check_record(tmp_path / "drop.mp4")
    assert viewer.check_record(tmp_path / "drop.gif").name == "drop.gif"


def test_record_mp4(arch, tmp_path):
    """Video through imageio's ffmpeg plugin (the video extra): frames of the requested size."""
    import imageio.v2 as imageio

    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "ball_drop.toml"))
    try:
        path = viewer.record(sim, tmp_path / "drop.mp4", frames=4, steps_per_frame=10, size=(160, 120))
    except viewer.ViewerError as exc:
        if "GGUI" in str(exc):
            pytest.skip(f"no GGUI here: {exc}")
        raise
    frames = imageio.mimread(path)
    assert len(frames) == 4 and frames[0].shape[:2] == (120, 160)
    assert sim.step_count == 30


def test_viewer_render_shows_the_falling_body_and_the_chosen_world(arch):
    """Viewer(sim).render(world): frames of a falling ball change as it falls, and a world whose
    ball starts elsewhere renders differently; the null viewer keeps the interface."""
    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "ball_drop.toml"), worlds=2)
    state = sim.get_state()
    state["position"][1, 1, 0] += 0.1  # world 1: the ball 10 cm to the side
    sim.set_state(position=state["position"])
    try:
        v = viewer.Viewer(sim, size=(160, 120))
    except viewer.ViewerError as exc:
        pytest.skip(f"no GGUI here: {exc}")
    first = v.render(world=0).astype(int)
    other = v.render(world=1).astype(int)
    sim.step(150)  # 0.15 s: the ball falls 11 cm
    later = v.render(world=0).astype(int)
    assert first.shape == (120, 160, 3)
    changed = lambda a, b: int(np.count_nonzero(np.abs(a - b).sum(axis=2) > 30))  # noqa: E731
    assert changed(first, later) > 50 and changed(first, other) > 50
    assert changed(later, v.render(world=0).astype(int)) == 0  # same state, same picture
    eye, target = np.add(v.renderer.pose.target, (0.3, -0.3, 0.2)), v.renderer.pose.target
    v.look(eye, target)  # a fixed camera: the automatic framing keeps it
    looked = v.render(world=0).astype(int)
    np.testing.assert_allclose(v.renderer.pose.eye, eye)
    assert changed(later, looked) > 50
    with pytest.raises(th.SceneError, match=r"world must be in \[0, 1\], got 2"):
        v.render(world=2)
    null = viewer.NullViewer(sim, size=(160, 120))
    assert null.render(world=1).shape == (120, 160, 3)


def test_tet_edges_and_arrow_segments():
    edges = viewer.tet_edges(np.array([[0, 1, 2, 3], [1, 2, 3, 4]]))
    assert len(edges) == 9  # two tets sharing a face: 6 + 6 - 3 edges
    assert {tuple(e) for e in edges} >= {(0, 1), (1, 4), (2, 3)}
    arrow = viewer.arrow_segments(np.zeros(3), np.array([0.0, 0.0, 2.0]))
    np.testing.assert_allclose(arrow[0], [[0, 0, 0], [0, 0, 2]])
    for barb in arrow[1:]:  # from the tip back 20 % of the length, 10 % to the side
        np.testing.assert_allclose(barb[0], [0, 0, 2])
        assert barb[1][2] == pytest.approx(1.6) and np.hypot(*barb[1][:2]) == pytest.approx(0.2)
    assert viewer.arrow_segments(np.zeros(3), np.zeros(3)).shape == (0, 2, 3)


def test_viewer_draws_forces_normals_and_tets_only_when_asked(arch):
    """The resting sphere: force arrows (purple), normals (blue) and the tet wireframe (dark
    grey) add pixels of their colour to the same frame only when switched on."""
    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "sphere_on_plane.toml"))
    sim.step(1)
    try:
        v = viewer.Viewer(sim, size=(240, 180), patches=False)
    except viewer.ViewerError as exc:
        pytest.skip(f"no GGUI here: {exc}")
    plain = v.render().astype(int)

    def added(flag, color):
        setattr(v.renderer, flag, True)
        img = v.render().astype(int)
        setattr(v.renderer, flag, False)
        near = lambda im: np.abs(im - np.array(color) * 255).max(axis=2) < 40  # noqa: E731
        return int(np.count_nonzero(near(img) & ~near(plain)))

    assert added("forces", viewer._FORCE_COLOR) > 10
    assert added("normals", viewer._NORMAL_COLOR) > 10
    assert added("tets", viewer._TET_COLOR) > 10
    assert "largest pair force" in " ".join(v.renderer.overlay_lines()) or not v.renderer.forces


def test_offscreen_window_outlives_a_runtime_restart(arch):
    """A viewer after backend.restart (what the test hooks do on lavapipe when a test would not
    fit the launch budget) gets a new hidden window, the same size or another, and renders: the
    old runtime's window was destroyed before that runtime ended (destroyed after it, it
    segfaulted on vulkan; kept alive, it segfaulted at interpreter exit on cpu)."""
    from taichi_hydro import backend

    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "sphere_on_plane.toml"))
    try:
        first = viewer.Viewer(sim, size=(200, 150), patches=False).render()
    except viewer.ViewerError as exc:
        pytest.skip(f"no GGUI here: {exc}")
    assert backend.restart() == arch
    for size in ((200, 150), (240, 180)):
        sim = th.Simulator(th.load_scene(ROOT / "scenes" / "sphere_on_plane.toml"))
        image = viewer.Viewer(sim, size=size, patches=False).render()
        assert image.shape[:2] in (size, size[::-1]) and image.std() > 0
    assert first.std() > 0


def hinged_links_scene():
    """Four links in a row on a revolute (about y), a prismatic (along x), a ball and a fixed
    joint, no contact."""
    bodies = [{"name": f"l{i}", "mass": 1.0, "position": [0.3 * i + 0.15, 0.0, 1.0],
               "shape": {"type": "box", "size": [0.3, 0.04, 0.04]}} for i in range(4)]
    joints = [{"name": "hinge", "type": "revolute", "parent": "world", "child": "l0", "position": [0.0, 0.0, 1.0],
               "axis": [0, 1, 0]},
              {"name": "slide", "type": "prismatic", "parent": "l0", "child": "l1", "position": [0.3, 0.0, 1.0],
               "axis": [1, 0, 0]},
              {"name": "ball", "type": "ball", "parent": "l1", "child": "l2", "position": [0.6, 0.0, 1.0]},
              {"name": "weld", "type": "fixed", "parent": "l2", "child": "l3", "position": [0.9, 0.0, 1.0]}]
    return th.scene_from_dict({"body": bodies, "joint": joints, "collision_filter": [{"bodies": ["l0", "l1", "l2", "l3"]}]},
                              source="<links>")


def test_joint_axis_segments_follow_the_child_bodies(arch):
    """Segments centred on each joint origin along its axis (a ball joint: its three frame axes;
    a fixed joint: none), carried by the child body: turning the hinge's child by 0.5 rad about
    z (about its centre) turns the hinge's axis by that rotation and moves its origin with it."""
    if arch != "cpu":
        pytest.skip("host-side geometry: checked in the cpu session")
    from taichi_hydro.joint import build_joint_layout

    scene = hinged_links_scene()
    layout = build_joint_layout(scene)
    state = {"position": np.array([[b.p_WB for b in scene.bodies]]), "orientation": np.array([[b.q_WB for b in scene.bodies]])}
    segments = viewer.joint_axis_segments(layout, state, 0, 0.2)
    assert segments.shape == (5, 2, 3)  # hinge, slide, the ball's three axes
    np.testing.assert_allclose(segments.mean(axis=1), [[0, 0, 1.0], [0.3, 0, 1.0], [0.6, 0, 1.0], [0.6, 0, 1.0], [0.6, 0, 1.0]],
                               atol=1e-15)
    np.testing.assert_allclose(segments[0, 1] - segments[0, 0], [0, 0.2, 0], atol=1e-15)
    np.testing.assert_allclose(segments[1, 1] - segments[1, 0], [0.2, 0, 0], atol=1e-15)
    np.testing.assert_allclose(np.abs(segments[2:, 1] - segments[2:, 0]), 0.2 * np.eye(3), atol=1e-15)
    a = 0.5
    state["orientation"][0, 0] = [np.cos(a / 2), 0, 0, np.sin(a / 2)]
    turned = viewer.joint_axis_segments(layout, state, 0, 0.2)
    np.testing.assert_allclose(turned[0, 1] - turned[0, 0], 0.2 * np.array([-np.sin(a), np.cos(a), 0]), atol=1e-15)
    # The hinge's origin is 0.15 m behind l0's centre, on l0: it turns with l0 about that centre.
    np.testing.assert_allclose(turned[0].mean(axis=0), [0.15 - 0.15 * np.cos(a), -0.15 * np.sin(a), 1.0], atol=1e-15)
    np.testing.assert_allclose(turned[1:], segments[1:], atol=0)  # the other children did not move
    assert viewer.joint_axis_segments(None, state, 0, 0.2).shape == (0, 2, 3)


def test_viewer_draws_joint_axes_only_when_asked(arch):
    """Joint axes (orange) add pixels of their colour only when switched on."""
    sim = th.Simulator(hinged_links_scene())
    try:
        v = viewer.Viewer(sim, size=(240, 180), patches=False)
    except viewer.ViewerError as exc:
        pytest.skip(f"no GGUI here: {exc}")
    near = lambda im: np.abs(im.astype(int) - np.array(viewer._JOINT_COLOR) * 255).max(axis=2) < 40  # noqa: E731
    plain = near(v.render())
    v.renderer.joints = True
    assert int(np.count_nonzero(near(v.render()) & ~plain)) > 10


def test_inset_triangles_lay_the_image_out_row_0_at_the_bottom():
    image = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])  # 2 rows, 3 columns
    v, c = viewer.inset_triangles(image, 0.1, 0.2, 0.3, 0.4)
    assert v.shape == (36, 2) and c.shape == (36, 3)
    quads = v.reshape(2, 3, 6, 2)
    np.testing.assert_allclose(quads[0, 0].min(axis=0), [0.1, 0.2])  # pixel (0, 0) at the lower left
    np.testing.assert_allclose(quads[1, 2].max(axis=0), [0.4, 0.6])  # the last one at the upper right
    np.testing.assert_allclose(c.reshape(2, 3, 6, 3)[1, 2, 0], viewer.pressure_colors(np.array(5.0), 0.0, 5.0))
    np.testing.assert_allclose(c.reshape(2, 3, 6, 3)[0, 0, 0], viewer.pressure_colors(np.array(0.0), 0.0, 5.0))


def test_viewer_draws_tactile_insets_only_when_given(arch):
    """scenes/box_on_table.toml after its first step (the box starts 1 mm into the table): with a tactile sensor on the compliant box's
    bottom face the frame's lower left corner holds its pressure image (colour-map pixels that
    the frame without it lacks). (A scene without joints: the gripper's would compile the Newton
    solver for this test alone, about 400 s on lavapipe.)"""
    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "box_on_table.toml"))
    sensor = sim.tactile_sensor("box", face="-z", grid=(12, 8))
    sim.step(1)
    assert sensor.pressure()[0].max() > 0
    corner = (slice(240 - 72, 240 - 5), slice(6, 60))  # the inset: 0.3 of the height, from 0.02 of each side
    try:
        with_view = viewer.Viewer(sim, size=(320, 240), tactile=[sensor], labels=False)
        without_view = viewer.Viewer(sim, size=(320, 240), labels=False)
    except viewer.ViewerError as exc:
        pytest.skip(f"no GGUI here: {exc}")
    with_inset, without = with_view.render().astype(int), without_view.render().astype(int)
    rest = np.abs(with_inset[:100, 100:] - without[:100, 100:]).sum(axis=2) > 60
    differs = np.abs(with_inset[corner] - without[corner]).sum(axis=2) > 60
    print(f"{int(differs.sum())} of {differs.size} corner pixels differ")
    assert differs.mean() > 0.5
    print(f"{int(rest.sum())} pixels of the rest of the frame differ")
    assert rest.mean() < 0.01  # the rest of the frame is the same


def test_framing_fits_the_box_and_projects_like_ggui(arch):
    """framed(): every corner of the box projects inside the image, the target to its centre;
    project() matches GGUI's own view and projection matrices."""
    if arch != "cpu":
        pytest.skip("host-side: checked in the cpu session")
    from taichi_hydro import framing

    lo, hi = np.array([-0.1, -0.05, 0.0]), np.array([0.3, 0.05, 0.2])
    pose = framing.framed(lo, hi, 4 / 3)
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    px, depth = framing.project(corners, pose, (640, 480))
    assert np.all(depth > 0) and np.all((px > 0) & (px < [640, 480]))
    np.testing.assert_allclose(framing.project(pose.target, pose, (640, 480))[0], [[320, 240]], atol=1e-9)
    moved = framing.framed(lo, hi, 4 / 3, position=(1.0, 2.0, 3.0))
    assert moved.eye == (1.0, 2.0, 3.0) and moved.target == pose.target
    with pytest.raises(ValueError, match="must differ"):
        framing.framed(lo, hi, 1.0, position=(0, 0, 1), target=(0, 0, 1))
    import taichi as ti

    camera = ti.ui.Camera()
    camera.position(*moved.eye)
    camera.lookat(*moved.target)
    camera.up(0, 0, 1)
    camera.fov(framing.FOV_DEG)
    clip = np.c_[corners, np.ones(8)] @ camera.get_view_matrix() @ camera.get_projection_matrix(640 / 480)
    ndc = clip[:, :2] / clip[:, 3:]
    expected = np.c_[(ndc[:, 0] + 1) * 320, (1 - ndc[:, 1]) * 240]
    np.testing.assert_allclose(framing.project(corners, moved, (640, 480))[0], expected, atol=1e-3)


def test_annotation_helpers(arch):
    if arch != "cpu":
        pytest.skip("host-side: checked in the cpu session")
    from taichi_hydro import annotate

    np.testing.assert_allclose(annotate.nice_ticks(1.02), [0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(annotate.nice_ticks(4.1e3), [0, 1e3, 2e3, 3e3, 4e3])
    assert list(annotate.nice_ticks(0.0)) == [0.0]
    assert annotate.pressure_unit(2.5e5) == (1e3, "kPa") and annotate.pressure_unit(10.0) == (1.0, "Pa")
    params = {"mass": np.array([[np.nan, 0.2], [np.nan, 0.3]]), "friction": np.full((2, 2), 0.5),
              "gravity": np.array([[0, 0, -9.81], [0, 0, -9.0]])}
    labels = annotate.parameter_labels(params, ["floor", "box"], [0, 1])
    assert labels == [["mass box 0.2 kg", "gravity z -9.81 m/s^2"], ["mass box 0.3 kg", "gravity z -9 m/s^2"]]
    boxes = annotate.panel_grid((640, 480), 2, 3)
    assert len(boxes) == 6 and boxes[5][2] <= 640 - annotate.strip_width(640) and boxes[5][3] == 480


def test_back_faces_keep_the_far_half_of_a_cube(arch):
    if arch != "cpu":
        pytest.skip("host-side: checked in the cpu session")
    v = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)], float)
    # the +z face (outward normal up) and the -z face (down), wound counter-clockwise from outside
    tris = np.array([[1, 5, 7], [0, 6, 4]])
    np.testing.assert_array_equal(viewer.back_faces(v, tris, eye=[0.5, 0.5, 5.0]), [False, True])
    np.testing.assert_array_equal(viewer.back_faces(v, tris, eye=[0.5, 0.5, -5.0]), [True, False])
    assert viewer.centre_crop((640, 480), 1.0) == (80, 0, 560, 480)


def _near(img, color, tol):
    return np.abs(img.astype(int) - np.asarray(color) * 255).max(axis=-1) < tol


def _chroma(img):
    rgb = img.astype(float) + 1.0
    return rgb / np.linalg.norm(rgb, axis=-1, keepdims=True)


def test_recorded_frame_shows_bodies_patches_and_labels(arch):
    """The box stack at rest: within each box's outline (projected with the viewer's camera) the
    frame has pixels of that box's colour (shaded: same hue) and of the pressure colour map
    (the patches inside the cut-away boxes); the colour bar's label area has text that a frame
    with labels off lacks."""
    from taichi_hydro import annotate, framing

    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "box_stack.toml"))
    sim.step(30)
    try:
        v = viewer.Viewer(sim, size=(320, 240))
    except viewer.ViewerError as exc:
        pytest.skip(f"no GGUI here: {exc}")
    img = v.render()
    half = np.array([0.1, 0.075, 0.04])  # the boxes' half sizes [m]; they rest unrotated
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
    # patch pixels: saturated, with the hue of a colour of the map (lighting scales brightness)
    cmap = _chroma(viewer.pressure_colors(np.linspace(0, 1, 64), 0, 1) * 255)
    saturated = img.max(axis=2).astype(int) - img.min(axis=2) > 80
    patch = saturated & (np.linalg.norm(_chroma(img)[:, :, None] - cmap, axis=-1).min(axis=2) < 0.03)
    for b in (1, 2):  # the two boxes: their projected corners bound the window looked at
        corners, _ = framing.project(sim.get_state()["position"][0, b] + signs * half, v.renderer.pose, (320, 240))
        (x0, y0), (x1, y1) = np.floor(corners.min(axis=0)).astype(int), np.ceil(corners.max(axis=0)).astype(int)
        window = (slice(max(y0, 0), y1), slice(max(x0, 0), x1))
        body = np.linalg.norm(_chroma(img[window]) - _chroma(np.array(viewer._BODY_COLORS[b]) * 255), axis=-1) < 0.02
        assert np.count_nonzero(body) > 20, f"body {b}"
        assert np.count_nonzero(patch[window]) > 50, f"patch near body {b}"
    plain = viewer.Viewer(sim, size=(320, 240), labels=False).render()
    x0, y0, x1, y1 = annotate.bar_layout((320, 240))["labels"]
    assert np.count_nonzero(np.abs(img[y0:y1, x0:x1].astype(int) - plain[y0:y1, x0:x1]).sum(axis=2) > 60) > 40
    assert np.array_equal(img[:, :x0 - 80][100:], plain[:, :x0 - 80][100:])  # below the overlay box, the scene alone


def test_tiled_frame_has_distinct_labelled_panels(arch):
    """--tile 2 2 over 4 worlds whose balls start at different heights: 4 panels, each showing its
    own world (no two alike), separated by lines; labels name each world."""
    from taichi_hydro import annotate

    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "ball_drop.toml"), worlds=4)
    state = sim.get_state()
    state["position"][:, 1, 2] += np.array([0.0, 0.05, 0.1, 0.15])[:, None][:, 0]
    sim.set_state(position=state["position"])
    with pytest.raises(th.ArgumentError, match="simulator has 4"):
        viewer.Viewer(sim, tile=(3, 2))
    try:
        img = viewer.Viewer(sim, size=(400, 300), tile=(2, 2), labels=False).render().astype(int)
    except viewer.ViewerError as exc:
        pytest.skip(f"no GGUI here: {exc}")
    boxes = annotate.panel_grid((400, 300), 2, 2)
    panels = [img[y0 + 3:y1 - 3, x0 + 3:x1 - 3] for x0, y0, x1, y1 in boxes]
    for i in range(4):
        for j in range(i + 1, 4):
            assert np.count_nonzero(np.abs(panels[i] - panels[j]).sum(axis=2) > 30) > 30, (i, j)
    labelled = viewer.Viewer(sim, size=(400, 300), tile=(2, 2)).render().astype(int)
    for x0, y0, x1, y1 in boxes:  # label text at each panel's top left
        label = (slice(y0 + 4, y0 + 20), slice(x0 + 4, x0 + 60))
        assert np.count_nonzero(np.abs(labelled[label] - img[label]).sum(axis=2) > 60) > 20


def test_scene_view_table_is_validated(arch):
    if arch != "cpu":
        pytest.skip("host-side: checked in the cpu session")
    body = {"name": "ball", "mass": 1.0, "shape": {"type": "sphere", "radius": 0.1}}
    scene = th.scene_from_dict({"body": [body], "view": {"camera_position": [1, 2, 3], "camera_target": [0, 0, 0]}}, "s.toml")
    assert scene.view.camera_position == (1.0, 2.0, 3.0) and scene.view.camera_target == (0.0, 0.0, 0.0)
    assert th.scene_from_dict({"body": [body]}).view.camera_position is None
    for view, message in (({"camera_posit": [1, 2, 3]}, "s.toml: \\[view\\]: unknown key 'camera_posit'"),
                          ({"camera_target": [1, 2]}, "\\[view\\]: key 'camera_target': must be a list of 3 numbers"),
                          ({"camera_position": [0, 0, 1], "camera_target": [0, 0, 1]}, "must differ"),
                          ("front", "\\[view\\] must be a table")):
        with pytest.raises(th.SceneError, match=message):
            th.scene_from_dict({"body": [body], "view": view}, "s.toml")


def test_view_tile_needs_enough_worlds(arch, tmp_path):
    if arch != "cpu":
        pytest.skip("host-side: checked in the cpu session")
    cli = [sys.executable, "-m", "taichi_hydro.cli", "view", str(ROOT / "scenes" / "pile.toml"),
           "--record", str(tmp_path / "a.png")]
    proc = subprocess.run(cli + ["--tile", "2", "2", "--worlds", "3"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "--tile 2 2 shows 4 worlds" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(cli + ["--tile", "0", "2"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "--tile" in proc.stderr


def test_a_fixed_state_renders_the_same_pixels_every_time(arch):
    """Sixteen renders of one state through four Viewer objects of two sizes: every frame of a
    size equals that size's first. GGUI's uninitialised transform buffer (see viewer._Buffer)
    used to drop whole draw calls now and then; with _Buffer.draw calling scene.mesh again
    (monkeypatched), 5 of 7 runs of this test failed on lavapipe (the patch missing: 65 or 102
    pixels), and bench/viewer_stress.py counts it over 300 renders."""
    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "sphere_on_plane.toml"))
    sim.step(1)
    first = {}
    for size in ((160, 120), (128, 96), (160, 120), (128, 96)):
        try:
            v = viewer.Viewer(sim, size=size)
        except viewer.ViewerError as exc:
            pytest.skip(f"no GGUI here: {exc}")
        for _ in range(4):
            img = v.render()
            ref = first.setdefault(size, img)
            assert np.array_equal(img, ref), f"{size}: {np.count_nonzero(np.any(img != ref, axis=2))} pixels differ"
