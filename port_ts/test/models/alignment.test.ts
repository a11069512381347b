// Act 4's alignment scorer: gold outside the source is refused. The data's draw order, the
// parameters, the loss and its gradients are the cases gradcheck.alignment.act4 and .three_pairs
// (drawn in each engine, finite differences in each, the gradients bit for bit) and train.alignment
// (init_params digest, 200 steps and their replay, the learned alignment as a quality bar), the
// reference being checked against torch and for the same facts in tests/test_alignment.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { alignmentData, alignmentLoss, initAlignmentParams } from "../../src/models/alignment.ts";

test("gold outside the source is an error", () => {
  const rng = new Generator(65);
  const params = initAlignmentParams(rng, 4, 4);
  const data = alignmentData(rng, 4, 1);
  data.gold.data[3] = 4;
  assert.throws(() => alignmentLoss(params, data), /gold must be source indices/);
});
