"""The comparison rule of the runner, element by element (verify/compare.py, docs/runner.md)."""

import math

import numpy as np
import pytest

from verify.compare import close, compare_named, compare_tensor, ulp_distance
from toolkit import tensor

TOL = 1e-6


def compare(expected, actual, tol=TOL):
    return compare_tensor("x", "output", tensor(expected), tensor(actual), tol)


@pytest.mark.parametrize("expected", [0.0, 1.0, -3.0, 1000.0])
def test_passes_at_the_boundary_and_fails_just_beyond(expected):
    allowed = TOL * (1 + abs(expected))
    at_boundary = expected + allowed
    # the float sum may round either way; step back to a value whose difference is <= allowed
    while abs(at_boundary - expected) > allowed:
        at_boundary = np.nextafter(at_boundary, expected)
    beyond = np.nextafter(expected + allowed, math.inf)
    while abs(beyond - expected) <= allowed:
        beyond = np.nextafter(beyond, math.inf)
    assert compare([expected], [at_boundary]).passed
    result = compare([expected], [beyond])
    assert not result.passed and result.mismatched == 1


def test_rule_is_relative_for_large_values():
    assert compare([1e6], [1e6 + 0.9]).passed  # allowed 1e-6 * (1 + 1e6) ~ 1.000001
    assert not compare([1e6], [1e6 + 1.1]).passed


def test_nan_never_matches_a_number():
    result = compare([1.0, 2.0], [1.0, math.nan])
    assert not result.passed and result.mismatched == 1
    assert result.nan == {"reference": 0, "port": 1}
    assert result.samples[0]["index"] == (1,)


def test_nan_in_both_engines_fails_and_is_reported():
    result = compare([[1.0, math.nan]], [[1.0, math.nan]])
    assert not result.passed and result.mismatched == 1
    assert result.message.startswith("NaN in both engines")
    assert "(0, 1)" in result.message
    assert result.nan == {"reference": 1, "port": 1}


def test_nan_never_matches_infinity():
    assert not close([math.nan], [math.inf], TOL)[0]
    assert not close([math.inf], [math.nan], TOL)[0]


def test_infinities_match_only_themselves():
    assert compare([math.inf, -math.inf], [math.inf, -math.inf]).passed
    result = compare([math.inf], [-math.inf])
    assert not result.passed
    assert result.inf == {"reference": 1, "port": 1}
    assert not compare([math.inf], [1e308]).passed
    assert not compare([1e308], [math.inf]).passed


def test_huge_opposite_values_do_not_overflow_into_a_pass():
    assert not compare([-1.7e308], [1.7e308]).passed


def test_ulp_distance_of_adjacent_doubles_is_one():
    for x in (1.0, -1.0, 1e-300, 5e-324, 1e300):
        assert ulp_distance(np.array([x]), np.array([np.nextafter(x, math.inf)]))[0] == 1
    assert compare([1.0], [np.nextafter(1.0, 2.0)]).max_ulp == 1


def test_ulp_distance_of_signed_zeros_is_one_and_across_zero_counts_both_sides_and_the_zeros():
    # IEEE 754 totalOrder: -0.0 just below +0.0, so a signed zero is never "0 ULP" (issue 30, item 5)
    assert ulp_distance(np.array([0.0]), np.array([-0.0]))[0] == 1
    assert ulp_distance(np.array([5e-324]), np.array([-5e-324]))[0] == 3
    assert ulp_distance(np.array([-5e-324]), np.array([-0.0]))[0] == 1
    assert ulp_distance(np.array([-1.0]), np.array([-1.0]))[0] == 0


def test_ulp_distance_of_extremes_fits_in_uint64():
    d = ulp_distance(np.array([-np.finfo(np.float64).max]), np.array([np.finfo(np.float64).max]))[0]
    assert int(d) == 2 * int(np.array([np.finfo(np.float64).max]).view(np.int64)[0]) + 1  # the two zeros between


def test_worst_element_index_in_a_3d_array():
    expected = np.zeros((2, 3, 4))
    actual = expected.copy()
    actual[1, 2, 3] = 0.5
    actual[0, 1, 2] = 1e-3
    result = compare(expected, actual)
    assert result.max_abs == 0.5 and result.max_abs_index == (1, 2, 3)
    assert result.mismatched == 2 and result.total == 24
    assert result.allowed_at_max_abs == pytest.approx(TOL)
    assert [s["index"] for s in result.samples] == [(0, 1, 2), (1, 2, 3)]


def test_greatest_relative_difference_and_its_index():
    result = compare([[1.0, 100.0]], [[1.5, 110.0]])
    assert result.max_abs_index == (0, 1) and result.max_abs == pytest.approx(10.0)
    assert result.max_rel_index == (0, 0) and result.max_rel == pytest.approx(0.5)


def test_relative_difference_against_zero_is_infinite():
    result = compare([0.0, 1.0], [1e-3, 1.0])
    assert math.isinf(result.max_rel) and result.max_rel_index == (0,)


def test_shape_mismatch_fails_with_both_shapes():
    result = compare(np.zeros((2, 3)), np.zeros((3, 2)))
    assert not result.passed
    assert result.message == "shape differs: reference (2, 3), port (3, 2)"


def test_dtype_mismatch_fails():
    result = compare_tensor("lens", "input", tensor([1, 2], "int64"), tensor([1, 2]), TOL)
    assert not result.passed and "dtype differs" in result.message


def test_tensor_in_one_engine_only_names_the_side():
    results = compare_named("output", {"out": tensor([1.0]), "weights": tensor([1.0])}, {"out": tensor([1.0])}, TOL)
    by_name = {r.name: r for r in results}
    assert by_name["out"].passed
    assert not by_name["weights"].passed
    assert by_name["weights"].message == "output 'weights' is written by reference only, not by port"


def test_empty_tensors_pass():
    result = compare(np.zeros((0, 3)), np.zeros((0, 3)))
    assert result.passed and result.total == 0 and result.max_abs is None


def test_report_entry_is_plain_json():
    entry = compare([[1.0, 2.0]], [[1.0, 3.0]]).to_dict()
    assert entry["max_abs_index"] == [0, 1] and entry["samples"][0]["index"] == [0, 1]
    assert entry["shape"] == [1, 2] and entry["sides"] == ["reference", "port"]


def test_integers_are_compared_exactly_without_ulp_or_relative_figures():
    big = 2.0 ** 40  # within the rule's relative part a difference of 1 would pass: integers are exact
    r = compare_tensor("tokens", "output", tensor([3, 7, big], "int64"), tensor([3, 8, big + 1], "int64"), TOL)
    assert not r.passed and r.mismatched == 2
    assert (r.max_abs, r.max_abs_index, r.allowed_at_max_abs) == (1.0, (1,), 0.0)
    assert r.max_rel is None and r.max_ulp is None
    assert [s["index"] for s in r.samples] == [(1,), (2,)]
    assert compare_tensor("tokens", "output", tensor([3, 7], "int64"), tensor([3, 7], "int64"), TOL).passed


def test_non_finite_mismatches_are_counted_apart_with_the_first_index():
    r = compare([0.5, 1.0, 2.0, 3.0], [0.5, math.nan, 2.0, math.inf])
    assert (r.nonfinite, r.nonfinite_index, r.mismatched) == (2, (1,), 2)
    assert r.max_abs == math.inf  # NaN is left out of the figures, an infinity is not
