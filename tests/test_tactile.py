"""Tactile images (Simulator.tactile_sensor / tactile, taichi_hydro.tactile): what an image
integrates to, its shape against the closed form of a sphere pressed into a flat pad, its
frame, and the API around it."""

import math

import numpy as np
import pytest

import taichi_hydro as th
from taichi_hydro.rotation import rotation_matrices
from taichi_hydro.tactile.face import SIDES, box_side

E, PAD, DT = 1e5, (0.04, 0.04, 0.01), 1e-3
HALF_THICKNESS = 0.005  # the pad's smallest half size: p = E depth / 5 mm under its top face


def pad_scene(indenter: dict, pad_orientation=(1.0, 0.0, 0.0, 0.0)) -> th.Scene:
    """A static compliant box pad (40 x 40 x 10 mm, E = 1e5 Pa) with its top face at z = 0, and
    a dynamic rigid indenter; no gravity (one step reads the contact at the initial pose)."""
    return th.scene_from_dict({
        "sim": {"dt": DT, "gravity": [0.0, 0.0, 0.0]},
        "solver": {"method": "newton"},
        "body": [
            {"name": "pad", "type": "static", "position": [0.0, 0.0, -0.005], "orientation": list(pad_orientation),
             "shape": {"type": "box", "size": list(PAD)}, "contact": {"hydro": "compliant", "modulus": E, "friction": 0.8}},
            indenter,
        ]}, source="<tactile test>")


def sphere(xy=(0.003, -0.002), radius=0.02, depth=0.001, resolution=0.001, velocity=(0.0, 0.0, 0.0)):
    return {"name": "ball", "mass": 0.1, "position": [xy[0], xy[1], radius - depth], "velocity": list(velocity),
            "shape": {"type": "sphere", "radius": radius}, "contact": {"hydro": "rigid", "resolution": resolution, "friction": 0.8}}


def pressure_centre(image: np.ndarray, sensor) -> np.ndarray:
    u, v = sensor.pixel_centers()
    total = image.sum()
    return np.array([(image.sum(axis=0) * u).sum() / total, (image.sum(axis=1) * v).sum() / total])


@pytest.mark.launches(400)
def test_sphere_image_integrates_to_the_force_and_matches_the_closed_form(arch):
    """A rigid sphere (R = 20 mm) pressed delta = 1 mm into the pad, 3 mm / -2 mm off its centre:
    - the image times the pixel area sums to the static pressure force along the face normal
      (contact_surfaces' force . z): the rasteriser clips each polygon exactly at the pixel
      sides, so only float32 round-off remains (coordinates of ~2e-2 m carry 1e-9 m, a piece of
      ~1e-6 m^2 then ~1e-6 relative; 1e-4 bounds the sum);
    - each pixel is the pixel average of the closed form p(r) = E / h (delta - R + sqrt(R^2 -
      r^2))+ (h = 5 mm; the box field is E depth / h under its top face), r from the sphere's
      axis: the only difference is the sphere's tessellation, whose facets lie inside the
      sphere by at most their sagitta s = c^2 / (8 R) (c the longest edge), i.e. a pressure
      error of at most E s / h (about 0.5 % of the peak here); so the image is radially
      symmetric about the sphere to that error;
    - its pressure centre lies under the sphere's centre, within the shift that error can
      cause: a (E s / h) (pi a^2) / F, a the contact radius sqrt(2 R delta)."""
    R, delta, xy = 0.02, 0.001, np.array([0.003, -0.002])
    sim = th.Simulator(pad_scene(sphere(xy, R, delta)))
    sensor = sim.tactile_sensor("pad", grid=(40, 40), face="+z")
    surface = sim.contact_surfaces()[0]
    sim.step(1)
    image = sensor.pressure()[0]
    total = image.sum() * sensor.pixel_area
    print(f"image force {total:.6f} N, surface force {surface.force[2]:.6f} N, polygons {surface.faces}")
    assert total == pytest.approx(surface.force[2], rel=1e-4)

    ball = sim.model.host.geometries[sim.scene.body_index("ball")].surface
    edges = np.concatenate([ball.triangles[:, [0, 1]], ball.triangles[:, [1, 2]], ball.triangles[:, [2, 0]]])
    c = np.linalg.norm(ball.vertices[edges[:, 0]] - ball.vertices[edges[:, 1]], axis=1).max()
    error = E / HALF_THICKNESS * c * c / (8 * R)
    u, v = sensor.pixel_centers()
    du = u[1] - u[0]
    sub = (np.arange(8) + 0.5) / 8 - 0.5  # 8 x 8 samples per pixel
    uu = (u[None, :, None, None] + du * sub[None, None, None, :]) - xy[0]
    vv = (v[:, None, None, None] + du * sub[None, None, :, None]) - xy[1]
    r2 = uu**2 + vv**2
    exact = (E / HALF_THICKNESS * np.clip(delta - R + np.sqrt(np.clip(R * R - r2, 0, None)), 0, None)).mean(axis=(2, 3))
    worst = np.abs(image - exact).max()
    print(f"peak {exact.max():.1f} Pa, largest pixel difference {worst:.1f} Pa, sagitta bound {error:.1f} Pa (edge {c * 1e3:.2f} mm)")
    assert worst <= error
    a = math.sqrt(2 * R * delta)
    shift = a * error * math.pi * a * a / total
    centre = pressure_centre(image, sensor)
    print(f"pressure centre {centre * 1e3} mm, sphere {xy * 1e3} mm, bound {shift * 1e3:.4f} mm")
    assert np.linalg.norm(centre - xy) <= shift


