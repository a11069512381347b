// The reversal run: exact-match rows on hand-made decodes (rows too long and too short), the model
// config and its errors. The run itself (its gradients, its evaluation's outputs and their
// padding) is the case train.reversal, 600 steps bit for bit against the reference.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { CaseError } from "../../src/core/caseConfig.ts";
import { encodeInputs } from "../../src/runs/digits.ts";
import { exactRows, reversalModelConfig, reversalSetup } from "../../src/runs/reversal.ts";

const CONFIG = {
  d: 16, heads: 2, ffn_hidden: 32, enc_blocks: 1, dec_blocks: 1, min_digits: 1, max_digits: 6,
  n_train: 64, n_test: 20, batch: 8, steps: 3, lr: 0.01, clip: 1, checkpoint_every: 50,
};

test("exactRows: the reversed digits, then <eos>, then nothing", () => {
  const arrays = encodeInputs([[1, 2], [3, 4]], 3); // targets 2 1 <eos> and 4 3 <eos>
  const tokens = { shape: [4, 4], data: Int32Array.from([5, 4, 2, -1, 7, 6, 2, -1, 5, 4, 5, 2, 5, 2, -1, -1]) };
  const four = encodeInputs([[1, 2], [3, 4], [1, 2], [1, 2]], 3);
  assert.deepEqual(Array.from(exactRows(tokens, four).data), [1, 1, 0, 0]); // too long, too short
  assert.deepEqual(Array.from(exactRows({ shape: [2, 4], data: tokens.data.slice(0, 8) }, arrays).data), [1, 1]);
});

test("model config: the digits' vocabulary, dropout 0, d a multiple of heads", () => {
  const m = reversalModelConfig(CONFIG);
  assert.deepEqual([m.vocab_src, m.vocab_tgt, m.dropout, m.d, m.heads], [13, 13, 0, 16, 2]);
  assert.throws(() => reversalModelConfig({ ...CONFIG, heads: 3 }), CaseError);
  assert.throws(() => reversalSetup({ ...CONFIG, max_digits: 5 }, new Generator(1)), /max_digits >= 6/);
});
