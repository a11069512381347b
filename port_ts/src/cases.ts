// Run one case of the catalogue: draw its inputs from its seed, compute, and return the golden
// document (twin: cases.py). The builders live in one module per family.

import { Generator } from "./rng.ts";
import { CaseError, type Config } from "./caseConfig.ts";
import { caseDocument, type Json } from "./golden.ts";
import { type Builder, BUILDERS as attention } from "./casesAttention.ts";
import { BUILDERS as layers } from "./casesLayers.ts";
import { BUILDERS as models } from "./casesModels.ts";
import { BUILDERS as lesson } from "./casesLesson.ts";
import { BUILDERS as gradcheck } from "./casesGradcheck.ts";

export const BUILDERS: Record<string, Builder> = { ...attention, ...layers, ...models, ...lesson, ...gradcheck };

export interface CaseSpec {
  id: string;
  kind: string;
  op: string;
  seed: number;
  config?: Config;
}

/** The golden document of one case. */
export function runCase(spec: CaseSpec): { [key: string]: Json } {
  const builder = Object.hasOwn(BUILDERS, spec.op) ? BUILDERS[spec.op] : undefined;
  if (builder === undefined) {
    throw new CaseError(`unknown op '${spec.op}'; this engine knows [${Object.keys(BUILDERS).sort().join(", ")}]`);
  }
  const { inputs, outputs } = builder(spec.config ?? {}, new Generator(spec.seed));
  return caseDocument(spec as unknown as Json, inputs, outputs);
}
