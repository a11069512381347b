// The error function of our own and the exact GELU (twin: gelu.py).
// erf follows the piecewise rational scheme of Sun's fdlibm (s_erf.c, 1993) with its published
// coefficients; only the erf half is needed. For a = |x|:
//   [0, 2^-28)       erf = x + EFX * x                         (EFX = 2/sqrt(pi) - 1)
//   [2^-28, 0.84375) erf = x + x * P(z) / Q(z), z = x * x
//   [0.84375, 1.25)  erf = sign * (ERX + P1(s) / Q1(s)), s = a - 1
//   [1.25, 6)        erfc = exp(-t*t - 0.5625) * exp((t - a) * (t + a) + R(w) / S(w)) / a,
//                    w = 1 / (a * a), t = a with the low 32 bits of its encoding cleared
//                    (R, S one pair below 1/0.35, another above); erf = sign * (1 - erfc)
//   [6, inf]         erf = sign * 1
// Every polynomial is evaluated by Horner's rule from the highest coefficient, in the order
// written, in both engines; exp is mathlib's (the same bits in both engines). NaN gives NaN.
//
// GELU (exact, as torch.nn.GELU()): out = (x * 0.5) * (1 + erf(x * SQRT1_2)), left to right,
// SQRT1_2 the double nearest 1/sqrt(2). Shapes: x (...) -> out (...).
//
// Backward: d/dx x Phi(x) = Phi(x) + x phi(x), with Phi(x) = 0.5 * (1 + erf(x / sqrt 2)) from the
// forward's erf term and phi(x) = exp(-x^2 / 2) / sqrt(2 pi). One expression, left to right:
//   cdf = 0.5 * (1 + erf)
//   pdf = exp((x * x) * -0.5) * INV_SQRT_2PI        INV_SQRT_2PI the double nearest 1/sqrt(2 pi)
//   dx  = dout * (cdf + x * pdf)
// (PyTorch's CPU GeluBackward computes the same terms, with libm's exp.)

import { type Tensor, empty } from "../core/ops.ts";
import { exp } from "../core/mathlib.ts";

export const SQRT1_2 = 0.7071067811865476;
export const INV_SQRT_2PI = 0.3989422804014327;
const ERX = 8.45062911510467529297e-1;
const EFX = 1.28379167095512586316e-1;
const EFX8 = 1.02703333676410069053e0;
const PP = [1.28379167095512558561e-1, -3.25042107247001499370e-1, -2.84817495755985104766e-2,
  -5.77027029648944159157e-3, -2.37630166566501626084e-5];
const QQ = [1.0, 3.97917223959155352819e-1, 6.50222499887672944485e-2, 5.08130628187576562776e-3,
  1.32494738004321644526e-4, -3.96022827877536812320e-6];
const PA = [-2.36211856075265944077e-3, 4.14856118683748331666e-1, -3.72207876035701323847e-1,
  3.18346619901161753674e-1, -1.10894694282396677476e-1, 3.54783043256182359371e-2,
  -2.16637559486879084300e-3];
const QA = [1.0, 1.06420880400844228286e-1, 5.40397917702171048937e-1, 7.18286544141962662868e-2,
  1.26171219808761642112e-1, 1.36370839120290507362e-2, 1.19844998467991074170e-2];
const RA = [-9.86494403484714822705e-3, -6.93858572707181764372e-1, -1.05586262253232909814e1,
  -6.23753324503260060396e1, -1.62396669462573470355e2, -1.84605092906711035994e2,
  -8.12874355063065934246e1, -9.81432934416914548592e0];
const SA = [1.0, 1.96512716674392571292e1, 1.37657754143519042600e2, 4.34565877475229228821e2,
  6.45387271733267880336e2, 4.29008140027567833386e2, 1.08635005541779435134e2,
  6.57024977031928170135e0, -6.04244152148580987438e-2];
