// The act-4 alignment run: the additive scorer of models/alignment.ts trained on fixed random
// embeddings of one sentence pair (twin: reference/runs/alignment_run.py; docs/training.md).
//
// train_alignment (act 4). Config: E, H (embedding and scorer sizes), pairs (default 1), and the
// schedule. Draws: initAlignmentParams (W_q, W_k, w_v), then alignmentData (pair by pair, the
// source then the target embeddings, N(0, 1), fixed: never trained). Every step uses the whole
// data set (full batch). Outputs besides the common ones (evaluate: the first four; report: the
// rest, which depend on the way there):
//   final_loss            () the loss at the final parameters
//   alignment.weights     (Q, K) pair 0's attention weights at the final parameters (the heatmap)
//   alignment.argmax      int64 (B, Q) the source word each target word attends to most
//   alignment.exact       int64 () 1 when every argmax is the gold alignment
//   alignment.exact_steps int64 (steps,) 1 where the argmax at the parameters of step t (before
//                         update t) is exact
//   alignment.checkpoints (C, Q, K) pair 0's weights at each checkpoint (the heatmap's story)

import type { Generator } from "../core/rng.ts";
import type { Named } from "../core/golden.ts";
import type { IntTensor, Tensor } from "../core/ops.ts";
import type { Params } from "../core/params.ts";
import { type Config, positiveInt } from "../core/caseConfig.ts";
import { alignmentData, alignmentLoss, alignmentLossBackward, initAlignmentParams } from "../models/alignment.ts";
import { type Run, schedule } from "./schedule.ts";
import type { History, Snapshot, StepFn } from "./train.ts";

/** Row-wise argmax over the last axis (the first of equal maxima, as NumPy). */
function argmaxLast(x: Tensor): IntTensor {
  const K = x.shape[x.shape.length - 1], rows = x.data.length / K;
  const out: IntTensor = { shape: x.shape.slice(0, -1), data: new Int32Array(rows) };
  for (let r = 0; r < rows; r++) {
    let best = 0;
    for (let j = 1; j < K; j++) if (x.data[r * K + j] > x.data[r * K + best]) best = j;
    out.data[r] = best;
  }
  return out;
}

function sameInts(a: IntTensor, b: IntTensor): boolean {
  return a.data.length === b.data.length && a.data.every((v, i) => v === b.data[i]);
}

/** Pair 0's (Q, K) slice of a (B, Q, K) tensor. */
function firstPair(w: Tensor): Tensor {
  const Q = w.shape[1], K = w.shape[2];
  return { shape: [Q, K], data: w.data.slice(0, Q * K) };
}

/** The act-4 run: the additive scorer on fixed random embeddings of one sentence pair. */
export function alignmentSetup(config: Config, rng: Generator): Run {
  const E = positiveInt(config, "E"), H = positiveInt(config, "H"), pairs = positiveInt(config, "pairs", 1);
  const params = initAlignmentParams(rng, E, H);
  const data = alignmentData(rng, E, pairs);
  const names = ["W_q", "W_k", "w_v"];
  const exactSteps: number[] = [];
  const stepFn: StepFn = (p) => {
    const { loss, cache } = alignmentLoss(p, data);
    exactSteps.push(sameInts(argmaxLast(cache.weights), data.gold) ? 1 : 0);
    return { loss, grads: alignmentLossBackward(cache) };
  };
  const evaluate = (p: Params): Named => {
    const { loss, cache } = alignmentLoss(p, data);
    const argmax = argmaxLast(cache.weights); // (B, Q)
    return {
      final_loss: { shape: [], data: Float64Array.of(loss) },
      "alignment.weights": firstPair(cache.weights), // (Q, K)
      "alignment.argmax": argmax,
      "alignment.exact": { shape: [], data: Int32Array.of(sameInts(argmax, data.gold) ? 1 : 0) },
    };
  };
  const report = (_p: Params, _history: History, checkpoints: Map<number, Snapshot>): Named => {
    const steps = [...checkpoints.keys()].sort((a, b) => a - b);
    const Q = data.queries.shape[1], K = data.keys.shape[1];
    const story: Tensor = { shape: [steps.length, Q, K], data: new Float64Array(steps.length * Q * K) };
    steps.forEach((t, c) => story.data.set(firstPair(alignmentLoss(checkpoints.get(t)!.params, data).cache.weights).data, c * Q * K));
    return {
      "alignment.exact_steps": { shape: [exactSteps.length], data: Int32Array.from(exactSteps) },
      "alignment.checkpoints": story, // (C, Q, K)
    };
  };
  return {
    names, params, stepFn, evaluate, report,
    inputs: { queries: data.queries, keys: data.keys, gold: data.gold },
    ...schedule(config),
  };
}
