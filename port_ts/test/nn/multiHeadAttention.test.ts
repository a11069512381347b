// Multi-head attention: the head split (head i = features [i*D, (i+1)*D)), per-head scaling by
// 1/sqrt(D) against a direct per-head computation, lengths on every head, dropout's one mask,
// and the d % h check.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { inWorkspace, intTensor, matmul, matmulNT, newWorkspace, productEngine, tensor, weightGrad, type IntTensor, type Tensor } from "../../src/core/ops.ts";
import { dotProductAttentionBackward, dotProductAttentionForward } from "../../src/nn/dotProductAttention.ts";
import { multiHeadAttentionForward, splitHeads, mergeHeads, multiHeadAttentionBackward } from "../../src/nn/multiHeadAttention.ts";
import { dot, fdError, tolerance } from "../toolkit.ts";

const DIRECT = tolerance("multi_head_attention", "direct").value;
const MASKED = tolerance("multi_head_attention", "masked").value;
const FD = tolerance("multi_head_attention", "fd").value, STEP = tolerance("multi_head_attention", "fd").step!; // second-order central differences

function params(g: Generator, d: number, dq: number, dkv: number): Record<string, Tensor> {
  const w = (o: number, i: number) => g.uniform([o, i], -1 / Math.sqrt(i), 1 / Math.sqrt(i));
  return { W_q: w(d, dq), W_k: w(d, dkv), W_v: w(d, dkv), W_o: w(d, d) };
}

/** x (T, n) W^T for one batch row, as plain arrays. */
function project(x: Float64Array, T: number, n: number, W: Tensor): number[][] {
  const d = W.shape[0];
  return Array.from({ length: T }, (_, t) => Array.from({ length: d }, (_, o) => {
    let s = 0;
    for (let c = n - 1; c >= 0; c--) s += x[t * n + c] * W.data[o * n + c];
    return s;
  }));
}

test("splitHeads: head h holds features [h*D, (h+1)*D); mergeHeads inverts it", () => {
  const x = tensor([1, 2, 6], [0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15]);
  const s = splitHeads(x, 3);
  assert.deepEqual(s.shape, [1, 3, 2, 2]);
  assert.deepEqual(Array.from(s.data), [0, 1, 10, 11, 2, 3, 12, 13, 4, 5, 14, 15]);
  assert.deepEqual(Array.from(mergeHeads(s).data), Array.from(x.data));
});

test("cross-attention equals a direct per-head computation with scale 1/sqrt(d/h)", () => {
  const g = new Generator(30);
  const B = 2, Q = 3, K = 5, d = 12, h = 3, dq = 7, dkv = 5, D = d / h;
  const xq = g.normal([B, Q, dq]), xkv = g.normal([B, K, dkv]);
  const p = params(g, d, dq, dkv);
  const lens = [5, 2];
  const { out, cache } = multiHeadAttentionForward(xq, xkv, p, h, intTensor([B], lens));
  assert.deepEqual(cache.weights.shape, [B, h, Q, K]);
  for (let b = 0; b < B; b++) {
    const qp = project(xq.data.subarray(b * Q * dq), Q, dq, p.W_q);
    const kp = project(xkv.data.subarray(b * K * dkv), K, dkv, p.W_k);
    const vp = project(xkv.data.subarray(b * K * dkv), K, dkv, p.W_v);
    const concat = Array.from({ length: Q }, () => new Float64Array(d));
    for (let head = 0; head < h; head++) {
      for (let i = 0; i < Q; i++) {
        const e = kp.map((kr, j) => {
          let s = 0;
          for (let c = 0; c < D; c++) s += qp[i][head * D + c] * kr[head * D + c];
          return j < lens[b] ? Math.exp(s / Math.sqrt(D)) : 0;
        });
        const z = e.reduce((a, c) => a + c, 0);
        for (let j = 0; j < K; j++) {
          const w = cache.weights.data[((b * h + head) * Q + i) * K + j];
          assert.ok(Math.abs(w - e[j] / z) <= DIRECT, `weights[${b},${head},${i},${j}]`);
        }
        for (let c = 0; c < D; c++) concat[i][head * D + c] = e.reduce((a, ej, j) => a + (ej / z) * vp[j][head * D + c], 0);
      }
    }
    for (let i = 0; i < Q; i++) {
      for (let o = 0; o < d; o++) {
        let s = 0;
        for (let c = 0; c < d; c++) s += concat[i][c] * p.W_o.data[o * d + c];
        assert.ok(Math.abs(out.data[(b * Q + i) * d + o] - s) <= DIRECT, `out[${b},${i},${o}]`);
      }
    }
  }
});

