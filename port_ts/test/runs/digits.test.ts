// Reverse-the-digits data: too few distinct inputs is an error. The token layout, the draw (one
// candidate at a time), distinct and disjoint sets without the lab's example, the cyclic batches
// and the data digests are the case digits_data.small and train.reversal's train_data and
// test_data digests, bit for bit against the reference, which tests/test_reversal.py checks for
// each of those facts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { drawDigitSet } from "../../src/runs/digits.ts";

test("too few distinct inputs is an error, not an endless loop", () => {
  assert.throws(() => drawDigitSet(new Generator(1), 11, 1, 1), /fewer than 11 distinct/);
});
