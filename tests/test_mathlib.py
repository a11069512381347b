"""mathlib: accuracy against Python's math module and a long-double reference, special values, and
bit identity between the engines (SHA-256 of each function's outputs over ~1e6 generator-drawn
inputs, computed by reference/core/mathlib.py and by port_ts/src/core/mathlib.ts).

Measured (this file's grids and draws, 2M-point random sweeps during development), as the error
of our double against the x87 long-double value (64-bit mantissa) in ulps of the result:
  exp 0.87, expm1 0.84, log 0.82, sin 0.78, cos 0.78, tanh 1.02, pow_ln(ln 10000) 0.87.
Against Python's math module (glibc, itself within about half an ulp) the outputs differ by at
most 1 ulp (tanh: 2), in integer steps of the result's encoding.
"""

import hashlib
import json
import math

import numpy as np
import pytest

from reference.core import mathlib as M
from reference.core.rng import Generator
from toolkit import run_port

LD = np.longdouble
LN10000 = (9.210340371976184, -8.683024893528997e-16)  # ln 10000 as a double pair (positional encoding)

# Bound on |ours - exact| in ulps of the result, per function (the measured worst beside it).
ACCURACY = {"exp": 1.0, "expm1": 1.0, "log": 1.0, "sin": 1.0, "cos": 1.0, "tanh": 1.1, "pow": 1.0}
# Bound on the integer ulp distance to Python's math module (glibc).
VS_MATH = {"exp": 1, "expm1": 1, "log": 1, "sin": 1, "cos": 1, "tanh": 2, "pow": 1}


def pow10000(y):
    return M.pow_ln(LN10000, y)


OURS = {"exp": M.exp, "expm1": M.expm1, "log": M.log, "sin": M.sin, "cos": M.cos, "tanh": M.tanh, "pow": pow10000}
LONG = {"exp": np.exp, "expm1": np.expm1, "log": np.log, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
        "pow": lambda y: np.power(LD(10000), y)}
MATH = {"exp": math.exp, "expm1": math.expm1, "log": math.log, "sin": math.sin, "cos": math.cos, "tanh": math.tanh,
        "pow": lambda y: math.pow(10000.0, y)}


def inputs(name):
    """Dense grids and random draws over the function's whole range (finite, nonzero results)."""
    rs = np.random.default_rng(1234)
    g = lambda lo, hi, n: np.linspace(lo, hi, n)  # noqa: E731
    u = lambda lo, hi, n: rs.uniform(lo, hi, n)  # noqa: E731
    if name == "exp":
        parts = [g(-745.13, 709.78, 200001), u(-5, 5, 200000), u(-1e-6, 1e-6, 20000),
                 u(-745.13, -708.4, 50000), u(700, 709.78, 20000), g(-40, 40, 80001)]
    elif name == "expm1":
        parts = [g(-40, 709.78, 200001), u(-3, 3, 200000), u(-1e-3, 1e-3, 50000),
                 u(-1e-15, 1e-15, 10000), g(-0.4, 0.4, 80001)]
    elif name == "log":
        m, k = rs.uniform(1, 2, 200000), rs.integers(-1074, 1024, 200000)
        parts = [np.ldexp(m, k), u(0.5, 2, 200000), 1 + u(-1e-6, 1e-6, 50000), g(1e-3, 1e3, 100001),
                 u(0, 2.0 ** -1022, 20000), u(1, 1e4, 100000)]
    elif name in ("sin", "cos"):
        n = rs.integers(1, 600000, 50000)
        parts = [g(-10, 10, 200001), u(-1e6, 1e6, 200000), u(-1e-6, 1e-6, 20000), g(0, 1000, 100001),
                 n * (np.pi / 2), n * (np.pi / 2) + np.spacing(n * (np.pi / 2)), (n * np.pi / 4)]
    elif name == "tanh":
        parts = [g(-25, 25, 200001), u(-1, 1, 200000), u(-1e-4, 1e-4, 50000), u(0.6, 0.65, 50000),
                 g(-3, 3, 100001)]
    else:  # pow: 10000^y for y = (2j)/d in [0, 1) and around it
        parts = [g(0, 1, 100001), u(0, 1, 200000), u(-30, 30, 100000)]
    x = np.concatenate(parts)
    return x[x != 0]


def ulp_of(r64):
    """The ulp of each double result (the spacing of its binade; 2^-1074 for subnormals)."""
    return np.spacing(np.abs(r64)).astype(LD)


