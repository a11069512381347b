"""Transcendental functions of our own (twin: port_ts/src/core/mathlib.ts). docs/mathlib.md.

libm (behind np.exp, np.sin, ...) and V8 (behind Math.exp, Math.sin, ...) round differently in
the last bit, and over hundreds of training steps those bits grow. Every function here uses only
exactly rounded operations (+, -, *, /, floor, comparisons, exact frexp, exact scaling by powers
of two), written as the same expressions in the same order in both engines, so the two engines
compute the same bits. The schemes are Sun's fdlibm (1993) with its published coefficients,
rewritten: elementwise over arrays here (branches become masks), one double at a time in the
port. Accuracy (tests/test_mathlib.py measures it): within 1 ulp.

  exp(x)        k = floor(x / ln2 + 1/2); r = x - k ln2 in two parts (Cody-Waite: ln2_hi has 32
                significant bits, so k * ln2_hi is exact); exp(r) = 1 + r + r c / (2 - c) with
                c = r - r^2 P(r^2) (degree-5 P); then * 2^k, rounded once (ldexp). x > 709.78...
                gives +inf, x < -745.13... gives 0, NaN gives NaN.
  expm1(x)      exp(x) - 1 without cancellation near 0 (fdlibm's s_expm1.c scheme, Q1..Q5).
  tanh(x)       |x| < 0.625: the Taylor series x + x^3 T(x^2) to x^45; |x| < 22: 1 - 2 / (t + 2),
                t = expm1(2|x|), with t + 2 and the division's remainder carried exactly;
                else 1. Computed on |x|, the sign applied last.
  log(x)        x = m 2^e (exact frexp), m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact),
                s = f / (2 + f), R = z P(z) with z = s^2 (Lg1..Lg7), then
                e ln2_hi - ((f^2/2 - (s (f^2/2 + R) + e ln2_lo)) - f). x < 0: NaN, 0: -inf.
  spec_log(s)   the generator's own ln (docs/generator.md; kept bit for bit, a few ulp).
  sin, cos      |x| <= TRIG_MAX = 1e6: n = floor(|x| 2/pi + 1/2); r = |x| - n pi/2 with pi/2
                in 33-bit parts (Cody-Waite, a second and third part only after cancellation, as
                fdlibm's e_rem_pio2.c), as a pair y0 + y1, |y0| <= ~pi/4;
                kernels on [-pi/4, pi/4] (S1..S6, C1..C6) chosen by n mod 4; sin is odd, cos even.
                |x| > TRIG_MAX raises ValueError (say what to do); +-inf and NaN give NaN.
  pow_ln(c, y)  base^y for a base given by its natural log as a pair c = (c_hi, c_lo):
                exp of y (c_hi + c_lo), with y c_hi formed exactly (Dekker's product) and the
                low part folded into exp's reduction. The positional encoding's 10000^y.
  ldexp(x, k)   x * 2^k, exact unless the result is subnormal (then rounded once).
"""

import numpy as np

LN2_HI = 6.93147180369123816490e-01  # ln 2 to 32 significant bits (low 21 bits zero)
LN2_LO = 1.90821492927058770002e-10  # ln 2 - LN2_HI
INV_LN2 = 1.44269504088896338700e00
EXP_OVER = 7.09782712893383973096e02  # largest x with exp(x) finite
EXP_UNDER = -7.45133219101941108420e02  # below: exp(x) rounds to 0
EXP_P = (1.66666666666666019037e-01, -2.77777777770155933842e-03, 6.61375632143793436117e-05,
         -1.65339022054652515390e-06, 4.13813679705723846039e-08)
EXPM1_Q = (-3.33333333333331316428e-02, 1.58730158725481460165e-03, -7.93650757867487942473e-05,
           4.00821782732936239552e-06, -2.01099218183624371326e-07)
EXPM1_TINY = 2.0 ** -54  # below: expm1(x) = x
EXPM1_MINUS_ONE = -40.0  # below: exp(x) < 2^-57, so expm1(x) rounds to -1
TANH_TINY = 2.0 ** -55  # below: tanh(x) = x
TANH_ONE = 22.0  # from here: tanh(x) rounds to +-1
TANH_SERIES = 0.625  # below: the Taylor series; truncated after x^45, relative error < 4e-19
TANH_T = (-0.3333333333333333, 0.13333333333333333, -0.05396825396825397, 0.021869488536155203,
          -0.008863235529902197, 0.003592128036572481, -0.0014558343870513183, 0.000590027440945586,
          -0.00023912911424355248, 9.691537956929451e-05, -3.927832388331683e-05,
          1.5918905069328964e-05, -6.451689215655431e-06, 2.6147711512907546e-06,
          -1.0597268320104654e-06, 4.294911078273806e-07, -1.7406618963571648e-07,
          7.054636946400968e-08, -2.859136662305254e-08, 1.1587644432798853e-08,
          -4.6962953982309016e-09, 1.903336833931276e-09)  # x^3 .. x^45, each the nearest double
