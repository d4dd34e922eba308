"""[solver] contact = "point" (contact.patch_point): one point contact per patch, for comparison
with the per-polygon contacts of the model."""

import math

import numpy as np
import pytest

import taichi_hydro as th
from taichi_hydro.types import M_FORCE0, M_K, M_PHI0

G = 9.81
M, SIDE, HEIGHT, MU = 1.0, 0.1, 0.05, 0.5


def box_scene(contact: str, gravity: float = -G, z: float = 0.0248) -> th.Scene:
    """A compliant box (1 kg, 10 x 10 x 5 cm, E = 1e6 Pa, mu = 0.5) on a rigid floor, its bottom
    face `0.025 - z` below the floor."""
    return th.scene_from_dict({
        "sim": {"dt": 1e-3, "gravity": [0.0, 0.0, gravity]},
        "solver": {"method": "newton", "contact": contact},
        "body": [
            {"name": "floor", "type": "static", "shape": {"type": "halfspace"}, "contact": {"friction": MU}},
            {"name": "box", "mass": M, "position": [0.0, 0.0, z], "shape": {"type": "box", "size": [SIDE, SIDE, HEIGHT]},
             "contact": {"hydro": "compliant", "modulus": 1e6, "friction": MU}},
        ]}, source="<point test>")


@pytest.mark.launches(300)
def test_a_patch_becomes_one_contact_with_its_stiffness_force_and_pressure_centre(arch, tol):
    """The box pressed 0.2 mm into the floor and tipped 2 degrees about x (so the pressure centre
    is off the box's centre), no gravity, one step: one contact row, whose stiffness is sum g_i
    A_i over the patch's polygons, whose static force -k phi0 is their sum A_i p0_i, and whose
    point is their pressure centre (ContactSurface.pressure_center), all as the host computes
    them from the same polygons (those the solver keeps, polygons["contact"]: the box's field
    runs along the floor near its side walls, and those polygons make no contact), to float32
    round-off of sums of ~40 terms (tol.rel)."""
    sim = th.Simulator(box_scene("point", gravity=0.0))
    tilt = math.radians(2.0)
    state = sim.get_state()
    state["orientation"][0, 1] = [math.cos(tilt / 2), math.sin(tilt / 2), 0.0, 0.0]
    sim.reset(state={"orientation": state["orientation"]})
    surface = sim.contact_surfaces()[0]
    poly = surface.polygons
    kept = poly["contact"]
    assert 0 < kept.sum() < len(kept)  # some polygons are dropped: the sums below can tell
    stiffness = (poly["g_b"] * poly["area"])[kept].sum()  # body a, the floor, is rigid: g = g_b (the box's side)
    sim.step(1)
    assert int(sim.solver_stats()["contacts"][0]) == 1
    model = sim.rows.c_model.to_numpy()[0].astype(np.float64)
    print(f"k {model[M_K]:.6g} vs {stiffness:.6g} N/m; force {-model[M_K] * model[M_PHI0]:.6g}, {model[M_FORCE0]:.6g} vs "
          f"{np.linalg.norm(surface.force):.6g} N; {surface.faces} polygons")
    assert model[M_K] == pytest.approx(stiffness, rel=tol.rel)
    assert model[M_FORCE0] == pytest.approx((poly["area"] * poly["pressure"])[kept].sum(), rel=tol.rel)
    assert -model[M_K] * model[M_PHI0] == pytest.approx(model[M_FORCE0], rel=tol.rel)
    frame = sim.rows.c_frame.to_numpy()[0].astype(np.float64)
    np.testing.assert_allclose(frame[2], surface.force / np.linalg.norm(surface.force), atol=tol.rel)
    centre = surface.pressure_center()
    assert abs(centre[1]) > 1e-3  # tipped: the pressure centre is off the box's axis, so this can fail
    ra, rb = sim.rows.c_ra.to_numpy()[0], sim.rows.c_rb.to_numpy()[0]
    # from a = the floor (at the origin) and b = the box (centre at z = 0.0248 before the step)
    np.testing.assert_allclose(ra, centre, atol=tol.pos)
    np.testing.assert_allclose(rb, centre - [0.0, 0.0, 0.0248], atol=tol.pos)


@pytest.mark.launches(8000)
@pytest.mark.parametrize("contact", ["polygons", "point"])
def test_only_the_polygons_resist_a_twist(arch, contact):
    """The box resting on the floor (0.1 s to settle) is twisted about z by 0.05 N m, a quarter
    of the torque its patch holds by friction (mu m g times the mean distance from the centre of
    a uniform square, 0.3826 a: 0.188 N m). With the polygons it stays put: after 0.1 s its spin
    is within the stiction creep (< 1e-3 rad/s, against 3 rad/s free). As one point contact at
    the pressure centre, on the spin axis, the patch has no friction torque: the box spins up
    freely, omega = tau t / I_z (I_z = m (a^2 + a^2) / 12), to float32 round-off."""
    sim = th.Simulator(box_scene(contact))
    sim.step(100)
    torque = 0.05
    sim.set_control(torque=np.array([[[0.0, 0.0, 0.0], [0.0, 0.0, torque]]]))
    w0 = sim.get_state()["angular_velocity"][0, 1, 2]
    sim.step(100)
    spin = sim.get_state()["angular_velocity"][0, 1, 2] - w0
    free = torque * 0.1 / (M * 2 * SIDE * SIDE / 12)
    print(f"{contact}: spin {spin:.6g} rad/s after 0.1 s (free: {free:.6g})")
    if contact == "polygons":
        assert abs(spin) < 1e-3
    else:
        assert spin == pytest.approx(free, rel=1e-4)


def test_point_contact_is_refused_in_the_deterministic_mode(arch):
    if arch != "cpu":
        pytest.skip("scene validation only")
    data = {"solver": {"contact": "point", "deterministic": True}, "body": [{"name": "ball", "shape": {"type": "sphere", "radius": 0.1},
                                                                          "contact": {"hydro": "compliant", "modulus": 1e5}}]}
    with pytest.raises(th.SceneError, match="'contact'.*cannot be deterministic"):
        th.scene_from_dict(data, source="<test>")
    data["solver"] = {"contact": "points"}
    with pytest.raises(th.SceneError, match="'contact'"):
        th.scene_from_dict(data, source="<test>")