@pytest.mark.parametrize("name", sorted(OURS))
def test_accuracy_against_long_double(name):
    x = inputs(name)
    ours = OURS[name](x)
    exact = LONG[name](x.astype(LD))
    e64 = exact.astype(np.float64)
    keep = np.isfinite(e64) & (e64 != 0)
    err = np.abs(ours[keep].astype(LD) - exact[keep]) / ulp_of(e64[keep])
    worst = int(np.argmax(err))
    assert float(err.max()) <= ACCURACY[name], (
        f"{name}: {float(err.max()):.3f} ulp at x = {x[keep][worst]!r} (allowed {ACCURACY[name]})")


def ulp_distance(a, b):
    """|a - b| in steps of the double encoding (a, b finite, same sign)."""
    ia = a.view(np.int64).astype(object)
    ib = b.view(np.int64).astype(object)
    return np.abs(np.array(ia - ib, dtype=np.float64))


@pytest.mark.parametrize("name", sorted(OURS))
def test_against_math_module(name):
    x = inputs(name)
    ours = OURS[name](x)
    ref = np.array([MATH[name](float(v)) for v in x])
    same_sign = np.signbit(ours) == np.signbit(ref)
    assert same_sign.all(), f"{name}: sign differs at x = {x[~same_sign][0]!r}"
    d = ulp_distance(np.abs(ours), np.abs(ref))
    worst = int(np.argmax(d))
    assert d.max() <= VS_MATH[name], (
        f"{name}: {int(d.max())} ulp from math.{name} at x = {x[worst]!r}: {ours[worst]!r} vs {ref[worst]!r}")


def same(a, b):
    """Equal as doubles, NaN equal to NaN, +0 and -0 told apart."""
    a, b = np.float64(a), np.float64(b)
    return (np.isnan(a) and np.isnan(b)) or (a == b and np.signbit(a) == np.signbit(b))


def agrees(got, want):
    """Exact for 0, +-1, +-inf, NaN and subnormals; within 1 ulp for any other value."""
    want = np.float64(want)
    if not np.isfinite(want) or want == 0 or abs(want) == 1 or abs(want) < 2.0 ** -1022:
        return same(got, want)
    return abs(np.float64(got) - want) <= np.spacing(abs(want))


INF, NAN = math.inf, math.nan
SPECIAL = {
    "exp": [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, 0.0), (NAN, NAN), (1.0, math.e), (710.0, INF),
            (709.79, INF), (709.782712893384, 1.7976931348622732e308), (-746.0, 0.0), (-745.1332191019411, math.exp(-745.1332191019411)), (-1e-300, 1.0),
            (-708.3964185322641, math.exp(-708.3964185322641)), (-740.0, math.exp(-740.0))],
    "expm1": [(0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -1.0), (NAN, NAN), (1e-300, 1e-300),
              (-1e-300, -1e-300), (-50.0, -1.0), (710.0, INF), (5e-324, 5e-324)],
    "log": [(1.0, 0.0), (0.0, -INF), (-0.0, -INF), (-1.0, NAN), (INF, INF), (-INF, NAN), (NAN, NAN),
            (math.e, 1.0), (5e-324, -744.4400719213812), (1.7976931348623157e308, 709.782712893384),
            (2.0, math.log(2.0))],
    "sin": [(0.0, 0.0), (-0.0, -0.0), (INF, NAN), (-INF, NAN), (NAN, NAN), (1e-300, 1e-300),
            (-1e-10, -1e-10), (math.pi, 1.2246467991473532e-16), (1e6, math.sin(1e6)), (-1e6, math.sin(-1e6))],
    "cos": [(0.0, 1.0), (-0.0, 1.0), (INF, NAN), (-INF, NAN), (NAN, NAN), (1e-300, 1.0),
            (math.pi, -1.0), (1e6, math.cos(1e6))],
    "tanh": [(0.0, 0.0), (-0.0, -0.0), (INF, 1.0), (-INF, -1.0), (NAN, NAN), (1e-300, 1e-300),
             (-5e-324, -5e-324), (22.0, 1.0), (-30.0, -1.0), (0.625, math.tanh(0.625))],
}


@pytest.mark.parametrize("name", sorted(SPECIAL))
def test_special_values(name):
    for x, want in SPECIAL[name]:
        got = OURS[name](x)
        assert agrees(got, want), f"{name}({x!r}) = {got!r}, expected {want!r}"
        arr = OURS[name](np.array([x, x]))  # the array path agrees with the scalar path
        assert same(arr[0], got) and arr.shape == (2,)


