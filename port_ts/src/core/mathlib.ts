// Transcendental functions of our own (twin: reference/core/mathlib.py). docs/mathlib.md.
//
// libm (behind np.exp, np.sin, ...) and V8 (behind Math.exp, Math.sin, ...) round differently in
// the last bit, and over hundreds of training steps those bits grow. Every function here uses
// only exactly rounded operations (+, -, *, /, floor, comparisons, exact frexp, exact scaling by
// powers of two), written as the same expressions in the same order in both engines, so the two
// engines compute the same bits. The schemes are Sun's fdlibm (1993) with its published
// coefficients, rewritten: one double at a time here, elementwise over arrays in the reference
// (branches become masks). Accuracy (tests/test_mathlib.py measures it): within 1 ulp.
//
//   exp(x)        k = floor(x / ln2 + 1/2); r = x - k ln2 in two parts (Cody-Waite: ln2_hi has 32
//                 significant bits, so k * ln2_hi is exact); exp(r) = 1 + r + r c / (2 - c) with
//                 c = r - r^2 P(r^2) (degree-5 P); then * 2^k, rounded once (ldexp). x > 709.78...
//                 gives +inf, x < -745.13... gives 0, NaN gives NaN.
//   expm1(x)      exp(x) - 1 without cancellation near 0 (fdlibm's s_expm1.c scheme, Q1..Q5).
//   tanh(x)       |x| < 0.625: the Taylor series x + x^3 T(x^2) to x^45; |x| < 22: 1 - 2 / (t + 2),
//                 t = expm1(2|x|), with t + 2 and the division's remainder carried exactly;
//                 else 1. Computed on |x|, the sign applied last.
//   log(x)        x = m 2^e (exact frexp), m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact),
//                 s = f / (2 + f), R = z P(z) with z = s^2 (Lg1..Lg7), then
//                 e ln2_hi - ((f^2/2 - (s (f^2/2 + R) + e ln2_lo)) - f). x < 0: NaN, 0: -inf.
//   specLog(s)    the generator's own ln (docs/generator.md; kept bit for bit, a few ulp).
//   sin, cos      |x| <= TRIG_MAX = 1e6: n = floor(|x| 2/pi + 1/2); r = |x| - n pi/2 with pi/2
//                 in 33-bit parts (Cody-Waite, a second and third part only after cancellation,
//                 as fdlibm's e_rem_pio2.c), as a pair y0 + y1, |y0| <= ~pi/4;
//                 kernels on [-pi/4, pi/4] (S1..S6, C1..C6) chosen by n mod 4; sin is odd, cos even.
//                 |x| > TRIG_MAX throws a RangeError; +-inf and NaN give NaN.
//   powLn(c, y)   base^y for a base given by its natural log as a pair c = [c_hi, c_lo]:
//                 exp of y (c_hi + c_lo), with y c_hi formed exactly (Dekker's product) and the
//                 low part folded into exp's reduction. The positional encoding's 10000^y.
//   ldexp(x, k)   x * 2^k, exact unless the result is subnormal (then rounded once).

const LN2_HI = 6.93147180369123816490e-1; // ln 2 to 32 significant bits (low 21 bits zero)
const LN2_LO = 1.90821492927058770002e-10; // ln 2 - LN2_HI
const INV_LN2 = 1.44269504088896338700e0;
const EXP_OVER = 7.09782712893383973096e2; // largest x with exp(x) finite
const EXP_UNDER = -7.45133219101941108420e2; // below: exp(x) rounds to 0
const EXP_P = [1.66666666666666019037e-1, -2.77777777770155933842e-3, 6.61375632143793436117e-5,
  -1.65339022054652515390e-6, 4.13813679705723846039e-8];
const EXPM1_Q = [-3.33333333333331316428e-2, 1.58730158725481460165e-3, -7.93650757867487942473e-5,
  4.00821782732936239552e-6, -2.01099218183624371326e-7];
const EXPM1_TINY = 2 ** -54; // below: expm1(x) = x
const EXPM1_MINUS_ONE = -40; // below: exp(x) < 2^-57, so expm1(x) rounds to -1
const TANH_TINY = 2 ** -55; // below: tanh(x) = x
const TANH_ONE = 22; // from here: tanh(x) rounds to +-1
const TANH_SERIES = 0.625; // below: the Taylor series; truncated after x^45, relative error < 4e-19
const TANH_T = [-0.3333333333333333, 0.13333333333333333, -0.05396825396825397, 0.021869488536155203,
  -0.008863235529902197, 0.003592128036572481, -0.0014558343870513183, 0.000590027440945586,
  -0.00023912911424355248, 9.691537956929451e-5, -3.927832388331683e-5,
  1.5918905069328964e-5, -6.451689215655431e-6, 2.6147711512907546e-6,
  -1.0597268320104654e-6, 4.294911078273806e-7, -1.7406618963571648e-7,
  7.054636946400968e-8, -2.859136662305254e-8, 1.1587644432798853e-8,
  -4.6962953982309016e-9, 1.903336833931276e-9]; // x^3 .. x^45, each the nearest double
