// Masked softmax: the shape checks, scores at +-1e300, the bits of the element-by-element rule for
// lengths no case has (beyond K, negative) and scores below the mask value, and the row kernels.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { empty, intTensor, tensor, type IntTensor, type Tensor } from "../../src/core/ops.ts";
import { inWorkspace, newWorkspace } from "../../src/kernels/memory.ts";
import { MASK_VALUE, maskedSoftmaxForward, keepMask, maskedSoftmaxBackward } from "../../src/nn/maskedSoftmax.ts";
import { exp } from "../../src/core/mathlib.ts";
import { sameBitsInKernels } from "../toolkit.ts";

// Values on the catalogue's regimes (no mask, 1-D and 2-D lengths with length-0 rows, K = 1, 4-D
// heads, huge and very negative scores) are the cases masked_softmax.*, bit for bit against the
// reference; the backward is tests/test_backward_attention.py's. Here: what no case reaches.

test("scores at +-1e300: two equal huge scores split the weight evenly", () => {
  const { out } = maskedSoftmaxForward(tensor([1, 1, 3], [1e300, 1e300, -1e300]));
  assert.deepEqual(Array.from(out.data), [0.5, 0.5, 0]);
});

test("lengths of the wrong shape are refused with the expected shapes", () => {
  assert.throws(() => maskedSoftmaxForward(new Generator(7).normal([2, 3, 4]), intTensor([3], [1, 2, 3])), /\(2,\) or \(2, 3\)/);
});

test("backward: a dout of another shape than the output is refused", () => {
  const g = new Generator(9);
  const x = g.normal([2, 3, 5]);
  assert.throws(() => maskedSoftmaxBackward(g.normal([2, 3, 4]), maskedSoftmaxForward(x).cache), /output's shape \(2,3,5\)/);
});

// The masked softmax element by element, as its rule reads: v = kept ? x : MASK_VALUE through
// keepMask, max, exp and the in-order sum over all K keys, then the backward's dot over all K
// and 0 where masked. maskedSoftmaxForward / Backward handle the masked tail of a row in one
// go; they must give these bits.
function naiveForward(x: Tensor, lens: IntTensor | null): Float64Array {
  const K = x.shape[x.shape.length - 1], keep = keepMask(x.shape, lens), out = new Float64Array(x.data.length);
  for (let o = 0; o < out.length; o += K) {
    let max = -Infinity;
    for (let k = 0; k < K; k++) {
      out[o + k] = keep === null || keep[o + k] ? x.data[o + k] : MASK_VALUE;
      if (out[o + k] > max) max = out[o + k];
    }
    let s = 0;
    for (let k = 0; k < K; k++) { out[o + k] = exp(out[o + k] - max); s += out[o + k]; }
    for (let k = 0; k < K; k++) out[o + k] = out[o + k] / s;
  }
  return out;
}

function naiveBackward(dout: Tensor, y: Float64Array, keep: Uint8Array | null, K: number): Float64Array {
  const dx = new Float64Array(y.length);
  for (let o = 0; o < y.length; o += K) {
    let d = 0;
    for (let k = 0; k < K; k++) d += dout.data[o + k] * y[o + k];
    for (let k = 0; k < K; k++) dx[o + k] = keep === null || keep[o + k] ? y[o + k] * (dout.data[o + k] - d) : 0;
  }
  return dx;
}

function sameBits(got: Float64Array, want: Float64Array, what: string): void {
  for (let i = 0; i < want.length; i++) {
    assert.ok(Object.is(got[i], want[i]), `${what}: element ${i} is ${got[i]}, the rule gives ${want[i]}`);
  }
}

test("forward and backward give the bits of the element-by-element rule, for any lengths (0, K, beyond K, negative)", () => {
  const g = new Generator(10);
  const cases: [number[], IntTensor | null][] = [
    [[3, 2, 7], null],
    [[3, 2, 7], intTensor([3], [0, 7, 3])],
    [[4, 2, 3, 7], intTensor([4], [1, 9, -2, 6])], // beyond K and negative: all kept, none kept
    [[2, 2, 3, 5], intTensor([2, 3], [1, 2, 3, 0, 5, 8])], // 2-D (B, Q), as the causal mask
    [[2, 4, 1], intTensor([2], [0, 1])],
  ];
  for (const [shape, lens] of cases) {
    const x = g.normal(shape, 0, 3);
    x.data[0] = -0; x.data[x.data.length - 1] = 800; // a signed zero, a score whose exp overflows unshifted
    const { out, cache } = maskedSoftmaxForward(x, lens);
    const what = `shape (${shape}), lens ${lens && Array.from(lens.data)}`;
    sameBits(out.data, naiveForward(x, lens), `forward, ${what}`);
    const dout = g.normal(shape);
    // in a workspace whose memory holds NaN from before: every element must be written
    const ws = newWorkspace();
    inWorkspace(ws, () => { for (let i = 0; i < 4; i++) empty([out.data.length]).data.fill(NaN); });
    const dx = inWorkspace(ws, () => maskedSoftmaxBackward(dout, cache).data.slice());
    sameBits(dx, naiveBackward(dout, out.data, keepMask(shape, lens), shape[shape.length - 1]), `backward, ${what}`);
  }
  // all kept scores below the mask value: the max is then MASK_VALUE's, the masked keys dominate
  const low = tensor([1, 1, 4], [-2e6, -3e6, -2.5e6, -1e7]);
  sameBits(maskedSoftmaxForward(low, intTensor([1], [2])).out.data, naiveForward(low, intTensor([1], [2])), "scores below -1e6");
});

test("[wasm] the exps of a whole tensor in the row kernels give the loops' bits, masked, subnormal and overflowing scores included", () => {
  const g = new Generator(11);
  const cases: [number[], IntTensor | null][] = [
    [[3, 2, 7], null], [[3, 2, 7], intTensor([3], [0, 7, 3])], [[2, 2, 3, 5], intTensor([2, 3], [1, 2, 3, 0, 5, 8])],
    [[2, 4, 1], intTensor([2], [0, 1])], [[96, 2, 7, 7], intTensor([96], Array.from({ length: 96 }, (_, b) => b % 8))],
    [[3, 1, 7], intTensor([3], [2, 9, 0])], [[5, 7], null], // odd row counts: the last row shares a pass with itself
  ];
  for (const [shape, lens] of cases) {
    const x = g.normal(shape, 0, 3);
    x.data[0] = -0; x.data[x.data.length - 1] = 800;
    for (let i = 3; i < x.data.length; i += 11) x.data[i] = -(700 + (i % 60)); // exps subnormal or near: the scalar exp's share
    const K = shape[shape.length - 1];
    if (x.data.length >= 3 * K) { // a row near MASK_VALUE (the kernels must be given the same), a row with a NaN
      for (let k = 0; k < K; k++) x.data[K + k] = MASK_VALUE + (k - 2) * 0.75;
      x.data[2 * K + 1] = NaN;
    }
    const dout = g.normal(shape);
    sameBitsInKernels(`shape (${shape})`, (inWs) => {
      const { out, cache } = maskedSoftmaxForward(inWs(x), lens);
      return [out.data.slice(), maskedSoftmaxBackward(inWs(dout), cache).data.slice()];
    });
  }
});