def test_shapes_and_scalars():
    x = np.linspace(-3, 3, 24).reshape(2, 3, 4)
    for f in (M.exp, M.expm1, M.tanh, M.sin, M.cos):
        assert f(x).shape == (2, 3, 4)
        assert f(x)[1, 2, 3] == f(float(x[1, 2, 3]))
    assert M.log(np.abs(x) + 1).shape == (2, 3, 4)
    assert np.ndim(M.exp(1.0)) == 0


@pytest.mark.parametrize("f", [M.sin, M.cos])
def test_trig_range_is_enforced(f):
    assert abs(f(M.TRIG_MAX) - getattr(math, f.__name__)(M.TRIG_MAX)) <= 1e-16  # the edge is allowed
    with pytest.raises(ValueError, match=r"\|x\| <= 1e\+06 is supported"):
        f(np.array([0.5, -1.5e6]))


def test_ldexp_rounds_once_into_subnormals():
    # 1.5 * 2^-1074 is halfway between 2^-1074 and 2^-1073: ties to even gives 2^-1073.
    assert M.ldexp(1.5, -1074) == 2.0 ** -1073
    assert M.ldexp(1.25, -1074) == 5e-324
    assert M.ldexp(0.75, 1024) == 0.75 * 2.0 ** 1023 * 2.0
    with np.errstate(over="ignore"):
        assert M.ldexp(1.0, 1024) == INF


def test_spec_log_is_the_generators():
    from reference.core import rng

    assert rng.spec_log is M.spec_log


# ---- bit identity across engines -------------------------------------------------------------

# (function, seed, draws): each draw is (kind, count, a, b) from one Generator, in order:
# uniform on [a, b), normal(a, b), or "scaled": ldexp(uniform [1, 2), integers [a, b)).
HASH_SETS = [
    ("exp", 901, [("uniform", 300000, -745.2, 709.9), ("uniform", 300000, -20.0, 5.0),
                  ("uniform", 100000, -760.0, -700.0), ("normal", 300000, 0.0, 3.0)]),
    ("expm1", 902, [("uniform", 300000, -45.0, 710.0), ("uniform", 300000, -1.0, 1.0),
                    ("normal", 300000, 0.0, 1e-6), ("uniform", 100000, 30.0, 60.0)]),
    ("tanh", 903, [("uniform", 300000, -25.0, 25.0), ("uniform", 300000, -1.0, 1.0),
                   ("normal", 300000, 0.0, 3.0), ("normal", 100000, 0.0, 1e-5)]),
    ("log", 904, [("scaled", 300000, -1074, 1024), ("uniform", 300000, 0.0, 3.0),
                  ("uniform", 300000, 1.0, 100.0), ("uniform", 100000, 0.999, 1.001)]),
    ("sin", 905, [("uniform", 300000, -1e6, 1e6), ("uniform", 300000, -10.0, 10.0),
                  ("uniform", 300000, 0.0, 1000.0), ("normal", 100000, 0.0, 1e-3)]),
    ("cos", 906, [("uniform", 300000, -1e6, 1e6), ("uniform", 300000, -10.0, 10.0),
                  ("uniform", 300000, 0.0, 1000.0), ("normal", 100000, 0.0, 1e-3)]),
    ("pow", 907, [("uniform", 500000, 0.0, 1.0), ("uniform", 500000, -76.0, 76.0)]),
    ("ldexp", 908, [("scaled", 1000000, -1200, 1100)]),
]
# The piece edges of mathlib (port_ts/test/core/mathlib.test.ts checks the port's values there), each with
# its neighbours one ulp either side, and arguments where a branch's two roundings part ways; both
# signs of each. Run through every function above, so each function also meets the others' edges.
EDGE_INPUTS = [s * v for v in [
    709.7827128933839, 709.7827128933841, -745.1332191019412, -745.133219101941,  # exp: EXP_OVER, EXP_UNDER
    5.551115123125782e-17, 2.0 ** -54, 5.551115123125784e-17, -40.00000000000001, -40.0, -39.99999999999999,  # expm1
    -1.039720770839918, -1.0397207708399179, -1.0397207708399177, -0.3465735902799727, -0.34657359027997264,
    -0.3465735902799726, 0.3465735902799726, 0.34657359027997264, 0.3465735902799727, 1.0397207708399177,
    1.0397207708399179, 1.039720770839918, 13.516370020918933, 13.516370020918934, 13.516370020918936,
    39.1628157016369, 39.16281570163691, 39.162815701636916,  # where k steps (the doubles nearest (k - 1/2) ln2)
    0.44314718055994523, 0.4431471805599453, 0.44314718055994534,  # k = 1 and r = -1/4 exactly
    0.3531472245458497, 0.8031820692274713, -37.18580470467418, 14.086087347181515, 38.704387134788156,
    39.419242534095034, -1.4732737414475974,  # expm1's branches: the other rounding differs here
    2.775557561562891e-17, 2.0 ** -55, 2.775557561562892e-17, 0.6249999999999999, 0.6250000000000001,
    21.999999999999996, 22.000000000000004,  # tanh: TANH_TINY, TANH_SERIES, TANH_ONE
    2.225073858507201e-308, 2.225073858507202e-308, 0.7071067811865475, 0.7071067811865476, 0.7071067811865477,
    3037000499.9760494, 3037000499.97605, 3037000499.9760504, 1.4142135623730951,  # log: 2^-1022, m = sqrt(1/2)
    7.450580596923827e-09, 2.0 ** -27, 7.45058059692383e-09, 999999.9999999999, 1000000.0000000001,  # TRIG_TINY, TRIG_MAX
    321307.9594422229, 642615.9188844458, 871790.3905748408, 413441.44719405076, 826882.8943881015,
    597708.4226977065, 687523.4150711851, 505574.93494587863,  # the doubles closest to n pi/2 below 1e6
    27988.08901046197, 35896.24264696789, 260.7521902479524, 7059.158692616265, 21056.88233947754,
    604575.0104822218, 50276.478031724255, 28996.900192633744, 833825.8141525368,  # pi/2 in one, two, three parts
] for s in (1.0, -1.0)]
SPECIAL_INPUTS = [0.0, -0.0, "inf", "-inf", "nan", 5e-324, -5e-324, 1e-300, 2.2250738585072014e-308,
                  709.782712893384, -745.1332191019411, 22.0, 0.625, 1e6, -1e6, 1.5707963267948966] + EDGE_INPUTS


