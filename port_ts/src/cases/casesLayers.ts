// Forward cases of the building-block layers (twin: cases_layers.py): each op computes from the
// inputs the request hands it (COMPUTE). Dropout's keep mask, what its cases verify, is drawn here.

import type { Compute } from "../core/caseConfig.ts";
import type { Generator } from "../core/rng.ts";
import type { Named } from "../core/golden.ts";
import { type IntTensor, type Tensor, zeros } from "../core/ops.ts";
import { type Config, get, need, optional } from "../core/caseConfig.ts";
import { dropoutForward } from "../nn/dropout.ts";
import { embeddingForward } from "../nn/embedding.ts";
import { ffnForward } from "../nn/ffn.ts";
import { erf, geluForward } from "../nn/gelu.ts";
import { EPS, layerNormForward } from "../nn/layerNorm.ts";
import { linearForward } from "../nn/linear.ts";

function linear(inputs: Named): Named {
  const { x, W } = need(inputs, "x", "W");
  return { out: linearForward(x, W, optional<Tensor>(inputs, "b")).out };
}

function embedding(inputs: Named): Named {
  const { tokens, E } = need(inputs, "tokens", "E");
  return { out: embeddingForward(tokens as unknown as IntTensor, E).out };
}

function layerNorm(inputs: Named, config: Config): Named {
  const { x, gamma, beta } = need(inputs, "x", "gamma", "beta");
  const { out, cache } = layerNormForward(x, gamma, beta, get(config, "eps", EPS));
  return { out, mean: cache.mean, rstd: cache.rstd };
}

function ffn(inputs: Named): Named {
  const { x, W1, b1, W2, b2 } = need(inputs, "x", "W1", "b1", "W2", "b2");
  const { out, cache } = ffnForward(x, { W1, b1, W2, b2 });
  return { out, h: cache.h };
}

function gelu(inputs: Named): Named {
  const { x } = need(inputs, "x");
  const e = zeros(x.shape);
  for (let i = 0; i < x.data.length; i++) e.data[i] = erf(x.data[i]);
  return { out: geluForward(x).out, erf: e };
}

// config: p; the keep mask is drawn here, from the position x was handed with
function dropout(inputs: Named, config: Config, rng: Generator): Named {
  const { x } = need(inputs, "x");
  const { out, cache } = dropoutForward(x, get<number>(config, "p"), rng);
  return cache.mask === null ? { out } : { out, mask: cache.mask };
}

export const COMPUTE: Record<string, Compute> = { linear, embedding, layer_norm: layerNorm, ffn, gelu, dropout };
