// The one door from the browser pages into the port's core (port_ts/src): everything the engine's
// worker and the lab page use is re-exported here, so a move of the core's modules changes the
// paths in this file alone. No code of its own.
//
//   the engine (worker.ts), as port_ts/src/cli.ts:  runCaseWithStates, splitDocuments, replaySegment,
//                                                   CaseError, dumps, productEngine
//   the lab (lab.ts):                               greedyDecode, encodeInputs, reversalModelConfig,
//                                                   sinusoidalTable, positionSimilarity, the digit tokens

export { runCaseWithStates, type CaseSpec } from "../../src/cases.ts";
export { splitDocuments, type Assets, type ModelFiles } from "../../src/casesPretrained.ts";
export { replaySegment } from "../../src/casesTraining.ts";
export { CaseError } from "../../src/caseConfig.ts";
export { dumps, type Json } from "../../src/golden.ts";
export { productEngine, type Tensor, type IntTensor } from "../../src/ops.ts";
export type { StateDocument } from "../../src/train.ts";

export { greedyDecode } from "../../src/decode.ts";
export { BOS, DIGIT0, EOS, encodeInputs } from "../../src/digits.ts";
export { reversalModelConfig } from "../../src/reversal.ts";
export { sinusoidalTable, positionSimilarity } from "../../src/positionalEncoding.ts";