def _decode(v):
    return float(v) if isinstance(v, str) else v


def draw_inputs(seed, draws):
    g = Generator(seed)
    parts, scales = [], []
    for kind, n, a, b in draws:
        if kind == "uniform":
            parts.append(g.uniform(n, a, b))
        elif kind == "normal":
            parts.append(g.normal(n, a, b))
        else:
            m = g.uniform(n, 1.0, 2.0)
            k = g.integers(n, a, b)
            parts.append(m)
            scales.append((len(parts) - 1, k))
    return parts, scales


def reference_hash(name, seed, draws):
    parts, scales = draw_inputs(seed, draws)
    if name == "ldexp":
        (i, k), = scales
        out = M.ldexp(parts[i], k)
    else:
        for i, k in scales:
            parts[i] = M.ldexp(parts[i], k)
        x = np.concatenate(parts + [np.array([_decode(v) for v in SPECIAL_INPUTS])])
        if name in ("sin", "cos"):
            x = x[~(np.abs(x) > M.TRIG_MAX)]
        with np.errstate(over="ignore"):  # a masked-out piece may overflow (tanh's series at |x| = 3e9); unused
            out = OURS[name](x)
    out = np.where(np.isnan(out), np.nan, out)  # one NaN encoding
    return hashlib.sha256(np.ascontiguousarray(out, dtype="<f8").tobytes()).hexdigest(), len(out)


