// Forward cases of the attention primitives: inputs from the case's seed, then the outputs
// (twin: cases_attention.py). Each builder draws in the order written.

import type { Generator } from "./rng.ts";
import type { IntTensor } from "./ops.ts";
import type { Named } from "./golden.ts";
import { type Config, get, shape, intArray } from "./caseConfig.ts";
import { maskedSoftmaxForward } from "./maskedSoftmax.ts";

export type Builder = (config: Config, rng: Generator) => { inputs: Named; outputs: Named };

function validLens(config: Config): IntTensor | null {
  const value = get<unknown>(config, "valid_lens", null);
  return value === null ? null : intArray(value, "valid_lens");
}

function maskedSoftmaxCase(config: Config, rng: Generator) {
  const x = rng.normal(shape(config, "shape", 3), get(config, "mean", 0), get(config, "std", 1));
  const lens = validLens(config);
  const { out } = maskedSoftmaxForward(x, lens);
  const inputs: Named = lens === null ? { x } : { x, valid_lens: lens };
  return { inputs, outputs: { out } };
}

export const BUILDERS: Record<string, Builder> = {
  masked_softmax: maskedSoftmaxCase,
};
