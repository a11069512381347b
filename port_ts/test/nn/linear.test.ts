// Linear: a 1-D input, and shape errors that say what was expected. Values (with and without a
// bias, 2-D and 3-D inputs, one input feature) are the cases linear.*, bit for bit against the
// reference, which fixes the order of the sums; the backward is compared with the reference's in
// tests/test_backward_layers.py, and bit for bit through every model's gradcheck case.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tensor } from "../../src/core/ops.ts";
import { Generator } from "../../src/core/rng.ts";
import { linearBackward, linearForward } from "../../src/nn/linear.ts";

// No case hands linear a 1-D input.
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

test("backward: a dout of another shape than the output is refused", () => {
  const g = new Generator(31);
  const x = g.normal([2, 3, 4]), W = g.normal([3, 4]), b = g.normal([3]);
  assert.throws(() => linearBackward(g.normal([2, 3, 4]), linearForward(x, W, b).cache), /output shape \[2,3,3\]/);
});
