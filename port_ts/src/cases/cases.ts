// Run one case of the catalogue and return the golden document (twin: cases.py). A forward op or a
// gradient check computes from the document the request hands it (docs/protocol.md, "Handed
// inputs"): the inputs the reference drew, a gradient check's parameters, and the generator's
// position after those draws, from which this engine draws the dropout masks and gradcheck's own
// draws (COMPUTE: inputs, config, generator[, parameters] -> named outputs). An op whose draws
// are what its cases verify (data sets, training) has a builder, which draws from the case's seed
// and computes. All live in one module per family.
//
// A builder returns { inputs, outputs }; a training builder (casesTraining.ts) also returns
// digests and states (Map t -> state document), which the command line writes to
// out_dir/<id>.states/step_<t>.json, each with the case echoed into it. A pretrained builder
// (casesPretrained.ts) also takes the request's assets, each a ModelFiles (file name -> bytes).

import { Generator } from "../core/rng.ts";
import { type Builder, CaseError, checkNumbers, type Compute, type Config, errorFields, handedDocument } from "../core/caseConfig.ts";
import { caseDocument, dumps, type Json } from "../core/golden.ts";
import { productEngine } from "../kernels/product.ts";
import { COMPUTE as attentionCompute } from "./casesAttention.ts";
import { COMPUTE as layersCompute } from "./casesLayers.ts";
import { COMPUTE as modelsCompute } from "./casesModels.ts";
import { BUILDERS as lesson, COMPUTE as lessonCompute } from "./casesLesson.ts";
import { COMPUTE as gradcheckCompute } from "./casesGradcheck.ts";
import { BUILDERS as training, type TrainingResult } from "./casesTraining.ts";
import { BUILDERS as pretrained, type Assets, splitDocuments } from "./casesPretrained.ts";
import { BUILDERS as faults, COMPUTE as faultsCompute } from "./casesFaults.ts";
import { COMPUTE as lmCompute } from "./casesLm.ts";
import { COMPUTE as tiled } from "./casesTiled.ts";
import type { StateDocument } from "../runs/train.ts";

export const COMPUTE: Record<string, Compute> = {
  ...attentionCompute, ...layersCompute, ...modelsCompute, ...lessonCompute, ...gradcheckCompute, ...faultsCompute, ...lmCompute, ...tiled,
};
export const BUILDERS: Record<string, Builder> = { ...lesson, ...training, ...pretrained, ...faults };

export interface CaseSpec {
  id: string;
  kind: string;
  op: string;
  seed: number;
  config?: Config;
}

/** The golden document of one case. */
export function runCase(spec: CaseSpec, assets?: Assets, handed?: unknown): { [key: string]: Json } {
  return runCaseWithStates(spec, assets, handed).doc;
}

/** The golden document and the states (Map t -> state document; empty unless the case trains).
 *  handed: the document the request names for this case, if it names one. */
export function runCaseWithStates(spec: CaseSpec, assets?: Assets, handed?: unknown): { doc: { [key: string]: Json }; states: Map<number, StateDocument> } {
  const config = spec.config ?? {};
  const compute = Object.hasOwn(COMPUTE, spec.op) ? COMPUTE[spec.op] : undefined;
  const builder = Object.hasOwn(BUILDERS, spec.op) ? BUILDERS[spec.op] : undefined;
  if (compute === undefined && builder === undefined) {
    throw new CaseError(`unknown op '${spec.op}'; this engine knows [${[...Object.keys(COMPUTE), ...Object.keys(BUILDERS)].sort().join(", ")}]`);
  }
  checkNumbers(config);
  if (compute !== undefined) {
    if (handed === undefined) {
      throw new CaseError(`case '${spec.id}' of op '${spec.op}' needs its inputs handed in the request ('inputs_from': {id: the path of a document with them}, docs/protocol.md)`);
    }
    const { inputs, params, position } = handedDocument(handed, spec.id);
    const rng = new Generator(spec.seed);
    rng.counter = position; // the dropout masks and gradcheck's draws follow the inputs in the stream
    return { doc: caseDocument(spec as unknown as Json, inputs, compute(inputs, config, rng, params)), states: new Map() };
  }
  const rng = new Generator(spec.seed);
  const result = (Object.hasOwn(pretrained, spec.op) ? pretrained[spec.op](spec.config ?? {}, rng, assets ?? {})
    : builder!(spec.config ?? {}, rng)) as Partial<TrainingResult> & ReturnType<Builder>;
  const doc = caseDocument(spec as unknown as Json, result.inputs, result.outputs, result.digests);
  const states = new Map<number, StateDocument>();
  for (const [t, state] of result.states ?? []) states.set(t, { ...state, case: spec as unknown as Json });
  return { doc, states };
}

/** Writes what an engine writes for a case it ran (docs/protocol.md): <id>.json (for a pretrained
 *  case the golden's view, and the full document as <id>.full.json) and each training state as
 *  <id>.states/step_<t>.json, through write(path relative to out_dir, text). */
export function writeCase(spec: CaseSpec, doc: { [key: string]: Json }, states: Map<number, StateDocument>,
  write: (relative: string, text: string) => void): void {
  let golden = doc;
  if (spec.kind === "pretrained") { // docs/pretrained.md: the golden keeps a view
    const split = splitDocuments(doc);
    write(`${spec.id}.full.json`, dumps(split.full) + "\n");
    golden = split.golden;
  }
  write(`${spec.id}.json`, dumps(golden) + "\n");
  for (const [t, state] of states) write(`${spec.id}.states/step_${t}.json`, dumps(state) + "\n");
}

/** The status line of one case (docs/protocol.md): work(status) runs it; ok, or the error's
 *  fields (errorFields), then its seconds by now() (milliseconds: the host's clock, which the
 *  browser-safe core does not name) and the product kernels it ran. */
export function caseStatus(id: string, now: () => number, work: (status: Record<string, unknown>) => void): Record<string, unknown> {
  const start = now();
  const status: Record<string, unknown> = { id };
  productEngine.counts.wasm = 0;
  productEngine.counts.js = 0;
  try {
    work(status);
    status.ok = true;
  } catch (err) {
    status.ok = false;
    Object.assign(status, errorFields(err));
  }
  status.seconds = (now() - start) / 1000;
  status.kernel = { ...productEngine.counts };
  return status;
}
