"""A faster Taichi front end: two of its pure lookups memoised per process.

Taichi 1.7 turns each kernel's Python AST into its IR in Python, and two steps of that repeat
the same pure work many times over:

- reading a function's source lines (inspect.getsourcelines) at every inlining of a ti.func:
  a ti.func called from twenty places is read twenty times;
- formatting the source excerpt of every AST node it visits (ASTTransformerContext.get_pos_info,
  a TextWrapper over the node's lines, kept for error messages whether or not an error comes):
  the same nodes are formatted again at every inlining.

Both depend only on the function and the node's position in it, so memoising them changes no
result and no message (each miss calls Taichi's own function; later calls return its string).
Kernels compile as before; only the Python time before them shrinks (README, "The main job").
install() is called by backend.init and does nothing when the Taichi in use lacks either hook."""

from __future__ import annotations

import functools

__all__ = ["install"]

_installed = False


def install() -> bool:
    """Memoise Taichi's source lookups in this process (idempotent). Returns whether the hooks
    are in place (False on a Taichi without them: compilation is then simply not sped up)."""
    global _installed
    if _installed:
        return True
    try:
        from taichi.lang import kernel_impl
        from taichi.lang.ast import ast_transformer_utils as utils

        context = utils.ASTTransformerContext
        pos_info = context.get_pos_info
        source_lines = kernel_impl.getsourcelines
    except (ImportError, AttributeError):
        return False
    kernel_impl.getsourcelines = _memo_source_lines(source_lines)
    context.get_pos_info = _memo_pos_info(pos_info)
    _installed = True
    return True


def _memo_source_lines(source_lines):
    """getsourcelines(func) memoised on the function object (Taichi copies the lines it is given
    before changing them)."""
    cache: dict = {}

    @functools.wraps(source_lines)
    def memo(obj):
        try:
            return cache[obj]
        except (KeyError, TypeError):  # TypeError: an unhashable object, never cached
            pass
        lines = source_lines(obj)
        try:
            cache[obj] = lines
        except TypeError:
            pass
        return lines

    return memo


def pos_key(ctx, node) -> tuple:
    """What ASTTransformerContext.get_pos_info(node) reads: the function's file, first line,
    indentation and name, the node's span and first source line (a function redefined at the same
    place with other text gets other keys), and for a compound statement the first line of its
    body (its excerpt stops there)."""
    body = getattr(node, "body", None)
    first_body_line = body[0].lineno if isinstance(body, list) and body else None
    return (ctx.file, ctx.lineno_offset, ctx.indent, ctx.func.func.__name__, type(node).__name__, node.lineno,
            node.end_lineno, node.col_offset, node.end_col_offset, first_body_line, ctx.src[node.lineno - 1])


def _memo_pos_info(pos_info):
    """ASTTransformerContext.get_pos_info memoised on pos_key."""
    cache: dict = {}

    @functools.wraps(pos_info)
    def memo(ctx, node):
        key = pos_key(ctx, node)
        try:
            return cache[key]
        except KeyError:
            message = cache[key] = pos_info(ctx, node)
            return message

    return memo
