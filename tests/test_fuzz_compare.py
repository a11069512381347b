"""Property-based tests of the comparison rule (verify/compare.py) over every kind of double: NaN,
both infinities, both zeros, subnormals, the extremes, and tensors of any shape. The rule is
|actual - expected| <= tol * (1 + |expected|); NaN matches nothing, an infinity only itself; the
ULP distance maps doubles onto an ordered integer scale (adjacent doubles 1 apart, 0 and -0 equal)."""

import json
import math

import numpy as np
from hypothesis import assume, example, given, strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from verify.compare import Tensor, close, compare_tensor, ordered, ulp_distance

SPECIAL = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308,
           1.0, -1.0, 1e-300, 1e300, math.inf, -math.inf, math.nan]
DOUBLES = st.one_of(st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True), st.sampled_from(SPECIAL))
FINITE = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True)
NOT_NAN = st.floats(allow_nan=False, allow_infinity=True, allow_subnormal=True)
TOL = st.one_of(st.sampled_from([1e-6, 1e-12, 0.5]), st.floats(min_value=1e-15, max_value=1.0))


def c(a, e, tol):
    return bool(close(np.array([a]), np.array([e]), tol)[0])


@given(NOT_NAN, TOL)
def test_every_value_but_nan_is_close_to_itself(x, tol):
    assert c(x, x, tol)


@given(DOUBLES, TOL)
def test_nan_is_close_to_nothing_not_even_nan(x, tol):
    assert not c(math.nan, x, tol) and not c(x, math.nan, tol)


@given(FINITE, TOL)
def test_an_infinity_matches_only_the_same_infinity(x, tol):
    assert c(math.inf, math.inf, tol) and c(-math.inf, -math.inf, tol)
    assert not c(math.inf, -math.inf, tol) and not c(-math.inf, math.inf, tol)
    for inf in (math.inf, -math.inf):
        assert not c(inf, x, tol) and not c(x, inf, tol)


@given(FINITE, FINITE, TOL)
def test_close_is_symmetric_where_the_rule_is(a, e, tol):
    """Within tol * (1 + min(|a|, |e|)) both orders pass; with |a| == |e| the two orders agree."""
    with np.errstate(over="ignore"):
        gap = abs(np.float64(a) - np.float64(e))
    if gap <= tol * (1 + min(abs(a), abs(e))):
        assert c(a, e, tol) and c(e, a, tol)
    if abs(a) == abs(e):
        assert c(a, e, tol) == c(e, a, tol)
    assert c(a, e, tol) == c(-a, -e, tol)  # the rule does not see the sign of both


@given(FINITE, FINITE, TOL, TOL)
def test_a_looser_tolerance_never_fails_what_a_tighter_one_passes(a, e, t1, t2):
    lo, hi = sorted((t1, t2))
    if c(a, e, lo):
        assert c(a, e, hi)


@given(NOT_NAN, NOT_NAN)
@example(0.0, -0.0)
@example(5e-324, -5e-324)
@example(1.7976931348623157e308, -1.7976931348623157e308)
def test_ulp_distance_is_a_metric_on_the_doubles(a, b):
    d = int(ulp_distance(np.array([a]), np.array([b]))[0])
    assert d == int(ulp_distance(np.array([b]), np.array([a]))[0])
    assert (d == 0) == (np.array(a).tobytes() == np.array(b).tobytes())  # 0 only for the same bits: 0.0 and -0.0 are 1 apart
    if a < b:
        assert int(ordered(np.array([a]))[0]) < int(ordered(np.array([b]))[0])


@given(NOT_NAN, NOT_NAN, NOT_NAN)
def test_ulp_distance_keeps_the_triangle_inequality(a, b, x):
    d = lambda p, q: int(ulp_distance(np.array([p]), np.array([q]))[0])  # noqa: E731
    assert d(a, b) <= d(a, x) + d(x, b)


@given(st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True))
def test_adjacent_doubles_are_one_ulp_apart(x):
    with np.errstate(over="ignore"):  # above the largest double comes Infinity, also one apart
        up = np.nextafter(x, math.inf) if not (x == 0 and math.copysign(1, x) < 0) else 0.0  # -0.0, then +0.0
    assert int(ulp_distance(np.array([x]), np.array([up]))[0]) == 1


