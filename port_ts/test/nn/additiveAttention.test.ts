// Additive attention: w_v . tanh(W_q q + W_k k) against a direct loop, masking, saturation of
// tanh at large inputs, and shape checks on the parameters.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { intTensor, type IntTensor, type Tensor } from "../../src/core/ops.ts";
import { additiveAttentionForward, additiveAttentionBackward } from "../../src/nn/additiveAttention.ts";
import { dot, fdError, tolerance } from "../toolkit.ts";

const DIRECT = tolerance("additive_attention", "direct").value;
const ROW_SUM = tolerance("additive_attention", "row_sum").value;
const MASKED = tolerance("additive_attention", "masked").value;
const FD = tolerance("additive_attention", "fd").value, STEP = tolerance("additive_attention", "fd").step!; // second-order central differences

function draw(seed: number, B: number, Q: number, K: number, Dq: number, Dk: number, H: number, V: number, std = 1) {
  const g = new Generator(seed);
  const q = g.normal([B, Q, Dq], 0, std), k = g.normal([B, K, Dk], 0, std), v = g.normal([B, K, V]);
  const params: Record<string, Tensor> = {
    W_q: g.uniform([H, Dq], -1 / Math.sqrt(Dq), 1 / Math.sqrt(Dq)),
    W_k: g.uniform([H, Dk], -1 / Math.sqrt(Dk), 1 / Math.sqrt(Dk)),
    w_v: g.uniform([1, H], -1 / Math.sqrt(H), 1 / Math.sqrt(H)),
  };
  return { q, k, v, params };
}

test("scores are w_v . tanh(W_q q + W_k k), as a direct loop per (query, key)", () => {
  const B = 2, Q = 3, K = 4, Dq = 5, Dk = 3, H = 6, V = 2;
  const { q, k, v, params } = draw(20, B, Q, K, Dq, Dk, H, V);
  const { out, cache } = additiveAttentionForward(q, k, v, params);
  assert.deepEqual(cache.features.shape, [B, Q, K, H]);
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < Q; i++) {
      const e: number[] = [];
      for (let j = 0; j < K; j++) {
        let score = 0;
        for (let h = 0; h < H; h++) {
          let pre = 0;
          for (let c = 0; c < Dq; c++) pre += params.W_q.data[h * Dq + c] * q.data[(b * Q + i) * Dq + c];
          for (let c = 0; c < Dk; c++) pre += params.W_k.data[h * Dk + c] * k.data[(b * K + j) * Dk + c];
          score += params.w_v.data[h] * Math.tanh(pre);
        }
        e.push(Math.exp(score));
      }
      const z = e.reduce((a, c) => a + c, 0);
      for (let j = 0; j < K; j++) assert.ok(Math.abs(cache.weights.data[(b * Q + i) * K + j] - e[j] / z) <= DIRECT);
      for (let c = 0; c < V; c++) {
        let o = 0;
        for (let j = 0; j < K; j++) o += (e[j] / z) * v.data[(b * K + j) * V + c];
        assert.ok(Math.abs(out.data[(b * Q + i) * V + c] - o) <= DIRECT);
      }
    }
  }
});

test("1-D and 2-D lengths: masked keys ~0, rows sum to 1, length 0 uniform", () => {
  const { q, k, v, params } = draw(21, 2, 3, 4, 3, 5, 4, 2);
  const lens = [[1, 4, 0], [2, 3, 4]];
  const { cache } = additiveAttentionForward(q, k, v, params, intTensor([2, 3], lens.flat()));
  for (let r = 0; r < 6; r++) {
    const row = Array.from(cache.weights.data.subarray(r * 4, r * 4 + 4));
    const len = lens[Math.floor(r / 3)][r % 3];
    if (len === 0) { row.forEach((w) => assert.equal(w, 0.25)); continue; }
    row.slice(len).forEach((w) => assert.ok(w <= MASKED));
    assert.ok(Math.abs(row.reduce((a, c) => a + c, 0) - 1) <= ROW_SUM);
  }
  const one = additiveAttentionForward(q, k, v, params, intTensor([2], [0, 2])).cache.weights;
  for (let i = 0; i < 12; i++) assert.equal(one.data[i], 0.25);
  for (let r = 3; r < 6; r++) assert.ok(one.data[r * 4 + 2] <= MASKED && one.data[r * 4 + 3] <= MASKED);
});

