"""The command-line options the bench tools share, defined once: each tool's parser, the
backend (--arch) and the dynamics case (--case, --worlds), so that a bad backend or case name
gets the same argparse error (naming the value and the choices) from every tool, not a
traceback from deep inside a run."""

from __future__ import annotations

import argparse

ARCHS = ("cpu", "vulkan", "cuda")


def parser(module: str, doc: str | None) -> argparse.ArgumentParser:
    """The parser of `python -m module`, whose help is the module's docstring as written."""
    return argparse.ArgumentParser(prog=f"python -m {module}", description=doc,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def add_case(p: argparse.ArgumentParser, case: str, worlds: int, arch: bool = True) -> None:
    """--arch (a Taichi backend, default cpu; left out with arch=False, for cpu-only tools),
    --case (one of bench/cases.py's dynamics cases) and --worlds (the batch size)."""
    from .cases import DYNAMICS_CASES

    if arch:
        p.add_argument("--arch", default="cpu", choices=ARCHS)
    p.add_argument("--case", default=case, choices=[c.name for c in DYNAMICS_CASES], metavar="CASE",
                   help=f"a dynamics case of bench/cases.py (default {case})")
    p.add_argument("--worlds", type=positive_int, default=worlds, help=f"worlds in the batch (default {worlds})")
