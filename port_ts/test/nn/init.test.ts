// Initialisation: a fan size below 1. The draws themselves (bounds, order, N(0, 1) embeddings,
// layer norm without draws, the patch embedding's fan-in) are the init_params digests every
// training case requires equal in both engines (train.alignment, .reversal, .vit, .sort), the
// reference's being checked by tests/test_layers.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { linearParams } from "../../src/nn/init.ts";

test("fan sizes below 1 are errors", () => {
  assert.throws(() => linearParams(new Generator(0), 3, 0), /must be >= 1/);
});
