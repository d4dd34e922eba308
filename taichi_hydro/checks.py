"""Range checks shared by scene files, the command line and the Python API.

Each `*_problem` function returns None for a good value, or the end of a sentence that says what
is wrong ("must be an integer, got 1.5"); callers prefix it with where the value came from (the
file, body and key; the option; the argument) and raise their own HydroError subclass. Integers
are bounded by the int32 range the kernels index with; reals must be finite, and finite again
once rounded to the device's float type."""

from __future__ import annotations

import math

import numpy as np

from .errors import ArgumentError

__all__ = ["INT32_MAX", "integer_problem", "real_problem", "integer", "real", "unrepresentable", "range_problem"]

INT32_MAX = 2**31 - 1
"""Largest count or index a kernel can hold (Taichi's default integer type is int32)."""


def integer_problem(value, minimum: int = 0, maximum: int = INT32_MAX) -> str | None:
    """What is wrong with `value` as an integer in [minimum, maximum], or None."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        return f"must be an integer, got {value!r}"
    if not minimum <= value <= maximum:
        return f"must be in [{minimum}, {maximum}], got {value}"
    return None


def real_problem(value, minimum: float = -math.inf, maximum: float = math.inf, *, above: float | None = None) -> str | None:
    """What is wrong with `value` as a finite real in [minimum, maximum] (and > above, when
    given), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return f"must be a number, got {value!r}"
    v = float(value)
    if not math.isfinite(v):
        return f"must be finite, got {v}"
    if above is not None and not v > above:
        return f"must be > {above:g}, got {v:g}"
    if not minimum <= v <= maximum:
        if maximum == math.inf:
            return f"must be >= {minimum:g}, got {v:g}"
        if minimum == -math.inf:
            return f"must be <= {maximum:g}, got {v:g}"
        return f"must be in [{minimum:g}, {maximum:g}], got {v:g}"
    return None


def integer(value, name: str, minimum: int = 0, maximum: int = INT32_MAX) -> int:
    """`value` as an int; ArgumentError naming `name` otherwise."""
    problem = integer_problem(value, minimum, maximum)
    if problem:
        raise ArgumentError(f"{name} {problem}")
    return int(value)


def real(value, name: str, minimum: float = -math.inf, maximum: float = math.inf, *, above: float | None = None) -> float:
    """`value` as a float; ArgumentError naming `name` otherwise."""
    problem = real_problem(value, minimum, maximum, above=above)
    if problem:
        raise ArgumentError(f"{name} {problem}")
    return float(value)


def unrepresentable(values, float_type=np.float32, underflow: bool = True) -> np.ndarray:
    """Mask of the finite entries of `values` that `float_type` (the device's float) cannot
    hold: above its largest value (they would become inf), and with `underflow` nonzero ones
    below its smallest normal value (they would become 0 or a denormal: 1.2e-38 in float32;
    a parameter such as dt or a mass must not, a state value may)."""
    values = np.abs(np.asarray(values, dtype=np.float64))
    info = np.finfo(float_type)
    bad = np.isfinite(values) & (values > float(info.max))
    if underflow:
        bad |= np.isfinite(values) & (values != 0) & (values < float(info.tiny))
    return bad


def range_problem(values, float_type=np.float32, underflow: bool = True) -> str | None:
    """What is wrong when some entry of `values` is unrepresentable in `float_type`, or None."""
    bad = unrepresentable(values, float_type, underflow)
    if not bad.any():
        return None
    info = np.finfo(float_type)
    x = float(np.asarray(values, dtype=np.float64)[bad].flat[0])
    held = f"|x| in [{float(info.tiny):.2g}, {float(info.max):.2g}], or 0" if underflow else f"|x| <= {float(info.max):.2g}"
    return f"{x:g} is outside the range the device's {np.dtype(float_type).name} holds ({held})"
