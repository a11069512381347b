// The port's test toolkit (twin of tests/toolkit.py): the tolerances each op declares
// (ops/attention.json, with their rules and reasons; docs/adding-an-op.md), closeness with one
// message shape (how many elements are beyond the tolerance, the greatest absolute difference at
// its index, what was allowed there, both values), central finite differences of a scalar loss,
// and the test data files beside this one.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Generator } from "../src/core/rng.ts";
import { type Tensor, inWorkspace, newWorkspace, productEngine, rowKernels, zeros } from "../src/core/ops.ts";

/** A JSON file of test data in port_ts/test/ (small-configs.json, safetensors-hostile.json). */
export function fixture<T>(name: string): T {
  return JSON.parse(readFileSync(join(import.meta.dirname, name), "utf8")) as T;
}

/** A declared tolerance: its value, its rule, its reason, and for a finite-difference check its step
 *  (and minGrad, floor). */
export interface Tolerance { value: number; rule: string; why: string; step?: number; minGrad?: number; floor?: number }

type Entry = { value: number; rule: string; why: string; step?: number; min_grad?: number; floor?: number };
let declared: Record<string, { tolerances?: Record<string, Entry | string> }> | null = null;

/** ops/attention.json, found from this file upwards (the checkout, or the one above Stryker's sandbox). */
function declarations(): Record<string, { tolerances?: Record<string, Entry | string> }> {
  if (declared === null) {
    let dir = import.meta.dirname;
    while (!existsSync(join(dir, "ops", "attention.json"))) {
      const up = dirname(dir);
      if (up === dir) throw new Error("toolkit.ts: no ops/attention.json above port_ts/test (the checkout's op declarations)");
      dir = up;
    }
    declared = (JSON.parse(readFileSync(join(dir, "ops", "attention.json"), "utf8")) as { ops: typeof declared }).ops;
  }
  return declared!;
}

/** The op's declared tolerance `name` (ops/attention.json); throws, naming what to declare, when it
 *  is missing. */
export function tolerance(op: string, name: string): Tolerance {
  const ops = declarations();
  if (!Object.hasOwn(ops, op)) throw new Error(`op '${op}' is not declared in ops/attention.json; declare it (docs/adding-an-op.md)`);
  const own = ops[op].tolerances ?? {};
  const e = name !== "none" && Object.hasOwn(own, name) ? own[name] : undefined;
  if (e === undefined || typeof e === "string") {
    const have = Object.keys(own).filter((k) => k !== "none");
    throw new Error(`op '${op}' declares no tolerance '${name}' in ops/attention.json (it declares ${have.length ? have.join(", ") : "none"}); ` +
      "add it with its rule and its reason (docs/adding-an-op.md)");
  }
  return { value: e.value, rule: e.rule, why: e.why, step: e.step, minGrad: e.min_grad, floor: e.floor };
}

/** null when |actual - expected| <= tol everywhere (relative: tol times the expected values'
 *  scale, their greatest |value|, or 1 when that is 0); otherwise the message. NaN is never
 *  close and an infinity only to itself, as in verify/compare.py. */
export function mismatch(actual: ArrayLike<number>, expected: ArrayLike<number>, what: string, tol: number,
  relative = false): string | null {
  if (actual.length !== expected.length) return `${what}: ${actual.length} elements, expected ${expected.length}`;
  let scale = 1;
  if (relative) {
    let m = 0;
    for (let i = 0; i < expected.length; i++) if (Number.isFinite(expected[i])) m = Math.max(m, Math.abs(expected[i]));
    scale = m > 0 ? m : 1;
  }
  const allowed = tol * scale;
  let bad = 0, worst = -1, worstDiff = -1;
  for (let i = 0; i < actual.length; i++) {
    const diff = actual[i] === expected[i] ? 0 : Math.abs(actual[i] - expected[i]);
    if (!(diff <= allowed)) bad++;
    const ranked = Number.isNaN(diff) ? Infinity : diff;
    if (ranked > worstDiff) { worstDiff = ranked; worst = i; }
  }
  if (bad === 0) return null;
  const diff = actual[worst] === expected[worst] ? 0 : Math.abs(actual[worst] - expected[worst]);
  const rule = relative ? `${tol} x scale ${scale.toPrecision(3)}` : `${tol}`;
  return `${what}: ${bad} / ${actual.length} elements beyond the tolerance; greatest absolute difference ` +
    `${diff.toPrecision(6)} at index ${worst} (up to ${allowed.toPrecision(3)} allowed: ${rule}); ` +
    `expected ${expected[worst]}, actual ${actual[worst]}`;
}

/** Asserts mismatch(...) is null. */
export function close(actual: ArrayLike<number>, expected: ArrayLike<number>, what: string, tol: number, relative = false): void {
  const message = mismatch(actual, expected, what, tol, relative);
  assert.ok(message === null, message ?? "");
}

