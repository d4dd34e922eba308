"""A stage as data: an ordered list of kernel launches, each argument bound by name.

Plan.add binds every parameter of a kernel to the array or scalar of the same name (or to
the name an explicit alias gives, or to a literal number) and checks, when the plan is built,
that the name exists and that its kind matches the parameter's annotation (ndarray element
type and dimension, integer or float scalar): a kernel whose parameters are reordered or
renamed fails there, instead of silently reading the wrong array.

A Plan runs eagerly (one Python call per kernel) or as a Taichi compute graph (ti.graph),
which dispatches the whole list from native code and removes the per-launch Python cost.
Arguments are looked up by name at every run, so pools that grow (new ndarrays of the same
type) need no recompilation."""


import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field

import taichi as ti
from taichi.aot.utils import check_type_match
from taichi.types.ndarray_type import NdarrayType

from .backend import spend_launches
from .errors import BindingError

__all__ = ["Plan", "ndarray_dtype", "kernel_parameters"]


def ndarray_dtype(value):
    """The element type an ndarray was created with (scalar, vector or matrix type)."""
    if isinstance(value, ti.lang.matrix.VectorNdarray):
        return ti.types.vector(value.n, value.dtype)
    if isinstance(value, ti.lang.matrix.MatrixNdarray):
        return ti.types.matrix(value.n, value.m, value.dtype)
    return value.dtype


def kernel_parameters(kernel) -> dict:
    """{parameter name: annotation} of a @ti.kernel, in signature order."""
    return {name: p.annotation for name, p in inspect.signature(kernel).parameters.items()}


def _is_integer_type(annotation) -> bool:
    if annotation is int:
        return True
    if annotation is float:
        return False
    return ti.types.is_integral(annotation)


def _check(where: str, annotation, value) -> None:
    """BindingError unless `value` can be passed for a parameter annotated `annotation`."""
    if isinstance(annotation, NdarrayType):
        if not isinstance(value, ti.Ndarray):
            raise BindingError(f"{where} is an ndarray parameter, bound to {type(value).__name__} {value!r}")
        if annotation.ndim is not None and annotation.ndim != len(value.shape):
            raise BindingError(f"{where} takes ndim={annotation.ndim}, bound to an array of shape {tuple(value.shape)}")
        if annotation.dtype is not None and not check_type_match(ndarray_dtype(value), annotation.dtype):
            raise BindingError(f"{where} takes elements of {annotation.dtype}, bound to elements of {ndarray_dtype(value)}")
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BindingError(f"{where} is a scalar parameter, bound to {type(value).__name__}")
    if isinstance(value, int) != _is_integer_type(annotation):
        raise BindingError(f"{where} takes {'an integer' if _is_integer_type(annotation) else 'a float'}, bound to {value!r}")


def _graph_arg(name: str, value):
    kind = ti.graph.ArgKind
    if isinstance(value, int):
        return ti.graph.Arg(kind.SCALAR, name, dtype=ti.i32)
    if isinstance(value, float):
        return ti.graph.Arg(kind.SCALAR, name, dtype=ti.lang.impl.get_runtime().default_fp)
    return ti.graph.Arg(kind.NDARRAY, name, dtype=ndarray_dtype(value), ndim=len(value.shape))


@dataclass
class Plan:
    """Kernel launches [(kernel, argument names)] run in order over an argument dict.

    schema: every name a launch may bind, with a value of the kind it will have at run time
    (the arrays themselves, or arrays and scalars of the same types)."""

    name: str
    schema: Mapping
    launches: list = field(default_factory=list)
    constants: dict = field(default_factory=dict)
    _graph: object = None
    _graph_key: tuple = ()

    def add(self, kernel, **aliases) -> "Plan":
        """Bind each parameter of `kernel` to the schema entry of its own name, or of the name
        `aliases[parameter]` gives; an int or float alias binds a literal."""
        params = kernel_parameters(kernel)
        kname = kernel.__name__
        stray = sorted(set(aliases) - set(params))
        if stray:
            raise BindingError(f"plan '{self.name}': kernel {kname} has no parameter {stray[0]!r} (it has {list(params)})")
        names = []
        for param, annotation in params.items():
            target = aliases.get(param, param)
            where = f"plan '{self.name}': {kname}({param})"
            if not isinstance(target, str):
                literal = f"{kname}.{param}={target!r}"
                _check(where, annotation, target)
                self.constants[literal] = target
                names.append(literal)
                continue
            if target not in self.schema:
                raise BindingError(f"{where} is bound to '{target}', which no container provides")
            _check(f"{where} <- '{target}'", annotation, self.schema[target])
            names.append(target)
        self.launches.append((kernel, tuple(names)))
        self._graph = None
        return self

    def extend(self, other: "Plan") -> "Plan":
        self.launches.extend(other.launches)
        self.constants.update(other.constants)
        self._graph = None
        return self

    def check(self, args: Mapping) -> None:
        """Check every binding against `args` (BindingError on the first mismatch)."""
        values = {**args, **self.constants}
        for kernel, names in self.launches:
            for (param, annotation), name in zip(kernel_parameters(kernel).items(), names):
                if name not in values:
                    raise BindingError(f"plan '{self.name}': {kernel.__name__}({param}) is bound to '{name}', missing from the arguments")
                _check(f"plan '{self.name}': {kernel.__name__}({param}) <- '{name}'", annotation, values[name])

    def run(self, args: Mapping, graph: bool = False) -> None:
        spend_launches(len(self.launches))
        values = {**args, **self.constants} if self.constants else args
        if not graph:
            for kernel, names in self.launches:
                kernel(*(values[n] for n in names))
            return
        used = {n for _, names in self.launches for n in names}
        key = tuple(sorted((n, type(values[n]).__name__) for n in used))
        if self._graph is None or key != self._graph_key:
            self._graph = self._compile(values)
            self._graph_key = key
        self._graph.run({n: values[n] for n in used})

    def _compile(self, values: Mapping):
        symbols: dict = {}
        builder = ti.graph.GraphBuilder()
        for kernel, names in self.launches:
            for n in names:
                if n not in symbols:
                    symbols[n] = _graph_arg(n, values[n])
            builder.dispatch(kernel, *(symbols[n] for n in names))
        return builder.compile()
