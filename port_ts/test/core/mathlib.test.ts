// mathlib: known values (correctly rounded, from mpmath at 200 bits) within 1 ulp, special
// values exactly, ldexp's single rounding, the trig range check. Bit identity with the reference
// is tested by tests/test_mathlib.py (SHA-256 over ~1e6 inputs per function).
import { test } from "node:test";
import assert from "node:assert/strict";
import { expAll } from "../../src/kernels/rows.ts";
import { sameBitsInKernels } from "../toolkit.ts";
import { exp, expm1, log, sin, cos, tanh, ldexp, powLn, twoProd, specLog, horner, EXP_CONSTANTS, TRIG_MAX } from "../../src/core/mathlib.ts";

/** The spacing of doubles at |want| (its ulp). */
function ulp(want: number): number {
  const a = Math.abs(want);
  if (a < 2 ** -1022) return 2 ** -1074;
  let u = 2 ** -1074;
  while (u * 2 ** 53 <= a) u *= 2;
  return u;
}

function near(name: string, got: number, want: number): void {
  assert.ok(Math.abs(got - want) <= ulp(want), `${name}: got ${got}, want ${want} (1 ulp = ${ulp(want)})`);
}

const KNOWN: [string, (x: number) => number, [number, number][]][] = [
  ["exp", exp, [[1, 2.718281828459045], [-1, 0.36787944117144233], [0.5, 1.6487212707001282],
    [10, 22026.465794806718], [-700, 9.85967654375977e-305], [709, 8.218407461554972e307], [1e-10, 1.0000000001]]],
  ["log", log, [[2, 0.6931471805599453], [10, 2.302585092994046], [0.1, -2.3025850929940455],
    [1e-300, -690.7755278982137], [1e300, 690.7755278982137]]],
  ["sin", sin, [[1, 0.8414709848078965], [0.5, 0.479425538604203], [3, 0.1411200080598672],
    [100, -0.5063656411097588], [1e5, 0.03574879797201651], [-2.5, -0.5984721441039565]]],
  ["cos", cos, [[1, 0.5403023058681398], [0.5, 0.8775825618903728], [3, -0.9899924966004454],
    [100, 0.8623188722876839], [1e5, -0.9993608074382124], [-2.5, -0.8011436155469337]]],
  ["tanh", tanh, [[0.5, 0.46211715726000974], [0.7, 0.6043677771171635], [1, 0.7615941559557649],
    [-2, -0.9640275800758169], [10, 0.9999999958776927], [1e-3, 0.0009999996666668]]],
  ["expm1", expm1, [[1e-10, 1.00000000005e-10], [0.1, 0.10517091807564763], [-0.5, -0.3934693402873666],
    [2, 6.38905609893065], [30, 10686474581523.463], [-20, -0.9999999979388464]]],
];

for (const [name, f, pairs] of KNOWN) {
  test(`${name} matches known values within 1 ulp`, () => {
    for (const [x, want] of pairs) near(`${name}(${x})`, f(x), want);
  });
}

test("special values are exact", () => {
  assert.equal(exp(0), 1);
  assert.equal(exp(Infinity), Infinity);
  assert.equal(exp(-Infinity), 0);
  assert.equal(exp(710), Infinity);
  assert.equal(exp(-746), 0);
  assert.equal(exp(-740), 4.2e-322); // subnormal result, rounded once
  assert.ok(Number.isNaN(exp(NaN)));
  assert.equal(log(1), 0);
  assert.equal(log(0), -Infinity);
  assert.equal(log(-0), -Infinity);
  assert.equal(log(Infinity), Infinity);
  assert.ok(Number.isNaN(log(-1)) && Number.isNaN(log(NaN)));
  assert.equal(log(5e-324), -744.4400719213812);
  assert.ok(Object.is(sin(-0), -0) && Object.is(tanh(-0), -0) && Object.is(expm1(-0), -0));
  assert.equal(cos(0), 1);
  assert.ok(Number.isNaN(sin(Infinity)) && Number.isNaN(cos(-Infinity)) && Number.isNaN(sin(NaN)));
  assert.equal(tanh(Infinity), 1);
  assert.equal(tanh(-30), -1);
  assert.ok(Number.isNaN(tanh(NaN)));
  assert.equal(tanh(1e-300), 1e-300);
  assert.equal(expm1(-Infinity), -1);
  assert.equal(expm1(-50), -1);
});

