"""fTetWild (Hu et al. 2020, "Fast Tetrahedral Meshing in the Wild") through the pytetwild wheel:
a closed triangle surface in, a tetrahedral volume mesh of the solid it bounds out.

fTetWild keeps the output's boundary within an envelope of the input surface (a distance
`envelope` [m]) instead of reproducing the input triangles, and optimises the tets' shapes
(conformal AMIPS energy) towards a target edge length. bench/tetrahedralize.py compares it with
TetGen, gmsh and wildmeshing on quality, speed and licence.

pytetwild 0.3-0.4 imports pyvista (and through it VTK, ~100 MB) in its package __init__, a
dependency its metadata does not declare and that this package has no use for. So the compiled
binding, pytetwild/PyfTetWildWrapper, is loaded on its own, without running that __init__, and
called directly; its positional signature is that of pytetwild 0.4 (pyproject.toml pins
>=0.4.1,<0.5)."""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

import numpy as np

from ..errors import MeshError

__all__ = ["MESHER", "mesher_version", "tetwild"]

MESHER = "pytetwild"
"""Distribution name of the mesher (part of the cache key, with its version)."""

_BINDING = "pytetwild.PyfTetWildWrapper"


def mesher_version() -> str:
    """The installed pytetwild's version; MeshError naming the install command when it is absent."""
    try:
        return importlib.metadata.version(MESHER)
    except importlib.metadata.PackageNotFoundError:
        raise MeshError(f"meshing a non-convex compliant surface needs the package {MESHER!r}, which is not installed: "
                        "pip install \"pytetwild>=0.4.1,<0.5\" (a dependency of taichi-hydro)") from None


def _binding():
    """The compiled module pytetwild.PyfTetWildWrapper, from sys.modules if pytetwild was imported
    already, else loaded from its file and registered under that name (a later `import pytetwild`
    then reuses it)."""
    if _BINDING in sys.modules:
        return sys.modules[_BINDING]
    version = mesher_version()
    spec = importlib.util.find_spec(MESHER)  # locates the package without executing it
    folder = Path(spec.submodule_search_locations[0]) if spec and spec.submodule_search_locations else None
    files = sorted(p for pattern in ("PyfTetWildWrapper*.so", "PyfTetWildWrapper*.pyd") for p in folder.glob(pattern)) if folder else []
    if not files:
        raise MeshError(f"{MESHER} {version} is installed but has no compiled PyfTetWildWrapper module in {folder}")
    loader = importlib.machinery.ExtensionFileLoader(_BINDING, str(files[0]))
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(_BINDING, files[0], loader=loader))
    loader.exec_module(module)
    sys.modules[_BINDING] = module
    return module


def tetwild(vertices: np.ndarray, triangles: np.ndarray, edge_length: float, envelope: float, *, iterations: int = 80,
            stop_energy: float = 10.0, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Tetrahedralise the solid bounded by a closed triangle surface.

    vertices (n, 3) [m], triangles (m, 3) vertex indices; edge_length: target tet edge length
    [m]; envelope: largest distance of the output boundary from the input surface [m].
    iterations, stop_energy: fTetWild's optimisation budget (passes; AMIPS energy at which it
    stops). threads: 1 gives the same mesh on every run (more threads change it from run to run).
    Returns (vertices (N, 3) float64 [m], tets (M, 4) int64) as fTetWild orders them (not
    necessarily positively oriented). fTetWild's own failures become MeshError."""
    binding = _binding()
    v = np.ascontiguousarray(vertices, dtype=np.float64)
    f = np.ascontiguousarray(triangles, dtype=np.uint32)
    diagonal = float(np.linalg.norm(np.ptp(v, axis=0)))
    no_field = (np.empty((0, 3)), np.empty((0, 4), dtype=np.int32), np.empty(0))
    try:
        out_v, out_t = binding.tetrahedralize_mesh(
            v, f,
            True,  # optimize
            False,  # skip_simplify
            0.05,  # edge_length_r (unused: the absolute length below wins)
            float(edge_length),  # edge_length_abs
            envelope / diagonal,  # epsilon, relative to the bounding-box diagonal
            float(stop_energy),
            False,  # coarsen
            int(threads),
            int(iterations),
            6,  # loglevel: none
            True,  # quiet
            False,  # vtk_ordering
            False,  # disable_filtering
            *no_field,  # no sizing field
        )
    except (RuntimeError, ValueError, TypeError) as exc:
        raise MeshError(f"fTetWild ({MESHER} {mesher_version()}) failed: {exc}") from exc
    out_v = np.asarray(out_v, dtype=np.float64).reshape(-1, 3)
    out_t = np.asarray(out_t, dtype=np.int64).reshape(-1, 4)
    return out_v, out_t
