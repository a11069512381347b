// The ViT: patchify's inverse. Patch order, the patch embedding as a convolution, <cls> at
// position 0, parameter order, shapes and the dropout draws are the cases vit_patch_embedding.*
// and vit.*, bit for bit against the reference, itself checked against torch (tests/test_models.py,
// tests/test_backward_vit.py); every parameter's gradient, with and without dropout, is held bit
// for bit and by finite differences in each engine by gradcheck.vit.p2_d8 and .c3_p4_dropout.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { patchify, patchifyBackward } from "../../src/models/vit.ts";

// No case outputs the images' gradient, the one place patchifyBackward's result goes.
test("patchifyBackward undoes patchify exactly (a permutation)", () => {
  const images = new Generator(40).normal([2, 3, 8, 8]);
  const back = patchifyBackward(patchify(images, 4), images.shape, 4);
  assert.deepEqual(back.shape, images.shape);
  assert.deepEqual(Array.from(back.data), Array.from(images.data));
});
