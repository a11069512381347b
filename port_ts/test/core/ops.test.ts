// core/ops.ts: tensors, and the sums over the last axis in index order from +0 (the products:
// port_ts/test/kernels/product.test.ts). Every result is compared bit for bit.
import { test } from "node:test";
import assert from "node:assert/strict";
import { type Tensor, intTensor, meanLast, sizeOf, sumLast, tensor } from "../../src/core/ops.ts";
import { assertSameBits, makeRandom, wild } from "../toolkit.ts";

function loopSumLast(x: Tensor): Float64Array {
  const K = x.shape[x.shape.length - 1], rows = sizeOf(x.shape.slice(0, -1));
  const out = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let acc = 0;
    for (let k = 0; k < K; k++) acc = acc + x.data[r * K + k];
    out[r] = acc;
  }
  return out;
}

test("tensor and intTensor take exactly product(shape) values", () => {
  assert.equal(tensor([2, 0], []).data.length, 0);
  assert.throws(() => tensor([2, 2], [1, 2, 3]), { name: "RangeError", message: "tensor: shape [2,2] needs 4 values, got 3" });
  assert.throws(() => tensor([], [1, 2]), { message: "tensor: shape [] needs 1 values, got 2" });
  assert.deepEqual([...intTensor([3], [1, -2, 3]).data], [1, -2, 3]);
  assert.throws(() => intTensor([2], [1, 2, 3]), { name: "RangeError", message: "intTensor: shape [2] needs 2 values, got 3" });
});

test("sumLast and meanLast are the loop, bit for bit", () => {
  const rand = makeRandom(4);
  for (let i = 0; i < 600; i++) {
    const shape = Array.from({ length: Math.floor(rand() * 4) }, () => Math.floor(rand() * 6));
    const K = [0, 1, 2, 5, 9, 17, 128, 129, 448][Math.floor(rand() * 9)];
    const x = wild(rand, [...shape, K]);
    const want = loopSumLast(x);
    assertSameBits(sumLast(x), want, `sumLast [${x.shape}]`);
    assertSameBits(meanLast(x), want.map((v) => v / K), `meanLast [${x.shape}]`);
  }
});

test("the data is order-sensitive: a reversed or two-lane sum gives other bits", () => {
  const rand = makeRandom(5);
  const x = wild(rand, [64, 448]);
  const inOrder = loopSumLast(x);
  let reversedDiffers = 0, lanesDiffer = 0;
  for (let r = 0; r < 64; r++) {
    let rev = 0, even = 0, odd = 0;
    for (let k = 447; k >= 0; k--) rev += x.data[r * 448 + k];
    for (let k = 0; k < 448; k += 2) { even += x.data[r * 448 + k]; odd += x.data[r * 448 + k + 1]; }
    if (!Object.is(rev, inOrder[r])) reversedDiffers++;
    if (!Object.is(even + odd, inOrder[r])) lanesDiffer++;
  }
  assert.ok(reversedDiffers > 0 && lanesDiffer > 0, `${reversedDiffers} reversed, ${lanesDiffer} two-lane sums differ`);
});
