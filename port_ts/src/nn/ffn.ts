// Position-wise feed-forward network, Linear -> ReLU -> Linear (twin: ffn.py).
// Shapes: x (..., d); params W1 (F, d), b1 (F,), W2 (d, F), b2 (d,) -> out (..., d).
//   hPre = x W1^T + b1          (..., F)
//   h    = relu(hPre)           (..., F)  hPre where hPre > 0, else +0
//   out  = h W2^T + b2          (..., d)
// No dropout inside, as the book's PositionWiseFFN.
// Backward walks it in reverse: linearBackward through W2, b2; the ReLU passes dh where
// hPre > 0 and +0 elsewhere (hPre == 0 gets 0, as PyTorch's threshold_backward); then
// linearBackward through W1, b1. The forward applies the ReLU in place (hPre's array becomes h)
// and the backward reads the rule off h: h > 0 exactly where hPre > 0.

import { type Tensor, empty, zeros } from "../core/ops.ts";
import { biasReluRows, reluGateRows } from "../kernels/rows.ts";
import { type LinearCache, linearBackward, linearForward } from "./linear.ts";

export interface FfnCache {
  lin1: LinearCache;
  h: Tensor; // (..., F) relu(hPre); h > 0 exactly where hPre > 0
  lin2: LinearCache;
}

/** x where x > 0, else +0 (so -0 gives +0): the same rule in both engines. */
export function relu(x: Tensor): Tensor {
  const out = empty(x.shape); // every element written
  for (let i = 0; i < x.data.length; i++) out.data[i] = x.data[i] > 0 ? x.data[i] : 0;
  return out;
}

/** dout where the forward's input x > 0, else +0. */
export function reluBackward(dout: Tensor, x: Tensor): Tensor {
  const out = zeros(x.shape);
  for (let i = 0; i < x.data.length; i++) out.data[i] = x.data[i] > 0 ? dout.data[i] : 0;
  return out;
}

function param(params: Record<string, Tensor>, name: string): Tensor {
  const t = params[name];
  if (t === undefined) throw new RangeError(`ffn: params needs '${name}'; found [${Object.keys(params).sort().join(", ")}]`);
  return t;
}

export function ffnForward(x: Tensor, params: Record<string, Tensor>): { out: Tensor; cache: FfnCache } {
  const W1 = param(params, "W1"), b1 = param(params, "b1");
  const { out: xw, cache: lin1 } = linearForward(x, W1, null); // (..., F)  x W1^T, the bias below (lin1: no bias, db1 is the backward's own)
  // hPre = x W1^T + b1 (linear's bias after the sum), then h = relu(hPre), in one pass over
  // xw's array (this function's own): the same two roundings per element, no (..., F) copy
  const F = W1.shape[0], h = xw, H = h.data, B1 = b1.data;
  if (b1.shape.length !== 1 || B1.length !== F) throw new RangeError(`linear: bias must have shape (${F},), got [${b1.shape}]`);
  biasReluRows(H, B1, F); // h = relu(hPre), hPre = xw + b1 (kernels/rows.ts)
  const { out, cache: lin2 } = linearForward(h, param(params, "W2"), param(params, "b2")); // (..., d)
  return { out, cache: { lin1, h, lin2 } };
}

/** Returns dx (..., d) and the parameter gradients under W1, b1, W2, b2. */
export function ffnBackward(dout: Tensor, cache: FfnCache): { dx: Tensor; grads: Record<string, Tensor> } {
  const { dx: dh, dW: dW2, db: db2 } = linearBackward(dout, cache.lin2); // inverts: out = h W2^T + b2
  // inverts: h = relu(hPre); reluBackward's rule (hPre > 0, read as h > 0) written into dh itself
  // (dh is this function's own temporary), which saves an (..., F) allocation: the same values.
  // The same pass adds each row into db1, as linearBackward's db: rows in turn, from +0.
  const F = cache.lin1.W.shape[0];
  const D = dh.data, X = cache.h.data; // dh becomes dhPre
  const db1 = zeros([F]), DB = db1.data; // (F,)
  reluGateRows(D, X, DB, F); // dhPre = dh where h > 0, else +0; db1 its rows summed (kernels/rows.ts)
  // inverts: hPre = x W1^T (+ b1, whose gradient is db1 above)
  const { dx, dW: dW1 } = linearBackward(dh, cache.lin1);
  return { dx, grads: { W1: dW1, b1: db1, W2: dW2, b2: db2! } };
}
