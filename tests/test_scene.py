"""Scene files: every bad input gives a SceneError that names the file, the body and the key."""

import copy
import math
import textwrap

import meshio
import numpy as np
import pytest

import taichi_hydro as th
from taichi_hydro.geometry import primitives as prim

from conftest import ROOT, edited

GOOD = {
    "sim": {"dt": 1e-3, "gravity": [0, 0, -9.81]},
    "solver": {"iterations": 50, "tolerance": 1e-6},
    "body": [
        {"name": "ground", "type": "static", "shape": {"type": "halfspace"}},
        {
            "name": "ball",
            "type": "dynamic",
            "mass": 0.5,
            "position": [0, 0, 0.1],
            "orientation": [1, 0, 0, 0],
            "shape": {"type": "sphere", "radius": 0.1},
            "contact": {"hydro": "compliant", "modulus": 1e5, "resolution": 0.02, "margin": 0.0, "dissipation": 1.0, "friction": 0.4},
        },
    ],
}


def edit(path, value, delete=False):
    """GOOD with the entry at `path` (a tuple of keys/indices) replaced or deleted."""
    return edited(GOOD, path, value, delete)


def test_good_scene_parses():
    s = th.scene_from_dict(GOOD, source="good.toml")
    ball = s.bodies[1]
    assert ball.contact.compliant and ball.contact.friction == 0.4 and s.solver.iterations == 50
    assert s.bodies[0].contact.hydro == "rigid"


BAD = [
    # (path, value or DELETE, message fragments)
    (("sim", "step"), 1e-3, ["[sim]", "unknown key 'step'"]),
    (("sim", "dt"), -1e-3, ["[sim]", "'dt'", "> 0"]),
    (("sim", "dt"), float("nan"), ["'dt'", "finite"]),
    (("sim", "gravity"), [0, 0], ["'gravity'", "3 numbers"]),
    (("solver", "iterations"), 0, ["[solver]", "'iterations'", "[1, 2147483647]"]),
    (("solver", "iterations"), 2**40, ["[solver]", "'iterations'", "[1, 2147483647]"]),
    (("sim", "dt"), 1e-45, ["[sim]", "'dt'", "float32"]),
    (("body", 1, "position"), [0, 0, 1e39], ["body 'ball'", "'position'", "float32"]),
    (("body", 1, "shape", "radius"), 1e39, ["body 'ball': shape", "'radius'", "float32"]),
    (("body", 1, "contact", "modulus"), 1e40, ["body 'ball': contact", "'modulus'", "float32"]),
    (("solver", "iterations"), 2.5, ["'iterations'", "integer"]),
    (("solver", "sleep"), "no", ["[solver]", "'sleep'"]),
    (("body", 1, "colour"), "red", ["body 'ball'", "unknown key 'colour'"]),
    (("body", 1, "name"), None, ["'name'", "string"]),
    (("body", 1, "type"), "floating", ["body 'ball'", "'type'", "dynamic"]),
    (("body", 1, "mass"), 0.0, ["body 'ball'", "'mass'", "> 0"]),
    (("body", 1, "mass"), -2.0, ["body 'ball'", "'mass'", "> 0"]),
    (("body", 1, "mass"), "heavy", ["body 'ball'", "'mass'", "number"]),
    (("body", 1, "position"), [0, 0, float("nan")], ["body 'ball'", "'position'", "finite"]),
    (("body", 1, "position"), [0, 0, float("inf")], ["body 'ball'", "'position'", "finite"]),
    (("body", 1, "orientation"), [1, 1, 0, 0], ["body 'ball'", "'orientation'", "unit quaternion"]),
    (("body", 1, "orientation"), [float("nan"), 0, 0, 0], ["body 'ball'", "'orientation'", "finite"]),
    (("body", 1, "velocity"), [1, 2], ["body 'ball'", "'velocity'", "3 numbers"]),
    (("body", 1, "shape", "radius"), -0.1, ["body 'ball': shape", "'radius'", "> 0"]),
    (("body", 1, "shape", "radius"), 0, ["body 'ball': shape", "'radius'", "> 0"]),
    (("body", 1, "shape", "size"), [1, 1, 1], ["body 'ball': shape", "'size'", "not a parameter of a sphere"]),
    (("body", 1, "shape", "type"), "torus", ["body 'ball': shape", "'type'", "sphere"]),
    (("body", 1, "contact", "modulus"), -1e5, ["body 'ball': contact", "'modulus'", "> 0"]),
    (("body", 1, "contact", "friction"), -0.1, ["body 'ball': contact", "'friction'", ">= 0"]),
    (("body", 1, "contact", "margin"), -1e-4, ["body 'ball': contact", "'margin'", ">= 0"]),
    (("body", 1, "contact", "hydro"), "soft", ["body 'ball': contact", "'hydro'", "compliant"]),
    (("body", 1, "contact", "slab_thickness"), 1.0, ["body 'ball': contact", "'slab_thickness'", "compliant halfspace only"]),
    (("body", 1, "contact", "stiffness"), 1.0, ["body 'ball': contact", "unknown key 'stiffness'"]),
    (("body", 0, "type"), "dynamic", ["body 'ground'", "halfspace has infinite mass"]),
    (("body", 0, "mass"), 1.0, ["body 'ground'", "'mass'", "static body has no mass"]),
    (("body", 0, "contact"), {"margin": 1e-4}, ["body 'ground': contact", "'margin'", "compliant geometry only"]),
    (("body", 0, "contact"), {"hydro": "compliant"}, ["body 'ground': contact", "'modulus'", "required"]),
    (("body", 0, "contact"), {"hydro": "rigid", "modulus": 1e5}, ["body 'ground': contact", "'modulus'", "compliant geometry only"]),
]


