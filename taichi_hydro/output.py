"""Output files that are never half written: every writer of the package and of bench/ goes
through here.

check_output() runs before any simulation starts, so that a bad path fails in a second, not
after the run; atomic_write() writes to a temporary file in the target's folder and renames it
over the target only once the writer has finished and the data is on disk. A failed write (disk
full, file-size limit, permission, a directory in the way) leaves the previous file untouched
and raises OutputError naming the path and the cause."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from .errors import OutputError

__all__ = ["check_output", "atomic_write", "write_text", "append_text"]


def check_output(path, suffixes: Iterable[str], option: str, *, create_folder: bool = False) -> Path:
    """`path` as a Path after checking that a file with one of `suffixes` (lower case, with the
    dot) can be created or replaced there: its folder exists (or is made, with create_folder)
    and is writable, and the path is not a directory. OutputError names `option` (e.g. "--out")
    and the path otherwise."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise OutputError(f"{option}: an output path is needed, got {path!r}")
    path = Path(path)
    suffixes = tuple(suffixes)
    if path.is_dir():
        raise OutputError(f"{option} {path}: is a directory; name a file ending in {' or '.join(suffixes)}")
    if path.suffix.lower() not in suffixes:
        raise OutputError(f"{option} {path}: unsupported file type {path.suffix or '(none)'!r}; name a file ending in "
                          f"{' or '.join(suffixes)}")
    folder = path.parent if str(path.parent) else Path(".")
    if create_folder and not folder.exists():
        try:
            folder.mkdir(parents=True)
        except OSError as exc:
            raise OutputError(f"{option} {path}: cannot create the folder {folder}: {exc.strerror or exc}") from exc
    if not folder.is_dir():
        raise OutputError(f"{option} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{option} {path}: the folder {folder} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputError(f"{option} {path}: the existing file is read-only")
    return path


@contextlib.contextmanager
def _no_sigxfsz():
    """Turn the file-size-limit signal (ulimit -f), which kills the process by default, into
    an OSError (EFBIG) from the write that meets the limit."""
    if not hasattr(signal, "SIGXFSZ"):
        yield
        return
    try:
        previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    except ValueError:  # not the main thread: signals cannot be changed there
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGXFSZ, previous)


def atomic_write(path, write: Callable[[Path], None]) -> Path:
    """Call write(tmp) with a temporary path beside `path` (same folder, same suffix), then
    replace `path` by it. Any failure removes the temporary file, leaves `path` as it was and
    raises OutputError. Returns `path`."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{path.suffix}", dir=folder)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from exc
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with _no_sigxfsz():
            write(tmp)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        if path.exists():
            with contextlib.suppress(OSError):
                os.chmod(tmp, path.stat().st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        cause = _os_cause(exc)
        if cause is not None:
            raise OutputError(f"cannot write {path}: {cause.strerror or cause}; the previous file (if any) is unchanged") from exc
        raise
    return path


def _os_cause(exc: BaseException) -> OSError | None:
    """The OSError behind `exc` (itself, or one it was raised from or while handling): writers
    such as ffmpeg pipes re-raise disk errors as their own types."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def write_text(path, text: str) -> Path:
    """atomic_write of a UTF-8 text file."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def append_text(path, text: str) -> Path:
    """atomic_write of the file's current text (if any) followed by `text`."""
    path = Path(path)
    try:
        old = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise OutputError(f"cannot append to {path}: {exc}") from exc
    return write_text(path, old + text)
