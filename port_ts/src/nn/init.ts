// PyTorch-default initialisation, drawn from the shared generator (twin: init.py).
// Every draw goes through the generator passed in, in the order the calls are made, so a model
// that calls these in its documented parameter order gets the same parameters in both engines.
//   linearParams(rng, O, I, bias)   W (O, I) ~ U(-k, k), then b (O,) ~ U(-k, k), k = 1 / sqrt(I)
//                                   (kaiming_uniform(a=sqrt(5)) reduces to this bound; we compute
//                                   k = 1 / sqrt(I) directly, in both engines)
//   embeddingParams(rng, V, d)      E (V, d) ~ N(0, 1)
//   layerNormParams(d)              gamma = 1, beta = 0 (d,) each; no draws
//   patchEmbeddingParams(rng, d, C, p)
//                                   the stride-p conv as a linear layer on flattened patches:
//                                   W (d, C*p*p) with the patch flattened (c, row, col) as torch's
//                                   conv weight (d, C, p, p) reshaped; b (d,); fan_in = C*p*p
// A uniform draw is low + (high - low) * u = -k + (2k) * u.

import { type Tensor, zeros } from "../core/ops.ts";
import type { Generator } from "../core/rng.ts";

/** W (fanOut, fanIn) drawn first, then b (fanOut,) (null when bias is false). */
export function linearParams(rng: Generator, fanOut: number, fanIn: number, bias = true): { W: Tensor; b: Tensor | null } {
  if (fanIn < 1 || fanOut < 1) {
    throw new RangeError(`linearParams: fanIn and fanOut must be >= 1, got ${fanOut} x ${fanIn}`);
  }
  const bound = 1 / Math.sqrt(fanIn);
  const W = rng.uniform([fanOut, fanIn], -bound, bound); // (O, I)
  const b = bias ? rng.uniform([fanOut], -bound, bound) : null; // (O,)
  return { W, b };
}

/** E (V, d) ~ N(0, 1). */
export function embeddingParams(rng: Generator, V: number, d: number): Tensor {
  return rng.normal([V, d], 0, 1);
}

/** gamma = ones (d,), beta = zeros (d,); draws nothing. */
export function layerNormParams(d: number): { gamma: Tensor; beta: Tensor } {
  const gamma = zeros([d]);
  gamma.data.fill(1);
  return { gamma, beta: zeros([d]) };
}

/** The patch embedding's conv as a linear layer: W (d, C*p*p), b (d,), fan_in = C*p*p. */
export function patchEmbeddingParams(rng: Generator, d: number, channels: number, patch: number): { W: Tensor; b: Tensor } {
  const { W, b } = linearParams(rng, d, channels * patch * patch, true);
  return { W, b: b as Tensor };
}