LG = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
      2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
      1.479819860511658591e-01)
SQRT_HALF = 0.7071067811865476  # the double nearest sqrt(1/2)
LN2 = 0.6931471805599453  # the double nearest ln 2 (spec_log only)
ATANH_COEFS = [1.0 / (2 * k + 1) for k in range(11)]  # 1, 1/3, ..., 1/21 (spec_log only)
INV_PIO2 = 6.36619772367581382433e-01  # 2 / pi
PIO2_1 = 1.57079632673412561417e00  # first 33 bits of pi/2
PIO2_1T = 6.07710050650619224932e-11  # pi/2 - PIO2_1
PIO2_2 = 6.07710050630396597660e-11  # second 33 bits
PIO2_2T = 2.02226624879595063154e-21  # pi/2 - (PIO2_1 + PIO2_2)
PIO2_3 = 2.02226624871116645580e-21  # third 33 bits
PIO2_3T = 8.47842766036889956997e-32  # pi/2 - (PIO2_1 + PIO2_2 + PIO2_3)
TRIG_MAX = 1e6  # |x| allowed in sin and cos: n < 2^20, so n * PIO2_k is exact
TRIG_TINY = 2.0 ** -27  # below: sin(x) = x, cos(x) = 1
SIN_S = (-1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04,
         2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10)
COS_C = (4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05,
         -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11)
SPLIT = 134217729.0  # 2^27 + 1, Veltkamp's splitter


def horner(c, z):
    """c[0] + z * (c[1] + z * (... + z * c[-1])), from the innermost term out (as gelu.horner)."""
    acc = np.full_like(z, c[-1])
    for coef in reversed(c[:-1]):
        acc = acc * z + coef
    return acc


def _arr(x):
    x = np.asarray(x, dtype=np.float64)
    return np.atleast_1d(x), x.shape


def _out(out, shape):
    return out[0] if shape == () else out.reshape(shape)


def ldexp(x, k):
    """x * 2**k elementwise: exact, or rounded once when the result is subnormal (libm's ldexp);
    beyond the largest double, +-inf."""
    with np.errstate(over="ignore", under="ignore"):
        return np.ldexp(np.asarray(x, dtype=np.float64), np.asarray(k, dtype=np.int64))


def _exp_pair(hi, lo):
    """exp(hi + lo), |lo| tiny beside hi (lo = 0 for exp itself). NaN, overflow, underflow masked."""
    ok = (hi >= EXP_UNDER) & (hi <= EXP_OVER)  # False for NaN
    every = bool(ok.all())
    h, l = (hi, lo) if every else (np.where(ok, hi, 0.0), np.where(ok, lo, 0.0))
    k = np.floor(h * INV_LN2 + 0.5)
    r_hi = h - k * LN2_HI  # exact
    r_lo = k * LN2_LO - l
    r = r_hi - r_lo  # |r| <= ~ln2 / 2
    t = r * r
    c = r - t * horner(EXP_P, t)
    y = 1.0 - ((r_lo - (r * c) / (2.0 - c)) - r_hi)  # exp(r) in [~0.7, ~1.42]
    out = np.ldexp(y, k.astype(np.int64))
    if every:
        return out
    return np.where(ok, out, np.where(hi > EXP_OVER, np.inf, np.where(hi < EXP_UNDER, 0.0, hi)))


def exp(x):
    """e^x elementwise, within 1 ulp."""
    x, shape = _arr(x)
    return _out(_exp_pair(x, np.zeros_like(x)), shape)


def _split(a):
    t = SPLIT * a
    hi = t - (t - a)
    return hi, a - hi


def two_prod(a, b):
    """(p, e) with p = a * b rounded and p + e = a * b exactly (Dekker; no overflow assumed)."""
    p = a * b
    a_hi, a_lo = _split(a)
    b_hi, b_lo = _split(b)
    e = (((a_hi * b_hi - p) + a_hi * b_lo) + a_lo * b_hi) + a_lo * b_lo
    return p, e


