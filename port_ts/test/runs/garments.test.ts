// The garment data set and the ViT run in the port: their errors. The templates, shifts, images,
// balanced splits, cyclic batches, the step's gradients, resuming from a checkpoint and the
// report are the cases garments_data.small and train.vit (300 steps, their replay from every
// checkpoint and the report, bit for bit against the reference, which tests/test_garments.py
// checks against torch and for those facts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import type { IntTensor } from "../../src/core/ops.ts";
import { CaseError } from "../../src/core/caseConfig.ts";
import { firstOfEachClass, makeGarments, vitSetup } from "../../src/runs/garments.ts";

const SMALL = {
  patch: 4, d: 8, heads: 2, mlp_hidden: 8, blocks: 1, classes: 5, n_train: 20, n_test: 10, batch: 4,
  steps: 6, lr: 0.01, clip: 0.5, checkpoint_every: 3,
};

test("more classes than garments, and a class with no image, are errors", () => {
  assert.throws(() => makeGarments(new Generator(1), 4, 9), CaseError);
  const labels: IntTensor = { shape: [6], data: Int32Array.from([2, 0, 1, 0, 2, 1]) };
  assert.throws(() => firstOfEachClass(labels, 4), /no image of class 3/);
});

test("the run refuses dropout, a missing size and a non-positive rate", () => {
  assert.throws(() => vitSetup({ ...SMALL, dropout: 0.1 }, new Generator(1)), CaseError);
  const { batch: _batch, ...noBatch } = SMALL;
  assert.throws(() => vitSetup(noBatch, new Generator(1)), /batch/);
  assert.throws(() => vitSetup({ ...SMALL, lr: 0 }, new Generator(1)), /lr/);
});
