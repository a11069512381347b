// The reverse-the-digits run: an encoder-decoder Transformer trained with Adam to reverse digit
// strings, then decoded greedily (twin: reference/runs/reversal.py; docs/reversal.md).
//
// Config (ops/attention/train_reversal.json):
//   d, heads, ffn_hidden, enc_blocks, dec_blocks   the model (vocabularies: digits VOCAB; dropout 0)
//   min_digits, max_digits                         input lengths, drawn uniformly in that range
//   n_train, n_test                                distinct training inputs, then held-out ones
//   batch                                          rows per step, cyclic over the training set
//   steps, lr, clip, checkpoint_every              the schedule (runs/schedule.ts)
// Draws, in this order, from the case's generator: initTransformerParams (the model's parameter
// order), then digitsData (training set, then held-out set). Training draws nothing more.
// Step t: the padding-masked cross-entropy (transformerLoss) of the batch batchRows(t).
//
// evaluate(params) -> outputs, at the final parameters (also run on the reference's final state,
// docs/training.md "Evaluation"):
//   test_loss              ()           teacher-forced loss over the whole held-out set
//   decode.tokens          int64 (N, P) greedy decodes of the held-out inputs (<eos> included), -1 after
//   decode.margin          (N, P)       top-1 minus top-2 logit at each decoding step, 0 after the end
//   decode.exact           int64 (N,)   1 where the decode is the reversed input then <eos>
//   exact_match            ()           the fraction of exact decodes
//   lab.tokens, lab.margin (P,)         the decode of the lab's example 3 8 0 5 2 7
//   lab.cross_weights      (H, T, S)    decoder block 0's cross-attention of the lab's final decode
//                                       pass (T = tokens emitted, S = source steps)
// and digests train_data, test_data (dataDigest), equal across engines.

import { type IntTensor, type Tensor } from "../core/ops.ts";
import { inWorkspace, newWorkspace } from "../kernels/memory.ts";
import { type Params, copyParams } from "../core/params.ts";
import type { Generator } from "../core/rng.ts";
import type { Named } from "../core/golden.ts";
import { type Config, CaseError, positiveInt } from "../core/caseConfig.ts";
import { type DigitArrays, BOS, EOS, VOCAB, batchRows, dataDigest, digitsData, encodeInputs, takeRows } from "./digits.ts";
import { decodeOutputs, greedyDecode } from "./decode.ts";
import { type TransformerConfig, type TransformerLossCache, initTransformerParams, transformerLoss, transformerLossBackward } from "../models/transformer.ts";
import { type Run, schedule } from "./schedule.ts";

export const LAB_EXAMPLE: readonly number[] = [3, 8, 0, 5, 2, 7]; // the lab's example; reserved: never in either set

/** The transformer config of the run: the case's sizes, the digits' vocabulary, dropout 0. */
export function reversalModelConfig(config: Config): TransformerConfig {
  const d = positiveInt(config, "d"), heads = positiveInt(config, "heads");
  if (d % heads !== 0) throw new CaseError(`config d = ${d} must be a multiple of heads = ${heads}`);
  return {
    vocab_src: VOCAB, vocab_tgt: VOCAB, d, ffn_hidden: positiveInt(config, "ffn_hidden"), heads,
    enc_blocks: positiveInt(config, "enc_blocks"), dec_blocks: positiveInt(config, "dec_blocks"), dropout: 0,
  };
}

/** transformerLoss on a set of encoded inputs. */
export function reversalBatchLoss(params: Params, model: TransformerConfig, arrays: DigitArrays): { loss: number; cache: TransformerLossCache } {
  return transformerLoss(params, model, arrays.src, arrays.srcLens, arrays.tgtIn, arrays.tgtOut, arrays.tgtLens);
}

/** (N,): 1 where a decode (N, P) is the target (reversed digits, <eos>) and then ends. */
export function exactRows(tokens: IntTensor, arrays: DigitArrays): IntTensor {
  const [N, P] = tokens.shape;
  const out = new Int32Array(N);
  for (let n = 0; n < N; n++) {
    let same = true;
    for (let t = 0; t < P; t++) {
      const want = t < arrays.tgtLens.data[n] ? arrays.tgtOut.data[n * P + t] : -1;
      if (tokens.data[n * P + t] !== want) same = false;
    }
    out[n] = same ? 1 : 0;
  }
  return { shape: [N], data: out };
}

/** Rows [0, T) of query axis of head-major weights (1, H, Tq, S) -> (H, T, S). */
function firstRows(w: Tensor, T: number): Tensor {
  const [, H, Tq, S] = w.shape;
  const data = new Float64Array(H * T * S);
  for (let h = 0; h < H; h++) data.set(w.data.subarray(h * Tq * S, h * Tq * S + T * S), h * T * S);
  return { shape: [H, T, S], data };
}

/** The run for casesTraining RUNS: names, params, stepFn, evaluate, inputs, digests and the schedule. */
export function reversalSetup(config: Config, rng: Generator): Run {
  const model = reversalModelConfig(config);
  const lo = positiveInt(config, "min_digits"), hi = positiveInt(config, "max_digits");
  if (lo > hi || hi < LAB_EXAMPLE.length) {
    throw new CaseError(`config digits ${lo}..${hi}: need min_digits <= max_digits and max_digits >= ${LAB_EXAMPLE.length}`);
  }
  const nTrain = positiveInt(config, "n_train"), nTest = positiveInt(config, "n_test"), B = positiveInt(config, "batch");
  const params = initTransformerParams(rng, model);
  const names = Object.keys(params);
  const data = digitsData(rng, nTrain, nTest, lo, hi, [LAB_EXAMPLE]);
  const { train, test } = data;
  const P = hi + 1;
  const lab = encodeInputs([LAB_EXAMPLE], hi);

  const ws = newWorkspace(); // the step's memory, reused by every step (core/ops.ts)
  const stepFn = (p: Params, t: number) => inWorkspace(ws, () => {
    const { loss, cache } = reversalBatchLoss(p, model, takeRows(train, batchRows(nTrain, B, t)));
    return { loss, grads: copyParams(transformerLossBackward(cache)) };
  });

  const evaluate = (p: Params): Named => {
    const { loss: testLoss } = reversalBatchLoss(p, model, test);
    const dec = greedyDecode(p, model, test.src, test.srcLens, P, BOS, EOS);
    const exact = exactRows(dec.tokens, test);
    const labDec = greedyDecode(p, model, lab.src, lab.srcLens, P, BOS, EOS);
    return {
      test_loss: { shape: [], data: Float64Array.of(testLoss) },
      ...decodeOutputs(dec.tokens, dec.margins, exact), // (N, P) (N, P) (N,) ()
      "lab.tokens": { shape: [P], data: labDec.tokens.data },
      "lab.margin": { shape: [P], data: labDec.margins.data },
      "lab.cross_weights": firstRows(labDec.crossWeights[0], labDec.lengths.data[0]), // (H, T, S)
    };
  };

  return {
    names, params, stepFn, evaluate,
    inputs: { test_src: test.src, test_src_lens: test.srcLens, lab_src: lab.src },
    digests: { train_data: dataDigest(train), test_data: dataDigest(test) },
    ...schedule(config),
  };
}
