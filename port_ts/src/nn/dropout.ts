// Inverted dropout with a keep mask from the shared generator (twin: dropout.py).
// Shapes: x (...) -> out (...), mask (...) of 0 / 1.
//   p == 0      out = x (a copy, bit for bit, -0 included); no draw; mask null
//   0 < p < 1   mask = rng.keepMask(x.shape, p)   (1 where u >= p: one draw per element, row-major)
//               out  = x * (mask / (1 - p))       the scale is rounded once, then one product,
//                                                 as PyTorch's x * (bernoulli(1 - p) / (1 - p))
// A dropped element of a negative x gives -0.
// Backward: the same mask and the same scale expression, dx = dout * (mask / (1 - p));
// p == 0 gives a copy of dout.

import { type Tensor, empty } from "../core/ops.ts";
import type { Generator } from "../core/rng.ts";

export interface DropoutCache {
  mask: Tensor | null; // (...) or null when p = 0
  p: number;
}

/** A copy of x (from the step's workspace when one is active). */
function copyOf(x: Tensor): Tensor {
  const out = empty(x.shape);
  out.data.set(x.data); // every element written
  return out;
}

export function checkP(p: number): void {
  if (!(typeof p === "number" && p >= 0 && p < 1)) {
    throw new RangeError(`dropout: p must be a number in [0, 1), got ${p}`);
  }
}

export function dropoutForward(x: Tensor, p: number, rng: Generator | null = null): { out: Tensor; cache: DropoutCache } {
  checkP(p);
  if (p === 0) return { out: copyOf(x), cache: { mask: null, p } };
  if (rng === null) throw new RangeError(`dropout: p = ${p} needs a generator to draw its mask, got null`);
  const mask = rng.keepMask(x.shape, p); // (...)
  const out = { shape: [...x.shape], data: new Float64Array(x.data.length) }; // (...)
  const M = mask.data, X = x.data, O = out.data;
  for (let i = 0; i < X.length; i++) O[i] = X[i] * (M[i] / (1 - p));
  return { out, cache: { mask, p } };
}

/** Returns dx (...): dout through the forward's keep mask, scaled as the forward. */
export function dropoutBackward(dout: Tensor, cache: DropoutCache): Tensor {
  const { mask, p } = cache;
  if (mask === null) return copyOf(dout); // inverts: out = x (p = 0)
  if (dout.data.length !== mask.data.length || dout.shape.length !== mask.shape.length) {
    throw new RangeError(`dropoutBackward: dout must have the mask's shape [${mask.shape}], got [${dout.shape}]`);
  }
  const dx = { shape: [...dout.shape], data: new Float64Array(dout.data.length) }; // (...)
  const M = mask.data, D = dout.data, DX = dx.data;
  for (let i = 0; i < D.length; i++) DX[i] = D[i] * (M[i] / (1 - p)); // inverts: out = x * (mask / (1 - p))
  return dx;
}