@pytest.mark.parametrize("path, value, fragments", BAD, ids=[f"{'.'.join(map(str, p))}={v!r}" for p, v, _ in BAD])
def test_bad_values_name_file_body_and_key(path, value, fragments):
    with pytest.raises(th.SceneError) as err:
        th.scene_from_dict(edit(path, value), source="bad.toml")
    msg = str(err.value)
    assert msg.startswith("bad.toml:")
    for f in fragments:
        assert f in msg, f"{f!r} not in {msg!r}"


@pytest.mark.parametrize("path, fragments", [
    (("body", 1, "name"), ["body #1", "'name'", "required"]),
    (("body", 1, "shape"), ["body 'ball'", "'shape'", "required"]),
    (("body", 1, "mass"), ["body 'ball'", "'mass'", "needs 'mass'"]),
    (("body", 1, "shape", "radius"), ["body 'ball': shape", "'radius'", "required"]),
    (("body", 1, "contact", "modulus"), ["body 'ball': contact", "'modulus'", "required"]),
])
def test_missing_keys(path, fragments):
    with pytest.raises(th.SceneError) as err:
        th.scene_from_dict(edit(path, None, delete=True), source="bad.toml")
    for f in fragments:
        assert f in str(err.value), str(err.value)


def test_duplicate_names_and_empty_scene():
    data = copy.deepcopy(GOOD)
    data["body"][0]["name"] = "ball"
    with pytest.raises(th.SceneError, match="'ball' is used more than once"):
        th.scene_from_dict(data)
    with pytest.raises(th.SceneError, match="at least one"):
        th.scene_from_dict({"sim": {}})
    with pytest.raises(th.SceneError, match="unknown key 'bodies'"):
        th.scene_from_dict({"bodies": [], "body": GOOD["body"]})


