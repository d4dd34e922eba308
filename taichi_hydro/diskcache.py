"""On-disk cache of NumPy arrays for results that are slow to compute and depend only on their
inputs (tetrahedralised surfaces): one .npz file per entry, named by a hash of everything the
result depends on.

Location: $TAICHI_HYDRO_CACHE if set, else $XDG_CACHE_HOME/taichi_hydro, else
~/.cache/taichi_hydro. Entries are written atomically (output.atomic_write): a reader sees a
whole file or none, also while another process writes the same entry. An entry that cannot be
read back (truncated, corrupt, other arrays than expected, a different key inside, or contents
the caller's check refuses) gives a HydroWarning naming the file and is treated as missing, so
that the caller rebuilds it and store() overwrites it. A cache folder that cannot be created or
written means no caching: store() returns False and raises nothing."""

from __future__ import annotations

import hashlib
import os
import warnings
import zipfile
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from .errors import HydroError, HydroWarning
from .output import atomic_write

__all__ = ["ENV", "cache_dir", "digest", "entry_path", "load", "store"]

ENV = "TAICHI_HYDRO_CACHE"
"""Environment variable naming the cache folder (it wins over XDG_CACHE_HOME and ~/.cache)."""

_KEY = "_key"  # the entry's own key, stored inside it: a renamed or swapped file is not taken for another


def cache_dir() -> Path | None:
    """The cache folder (not necessarily existing yet), or None when no home folder is known."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "taichi_hydro"
    try:
        return Path.home() / ".cache" / "taichi_hydro"
    except RuntimeError:  # no HOME and no password entry
        return None


def digest(*parts) -> str:
    """Hex SHA-256 of `parts` in order: arrays by dtype, shape and bytes (C order), str and bytes
    as they are, numbers by repr (so 0.1 and 0.1000000001 differ). Each part is length-prefixed,
    so that no two different sequences of parts hash alike by concatenation."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, np.ndarray):
            data = f"{part.dtype.str}{part.shape}".encode() + np.ascontiguousarray(part).tobytes()
        elif isinstance(part, bytes):
            data = part
        elif isinstance(part, str):
            data = part.encode()
        elif isinstance(part, (bool, int, float, np.integer, np.floating)):
            data = repr(part.item() if isinstance(part, np.generic) else part).encode()
        else:
            raise TypeError(f"digest: cannot hash a {type(part).__name__}")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def entry_path(kind: str, key: str) -> Path | None:
    """File of the entry `key` of `kind` (e.g. "tetmesh"), or None without a cache folder."""
    folder = cache_dir()
    return None if folder is None else folder / f"{kind}-{key}.npz"


def load(kind: str, key: str, names: tuple[str, ...], check: Callable[[dict], None] | None = None) -> dict | None:
    """The arrays `names` of entry `key`, or None when it is missing or unusable. check(arrays)
    may raise (any HydroError, ValueError) to refuse contents; a refused or unreadable entry is
    warned about (HydroWarning) and None is returned."""
    path = entry_path(kind, key)
    if path is None or not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [n for n in (*names, _KEY) if n not in data.files]
            if missing:
                raise ValueError(f"arrays {missing} missing")
            if str(data[_KEY]) != key:
                raise ValueError(f"it holds entry {str(data[_KEY])[:12]}..., not {key[:12]}...")
            arrays = {n: data[n] for n in names}
        if check is not None:
            check(arrays)
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile, zlib.error, HydroError) as exc:
        warnings.warn(f"cache entry {path} is unusable ({type(exc).__name__}: {exc}); rebuilding it", HydroWarning,
                      stacklevel=2)
        return None
    return arrays


def store(kind: str, key: str, arrays: Mapping[str, np.ndarray]) -> bool:
    """Write the entry atomically; False (and nothing raised) when the folder cannot be made or
    written."""
    path = entry_path(kind, key)
    if path is None:
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda tmp: _save(tmp, {**arrays, _KEY: np.array(key)}))
    except (OSError, HydroError):  # OutputError is both
        return False
    return True


def _save(tmp: Path, arrays: dict) -> None:
    with open(tmp, "wb") as f:  # a file object: np.savez would append ".npz" to a path without it
        np.savez(f, **arrays)
