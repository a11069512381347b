// Multi-head attention: the d % h check, and the heads' products on slices of the projections
// (no copies) against split heads, dotProductAttention and merged heads, bit for bit in both
// product kernels and in a workspace. Values (the head split, cross-attention at d 12 h 3, causal
// and 1-D lengths with length-0 rows, one head, dropout's one mask) are the cases
// multi_head_attention.*, bit for bit against the reference; the backward is compared with the
// reference's in tests/test_backward_attention.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { intTensor, matmul, matmulNT, weightGrad, type IntTensor, type Tensor } from "../../src/core/ops.ts";
import { inWorkspace, newWorkspace } from "../../src/kernels/memory.ts";
import { productEngine } from "../../src/kernels/product.ts";
import { dotProductAttentionBackward, dotProductAttentionForward } from "../../src/nn/dotProductAttention.ts";
import { multiHeadAttentionForward, splitHeads, mergeHeads, multiHeadAttentionBackward } from "../../src/nn/multiHeadAttention.ts";

function params(g: Generator, d: number, dq: number, dkv: number): Record<string, Tensor> {
  const w = (o: number, i: number) => g.uniform([o, i], -1 / Math.sqrt(i), 1 / Math.sqrt(i));
  return { W_q: w(d, dq), W_k: w(d, dkv), W_v: w(d, dkv), W_o: w(d, d) };
}

test("d not divisible by h is refused with a clear message", () => {
  const g = new Generator(34);
  const x = g.normal([1, 2, 6]);
  assert.throws(() => multiHeadAttentionForward(x, x, params(g, 6, 6, 6), 4), /d = 6 must be divisible by numHeads = 4/);
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
