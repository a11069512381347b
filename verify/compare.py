"""The comparison rule and the figures reported for every compared tensor.

Rule (docs/runner.md): an element passes when |actual - expected| <= tol * (1 + |expected|), that
is torch.testing.assert_close with atol = rtol = tol. Non-finite values are never "close" by
arithmetic: an infinity matches only the same infinity, and NaN matches nothing, not even NaN (a
NaN in both engines is reported as such and fails); the mismatches that involve a non-finite value
are counted apart and come first in every headline. Integer tensors (token ids, labels, counts)
are compared exactly: how many differ and where, never a ULP or relative figure.

"expected" is the reference engine (or the committed golden), "actual" the port (or the fresh
output); the side labels say which, so messages can name the side that differs.
"""

from dataclasses import dataclass, field

import numpy as np

from .plain import plain

DEFAULT_TOL = 1e-6
SAMPLES = 5  # expected/actual pairs shown for a failing tensor

_SIGN = np.int64(0x7FFF_FFFF_FFFF_FFFF)


@dataclass
class Tensor:
    """A decoded golden tensor: dtype as written ("float64" | "int64"), values as float64."""

    dtype: str
    values: np.ndarray  # float64, already reshaped to the tensor's shape

    @property
    def shape(self):
        return tuple(self.values.shape)


@dataclass
class TensorResult:
    """What one tensor's comparison found; to_dict() is its entry in the JSON report."""

    name: str
    role: str  # "input" | "output"
    sides: tuple  # (expected label, actual label), e.g. ("reference", "port")
    dtype: str = None
    shape: tuple = None
    passed: bool = False
    mismatched: int = 0
    total: int = 0
    max_abs: float = None
    max_abs_index: tuple = None
    allowed_at_max_abs: float = None
    max_rel: float = None
    max_rel_index: tuple = None
    max_ulp: int = None
    nonfinite: int = 0  # mismatched elements where a side is NaN or infinite
    nonfinite_index: tuple = None  # the first of them
    nan: dict = field(default_factory=dict)
    inf: dict = field(default_factory=dict)
    samples: list = field(default_factory=list)  # [{"index", "expected", "actual"}]
    message: str = None  # set when the tensors cannot be compared element by element

    def to_dict(self):
        return {
            "name": self.name,
            "role": self.role,
            "sides": list(self.sides),
            "dtype": self.dtype,
            "shape": None if self.shape is None else list(self.shape),
            "passed": self.passed,
            "mismatched": self.mismatched,
            "total": self.total,
            "max_abs": self.max_abs,
            "max_abs_index": _list(self.max_abs_index),
            "allowed_at_max_abs": self.allowed_at_max_abs,
            "max_rel": self.max_rel,
            "max_rel_index": _list(self.max_rel_index),
            "max_ulp": self.max_ulp,
            "nonfinite": self.nonfinite,
            "nonfinite_index": _list(self.nonfinite_index),
            "nan": dict(self.nan),
            "inf": dict(self.inf),
            "samples": [dict(s, index=list(s["index"])) for s in self.samples],
            "message": self.message,
        }


def _list(index):
    return None if index is None else list(index)