def pow_ln(c, y):
    """base^y elementwise, the base given by ln(base) = c[0] + c[1] (a double pair):
    exp(y c[0] + (error of that product + y c[1])). Within 1 ulp for |y c[0]| < 700."""
    y, shape = _arr(y)
    with np.errstate(invalid="ignore", over="ignore"):  # y = +-inf: the product's error is NaN, unused
        p, e = two_prod(y, np.full_like(y, c[0]))
        return _out(_exp_pair(p, e + y * c[1]), shape)


def expm1(x):
    """e^x - 1 elementwise, within 1 ulp, accurate near 0."""
    x, shape = _arr(x)
    tiny = np.abs(x) < EXPM1_TINY
    minus_one = x < EXPM1_MINUS_ONE
    over = x > EXP_OVER
    ok = ~(tiny | minus_one | over | np.isnan(x))
    xs = np.where(ok, x, 1.0)
    k = np.floor(xs * INV_LN2 + 0.5)
    hi = xs - k * LN2_HI  # exact
    lo = k * LN2_LO
    r = hi - lo  # |r| <= ~ln2 / 2
    c = (hi - r) - lo  # the rounding error of r (0 when k = 0)
    hfx = 0.5 * r
    hxs = r * hfx
    r1 = 1.0 + hxs * horner(EXPM1_Q, hxs)
    t = 3.0 - r1 * hfx
    e = hxs * ((r1 - t) / (6.0 - r * t))
    at0 = r - (r * e - hxs)  # k = 0
    e = (r * (e - c) - c) - hxs
    at_m1 = 0.5 * (r - e) - 0.5  # k = -1
    at_1 = np.where(r < -0.25, -2.0 * (e - (r + 0.5)), 1.0 + 2.0 * (r - e))  # k = 1
    ki = k.astype(np.int64)
    kc = np.clip(ki, -60, 60)  # 2^-k for the middle branches (unused outside them)
    far = np.ldexp(1.0 - (e - r), ki) - 1.0  # k <= -2 or k > 56
    near = np.ldexp((1.0 - np.ldexp(1.0, -kc)) - (e - r), ki)  # 2 <= k < 20
    mid = np.ldexp((r - (e + np.ldexp(1.0, -kc))) + 1.0, ki)  # 20 <= k <= 56
    out = np.select([ki == 0, ki == -1, ki == 1, (ki <= -2) | (ki > 56), ki < 20], [at0, at_m1, at_1, far, near], mid)
    out = np.where(ok, out, np.where(tiny | np.isnan(x), x, np.where(over, np.inf, -1.0)))
    return _out(out, shape)


def tanh(x):
    """tanh elementwise, within about 1 ulp; odd (tanh(-0) = -0)."""
    x, shape = _arr(x)
    a = np.abs(x)
    z = a * a
    series = a + a * (z * horner(TANH_T, z))  # |x| < TANH_SERIES
    t = expm1(np.where((a >= TANH_SERIES) & (a < TANH_ONE), 2.0 * a, 1.0))  # >= e^1.25 - 1 > 2
    s = t + 2.0
    s_err = (t - s) + 2.0  # exact: t + 2 = s + s_err
    q = 2.0 / s
    p, p_err = two_prod(q, s)
    q = q + (((2.0 - p) - p_err) - q * s_err) / s  # 2 / (t + 2) with the division's remainder
    z = np.where(a < TANH_SERIES, series, 1.0 - q)
    z = np.where(a >= TANH_ONE, 1.0, z)
    out = np.where((a < TANH_TINY) | np.isnan(x), x, np.where(x < 0.0, -z, z))
    return _out(out, shape)


def spec_log(s):
    """The generator's ln of s > 0 (docs/generator.md), bit for bit: s = f * 2**e with
    f in [sqrt(1/2), sqrt(2)), ln f = 2 atanh(t), t = (f - 1) / (f + 1), series to t**21."""
    f, e = np.frexp(s)  # exact: f in [0.5, 1)
    low = f < SQRT_HALF
    f = np.where(low, f * 2.0, f)
    e = np.where(low, e - 1, e).astype(np.float64)
    t = (f - 1.0) / (f + 1.0)
    t2 = t * t
    p = np.full_like(t, ATANH_COEFS[10])
    for c in reversed(ATANH_COEFS[:10]):
        p = p * t2 + c
    return e * LN2 + 2.0 * t * p


