// Parameter records: a prefix taken out of a model's record.
import { test } from "node:test";
import assert from "node:assert/strict";
import { type Tensor, tensor } from "../../src/core/ops.ts";
import { addGrads, subParams } from "../../src/core/params.ts";

test("subParams keeps one prefix and strips it", () => {
  const t = (v: number): Tensor => ({ shape: [1], data: Float64Array.of(v) });
  const got = subParams({ "a.x": t(1), "a.y.z": t(2), "ab.x": t(3), "b.a.x": t(4) }, "a.");
  assert.deepEqual(Object.keys(got), ["x", "y.z"]);
});

test("addGrads(a, b, c) is addGrads(addGrads(a, b), c), bit for bit; shapes are checked against a", () => {
  // terms where the grouping shows: (0.1 + 0.2) + 0.3 = 0.6000000000000001, 0.1 + (0.2 + 0.3) = 0.6; -0 + -0 + -0 = -0
  const a = tensor([2, 3], [1e16, -0, 0.1, 3, -5e-324, 1e308]);
  const b = tensor([2, 3], [1, -0, 0.2, -3, 5e-324, 1e308]);
  const c = tensor([2, 3], [-1e16, -0, 0.3, -0, 0, -1e308]);
  const got = Array.from(addGrads(a, b, c).data), want = Array.from(addGrads(addGrads(a, b), c).data);
  assert.equal(got.length, want.length);
  got.forEach((v, i) => assert.ok(Object.is(v, want[i]), `element ${i}: ${v}, two calls give ${want[i]}`));
  assert.ok(Object.is(got[0], 0) && Object.is(got[1], -0) && got[2] === 0.6000000000000001 && got[5] === Infinity);
  assert.throws(() => addGrads(a, b, tensor([3, 2], [1, 2, 3, 4, 5, 6])), /shapes \[2,3\] and \[3,2\] differ/);
});
