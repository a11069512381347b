// Training cases (kind "training"): the baked runs of docs/training.md (twin: cases_training.py).
//
// Every run is made from its case's config and seed alone by a setup function in RUNS,
// setup(config, rng) -> Run:
//   names             the parameter order
//   params            the initial parameters (drawn first from rng, then the data)
//   stepFn(params, t) -> { loss, grads } for the batch of step t
//   inputs            tensors the golden records as inputs (the data, or a small part of it)
//   steps, lr, clip, checkpointEvery   the schedule (config keys steps, lr, clip, checkpoint_every)
//   report(params, history, checkpoints) -> outputs: the run's own final metrics and maps
//   digests           optional { name: hex } of the run's own (e.g. its data sets), copied into
//                     the golden's digests
// The builder trains it (train.ts) and returns { inputs, outputs, digests, states }:
//   outputs   loss (steps,), grad_norm (steps,), checkpoint_steps int64 (C,), then the report's
//   digests   init_params (parameters before step 1), the run's own, and state.<t> for each
//             checkpoint t
//   states    Map t -> state document (stateDocument; cases.ts echoes the case into each)
// replaySegment(case, stateDoc, t1) rebuilds the run from the case, loads the state of step t0
// from the document and runs steps t0+1..t1: the state document at t1.
//
// train_alignment (act 4). Config: E, H (embedding and scorer sizes), pairs (default 1), and the
// schedule. Draws: initAlignmentParams (W_q, W_k, w_v), then alignmentData (pair by pair, the
// source then the target embeddings, N(0, 1), fixed: never trained). Every step uses the whole
// data set (full batch). Outputs besides the common ones:
//   final_loss            () the loss at the final parameters
//   alignment.weights     (Q, K) pair 0's attention weights at the final parameters (the heatmap)
//   alignment.argmax      int64 (B, Q) the source word each target word attends to most
//   alignment.exact       int64 () 1 when every argmax is the gold alignment
//   alignment.exact_steps int64 (steps,) 1 where the argmax at the parameters of step t (before
//                         update t) is exact
//   alignment.checkpoints (C, Q, K) pair 0's weights at each checkpoint (the heatmap's story)

import type { Named } from "../core/golden.ts";
import type { IntTensor, Tensor } from "../core/ops.ts";
import type { Params } from "../core/params.ts";
import { Generator } from "../core/rng.ts";
import { type Config, CaseError, positiveInt } from "../core/caseConfig.ts";
import { alignmentData, alignmentLoss, alignmentLossBackward, initAlignmentParams } from "../models/alignment.ts";
import { vitSetup } from "../runs/garments.ts";
import { reversalSetup } from "../runs/reversal.ts";
import { type Run, type Setup, schedule } from "../runs/schedule.ts";
import { type History, type Snapshot, type StateDocument, type StepFn, stateDigest, stateDocument, stateFromDocument, train } from "../runs/train.ts";

export interface TrainingResult {
  inputs: Named;
  outputs: Named;
  digests: Record<string, string>;
  states: Map<number, StateDocument>;
}

interface TrainingCase { id: string; op: string; seed: number; config?: Config }

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
  const report = (p: Params, _history: History, checkpoints: Map<number, Snapshot>): Named => {
    const { loss, cache } = alignmentLoss(p, data);
    const argmax = argmaxLast(cache.weights); // (B, Q)
    const steps = [...checkpoints.keys()].sort((a, b) => a - b);
    const Q = cache.weights.shape[1], K = cache.weights.shape[2];
    const story: Tensor = { shape: [steps.length, Q, K], data: new Float64Array(steps.length * Q * K) };
    steps.forEach((t, c) => story.data.set(firstPair(alignmentLoss(checkpoints.get(t)!.params, data).cache.weights).data, c * Q * K));
    return {
      final_loss: { shape: [], data: Float64Array.of(loss) },
      "alignment.weights": firstPair(cache.weights), // (Q, K)
      "alignment.argmax": argmax,
      "alignment.exact": { shape: [], data: Int32Array.of(sameInts(argmax, data.gold) ? 1 : 0) },
      "alignment.exact_steps": { shape: [exactSteps.length], data: Int32Array.from(exactSteps) },
      "alignment.checkpoints": story, // (C, Q, K)
    };
  };
  return {
    names, params, stepFn, report,
    inputs: { queries: data.queries, keys: data.keys, gold: data.gold },
    ...schedule(config),
  };
}

export const RUNS: Record<string, Setup> = {
  train_alignment: alignmentSetup,
  train_reversal: reversalSetup, // reversal.ts
  train_vit: vitSetup, // garments.ts
};

function setupOf(spec: TrainingCase): Run {
  const setup = Object.hasOwn(RUNS, spec.op) ? RUNS[spec.op] : undefined;
  if (setup === undefined) {
    throw new CaseError(`unknown training op '${spec.op}'; this engine knows [${Object.keys(RUNS).sort().join(", ")}]`);
  }
  return setup(spec.config ?? {}, new Generator(spec.seed));
}

function builder(setup: Setup): (config: Config, rng: Generator) => TrainingResult {
  return (config, rng) => {
    const run = setup(config, rng);
    const { names, params } = run;
    const digests: Record<string, string> = { init_params: stateDigest(params, names), ...run.digests };
    const { history, checkpoints } = train(params, names, run.stepFn, run.steps, run.lr, run.clip, run.checkpointEvery);
    const steps = [...checkpoints.keys()].sort((a, b) => a - b);
    const outputs: Named = {
      loss: { shape: [history.loss.length], data: Float64Array.from(history.loss) },
      grad_norm: { shape: [history.gradNorm.length], data: Float64Array.from(history.gradNorm) },
      checkpoint_steps: { shape: [steps.length], data: Int32Array.from(steps) },
      ...run.report(params, history, checkpoints),
    };
    const states = new Map<number, StateDocument>();
    for (const t of steps) {
      const snap = checkpoints.get(t)!;
      digests[`state.${t}`] = stateDigest(snap.params, names, snap.state);
      states.set(t, stateDocument(snap.params, names, snap.state));
    }
    return { inputs: run.inputs, outputs, digests, states };
  };
}

/** Run the case's steps t0+1..t1 from the state document of step t0: the state document at t1
 *  (with the case echoed). */
export function replaySegment(spec: TrainingCase, stateDoc: StateDocument, t1: number): StateDocument {
  const run = setupOf(spec);
  const { params, state } = stateFromDocument(stateDoc, run.names);
  if (!(Number.isInteger(t1) && state.t < t1 && t1 <= run.steps)) {
    throw new CaseError(`replay of '${spec.id}': segment [${state.t}, ${t1}] must end after its start and at most at the run's last step ${run.steps}`);
  }
  train(params, run.names, run.stepFn, t1, run.lr, run.clip, run.checkpointEvery, state);
  return { ...stateDocument(params, run.names, state), case: spec as unknown as StateDocument };
}

export const BUILDERS: Record<string, (config: Config, rng: Generator) => TrainingResult> = Object.fromEntries(
  Object.entries(RUNS).map(([op, setup]) => [op, builder(setup)]),
);