test("sin and cos refuse |x| beyond TRIG_MAX, and accept it", () => {
  assert.throws(() => sin(1.5e6), /\|x\| <= 1000000 is supported/);
  assert.throws(() => cos(-2e6), RangeError);
  near("sin(1e6)", sin(TRIG_MAX), -0.34999350217129294);
});

test("ldexp is exact, and rounds once into the subnormals", () => {
  assert.equal(ldexp(1.5, -1074), 2 ** -1073); // a tie: to even
  assert.equal(ldexp(1.25, -1074), 5e-324);
  assert.equal(ldexp(0.75, 1024), 0.75 * 2 ** 1023 * 2);
  assert.equal(ldexp(1, 1024), Infinity);
  assert.equal(ldexp(3, -2), 0.75);
});

test("twoProd's pair is the exact product", () => {
  const [p, e] = twoProd(0.1, 0.3);
  assert.equal(p, 0.1 * 0.3);
  assert.equal(e, 1.6653345369377347e-18); // 0.1 * 0.3 - p, exact in binary (Python: Fraction)
});

test("powLn gives 10000^y for the positional encoding within 1 ulp", () => {
  const LN10000: [number, number] = [9.210340371976184, -8.683024893528997e-16];
  assert.equal(powLn(LN10000, 0), 1);
  near("10000^0.5", powLn(LN10000, 0.5), 100);
  near("10000^0.25", powLn(LN10000, 0.25), 10);
  near("10000^0.75", powLn(LN10000, 0.75), 1000);
});

test("specLog stays the generator's (a few ulp)", () => {
  assert.equal(specLog(1), 0);
  assert.ok(Math.abs(specLog(0.5) + Math.LN2) < 4e-16);
});

// ---- Piece edges ------------------------------------------------------------------------------
// Each piece edge of mathlib.ts (the branch thresholds, ldexp's steps, the trig reduction's second
// and third parts) at the edge, one ulp either side and inside each piece. The expected values
// never come from the port: exact identities, correctly rounded values (CR: mpmath at 300 bits,
// `float(mpmath.f(mpmath.mpf(x)))`, i.e. rounded once to the nearest double), or JavaScript's Math
// within a stated bound. tests/test_mathlib.py runs the same arguments through both engines
// (SPECIAL_INPUTS) and requires identical bits.

const dv = new DataView(new ArrayBuffer(8));

/** The double k encodings above x (x > 0; k < 0: below). */
function step(x: number, k: number): number {
  dv.setFloat64(0, x);
  dv.setBigInt64(0, dv.getBigInt64(0) + BigInt(k));
  return dv.getFloat64(0);
}

/** Exact for 0, +-1, +-inf, NaN and subnormals (as tests/test_mathlib.py's agrees); else within
 * `ulps` ulp of want. */
function close(name: string, got: number, want: number, ulps = 1): void {
  if (!Number.isFinite(want) || want === 0 || Math.abs(want) === 1 || Math.abs(want) < 2 ** -1022) {
    assert.ok(Object.is(got, want), `${name}: got ${got}, want exactly ${want}`);
  } else {
    assert.ok(Math.abs(got - want) <= ulps * ulp(want), `${name}: got ${got}, want ${want} within ${ulps} ulp`);
  }
}

const EXP_OVER = 709.782712893384; // 7.09782712893383973096e2 as a double: the largest x with exp(x) finite
const EXP_UNDER = -745.1332191019411; // -7.45133219101941108420e2: below it exp(x) rounds to 0
const SQRT_HALF = 0.7071067811865476;

