// Cases of tiled attention (the online softmax) and sliding-window attention, each computed
// tiled and in the plain form of the same maths, forward and backward (twin: cases_tiled.py;
// docs/tiled_attention.md).
//
// Draws, in this order: q ~ N(0, std^2) (B, H, T, D), k ~ N(0, std^2) (B, H, K, D), v ~ N(0, 1)
// (B, H, K, V), dout ~ N(0, 1) (B, H, T, V). Outputs: the tiled form's out, lse, dq, dk, dv, and
// the plain form's plain.out, plain.dq, plain.dk, plain.dv. The two forms round differently, so
// their pairs are expected within the tolerance of each other, not bit-identical (the
// catalogue's expect.agree); each engine's tiled form is bit-identical to the other engine's.

import type { Builder } from "./casesAttention.ts";
import type { Named } from "../core/golden.ts";
import type { IntTensor, Tensor } from "../core/ops.ts";
import type { Generator } from "../core/rng.ts";
import { type Config, get, positiveInt } from "../core/caseConfig.ts";
import { dotProductAttentionBackward, dotProductAttentionForward } from "../nn/dotProductAttention.ts";
import { slidingWindowBackward, slidingWindowForward, slidingWindowPlainBackward, slidingWindowPlainForward } from "../nn/slidingWindow.ts";
import { type TiledAttentionCache, tiledAttentionBackward, tiledAttentionForward } from "../nn/tiledAttention.ts";

function draw(config: Config, rng: Generator, keys: number) {
  const [B, H, T, D, V] = ["B", "H", "T", "D", "V"].map((n) => positiveInt(config, n));
  const std = get(config, "std", 1);
  const q = rng.normal([B, H, T, D], 0, std);
  const k = rng.normal([B, H, keys, D], 0, std);
  const v = rng.normal([B, H, keys, V]);
  const dout = rng.normal([B, H, T, V]);
  return { q, k, v, dout };
}

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

// config: B, H, T (queries), K (keys, default T), D, V, tile, causal (default false; needs K = T), std (default 1)
// draws: the module doc's
function tiledAttentionCase(config: Config, rng: Generator) {
  const T = positiveInt(config, "T");
  const causal = get(config, "causal", false);
  const { q, k, v, dout } = draw(config, rng, positiveInt(config, "K", T));
  const tile = positiveInt(config, "tile");
  const { out, cache } = tiledAttentionForward(q, k, v, tile, causal);
  const grads = tiledAttentionBackward(dout, cache);
  let lens: IntTensor | null = null; // (B, T): q + 1
  if (causal) {
    const B = q.shape[0];
    lens = { shape: [B, T], data: new Int32Array(B * T) };
    for (let b = 0; b < B; b++) for (let t = 0; t < T; t++) lens.data[b * T + t] = t + 1;
  }
  const { out: plainOut, cache: plainCache } = dotProductAttentionForward(q, k, v, lens);
  const plainGrads = dotProductAttentionBackward(dout, plainCache);
  return { inputs: { q, k, v, dout }, outputs: outputsOf(out, cache, grads, plainOut, plainGrads) };
}

// config: B, H, T, D, V, window, tile, std (default 1)
// draws: the module doc's (keys: T)
function slidingWindowAttentionCase(config: Config, rng: Generator) {
  const { q, k, v, dout } = draw(config, rng, positiveInt(config, "T"));
  const window = positiveInt(config, "window"), tile = positiveInt(config, "tile");
  const { out, cache } = slidingWindowForward(q, k, v, window, tile);
  const grads = slidingWindowBackward(dout, cache);
  const { out: plainOut, cache: plainCache } = slidingWindowPlainForward(q, k, v, window);
  const plainGrads = slidingWindowPlainBackward(dout, plainCache);
  return { inputs: { q, k, v, dout }, outputs: outputsOf(out, cache, grads, plainOut, plainGrads) };
}

export const BUILDERS: Record<string, Builder> = {
  tiled_attention: tiledAttentionCase,
  sliding_window_attention: slidingWindowAttentionCase,
};
