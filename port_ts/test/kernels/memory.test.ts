// kernels/memory.ts: a training step's workspace (newWorkspace, inWorkspace; core/ops.ts's zeros
// and empty draw from it). The products and row kernels in a workspace: product.test.ts, rows.test.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { empty, zeros } from "../../src/core/ops.ts";
import { copyParams } from "../../src/core/params.ts";
import { inWorkspace, newWorkspace } from "../../src/kernels/memory.ts";

test("zeros in a workspace is +0 though an earlier step wrote there; outside one it is a new array", () => {
  const ws = newWorkspace();
  for (let step = 0; step < 3; step++) {
    inWorkspace(ws, () => {
      for (const n of [5, 1000, 3]) {
        const z = zeros([n]);
        for (const v of z.data) assert.ok(Object.is(v, 0), `step ${step}, zeros([${n}]): got ${v}`);
        z.data.fill(-7); // what the next step's zeros must not show
        empty([n]).data.fill(NaN);
      }
    });
  }
  const z = zeros([4]);
  assert.equal(z.data.buffer.byteLength, 32); // its own array
  assert.deepEqual(Array.from(empty([3]).data), [0, 0, 0]); // outside a workspace: new, so zeros
});

test("a workspace is one step at a time; what a step copies out (copyParams) outlives the next step", () => {
  const ws = newWorkspace();
  assert.throws(() => inWorkspace(ws, () => inWorkspace(ws, () => 0)), /already in use/);
  assert.equal(inWorkspace(ws, () => 1), 1); // usable again after the refusal
  const first = inWorkspace(ws, () => {
    const g = zeros([6]);
    g.data.set([1, -2, 3, -0, 5, 6]);
    return copyParams({ g });
  });
  inWorkspace(ws, () => zeros([6]).data.fill(9));
  assert.deepEqual(Array.from(first.g.data), [1, -2, 3, -0, 5, 6]);
  assert.deepEqual(first.g.shape, [6]);
});