/** The in-order dot product of two tensors' data: L = sum(out * dout). */
export function dot(a: Tensor, b: Tensor): number {
  let s = 0;
  for (let i = 0; i < a.data.length; i++) s += a.data[i] * b.data[i];
  return s;
}

/** The central difference of f() along x[i] (x perturbed in place, restored): order 2,
 *  (f(x + h) - f(x - h)) / 2h, truncation ~h^2; order 4, (f(x-2h) - 8 f(x-h) + 8 f(x+h) - f(x+2h)) / 12h, ~h^4. */
export function centralDifference(f: () => number, x: Float64Array, i: number, h: number, order: 2 | 4 = 4): number {
  const saved = x[i];
  const at = (k: number) => { x[i] = saved + k * h; const v = f(); x[i] = saved; return v; };
  if (order === 2) {
    const up = at(1), down = at(-1);
    return (up - down) / (2 * h);
  }
  const L = [2, 1, -1, -2].map(at);
  return (-L[0] + 8 * L[1] - 8 * L[2] + L[3]) / (12 * h);
}

/** Second-order central differences of loss() in every coordinate of x against analytic: the
 *  worst |analytic - numeric| and the numeric gradient's scale (its greatest |value|). */
export function fdError(x: Tensor, analytic: Tensor, loss: () => number, h: number): { worst: number; scale: number } {
  let worst = 0, scale = 0;
  for (let i = 0; i < x.data.length; i++) {
    const numeric = centralDifference(loss, x.data, i, h, 2);
    worst = Math.max(worst, Math.abs(analytic.data[i] - numeric));
    scale = Math.max(scale, Math.abs(numeric));
  }
  return { worst, scale };
}

/** Checks grad against fourth-order central differences of f() in every coordinate of a, at the
 *  declared step: |numeric - analytic| <= tol.value x the gradient's scale (its greatest |value|). */
export function checkFd(label: string, f: () => number, a: Tensor, grad: Tensor, tol: Tolerance): void {
  let scale = 0;
  for (const g of grad.data) scale = Math.max(scale, Math.abs(g));
  for (let i = 0; i < a.data.length; i++) {
    const numeric = centralDifference(f, a.data, i, tol.step!, 4);
    assert.ok(Math.abs(numeric - grad.data[i]) <= tol.value * Math.max(scale, 1e-300),
      `${label}[${i}]: analytic ${grad.data[i]}, numeric ${numeric} (scale ${scale})`);
  }
}

/** Up to n coordinates of g with |g| >= minGrad, drawn from rng. */
export function pickCoordinates(rng: Generator, g: Tensor, n: number, minGrad: number): number[] {
  const ok: number[] = [];
  for (let i = 0; i < g.data.length; i++) if (Math.abs(g.data[i]) >= minGrad) ok.push(i);
  const out: number[] = [];
  for (let k = 0; k < n && ok.length > 0; k++) out.push(ok[rng.integers([1], 0, ok.length).data[0]]);
  return out;
}

/** fn run twice on the same inputs: with the JavaScript loops forced (productEngine.mode "js"),
 * then in the second step of a workspace (its tensors in the Wasm kernels' memory, so the row
 * kernels of core/ops.ts run where they apply); fn gets `inWs`, which copies a tensor into the
 * active workspace, and returns copies of its results. Asserts the row kernels ran (at least
 * `wasmCalls` calls) and that every result has the same bits both ways; returns the JavaScript
 * results. */
export function sameBitsInKernels(what: string, fn: (inWs: (t: Tensor) => Tensor) => Float64Array[], wasmCalls = 1): Float64Array[] {
  const inWs = (t: Tensor): Tensor => { const z = zeros(t.shape); z.data.set(t.data); return z; };
  productEngine.mode = "js";
  let want: Float64Array[];
  try { want = fn(inWs); } finally { productEngine.mode = "auto"; }
  assert.ok(rowKernels.simd, "the Wasm row kernels exist under Node 24 (else this would test the fallback)");
  const ws = newWorkspace();
  inWorkspace(ws, () => fn(inWs)); // the first step sizes the workspace: the second lies in the kernels' memory
  rowKernels.wasmRuns = 0;
  const got = inWorkspace(ws, () => fn(inWs));
  assert.ok(rowKernels.wasmRuns >= wasmCalls, `${what}: ${rowKernels.wasmRuns} row-kernel calls, expected at least ${wasmCalls}`);
  assert.equal(got.length, want.length);
  got.forEach((g, j) => {
    assert.equal(g.length, want[j].length, `${what}: result ${j}'s size`);
    const a = new BigUint64Array(g.buffer, g.byteOffset, g.length), b = new BigUint64Array(want[j].buffer, want[j].byteOffset, g.length);
    for (let i = 0; i < a.length; i++) {
      if (a[i] !== b[i]) assert.fail(`${what}: result ${j}, element ${i} is ${g[i]} in the kernels, ${want[j][i]} in the loops`);
    }
  });
  return want;
}