test("large inputs saturate tanh at +-1 without overflow; weights stay a distribution", () => {
  const { q, k, v, params } = draw(22, 2, 2, 5, 6, 6, 4, 3, 1000);
  const { out, cache } = additiveAttentionForward(q, k, v, params);
  const t = cache.tanh.data;
  assert.ok(t.filter((x) => Math.abs(x) === 1).length > t.length / 2, "most tanh values should be exactly +-1");
  assert.ok(out.data.every(Number.isFinite));
  for (let r = 0; r < 4; r++) {
    let s = 0;
    for (let j = 0; j < 5; j++) s += cache.weights.data[r * 5 + j];
    assert.ok(Math.abs(s - 1) <= ROW_SUM);
  }
});

test("parameters of the wrong shape are refused", () => {
  const { q, k, v, params } = draw(23, 1, 2, 3, 4, 4, 5, 2);
  assert.throws(() => additiveAttentionForward(q, k, v, { ...params, w_v: params.W_q }), /do not fit/);
});

test("backward: every input and parameter gradient matches central differences (lengths with 0, dropout)", () => {
  const B = 3, Q = 2, K = 4, Dq = 3, Dk = 5, H = 4, V = 2;
  const settings: [IntTensor | null, number][] = [[intTensor([B], [0, 2, 4]), 0], [intTensor([B, Q], [1, 4, 0, 3, 2, 2]), 0.25]];
  for (const [lens, p] of settings) {
    const { q, k, v, params } = draw(23, B, Q, K, Dq, Dk, H, V);
    const g = new Generator(24);
    const dout = g.normal([B, Q, V]);
    const counter = g.counter;
    const { cache } = additiveAttentionForward(q, k, v, params, lens, p, g);
    const { dq, dk, dv, grads } = additiveAttentionBackward(dout, cache);
    const loss = () => {
      const again = new Generator(24);
      again.counter = counter; // the same dropout mask on every evaluation
      return dot(additiveAttentionForward(q, k, v, params, lens, p, again).out, dout);
    };
    const checks: [string, Tensor, Tensor][] = [
      ["q", q, dq], ["k", k, dk], ["v", v, dv], ["W_q", params.W_q, grads.W_q], ["W_k", params.W_k, grads.W_k], ["w_v", params.w_v, grads.w_v],
    ];
    for (const [name, x, dx] of checks) {
      assert.deepEqual(dx.shape, x.shape, `d${name} has ${name}'s shape`);
      const { worst, scale } = fdError(x, dx, loss, STEP);
      assert.ok(scale > 0.01, `d${name}: the check needs a gradient of some size`);
      assert.ok(worst <= FD * scale, `p ${p}: d${name} error ${worst} of scale ${scale}`);
    }
  }
});

test("backward: a key no query may see gets dk = 0 and dv = 0 exactly", () => {
  const B = 2, Q = 3, K = 4, V = 2;
  const { q, k, v, params } = draw(25, B, Q, K, 3, 3, 5, V);
  const dout = new Generator(26).normal([B, Q, V]);
  const { dk, dv } = additiveAttentionBackward(dout, additiveAttentionForward(q, k, v, params, intTensor([B], [2, 4])).cache);
  for (let j = 2; j < K; j++) {
    for (let c = 0; c < 3; c++) assert.equal(dk.data[j * 3 + c], 0, `dk[0, ${j}, ${c}]`);
    for (let c = 0; c < V; c++) assert.equal(dv.data[j * V + c], 0, `dv[0, ${j}, ${c}]`);
  }
  assert.ok(dk.data.slice(0, 6).some((x) => x !== 0) && dk.data.slice(12).some((x) => x !== 0));
});