def ordered(values):
    """float64 bit patterns mapped to integers in IEEE 754's totalOrder: as the floats sort, with
    -0.0 (-1) just below +0.0 (0), adjacent doubles one apart (int64; only meaningful for non-NaN
    values)."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.int64)
    return np.where(bits < 0, -(bits & _SIGN) - 1, bits)


def ulp_distance(a, b):
    """How many doubles apart a and b are in totalOrder (uint64, elementwise): 0 only for the same
    bit pattern. -0.0 and +0.0 are one apart: equal as numbers, so never beyond the tolerance, but
    not the same bits, so a port writing -0.0 for the reference's +0.0 is within the tolerance
    (max 1 ULP), never bit-identical (a figure of 0 would say bit-identical: verify/verdict.py)."""
    oa, ob = ordered(a), ordered(b)
    # |oa - ob| can exceed int64 when the signs differ: add the magnitudes in uint64 instead.
    ua, ub = np.abs(oa).astype(np.uint64), np.abs(ob).astype(np.uint64)
    same_sign = (oa >= 0) == (ob >= 0)
    return np.where(same_sign, np.maximum(ua, ub) - np.minimum(ua, ub), ua + ub)


def close(actual, expected, tol):
    """Elementwise verdict of the rule; NaN is never close, an infinity only to itself."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    finite = np.isfinite(actual) & np.isfinite(expected)
    ok = np.zeros(actual.shape, dtype=bool)
    with np.errstate(over="ignore", invalid="ignore"):
        ok[finite] = np.abs(actual[finite] - expected[finite]) <= tol * (1.0 + np.abs(expected[finite]))
    ok |= np.isinf(actual) & np.isinf(expected) & (actual == expected)
    return ok


def _unravel(flat_index, shape):
    return tuple(int(i) for i in np.unravel_index(int(flat_index), shape)) if shape else ()


def compare_tensor(name, role, expected, actual, tol, sides=("reference", "port")):
    """Compare two decoded tensors (either may be None: absent on that side)."""
    exp_label, act_label = sides
    result = TensorResult(name=name, role=role, sides=sides)
    if expected is None or actual is None:
        present, missing = (act_label, exp_label) if expected is None else (exp_label, act_label)
        tensor = actual if expected is None else expected
        result.dtype, result.shape = tensor.dtype, tensor.shape
        result.total = result.mismatched = int(tensor.values.size)
        result.message = f"{role} '{name}' is written by {present} only, not by {missing}"
        return result
    result.dtype, result.shape = expected.dtype, expected.shape
    result.total = int(expected.values.size)
    if expected.dtype != actual.dtype:
        result.mismatched = result.total
        result.message = f"dtype differs: {exp_label} {expected.dtype}, {act_label} {actual.dtype}"
        return result
    if expected.shape != actual.shape:
        result.mismatched = result.total
        result.message = f"shape differs: {exp_label} {expected.shape}, {act_label} {actual.shape}"
        return result

    e, a = np.asarray(expected.values, dtype=np.float64), np.asarray(actual.values, dtype=np.float64)
    integers = expected.dtype == "int64"
    if not plain() and _same_finite_bits(e, a):  # an accelerator: about 0.3 s of CPU in a full run
        return _identical(result, e, integers, tol, exp_label, act_label)
    ok = (a == e) if integers else close(a, e, tol)
    result.mismatched = int(ok.size - np.count_nonzero(ok))
    result.passed = result.mismatched == 0
    result.nan = {exp_label: int(np.isnan(e).sum()), act_label: int(np.isnan(a).sum())}
    result.inf = {exp_label: int(np.isinf(e).sum()), act_label: int(np.isinf(a).sum())}
    if integers:
        _fill_integer_figures(result, e, a)
    else:
        _fill_figures(result, e, a, tol)
        nonfinite = np.flatnonzero(~ok & ~(np.isfinite(e) & np.isfinite(a)))
        result.nonfinite = int(nonfinite.size)
        if nonfinite.size:
            result.nonfinite_index = _unravel(nonfinite[0], e.shape)
    both_nan = np.isnan(e) & np.isnan(a)
    if both_nan.any():
        first = _unravel(np.flatnonzero(both_nan)[0], e.shape)
        result.message = f"NaN in both engines at {int(both_nan.sum())} element(s), first at index {first}"
    if not result.passed:
        for flat in np.flatnonzero(~ok)[:SAMPLES]:
            index = _unravel(flat, e.shape)
            result.samples.append({"index": index, "expected": float(e.flat[flat]), "actual": float(a.flat[flat])})
    return result