// [x, CR] at each edge (the doubles before and after it in each triple) and inside the pieces.
const EDGES: [string, (x: number) => number, [number, number][]][] = [
  ["exp", exp, [
    [709.7827128933839, 1.7976931348620688e+308], [EXP_OVER, 1.7976931348622732e+308], [709.7827128933841, Infinity],
    [-745.1332191019412, 0], [EXP_UNDER, 5e-324], [-745.133219101941, 5e-324],
    [700, 1.0142320547350045e+304], [709.7, 1.6549840276802644e+308],
    [-740, 4.2e-322], [-708.3964185322641, 2.2250738585072626e-308], [-1000, 0]]],
  ["expm1", expm1, [
    // k = floor(x / ln2 + 1/2) steps at the doubles nearest (k - 1/2) ln2: -2|-1, -1|0, 0|1, 1|2, 19|20, 56|57
    [-1.039720770839918, -0.6464466094067263], [-1.0397207708399179, -0.6464466094067262],
    [-1.0397207708399177, -0.6464466094067262],
    [-0.3465735902799727, -0.2928932188134525], [-0.34657359027997264, -0.2928932188134525],
    [-0.3465735902799726, -0.2928932188134524],
    [0.3465735902799726, 0.414213562373095], [0.34657359027997264, 0.41421356237309503],
    [0.3465735902799727, 0.4142135623730951],
    [1.0397207708399177, 1.8284271247461892], [1.0397207708399179, 1.8284271247461898],
    [1.039720770839918, 1.8284271247461905],
    [13.516370020918933, 741454.2001894646], [13.516370020918934, 741454.2001894659],
    [13.516370020918936, 741454.2001894672],
    [39.1628157016369, 1.019048267604115e+17], [39.16281570163691, 1.0190482676041224e+17],
    [39.162815701636916, 1.0190482676041296e+17],
    // k = 1: r < -0.25 or not; r = -0.25 exactly at the double nearest ln2 - 1/4
    [0.44314718055994523, 0.5576015661428096], [0.4431471805599453, 0.5576015661428096],
    [0.44314718055994534, 0.5576015661428098],
    // EXPM1_TINY = 2^-54 (below: x itself; the negatives are checked below), EXPM1_MINUS_ONE = -40
    // (below: -1), EXP_OVER (above: inf)
    [5.551115123125782e-17, 5.551115123125782e-17], [2 ** -54, 2 ** -54], [5.551115123125784e-17, 5.551115123125784e-17],
    [1e-17, 1e-17], [1e-15, 1.0000000000000007e-15], [-1e-15, -9.999999999999995e-16],
    [-40.00000000000001, -1], [-40, -1], [-39.99999999999999, -1], [-39, -1], [-41, -1],
    [709.7827128933839, 1.7976931348620688e+308], [EXP_OVER, 1.7976931348622732e+308], [709.7827128933841, Infinity],
    [700, 1.0142320547350045e+304],
    // inside each branch: k = -1, 0, 1 (r < -0.25, r >= -0.25), -2, <= -2, 2..19, 20..56, > 56
    [-0.5, -0.3934693402873666], [0.1, 0.10517091807564763], [0.36, 0.43332941456034024], [0.8, 1.2255409284924677],
    [-1.4, -0.7534030360583935], [-30, -0.9999999999999064], [5, 147.4131591025766], [14, 1202603.2841647768],
    [30, 10686474581523.463], [38.7, 6.4149968824882744e+16], [39.5, 1.4276838118129198e+17],
    [100, 2.6881171418161356e+43]]],
  ["tanh", tanh, [
    [2.775557561562891e-17, 2.775557561562891e-17], [2 ** -55, 2 ** -55], [2.775557561562892e-17, 2.775557561562892e-17],
    [0.6249999999999999, 0.5545997223493823], [0.625, 0.5545997223493823], [0.6250000000000001, 0.5545997223493824],
    [21.999999999999996, 1], [22, 1], [22.000000000000004, 1],
    [1e-17, 1e-17], [0.3, 0.2913126124515909], [0.7, 0.6043677771171635], [5, 0.9999092042625951], [30, 1]]],
  ["log", log, [
    [2.225073858507201e-308, -708.3964185322641], [2 ** -1022, -708.3964185322641],
    [2.225073858507202e-308, -708.3964185322641],
    [0.7071067811865475, -0.34657359027997275], [SQRT_HALF, -0.3465735902799726], [0.7071067811865477, -0.3465735902799724],
    [3037000499.9760494, 21.834136187638276], [SQRT_HALF * 2 ** 32, 21.834136187638276],
    [3037000499.9760504, 21.83413618763828],
    [1.414213562373095, 0.3465735902799726], [2 * SQRT_HALF, 0.3465735902799727], [1.4142135623730954, 0.34657359027997287],
    [1e-310, -713.8013788281542], [0.75, -0.2876820724517809], [1.2, 0.1823215567939546], [5e-324, -744.4400719213812]]],
  ["sin", sin, [
    [7.450580596923827e-9, 7.450580596923827e-9], [2 ** -27, 2 ** -27], [7.45058059692383e-9, 7.45058059692383e-9],
    [1e-9, 1e-9], [0.1, 0.09983341664682815], [999999.9999999999, -0.34999350228034526], [TRIG_MAX, -0.34999350217129294]]],
  ["cos", cos, [
    [7.450580596923827e-9, 1], [2 ** -27, 1], [7.45058059692383e-9, 1],
    [1e-9, 1], [0.1, 0.9950041652780258], [999999.9999999999, 0.9367521274924002], [TRIG_MAX, 0.9367521275331447]]],
];

