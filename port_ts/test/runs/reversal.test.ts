// The reversal run: exact-match rows on hand-made decodes, the model config and its errors, and a
// three-step run whose report has the documented outputs (shapes, -1 / 0 padding, attention rows
// that sum to 1) and whose step function differentiates every parameter.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { CaseError } from "../../src/core/caseConfig.ts";
import { encodeInputs } from "../../src/runs/digits.ts";
import { exactRows, reversalModelConfig, reversalSetup } from "../../src/runs/reversal.ts";
import { train } from "../../src/runs/train.ts";
import { tolerance } from "../toolkit.ts";

const SUM = tolerance("train_reversal", "row_sum").value;

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

test("a three-step run: gradients for every parameter, the documented evaluation", () => {
  const run = reversalSetup(CONFIG, new Generator(3));
  const { grads } = run.stepFn(run.params, 1);
  assert.deepEqual(Object.keys(grads), run.names);
  const { history } = train(run.params, run.names, run.stepFn, 3, run.lr, run.clip, run.checkpointEvery);
  assert.equal(history.loss.length, 3);
  assert.equal(run.report, undefined, "every output of the reversal run follows from its final parameters");
  const out = run.evaluate(run.params);
  assert.deepEqual(out["decode.tokens"].shape, [20, 7]);
  assert.deepEqual(out["decode.margin"].shape, [20, 7]);
  assert.deepEqual(out["decode.exact"].shape, [20]);
  assert.deepEqual(out["lab.tokens"].shape, [7]);
  const tok = out["decode.tokens"].data, mar = out["decode.margin"].data;
  for (let i = 0; i < tok.length; i++) if (tok[i] === -1) assert.equal(mar[i], 0);
  const w = out["lab.cross_weights"];
  let T = 0;
  while (T < 7 && out["lab.tokens"].data[T] !== -1) T++;
  assert.deepEqual(w.shape, [2, T, 7]);
  for (let r = 0; r < 2 * T; r++) {
    let s = 0;
    for (let k = 0; k < 7; k++) s += w.data[r * 7 + k];
    assert.ok(Math.abs(s - 1) <= SUM, `cross-attention row ${r} sums to ${s}`);
  }
  const e = out.exact_match.data[0];
  assert.ok(e >= 0 && e <= 1);
  assert.ok(run.digests !== undefined && /^[0-9a-f]{64}$/.test(run.digests.train_data));
});