def same_bits(e, a):
    """Whether the float64 arrays e and a (same shape) hold the same bit patterns: -0.0 is not
    0.0, a NaN matches only its own payload."""
    e, a = np.ascontiguousarray(e, dtype=np.float64), np.ascontiguousarray(a, dtype=np.float64)
    return e.shape == a.shape and e.tobytes() == a.tobytes()  # one memcmp: a tenth of an elementwise == on small tensors


def _same_finite_bits(e, a):
    """Whether e and a (same shape) hold the same bit patterns, every one a finite double: the
    common case, whose figures need no elementwise arithmetic (_identical)."""
    return same_bits(e, a) and bool(np.isfinite(e).all())


def _identical(result, e, integers, tol, exp_label, act_label):
    """The figures of two bit-identical tensors of finite values, as the general path computes
    them: nothing mismatched, no NaN or infinity, every difference 0 (so the greatest is the first
    element's), 0 ULP; nothing for an empty tensor."""
    result.passed = True
    result.nan = {exp_label: 0, act_label: 0}
    result.inf = {exp_label: 0, act_label: 0}
    if e.size == 0:
        return result
    first = (0,) * e.ndim
    if integers:
        result.max_abs, result.max_abs_index, result.allowed_at_max_abs = 0.0, first, 0.0
        return result
    result.max_abs, result.max_abs_index = 0.0, first
    result.allowed_at_max_abs = float(tol * (1.0 + abs(e.flat[0])))
    result.max_rel, result.max_rel_index = 0.0, first
    result.max_ulp = 0
    return result


def _fill_integer_figures(result, e, a):
    """Integers: the greatest |difference| (exact: the values are below 2**53) at its index, nothing
    allowed; no relative or ULP figure (they mean nothing for a token id)."""
    if e.size == 0:
        return
    diff = np.abs(a - e)
    i = int(np.argmax(diff))
    result.max_abs, result.max_abs_index, result.allowed_at_max_abs = float(diff.flat[i]), _unravel(i, e.shape), 0.0


def _fill_figures(result, e, a, tol):
    """Greatest absolute / relative / ULP differences over the elements where neither side is
    NaN (NaNs are counted apart). An equal pair, infinities included, differs by 0."""
    comparable = ~(np.isnan(e) | np.isnan(a))
    if not comparable.any():
        return
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        equal = a == e
        abs_diff = np.where(equal, 0.0, np.abs(a - e))
        rel_diff = np.where(equal, 0.0, abs_diff / np.abs(e))
    rel_diff = np.where(np.isnan(rel_diff), np.inf, rel_diff)  # inf / inf: against an infinity
    abs_diff = np.where(comparable, abs_diff, -1.0)
    rel_diff = np.where(comparable, rel_diff, -1.0)
    i = int(np.argmax(abs_diff))
    result.max_abs = float(abs_diff.flat[i])
    result.max_abs_index = _unravel(i, e.shape)
    result.allowed_at_max_abs = float(tol * (1.0 + abs(e.flat[i])))
    j = int(np.argmax(rel_diff))
    result.max_rel = float(rel_diff.flat[j])
    result.max_rel_index = _unravel(j, e.shape)
    ulps = ulp_distance(a[comparable], e[comparable])
    result.max_ulp = int(ulps.max())


def compare_named(role, expected, actual, tol, sides=("reference", "port")):
    """Compare two {name: Tensor} maps; tensors present on one side only fail."""
    names = sorted(set(expected) | set(actual))
    return [compare_tensor(n, role, expected.get(n), actual.get(n), tol, sides) for n in names]


def bits_differ(expected, actual):
    """The names of the tensors of two {name: Tensor} maps that are not the same bit for bit (on
    one side only, another dtype or shape, or any element's bit pattern: -0.0 is not 0.0, a NaN
    only its own payload), sorted; [] when the maps are identical."""
    def same(e, a):
        return not (e is None or a is None or e.dtype != a.dtype or e.shape != a.shape) and same_bits(e.values, a.values)

    return [n for n in sorted(set(expected) | set(actual)) if not same(expected.get(n), actual.get(n))]