const RB = [-9.86494292470009928597e-3, -7.99283237680523006574e-1, -1.77579549177547519889e1,
  -1.60636384855821916062e2, -6.37566443368389627722e2, -1.02509513161107724954e3,
  -4.83519191608651397019e2];
const SB = [1.0, 3.03380607434824582924e1, 3.25792512996573918826e2, 1.53672958608443695994e3,
  3.19985821950859553908e3, 2.55305040643316442583e3, 4.74528541206955367215e2,
  -2.24409524465858183362e1];
const TINY_CUT = 2 ** -28;
const SUBNORMAL_CUT = 2 ** -1022;
const ERFC_SPLIT = 1 / 0.35; // 2.857142857142857

/** c[0] + z * (c[1] + z * (... + z * c[last])), evaluated from the innermost term out. */
export function horner(c: readonly number[], z: number): number {
  let acc = c[c.length - 1];
  for (let k = c.length - 2; k >= 0; k--) acc = acc * z + c[k];
  return acc;
}

// Scratch for clearing the low 32 bits of a double; big-endian DataView, so bytes 4..7 are the low word.
const scratch = new DataView(new ArrayBuffer(8));

function highWord(a: number): number {
  scratch.setFloat64(0, a);
  scratch.setUint32(4, 0);
  return scratch.getFloat64(0);
}

/** erf(a) for a in [1.25, 6), a > 0. */
function erfTail(a: number): number {
  const w = 1 / (a * a);
  const near = a < ERFC_SPLIT;
  const R = near ? horner(RA, w) : horner(RB, w);
  const S = near ? horner(SA, w) : horner(SB, w);
  const t = highWord(a);
  const r = exp(-t * t - 0.5625) * exp((t - a) * (t + a) + R / S);
  return 1 - r / a;
}

/** The error function of one double, to within about 1 ULP. */
export function erf(x: number): number {
  const a = Math.abs(x);
  const sign = x < 0 ? -1 : 1;
  if (a < TINY_CUT) return a < SUBNORMAL_CUT ? 0.125 * (8 * x + EFX8 * x) : x + EFX * x;
  if (a < 0.84375) {
    const z = x * x;
    return x + x * (horner(PP, z) / horner(QQ, z));
  }
  if (a < 1.25) {
    const s = a - 1;
    return sign * (ERX + horner(PA, s) / horner(QA, s));
  }
  if (a < 6) return sign * erfTail(a);
  if (a >= 6) return sign;
  return x; // NaN
}

export interface GeluCache {
  x: Tensor; // (...)
  erf: Tensor; // (...) erf(x * SQRT1_2)
}

export function geluForward(x: Tensor): { out: Tensor; cache: GeluCache } {
  const e = empty(x.shape), out = empty(x.shape); // (...)  every element written
  const X = x.data, E = e.data, O = out.data;
  for (let i = 0; i < X.length; i++) {
    E[i] = erf(X[i] * SQRT1_2);
    O[i] = (X[i] * 0.5) * (1 + E[i]);
  }
  return { out, cache: { x, erf: e } };
}

/** Returns dx (...) = dout * (Phi(x) + x * phi(x)). */
export function geluBackward(dout: Tensor, cache: GeluCache): Tensor {
  const { x, erf: e } = cache;
  if (dout.data.length !== x.data.length || dout.shape.length !== x.shape.length) {
    throw new RangeError(`geluBackward: dout must have the forward's shape [${x.shape}], got [${dout.shape}]`);
  }
  const dx = empty(x.shape); // (...)  every element written
  const X = x.data, E = e.data, D = dout.data, DX = dx.data;
  // inverts: out = (x * 0.5) * (1 + erf(x * SQRT1_2))
  for (let i = 0; i < X.length; i++) {
    const cdf = 0.5 * (1 + E[i]);
    const pdf = exp((X[i] * X[i]) * -0.5) * INV_SQRT_2PI;
    DX[i] = D[i] * (cdf + X[i] * pdf);
  }
  return dx;
}
