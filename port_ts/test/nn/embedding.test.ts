// Embedding: the output is a copy, ids outside [0, V) are rejected. Values (random and repeated
// ids) are the cases embedding.*, bit for bit against the reference; the backward (rows scattered
// and accumulated in token order) is compared with the reference's in
// tests/test_backward_layers.py, and bit for bit through the Transformer's gradcheck cases.
import { test } from "node:test";
import assert from "node:assert/strict";
import { intTensor, tensor } from "../../src/core/ops.ts";
import { embeddingForward } from "../../src/nn/embedding.ts";

const E = tensor([4, 3], [0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32]); // row v = [10v, 10v + 1, 10v + 2]

test("the output is a copy: editing it leaves the table alone", () => {
  const { out } = embeddingForward(intTensor([1], [2]), E);
  out.data[0] = -1;
  assert.equal(E.data[6], 20);
});

test("ids outside [0, V) are errors that name the id and V", () => {
  assert.throws(() => embeddingForward(intTensor([2], [0, 4]), E), /token id 4 at flat index 1 is outside \[0, 4\)/);
  assert.throws(() => embeddingForward(intTensor([1], [-1]), E), /token id -1/);
});