const LG = [6.666666666666735130e-1, 3.999999999940941908e-1, 2.857142874366239149e-1,
  2.222219843214978396e-1, 1.818357216161805012e-1, 1.531383769920937332e-1,
  1.479819860511658591e-1];
const SQRT_HALF = 0.7071067811865476; // the double nearest sqrt(1/2)
const LN2 = 0.6931471805599453; // the double nearest ln 2 (specLog only)
const ATANH_COEFS = Array.from({ length: 11 }, (_, k) => 1 / (2 * k + 1)); // 1, 1/3, ..., 1/21 (specLog only)
const INV_PIO2 = 6.36619772367581382433e-1; // 2 / pi
const PIO2_1 = 1.57079632673412561417e0; // first 33 bits of pi/2
const PIO2_1T = 6.07710050650619224932e-11; // pi/2 - PIO2_1
const PIO2_2 = 6.07710050630396597660e-11; // second 33 bits
const PIO2_2T = 2.02226624879595063154e-21; // pi/2 - (PIO2_1 + PIO2_2)
const PIO2_3 = 2.02226624871116645580e-21; // third 33 bits
const PIO2_3T = 8.47842766036889956997e-32; // pi/2 - (PIO2_1 + PIO2_2 + PIO2_3)
export const TRIG_MAX = 1e6; // |x| allowed in sin and cos: n < 2^20, so n * PIO2_k is exact
const TRIG_TINY = 2 ** -27; // below: sin(x) = x, cos(x) = 1
const SIN_S = [-1.66666666666666324348e-1, 8.33333333332248946124e-3, -1.98412698298579493134e-4,
  2.75573137070700676789e-6, -2.50507602534068634195e-8, 1.58969099521155010221e-10];
const SIN_S2 = SIN_S.slice(1);
const COS_C = [4.16666666666666019037e-2, -1.38888888888741095749e-3, 2.48015872894767294178e-5,
  -2.75573143513906633035e-7, 2.08757232129817482790e-9, -1.13596475577881948265e-11];
const SPLIT = 134217729; // 2^27 + 1, Veltkamp's splitter

// Bits of doubles, big-endian through a DataView (the same on every platform).
const scratch = new DataView(new ArrayBuffer(8));

// POW2[k + 1022] = 2^k for k = -1022..1023, built from the bits: exponent field k + 1023, mantissa 0.
const POW2 = new Float64Array(2046);
for (let k = -1022; k <= 1023; k++) {
  scratch.setUint32(0, (k + 1023) * 1048576); // << 20
  scratch.setUint32(4, 0);
  POW2[k + 1022] = scratch.getFloat64(0);
}
const TWO_1023 = POW2[1023 + 1022];
const TWO_M969 = POW2[-969 + 1022]; // 2^-1022 * 2^53
const TWO_54 = POW2[54 + 1022];

/** The biased exponent field of a double (0 for 0 and subnormals). */
function exponentField(x: number): number {
  scratch.setFloat64(0, x);
  return (scratch.getUint32(0) >>> 20) & 0x7ff;
}

/** c[0] + z * (c[1] + z * (... + z * c[last])), from the innermost term out (as gelu.horner). */
export function horner(c: readonly number[], z: number): number {
  let acc = c[c.length - 1];
  for (let k = c.length - 2; k >= 0; k--) acc = acc * z + c[k];
  return acc;
}

/** x * 2**k (k an integer): exact, or rounded once when the result is subnormal (libm's ldexp).
 * Large |k| is applied in steps that are exact, the last one rounding (musl's scalbn). */
export function ldexp(x: number, k: number): number {
  if (k > 1023) {
    x *= TWO_1023;
    k -= 1023;
    if (k > 1023) {
      x *= TWO_1023;
      k -= 1023;
      if (k > 1023) k = 1023;
    }
  } else if (k < -1022) {
    x *= TWO_M969; // stays normal when the final result is not 0, so exact
    k += 969;
    if (k < -1022) {
      x *= TWO_M969;
      k += 969;
      if (k < -1022) k = -1022;
    }
  }
  return x * POW2[k + 1022];
}

const [P1, P2, P3, P4, P5] = EXP_P; // constants of expPair's unrolled horner(EXP_P, t)
/** exp's constants, for the test that checks expPair's unrolled form against its formula. */
export const EXP_CONSTANTS = { LN2_HI, LN2_LO, INV_LN2, EXP_OVER, EXP_UNDER, EXP_P } as const;

