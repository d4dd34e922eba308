"""Benchmark results as JSON lines: one object per row, written atomically to a file (appended
to, or replacing it) or printed."""

from __future__ import annotations

import json
import sys

from taichi_hydro.output import append_text, write_text


def json_lines(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def emit(rows, out: str | None, append: bool = True) -> None:
    """The rows to `out` (appended, or replacing the file when `append` is false), else stdout."""
    text = json_lines(rows)
    if out:
        (append_text if append else write_text)(out, text)
    else:
        sys.stdout.write(text)
