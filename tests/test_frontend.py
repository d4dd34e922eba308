"""frontend.py: the memoised Taichi source lookups return what Taichi's own functions return,
and a compile error in an inlined ti.func still names its file, line and the offending text."""

import pytest
import taichi as ti
from taichi.lang import kernel_impl
from taichi.lang.ast import ast_transformer_utils as utils

from taichi_hydro import frontend


@ti.func
def _twice(x):
    return 2.0 * x


@ti.func
def _broken(x):
    return x + _not_defined  # noqa: F821  (the compile error under test)


def test_memoised_lookups_match_taichi_and_hit(arch, monkeypatch):
    """Every lookup made while compiling a kernel that inlines one ti.func at three sites equals
    Taichi's own answer, and repeated lookups come from the memo (fewer distinct keys than calls)."""
    if arch != "cpu":
        pytest.skip("host-side Python (Taichi's front end): checked once, on cpu")
    assert frontend.install()
    memo_pos, memo_lines = utils.ASTTransformerContext.get_pos_info, kernel_impl.getsourcelines
    calls, keys, mismatches = [], set(), []

    def spy_pos(ctx, node):
        got, want = memo_pos(ctx, node), memo_pos.__wrapped__(ctx, node)
        calls.append(1)
        keys.add(frontend.pos_key(ctx, node))
        if got != want:
            mismatches.append((got, want))
        return got

    def spy_lines(obj):
        got, want = memo_lines(obj), memo_lines.__wrapped__(obj)
        if got != want:
            mismatches.append((got, want))
        return got

    monkeypatch.setattr(utils.ASTTransformerContext, "get_pos_info", spy_pos)
    monkeypatch.setattr(kernel_impl, "getsourcelines", spy_lines)

    out = ti.ndarray(ti.f32, 3)

    @ti.kernel
    def three_sites(y: ti.types.ndarray()):
        y[0] = _twice(1.0)
        y[1] = _twice(y[0])
        y[2] = _twice(y[1])

    three_sites(out)
    assert out.to_numpy().tolist() == [2.0, 4.0, 8.0]
    assert not mismatches
    assert len(keys) < len(calls)


def test_compile_error_still_points_at_the_source(arch):
    """An undefined name in an inlined ti.func: the error names this file, the ti.func and the
    offending line with its caret marks, as Taichi's unmemoised messages do."""
    if arch != "cpu":
        pytest.skip("host-side Python (Taichi's front end): checked once, on cpu")
    frontend.install()

    @ti.kernel
    def uses_broken() -> ti.f32:
        return _broken(1.0)

    with pytest.raises(Exception) as info:
        uses_broken()
    message = str(info.value)
    assert "test_frontend.py" in message and "in _broken" in message
    assert "_not_defined" in message and "^" in message