for (const [name, f, pairs] of EDGES) {
  test(`${name} at its piece edges, one ulp either side and inside the pieces (correctly rounded within 1 ulp)`, () => {
    for (const [x, want] of pairs) {
      close(`${name}(${x})`, f(x), want);
      if (name === "sin" || name === "tanh" || (name === "expm1" && Math.abs(x) < 1e-16)) {
        close(`${name}(${-x})`, f(-x), -want); // odd
      } else if (name === "cos") {
        close(`cos(${-x})`, f(-x), want); // even
      }
    }
  });
}

// Pinned exactly: at each of these the port's result is the correctly rounded value (CR, as above),
// and the same formula with a branch's other rounding order (a neighbouring piece, a reduction step
// skipped or added) is not; found by evaluating both over random arguments in the piece.
const CR_PINS: [string, (x: number) => number, [number, number][]][] = [
  ["expm1", expm1, [[0.3531472245458497, 0.4235407081409435], // k = 1, r < -0.25
    [0.8031820692274713, 1.2326340331854468], // k = 1, r >= -0.25
    [-37.18580470467418, -0.9999999999999999], // k <= -2
    [14.086087347181515, 1310719.242048586], // k = 20 (the 20 <= k <= 56 formula)
    [38.704387134788156, 6.4432021634231416e+16], // k = 56
    [39.419242534095034, 1.3169203639908456e+17]]], // k = 57
  ["log", log, [[SQRT_HALF * 2 ** 32, 21.834136187638276]]], // m = sqrt(1/2) exactly: kept in [sqrt(1/2), sqrt(2))
  ["specLog", specLog, [[SQRT_HALF, -0.3465735902799726], [2 * SQRT_HALF, 0.3465735902799727]]],
  // The reduction by pi/2: a second part of pi/2 (j - exponent(y0) > 16) and a third (> 49).
  ["sin", sin, [[27988.08901046197, 0.35221842465283437], // j - exponent(y0) = 16: one part only
    [35896.24264696789, 0.39400685880064185], // two parts
    [260.7521902479524, 4.4004292356778365e-13], [7059.158692616265, 8.72460985837269e-15]]], // three parts
  ["cos", cos, [[21056.88233947754, -0.3500072020064673], [-604575.0104822218, 0.8038598835714922],
    [50276.478031724255, -1.2582025534523678e-12]]],
];

// The doubles nearest n pi/2 for the eight n <= 1e6 / (pi/2) where that double comes closest to n pi/2
// (relative to its ulp; a search over every n with mpmath), and n = 1..4: [x, CR sin(x), CR cos(x)].
const NEAREST_MULTIPLES: [number, number, number][] = [
  [321307.9594422229, -1, -4.429600834596129e-17], // n = 204551: |x - n pi/2| = 7.6e-7 ulp(x)
  [642615.9188844458, 8.859201669192259e-17, -1], // n = 409102
  [871790.3905748408, -1, -4.0474943290166063e-16], // n = 554999
  [413441.44719405076, 1, -2.2756539951781544e-16], // n = 263205
  [826882.8943881015, -4.551307990356309e-16, -1], // n = 526410
  [597708.4226977065, 1, -7.712882152453689e-16], // n = 380513
  [687523.4150711851, -1, -9.484722486292142e-16], // n = 437691
  [505574.93494587863, -1, 4.994268073815922e-16], // n = 321859
  [Math.PI / 2, 1, 6.123233995736766e-17], [Math.PI, 1.2246467991473532e-16, -1],
  [4.71238898038469, -1, -1.8369701987210297e-16], [2 * Math.PI, -2.4492935982947064e-16, 1],
];

test("results pinned to the correctly rounded value where a branch's other rounding differs", () => {
  for (const [name, f, pairs] of CR_PINS) {
    for (const [x, want] of pairs) assert.equal(f(x), want, `${name}(${x})`);
  }
  for (const [x, s, c] of NEAREST_MULTIPLES) {
    assert.equal(sin(x), s, `sin(${x})`);
    assert.equal(sin(-x), -s, `sin(${-x})`);
    assert.equal(cos(x), c, `cos(${x})`);
    assert.equal(cos(-x), c, `cos(${-x})`);
  }
});