/** exp(hi + lo), |lo| tiny beside hi (lo = 0 for exp itself). The hot path of the softmaxes:
 * horner(EXP_P, t) written out (the same products and sums in the same order), and ldexp's
 * common case (k in [-1022, 1023]: one exact multiply by POW2) inline; the same bits as the
 * loop and the call (port_ts/test/core/mathlib.test.ts compares them). */
function expPair(hi: number, lo: number): number {
  if (!(hi >= EXP_UNDER && hi <= EXP_OVER)) return hi > EXP_OVER ? Infinity : hi < EXP_UNDER ? 0 : hi;
  const k = Math.floor(hi * INV_LN2 + 0.5);
  const rHi = hi - k * LN2_HI; // exact
  const rLo = k * LN2_LO - lo;
  const r = rHi - rLo; // |r| <= ~ln2 / 2
  const t = r * r;
  const c = r - t * ((((P5 * t + P4) * t + P3) * t + P2) * t + P1);
  const y = 1 - ((rLo - (r * c) / (2 - c)) - rHi); // exp(r) in [~0.7, ~1.42]
  return k >= -1022 && k <= 1023 ? y * POW2[k + 1022] : ldexp(y, k);
}

/** e^x, within 1 ulp. */
export function exp(x: number): number {
  return expPair(x, 0);
}

/** The error e of p = a * b rounded: p + e = a * b exactly (Dekker; no overflow assumed). */
function productError(a: number, b: number, p: number): number {
  let t = SPLIT * a;
  const aHi = t - (t - a), aLo = a - aHi;
  t = SPLIT * b;
  const bHi = t - (t - b), bLo = b - bHi;
  return (((aHi * bHi - p) + aHi * bLo) + aLo * bHi) + aLo * bLo;
}

/** [p, e] with p = a * b rounded and p + e = a * b exactly (Dekker; no overflow assumed). */
export function twoProd(a: number, b: number): [number, number] {
  const p = a * b;
  return [p, productError(a, b, p)];
}

/** base^y, the base given by ln(base) = c[0] + c[1] (a double pair):
 * exp(y c[0] + (error of that product + y c[1])). Within 1 ulp for |y c[0]| < 700. */
export function powLn(c: readonly [number, number], y: number): number {
  const p = y * c[0];
  return expPair(p, productError(y, c[0], p) + y * c[1]);
}

/** e^x - 1, within 1 ulp, accurate near 0. */
export function expm1(x: number): number {
  if (Math.abs(x) < EXPM1_TINY) return x;
  if (x < EXPM1_MINUS_ONE) return -1;
  if (x > EXP_OVER) return Infinity;
  if (x !== x) return x; // NaN
  const k = Math.floor(x * INV_LN2 + 0.5);
  const hi = x - k * LN2_HI; // exact
  const lo = k * LN2_LO;
  const r = hi - lo; // |r| <= ~ln2 / 2
  const c = (hi - r) - lo; // the rounding error of r (0 when k = 0)
  const hfx = 0.5 * r;
  const hxs = r * hfx;
  const r1 = 1 + hxs * horner(EXPM1_Q, hxs);
  const t = 3 - r1 * hfx;
  let e = hxs * ((r1 - t) / (6 - r * t));
  if (k === 0) return r - (r * e - hxs);
  e = (r * (e - c) - c) - hxs;
  if (k === -1) return 0.5 * (r - e) - 0.5;
  if (k === 1) return r < -0.25 ? -2 * (e - (r + 0.5)) : 1 + 2 * (r - e);
  if (k <= -2 || k > 56) return ldexp(1 - (e - r), k) - 1;
  if (k < 20) return ldexp((1 - ldexp(1, -k)) - (e - r), k);
  return ldexp((r - (e + ldexp(1, -k))) + 1, k);
}

/** tanh, within about 1 ulp; odd (tanh(-0) = -0). */
export function tanh(x: number): number {
  const a = Math.abs(x);
  if (a < TANH_TINY) return x;
  let z: number;
  if (a < TANH_SERIES) {
    const zz = a * a;
    z = a + a * (zz * horner(TANH_T, zz));
  } else if (a < TANH_ONE) {
    const t = expm1(2 * a); // >= e^1.25 - 1 > 2
    const s = t + 2;
    const sErr = (t - s) + 2; // exact: t + 2 = s + sErr
    let q = 2 / s;
    const p = q * s;
    q = q + (((2 - p) - productError(q, s, p)) - q * sErr) / s; // 2 / (t + 2) with the division's remainder
    z = 1 - q;
  } else if (a >= TANH_ONE) {
    z = 1;
  } else {
    return x; // NaN
  }
  return x < 0 ? -z : z;
}

