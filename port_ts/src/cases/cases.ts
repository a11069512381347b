// Run one case of the catalogue: draw its inputs from its seed, compute, and return the golden
// document (twin: cases.py). The builders live in one module per family.
//
// A builder returns { inputs, outputs }; a training builder (casesTraining.ts) also returns
// digests and states (Map t -> state document), which the command line writes to
// out_dir/<id>.states/step_<t>.json, each with the case echoed into it. A pretrained builder
// (casesPretrained.ts) also takes the request's assets, each a ModelFiles (file name -> bytes).

import { Generator } from "../core/rng.ts";
import { CaseError, checkNumbers, type Config } from "../core/caseConfig.ts";
import { caseDocument, type Json } from "../core/golden.ts";
import { type Builder, BUILDERS as attention } from "./casesAttention.ts";
import { BUILDERS as layers } from "./casesLayers.ts";
import { BUILDERS as models } from "./casesModels.ts";
import { BUILDERS as lesson } from "./casesLesson.ts";
import { BUILDERS as gradcheck } from "./casesGradcheck.ts";
import { BUILDERS as training, type TrainingResult } from "./casesTraining.ts";
import { BUILDERS as pretrained, type Assets } from "./casesPretrained.ts";
import { BUILDERS as faults } from "./casesFaults.ts";
import { BUILDERS as lm } from "./casesLm.ts";
import { BUILDERS as tiled } from "./casesTiled.ts";
import type { StateDocument } from "../runs/train.ts";

export const BUILDERS: Record<string, Builder> = { ...attention, ...layers, ...models, ...lesson, ...gradcheck, ...training, ...pretrained, ...faults, ...lm, ...tiled };

export interface CaseSpec {
  id: string;
  kind: string;
  op: string;
  seed: number;
  config?: Config;
}

/** The golden document of one case. */
export function runCase(spec: CaseSpec, assets?: Assets): { [key: string]: Json } {
  return runCaseWithStates(spec, assets).doc;
}

/** The golden document and the states (Map t -> state document; empty unless the case trains). */
export function runCaseWithStates(spec: CaseSpec, assets?: Assets): { doc: { [key: string]: Json }; states: Map<number, StateDocument> } {
  const builder = Object.hasOwn(BUILDERS, spec.op) ? BUILDERS[spec.op] : undefined;
  if (builder === undefined) {
    throw new CaseError(`unknown op '${spec.op}'; this engine knows [${Object.keys(BUILDERS).sort().join(", ")}]`);
  }
  const rng = new Generator(spec.seed);
  checkNumbers(spec.config ?? {});
  const result = (Object.hasOwn(pretrained, spec.op) ? pretrained[spec.op](spec.config ?? {}, rng, assets ?? {})
    : builder(spec.config ?? {}, rng)) as Partial<TrainingResult> & ReturnType<Builder>;
  const doc = caseDocument(spec as unknown as Json, result.inputs, result.outputs, result.digests);
  const states = new Map<number, StateDocument>();
  for (const [t, state] of result.states ?? []) states.set(t, { ...state, case: spec as unknown as Json });
  return { doc, states };
}
