// Shared by the layer tests: fourth-order central differences of a scalar loss.
// The checks use L = sum(out * dout) and the stencil
// (f(x-2h) - 8 f(x-h) + 8 f(x+h) - f(x+2h)) / (12 h) with h = 1e-3: truncation ~1e-13 for these
// smooth O(1) functions, rounding ~eps |L| / h (L summed in order here, not exactly). FD_RTOL
// 1e-9 of the gradient's scale leaves a wide margin; a wrong gradient is off by O(1).
import assert from "node:assert/strict";
import type { Tensor } from "../src/core/ops.ts";

export const FD_STEP = 1e-3;
export const FD_RTOL = 1e-9;

/** The in-order dot product of two tensors' data. */
export function dot(a: Tensor, b: Tensor): number {
  let s = 0;
  for (let i = 0; i < a.data.length; i++) s += a.data[i] * b.data[i];
  return s;
}

/** Checks grad against fourth-order central differences of f() in every coordinate of a. */
export function checkFd(label: string, f: () => number, a: Tensor, grad: Tensor): void {
  let scale = 0;
  for (const g of grad.data) scale = Math.max(scale, Math.abs(g));
  for (let i = 0; i < a.data.length; i++) {
    const x0 = a.data[i];
    const v = [-2, -1, 1, 2].map((s) => { a.data[i] = x0 + s * FD_STEP; return f(); });
    a.data[i] = x0;
    const numeric = (v[0] - 8 * v[1] + 8 * v[2] - v[3]) / (12 * FD_STEP);
    assert.ok(Math.abs(numeric - grad.data[i]) <= FD_RTOL * Math.max(scale, 1e-300),
      `${label}[${i}]: analytic ${grad.data[i]}, numeric ${numeric} (scale ${scale})`);
  }
}
