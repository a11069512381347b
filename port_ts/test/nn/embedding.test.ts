// Embedding: rows copied exactly, repeated ids, ids outside [0, V) rejected. Backward: rows
// scattered to their ids and accumulated in token order; finite differences in E.
import { test } from "node:test";
import assert from "node:assert/strict";
import { intTensor, tensor } from "../../src/core/ops.ts";
import { Generator } from "../../src/core/rng.ts";
import { embeddingBackward, embeddingForward } from "../../src/nn/embedding.ts";
import { checkFd, dot, tolerance } from "../toolkit.ts";

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

// ---- backward ----

test("backward scatters rows to their ids; repeats add up; unused rows stay 0", () => {
  const { cache } = embeddingForward(intTensor([2, 2], [3, 1, 3, 3]), E);
  const dE = embeddingBackward(tensor([2, 2, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]), cache);
  assert.deepEqual(dE.shape, [4, 3]);
  assert.deepEqual(Array.from(dE.data), [0, 0, 0, 4, 5, 6, 0, 0, 0, 1 + 7 + 10, 2 + 8 + 11, 3 + 9 + 12]);
});

test("repeated ids accumulate in token order: (1e16 + 1) + (-1e16) = 0", () => {
  const { cache } = embeddingForward(intTensor([3], [2, 2, 2]), tensor([3, 1], [0, 0, 0]));
  const dE = embeddingBackward(tensor([3, 1], [1e16, 1, -1e16]), cache);
  assert.equal(dE.data[2], 0); // summing the last two first would give 1
});

test("backward matches finite differences of sum(out * dout) in E", () => {
  const g = new Generator(32);
  const tokens = g.integers([3, 4], 0, 5), table = g.normal([5, 2]), dout = g.normal([3, 4, 2]);
  const dE = embeddingBackward(dout, embeddingForward(tokens, table).cache);
  checkFd("dE", () => dot(embeddingForward(tokens, table).out, dout), table, dE, tolerance("embedding", "fd_in_order"));
});
