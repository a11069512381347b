// The port's test toolkit (twin of tests/toolkit.py): the tolerances each op declares
// (in their bundles, ops/attention/*.json, with their rules and reasons; docs/adding-an-op.md), the same bits from the
// product kernels and the JavaScript loops, and the test data files beside this one. The port's
// values are the catalogue's to check (bit for bit against the reference), so it has no closeness
// or finite-difference helpers.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { type Tensor, sizeOf, zeros } from "../src/core/ops.ts";
import { inWorkspace, newWorkspace } from "../src/kernels/memory.ts";
import { productEngine } from "../src/kernels/product.ts";
import { rowEngine } from "../src/kernels/rows.ts";

/** A JSON file of test data in port_ts/test/ (small-configs.json, safetensors-hostile.json). */
export function fixture<T>(name: string): T {
  return JSON.parse(readFileSync(join(import.meta.dirname, name), "utf8")) as T;
}

/** A declared tolerance: its value, its rule, its reason, and for a finite-difference check its step
 *  (and minGrad, floor). */
export interface Tolerance { value: number; rule: string; why: string; step?: number; minGrad?: number; floor?: number }

type Entry = { value: number; rule: string; why: string; step?: number; min_grad?: number; floor?: number };
let declared: Record<string, { tolerances?: Record<string, Entry | string> }> | null = null;

/** The declarations of every bundle, ops/attention/*.json, found from this file upwards (the
 *  checkout, or the one above Stryker's sandbox). */
function declarations(): Record<string, { tolerances?: Record<string, Entry | string> }> {
  if (declared === null) {
    let dir = import.meta.dirname;
    while (!existsSync(join(dir, "ops", "attention"))) {
      const up = dirname(dir);
      if (up === dir) throw new Error("toolkit.ts: no ops/attention/ above port_ts/test (the checkout's op bundles)");
      dir = up;
    }
    const bundles = join(dir, "ops", "attention");
    declared = {};
    for (const file of readdirSync(bundles).filter((f) => f.endsWith(".json")).sort()) {
      Object.assign(declared, (JSON.parse(readFileSync(join(bundles, file), "utf8")) as { ops: typeof declared }).ops);
    }
  }
  return declared!;
}

/** The op's declared tolerance `name` (its bundle); throws, naming what to declare, when it
 *  is missing. */
export function tolerance(op: string, name: string): Tolerance {
  const ops = declarations();
  if (!Object.hasOwn(ops, op)) throw new Error(`op '${op}' is not declared in ops/attention/; declare it in its bundle (docs/adding-an-op.md)`);
  const own = ops[op].tolerances ?? {};
  const e = name !== "none" && Object.hasOwn(own, name) ? own[name] : undefined;
  if (e === undefined || typeof e === "string") {
    const have = Object.keys(own).filter((k) => k !== "none");
    throw new Error(`op '${op}' declares no tolerance '${name}' in its bundle, ops/attention/ (it declares ${have.length ? have.join(", ") : "none"}); ` +
      "add it with its rule and its reason (docs/adding-an-op.md)");
  }
  return { value: e.value, rule: e.rule, why: e.why, step: e.step, minGrad: e.min_grad, floor: e.floor };
}

/** fn run twice on the same inputs: with the JavaScript loops forced (productEngine.mode "js"),
 * then in the second step of a workspace (its tensors in the Wasm kernels' memory, so the row
 * kernels of kernels/rows.ts run where they apply); fn gets `inWs`, which copies a tensor into the
 * active workspace, and returns copies of its results. Asserts the row kernels ran (at least
 * `wasmCalls` calls) and that every result has the same bits both ways (anyNaN: or is a NaN both
 * ways, of whichever sign and payload: the operations fix a NaN's bits no more than IEEE 754 does,
 * and no document keeps them); returns the JavaScript results. */
export function sameBitsInKernels(what: string, fn: (inWs: (t: Tensor) => Tensor) => Float64Array[], wasmCalls = 1, anyNaN = false): Float64Array[] {
  const inWs = (t: Tensor): Tensor => { const z = zeros(t.shape); z.data.set(t.data); return z; };
  productEngine.mode = "js";
  let want: Float64Array[];
  try { want = fn(inWs); } finally { productEngine.mode = "auto"; }
  assert.ok(rowEngine.simd, "the Wasm row kernels exist under Node 24 (else this would test the fallback)");
  const ws = newWorkspace();
  inWorkspace(ws, () => fn(inWs)); // the first step sizes the workspace: the second lies in the kernels' memory
  rowEngine.wasmRuns = 0;
  const got = inWorkspace(ws, () => fn(inWs));
  assert.ok(rowEngine.wasmRuns >= wasmCalls, `${what}: ${rowEngine.wasmRuns} row-kernel calls, expected at least ${wasmCalls}`);
  assert.equal(got.length, want.length);
  got.forEach((g, j) => {
    assert.equal(g.length, want[j].length, `${what}: result ${j}'s size`);
    const a = new BigUint64Array(g.buffer, g.byteOffset, g.length), b = new BigUint64Array(want[j].buffer, want[j].byteOffset, g.length);
    for (let i = 0; i < a.length; i++) {
      if (a[i] !== b[i] && !(anyNaN && Number.isNaN(g[i]) && Number.isNaN(want[j][i]))) assert.fail(`${what}: result ${j}, element ${i} is ${g[i]} in the kernels, ${want[j][i]} in the loops`);
    }
  });
  return want;
}

/** A small deterministic generator (xorshift64*), independent of the port's generator. */
export function makeRandom(seed: number): () => number {
  let s = BigInt(seed) * 0x9e3779b97f4a7c15n + 1n;
  const mask = (1n << 64n) - 1n;
  return () => {
    s ^= s >> 12n; s ^= (s << 25n) & mask; s ^= s >> 27n;
    return Number(((s * 0x2545f4914f6cdd1dn) & mask) >> 11n) / 2 ** 53;
  };
}

/** Data where the order of a sum shows: signs mixed, magnitudes 1e-20..1e20, zeros of both signs. */
export function wild(rand: () => number, shape: number[]): Tensor {
  const data = new Float64Array(sizeOf(shape));
  for (let i = 0; i < data.length; i++) {
    const u = rand();
    if (u < 0.06) data[i] = 0;
    else if (u < 0.12) data[i] = -0;
    else data[i] = (rand() * 2 - 1) * 10 ** Math.floor(rand() * 41 - 20);
  }
  return { shape, data };
}

/** got has want's bits, element by element (BigUint64Array views: -0 and +0 differ, NaN equals
 * a NaN of the same bits), and want's shape when want is a tensor. */
export function assertSameBits(got: Tensor, want: Tensor | Float64Array, what: string): void {
  const wantData = want instanceof Float64Array ? want : want.data;
  if (!(want instanceof Float64Array)) assert.deepEqual(got.shape, want.shape, `${what}: shape`);
  assert.equal(got.data.length, wantData.length, `${what}: size`);
  const g = new BigUint64Array(got.data.buffer, got.data.byteOffset, got.data.length);
  const w = new BigUint64Array(wantData.buffer, wantData.byteOffset, wantData.length);
  for (let i = 0; i < g.length; i++) {
    if (g[i] !== w[i]) assert.fail(`${what}: element ${i} is ${got.data[i]}, the loop gives ${wantData[i]}`);
  }
}