@pytest.mark.launches(400)
def test_rotating_the_pad_rotates_the_image(arch):
    """A rigid capsule (an elongated, off-centre indenter) on the square pad, in two worlds: the
    pad as placed, and the pad turned a quarter turn about its face normal z. The face's axes
    turn with the pad, so the second image is the first one rotated: B[i, j] = A[j, n - 1 - i]
    (np.rot90). The pad's pressure field is the same function in the world (the box is square),
    and the rasteriser integrates it exactly whatever polygons the turned tets cut, so the
    images agree to float32 round-off (1e-4 of the peak)."""
    capsule = {"name": "ball", "mass": 0.1, "position": [0.004, 0.002, 0.0044], "orientation": [0.7071068, 0.0, 0.7071068, 0.0],
               "shape": {"type": "capsule", "radius": 0.005, "length": 0.02}, "contact": {"hydro": "rigid", "resolution": 0.001}}
    sim = th.Simulator(pad_scene(capsule), worlds=2)
    turned = sim.get_state()
    pad = sim.scene.body_index("pad")
    turned["orientation"][1, pad] = [math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)]
    sim.reset(state={"orientation": turned["orientation"]})
    images = sim.tactile("pad", grid=(24, 24), face="+z")
    assert not images["pressure"].any()  # no step yet: nothing to draw
    sim.step(1)
    a, b = sim.tactile("pad", grid=(24, 24), face="+z")["pressure"]
    print(f"peak {a.max():.1f} Pa, largest difference {np.abs(b - np.rot90(a)).max():.3g} Pa")
    assert a.max() > 1000.0 and np.abs(a - np.rot90(a)).max() > 0.1 * a.max()  # not symmetric: the test can fail
    np.testing.assert_allclose(b, np.rot90(a), rtol=0, atol=1e-4 * a.max())


@pytest.mark.launches(400)
def test_shear_image_integrates_to_the_solved_friction_on_the_pad(arch):
    """The sphere sliding sideways (0.2 m/s along x) as it presses into the pad: the shear image
    times the pixel area sums to the friction force on the pad, the tangential parts of the
    solved impulses / dt of the pair's contact rows (pad = the pair's lower body: the force on
    it is minus the rows' impulse), in the face's (u, v) = (x, y) axes; it opposes the pad being
    dragged along, i.e. points along +x, the way the sphere moves. Exact up to round-off."""
    sim = th.Simulator(pad_scene(sphere(velocity=(0.2, 0.0, 0.0))))
    sensor = sim.tactile_sensor("pad", grid=(30, 30), face="+z")
    sim.step(1)
    shear = sensor.shear()[0].sum(axis=(0, 1)) * sensor.pixel_area
    n = int(sim.rows.world_start.to_numpy()[1])
    frames, gamma = sim.rows.c_frame.to_numpy()[:n].astype(np.float64), sim.rows.c_gamma.to_numpy()[:n].astype(np.float64)
    gamma[:, 2] = 0.0
    on_ball = np.einsum("cji,cj->i", frames, gamma) / DT  # frame rows t1, t2, n: world = F^T gamma
    print(f"shear image sum {shear} N, rows' friction on the pad {-on_ball[:2]} N")
    assert shear[0] > 0.1  # friction drags the pad along +x
    np.testing.assert_allclose(shear, -on_ball[:2], rtol=1e-4, atol=1e-6)


def test_box_sides_follow_the_documented_axes(arch):
    """Each side of a box: centre on the side, (u, v, n) right-handed with n the outward axis,
    u the next axis of G (negated for a "-" side), size the side's extents along u and v."""
    if arch != "cpu":
        pytest.skip("host-only geometry")
    size = (0.01, 0.02, 0.03)
    for side in SIDES:
        centre, R, (w, h) = box_side(size, side)
        a = "xyz".index(side[1])
        sign = 1.0 if side[0] == "+" else -1.0
        np.testing.assert_allclose(R[:, 2], sign * np.eye(3)[a])
        np.testing.assert_allclose(R[:, 0], sign * np.eye(3)[(a + 1) % 3])
        np.testing.assert_allclose(np.linalg.det(R), 1.0)
        np.testing.assert_allclose(centre, sign * 0.5 * size[a] * np.eye(3)[a])
        assert (w, h) == (size[(a + 1) % 3], size[(a + 2) % 3])


