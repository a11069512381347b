// Training cases (kind "training"): the baked runs of docs/training.md (twin: cases_training.py).
//
// Every run is made from its case's config and seed alone by a setup function in RUNS,
// setup(config, rng) -> Run:
//   names             the parameter order
//   params            the initial parameters (drawn first from rng, then the data)
//   stepFn(params, t) -> { loss, grads } for the batch of step t
//   inputs            tensors the golden records as inputs (the data, or a small part of it)
//   steps, lr, clip, checkpointEvery   the schedule (config keys steps, lr, clip, checkpoint_every)
//   evaluate(params) -> outputs: what follows from the final parameters alone (metrics, decodes,
//                     attention maps); also run on the reference's final state (evaluateState,
//                     docs/training.md "Evaluation")
//   report(params, history, checkpoints) -> outputs: optional, what depends on the way there (a
//                     checkpoint's snapshot, a per-step record of the run's own)
//   digests           optional { name: hex } of the run's own (e.g. its data sets), copied into
//                     the golden's digests
// The builder trains it (train.ts) and returns { inputs, outputs, digests, states }:
//   outputs   loss (steps,), grad_norm (steps,), checkpoint_steps int64 (C,), then evaluate's and
//             the report's
//   digests   init_params (parameters before step 1), the run's own, and state.<t> for each
//             checkpoint t
//   states    Map t -> state document (stateDocument; cases.ts echoes the case into each)
// replaySegment(case, stateDoc, t1) rebuilds the run from the case, loads the state of step t0
// from the document and runs steps t0+1..t1: the state document at t1. evaluateState(case,
// stateDoc) rebuilds the run and evaluates the state's parameters: evaluate's outputs.

import type { Named } from "../core/golden.ts";
import { Generator } from "../core/rng.ts";
import { type Config, CaseError } from "../core/caseConfig.ts";
import { alignmentSetup } from "../runs/alignmentRun.ts";
import { vitSetup } from "../runs/garments.ts";
import { reversalSetup } from "../runs/reversal.ts";
import { sortSetup } from "../runs/sortRun.ts";
import type { Run, Setup } from "../runs/schedule.ts";
import { type StateDocument, stateDigest, stateDocument, stateFromDocument, train } from "../runs/train.ts";

export interface TrainingResult {
  inputs: Named;
  outputs: Named;
  digests: Record<string, string>;
  states: Map<number, StateDocument>;
}

interface TrainingCase { id: string; op: string; seed: number; config?: Config }

export const RUNS: Record<string, Setup> = {
  train_alignment: alignmentSetup, // alignmentRun.ts
  train_reversal: reversalSetup, // reversal.ts
  train_vit: vitSetup, // garments.ts
  train_sort: sortSetup, // sortRun.ts
};

// The run setupOf built last, kept for the next segment of the same case: a replay asks for
// every segment of a case in turn, and what a replay calls of a run (stepFn, evaluate) depends
// on its case alone: its data and model, never the parameters it was set up with (a replay
// replaces them). Only report, which replays never call, may keep a record of past steps.
let lastRun: { key: string; run: Run } | null = null;

function setupOf(spec: TrainingCase): Run {
  const setup = Object.hasOwn(RUNS, spec.op) ? RUNS[spec.op] : undefined;
  if (setup === undefined) {
    throw new CaseError(`unknown training op '${spec.op}'; this engine knows [${Object.keys(RUNS).sort().join(", ")}]`);
  }
  const key = JSON.stringify([spec.op, spec.seed, spec.config ?? {}]);
  if (lastRun === null || lastRun.key !== key) lastRun = { key, run: setup(spec.config ?? {}, new Generator(spec.seed)) };
  return lastRun.run;
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
      ...run.evaluate(params),
      ...(run.report === undefined ? {} : run.report(params, history, checkpoints)),
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

/** The run's evaluate() at the parameters of a state document (the reference's final state, for
 *  the port): what the site shows of the baked run. */
export function evaluateState(spec: TrainingCase, stateDoc: StateDocument): Named {
  const run = setupOf(spec);
  const { params } = stateFromDocument(stateDoc, run.names);
  return run.evaluate(params);
}

export const BUILDERS: Record<string, (config: Config, rng: Generator) => TrainingResult> = Object.fromEntries(
  Object.entries(RUNS).map(([op, setup]) => [op, builder(setup)]),
);
