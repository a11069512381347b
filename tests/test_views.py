"""verify/views.py's vectorised rounding (_rounded) draws every value as the scalar _round does,
float(f"{x:.4g}") (a string for a non-finite value), to the bit: on random values over the whole
float64 range and on the values where a shortcut would go wrong (ties, powers of ten, the ends of a
digit range, subnormals, signed zeros)."""

import json
import math
import struct

import numpy as np
import pytest

from verify import views


def _edges():
    values = [0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, -5e-324, 2.2250738585072014e-308,
              1.7976931348623157e308, -1.7976931348623157e308, 1.0, -1.0, 0.5, 1.5, 2.5]
    for e in range(-30, 31):
        p = 10.0 ** e
        for m in (1.0, 9.9995, 9.9985, 9.999, 1.2345, 1.2335, 1.0005, 1.0015, 9.9994999, 9.99950001, 5.0, 2.5):
            v = m * p
            values += [v, -v, np.nextafter(v, math.inf), np.nextafter(v, -math.inf)]
    for n in (10005, 12345, 12335, 99995, 99985, 1005, 1235, 9995, 1000, 9999, 10000, 100, 999):
        for e in range(-25, 26):  # n * 10**e written in decimal: the exact ties of the decimal rounding
            v = float(f"{n}e{e}")
            values += [v, np.nextafter(v, math.inf), np.nextafter(v, -math.inf)]
    return np.array(values, dtype=np.float64)


def _random(rng, n):
    mantissas = rng.normal(size=n)
    exponents = rng.integers(-40, 40, size=n)
    bits = rng.integers(0, 2 ** 63, size=n // 4, dtype=np.int64).view(np.float64)  # any double at all
    return np.concatenate([mantissas * 10.0 ** exponents, rng.random(n), bits])


def _same(found, expected):
    """Equal to the bit (a float's sign included) and of the same type."""
    assert len(found) == len(expected)
    for i, (f, e) in enumerate(zip(found, expected)):
        assert type(f) is type(e), (i, f, e)
        if type(e) is float:
            assert struct.pack("<d", f) == struct.pack("<d", e), (i, f, e)
        else:
            assert f == e, (i, f, e)


@pytest.mark.parametrize("digits", [3, 4])
def test_rounded_is_round_to_the_bit_on_edge_and_random_values(digits):
    rng = np.random.default_rng(20261202 + digits)
    for values in (_edges(), _random(rng, 200_000)):
        _same(views._rounded(values, digits), [views._round(v, digits) for v in values])


def test_a_case_s_slices_are_drawn_together_as_each_alone():
    """heatmaps rounds every slice of a case in one pass (_slice_views): each slice is the one
    _slice_view draws alone, whichever slices share the pass (same doubles or not, NaN, sizes)."""
    rng = np.random.default_rng(5)
    e = rng.normal(size=(3, 7, 5)) * 10.0 ** rng.integers(-5, 5, size=(3, 7, 5))
    e[1, 2, 3], e[2, 4, 0] = math.nan, -0.0
    a = e.copy()
    a[0, 1, 1] = np.nextafter(a[0, 1, 1], 1.0)
    a[2] = e[2] * (1 + 1e-9)
    where = [((0,), (1, 1)), ((1,), (0, 0)), ((2,), (6, 4)), ((0,), (0, 0))]
    together = views._slice_views([views._crop(e, a, lead, center) for lead, center in where])
    for (lead, center), view in zip(where, together):
        alone = views._slice_view(e, a, lead, center)
        rows, cols = view["rows"], view["cols"]
        assert json.dumps(view) == json.dumps(alone)
        E = e[lead][rows[0]:rows[1], cols[0]:cols[1]]
        for row, values in zip(view["reference"], E):
            _same(row, [views._round(v) for v in values])
    assert views._slice_views([]) == []


def test_rounded_takes_the_vectorised_path_for_ordinary_values():
    """Most values of a heatmap go through NumPy, not the scalar fallback (else nothing is saved)."""
    calls = []
    original = views._round
    try:
        views._round = lambda x, digits=views.SHOWN_DIGITS: calls.append(x) or original(x, digits)
        values = np.random.default_rng(3).normal(size=1000)
        views._rounded(values)
    finally:
        views._round = original
    assert len(calls) < 10