def log(x):
    """Natural log elementwise, within 1 ulp. x < 0 or NaN: NaN; +-0: -inf; +inf: +inf."""
    x, shape = _arr(x)
    ok = (x > 0.0) & (x < np.inf)
    m, e = np.frexp(np.where(ok, x, 1.0))  # exact: m in [0.5, 1)
    low = m < SQRT_HALF
    m = np.where(low, m * 2.0, m)  # [sqrt(1/2), sqrt(2))
    k = np.where(low, e - 1, e).astype(np.float64)
    f = m - 1.0  # exact
    s = f / (2.0 + f)
    z = s * s
    R = z * horner(LG, z)
    hfsq = 0.5 * f * f
    out = k * LN2_HI - ((hfsq - (s * (hfsq + R) + k * LN2_LO)) - f)
    special = np.where(x == 0.0, -np.inf, np.where(x == np.inf, np.inf, np.nan))
    return _out(np.where(ok, out, special), shape)


def _check_trig(name, a):
    bad = (a > TRIG_MAX) & (a < np.inf)
    if bad.any():
        raise ValueError(f"{name}: |x| <= {TRIG_MAX:g} is supported (three-part reduction by pi/2), "
                         f"got {a[bad][0]!r}; scale the argument down first")


def _exponent(x):
    """The biased exponent field of each double (0 for 0)."""
    return ((x.view(np.uint64) >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)


def _rem_pio2(a):
    """a >= 0 finite (<= TRIG_MAX) -> (n, y0, y1): a - n pi/2 = y0 + y1 to about 2^-100 relative.
    fdlibm's medium case: one part of pi/2, then a second and a third only when the previous
    remainder lost more than 16, then 49 bits to cancellation (those subtractions are exact)."""
    n = np.floor(a * INV_PIO2 + 0.5)
    j = _exponent(a)
    r = a - n * PIO2_1  # exact
    w = n * PIO2_1T
    y0 = r - w
    t = r  # second part
    w2 = n * PIO2_2
    r2 = t - w2
    w2 = n * PIO2_2T - ((t - r2) - w2)
    y02 = r2 - w2
    t = r2  # third part
    w3 = n * PIO2_3
    r3 = t - w3
    w3 = n * PIO2_3T - ((t - r3) - w3)
    y03 = r3 - w3
    second = j - _exponent(y0) > 16
    third = second & (j - _exponent(y02) > 49)
    r = np.where(third, r3, np.where(second, r2, r))
    w = np.where(third, w3, np.where(second, w2, w))
    y0 = np.where(third, y03, np.where(second, y02, y0))
    y1 = (r - y0) - w
    return n, y0, y1


def _kernel_sin(x, y):
    """sin(x + y) for |x| <= ~pi/4, |y| tiny beside x."""
    z = x * x
    v = z * x
    r = horner(SIN_S[1:], z)
    return x - ((z * (0.5 * y - v * r) - y) - v * SIN_S[0])


def _kernel_cos(x, y):
    """cos(x + y) for |x| <= ~pi/4: w = 1 - z/2 and its rounding error (exact) carried."""
    z = x * x
    r = z * horner(COS_C, z)
    hz = 0.5 * z
    w = 1.0 - hz
    return w + (((1.0 - w) - hz) + (z * r - x * y))


def _trig(name, x, shift):
    """sin (shift 0) or cos (shift 1) of |x|: quadrant q = (n + shift) mod 4 picks the kernel."""
    x, shape = _arr(x)
    a = np.abs(x)
    _check_trig(name, a)
    finite = a < np.inf  # False for NaN
    n, y0, y1 = _rem_pio2(np.where(finite, a, 0.0))
    q = np.fmod(n + shift, 4.0)  # exact
    s = _kernel_sin(y0, y1)
    c = _kernel_cos(y0, y1)
    out = np.select([q == 0.0, q == 1.0, q == 2.0], [s, c, -s], -c)
    return np.where(finite, out, np.nan), a, x, shape


def sin(x):
    """sin elementwise for |x| <= TRIG_MAX, within 1 ulp; odd (sin(-0) = -0)."""
    out, a, x, shape = _trig("sin", x, 0.0)
    out = np.where(a < TRIG_TINY, x, np.where(x < 0.0, -out, out))
    return _out(out, shape)


def cos(x):
    """cos elementwise for |x| <= TRIG_MAX, within 1 ulp; even."""
    out, a, x, shape = _trig("cos", x, 1.0)
    return _out(np.where(a < TRIG_TINY, 1.0, out), shape)