/** The generator's ln of s > 0 (docs/generator.md), bit for bit: s = f * 2**e with
 * f in [sqrt(1/2), sqrt(2)), ln f = 2 atanh(t), t = (f - 1) / (f + 1), series to t**21. */
export function specLog(s: number): number {
  let f = s;
  let e = 0;
  while (f >= 1) { f *= 0.5; e += 1; } // exact: f = s * 2**-e in [0.5, 1)
  while (f < 0.5) { f *= 2; e -= 1; }
  if (f < SQRT_HALF) { f *= 2; e -= 1; }
  const t = (f - 1) / (f + 1);
  const t2 = t * t;
  let p = ATANH_COEFS[10];
  for (let k = 9; k >= 0; k--) p = p * t2 + ATANH_COEFS[k];
  return e * LN2 + 2 * t * p;
}

/** Natural log, within 1 ulp. x < 0 or NaN: NaN; +-0: -Infinity; +Infinity: +Infinity. */
export function log(x: number): number {
  if (!(x > 0 && x < Infinity)) return x === 0 ? -Infinity : x === Infinity ? Infinity : NaN;
  let e = 0;
  if (x < POW2[0]) { x *= TWO_54; e = -54; } // subnormal: scale into the normal range (exact)
  scratch.setFloat64(0, x);
  const hi = scratch.getUint32(0);
  e += ((hi >>> 20) & 0x7ff) - 1022;
  scratch.setUint32(0, (hi & 0xfffff) | 0x3fe00000); // exponent field 1022: m in [0.5, 1), exact
  let m = scratch.getFloat64(0);
  let k = e;
  if (m < SQRT_HALF) { m = m * 2; k = k - 1; } // [sqrt(1/2), sqrt(2))
  const f = m - 1; // exact
  const s = f / (2 + f);
  const z = s * s;
  const R = z * horner(LG, z);
  const hfsq = 0.5 * f * f;
  return k * LN2_HI - ((hfsq - (s * (hfsq + R) + k * LN2_LO)) - f);
}

/** sin(x + y) for |x| <= ~pi/4, |y| tiny beside x. */
function kernelSin(x: number, y: number): number {
  const z = x * x;
  const v = z * x;
  const r = horner(SIN_S2, z);
  return x - ((z * (0.5 * y - v * r) - y) - v * SIN_S[0]);
}

/** cos(x + y) for |x| <= ~pi/4: w = 1 - z/2 and its rounding error (exact) carried. */
function kernelCos(x: number, y: number): number {
  const z = x * x;
  const r = z * horner(COS_C, z);
  const hz = 0.5 * z;
  const w = 1 - hz;
  return w + (((1 - w) - hz) + (z * r - x * y));
}

/** sin (shift 0) or cos (shift 1) of |x|: quadrant q = (n + shift) mod 4 picks the kernel.
 * The reduction a - n pi/2 = y0 + y1 is fdlibm's medium case: one part of pi/2, then a second
 * and a third only when the previous remainder lost more than 16, then 49 bits to cancellation. */
function trig(name: string, x: number, shift: number): number {
  const a = Math.abs(x);
  if (a > TRIG_MAX && a < Infinity) {
    throw new RangeError(`${name}: |x| <= ${TRIG_MAX} is supported (three-part reduction by pi/2), got ${x}; scale the argument down first`);
  }
  if (!(a < Infinity)) return NaN;
  const n = Math.floor(a * INV_PIO2 + 0.5);
  const j = exponentField(a);
  let r = a - n * PIO2_1; // exact
  let w = n * PIO2_1T;
  let y0 = r - w;
  if (j - exponentField(y0) > 16) {
    let t = r; // second part
    w = n * PIO2_2;
    r = t - w;
    w = n * PIO2_2T - ((t - r) - w);
    y0 = r - w;
    if (j - exponentField(y0) > 49) {
      t = r; // third part
      w = n * PIO2_3;
      r = t - w;
      w = n * PIO2_3T - ((t - r) - w);
      y0 = r - w;
    }
  }
  const y1 = (r - y0) - w;
  const q = (n + shift) % 4; // exact
  if (q === 0) return kernelSin(y0, y1);
  if (q === 1) return kernelCos(y0, y1);
  if (q === 2) return -kernelSin(y0, y1);
  return -kernelCos(y0, y1);
}

/** sin for |x| <= TRIG_MAX, within 1 ulp; odd (sin(-0) = -0). */
export function sin(x: number): number {
  const out = trig("sin", x, 0);
  if (Math.abs(x) < TRIG_TINY) return x;
  return x < 0 ? -out : out;
}

/** cos for |x| <= TRIG_MAX, within 1 ulp; even. */
export function cos(x: number): number {
  const out = trig("cos", x, 1);
  return Math.abs(x) < TRIG_TINY ? 1 : out;
}