test("results pinned to the reference's bits where it is 1 ulp from the correctly rounded value", () => {
  // [x, reference/core/mathlib.py's value (np.float64 in, repr out), CR as above]. The engines must agree
  // bit for bit, and here the other rounding of the same branch happens to give the correctly
  // rounded value, so only the reference's bits pin the branch. Each is within 1 ulp of CR.
  const pins: [string, (x: number) => number, number, number, number][] = [
    ["expm1", expm1, -1.4732737414475974, -0.7708260006476659, -0.7708260006476658], // k = -2: the k <= -2 formula
    ["tanh", tanh, 0.625, 0.5545997223493824, 0.5545997223493823], // TANH_SERIES itself: the expm1 piece
    // j - exponent(y0) = 49 after the second part: no third part
    ["sin", sin, 28996.900192633744, -4.743641908509874e-11, -4.743641908509873e-11],
    ["sin", sin, 833825.8141525368, -1.8249506715266601e-9, -1.82495067152666e-9],
  ];
  for (const [name, f, x, ref, cr] of pins) {
    assert.equal(f(x), ref, `${name}(${x})`);
    close(`${name}(${x}) against CR`, ref, cr);
  }
});

test("sin and cos near every 97th multiple of pi/2 up to TRIG_MAX agree with Math.sin and Math.cos within 2 ulp", () => {
  // Math.sin and Math.cos (V8: fdlibm's, with its own reduction by pi/2) are within 1 ulp, and so
  // are ours: 2 ulp apart at most (measured over every n and +-3 ulp: 1). Without the second part
  // of pi/2 the results near n pi/2 go wrong from about their 11th digit (the third part moves
  // only the last bit there: pinned above).
  for (let n = 1; n * (Math.PI / 2) <= TRIG_MAX; n += 97) {
    for (let k = -2; k <= 2; k++) {
      const x = step(n * (Math.PI / 2), k);
      close(`sin(${x})`, sin(x), Math.sin(x), 2);
      close(`cos(${x})`, cos(x), Math.cos(x), 2);
    }
  }
});

test("sin and cos: the range check's message names the function; NaN and +-inf give NaN", () => {
  const message = (name: string, x: string) =>
    `${name}: |x| <= 1000000 is supported (three-part reduction by pi/2), got ${x}; scale the argument down first`;
  assert.throws(() => sin(1.5e6), { name: "RangeError", message: message("sin", "1500000") });
  assert.throws(() => cos(-2e6), { name: "RangeError", message: message("cos", "-2000000") });
  assert.throws(() => sin(step(TRIG_MAX, 1)), { name: "RangeError", message: message("sin", "1000000.0000000001") });
  assert.throws(() => cos(-step(TRIG_MAX, 1)), { name: "RangeError", message: message("cos", "-1000000.0000000001") });
  assert.throws(() => sin(Number.MAX_VALUE), RangeError);
  for (const x of [NaN, Infinity, -Infinity]) {
    assert.ok(Number.isNaN(sin(x)) && Number.isNaN(cos(x)), `sin, cos of ${x}`);
  }
});

test("exp, expm1, tanh at their overflow, NaN and sign edges", () => {
  assert.equal(expm1(Infinity), Infinity);
  assert.equal(expm1(1e308), Infinity);
  assert.ok(Number.isNaN(expm1(NaN)));
  assert.equal(exp(1e308), Infinity);
  assert.equal(exp(-1e308), 0);
  assert.equal(tanh(-Infinity), -1);
  assert.equal(tanh(-22), -1);
  assert.equal(tanh(22), 1);
  assert.ok(Object.is(tanh(-(2 ** -55)), -(2 ** -55)) && Object.is(tanh(-5e-324), -5e-324));
  assert.ok(Object.is(expm1(-5e-324), -5e-324) && Object.is(sin(-5e-324), -5e-324));
  assert.equal(cos(-5e-324), 1);
});

