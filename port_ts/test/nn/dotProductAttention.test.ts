// Scaled dot-product attention: the lesson's three-key example, the 1/sqrt(D) scale against a
// direct loop, masking, dropout's draws and scale, and arbitrary leading axes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { intTensor, tensor, type IntTensor, type Tensor } from "../../src/core/ops.ts";
import { dotProductAttentionForward, dotProductAttentionBackward, transposeLast } from "../../src/nn/dotProductAttention.ts";
import { dot, fdError, tolerance } from "../toolkit.ts";

const DIRECT = tolerance("dot_product_attention", "direct").value;
const ROW_SUM = tolerance("dot_product_attention", "row_sum").value;
const FD = tolerance("dot_product_attention", "fd").value, STEP = tolerance("dot_product_attention", "fd").step!; // second-order central differences
const SHIFT = tolerance("dot_product_attention", "shift").value;

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

test("transposeLast swaps the last two axes of every leading slice", () => {
  const t = transposeLast(tensor([2, 2, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]));
  assert.deepEqual(t.shape, [2, 3, 2]);
  assert.deepEqual(Array.from(t.data), [1, 4, 2, 5, 3, 6, 7, 10, 8, 11, 9, 12]);
});

test("backward: dq, dk, dv match central differences (cross-attention, causal-style 2-D lengths, dropout)", () => {
  const cases: [number[], number[], number[], IntTensor | null, number][] = [
    [[2, 3, 4], [2, 5, 4], [2, 5, 2], intTensor([2, 3], [1, 0, 5, 2, 3, 4]), 0],
    [[2, 3, 4], [2, 5, 4], [2, 5, 2], intTensor([2], [5, 3]), 0.3],
    [[1, 2, 2, 3], [1, 2, 4, 3], [1, 2, 4, 5], null, 0],
  ];
  for (const [qs, ks, vs, lens, p] of cases) {
    const g = new Generator(14);
    const q = g.normal(qs), k = g.normal(ks), v = g.normal(vs), dout = g.normal([...qs.slice(0, -1), vs[vs.length - 1]]);
    const counter = g.counter;
    const { cache } = dotProductAttentionForward(q, k, v, lens, p, g);
    const grads = dotProductAttentionBackward(dout, cache);
    const run = () => {
      const again = new Generator(14);
      again.counter = counter; // the same dropout mask on every evaluation
      return dotProductAttentionForward(q, k, v, lens, p, again).out;
    };
    for (const [name, x, dx] of [["q", q, grads.dq], ["k", k, grads.dk], ["v", v, grads.dv]] as const) {
      const { worst, scale } = fdError(x, dx, () => dot(run(), dout), STEP);
      assert.ok(scale > 0.01, `d${name}: the check needs a gradient of some size`);
      assert.ok(worst <= FD * scale, `q ${qs}, p ${p}: d${name} error ${worst} of scale ${scale}`);
    }
  }
});

test("backward: moving every key by the same vector changes nothing, so dk sums to 0 over keys", () => {
  const g = new Generator(15);
  const q = g.normal([2, 3, 4]), k = g.normal([2, 5, 4]), v = g.normal([2, 5, 3]), dout = g.normal([2, 3, 3]);
  const { dk } = dotProductAttentionBackward(dout, dotProductAttentionForward(q, k, v, intTensor([2], [2, 5])).cache);
  for (let b = 0; b < 2; b++) {
    for (let c = 0; c < 4; c++) {
      let s = 0;
      for (let j = 0; j < 5; j++) s += dk.data[(b * 5 + j) * 4 + c];
      assert.ok(Math.abs(s) <= SHIFT, `batch ${b} feature ${c}: keys' gradients sum to ${s}`);
    }
  }
  // keys 2..4 of batch 0 are masked: they reach nothing, so get exactly 0
  for (let j = 2; j < 5; j++) for (let c = 0; c < 4; c++) assert.equal(dk.data[j * 4 + c], 0);
});

test("backward with leading axes (B, H, ...): each (b, h) slice is its own backward, bit for bit", () => {
  const g = new Generator(16);
  const B = 2, H = 2, Q = 3, K = 4, D = 2, V = 3;
  const q = g.normal([B, H, Q, D]), k = g.normal([B, H, K, D]), v = g.normal([B, H, K, V]), dout = g.normal([B, H, Q, V]);
  const lens = intTensor([B, Q], [1, 2, 3, 4, 0, 2]);
  const all = dotProductAttentionBackward(dout, dotProductAttentionForward(q, k, v, lens).cache);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const p = b * H + h;
      const slice = (t: Tensor, T: number, C: number) => ({ shape: [1, T, C], data: t.data.slice(p * T * C, (p + 1) * T * C) });
      const one = dotProductAttentionBackward(slice(dout, Q, V),
        dotProductAttentionForward(slice(q, Q, D), slice(k, K, D), slice(v, K, V), intTensor([1, Q], lens.data.slice(b * Q, (b + 1) * Q))).cache);
      assert.deepEqual(Array.from(all.dq.data.subarray(p * Q * D, (p + 1) * Q * D)), Array.from(one.dq.data));
      assert.deepEqual(Array.from(all.dk.data.subarray(p * K * D, (p + 1) * K * D)), Array.from(one.dk.data));
      assert.deepEqual(Array.from(all.dv.data.subarray(p * K * V, (p + 1) * K * V)), Array.from(one.dv.data));
    }
  }
  assert.throws(() => dotProductAttentionBackward(g.normal([B, H, Q, V + 1]), dotProductAttentionForward(q, k, v).cache), /dout must have shape/);
});
