// Additive attention: the shape checks on the parameters. Values (the direct loop, 1-D and 2-D
// lengths with length-0 rows, saturated tanh, dropout) are the cases additive_attention.*, bit for
// bit against the reference; the backward is compared with the reference's in
// tests/test_backward_attention.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { additiveAttentionForward } from "../../src/nn/additiveAttention.ts";

test("parameters of the wrong shape are refused", () => {
  const g = new Generator(23);
  const q = g.normal([1, 2, 4]), k = g.normal([1, 3, 4]), v = g.normal([1, 3, 2]);
  const W_q = g.uniform([5, 4], -0.5, 0.5), W_k = g.uniform([5, 4], -0.5, 0.5);
  assert.throws(() => additiveAttentionForward(q, k, v, { W_q, W_k, w_v: W_q }), /do not fit/);
});
