// Softmax cross-entropy: log V for equal logits, a two-class value by hand, padding weights
// that exclude positions entirely, stability at large offsets, sequenceWeights, input errors,
// and the gradient against finite differences and its closed form.
import { test } from "node:test";
import assert from "node:assert/strict";
import { intTensor, tensor } from "../../src/core/ops.ts";
import { Generator } from "../../src/core/rng.ts";
import { crossEntropyBackward, crossEntropyForward, sequenceWeights } from "../../src/nn/loss.ts";
import { sameBitsInKernels } from "../toolkit.ts";

test("equal logits give log V, and the gradient (1/V - onehot) / N", () => {
  const V = 5, N = 3;
  const { loss, cache } = crossEntropyForward(tensor([N, V], new Array(N * V).fill(2.5)), intTensor([N], [0, 4, 2]));
  assert.ok(Math.abs(loss - Math.log(V)) <= 2.3e-16, `loss ${loss}`);
  const d = crossEntropyBackward(cache);
  assert.deepEqual(d.shape, [N, V]);
  assert.equal(d.data[0], (0.2 - 1) * (1 / 3));
  assert.equal(d.data[1], 0.2 * (1 / 3));
  assert.equal(d.data[1 * V + 4], (0.2 - 1) * (1 / 3));
});

test("two classes by hand: logits (0, ln 3), target 0 gives ln 4; target 1 gives ln(4/3)", () => {
  const z = tensor([2, 2], [0, Math.log(3), 0, Math.log(3)]);
  const { loss, cache } = crossEntropyForward(z, intTensor([2], [0, 1]));
  assert.ok(Math.abs(loss - (Math.log(4) + Math.log(4 / 3)) / 2) <= 4.5e-16, `loss ${loss}`);
  // softmax (1/4, 3/4): row 0 gets (1/4 - 1, 3/4) / 2, row 1 (1/4, 3/4 - 1) / 2
  const want = [-0.375, 0.375, 0.125, -0.125];
  const d = crossEntropyBackward(cache);
  for (let i = 0; i < 4; i++) assert.ok(Math.abs(d.data[i] - want[i]) <= 1.2e-16, `d[${i}] = ${d.data[i]}`);
});

test("padding weights: padded positions change nothing and get zero gradient", () => {
  const g = new Generator(50);
  const logits = g.normal([2, 4, 6]), targets = g.integers([2, 4], 0, 6);
  const w = sequenceWeights(intTensor([2], [4, 2]), 4);
  assert.deepEqual(Array.from(w.data), [1, 1, 1, 1, 1, 1, 0, 0]);
  const { loss, cache } = crossEntropyForward(logits, targets, w);
  const other = { shape: logits.shape, data: logits.data.slice() };
  for (let i = 6 * 6; i < 8 * 6; i++) other.data[i] = 100 * (i % 7) - 300; // rewrite the padded rows
  assert.equal(crossEntropyForward(other, targets, w).loss, loss);
  const d = crossEntropyBackward(cache);
  for (let i = 6 * 6; i < 8 * 6; i++) assert.ok(d.data[i] === 0, `padded dlogits[${i}] = ${d.data[i]}`); // -0 at the target
  // the counted rows each sum to 0 (softmax sums to 1, minus the one-hot) and carry 1/6
  for (let n = 0; n < 6; n++) {
    let s = 0;
    for (let v = 0; v < 6; v++) s += d.data[n * 6 + v];
    assert.ok(Math.abs(s) <= 1e-16, `row ${n} sums to ${s}`);
  }
  // the mean over the 6 counted positions equals the unweighted mean of those rows alone
  const counted = { shape: [6, 6], data: logits.data.slice(0, 36) };
  const alone = crossEntropyForward(counted, intTensor([6], targets.data.slice(0, 6))).loss;
  assert.ok(Math.abs(alone - loss) <= 4.5e-16 * Math.abs(loss), `${alone} vs ${loss}`);
});

test("large offsets do not overflow: logits + 1e4 give the same loss", () => {
  const g = new Generator(51);
  const z = g.normal([3, 8]), t = g.integers([3], 0, 8);
  const shifted = { shape: z.shape, data: z.data.map((v) => v + 1e4) };
  const a = crossEntropyForward(z, t).loss, b = crossEntropyForward(shifted, t).loss;
  assert.ok(Number.isFinite(b) && Math.abs(a - b) <= 1e-11, `${a} vs ${b}`); // z + 1e4 rounds z to ~1.8e-12
});

test("the gradient matches fourth-order finite differences of the loss (h = 1e-3)", () => {
  const g = new Generator(52);
  const logits = g.normal([3, 4, 5], 0, 2), targets = g.integers([3, 4], 0, 5);
  const w = sequenceWeights(intTensor([3], [4, 1, 3]), 4);
  const d = crossEntropyBackward(crossEntropyForward(logits, targets, w).cache);
  let scale = 0;
  for (const v of d.data) scale = Math.max(scale, Math.abs(v));
  const h = 1e-3;
  for (let i = 0; i < logits.data.length; i++) {
    const x0 = logits.data[i];
    const f = (s: number): number => { logits.data[i] = x0 + s * h; return crossEntropyForward(logits, targets, w).loss; };
    const numeric = (f(-2) - 8 * f(-1) + 8 * f(1) - f(2)) / (12 * h);
    logits.data[i] = x0;
    // rounding ~eps |loss| / h ~ 1e-12 against a gradient scale ~0.1: 1e-9 leaves a wide margin
    assert.ok(Math.abs(numeric - d.data[i]) <= 1e-9 * scale, `dlogits[${i}]: ${d.data[i]} vs ${numeric}`);
  }
});

test("bad targets, shapes and all-zero weights are errors saying what was expected", () => {
  const z = tensor([2, 3], [0, 0, 0, 0, 0, 0]);
  assert.throws(() => crossEntropyForward(z, intTensor([2], [0, 3])), /target id 3 is outside \[0, 3\)/);
  assert.throws(() => crossEntropyForward(z, intTensor([3], [0, 1, 2])), /targets must have shape \[2\]/);
  assert.throws(() => crossEntropyForward(z, intTensor([2], [0, 1]), tensor([2], [0, 0])), /weights sum to 0/);
  assert.throws(() => crossEntropyForward(z, intTensor([2], [0, 1]), tensor([1], [1])), /weights must have shape \[2\]/);
});


test("[wasm] the exps of the logits in the row kernels give the loops' bits (loss, probabilities, gradient)", () => {
  const g = new Generator(12);
  for (const [B, T, V] of [[96, 7, 13], [3, 1, 1], [5, 3, 2]]) {
    const logits = g.normal([B, T, V], 0, 4);
    for (let i = 2; i < logits.data.length; i += 9) logits.data[i] = -(690 + (i % 70)); // exps subnormal or near
    logits.data[0] = -0;
    const targets = intTensor([B, T], Array.from({ length: B * T }, (_, i) => (i * 7) % V));
    const weights = sequenceWeights(intTensor([B], Array.from({ length: B }, (_, b) => 1 + (b % T))), T);
    sameBitsInKernels(`(${B}, ${T}, ${V})`, (inWs) => {
      const { loss, cache } = crossEntropyForward(inWs(logits), targets, weights);
      return [Float64Array.of(loss), cache.probs.data.slice(), crossEntropyBackward(cache).data.slice()];
    });
  }
});