test("2-D (causal) lengths apply to every head; length 0 is uniform on every head", () => {
  const g = new Generator(31);
  const B = 2, T = 4, d = 8, h = 4;
  const x = g.normal([B, T, d]);
  const causal = intTensor([B, T], [1, 2, 3, 4, 0, 2, 3, 4]);
  const { cache } = multiHeadAttentionForward(x, x, params(g, d, d, d), h, causal);
  for (let b = 0; b < B; b++) for (let head = 0; head < h; head++) for (let i = 0; i < T; i++) {
    const row = cache.weights.data.subarray(((b * h + head) * T + i) * T, ((b * h + head) * T + i + 1) * T);
    const len = causal.data[b * T + i];
    if (len === 0) { row.forEach((w) => assert.equal(w, 1 / T)); continue; }
    for (let j = len; j < T; j++) assert.ok(row[j] <= MASKED, `head ${head} query ${i} sees future key ${j}`);
  }
});

test("one head is plain dot-product attention with scale 1/sqrt(d)", () => {
  const g = new Generator(32);
  const x = g.normal([1, 3, 4]);
  const p = params(g, 4, 4, 4);
  const { cache } = multiHeadAttentionForward(x, x, p, 1);
  const qp = project(x.data, 3, 4, p.W_q), kp = project(x.data, 3, 4, p.W_k);
  for (let i = 0; i < 3; i++) {
    const e = kp.map((kr) => Math.exp(kr.reduce((a, kc, c) => a + qp[i][c] * kc, 0) / 2));
    const z = e.reduce((a, c) => a + c, 0);
    for (let j = 0; j < 3; j++) assert.ok(Math.abs(cache.weights.data[i * 3 + j] - e[j] / z) <= DIRECT);
  }
});

test("dropout draws one keep mask for the whole (B, H, Q, K) weights tensor", () => {
  const g = new Generator(33);
  const x = g.normal([2, 5, 16]);
  const p = params(g, 16, 16, 16);
  const before = g.counter;
  const { cache } = multiHeadAttentionForward(x, x, p, 4, null, 0.1, g);
  assert.equal(g.counter - before, 2 * 4 * 5 * 5);
  assert.deepEqual(cache.attn.mask!.shape, [2, 4, 5, 5]);
});

test("d not divisible by h is refused with a clear message", () => {
  const g = new Generator(34);
  const x = g.normal([1, 2, 6]);
  assert.throws(() => multiHeadAttentionForward(x, x, params(g, 6, 6, 6), 4), /d = 6 must be divisible by numHeads = 4/);
});

/** Worst |analytic - numeric| / the numeric gradient's scale over x's coordinates, for
 * loss() = sum(out * dout) with x perturbed in place. */
function centralError(x: Tensor, analytic: Tensor, loss: () => number): number {
  const { worst, scale } = fdError(x, analytic, loss, STEP);
  assert.ok(scale > 0.01, "the check needs a gradient of some size");
  return worst / scale;
}

function lossWith(xq: Tensor, xkv: Tensor, p: Record<string, Tensor>, h: number, lens: IntTensor | null, dropoutP: number,
  seed: number, counter: number, dout: Tensor): () => number {
  return () => {
    const g = new Generator(seed);
    g.counter = counter; // the same dropout mask on every evaluation
    return dot(multiHeadAttentionForward(xq, xkv, p, h, lens, dropoutP, g).out, dout);
  };
}

test("backward, cross-attention: dxQ, dxKv and every weight match central differences", () => {
  const g = new Generator(35);
  const B = 2, Q = 3, K = 4, d = 6, h = 3, dq = 5, dkv = 4;
  const xq = g.normal([B, Q, dq]), xkv = g.normal([B, K, dkv]), p = params(g, d, dq, dkv), dout = g.normal([B, Q, d]);
  const lens = intTensor([B], [0, 3]), counter = g.counter;
  const { dxQ, dxKv, grads } = multiHeadAttentionBackward(dout, multiHeadAttentionForward(xq, xkv, p, h, lens, 0.2, g).cache);
  const loss = lossWith(xq, xkv, p, h, lens, 0.2, 35, counter, dout);
  const checks: [string, Tensor, Tensor][] = [["xQ", xq, dxQ], ["xKv", xkv, dxKv], ...["W_q", "W_k", "W_v", "W_o"].map(
    (n): [string, Tensor, Tensor] => [n, p[n], grads[n]])];
  for (const [name, x, dx] of checks) {
    assert.deepEqual(dx.shape, x.shape, `d${name} has ${name}'s shape`);
    const err = centralError(x, dx, loss);
    assert.ok(err <= FD, `d${name}: relative error ${err}`);
  }
});

test("backward, causal self-attention: the input's gradient is dxQ + dxKv", () => {
  const g = new Generator(36);
  const B = 2, T = 4, d = 8, h = 2;
  const x = g.normal([B, T, d]), p = params(g, d, d, d), dout = g.normal([B, T, d]);
  const causal = intTensor([B, T], [1, 2, 3, 4, 1, 2, 3, 4]);
  const { dxQ, dxKv } = multiHeadAttentionBackward(dout, multiHeadAttentionForward(x, x, p, h, causal).cache);
  const dx = tensor(x.shape, dxQ.data.map((a, i) => a + dxKv.data[i]));
  assert.ok(centralError(x, dx, lossWith(x, x, p, h, causal, 0, 36, 0, dout)) <= FD);
  // dxQ alone is not the input's gradient: the keys and values carry a real share
  assert.ok(centralError(x, dxQ, lossWith(x, x, p, h, causal, 0, 36, 0, dout)) > 0.01);
});

