"""fTetWild (Hu et al. 2020, "Fast Tetrahedral Meshing in the Wild") through the pytetwild wheel:
a closed triangle surface in, a tetrahedral volume mesh of the solid it bounds out.

fTetWild keeps the output's boundary within an envelope of the input surface (a distance
`envelope` [m]) instead of reproducing the input triangles, and optimises the tets' shapes
(conformal AMIPS energy) towards a target edge length. bench/tetrahedralize.py compares it with
TetGen, gmsh and wildmeshing on quality, speed and licence.

pytetwild 0.3-0.4 imports pyvista (and through it VTK, ~100 MB) in its package __init__, a
dependency its metadata does not declare and that this package has no use for. So its compiled
binding, pytetwild/PyfTetWildWrapper, is loaded on its own, by file, without that __init__, and
called with the positional signature of pytetwild 0.4 (pyproject.toml pins >=0.4.1,<0.5).

The binding runs in a child Python process, in a temporary working folder: fTetWild writes a
debug file (__tracked_surface.stl) into the working folder, which must not land in the user's,
and a failure inside the C++ library (an abort, a crash) then becomes a MeshError here instead
of ending the caller's process. The child imports only NumPy (about 0.2 s)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..errors import MeshError

__all__ = ["MESHER", "mesher_version", "tetwild"]

MESHER = "pytetwild"
"""Distribution name of the mesher (part of the cache key, with its version)."""

# Run as `python -c _CHILD binding.so in.npz out.npz '{"key": value, ...}'` in a scratch folder.
_CHILD = """
import importlib.machinery, importlib.util, json, sys
import numpy as np
binding, source, target, options = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
name = "pytetwild.PyfTetWildWrapper"
loader = importlib.machinery.ExtensionFileLoader(name, binding)
module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, binding, loader=loader))
loader.exec_module(module)
with np.load(source) as data:
    v, f = data["vertices"], data["triangles"]
out_v, out_t = module.tetrahedralize_mesh(
    v, f, True, False, 0.05, options["edge_length"], options["epsilon"], options["stop_energy"], False,
    options["threads"], options["iterations"], 6, True, False, False,
    np.empty((0, 3)), np.empty((0, 4), dtype=np.int32), np.empty(0))
np.savez(target, vertices=np.asarray(out_v, dtype=np.float64), tets=np.asarray(out_t, dtype=np.int64))
"""


def mesher_version() -> str:
    """The installed pytetwild's version; MeshError naming the install command when it is absent."""
    try:
        return importlib.metadata.version(MESHER)
    except importlib.metadata.PackageNotFoundError:
        raise MeshError(f"meshing a non-convex compliant surface needs the package {MESHER!r}, which is not installed: "
                        "install taichi-hydro's \"mesh\" extra, pip install \"taichi-hydro[mesh]\" (or pip install "
                        "\"pytetwild>=0.4.1,<0.5\")") from None


def _binding_file() -> Path:
    """Path of the compiled module pytetwild/PyfTetWildWrapper*.so (or .pyd), found without
    importing pytetwild."""
    version = mesher_version()
    spec = importlib.util.find_spec(MESHER)  # locates the package without executing it
    folder = Path(spec.submodule_search_locations[0]) if spec and spec.submodule_search_locations else None
    files = sorted(p for pattern in ("PyfTetWildWrapper*.so", "PyfTetWildWrapper*.pyd") for p in folder.glob(pattern)) if folder else []
    if not files:
        raise MeshError(f"{MESHER} {version} is installed but has no compiled PyfTetWildWrapper module in {folder}")
    return files[0]


def tetwild(vertices: np.ndarray, triangles: np.ndarray, edge_length: float, envelope: float, *, iterations: int = 80,
            stop_energy: float = 10.0, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Tetrahedralise the solid bounded by a closed triangle surface.

    vertices (n, 3) [m], triangles (m, 3) vertex indices; edge_length: target tet edge length
    [m]; envelope: largest distance of the output boundary from the input surface [m].
    iterations, stop_energy: fTetWild's optimisation budget (passes; AMIPS energy at which it
    stops). threads: fTetWild's thread count (its output differs from run to run either way:
    upstream issue wildmeshing/fTetWild#72; 1 keeps a build from competing with the simulation).
    Returns (vertices (N, 3) float64 [m], tets (M, 4) int64) as fTetWild orders them (not
    necessarily positively oriented). A failure of fTetWild becomes a MeshError."""
    binding = _binding_file()
    v = np.ascontiguousarray(vertices, dtype=np.float64)
    f = np.ascontiguousarray(triangles, dtype=np.uint32)
    diagonal = float(np.linalg.norm(np.ptp(v, axis=0)))
    options = {"edge_length": float(edge_length), "epsilon": float(envelope) / diagonal, "stop_energy": float(stop_energy),
               "threads": int(threads), "iterations": int(iterations)}
    with tempfile.TemporaryDirectory(prefix="taichi_hydro_tetwild_") as folder:
        source, target = Path(folder) / "surface.npz", Path(folder) / "tets.npz"
        np.savez(source, vertices=v, triangles=f)
        done = subprocess.run([sys.executable, "-c", _CHILD, str(binding), str(source), str(target), json.dumps(options)],
                              cwd=folder, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if done.returncode != 0 or not target.is_file():
            raise MeshError(f"fTetWild ({MESHER} {mesher_version()}) failed: {_reason(done)}")
        with np.load(target) as out:
            return out["vertices"].reshape(-1, 3), out["tets"].reshape(-1, 4)


def _reason(done: subprocess.CompletedProcess) -> str:
    """What ended the child: its last error line, or the signal that killed it."""
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        return f"it crashed ({name})"
    lines = [line for line in (done.stderr or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"exit status {done.returncode}"
