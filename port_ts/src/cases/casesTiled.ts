// Cases of tiled attention (the online softmax) and sliding-window attention, each computed
// tiled and in the plain form of the same maths, forward and backward (twin: cases_tiled.py;
// docs/tiled_attention.md).
//
// Each op computes from the inputs the request hands it (q, k, v, dout: the reference draws them).
// Outputs: the tiled form's out, lse, dq, dk, dv, and the plain form's plain.out, plain.dq,
// plain.dk, plain.dv. The two forms round differently, so their pairs are expected within the
// tolerance of each other, not bit-identical (the catalogue's expect.agree); each engine's tiled
// form is bit-identical to the other engine's.

import type { Compute } from "../core/caseConfig.ts";
import type { Named } from "../core/golden.ts";
import type { IntTensor, Tensor } from "../core/ops.ts";
import { type Config, get, need, positiveInt } from "../core/caseConfig.ts";
import { dotProductAttentionBackward, dotProductAttentionForward } from "../nn/dotProductAttention.ts";
import { slidingWindowBackward, slidingWindowForward, slidingWindowPlainBackward, slidingWindowPlainForward } from "../nn/slidingWindow.ts";
import { type TiledAttentionCache, tiledAttentionBackward, tiledAttentionForward } from "../nn/tiledAttention.ts";

type Grads = { dq: Tensor; dk: Tensor; dv: Tensor };

function outputsOf(out: Tensor, cache: TiledAttentionCache, grads: Grads, plainOut: Tensor, plainGrads: Grads): Named {
  const outputs: Named = { out, lse: cache.lse };
  for (const name of ["dq", "dk", "dv"] as const) {
    outputs[name] = grads[name];
    outputs[`plain.${name}`] = plainGrads[name];
  }
  outputs["plain.out"] = plainOut;
  return outputs;
}

// config: tile, causal (default false; needs as many keys as queries)
function tiledAttention(inputs: Named, config: Config): Named {
  const { q, k, v, dout } = need(inputs, "q", "k", "v", "dout");
  const [B, , T] = q.shape;
  const causal = get(config, "causal", false);
  const { out, cache } = tiledAttentionForward(q, k, v, positiveInt(config, "tile"), causal);
  const grads = tiledAttentionBackward(dout, cache);
  let lens: IntTensor | null = null; // (B, T): q + 1
  if (causal) {
    lens = { shape: [B, T], data: new Int32Array(B * T) };
    for (let b = 0; b < B; b++) for (let t = 0; t < T; t++) lens.data[b * T + t] = t + 1;
  }
  const { out: plainOut, cache: plainCache } = dotProductAttentionForward(q, k, v, lens);
  const plainGrads = dotProductAttentionBackward(dout, plainCache);
  return outputsOf(out, cache, grads, plainOut, plainGrads);
}

// config: window, tile
function slidingWindowAttention(inputs: Named, config: Config): Named {
  const { q, k, v, dout } = need(inputs, "q", "k", "v", "dout");
  const window = positiveInt(config, "window"), tile = positiveInt(config, "tile");
  const { out, cache } = slidingWindowForward(q, k, v, window, tile);
  const grads = slidingWindowBackward(dout, cache);
  const { out: plainOut, cache: plainCache } = slidingWindowPlainForward(q, k, v, window);
  const plainGrads = slidingWindowPlainBackward(dout, plainCache);
  return outputsOf(out, cache, grads, plainOut, plainGrads);
}

export const COMPUTE: Record<string, Compute> = {
  tiled_attention: tiledAttention,
  sliding_window_attention: slidingWindowAttention,
};
