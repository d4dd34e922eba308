"""A stage as data: an ordered list of kernel launches over named arguments.

A Plan runs eagerly (one Python call per kernel) or as a Taichi compute graph (ti.graph), which
dispatches the whole list from native code: on the CPU backend that removes the per-launch
Python cost (about 10 us per ndarray argument, measured in bench/). Arguments are bound by name
at every run, so pools that grow (new ndarrays) need no recompilation."""

from __future__ import annotations

from dataclasses import dataclass, field

import taichi as ti

from .backend import spend_launches

__all__ = ["Plan", "ndarray_dtype"]


def ndarray_dtype(value):
    """The element type an ndarray was created with (scalar, vector or matrix type)."""
    if isinstance(value, ti.lang.matrix.VectorNdarray):
        return ti.types.vector(value.n, value.dtype)
    if isinstance(value, ti.lang.matrix.MatrixNdarray):
        return ti.types.matrix(value.n, value.m, value.dtype)
    return value.dtype


def _graph_arg(name: str, value):
    kind = ti.graph.ArgKind
    if isinstance(value, bool):
        raise TypeError(f"plan argument {name!r}: booleans are not kernel arguments")
    if isinstance(value, int):
        return ti.graph.Arg(kind.SCALAR, name, dtype=ti.i32)
    if isinstance(value, float):
        return ti.graph.Arg(kind.SCALAR, name, dtype=ti.lang.impl.get_runtime().default_fp)
    return ti.graph.Arg(kind.NDARRAY, name, dtype=ndarray_dtype(value), ndim=len(value.shape))


@dataclass
class Plan:
    """Kernel launches [(kernel, argument names)] run in order over an argument dict."""

    name: str
    launches: list = field(default_factory=list)
    _graph: object = None
    _graph_key: tuple = ()

    def add(self, kernel, *names: str) -> "Plan":
        self.launches.append((kernel, names))
        self._graph = None
        return self

    def run(self, args: dict, graph: bool = False) -> None:
        spend_launches(len(self.launches))
        if not graph:
            for kernel, names in self.launches:
                kernel(*(args[n] for n in names))
            return
        key = tuple(sorted((n, type(args[n]).__name__) for _, names in self.launches for n in names))
        if self._graph is None or key != self._graph_key:
            self._graph = self._compile(args)
            self._graph_key = key
        used = {n for _, names in self.launches for n in names}
        self._graph.run({n: args[n] for n in used})

    def _compile(self, args: dict):
        symbols: dict = {}
        builder = ti.graph.GraphBuilder()
        for kernel, names in self.launches:
            for n in names:
                if n not in symbols:
                    symbols[n] = _graph_arg(n, args[n])
            builder.dispatch(kernel, *(symbols[n] for n in names))
        return builder.compile()
