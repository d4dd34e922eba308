"""Property-based fuzzing of scene loading (issue: reliability): generated scene dictionaries and
files, valid and mutated (wrong types, out-of-range and non-finite numbers, int32 overflow,
missing and unknown keys, random bytes, truncated files, wrong encodings). Loading either
succeeds or raises a HydroError that names the offending key; nothing else may escape. A scene
that loads is also turned into its host model (geometry meshes, mass properties, pairs: NumPy
only), which must succeed or raise a HydroError too. No kernel is launched here."""

import copy
import math
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import taichi_hydro as th  # noqa: E402
from taichi_hydro.model import build_model, check_supported  # noqa: E402

from conftest import edited  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

BASE = {
    "sim": {"dt": 1e-3, "gravity": [0.0, 0.0, -9.81]},
    "solver": {"iterations": 50, "tolerance": 1e-6, "relaxation": 0.9, "method": "auto", "sleep": True},
    "body": [
        {"name": "ground", "type": "static", "shape": {"type": "halfspace"}, "contact": {"friction": 0.5}},
        {"name": "ball", "mass": 0.5, "position": [0.0, 0.0, 0.1], "velocity": [0.0, 0.0, 0.0],
         "shape": {"type": "sphere", "radius": 0.05}, "contact": {"modulus": 1e5, "resolution": 0.02, "dissipation": 1.0}},
        {"name": "crate", "density": 500.0, "position": [0.3, 0.0, 0.1], "orientation": [1.0, 0.0, 0.0, 0.0],
         "shape": {"type": "box", "size": [0.1, 0.1, 0.1]}, "contact": {"modulus": 1e6, "margin": 1e-4}},
        {"name": "roller", "mass": 0.2, "position": [-0.3, 0.0, 0.1], "shape": {"type": "capsule", "radius": 0.03, "length": 0.1},
         "contact": {"modulus": 1e5, "resolution": 0.02, "friction": 0.3}},
    ],
    "collision_filter": [{"bodies": ["ball", "crate"]}],
}