// Multi-head attention as its lines read: project, split the heads (copies), dotProductAttention,
// merge, project; the backward through the same pieces. multiHeadAttention runs the heads' products
// on slices of the projections instead (no copies); it must give these bits.
function splitForward(xQ: Tensor, xKV: Tensor, p: Record<string, Tensor>, H: number, lens: IntTensor | null, dropoutP: number, rng: Generator | null) {
  const qh = splitHeads(matmulNT(xQ, p.W_q), H), kh = splitHeads(matmulNT(xKV, p.W_k), H), vh = splitHeads(matmulNT(xKV, p.W_v), H);
  const { out: heads, cache } = dotProductAttentionForward(qh, kh, vh, lens, dropoutP, rng);
  const concat = mergeHeads(heads);
  return { out: matmulNT(concat, p.W_o), concat, cache };
}

function splitBackward(dout: Tensor, xQ: Tensor, xKV: Tensor, p: Record<string, Tensor>, H: number, f: ReturnType<typeof splitForward>) {
  const { dq, dk, dv } = dotProductAttentionBackward(splitHeads(matmul(dout, p.W_o), H), f.cache);
  const dQ = mergeHeads(dq), dK = mergeHeads(dk), dV = mergeHeads(dv);
  const dxKv = matmul(dK, p.W_k), fromV = matmul(dV, p.W_v).data;
  for (let i = 0; i < fromV.length; i++) dxKv.data[i] = dxKv.data[i] + fromV[i];
  return { dxQ: matmul(dQ, p.W_q), dxKv, W_q: weightGrad(dQ, xQ), W_k: weightGrad(dK, xKV), W_v: weightGrad(dV, xKV), W_o: weightGrad(dout, f.concat) };
}

function sameBits(got: Float64Array, want: Float64Array, what: string): void {
  assert.equal(got.length, want.length, `${what}: size`);
  for (let i = 0; i < want.length; i++) assert.ok(Object.is(got[i], want[i]), `${what}: element ${i} is ${got[i]}, split heads give ${want[i]}`);
}

for (const mode of ["js", "wasm"] as const) {
  test(`[${mode}] forward and backward give the bits of split heads, dotProductAttention, merged heads (in a workspace too)`, () => {
    productEngine.mode = mode;
    const ws = newWorkspace();
    try {
      // [B, Q, K, d, H, dq_in, dkv_in, lens, dropout]: D = 8 (in place under Wasm), 3 and 5 (copied), one head
      const cases: [number, number, number, number, number, number, number, IntTensor | null, number][] = [
        [4, 7, 7, 16, 2, 16, 16, intTensor([4], [7, 3, 0, 5]), 0],
        [3, 5, 6, 9, 3, 4, 7, intTensor([3, 5], [1, 2, 3, 4, 5, 6, 0, 2, 2, 6, 1, 1, 3, 3, 3]), 0],
        [2, 6, 4, 10, 2, 10, 10, null, 0.2],
        [2, 3, 3, 8, 1, 8, 8, intTensor([2], [2, 3]), 0],
      ];
      for (let step = 0; step < 2; step++) {
        for (const [B, Q, K, d, H, dq, dkv, lens, p] of cases) {
          const what = `B ${B} Q ${Q} K ${K} d ${d} H ${H} p ${p}, step ${step}`;
          const g = new Generator(40);
          const xQ = g.normal([B, Q, dq]), xKV = g.normal([B, K, dkv]), prm = params(g, d, dq, dkv), dout = g.normal([B, Q, d]);
          const want = splitForward(xQ, xKV, prm, H, lens, p, p > 0 ? new Generator(41) : null);
          const wantGrads = splitBackward(dout, xQ, xKV, prm, H, want);
          const got = inWorkspace(ws, () => {
            const { out, cache } = multiHeadAttentionForward(xQ, xKV, prm, H, lens, p, p > 0 ? new Generator(41) : null);
            const { dxQ, dxKv, grads } = multiHeadAttentionBackward(dout, cache);
            const copy = (t: Tensor) => t.data.slice();
            const gradCopies: Record<string, Float64Array> = {};
            for (const [n, t] of Object.entries(grads)) gradCopies[n] = copy(t);
            return { out: copy(out), weights: copy(cache.weights), dxQ: copy(dxQ), dxKv: copy(dxKv), grads: gradCopies };
          });
          sameBits(got.out, want.out.data, `out, ${what}`);
          sameBits(got.weights, want.cache.weights.data, `weights, ${what}`);
          sameBits(got.dxQ, wantGrads.dxQ.data, `dxQ, ${what}`);
          sameBits(got.dxKv, wantGrads.dxKv.data, `dxKv, ${what}`);
          for (const n of ["W_q", "W_k", "W_v", "W_o"] as const) sameBits(got.grads[n], wantGrads[n].data, `d${n}, ${what}`);
        }
      }
    } finally { productEngine.mode = "auto"; }
  });
}