def write(tmp_path, text, name="scene.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_toml_errors_and_missing_file(tmp_path):
    with pytest.raises(th.SceneError, match="not found"):
        th.load_scene(tmp_path / "nope.toml")
    path = write(tmp_path, "[[body]\nname = 1")
    with pytest.raises(th.SceneError, match="not valid TOML"):
        th.load_scene(path)


MESH_BODY = """
[[body]]
name = "ground"
type = "static"
[body.shape]
type = "halfspace"

[[body]]
name = "part"
mass = 1.0
[body.shape]
type = "{kind}"
file = "{file}"
[body.contact]
{contact}
"""


def mesh_scene(tmp_path, kind, file, contact="hydro = \"rigid\""):
    return write(tmp_path, MESH_BODY.format(kind=kind, file=file, contact=contact))


def test_missing_mesh_file_names_key(tmp_path):
    path = mesh_scene(tmp_path, "mesh", "meshes/none.obj")
    with pytest.raises(th.SceneError) as err:
        th.load_scene(path)
    assert str(path) in str(err.value) and "body 'part'" in str(err.value) and "'file'" in str(err.value)


def _obj(path, vertices, faces):
    lines = [f"v {x} {y} {z}" for x, y, z in vertices] + [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in faces]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("defect, fragment", [("open", "open mesh"), ("nonmanifold", "non-manifold")])
def test_bad_surface_meshes_are_refused_at_build(tmp_path, arch, defect, fragment):
    box = prim.rigid_box((0.1, 0.1, 0.1))
    faces = box.triangles[:-1] if defect == "open" else np.vstack([box.triangles, box.triangles[:1]])
    _obj(tmp_path / "part.obj", box.vertices, faces)
    scene = th.load_scene(mesh_scene(tmp_path, "mesh", "part.obj", "modulus = 1e5"))
    with pytest.raises(th.SceneError) as err:
        th.Simulator(scene)
    msg = str(err.value)
    assert "body 'part'" in msg and "'shape.file'" in msg and fragment in msg and "part.obj" in msg


def test_inverted_tet_in_vtk_is_refused(tmp_path, arch):
    mesh = prim.compliant_box((0.1, 0.1, 0.1), 1e5)
    tets = mesh.tets.copy()
    tets[7] = tets[7][[0, 2, 1, 3]]
    meshio.write(str(tmp_path / "pad.vtk"), meshio.Mesh(mesh.vertices, [("tetra", tets)], point_data={"pressure": mesh.pressure}))
    scene = th.load_scene(mesh_scene(tmp_path, "tetmesh", "pad.vtk", "hydro = \"compliant\""))
    with pytest.raises(th.SceneError) as err:
        th.Simulator(scene)
    msg = str(err.value)
    assert "body 'part'" in msg and "inverted tet" in msg and "tet 7" in msg and "pad.vtk" in msg


@pytest.mark.parametrize("edit, outcome", [
    ("negative", "refused"), ("zero", "refused"), ("nan", "refused"), ("boundary", "warned"), ("as_built", "accepted"),
])
def test_a_vtk_pressure_field_is_checked(tmp_path, edit, outcome):
    """A given field must be finite and >= 0 with a positive maximum (refused otherwise); one not
    zero on the boundary is legal but warned about (contact would start with a jump)."""
    import warnings

    from taichi_hydro.geometry.mesh import boundary_faces
    from taichi_hydro.model import build_model

    mesh = prim.compliant_box((0.1, 0.1, 0.1), 1e5)
    p = mesh.pressure.copy()
    interior = np.flatnonzero(p > 0)[0]
    if edit == "negative":
        p[interior] = -5.0
    elif edit == "zero":
        p[:] = 0.0
    elif edit == "nan":
        p[interior] = np.nan
    elif edit == "boundary":
        p[np.unique(boundary_faces(mesh.tets))[0]] = 0.2 * p.max()
    name = f"pad_{edit}.vtk"
    meshio.write(str(tmp_path / name), meshio.Mesh(mesh.vertices, [("tetra", mesh.tets)], point_data={"pressure": p}))
    scene = th.load_scene(mesh_scene(tmp_path, "tetmesh", name, "hydro = \"compliant\""))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if outcome == "refused":
            with pytest.raises(th.SceneError) as err:
                build_model(scene)
            assert name in str(err.value) and "body 'part'" in str(err.value) and "pressure" in str(err.value)
        else:
            build_model(scene)
    warned = [w for w in caught if issubclass(w.category, th.HydroWarning)]
    assert (len(warned) == 1) == (outcome == "warned"), [str(w.message) for w in warned]
    if warned:
        assert name in str(warned[0].message) and "boundary" in str(warned[0].message)


def test_vtk_without_pressure_needs_modulus(tmp_path, arch):
    mesh = prim.compliant_box((0.1, 0.1, 0.1), 1e5)
    meshio.write(str(tmp_path / "pad.vtk"), meshio.Mesh(mesh.vertices, [("tetra", mesh.tets)]))
    scene = th.load_scene(mesh_scene(tmp_path, "tetmesh", "pad.vtk", "hydro = \"compliant\""))
    with pytest.raises(th.SceneError, match="no point-data array 'pressure'.*modulus"):
        th.Simulator(scene)


def test_bundled_scenes_load():
    for path in sorted((ROOT / "scenes").glob("*.toml")):
        s = th.load_scene(path)
        assert len(s.bodies) >= 2 and all(math.isfinite(x) for b in s.bodies for x in b.p_WB)


def test_state_rejects_nan_pose(arch):
    sim = th.Simulator(th.scene_from_dict(GOOD))
    state = sim.get_state()
    state["position"][0, 1, 2] = np.nan
    with pytest.raises(th.SceneError, match="position of body 'ball' in world 0 is not finite"):
        sim.set_state(position=state["position"])


# --------------------------------------------------------------------------- several geometries

HAND = {
    "name": "hand",
    "mass": 0.4,
    "geometry": [
        {"name": "pad", "position": [0.0, 0.0, -0.02], "orientation": [1.0004, 0.0, 0.0, 0.0],
         "shape": {"type": "box", "size": [0.02, 0.01, 0.04]}, "contact": {"modulus": 1e5, "friction": 0.9}},
        {"shape": {"type": "sphere", "radius": 0.01}},
    ],
}


def hand_scene(**edits):
    """GOOD's ground and the two-geometry HAND, with HAND's entries replaced by `edits`."""
    return {"body": [GOOD["body"][0], {**copy.deepcopy(HAND), **edits}]}


def test_geometry_tables_parse(arch):
    """[[body.geometry]] tables, written in TOML as the README shows them: names (default
    "geometry<i>"), poses (orientation normalised), shapes and materials per geometry; the
    one-shape form becomes one geometry "geometry0" at the body frame; Body.shape and
    Body.contact read a single geometry and refuse several."""
    if arch != "cpu":
        pytest.skip("host-side parsing: checked in the cpu session")
    text = textwrap.dedent("""
        [[body]]
        name = "finger"
        mass = 0.1
        [[body.geometry]]
        name = "pad"
        position = [0.0, 0.0, 0.02]
        orientation = [0.0, 0.0, 0.0, 1.0]
        [body.geometry.shape]
        type = "box"
        size = [0.02, 0.01, 0.04]
        [body.geometry.contact]
        hydro = "compliant"
        modulus = 1e5
        [[body.geometry]]
        [body.geometry.shape]
        type = "capsule"
        radius = 0.01
        length = 0.05
    """)
    import tomllib

    finger = th.scene_from_dict(tomllib.loads(text), source="finger.toml").bodies[0]
    pad, other = finger.geometries
    assert (pad.name, other.name) == ("pad", "geometry1") and not finger.shape_table
    assert pad.p_BG == (0.0, 0.0, 0.02) and pad.q_BG == (0.0, 0.0, 0.0, 1.0) and pad.contact.modulus == 1e5
    assert other.shape.type == "capsule" and other.contact.hydro == "rigid" and not other.posed
    for read in (lambda: finger.shape, lambda: finger.contact):
        with pytest.raises(th.SceneError, match="body 'finger' has 2 geometries"):
            read()
    hand = th.scene_from_dict(hand_scene()).bodies[1]
    assert hand.geometries[0].q_BG == (1.0, 0.0, 0.0, 0.0) and hand.geometries[0].posed
    ball = th.scene_from_dict(GOOD).bodies[1]
    assert ball.shape_table and len(ball.geometries) == 1 and ball.geometries[0].name == "geometry0"
    assert ball.shape is ball.geometries[0].shape and ball.contact.friction == 0.4 and not ball.geometries[0].posed


def test_inertia_and_center_of_mass_override_the_shapes(arch):
    """inertia (ixx, iyy, izz, ixy, ixz, iyz) and center_of_mass replace the computed ones; a
    centre of mass alone keeps the shapes' inertia about the centre of mass; a dynamic body with
    no geometry needs both mass and inertia."""
    if arch != "cpu":
        pytest.skip("host-side parsing: checked in the cpu session")
    from taichi_hydro.model import build_model

    six = [0.02, 0.03, 0.04, 0.001, -0.002, 0.003]
    data = build_model(th.scene_from_dict(hand_scene(inertia=six, center_of_mass=[0.01, 0.0, 0.0])))
    np.testing.assert_array_equal(data.body_inertia_B[1], [[0.02, 0.001, -0.002], [0.001, 0.03, 0.003], [-0.002, 0.003, 0.04]])
    np.testing.assert_array_equal(data.body_com_B[1], [0.01, 0.0, 0.0])
    assert data.body_mass_props(1) is None  # masses set per world scale the given inertia
    shapes = build_model(th.scene_from_dict(hand_scene()))
    moved = build_model(th.scene_from_dict(hand_scene(center_of_mass=[0.0, 0.01, 0.0])))
    np.testing.assert_array_equal(moved.body_inertia_B[1], shapes.body_inertia_B[1])
    v_box, v_ball = 0.02 * 0.01 * 0.04, 4.0 / 3.0 * math.pi * 0.01**3
    np.testing.assert_allclose(shapes.body_com_B[1], [0.0, 0.0, -0.02 * v_box / (v_box + v_ball)], rtol=0, atol=1e-15)
    empty = build_model(th.scene_from_dict(hand_scene(geometry=[], inertia=six)))
    assert empty.body_mass[1] == 0.4 and len(empty.geometries) == 1 and empty.pair_count == 0


GEOMETRY_BAD = [
    # (edits of HAND, message fragments)
    ({"shape": {"type": "sphere", "radius": 0.1}}, ["body 'hand'", "'geometry'", "not both"]),
    ({"contact": {"friction": 0.3}}, ["body 'hand'", "'contact'", "own [body.geometry.contact]"]),
    ({"geometry": {"shape": {"type": "sphere", "radius": 0.1}}}, ["body 'hand'", "'geometry'", "array of tables"]),
    ({"geometry": [HAND["geometry"][0], HAND["geometry"][0]]}, ["body 'hand'", "'geometry'", "'pad' is used more than once"]),
    ({"geometry": []}, ["body 'hand'", "'inertia'", "without geometry"]),
    ({"inertia": [1.0, 1.0, -1.0, 0.0, 0.0, 0.0]}, ["body 'hand'", "'inertia'", "positive definite"]),
    ({"inertia": [1.0, 1.0, 1.0, 0.0, 0.0, 2.0]}, ["body 'hand'", "'inertia'", "positive definite"]),
    ({"inertia": [1.0, 1.0, 3.0, 0.0, 0.0, 0.0]}, ["body 'hand'", "'inertia'", "triangle inequality"]),
    ({"inertia": [1.0, 1.0, 1.0, 0.0, 0.0]}, ["body 'hand'", "'inertia'", "6 numbers"]),
    ({"inertia": [1.0, 1.0, 1.0, 0.0, 0.0, 0.0], "mass": None, "density": 500.0}, ["body 'hand'", "'inertia'", "needs 'mass'"]),
    ({"center_of_mass": [0.0, 0.0]}, ["body 'hand'", "'center_of_mass'", "3 numbers"]),
    ({"type": "static", "mass": None, "inertia": [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]}, ["body 'hand'", "'inertia'", "static body has no mass"]),
    ({"geometry": [{"name": "pad", "shape": {"type": "sphere", "radius": -0.1}}]}, ["body 'hand': geometry 'pad': shape", "'radius'"]),
    ({"geometry": [{"name": "pad", "shape": {"type": "sphere", "radius": 0.1}, "colour": "red"}]},
     ["body 'hand': geometry 'pad'", "unknown key 'colour'"]),
    ({"geometry": [{"name": "pad"}]}, ["body 'hand': geometry 'pad'", "'shape'", "required"]),
    ({"geometry": [{"name": "", "shape": {"type": "sphere", "radius": 0.1}}]}, ["body 'hand': geometry ''", "'name'", "empty"]),
    ({"geometry": [{"shape": {"type": "sphere", "radius": 0.1}, "orientation": [1.0, 1.0, 0.0, 0.0]}]},
     ["body 'hand': geometry #0", "'orientation'", "unit quaternion"]),
    ({"geometry": [{"name": "pad", "shape": {"type": "sphere", "radius": 0.1}, "contact": {"hydro": "soft"}}]},
     ["body 'hand': geometry 'pad': contact", "'hydro'"]),
    ({"geometry": [{"name": "floor", "shape": {"type": "halfspace"}}]}, ["body 'hand'", "'type'", "halfspace (geometry 'floor')"]),
    ({"type": "static", "mass": None, "geometry": [{"name": "top", "position": [0, 0, 1], "shape": {"type": "halfspace"}}]},
     ["body 'hand': geometry 'top'", "'position'", "halfspace geometry", "place the body instead"]),
    ({"type": "static", "mass": None, "geometry": [{"name": "top", "orientation": [0, 1, 0, 0], "shape": {"type": "halfspace"}}]},
     ["body 'hand': geometry 'top'", "'orientation'", "halfspace geometry"]),
]


@pytest.mark.parametrize("edits, fragments", GEOMETRY_BAD, ids=[str(sorted(e)) + str(i) for i, (e, _) in enumerate(GEOMETRY_BAD)])
def test_bad_geometry_tables_name_file_body_geometry_and_key(arch, edits, fragments):
    if arch != "cpu":
        pytest.skip("host-side parsing: checked in the cpu session")
    data = hand_scene(**{k: v for k, v in edits.items() if v is not None})
    for key in [k for k, v in edits.items() if v is None]:
        del data["body"][1][key]
    with pytest.raises(th.SceneError) as err:
        th.scene_from_dict(data, source="hand.toml")
    msg = str(err.value)
    assert msg.startswith("hand.toml:")
    for f in fragments:
        assert f in msg, f"{f!r} not in {msg!r}"


def test_geometry_build_errors_name_the_geometry(arch):
    """Errors found while meshing (here a resolution far too fine for the ball) name the file,
    the body, the geometry and the key."""
    if arch != "cpu":
        pytest.skip("host-side parsing: checked in the cpu session")
    from taichi_hydro.model import build_model

    geometry = [HAND["geometry"][0], {"name": "tip", "shape": {"type": "sphere", "radius": 0.01},
                                      "contact": {"modulus": 1e5, "resolution": 1e-7}}]
    with pytest.raises(th.SceneError) as err:
        build_model(th.scene_from_dict(hand_scene(geometry=geometry), source="hand.toml"))
    msg = str(err.value)
    assert msg.startswith("hand.toml: body 'hand': geometry 'tip': key 'contact.resolution'"), msg
