"""Progress bars (tqdm) for long loops of the command line and the recorder: on stderr, and
only when stderr is a terminal, so logs and pipes stay clean."""

from __future__ import annotations

import sys

__all__ = ["progress_bar"]


def progress_bar(total: int, unit: str, description: str | None = None):
    """A tqdm bar (a context manager with update(n)) over `total` units."""
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, desc=description, file=sys.stderr, disable=None, leave=False, dynamic_ncols=True)
