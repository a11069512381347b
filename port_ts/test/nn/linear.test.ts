// Linear: a hand-computed example, leading axes flattened, the bias added after the in-order
// sum, and shape errors that say what was expected. Backward: by hand, rows summed in index
// order, and fourth-order finite differences for x, W and b.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tensor } from "../../src/core/ops.ts";
import { Generator } from "../../src/core/rng.ts";
import { linearBackward, linearForward } from "../../src/nn/linear.ts";
import { checkFd, dot, tolerance } from "../toolkit.ts";

test("a 2 x 3 input through a (2, 3) weight and bias, computed by hand", () => {
  const x = tensor([2, 3], [1, 2, 3, 4, 5, 6]);
  const W = tensor([2, 3], [1, 0, -1, 0.5, 0.5, 0.5]);
  const b = tensor([2], [10, -1]);
  const { out, cache } = linearForward(x, W, b);
  assert.deepEqual(out.shape, [2, 2]);
  // row 0: 1 - 3 + 10 = 8, 0.5 * 6 - 1 = 2; row 1: 4 - 6 + 10 = 8, 0.5 * 15 - 1 = 6.5
  assert.deepEqual(Array.from(out.data), [8, 2, 8, 6.5]);
  assert.equal(cache.x, x);
  assert.equal(cache.hasBias, true);
});

test("without a bias, y = x W^T", () => {
  const { out } = linearForward(tensor([1, 2], [3, -2]), tensor([3, 2], [1, 1, 2, 0, 0, -1]));
  assert.deepEqual(Array.from(out.data), [1, 6, 2]);
});

test("the bias is added after the in-order sum: (1e16 + 1) + (-1e16) = 0, not 1", () => {
  // 1e16 + 1 rounds to 1e16 (ties to even); adding the bias first would give exactly 1.
  const { out } = linearForward(tensor([1, 2], [1e16, 1]), tensor([1, 2], [1, 1]), tensor([1], [-1e16]));
  assert.equal(out.data[0], 0);
});

test("a (B, T, I) input equals the same rows pushed through one by one", () => {
  const g = new Generator(3);
  const x = g.normal([2, 3, 5]), W = g.normal([4, 5]), b = g.normal([4]);
  const { out } = linearForward(x, W, b);
  assert.deepEqual(out.shape, [2, 3, 4]);
  for (let r = 0; r < 6; r++) {
    const row = tensor([5], x.data.subarray(r * 5, r * 5 + 5));
    const { out: y } = linearForward(row, W, b);
    assert.deepEqual(y.shape, [4]);
    assert.deepEqual(Array.from(y.data), Array.from(out.data.subarray(r * 4, r * 4 + 4)));
  }
});

test("mismatched shapes are errors naming both shapes", () => {
  assert.throws(() => linearForward(tensor([2, 3], [1, 2, 3, 4, 5, 6]), tensor([2, 2], [1, 2, 3, 4])), /x \[2,3\] and W \[2,2\]/);
  assert.throws(() => linearForward(tensor([1, 2], [1, 2]), tensor([1, 2], [1, 1]), tensor([2], [0, 0])), /bias must have shape \(1,\)/);
});

// ---- backward ----

test("backward by hand: dx = dout W, dW = dout^T x, db = column sums of dout", () => {
  const x = tensor([2, 3], [1, 2, 3, 4, 5, 6]);
  const W = tensor([2, 3], [1, 0, -1, 0.5, 0.5, 0.5]);
  const { cache } = linearForward(x, W, tensor([2], [10, -1]));
  const { dx, dW, db } = linearBackward(tensor([2, 2], [1, 2, -1, 3]), cache);
  // dx row 0 = 1 * [1, 0, -1] + 2 * [.5, .5, .5] = [2, 1, 0]; row 1 = -[1, 0, -1] + 3 * [.5, .5, .5]
  assert.deepEqual(dx.shape, [2, 3]);
  assert.deepEqual(Array.from(dx.data), [2, 1, 0, 0.5, 1.5, 2.5]);
  // dW[o] = sum over rows of dout[m, o] x[m]: o = 0: [1, 2, 3] - [4, 5, 6]; o = 1: 2 [1, 2, 3] + 3 [4, 5, 6]
  assert.deepEqual(Array.from(dW.data), [-3, -3, -3, 14, 19, 24]);
  assert.deepEqual(Array.from(db!.data), [0, 5]);
  assert.equal(linearBackward(tensor([1, 1], [1]), linearForward(tensor([1, 2], [1, 2]), tensor([1, 2], [3, 4])).cache).db, null);
});

test("dW and db sum the rows in index order: (1e16 + 1) + (-1e16) = 0", () => {
  const { cache } = linearForward(tensor([3, 1], [1, 1, 1]), tensor([1, 1], [2]), tensor([1], [0]));
  const { dW, db } = linearBackward(tensor([3, 1], [1e16, 1, -1e16]), cache);
  assert.equal(db!.data[0], 0); // any other order would keep the 1
  assert.equal(dW.data[0], 0);
});

test("backward of a (B, T, I) input matches finite differences for x, W and b", () => {
  const g = new Generator(31);
  const x = g.normal([2, 3, 4]), W = g.normal([3, 4]), b = g.normal([3]), dout = g.normal([2, 3, 3]);
  const { dx, dW, db } = linearBackward(dout, linearForward(x, W, b).cache);
  assert.deepEqual(dx.shape, [2, 3, 4]);
  const f = () => dot(linearForward(x, W, b).out, dout);
  checkFd("dx", f, x, dx, tolerance("linear", "fd_in_order"));
  checkFd("dW", f, W, dW, tolerance("linear", "fd_in_order"));
  checkFd("db", f, b, db!, tolerance("linear", "fd_in_order"));
  assert.throws(() => linearBackward(g.normal([2, 3, 4]), linearForward(x, W, b).cache), /output shape \[2,3,3\]/);
});
