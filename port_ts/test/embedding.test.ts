// Embedding: rows copied exactly, repeated ids, ids outside [0, V) rejected.
import { test } from "node:test";
import assert from "node:assert/strict";
import { intTensor, tensor } from "../src/ops.ts";
import { embeddingForward } from "../src/embedding.ts";

const E = tensor([4, 3], [0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32]); // row v = [10v, 10v + 1, 10v + 2]

test("each id picks its row; repeated ids repeat the row; shape (..., d)", () => {
  const { out, cache } = embeddingForward(intTensor([2, 3], [3, 0, 3, 1, 1, 2]), E);
  assert.deepEqual(out.shape, [2, 3, 3]);
  assert.deepEqual(Array.from(out.data), [30, 31, 32, 0, 1, 2, 30, 31, 32, 10, 11, 12, 10, 11, 12, 20, 21, 22]);
  assert.equal(cache.V, 4);
});

test("the output is a copy: editing it leaves the table alone", () => {
  const { out } = embeddingForward(intTensor([1], [2]), E);
  out.data[0] = -1;
  assert.equal(E.data[6], 20);
});

test("ids outside [0, V) are errors that name the id and V", () => {
  assert.throws(() => embeddingForward(intTensor([2], [0, 4]), E), /token id 4 at flat index 1 is outside \[0, 4\)/);
  assert.throws(() => embeddingForward(intTensor([1], [-1]), E), /token id -1/);
});
