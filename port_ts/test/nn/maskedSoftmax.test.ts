// Masked softmax: rows sum to 1, masked keys get ~0, a length-0 row is uniform, huge scores do
// not overflow, and 1-D / 2-D lengths apply as the book's masked_softmax.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { empty, inWorkspace, intTensor, newWorkspace, tensor, type IntTensor, type Tensor } from "../../src/core/ops.ts";
import { MASK_VALUE, maskedSoftmaxForward, keepMask, maskedSoftmaxBackward } from "../../src/nn/maskedSoftmax.ts";
import { exp } from "../../src/core/mathlib.ts";
import { dot, fdError, sameBitsInKernels, tolerance } from "../toolkit.ts";

// Tolerances, each with its reason.
const ROW_SUM = tolerance("masked_softmax", "row_sum").value;
const NAIVE = tolerance("masked_softmax", "naive").value;
const MASKED = tolerance("masked_softmax", "masked").value;
const FD = tolerance("masked_softmax", "fd").value, STEP = tolerance("masked_softmax", "fd").step!; // second-order central differences
const SHIFT = tolerance("masked_softmax", "shift").value;

function rows(data: Float64Array, K: number): number[][] {
  const out: number[][] = [];
  for (let r = 0; r < data.length / K; r++) out.push(Array.from(data.subarray(r * K, (r + 1) * K)));
  return out;
}

function sum(xs: number[]): number {
  let s = 0;
  for (const x of xs) s += x;
  return s;
}

test("without a mask, rows sum to 1 and match the unshifted formula on small scores", () => {
  const x = new Generator(1).normal([2, 3, 5]);
  const { out } = maskedSoftmaxForward(x);
  const xs = rows(x.data, 5);
  rows(out.data, 5).forEach((row, r) => {
    assert.ok(Math.abs(sum(row) - 1) <= ROW_SUM, `row ${r} sums to ${sum(row)}`);
    const e = xs[r].map(Math.exp);
    const z = sum(e);
    row.forEach((w, k) => assert.ok(Math.abs(w - e[k] / z) <= NAIVE, `row ${r} key ${k}: ${w} vs ${e[k] / z}`));
  });
});

test("1-D lengths: keys at or past the length get ~0, kept keys sum to 1, length 0 is uniform", () => {
  const B = 3, Q = 2, K = 5;
  const lens = [0, 2, 5];
  const { out } = maskedSoftmaxForward(new Generator(2).normal([B, Q, K]), intTensor([B], lens));
  rows(out.data, K).forEach((row, r) => {
    const len = lens[Math.floor(r / Q)];
    if (len === 0) {
      row.forEach((w) => assert.equal(w, 1 / K));
      return;
    }
    assert.ok(Math.abs(sum(row.slice(0, len)) - 1) <= ROW_SUM);
    row.slice(len).forEach((w) => assert.ok(w <= MASKED, `masked weight ${w}`));
    row.slice(0, len).forEach((w) => assert.ok(w > 0));
  });
});

test("2-D lengths: each query row has its own length", () => {
  const lens = [[0, 1, 4], [4, 0, 2]];
  const { out } = maskedSoftmaxForward(new Generator(3).normal([2, 3, 4]), intTensor([2, 3], lens.flat()));
  rows(out.data, 4).forEach((row, r) => {
    const len = lens[Math.floor(r / 3)][r % 3];
    if (len === 0) return row.forEach((w) => assert.equal(w, 0.25));
    if (len === 1) assert.equal(row[0], 1);
    row.slice(len).forEach((w) => assert.ok(w <= MASKED));
    assert.ok(Math.abs(sum(row) - 1) <= ROW_SUM);
  });
});

