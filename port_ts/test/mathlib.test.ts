// mathlib: known values (correctly rounded, from mpmath at 200 bits) within 1 ulp, special
// values exactly, ldexp's single rounding, the trig range check. Bit identity with the reference
// is tested by tests/test_mathlib.py (SHA-256 over ~1e6 inputs per function).
import { test } from "node:test";
import assert from "node:assert/strict";
import { exp, expm1, log, sin, cos, tanh, ldexp, powLn, twoProd, specLog, TRIG_MAX } from "../src/mathlib.ts";

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
