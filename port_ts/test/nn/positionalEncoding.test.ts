// Sinusoidal positions: the table's first rows and frequencies, sin^2 + cos^2 = 1, odd d refused,
// the forward's add and dropout draws, and the cosine similarity depending only on the gap.
// Backward: dout through the forward's dropout, checked by finite differences.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { tensor } from "../../src/core/ops.ts";
import { sinusoidalTable, positionalEncodingForward, positionalEncodingBackward, positionSimilarity } from "../../src/nn/positionalEncoding.ts";
import { checkFd, dot, tolerance } from "../toolkit.ts";

const ULP_1 = tolerance("sinusoidal_table", "ulp_1").value;
const PAIR = tolerance("sinusoidal_table", "pair").value;
const GAP = tolerance("position_similarity", "gap").value;

test("position 0 is (0, 1, 0, 1, ...); position i uses frequencies 10000^(-2j/d)", () => {
  const d = 4;
  const P = sinusoidalTable(7, d);
  assert.deepEqual(P.shape, [7, 4]);
  assert.deepEqual(Array.from(P.data.subarray(0, 4)), [0, 1, 0, 1]);
  for (let i = 0; i < 7; i++) {
    // d = 4: w_0 = 1, w_1 = 10000^(-1/2) = 1/100
    const want = [Math.sin(i), Math.cos(i), Math.sin(i / 100), Math.cos(i / 100)];
    for (let f = 0; f < d; f++) assert.ok(Math.abs(P.data[i * d + f] - want[f]) <= ULP_1, `P[${i}, ${f}]`);
  }
});

test("each (sin, cos) pair lies on the unit circle, so every row has norm sqrt(d/2)", () => {
  const L = 200, d = 16;
  const P = sinusoidalTable(L, d);
  for (let i = 0; i < L; i++) {
    for (let j = 0; j < d / 2; j++) {
      const s = P.data[i * d + 2 * j], c = P.data[i * d + 2 * j + 1];
      assert.ok(Math.abs(s * s + c * c - 1) <= PAIR, `row ${i}, pair ${j}`);
    }
  }
});

test("frequencies fall with the feature index: column 0 is sin(i), the last pair barely moves", () => {
  const d = 8, P = sinusoidalTable(10, d);
  // w_3 = 10000^(-6/8) = 1/1000: over 9 positions its sine stays below 0.01
  for (let i = 0; i < 10; i++) assert.ok(P.data[i * d + 6] < 0.01 && P.data[i * d + 6] >= 0);
  assert.ok(P.data[4 * d] < 0); // sin(4) < 0
});

test("an odd model dim is refused with a message naming d", () => {
  assert.throws(() => sinusoidalTable(10, 5), /even, positive model dim d .* got d = 5/);
});

test("forward without dropout adds rows 0..T-1 of the table and draws nothing", () => {
  const g = new Generator(3);
  const x = g.normal([2, 3, 4]);
  const before = g.counter;
  const { out, cache } = positionalEncodingForward(x, 0, g);
  assert.equal(g.counter, before);
  assert.equal(cache.mask, null);
  const P = sinusoidalTable(3, 4);
  for (let b = 0; b < 2; b++) {
    for (let r = 0; r < 12; r++) assert.equal(out.data[b * 12 + r], x.data[b * 12 + r] + P.data[r]);
  }
});

test("forward with dropout draws one keep mask of x's shape after the add, scaled by 1/(1-p)", () => {
  const p = 0.25;
  const x = tensor([1, 2, 2], [1, -2, 3, -4]);
  const g = new Generator(9);
  const { out, cache } = positionalEncodingForward(x, p, g);
  assert.equal(g.counter, 4);
  const mask = new Generator(9).keepMask([1, 2, 2], p).data;
  assert.deepEqual(Array.from(cache.mask!.data), Array.from(mask));
  const P = sinusoidalTable(2, 2).data;
  for (let i = 0; i < 4; i++) assert.equal(out.data[i], (x.data[i] + P[i]) * (mask[i] / (1 - p)));
  assert.throws(() => positionalEncodingForward(x, p, null), /needs a generator/);
});

test("cosine similarity: 1 on the diagonal, symmetric, a function of the gap alone", () => {
  const L = 24, d = 16;
  const S = positionSimilarity(sinusoidalTable(L, d)).data;
  for (let i = 0; i < L; i++) {
    assert.ok(Math.abs(S[i * L + i] - 1) <= 2 * ULP_1);
    for (let j = 0; j < L; j++) {
      assert.equal(S[i * L + j], S[j * L + i]);
      if (i + 1 < L && j + 1 < L) assert.ok(Math.abs(S[(i + 1) * L + j + 1] - S[i * L + j]) <= GAP, `(${i}, ${j})`);
      let want = 0; // (2/d) sum_j cos((i - j) w_j), w_j = 10000^(-2j/d)
      for (let f = 0; f < d / 2; f++) want += Math.cos((i - j) * Math.pow(10000, (-2 * f) / d));
      assert.ok(Math.abs(S[i * L + j] - (2 / d) * want) <= GAP, `(${i}, ${j}) against the closed form`);
    }
  }
});

// ---- backward ----

test("backward: the table is a constant, so dx = dout through the forward's dropout", () => {
  const x = new Generator(39).normal([2, 3, 4]), dout = new Generator(40).normal([2, 3, 4]);
  const d0 = positionalEncodingBackward(dout, positionalEncodingForward(x).cache);
  assert.deepEqual(Array.from(d0.data), Array.from(dout.data));
  const p = 0.25;
  const { cache } = positionalEncodingForward(x, p, new Generator(41));
  const dx = positionalEncodingBackward(dout, cache);
  for (let i = 0; i < dx.data.length; i++) assert.equal(dx.data[i], dout.data[i] * (cache.mask!.data[i] / (1 - p)));
  checkFd("dx", () => dot(positionalEncodingForward(x, p, new Generator(41)).out, dout), x, dx, tolerance("positional_encoding", "fd_in_order"));
});
