// Softmax cross-entropy: input errors and the row kernels. Values (the loss and dlogits of a
// padded batch with large logits, sequenceWeights) are the case cross_entropy.large_logits, bit
// for bit against the reference; the backward is also compared with the reference's in
// tests/test_backward_layers.py and bit for bit in the Transformer's and decoder-only model's
// gradcheck cases.
import { test } from "node:test";
import assert from "node:assert/strict";
import { intTensor, tensor } from "../../src/core/ops.ts";
import { Generator } from "../../src/core/rng.ts";
import { crossEntropyBackward, crossEntropyForward, sequenceWeights } from "../../src/nn/loss.ts";
import { sameBitsInKernels } from "../toolkit.ts";

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