def _paths(node, prefix=()):
    """Every key path of a nested scene dict (list items by index)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            if isinstance(v, (dict, list)):
                yield from _paths(v, (*prefix, i))


PATHS = sorted(_paths(BASE), key=str)
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 2**31, 2**31 - 1, 2**63, 1e-45, 1e39, -1e39, 1e-300, math.nan, math.inf, -0.0]),
)
VALUES = st.recursive(
    st.one_of(NUMBERS, st.booleans(), st.text(max_size=8), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)


def _load_or_hydro_error(data, source="fuzz.toml", base_dir=None):
    """scene_from_dict, then build_model; returns None on success, else the HydroError."""
    try:
        scene = th.scene_from_dict(data, source=source, base_dir=base_dir)
        check_supported(build_model(scene))
    except th.HydroError as exc:
        assert source in str(exc) or "mesh" in str(exc), f"error does not name the file: {exc}"
        return exc
    return None


def test_base_scene_is_valid():
    assert _load_or_hydro_error(copy.deepcopy(BASE)) is None


@FUZZ
@given(path=st.sampled_from(PATHS), value=VALUES)
def test_a_wrong_value_anywhere_is_a_clear_error(path, value):
    data = edited(BASE, path, value)
    err = _load_or_hydro_error(data)
    if err is not None:
        named = [str(k) for k in path if isinstance(k, str)]
        msg = str(err)
        assert any(f"'{k}'" in msg or f"[{k}]" in msg or k in msg for k in named), f"{path} = {value!r}: {msg}"


@FUZZ
@given(path=st.sampled_from(PATHS))
def test_a_missing_key_is_a_clear_error_or_a_default(path):
    data = edited(BASE, path, delete=True)
    err = _load_or_hydro_error(data)
    if err is not None:
        msg = str(err)
        # Either the key itself is named as required, or a key that needed it (mass <-> density,
        # a filter's body) or the table that lost it.
        assert any(str(k) in msg for k in path if isinstance(k, str)) or "needs" in msg or "body" in msg, f"{path}: {msg}"


@FUZZ
@given(path=st.sampled_from([p for p in PATHS if isinstance(p[-1], str)]), key=st.text(min_size=1, max_size=10), value=VALUES)
def test_an_unknown_key_is_named(path, key, value):
    data = copy.deepcopy(BASE)
    node = data
    for k in path[:-1]:
        node = node[k]
    if key in node:
        return
    node[key] = value
    err = _load_or_hydro_error(data)
    assert err is not None, f"unknown key {key!r} at {path[:-1]} was accepted"
    assert key in str(err) or any(str(k) in str(err) for k in path[:-1] if isinstance(k, str)), f"{key!r}: {err}"


@FUZZ
@given(value=VALUES)
def test_a_scene_that_is_not_a_table_is_refused(value):
    try:
        th.scene_from_dict(value, source="fuzz.toml")
    except th.HydroError as exc:
        assert "fuzz.toml" in str(exc)


def _write(tmp_path, name, payload: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(payload)
    return path


FILE_TEXT = (ROOT / "scenes" / "box_stack.toml").read_text()


@FUZZ
@given(payload=st.binary(max_size=400))
def test_random_bytes_are_a_clear_error(tmp_path, payload):
    path = _write(tmp_path, "random.toml", payload)
    try:
        scene = th.load_scene(path)
        check_supported(build_model(scene))
    except th.HydroError as exc:
        assert "random.toml" in str(exc)


@FUZZ
@given(cut=st.integers(min_value=0, max_value=len(FILE_TEXT)), encoding=st.sampled_from(["utf-8", "utf-16", "utf-32", "latin-1"]),
       noise=st.text(alphabet="é€\x00\ufeff[]=\"'#\n", max_size=4))
def test_truncated_and_re_encoded_files_are_a_clear_error(tmp_path, cut, encoding, noise):
    text = FILE_TEXT[:cut] + noise
    path = _write(tmp_path, "cut.toml", text.encode(encoding, errors="replace"))
    try:
        scene = th.load_scene(path)
        check_supported(build_model(scene))
    except th.HydroError as exc:
        assert "cut.toml" in str(exc)


def test_a_directory_or_a_missing_file_is_named_as_such(tmp_path):
    with pytest.raises(th.SceneError, match="is a directory"):
        th.load_scene(tmp_path)
    with pytest.raises(th.SceneError, match="not found"):
        th.load_scene(tmp_path / "nothing.toml")
    with pytest.raises(th.SceneError, match="not UTF-8"):
        th.load_scene(_write(tmp_path, "latin.toml", "[sim]\ndt = 0.001 # caf\xe9\n".encode("latin-1")))
    with pytest.raises(th.SceneError, match="file path"):
        th.load_scene(3)


MESH_FILES = {
    "garbage.stl": b"\x13\x37" * 150,
    "short.stl": b"solid",
    "nan.obj": b"v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 nan\nf 1 3 2\nf 1 2 4\nf 2 3 4\nf 3 1 4\n",
    "open.obj": b"v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 2 3 4\n",
    "empty.obj": b"",
    "garbage.vtk": b"# vtk DataFile Version 2.0\ngarbage\n",
}


@pytest.mark.parametrize("name, fragment", [
    ("garbage.stl", "not a valid STL"), ("short.stl", "not a valid STL"), ("nan.obj", "vertex 3 is not finite"),
    ("open.obj", "open mesh"), ("empty.obj", "garbage"), ("garbage.vtk", "not a valid .vtk"),
])
def test_broken_mesh_files_say_what_is_wrong(tmp_path, name, fragment):
    _write(tmp_path, name, MESH_FILES[name])
    kind = "tetmesh" if name.endswith(".vtk") else "mesh"
    data = {"body": [{"name": "thing", "type": "static", "shape": {"type": kind, "file": name}}]}
    with pytest.raises(th.SceneError) as err:
        check_supported(build_model(th.scene_from_dict(data, source="meshes.toml", base_dir=tmp_path)))
    msg = str(err.value)
    assert "meshes.toml" in msg and "thing" in msg and "'shape.file'" in msg
    if fragment != "garbage":
        assert fragment in msg, msg
    assert "charset_normalizer" not in msg and "module" not in msg
