// Tiled attention: windows no case has (one key, and wider than the sequence) against the mask
// written out, and the errors. The online softmax against the plain form, the band and the tiles
// a query block reaches, and the backward from the stored log-sum-exp are the cases
// tiled_attention.* and sliding_window_attention.* (expect.agree of out, dq, dk, dv with the
// plain form in each engine, and bit for bit against the reference, itself checked against SDPA
// in tests/test_tiled.py).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import type { Tensor } from "../../src/core/ops.ts";
import { slidingWindowForward, slidingWindowPlainForward } from "../../src/nn/slidingWindow.ts";
import { tiledAttentionForward } from "../../src/nn/tiledAttention.ts";

const FORMS = 1e-13; // tiled against plain: the same maths, a few ulp apart on values of size ~1

function maxDiff(a: Tensor, b: Tensor): number {
  let m = 0;
  for (let i = 0; i < a.data.length; i++) m = Math.max(m, Math.abs(a.data[i] - b.data[i]));
  return m;
}

test("sliding window of 1 and of more than T: tiled over the reached tiles equals the mask written out", () => {
  const rng = new Generator(5);
  const q = rng.normal([1, 2, 13, 4], 0, 2), k = rng.normal([1, 2, 13, 4], 0, 2), v = rng.normal([1, 2, 13, 3]);
  for (const [w, tile] of [[1, 4], [20, 3]]) {
    const d = maxDiff(slidingWindowForward(q, k, v, w, tile).out, slidingWindowPlainForward(q, k, v, w).out);
    assert.ok(d <= FORMS, `window ${w}, tile ${tile}: max |diff| ${d}`);
  }
});

test("errors say what was expected", () => {
  const rng = new Generator(7);
  const q = rng.normal([1, 1, 3, 2]), k = rng.normal([1, 1, 4, 2]);
  assert.throws(() => tiledAttentionForward(q, k, k, 2, true), /needs as many queries as keys/);
  assert.throws(() => tiledAttentionForward(q, k, k, 0), /tile must be a positive integer/);
  assert.throws(() => tiledAttentionForward(q, q, q, 2, false, 2), /window must be a positive integer on a causal mask/);
});