test("specLog: powers of two are k ln 2 (one rounding), others within 4 ulp of ln", () => {
  // s = 2^k: f = 1 after the halvings, t = 0, so specLog(s) = k * LN2 rounded once.
  for (const k of [-1074, -1022, -60, -1, 1, 2, 10, 60, 1023]) {
    assert.equal(specLog(2 ** k), k * Math.LN2, `specLog(2^${k})`);
  }
  // [s, CR ln s]; the generator's ln is a few ulp (series to t^21, e ln2 + 2 t p in doubles; at
  // most 3 over 40000 arguments spread over every binade).
  const lns = [[10, 2.302585092994046], [3, 1.0986122886681098], [0.1, -2.3025850929940455], [1e300, 690.7755278982137]];
  for (const [s, want] of lns) {
    close(`specLog(${s})`, specLog(s), want, 4);
  }
});

test("ldexp applies |k| beyond the exponent range in exact steps, rounding once at the end", () => {
  const MAX = Number.MAX_VALUE; // (2 - 2^-52) 2^1023
  // Upward: k <= 1023 in one multiplication, <= 2046 in two, beyond in three (k then clamped to 1023).
  assert.equal(ldexp(1, 1023), 2 ** 1023);
  assert.equal(ldexp(5e-324, 1074), 1);
  assert.equal(ldexp(5e-324, 2046), 2 ** 972);
  assert.equal(ldexp(5e-324, 2047), 2 ** 973); // the second step
  assert.equal(ldexp(5e-324, 2097), 2 ** 1023);
  assert.equal(ldexp(3 * 5e-324, 2096), 1.5 * 2 ** 1023);
  assert.equal(ldexp(5e-324, 2098), Infinity);
  assert.equal(ldexp(5e-324, 3069), Infinity);
  assert.equal(ldexp(5e-324, 3070), Infinity); // the clamp
  assert.equal(ldexp(-5e-324, 5000), -Infinity);
  assert.ok(Object.is(ldexp(0, 5000), 0) && Object.is(ldexp(-0, 5000), -0));
  // Downward: k >= -1022 in one multiplication, >= -1991 in two (by 2^-969, exact), beyond in three.
  assert.equal(ldexp(2 ** 1023, -1022), 2);
  assert.equal(ldexp(1, -1022), 2 ** -1022);
  assert.equal(ldexp(1, -1074), 5e-324);
  assert.equal(ldexp(1, -1075), 0); // a tie: to even
  assert.equal(ldexp(MAX, -1991), (2 - 2 ** -52) * 2 ** -968);
  assert.equal(ldexp(MAX, -1992), (2 - 2 ** -52) * 2 ** -969); // the second step
  assert.equal(ldexp(MAX, -2000), (2 - 2 ** -52) * 2 ** -977);
  assert.equal(ldexp(-MAX, -2000), -(2 - 2 ** -52) * 2 ** -977);
  assert.equal(ldexp(MAX, -2097), 2 ** -1073); // (2 - 2^-52) 2^-1074: rounded once, up
  assert.equal(ldexp(MAX, -2098), 5e-324); // 2^-1074 - 2^-1127: rounded once, up
  assert.equal(ldexp(1.5 * 2 ** 1000, -2074), 2 ** -1073); // 1.5 * 2^-1074, a tie: to even
  assert.equal(ldexp(1.25 * 2 ** 1000, -2074), 5e-324);
  assert.equal(ldexp(MAX, -2099), 0); // (2 - 2^-52) 2^-1076 < 2^-1075
  assert.equal(ldexp(MAX, -5000), 0); // the clamp
  assert.ok(Object.is(ldexp(1, -5000), 0) && Object.is(ldexp(-MAX, -5000), -0));
});

// expPair as its formula reads (horner over EXP_P, then ldexp): the specification of the
// unrolled, inlined form in mathlib.ts, which must give the same double for every input.
function expByFormula(hi: number, lo: number): number {
  const { LN2_HI, LN2_LO, INV_LN2, EXP_OVER, EXP_UNDER, EXP_P } = EXP_CONSTANTS;
  if (!(hi >= EXP_UNDER && hi <= EXP_OVER)) return hi > EXP_OVER ? Infinity : hi < EXP_UNDER ? 0 : hi;
  const k = Math.floor(hi * INV_LN2 + 0.5);
  const rHi = hi - k * LN2_HI;
  const rLo = k * LN2_LO - lo;
  const r = rHi - rLo;
  const t = r * r;
  const c = r - t * horner(EXP_P, t);
  const y = 1 - ((rLo - (r * c) / (2 - c)) - rHi);
  return ldexp(y, k);
}

