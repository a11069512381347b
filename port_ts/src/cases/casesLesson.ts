// Forward cases of the lesson's computations: positions, kernel regression, score scaling
// (twin: cases_lesson.py). Each builder draws in the order written.
//
// Draw order per op:
//   sinusoidal_table, position_similarity   no draws
//   positional_encoding                     handed x (B, T, d) (a compute function: cases.ts),
//                                           then the dropout mask (B, T, d) when dropout_p > 0
//   nadaraya_watson                         n_train uniforms on [0, 5) (sorted after drawing),
//                                           then n_train standard normals (noise)
//   score_scaling                           for each d in dims, in order: q (n, d), then k (n, d)

import type { Builder, Compute } from "../core/caseConfig.ts";
import type { Named } from "../core/golden.ts";
import type { Generator } from "../core/rng.ts";
import { type Tensor, tensor, zeros } from "../core/ops.ts";
import { type Config, CaseError, get, intArray, need, positiveInt } from "../core/caseConfig.ts";
import { sinusoidalTable, positionalEncodingForward, positionSimilarity } from "../nn/positionalEncoding.ts";
import { regressionData, nadarayaWatson, meanAbsError } from "../nn/nadarayaWatson.ts";
import { scoreScaling } from "../nn/scoreScaling.ts";

function sinusoidalTableCase(config: Config, _rng: Generator): { inputs: Named; outputs: Named } {
  const maxLen = positiveInt(config, "max_len"), d = positiveInt(config, "d");
  const P = sinusoidalTable(maxLen, d); // (L, d)
  const value = get<unknown>(config, "rows", null);
  if (value === null) return { inputs: {}, outputs: { P } };
  const rows = intArray(value, "rows");
  if (rows.shape.length !== 1 || rows.data.some((r) => r < 0 || r >= maxLen)) {
    throw new CaseError(`config 'rows' must list positions in [0, ${maxLen}), got ${JSON.stringify(value)}`);
  }
  const picked = zeros([rows.data.length, d]);
  rows.data.forEach((r, i) => picked.data.set(P.data.subarray(r * d, (r + 1) * d), i * d));
  return { inputs: { rows }, outputs: { P_rows: picked } };
}

function positionalEncoding(inputs: Named, config: Config, rng: Generator): Named {
  const { x } = need(inputs, "x");
  const { out, cache } = positionalEncodingForward(x, get<number>(config, "dropout_p", 0), rng);
  return cache.mask === null ? { out } : { out, mask: cache.mask };
}

function positionSimilarityCase(config: Config, _rng: Generator) {
  const P = sinusoidalTable(positiveInt(config, "max_len"), positiveInt(config, "d"));
  return { inputs: {}, outputs: { similarity: positionSimilarity(P) } };
}

function nadarayaWatsonCase(config: Config, rng: Generator) {
  const data = regressionData(rng, positiveInt(config, "n_train", 40), positiveInt(config, "n_val", 50));
  const { yHat, weights } = nadarayaWatson(data.xTrain, data.yTrain, data.xVal,
    get<string>(config, "kernel"), get<number>(config, "sigma", 1));
  const mae: Tensor = tensor([], [meanAbsError(yHat, data.yTrue)]);
  return {
    inputs: { x_train: data.xTrain, y_train: data.yTrain, x_val: data.xVal },
    outputs: { weights, y_hat: yHat, y_true: data.yTrue, mae },
  };
}

function scoreScalingCase(config: Config, rng: Generator) {
  const dims = intArray(get<unknown>(config, "dims"), "dims");
  if (dims.shape.length !== 1 || dims.data.some((d) => d <= 0)) {
    throw new CaseError(`config 'dims' must be a list of positive integers, got ${JSON.stringify(get(config, "dims"))}`);
  }
  const st = scoreScaling(Array.from(dims.data), positiveInt(config, "n"), rng);
  return {
    inputs: { dims, q_mean: st.qMean, k_mean: st.kMean },
    outputs: { dots_mean: st.dotsMean, var_raw: st.varRaw, var_scaled: st.varScaled },
  };
}

export const COMPUTE: Record<string, Compute> = { positional_encoding: positionalEncoding };

export const BUILDERS: Record<string, Builder> = {
  sinusoidal_table: sinusoidalTableCase,
  position_similarity: positionSimilarityCase,
  nadaraya_watson: nadarayaWatsonCase,
  score_scaling: scoreScalingCase,
};
