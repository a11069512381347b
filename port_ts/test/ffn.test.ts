// FFN: Linear -> ReLU -> Linear on a hand-computed example; ReLU gives +0 for -0 and negatives.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tensor } from "../src/ops.ts";
import { ffnForward, relu } from "../src/ffn.ts";

test("x = [1, -1] through F = 3 hidden units, computed by hand", () => {
  const params = {
    W1: tensor([3, 2], [1, 0, 0, 1, 1, 1]),
    b1: tensor([3], [0, 0, -0.5]),
    W2: tensor([2, 3], [1, 2, 3, 4, 5, 6]),
    b2: tensor([2], [0.25, 0]),
  };
  const { out, cache } = ffnForward(tensor([1, 2], [1, -1]), params);
  assert.deepEqual(Array.from(cache.hPre.data), [1, -1, -0.5]);
  assert.deepEqual(Array.from(cache.h.data), [1, 0, 0]);
  assert.deepEqual(out.shape, [1, 2]);
  assert.deepEqual(Array.from(out.data), [1.25, 4]);
});

test("relu keeps positives and maps negatives, -0 and +0 to +0", () => {
  const h = relu(tensor([5], [2.5, -3, -0, 0, 1e-300])).data;
  assert.deepEqual(Array.from(h), [2.5, 0, 0, 0, 1e-300]);
  assert.ok(Object.is(h[1], 0) && Object.is(h[2], 0), "negatives and -0 give +0");
});

test("a missing parameter is an error naming it", () => {
  assert.throws(() => ffnForward(tensor([1, 1], [1]), { W1: tensor([1, 1], [1]) }), /params needs 'b1'/);
});
