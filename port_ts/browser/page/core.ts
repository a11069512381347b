// The one door from the browser pages into the port's core (port_ts/src): everything the engine's
// worker and the lab page use is re-exported here, so a move of the core's modules changes the
// paths in this file alone. No code of its own.
//
//   the engine (worker.ts), as port_ts/src/cli.ts:  runCaseWithStates, writeCase, caseStatus, replaySegment,
//                                                   evaluateState, CaseError, caseDocument, dumps, productEngine
//   the lab (lab.ts):                               greedyDecode, encodeInputs, reversalModelConfig,
//                                                   sinusoidalTable, positionSimilarity, the digit tokens

export { caseStatus, runCaseWithStates, writeCase, type CaseSpec } from "../../src/cases/cases.ts";
export type { Assets, ModelFiles } from "../../src/cases/casesPretrained.ts";
export { evaluateState, replaySegment } from "../../src/cases/casesTraining.ts";
export { CaseError } from "../../src/core/caseConfig.ts";
export { caseDocument, dumps, type Json } from "../../src/core/golden.ts";
export { type Tensor, type IntTensor } from "../../src/core/ops.ts";
export { productEngine } from "../../src/kernels/product.ts";
export type { StateDocument } from "../../src/runs/train.ts";

export { greedyDecode } from "../../src/runs/decode.ts";
export { BOS, DIGIT0, EOS, encodeInputs } from "../../src/runs/digits.ts";
export { reversalModelConfig } from "../../src/runs/reversal.ts";
export { sinusoidalTable, positionSimilarity } from "../../src/nn/positionalEncoding.ts";
