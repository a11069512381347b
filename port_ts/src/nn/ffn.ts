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
  const { out: hPre, cache: lin1 } = linearForward(x, param(params, "W1"), param(params, "b1")); // (..., F)
  // h = relu(hPre), written into hPre's array (this function's own): relu's rule, no (..., F) copy
  const h = hPre, H = h.data;
  for (let i = 0; i < H.length; i++) H[i] = H[i] > 0 ? H[i] : 0;
  const { out, cache: lin2 } = linearForward(h, param(params, "W2"), param(params, "b2")); // (..., d)
  return { out, cache: { lin1, h, lin2 } };
}

/** Returns dx (..., d) and the parameter gradients under W1, b1, W2, b2. */
export function ffnBackward(dout: Tensor, cache: FfnCache): { dx: Tensor; grads: Record<string, Tensor> } {
  const { dx: dh, dW: dW2, db: db2 } = linearBackward(dout, cache.lin2); // inverts: out = h W2^T + b2
  // inverts: h = relu(hPre); reluBackward's rule (hPre > 0, read as h > 0) written into dh itself
  // (dh is this function's own temporary), which saves an (..., F) allocation: the same values
  const dhPre = dh, D = dh.data, X = cache.h.data;
  for (let i = 0; i < D.length; i++) D[i] = X[i] > 0 ? D[i] : 0;
  const { dx, dW: dW1, db: db1 } = linearBackward(dhPre, cache.lin1); // inverts: hPre = x W1^T + b1
  return { dx, grads: { W1: dW1, b1: db1!, W2: dW2, b2: db2! } };
}