/** The double n ulps above x (n < 0: below), through the bits. */
function ulpsFrom(x: number, n: number): number {
  const v = new DataView(new ArrayBuffer(8));
  v.setFloat64(0, x);
  const bits = v.getBigInt64(0);
  v.setBigInt64(0, x >= 0 ? bits + BigInt(n) : bits - BigInt(n));
  return v.getFloat64(0);
}

/** exp's test inputs: the edges, then 400000 others (the same stream every call). */
function expInputs(): { xs: number[]; next: () => number } {
  const { EXP_OVER, EXP_UNDER } = EXP_CONSTANTS;
  const xs: number[] = [0, -0, NaN, Infinity, -Infinity, 5e-324, -5e-324, 1e-300, -1e-300, 2 ** -30, -(2 ** -30),
    Number.MAX_VALUE, -Number.MAX_VALUE, 1e6, -1e6, 0.5 * Math.LN2, -0.5 * Math.LN2];
  // the overflow and underflow bounds, k = 1024 (ldexp's upward steps), the k = -1022 / -1023
  // edge (ldexp's downward steps) and the subnormal results, a few ulps either side
  for (const edge of [EXP_OVER, EXP_UNDER, 1023.5 * Math.LN2, -1022.5 * Math.LN2, -1021.5 * Math.LN2, -1074 * Math.LN2, -1075 * Math.LN2]) {
    for (let n = -40; n <= 40; n++) xs.push(ulpsFrom(edge, n));
  }
  // the masked scores of maskedSoftmax: -1e6 minus a row's max, and a max of masked values only
  for (const max of [0, -0, 1, -1, 3.25, -17.5, 1e3, -1e6, 1e6, 709, -745]) xs.push(-1e6 - max, max - 1e6, -1e6 - (-1e6));
  let s = 12345; // a fixed linear congruential stream (no generator state shared with other tests)
  const next = () => (s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32;
  for (let i = 0; i < 100000; i++) xs.push((next() * 2 - 1) * 760); // the whole finite range and past it
  for (let i = 0; i < 100000; i++) xs.push((next() * 2 - 1) * 20); // softmax scores and logits
  for (let i = 0; i < 50000; i++) xs.push(-708 - next() * 38); // results subnormal or near
  const raw = new DataView(new ArrayBuffer(8));
  for (let i = 0; i < 50000; i++) { // any bit pattern: every exponent, NaNs and infinities included
    raw.setUint32(0, next() * 2 ** 32);
    raw.setUint32(4, next() * 2 ** 32);
    xs.push(raw.getFloat64(0));
  }
  return { xs, next };
}

test("exp and powLn give the bits of their formula (horner, ldexp) on edges and 400000 other inputs", () => {
  const { xs, next } = expInputs();
  let differ = 0, first = "";
  for (const x of xs) {
    const got = exp(x), want = expByFormula(x, 0);
    if (!Object.is(got, want)) { if (differ++ === 0) first = `exp(${x}) = ${got}, the formula gives ${want}`; }
  }
  // powLn: the pair (y c0, its product error + y c1) reaches expPair with lo != 0
  const LN = [9.210340371976184, -8.683024893528997e-16] as [number, number];
  for (let i = 0; i < 100000; i++) {
    const y = (next() * 2 - 1) * 80;
    const p = y * LN[0], [, e] = twoProd(y, LN[0]);
    const got = powLn(LN, y), want = expByFormula(p, e + y * LN[1]);
    if (!Object.is(got, want)) { if (differ++ === 0) first = `powLn(ln 10000, ${y}) = ${got}, the formula gives ${want}`; }
  }
  assert.equal(differ, 0, `${differ} inputs differ from the formula; first: ${first}`);
});

test("[wasm] kernels/rows.ts's expAll (four at a time in the row kernels, ldexp's cases left to exp) gives exp's bits on the same inputs", () => {
  const { xs } = expInputs();
  // every start offset mod 4 and a short tail: each input meets every lane position
  for (const shift of [0, 1, 2, 3]) {
    const x = Float64Array.from(xs.slice(shift, xs.length - shift));
    sameBitsInKernels(`exp, shift ${shift}`, (inWs) => {
      const t = inWs({ shape: [x.length], data: x });
      expAll(t.data);
      return [t.data.slice()];
    });
  }
  // and the JavaScript side is exp itself
  const y = Float64Array.from(xs.slice(0, 1000));
  expAll(y);
  y.forEach((v, i) => assert.ok(Object.is(v, exp(xs[i])), `element ${i}`));
});
