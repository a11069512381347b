// Scaled dot-product attention: what no case reaches. Values (the lesson's three-key example,
// the 1/sqrt(D) scale, 1-D and causal 2-D lengths with length-0 rows, dropout, 4-D heads) are the
// cases dot_product_attention.*, bit for bit against the reference; the backward is compared with
// the reference's in tests/test_backward_attention.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { tensor } from "../../src/core/ops.ts";
import { dotProductAttentionForward, dotProductAttentionBackward, transposeLast } from "../../src/nn/dotProductAttention.ts";

test("dropout: p = 0 draws nothing from the generator; p > 0 without one is refused", () => {
  const g = new Generator(12);
  const q = g.normal([2, 3, 4]), k = g.normal([2, 6, 4]), v = g.normal([2, 6, 5]);
  const before = g.counter;
  const plain = dotProductAttentionForward(q, k, v, null, 0, g);
  assert.equal(g.counter, before);
  assert.equal(plain.cache.mask, null);
  assert.throws(() => dotProductAttentionForward(q, k, v, null, 0.5, null), /needs a generator/);
});

// No op of the port calls it (an exported helper), so no case reaches it.
test("transposeLast swaps the last two axes of every leading slice", () => {
  const t = transposeLast(tensor([2, 2, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]));
  assert.deepEqual(t.shape, [2, 3, 2]);
  assert.deepEqual(Array.from(t.data), [1, 4, 2, 5, 3, 6, 7, 10, 8, 11, 9, 12]);
});

test("backward: a dout of another shape than the output is refused", () => {
  const g = new Generator(16);
  const q = g.normal([2, 2, 3, 2]), k = g.normal([2, 2, 4, 2]), v = g.normal([2, 2, 4, 3]);
  assert.throws(() => dotProductAttentionBackward(g.normal([2, 2, 3, 4]), dotProductAttentionForward(q, k, v).cache), /dout must have shape/);
});
