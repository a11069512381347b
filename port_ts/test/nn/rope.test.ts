// Rotary position embeddings: the refusals. Values (the angles, the identity at position 0, pair
// lengths, scores depending on the gap alone, attention on rotated queries and keys at shifted
// positions) are the cases rope.* and rope_attention.*, bit for bit against the reference, which
// tests/test_rope.py checks against torch and for each of those facts; the backward is held bit
// for bit and by finite differences in the case gradcheck.rope.cross_lens.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { intTensor } from "../../src/core/ops.ts";
import { ropeBackward, ropeForward } from "../../src/nn/rope.ts";

test("wrong shapes and positions are refused, saying what was expected", () => {
  assert.throws(() => ropeForward(new Generator(64).normal([2, 3, 5])), /even, positive feature dim d .*got d = 5/);
  assert.throws(() => ropeForward(new Generator(64).normal([2, 3, 4]), intTensor([2], [0, 1])), /one position per step: x has T = 3 steps, positions \[2\]/);
  const { cache } = ropeForward(new Generator(64).normal([2, 3, 4]));
  assert.throws(() => ropeBackward(new Generator(64).normal([2, 3, 6]), cache), /dout of shape \(\.\.\., 3, 4\), got \[2,3,6\]/);
});
