// Forward cases of the building-block layers (twin: cases_layers.py). Each builder draws in the
// order written in its comment, identical in both engines. Parameters come from init.ts, so the
// cases also exercise the initialiser.

import type { Builder } from "./casesAttention.ts";
import type { Generator } from "../core/rng.ts";
import type { Named } from "../core/golden.ts";
import { type Tensor, type IntTensor, zeros } from "../core/ops.ts";
import { type Config, get, shape, intArray, positiveInt } from "../core/caseConfig.ts";
import { dropoutForward } from "../nn/dropout.ts";
import { embeddingForward } from "../nn/embedding.ts";
import { ffnForward } from "../nn/ffn.ts";
import { erf, geluForward } from "../nn/gelu.ts";
import { embeddingParams, layerNormParams, linearParams } from "../nn/init.ts";
import { EPS, layerNormForward } from "../nn/layerNorm.ts";
import { linearForward } from "../nn/linear.ts";

// config: x_shape [..., I], out O, bias (default true)
// draws: x ~ N(0, 1) (x_shape); W ~ U(+-1/sqrt(I)) (O, I); b likewise (O,) when bias
function linearCase(config: Config, rng: Generator) {
  const xShape = shape(config, "x_shape");
  const x = rng.normal(xShape, 0, 1);
  const { W, b } = linearParams(rng, positiveInt(config, "out"), xShape[xShape.length - 1], get(config, "bias", true));
  const { out } = linearForward(x, W, b);
  const inputs: Named = b === null ? { x, W } : { x, W, b };
  return { inputs, outputs: { out } };
}

// config: V, d; tokens (explicit ids) or tokens_shape
// draws: E ~ N(0, 1) (V, d); then, without explicit tokens, ids ~ integers[0, V) (tokens_shape)
function embeddingCase(config: Config, rng: Generator) {
  const V = positiveInt(config, "V"), d = positiveInt(config, "d");
  const E = embeddingParams(rng, V, d);
  const tokens: IntTensor = "tokens" in config
    ? intArray(config.tokens, "tokens")
    : rng.integers(shape(config, "tokens_shape"), 0, V);
  const { out } = embeddingForward(tokens, E);
  return { inputs: { tokens, E }, outputs: { out } };
}

// config: shape [..., d]; offset, spread (x ~ N(offset, spread^2), defaults 0, 1);
// affine "random" | "default"; constant_rows: flat row indices set to their first value; eps
// draws: x (shape); then, when affine is "random", gamma ~ U(0.5, 1.5) (d,), beta ~ N(0, 1) (d,)
function layerNormCase(config: Config, rng: Generator) {
  const xShape = shape(config, "shape");
  const d = xShape[xShape.length - 1];
  const x = rng.normal(xShape, get(config, "offset", 0), get(config, "spread", 1));
  for (const r of get<number[]>(config, "constant_rows", [])) x.data.fill(x.data[r * d], r * d, (r + 1) * d);
  let gamma: Tensor, beta: Tensor;
  if (get<string>(config, "affine", "default") === "random") {
    gamma = rng.uniform([d], 0.5, 1.5);
    beta = rng.normal([d], 0, 1);
  } else {
    ({ gamma, beta } = layerNormParams(d));
  }
  const { out, cache } = layerNormForward(x, gamma, beta, get(config, "eps", EPS));
  return { inputs: { x, gamma, beta }, outputs: { out, mean: cache.mean, rstd: cache.rstd } };
}

// config: x_shape [..., d], F
// draws: x ~ N(0, 1); W1, b1 = linearParams(F, d); W2, b2 = linearParams(d, F)
function ffnCase(config: Config, rng: Generator) {
  const xShape = shape(config, "x_shape");
  const d = xShape[xShape.length - 1], F = positiveInt(config, "F");
  const x = rng.normal(xShape, 0, 1);
  const l1 = linearParams(rng, F, d), l2 = linearParams(rng, d, F);
  const params = { W1: l1.W, b1: l1.b as Tensor, W2: l2.W, b2: l2.b as Tensor };
  const { out, cache } = ffnForward(x, params);
  return { inputs: { x, ...params }, outputs: { out, h: cache.h } };
}

// config: grid [lo, hi, n] (x_i = lo + i * ((hi - lo) / (n - 1)), no draws)
//         or shape + std (x ~ N(0, std^2), drawn)
function geluCase(config: Config, rng: Generator) {
  let x: Tensor;
  if ("grid" in config) {
    const [lo, hi, n] = get<number[]>(config, "grid");
    x = zeros([n]);
    const step = (hi - lo) / (n - 1);
    for (let i = 0; i < n; i++) x.data[i] = lo + i * step;
  } else {
    x = rng.normal(shape(config, "shape"), 0, get(config, "std", 1));
  }
  const { out } = geluForward(x);
  const e = zeros(x.shape);
  for (let i = 0; i < x.data.length; i++) e.data[i] = erf(x.data[i]);
  return { inputs: { x }, outputs: { out, erf: e } };
}

// config: shape, p
// draws: x ~ N(0, 1) (shape); then the keep mask (shape) when p > 0
function dropoutCase(config: Config, rng: Generator) {
  const x = rng.normal(shape(config, "shape"), 0, 1);
  const { out, cache } = dropoutForward(x, get<number>(config, "p"), rng);
  const outputs: Named = cache.mask === null ? { out } : { out, mask: cache.mask };
  return { inputs: { x }, outputs };
}

export const BUILDERS: Record<string, Builder> = {
  linear: linearCase,
  embedding: embeddingCase,
  layer_norm: layerNormCase,
  ffn: ffnCase,
  gelu: geluCase,
  dropout: dropoutCase,
};