PORT_SCRIPT = r"""
import { createHash } from "node:crypto";
import { pathToFileURL } from "node:url";
const root = process.argv[1];
const M = await import(pathToFileURL(root + "/port_ts/src/core/mathlib.ts").href);
const { Generator } = await import(pathToFileURL(root + "/port_ts/src/core/rng.ts").href);
const { sets, special, ln10000 } = JSON.parse(process.argv[2]);
const dec = (v) => (typeof v === "string" ? Number(v.replace("inf", "Infinity")) : v);
const fns = { exp: M.exp, expm1: M.expm1, tanh: M.tanh, log: M.log, sin: M.sin, cos: M.cos,
  pow: (y) => M.powLn(ln10000, y) };
const result = {};
for (const [name, seed, draws] of sets) {
  const g = new Generator(seed);
  const xs = [];
  for (const [kind, n, a, b] of draws) {
    if (kind === "uniform") for (const v of g.uniform([n], a, b).data) xs.push(v);
    else if (kind === "normal") for (const v of g.normal([n], a, b).data) xs.push(v);
    else {
      const m = g.uniform([n], 1, 2).data, k = g.integers([n], a, b).data;
      for (let i = 0; i < n; i++) xs.push(M.ldexp(m[i], k[i]));
    }
  }
  let out;
  if (name === "ldexp") out = Float64Array.from(xs);
  else {
    for (const v of special) xs.push(dec(v));
    const keep = (name === "sin" || name === "cos") ? xs.filter((x) => !(Math.abs(x) > M.TRIG_MAX)) : xs;
    out = Float64Array.from(keep, fns[name]);
  }
  const bytes = new DataView(new ArrayBuffer(8 * out.length));
  for (let i = 0; i < out.length; i++) bytes.setFloat64(8 * i, Number.isNaN(out[i]) ? NaN : out[i], true);
  result[name] = [createHash("sha256").update(new Uint8Array(bytes.buffer)).digest("hex"), out.length];
}
console.log(JSON.stringify(result));
"""


@pytest.fixture(scope="module")
def port_hashes(node, repo_root):
    spec = json.dumps({"sets": HASH_SETS, "special": SPECIAL_INPUTS, "ln10000": LN10000})
    return run_port(node, repo_root, PORT_SCRIPT, repo_root, spec)


@pytest.mark.parametrize("name,seed,draws", HASH_SETS, ids=[s[0] for s in HASH_SETS])
def test_engines_compute_the_same_bits(port_hashes, name, seed, draws):
    digest, n = reference_hash(name, seed, draws)
    assert port_hashes[name] == [digest, n], (
        f"{name}: the engines' outputs differ over {n} inputs (SHA-256 reference {digest[:16]}..., "
        f"port {port_hashes[name][0][:16]}...); find the first differing input with a smaller draw")


# ldexp's scaling steps (x, k): k beyond the exponent range applied in two or three exact steps,
# the last rounding once (subnormal results, ties to even, overflow, 0 and -0).
MAX = 1.7976931348623157e308
LDEXP_EDGES = [(1.0, 1023), (5e-324, 1074), (5e-324, 2046), (5e-324, 2047), (5e-324, 2097), (3 * 5e-324, 2096),
               (5e-324, 2098), (5e-324, 3069), (5e-324, 3070), (-5e-324, 5000), (0.0, 5000), (-0.0, 5000),
               (2.0 ** 1023, -1022), (1.0, -1022), (1.0, -1074), (1.0, -1075), (MAX, -1991), (MAX, -1992),
               (MAX, -2000), (-MAX, -2000), (MAX, -2097), (MAX, -2098), (MAX, -2099), (1.5 * 2.0 ** 1000, -2074),
               (1.25 * 2.0 ** 1000, -2074), (MAX, -5000), (-MAX, -5000), (1.0, -5000)]

LDEXP_SCRIPT = r"""
import { pathToFileURL } from "node:url";
const M = await import(pathToFileURL(process.argv[1] + "/port_ts/src/core/mathlib.ts").href);
const bits = new DataView(new ArrayBuffer(8));
console.log(JSON.stringify(JSON.parse(process.argv[2]).map(([x, k]) => {
  bits.setFloat64(0, M.ldexp(x, k));
  return bits.getBigUint64(0).toString(16);
})));
"""


def test_ldexp_edges_match_across_engines(node, repo_root):
    port = run_port(node, repo_root, LDEXP_SCRIPT, repo_root, json.dumps(LDEXP_EDGES), timeout=60)
    ref = [format(int(np.float64(M.ldexp(x, k)).view(np.uint64)), "x") for x, k in LDEXP_EDGES]
    differ = [(x, k, r, p) for (x, k), r, p in zip(LDEXP_EDGES, ref, port) if r != p]
    assert not differ, f"ldexp(x, k): reference and port bits differ at (x, k, reference, port) {differ}"
    assert ref[3] == format(int(np.float64(2.0 ** 973).view(np.uint64)), "x")  # 2^-1074 * 2^2047, exact
    assert M.ldexp(MAX, -2098) == 5e-324 and M.ldexp(1.5 * 2.0 ** 1000, -2074) == 2.0 ** -1073
