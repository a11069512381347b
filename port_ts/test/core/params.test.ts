// Parameter records: a prefix taken out of a model's record.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Tensor } from "../../src/core/ops.ts";
import { subParams } from "../../src/core/params.ts";

test("subParams keeps one prefix and strips it", () => {
  const t = (v: number): Tensor => ({ shape: [1], data: Float64Array.of(v) });
  const got = subParams({ "a.x": t(1), "a.y.z": t(2), "ab.x": t(3), "b.a.x": t(4) }, "a.");
  assert.deepEqual(Object.keys(got), ["x", "y.z"]);
});
