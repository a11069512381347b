// Scaled dot-product attention: the lesson's three-key example, the 1/sqrt(D) scale against a
// direct loop, masking, dropout's draws and scale, and arbitrary leading axes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../src/rng.ts";
import { intTensor, tensor, type Tensor } from "../src/ops.ts";
import { dotProductAttentionForward } from "../src/dotProductAttention.ts";

const DIRECT = 1e-14; // against a direct formula in another summation order, values of size ~1
const ROW_SUM = 1e-15; // a row of <= 6 weights summed in order

test("the lesson's three-key example: weights 0.434, 0.214, 0.351 and output (6.1, 3.9)", () => {
  const q = tensor([1, 1, 2], [1, 0]);
  const k = tensor([1, 3, 2], [1, 0, 0, 1, 0.7, 0.7]);
  const v = tensor([1, 3, 2], [10, 0, 0, 10, 5, 5]);
  const { out, cache } = dotProductAttentionForward(q, k, v);
  assert.deepEqual(Array.from(cache.weights.data, (w) => w.toFixed(3)), ["0.434", "0.214", "0.351"]);
  assert.deepEqual(Array.from(out.data, (o) => o.toFixed(1)), ["6.1", "3.9"]);
});

test("scores are q.k / sqrt(D): matches a direct softmax-weighted sum", () => {
  const g = new Generator(10);
  const B = 2, Q = 3, K = 4, D = 5, V = 2;
  const q = g.normal([B, Q, D]), k = g.normal([B, K, D]), v = g.normal([B, K, V]);
  const { out, cache } = dotProductAttentionForward(q, k, v);
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < Q; i++) {
      const s: number[] = [];
      for (let j = 0; j < K; j++) {
        let dot = 0;
        for (let t = D - 1; t >= 0; t--) dot += q.data[(b * Q + i) * D + t] * k.data[(b * K + j) * D + t];
        s.push(Math.exp(dot / Math.sqrt(D)));
      }
      const z = s.reduce((a, c) => a + c, 0);
      for (let j = 0; j < K; j++) assert.ok(Math.abs(cache.weights.data[(b * Q + i) * K + j] - s[j] / z) <= DIRECT);
      for (let c = 0; c < V; c++) {
        let o = 0;
        for (let j = 0; j < K; j++) o += (s[j] / z) * v.data[(b * K + j) * V + c];
        assert.ok(Math.abs(out.data[(b * Q + i) * V + c] - o) <= DIRECT, `out[${b},${i},${c}]`);
      }
    }
  }
});

test("masked keys: their values cannot reach the output; a length-0 row averages all values", () => {
  const g = new Generator(11);
  const q = g.normal([2, 2, 3]), k = g.normal([2, 4, 3]), v = g.normal([2, 4, 2]);
  const lens = intTensor([2], [2, 0]);
  const a = dotProductAttentionForward(q, k, v, lens).out;
  const v2: Tensor = { shape: v.shape, data: v.data.slice() };
  for (const j of [2, 3]) for (const c of [0, 1]) v2.data[(0 * 4 + j) * 2 + c] = 1e6;
  const b = dotProductAttentionForward(q, k, v2, lens).out;
  for (let i = 0; i < 4; i++) assert.equal(b.data[i], a.data[i], "batch 0 must ignore keys 2 and 3");
  for (let i = 0; i < 2; i++) {
    for (let c = 0; c < 2; c++) {
      let mean = 0;
      for (let j = 0; j < 4; j++) mean += v.data[(4 + j) * 2 + c] / 4;
      assert.ok(Math.abs(a.data[(2 + i) * 2 + c] - mean) <= DIRECT);
    }
  }
});

test("dropout: p = 0 draws nothing; p > 0 draws one mask of the weights' shape and rescales kept weights", () => {
  const g = new Generator(12);
  const q = g.normal([2, 3, 4]), k = g.normal([2, 6, 4]), v = g.normal([2, 6, 5]);
  const before = g.counter;
  const plain = dotProductAttentionForward(q, k, v, null, 0, g);
  assert.equal(g.counter, before);
  assert.equal(plain.cache.mask, null);
  const p = 0.5;
  const { out, cache } = dotProductAttentionForward(q, k, v, null, p, g);
  assert.equal(g.counter, before + 2 * 3 * 6);
  const mask = cache.mask!;
  assert.ok(mask.data.some((m) => m === 0) && mask.data.some((m) => m === 1));
  cache.dropped.data.forEach((w, i) => assert.equal(w, mask.data[i] === 1 ? cache.weights.data[i] * 2 : 0));
  for (let r = 0; r < 6; r++) {
    let s = 0;
    for (let j = 0; j < 6; j++) s += cache.weights.data[r * 6 + j];
    assert.ok(Math.abs(s - 1) <= ROW_SUM, "cache.weights are taken before dropout");
  }
  assert.notDeepEqual(Array.from(out.data), Array.from(plain.out.data));
  assert.throws(() => dotProductAttentionForward(q, k, v, null, 0.5, null), /needs a generator/);
});

test("leading axes (B, H, ...): each (b, h) slice is its own attention", () => {
  const g = new Generator(13);
  const B = 2, H = 3, Q = 2, K = 3, D = 4;
  const q = g.normal([B, H, Q, D]), k = g.normal([B, H, K, D]), v = g.normal([B, H, K, D]);
  const lens = intTensor([B], [1, 3]);
  const { out } = dotProductAttentionForward(q, k, v, lens);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const p = b * H + h;
      const slice = (t: Tensor, T: number) => ({ shape: [1, T, D], data: t.data.slice(p * T * D, (p + 1) * T * D) });
      const one = dotProductAttentionForward(slice(q, Q), slice(k, K), slice(v, K), intTensor([1], [lens.data[b]])).out;
      assert.deepEqual(Array.from(out.data.subarray(p * Q * D, (p + 1) * Q * D)), Array.from(one.data));
    }
  }
});
