// Rotary position embeddings: the angles are the sinusoidal table's bit for bit, position 0 is the
// identity, a rotation keeps each pair's length, scores depend on the gap between positions alone,
// the backward against central differences, and the refusals. Tolerances: rope's declared ones.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { intTensor, type Tensor } from "../../src/core/ops.ts";
import { sinusoidalTable } from "../../src/nn/positionalEncoding.ts";
import { ropeAngles, ropeAttentionForward, ropeBackward, ropeForward } from "../../src/nn/rope.ts";
import { close, dot, fdError, tolerance } from "../toolkit.ts";

const NORM = tolerance("rope", "norm").value, GAP = tolerance("rope", "relative_position").value;
const FD = tolerance("rope", "fd");

const range = (n: number, from = 0) => intTensor([n], Array.from({ length: n }, (_, i) => from + i));

test("the angles are the sinusoidal table's columns, bit for bit", () => {
  for (const d of [2, 8, 64]) {
    const { cos, sin } = ropeAngles(range(50), d), P = sinusoidalTable(50, d), half = d / 2;
    for (let t = 0; t < 50; t++) {
      for (let i = 0; i < half; i++) {
        assert.equal(cos.data[t * half + i], P.data[t * d + 2 * i + 1], `d ${d}, cos at (${t}, ${i})`);
        assert.equal(sin.data[t * half + i], P.data[t * d + 2 * i], `d ${d}, sin at (${t}, ${i})`);
      }
    }
  }
});

test("position 0 is the identity and every pair keeps its length", () => {
  const x = new Generator(60).normal([3, 7, 10]);
  const { out } = ropeForward(x, intTensor([7], [0, 1, 2, 3, 100, 4096, 8191]));
  const lengths = (v: Tensor) => Array.from({ length: v.data.length / 2 }, (_, p) => v.data[2 * p] ** 2 + v.data[2 * p + 1] ** 2);
  close(lengths(out), lengths(x), "pair lengths", NORM);
  for (let b = 0; b < 3; b++) {
    for (let f = 0; f < 10; f++) assert.equal(out.data[b * 70 + f], x.data[b * 70 + f], `batch ${b}, position 0, feature ${f}`);
  }
  assert.notEqual(out.data[10], x.data[10]);
});

test("the scores of two steps depend on the gap between their positions alone", () => {
  const g = new Generator(61);
  const q = g.normal([1, 4, 8]), k = g.normal([1, 4, 8]);
  const scores = (shift: number) => {
    const qr = ropeForward(q, range(4, shift)).out.data, kr = ropeForward(k, range(4, shift)).out.data;
    const s: number[] = [];
    for (let m = 0; m < 4; m++) for (let n = 0; n < 4; n++) { let acc = 0; for (let f = 0; f < 8; f++) acc += qr[m * 8 + f] * kr[n * 8 + f]; s.push(acc); }
    return s;
  };
  for (const shift of [1, 37, 1000]) close(scores(shift), scores(0), `q . k at positions shifted by ${shift}`, GAP);
});

test("backward: dx matches central differences of L = sum(out * dout), with 4-D inputs and given positions", () => {
  const g = new Generator(62);
  const x = g.normal([2, 3, 5, 6]), dout = g.normal([2, 3, 5, 6]), positions = intTensor([5], [0, 3, 4, 90, 1000]);
  const dx = ropeBackward(dout, ropeForward(x, positions).cache);
  const { worst, scale } = fdError(x, dx, () => dot(ropeForward(x, positions).out, dout), FD.step!);
  assert.ok(scale > 0.1, "the check needs a gradient of some size");
  assert.ok(worst <= FD.value * scale, `dx error ${worst} of scale ${scale}`);
});

test("attention on rotated queries and keys: the same weights when every position moves by the same amount", () => {
  const g = new Generator(63);
  const q = g.normal([2, 3, 6]), k = g.normal([2, 4, 6]), v = g.normal([2, 4, 2]), lens = intTensor([2], [4, 2]);
  const a = ropeAttentionForward(q, k, v, lens), b = ropeAttentionForward(q, k, v, lens, range(3, 1000), range(4, 1000));
  close(b.cache.weights.data, a.cache.weights.data, "weights at positions + 1000", tolerance("rope_attention", "relative_position").value);
  for (let j = 2; j < 4; j++) assert.equal(a.cache.weights.data[12 + j], 0, `batch 1 query 0 key ${j} is padded`);
});

test("wrong shapes and positions are refused, saying what was expected", () => {
  assert.throws(() => ropeForward(new Generator(64).normal([2, 3, 5])), /even, positive feature dim d .*got d = 5/);
  assert.throws(() => ropeForward(new Generator(64).normal([2, 3, 4]), range(2)), /one position per step: x has T = 3 steps, positions \[2\]/);
  const { cache } = ropeForward(new Generator(64).normal([2, 3, 4]));
  assert.throws(() => ropeBackward(new Generator(64).normal([2, 3, 6]), cache), /dout of shape \(\.\.\., 3, 4\), got \[2,3,6\]/);
});
