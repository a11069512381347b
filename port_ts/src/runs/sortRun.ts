// The sort-the-digits run: a decoder-only model of the lesson's blocks trained with Adam to write
// its prompt's digits in ascending order, then generated greedily through the KV cache
// (twin: reference/runs/sort_run.py; docs/decoder_lm.md).
//
// Config (ops/attention/train_sort.json):
//   alphabet (A), min_len, max_len            inputs of min_len..max_len digits below A
//   d, heads, ffn_hidden, blocks               the model (vocab A + 2, max_len 2 max_len + 1 positions)
//   n_train, n_test, batch                     distinct training inputs, held-out ones, rows per step
//   steps, lr, clip, checkpoint_every          the schedule (runs/schedule.ts)
// Draws, in this order: initDecoderLmParams, then sortingData (training set, then held-out set).
// Step t: decoderLmLoss (only the written tokens count) of the batch batchRows(t).
//
// evaluate(params) -> outputs, at the final parameters (also run on the reference's final state):
//   test_loss          ()            teacher-forced loss over the held-out set
//   decode.tokens      int64 (N, G)  the held-out prompts (left-padded, one batch) generated
//                                    greedily through the KV cache, G = max_len + 1 tokens
//   decode.margin      (N, G)        top-1 minus top-2 logit at each step, 0 after the end
//   decode.exact       int64 (N,)    1 where the generation is the sorted digits, then <eos>
//   exact_match        ()            the fraction of exact generations
//   kv.max_logit_diff  ()            the greatest |cached - recomputed| logit over every step
//   kv.rows_differ     ()            how many rows' tokens differ between the two
//   lab.tokens, lab.margin (G,)      the lab's example 3 1 4 1 2 generated alone
//   lab.weights        (H, S, S)     the last block's attention over the lab's whole sequence
// and digests train_data, test_data (sortingDigest), equal across engines.

import { type IntTensor, type Tensor } from "../core/ops.ts";
import { inWorkspace, newWorkspace } from "../kernels/memory.ts";
import type { Named } from "../core/golden.ts";
import { type Params, copyParams } from "../core/params.ts";
import type { Generator } from "../core/rng.ts";
import { type Config, CaseError, positiveInt } from "../core/caseConfig.ts";
import { type DecoderLmConfig, decoderLmForward, decoderLmLoss, decoderLmLossBackward, initDecoderLmParams } from "../models/decoderLm.ts";
import { decodeOutputs } from "./decode.ts";
import { batchRows } from "./digits.ts";
import { generateCached, generateFull, leftPad } from "./kvCache.ts";
import { eosId, promptOf, sortingData, sortingDigest, takeSortRows } from "./sorting.ts";
import { type Run, schedule } from "./schedule.ts";

export const LAB_EXAMPLE: readonly number[] = [3, 1, 4, 1, 2]; // the lab's example; reserved: never in either set

/** The decoderLm config of the run: the case's sizes, the sorting vocabulary and positions. */
export function sortModelConfig(config: Config): DecoderLmConfig {
  const d = positiveInt(config, "d"), heads = positiveInt(config, "heads");
  if (d % heads !== 0) throw new CaseError(`config d = ${d} must be a multiple of heads = ${heads}`);
  const A = positiveInt(config, "alphabet"), hi = positiveInt(config, "max_len");
  return { vocab: A + 2, max_len: 2 * hi + 1, d, heads, ffn_hidden: positiveInt(config, "ffn_hidden"), blocks: positiveInt(config, "blocks") };
}

/** (N,): 1 where row n of tokens (N, G) is the sorted input, <eos>, then -1. */
export function exactGenerations(tokens: IntTensor, inputs: readonly (readonly number[])[], A: number): IntTensor {
  const [N, G] = tokens.shape;
  const out = new Int32Array(N);
  inputs.forEach((digits, n) => {
    const want = [...[...digits].sort((a, b) => a - b), eosId(A)];
    let same = true;
    for (let s = 0; s < G; s++) if (tokens.data[n * G + s] !== (s < want.length ? want[s] : -1)) same = false;
    out[n] = same ? 1 : 0;
  });
  return { shape: [N], data: out };
}

function scalar(x: number): Tensor {
  return { shape: [], data: Float64Array.of(x) };
}

