// Act 3's statistic: the biased variance, the draw order (q then k, per d in list order), and
// Var(q.k) ~ d raw but ~ 1 once divided by sqrt(d).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { biasedVariance, scoreScaling } from "../../src/nn/scoreScaling.ts";

test("biased variance divides by n, not n - 1", () => {
  const { mean, variance } = biasedVariance(Float64Array.from([1, 2, 3, 4]));
  assert.equal(mean, 2.5);
  assert.equal(variance, 1.25);
});

test("draws q (n, d) then k (n, d) for each d in list order", () => {
  const dims = [3, 1, 2], n = 7;
  const st = scoreScaling(dims, n, new Generator(21));
  const g = new Generator(21);
  dims.forEach((d, s) => {
    const q = g.normal([n, d]).data, k = g.normal([n, d]).data;
    let sum = 0;
    for (let r = 0; r < n; r++) {
      let dot = 0;
      for (let f = 0; f < d; f++) dot += q[r * d + f] * k[r * d + f];
      sum += dot;
    }
    assert.equal(st.dotsMean.data[s], sum / n, `d = ${d}`);
  });
});

test("raw variance grows like d; scaled variance stays near 1 (N = 1000, 6 standard errors)", () => {
  const dims = [1, 4, 16, 64, 256], N = 1000;
  const st = scoreScaling(dims, N, new Generator(440));
  dims.forEach((d, s) => {
    // z = q.k: Var z = d, E z^4 = 3d^2 + 6d, so the sample variance / d has standard error
    // sqrt((E z^4 - d^2) / N) / d = sqrt((2 + 6/d) / N); expectation (N - 1)/N for the biased one.
    const se = Math.sqrt((2 + 6 / d) / N);
    const expected = (N - 1) / N;
    assert.ok(Math.abs(st.varRaw.data[s] / d - expected) <= 6 * se, `d = ${d}: var_raw / d = ${st.varRaw.data[s] / d}`);
    assert.ok(Math.abs(st.varScaled.data[s] - expected) <= 6 * se, `d = ${d}: var_scaled = ${st.varScaled.data[s]}`);
  });
  assert.ok(st.varRaw.data[4] > 100 * st.varRaw.data[0]);
});

test("dims must be positive integers", () => {
  assert.throws(() => scoreScaling([4, 0], 10, new Generator(1)), /positive integer dims, got 0/);
});