test("huge scores do not overflow: std 1000 and mean 800 give finite rows summing to 1", () => {
  for (const [mean, std] of [[0, 1000], [800, 1], [-800, 1]]) {
    const x = new Generator(4).normal([2, 3, 6], mean, std);
    assert.ok(x.data.some((v) => Math.exp(v) === Infinity || Math.exp(v) === 0), "the naive formula must fail here");
    const { out } = maskedSoftmaxForward(x, intTensor([2], [3, 6]));
    assert.ok(out.data.every(Number.isFinite));
    rows(out.data, 6).forEach((row) => assert.ok(Math.abs(sum(row) - 1) <= ROW_SUM));
  }
  // two huge, equal scores split the weight evenly
  const { out } = maskedSoftmaxForward(tensor([1, 1, 3], [1e300, 1e300, -1e300]));
  assert.deepEqual(Array.from(out.data), [0.5, 0.5, 0]);
});

test("K = 1: every row is [1], masked or not", () => {
  const { out } = maskedSoftmaxForward(new Generator(5).normal([2, 3, 1]), intTensor([2], [0, 1]));
  assert.deepEqual(Array.from(out.data), [1, 1, 1, 1, 1, 1]);
});

test("4-D (B, H, Q, K): lengths apply to every head", () => {
  const B = 2, H = 3, Q = 2, K = 4;
  const x = new Generator(6).normal([B, H, Q, K]);
  const lens2 = [[1, 3], [4, 0]];
  const { out } = maskedSoftmaxForward(x, intTensor([B, Q], lens2.flat()));
  rows(out.data, K).forEach((row, r) => {
    const b = Math.floor(r / (H * Q)), i = r % Q;
    const len = lens2[b][i];
    if (len === 0) return row.forEach((w) => assert.equal(w, 1 / K));
    row.slice(len).forEach((w) => assert.ok(w <= MASKED));
    assert.ok(Math.abs(sum(row) - 1) <= ROW_SUM);
  });
  const keep = keepMask([B, H, Q, K], intTensor([B], [2, 4]))!;
  assert.deepEqual(Array.from(keep.subarray(0, K)), [1, 1, 0, 0]);
  assert.deepEqual(Array.from(keep.subarray(H * Q * K, H * Q * K + K)), [1, 1, 1, 1]);
});

test("lengths of the wrong shape are refused with the expected shapes", () => {
  assert.throws(() => maskedSoftmaxForward(new Generator(7).normal([2, 3, 4]), intTensor([3], [1, 2, 3])), /\(2,\) or \(2, 3\)/);
});

/** L = sum(out * dout) in index order. */
function lossOf(x: Tensor, dout: Tensor, lens: IntTensor | null): number {
  return dot(maskedSoftmaxForward(x, lens).out, dout);
}

test("backward: dx matches central differences, with 1-D and 2-D lengths and a length-0 row", () => {
  for (const lens of [null, intTensor([3], [0, 3, 5]), intTensor([3, 2], [2, 5, 0, 1, 4, 3])]) {
    const g = new Generator(8);
    const x = g.normal([3, 2, 5], 0, 2), dout = g.normal([3, 2, 5]);
    const dx = maskedSoftmaxBackward(dout, maskedSoftmaxForward(x, lens).cache);
    const { worst, scale } = fdError(x, dx, () => lossOf(x, dout, lens), STEP);
    assert.ok(scale > 0.1, "the check needs a gradient of some size");
    assert.ok(worst <= FD * scale, `lens ${lens && Array.from(lens.data)}: error ${worst} of scale ${scale}`);
  }
});

test("backward: masked scores and length-0 rows get exactly 0; every row of dx sums to 0", () => {
  const g = new Generator(9);
  const x = g.normal([2, 3, 5]), dout = g.normal([2, 3, 5]);
  const lens = intTensor([2, 3], [0, 2, 5, 1, 3, 4]);
  const dx = maskedSoftmaxBackward(dout, maskedSoftmaxForward(x, lens).cache);
  rows(dx.data, 5).forEach((row, r) => {
    const len = lens.data[r];
    row.slice(len).forEach((d) => assert.equal(d, 0, `row ${r}: masked key`));
    if (len > 1) assert.ok(row.slice(0, len).some((d) => d !== 0));
    assert.ok(Math.abs(sum(row)) <= SHIFT, `row ${r} of dx sums to ${sum(row)}`);
  });
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