/** The run for casesTraining RUNS: names, params, stepFn, evaluate, inputs, digests and the schedule. */
export function sortSetup(config: Config, rng: Generator): Run {
  const model = sortModelConfig(config);
  const A = positiveInt(config, "alphabet"), lo = positiveInt(config, "min_len"), hi = positiveInt(config, "max_len");
  if (lo > hi || !(lo <= LAB_EXAMPLE.length && LAB_EXAMPLE.length <= hi) || A <= Math.max(...LAB_EXAMPLE)) {
    throw new CaseError(`config lengths ${lo}..${hi}, alphabet ${A}: need min_len <= ${LAB_EXAMPLE.length} <= max_len ` +
      `and alphabet > ${Math.max(...LAB_EXAMPLE)} (the lab's example (${LAB_EXAMPLE.join(", ")}))`);
  }
  const nTrain = positiveInt(config, "n_train"), nTest = positiveInt(config, "n_test"), B = positiveInt(config, "batch");
  const params = initDecoderLmParams(rng, model);
  const names = Object.keys(params);
  const data = sortingData(rng, nTrain, nTest, lo, hi, A, [LAB_EXAMPLE]);
  const { train, test } = data;
  const G = hi + 1, eos = eosId(A);
  const { prompts, pads } = leftPad(data.testInputs.map((x) => promptOf(x, A)), eos);
  const labPrompt: IntTensor = { shape: [1, LAB_EXAMPLE.length + 1], data: Int32Array.from(promptOf(LAB_EXAMPLE, A)) };

  const ws = newWorkspace(); // the step's memory, reused by every step (core/ops.ts)
  const stepFn = (p: Params, t: number) => inWorkspace(ws, () => {
    const rows = takeSortRows(train, batchRows(nTrain, B, t));
    const { loss, cache } = decoderLmLoss(p, model, rows.tokens, rows.targets, rows.weights);
    return { loss, grads: copyParams(decoderLmLossBackward(cache)) };
  });

  const evaluate = (p: Params): Named => {
    const { loss: testLoss } = decoderLmLoss(p, model, test.tokens, test.targets, test.weights);
    const cached = generateCached(p, model, prompts, pads, G, eos);
    const full = generateFull(p, model, prompts, pads, G, eos);
    const exact = exactGenerations(cached.tokens, data.testInputs, A);
    let maxDiff = 0;
    for (let i = 0; i < cached.logits.data.length; i++) maxDiff = Math.max(maxDiff, Math.abs(cached.logits.data[i] - full.logits.data[i]));
    let rowsDiffer = 0;
    for (let n = 0; n < prompts.shape[0]; n++) {
      let differ = false;
      for (let s = 0; s < G; s++) if (cached.tokens.data[n * G + s] !== full.tokens.data[n * G + s]) differ = true;
      if (differ) rowsDiffer++;
    }
    const lab = generateCached(p, model, labPrompt, new Int32Array(1), G, eos);
    const written = lab.lengths.data[0], P = labPrompt.shape[1], S = P + written - 1;
    const seq: IntTensor = { shape: [1, S], data: new Int32Array(S) }; // (1, S) the prompt, then the tokens written
    seq.data.set(labPrompt.data);
    seq.data.set(lab.tokens.data.subarray(0, written - 1), P);
    const { cache: labModel } = decoderLmForward(seq, p, model);
    const w = labModel.weights[labModel.weights.length - 1]; // (1, H, S, S)
    return {
      test_loss: scalar(testLoss),
      ...decodeOutputs(cached.tokens, cached.margins, exact), // (N, G) (N, G) (N,) ()
      "kv.max_logit_diff": scalar(maxDiff),
      "kv.rows_differ": scalar(rowsDiffer),
      "lab.tokens": { shape: [G], data: lab.tokens.data },
      "lab.margin": { shape: [G], data: lab.margins.data },
      "lab.weights": { shape: w.shape.slice(1), data: w.data }, // (H, S, S)
    };
  };

  return {
    names, params, stepFn, evaluate,
    inputs: { test_prompts: prompts, test_pads: { shape: [pads.length], data: pads }, lab_prompt: { shape: [labPrompt.shape[1]], data: labPrompt.data } },
    digests: { train_data: sortingDigest(train), test_data: sortingDigest(test) },
    ...schedule(config),
  };
}