def test_default_face_is_the_pad_side_away_from_the_finger(arch):
    """scenes/gripper.toml: each finger's pad geometry, with no face named, gets its largest side
    farther from the finger's centre of mass: the inner face (+x of the pad, facing the box),
    whose centre is 30 mm from the gripper's axis."""
    if arch != "cpu":
        pytest.skip("host-only: the face is resolved on the host")
    from conftest import ROOT

    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "gripper.toml"))
    for finger, pad, sign in (("gripper/left_finger", "left_pad/pad", 1.0), ("gripper/right_finger", "right_pad/pad", -1.0)):
        sensor = sim.tactile_sensor(finger, geometry=pad, grid=(6, 4))
        face = sensor.face
        assert face.label.endswith("+x") and face.size == (0.02, 0.03)
        b = sim.scene.body_index(finger)
        state = sim.get_state()
        R_WB = rotation_matrices(state["orientation"][0, b])
        p_WF = state["position"][0, b] + R_WB @ face.p_BF
        assert p_WF[0] == pytest.approx(-sign * 0.03, abs=1e-7)  # float32 body positions
        np.testing.assert_allclose(R_WB @ face.R_BF[:, 2], [sign, 0.0, 0.0], atol=1e-7)  # facing the other finger


@pytest.mark.parametrize("kwargs, message", [
    ({"body": "nobody"}, "no body 'nobody'"),
    ({"body": "gripper/left_finger"}, "has 2 geometries"),
    ({"body": "gripper/left_finger", "geometry": "nail"}, "no geometry 'nail'"),
    ({"body": "gripper/left_finger", "geometry": "left_pad/pad", "face": "+w"}, "face must be one of"),
    ({"body": "gripper/left_finger", "geometry": "left_pad/pad", "face": {"center": [0, 0, 0], "normal": [0, 0, 0],
                                                                           "u": [1, 0, 0], "size": [0.01, 0.01]}}, "zero length"),
    ({"body": "gripper/left_finger", "geometry": "left_pad/pad", "face": {"center": [0, 0, 0], "normal": [1, 0, 0],
                                                                           "u": [2, 0, 0], "size": [0.01, 0.01]}}, "parallel"),
    ({"body": "gripper/left_finger", "geometry": "left_pad/pad", "face": {"normal": [1, 0, 0]}}, "missing"),
    ({"body": "gripper/left_finger", "geometry": "left_pad/pad", "grid": (0, 4)}, "tactile grid rows"),
    ({"body": "gripper/left_finger", "geometry": "left_pad/pad", "grid": (2000, 2000)}, "more than"),
    ({"body": "box"}, "no single largest side"),
])
def test_bad_sensor_arguments_name_what_is_wrong(arch, kwargs, message):
    if arch != "cpu":
        pytest.skip("host-only argument checks")
    from conftest import ROOT

    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "gripper.toml"))
    body = kwargs.pop("body")
    with pytest.raises(th.HydroError, match=message):
        sim.tactile_sensor(body, **kwargs)


@pytest.mark.launches(600)
def test_views_follow_the_steps_and_reset_zeroes_only_the_reset_worlds(arch):
    """Two worlds of the sphere: the same images (to float32 round-off: pixels sum in the order
    threads arrive); the torch views (cpu) are the sensor's memory, current after each step;
    reset(worlds=[1]) zeroes world 1's images and leaves world 0's as they were."""
    sim = th.Simulator(pad_scene(sphere()), worlds=2)
    sensor = sim.tactile_sensor("pad", grid=(10, 10), face="+z")
    sim.step(1)
    before = sensor.pressure()
    assert before[0].sum() > 0
    np.testing.assert_allclose(before[1], before[0], rtol=1e-5, atol=1e-6 * before.max())  # float atomics: any order
    sim.reset(worlds=[1])
    after = sensor.pressure()
    assert np.array_equal(after[0], before[0]) and not after[1].any() and not sensor.shear()[1].any()
    if arch == "vulkan":
        with pytest.raises(th.SceneError, match="tensor views"):
            sensor.tensors()
        return
    pytest.importorskip("torch")
    views = sim.tactile("pad", grid=(10, 10), face="+z", as_torch=True)
    assert tuple(views["pressure"].shape) == (2, 10, 10) and tuple(views["shear"].shape) == (2, 10, 10, 2)
    sim.step(1)
    np.testing.assert_array_equal(views["pressure"].numpy(), sensor.pressure().astype(np.float32))
    assert views["pressure"][1].sum() > 0
