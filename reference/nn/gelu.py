"""The error function of our own and the exact GELU (twin: gelu.ts).

erf follows the piecewise rational scheme of Sun's fdlibm (s_erf.c, 1993) with its published
coefficients; only the erf half is needed. For a = |x|:
  [0, 2^-28)       erf = x + EFX * x                         (EFX = 2/sqrt(pi) - 1)
  [2^-28, 0.84375) erf = x + x * P(z) / Q(z), z = x * x
  [0.84375, 1.25)  erf = sign * (ERX + P1(s) / Q1(s)), s = a - 1
  [1.25, 6)        erfc = exp(-t*t - 0.5625) * exp((t - a) * (t + a) + R(w) / S(w)) / a,
                   w = 1 / (a * a), t = a with the low 32 bits of its encoding cleared
                   (R, S one pair below 1/0.35, another above); erf = sign * (1 - erfc)
  [6, inf]         erf = sign * 1
Every polynomial is evaluated by Horner's rule from the highest coefficient, in the order
written, in both engines; exp is mathlib's (the same bits in both engines).
NaN gives NaN.

GELU (exact, as torch.nn.GELU()): out = (x * 0.5) * (1 + erf(x * SQRT1_2)), left to right,
SQRT1_2 the double nearest 1/sqrt(2). Shapes: x (...) -> out (...).

Backward: d/dx x Phi(x) = Phi(x) + x phi(x), with Phi(x) = 0.5 * (1 + erf(x / sqrt 2)) from the
forward's erf term and phi(x) = exp(-x^2 / 2) / sqrt(2 pi). One expression, left to right:
  cdf = 0.5 * (1 + erf)
  pdf = exp((x * x) * -0.5) * INV_SQRT_2PI        INV_SQRT_2PI the double nearest 1/sqrt(2 pi)
  dx  = dout * (cdf + x * pdf)
(PyTorch's CPU GeluBackward computes the same terms, with libm's exp.)
"""

import numpy as np

from ..core.mathlib import exp

SQRT1_2 = 0.7071067811865476
INV_SQRT_2PI = 0.3989422804014327
ERX = 8.45062911510467529297e-01
EFX = 1.28379167095512586316e-01
EFX8 = 1.02703333676410069053e00
PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
      -5.77027029648944159157e-03, -2.37630166566501626084e-05)
QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
      1.32494738004321644526e-04, -3.96022827877536812320e-06)
PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
      3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
      -2.16637559486879084300e-03)
QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
      1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e01,
      -6.23753324503260060396e01, -1.62396669462573470355e02, -1.84605092906711035994e02,
      -8.12874355063065934246e01, -9.81432934416914548592e00)
SA = (1.0, 1.96512716674392571292e01, 1.37657754143519042600e02, 4.34565877475229228821e02,
      6.45387271733267880336e02, 4.29008140027567833386e02, 1.08635005541779435134e02,
      6.57024977031928170135e00, -6.04244152148580987438e-02)
RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e01,
      -1.60636384855821916062e02, -6.37566443368389627722e02, -1.02509513161107724954e03,
      -4.83519191608651397019e02)
SB = (1.0, 3.03380607434824582924e01, 3.25792512996573918826e02, 1.53672958608443695994e03,
      3.19985821950859553908e03, 2.55305040643316442583e03, 4.74528541206955367215e02,
      -2.24409524465858183362e01)
TINY_CUT = 2.0 ** -28
SUBNORMAL_CUT = 2.0 ** -1022
ERFC_SPLIT = 1.0 / 0.35  # 2.857142857142857


def horner(c, z):
    """c[0] + z * (c[1] + z * (... + z * c[-1])), evaluated from the innermost term out."""
    acc = np.full_like(z, c[-1])
    for coef in reversed(c[:-1]):
        acc = acc * z + coef
    return acc


def _erf_tail(a):
    """erf(a) for a in [1.25, 6), a > 0."""
    w = 1.0 / (a * a)
    near = a < ERFC_SPLIT
    R = np.where(near, horner(RA, w), horner(RB, w))
    S = np.where(near, horner(SA, w), horner(SB, w))
    t = (a.view(np.uint64) & np.uint64(0xFFFFFFFF00000000)).view(np.float64)  # high word of a
    r = exp(-t * t - 0.5625) * exp((t - a) * (t + a) + R / S)
    return 1.0 - r / a


def erf(x):
    """The error function, elementwise over an array (or a scalar), to within about 1 ULP."""
    x = np.asarray(x, dtype=np.float64)
    scalar = x.ndim == 0
    x = np.atleast_1d(x)
    a = np.abs(x)
    sign = np.where(x < 0.0, -1.0, 1.0)
    out = x.copy()  # NaN stays NaN; every other value is overwritten below
    tiny = a < TINY_CUT
    sub = a < SUBNORMAL_CUT
    xs = x[tiny]
    out[tiny] = np.where(sub[tiny], 0.125 * (8.0 * xs + EFX8 * xs), xs + EFX * xs)
    small = (a >= TINY_CUT) & (a < 0.84375)
    xs = x[small]
    z = xs * xs
    out[small] = xs + xs * (horner(PP, z) / horner(QQ, z))
    mid = (a >= 0.84375) & (a < 1.25)
    s = a[mid] - 1.0
    out[mid] = sign[mid] * (ERX + horner(PA, s) / horner(QA, s))
    tail = (a >= 1.25) & (a < 6.0)
    out[tail] = sign[tail] * _erf_tail(a[tail])
    flat = a >= 6.0
    out[flat] = sign[flat]
    return out[0] if scalar else out


def gelu_forward(x):
    """Returns (out, cache): out = (x * 0.5) * (1 + erf(x * SQRT1_2)); cache holds x and the erf term."""
    x = np.asarray(x, dtype=np.float64)
    e = erf(x * SQRT1_2)  # (...)
    out = (x * 0.5) * (1.0 + e)  # (...)
    return out, {"x": x, "erf": e}


def gelu_backward(dout, cache):
    """Returns dx (...) = dout * (Phi(x) + x * phi(x))."""
    x, e = cache["x"], cache["erf"]
    dout = np.asarray(dout, dtype=np.float64)
    if dout.shape != x.shape:
        raise ValueError(f"gelu_backward: dout must have the forward's shape {x.shape}, got {dout.shape}")
    # inverts: out = (x * 0.5) * (1 + erf(x * SQRT1_2))
    cdf = 0.5 * (1.0 + e)  # (...)
    pdf = exp((x * x) * -0.5) * INV_SQRT_2PI  # (...)
    return dout * (cdf + x * pdf)