@st.composite
def tensors(draw, shape=None):
    shape = shape if shape is not None else draw(array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
    return draw(arrays(np.float64, shape, elements=DOUBLES))


@given(tensors(), TOL)
def test_a_tensor_equals_itself_except_its_nans(values, tol):
    t = Tensor("float64", values)
    r = compare_tensor("x", "output", t, t, tol)
    nans = int(np.isnan(values).sum())
    assert r.passed == (nans == 0) and r.mismatched == nans and r.total == values.size
    assert r.nan == {"reference": nans, "port": nans}
    if nans:
        assert r.message.startswith(f"NaN in both engines at {nans} element(s)")
    if values.size > nans:
        assert r.max_abs == 0.0 and r.max_ulp == 0 and r.max_rel == 0.0


@given(st.data(), TOL)
def test_the_figures_agree_with_the_rule(data, tol):
    shape = data.draw(array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    e, a = data.draw(tensors(shape)), data.draw(tensors(shape))
    r = compare_tensor("x", "output", Tensor("float64", e), Tensor("float64", a), tol)
    ok = close(a, e, tol)
    assert r.mismatched == int((~ok).sum()) and r.passed == bool(ok.all())
    assert r.inf == {"reference": int(np.isinf(e).sum()), "port": int(np.isinf(a).sum())}
    assert len(r.samples) == min(5, r.mismatched)
    for s in r.samples:
        assert not ok[tuple(s["index"])]
    comparable = ~(np.isnan(e) | np.isnan(a))
    if comparable.any():
        assert r.max_abs >= 0 and r.max_ulp >= 0 and r.max_rel >= 0
        assert comparable[r.max_abs_index]
    else:
        assert r.max_abs is None and r.max_ulp is None


@given(tensors(), tensors(), TOL)
def test_tensors_of_different_shapes_never_pass(e, a, tol):
    assume(e.shape != a.shape)
    r = compare_tensor("x", "output", Tensor("float64", e), Tensor("float64", a), tol)
    assert not r.passed and r.mismatched == r.total == e.size and r.message.startswith("shape differs")


@given(tensors(), TOL)
def test_a_dtype_change_never_passes(values, tol):
    r = compare_tensor("x", "output", Tensor("float64", values), Tensor("int64", values), tol)
    assert not r.passed and r.message.startswith("dtype differs")


def _general(monkeypatch, *args):
    """compare_tensor with its bit-identical shortcut turned off (VERIFY_PLAIN=1, verify/plain.py):
    every figure by the general path."""
    with monkeypatch.context() as m:
        m.setenv("VERIFY_PLAIN", "1")
        return compare_tensor(*args)


@given(arrays(np.float64, array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4), elements=DOUBLES),
       st.booleans(), TOL)
@example(np.array([0.0, 1.0]), False, 1e-6)
@example(np.zeros((0, 3)), False, 1e-6)
@example(np.array(-2.5), False, 1e-6)
@example(np.array([3.0, -7.0]), True, 1e-6)
def test_the_shortcut_for_identical_tensors_reports_what_the_general_path_does(values, integers, tol):
    """compare_tensor decides two bit-identical tensors of finite values without elementwise
    arithmetic; its report entry is the general path's, figure for figure (and a tensor with a NaN,
    an infinity or a -0.0 against 0.0 takes the general path)."""
    from _pytest.monkeypatch import MonkeyPatch
    dtype = "float64"
    if integers:
        values = np.where(np.isfinite(values), np.trunc(np.clip(values, -2.0 ** 53, 2.0 ** 53)), 1.0)
        dtype = "int64"
    for actual in (values.copy(), np.where(values == 0, -values, values)):  # identical; zeros' sign flipped
        args = ("x", "output", Tensor(dtype, values), Tensor(dtype, actual), tol)
        mp = MonkeyPatch()
        try:
            fast, general = compare_tensor(*args).to_dict(), _general(mp, *args).to_dict()
            assert json.dumps(fast) == json.dumps(general)  # as text: a NaN sample equals itself
        finally:
            mp.undo()
