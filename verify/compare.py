"""The comparison rule and the figures reported for every compared tensor.

Rule (docs/runner.md): an element passes when |actual - expected| <= tol * (1 + |expected|), as
torch.testing.assert_close with atol = rtol = tol. An infinity matches only the same infinity; NaN
matches nothing, not even NaN. Integer tensors (token ids, labels) are compared exactly.
"expected" is the reference (or the committed golden), "actual" the port (or the fresh output).
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
        found = {k: list(v) if isinstance(v, tuple) else v for k, v in vars(self).items()}
        found.update(nan=dict(self.nan), inf=dict(self.inf),
                     samples=[dict(s, index=list(s["index"])) for s in self.samples])
        return found


def ordered(values):
    """float64 bit patterns as int64 in IEEE 754's totalOrder: adjacent doubles one apart, -0.0 (-1)
    just below +0.0 (0); meaningless for NaN."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.int64)
    return np.where(bits < 0, -(bits & _SIGN) - 1, bits)


def ulp_distance(a, b):
    """How many doubles apart a and b are (uint64, elementwise): 0 only for the same bits, so -0.0
    and +0.0 are 1 apart (within the tolerance, never bit-identical)."""
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
    for what, e, a in (("dtype", expected.dtype, actual.dtype), ("shape", expected.shape, actual.shape)):
        if e != a:
            result.mismatched = result.total
            result.message = f"{what} differs: {exp_label} {e}, {act_label} {a}"
            return result

    e, a = np.asarray(expected.values, dtype=np.float64), np.asarray(actual.values, dtype=np.float64)
    integers = expected.dtype == "int64"
    if not plain() and same_bits(e, a) and np.isfinite(e).all():  # an accelerator: about 0.3 s of CPU
        return _identical(result, e, integers, tol, sides)
    ok = (a == e) if integers else close(a, e, tol)
    result.mismatched = int(ok.size - np.count_nonzero(ok))
    result.passed = result.mismatched == 0
    result.nan = {exp_label: int(np.isnan(e).sum()), act_label: int(np.isnan(a).sum())}
    result.inf = {exp_label: int(np.isinf(e).sum()), act_label: int(np.isinf(a).sum())}
    _fill_figures(result, e, a, tol, integers)
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
    """Whether the float64 arrays e and a hold the same bit patterns (-0.0 is not 0.0)."""
    e, a = np.ascontiguousarray(e, dtype=np.float64), np.ascontiguousarray(a, dtype=np.float64)
    return e.shape == a.shape and e.tobytes() == a.tobytes()  # one memcmp: a tenth of an elementwise ==


def _identical(result, e, integers, tol, sides):
    """The figures of two bit-identical tensors of finite values, as _fill_figures would find them:
    every difference 0, so the greatest is the first element's."""
    result.passed = True
    result.nan, result.inf = dict.fromkeys(sides, 0), dict.fromkeys(sides, 0)
    if e.size:
        result.max_abs, result.max_abs_index = 0.0, (0,) * e.ndim
        result.allowed_at_max_abs = 0.0 if integers else float(tol * (1.0 + abs(e.flat[0])))
        if not integers:
            result.max_rel, result.max_rel_index, result.max_ulp = 0.0, (0,) * e.ndim, 0
    return result


def _fill_figures(result, e, a, tol, integers):
    """Greatest absolute / relative / ULP differences where neither side is NaN (an equal pair,
    infinities included, differs by 0); integers: the absolute one alone, nothing allowed."""
    comparable = ~(np.isnan(e) | np.isnan(a))
    if not comparable.any():
        return
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        equal = a == e
        abs_diff = np.where(comparable, np.where(equal, 0.0, np.abs(a - e)), -1.0)
        rel_diff = np.where(equal, 0.0, abs_diff / np.abs(e))
    i = int(np.argmax(abs_diff))
    result.max_abs, result.max_abs_index = float(abs_diff.flat[i]), _unravel(i, e.shape)
    result.allowed_at_max_abs = 0.0 if integers else float(tol * (1.0 + abs(e.flat[i])))
    if integers:
        return
    rel_diff = np.where(comparable, np.where(np.isnan(rel_diff), np.inf, rel_diff), -1.0)  # inf / inf: infinite
    j = int(np.argmax(rel_diff))
    result.max_rel, result.max_rel_index = float(rel_diff.flat[j]), _unravel(j, e.shape)
    result.max_ulp = int(ulp_distance(a[comparable], e[comparable]).max())


def compare_named(role, expected, actual, tol, sides=("reference", "port")):
    """Compare two {name: Tensor} maps; tensors present on one side only fail."""
    names = sorted(set(expected) | set(actual))
    return [compare_tensor(n, role, expected.get(n), actual.get(n), tol, sides) for n in names]


def bits_differ(expected, actual):
    """The sorted names of the tensors of two {name: Tensor} maps that are not the same bit for bit
    (on one side only, another dtype or shape, any element's bits)."""
    def same(e, a):
        return not (e is None or a is None or e.dtype != a.dtype or e.shape != a.shape) and same_bits(e.values, a.values)

    return [n for n in sorted(set(expected) | set(actual)) if not same(expected.get(n), actual.get(n))]
