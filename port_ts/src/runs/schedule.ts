// The schedule of a baked run, read from its case's config (twin: reference/runs/schedule.py;
// docs/training.md): steps, the learning rate lr, the clipping threshold clip (null: never clip)
// and checkpointEvery (config keys steps, lr, clip, checkpoint_every). Also the contract of a
// run's setup (Run, Setup): what cases/casesTraining.ts trains, replays and reports.

import type { Generator } from "../core/rng.ts";
import type { Named } from "../core/golden.ts";
import type { Params } from "../core/params.ts";
import { type Config, get, positiveInt, positiveNumber } from "../core/caseConfig.ts";
import type { History, Snapshot, StepFn } from "./train.ts";

export interface Schedule { steps: number; lr: number; clip: number | null; checkpointEvery: number }

export interface Run extends Schedule {
  names: string[];
  params: Params;
  stepFn: StepFn;
  inputs: Named;
  evaluate: (params: Params) => Named; // what follows from the final parameters alone
  report?: (params: Params, history: History, checkpoints: Map<number, Snapshot>) => Named; // what depends on the way there
  digests?: Record<string, string>;
}

export type Setup = (config: Config, rng: Generator) => Run;

/** { steps, lr, clip, checkpointEvery } from the config; clip may be null (never clip). */
export function schedule(config: Config): Schedule {
  const steps = positiveInt(config, "steps");
  const checkpointEvery = positiveInt(config, "checkpoint_every");
  const clip = get<unknown>(config, "clip") === null ? null : positiveNumber(config, "clip");
  return { steps, lr: positiveNumber(config, "lr"), clip, checkpointEvery };
}
