// The kernels' one WebAssembly memory, and the workspace a training step draws its tensors from
// (port only: NumPy allocates its own; docs/performance.md).
//
// The three modules of kernels/wasm.ts run on one memory, the product module's: at its bottom the
// scratch space where the kernels copy operands that lie elsewhere (the products' A, packed B
// and O, the row kernels' gamma, beta and bias), and above it, during a step, the region where
// that step's workspace places its tensors, so that the kernels read and write them in place.
//
// A workspace: the memory of one training step, owned by its run and reused from step to step
// (inWorkspace). While one is active, core/ops.ts's zeros and empty take their arrays from it
// (zeros zero-filled, as new Float64Array) instead of allocating: no allocation, zeroing by the
// allocator or garbage collection per tensor. Everything handed out inside inWorkspace(ws, fn) is
// overwritten by the next inWorkspace(ws, ...): fn copies what it returns out of it (the
// gradients). Where the Wasm kernels exist, a step's tensors live in their memory (as many
// doubles as the previous step used; the rest, if any, in ordinary chunks). The memory does not
// grow during such a step (growing would detach the tensors' views): a kernel whose copies do
// not fit the scratch space below the workspace runs in JavaScript, and the next step reserves more.

import { instantiateProduct, instantiateProductT, instantiateRows, type ProductFn, type ProductTFn, type RowFns, type WasmMemory } from "./wasm.ts";

const product = instantiateProduct();
/** The Wasm kernels on their one memory, or null where WebAssembly or its SIMD is missing (then
 * every kernel runs its JavaScript form); productT or rows null where only they cannot compile. */
export const wasm: { product: ProductFn; productT: ProductTFn | null; rows: RowFns | null; memory: WasmMemory } | null =
  product === null ? null : {
    product: product.product,
    productT: instantiateProductT(product.memory), // the gathering product
    rows: instantiateRows(product.memory), // the row kernels
    memory: product.memory,
  };

let heap = new Float64Array(0); // a view of the memory, renewed when it grows
let scratchWant = 0; // the most doubles the kernels' copies have needed
let pinnedAt = -1; // where a step's workspace region starts in the memory (doubles), -1: none

/** Reserve n doubles of scratch space for the steps to come (a workspace is pinned above it). */
export function reserveScratch(n: number): void {
  if (n > scratchWant) scratchWant = n;
}

/** The memory as doubles, its first n free for a kernel's copies; null when a step's workspace
 * is pinned above and n does not fit below it. */
export function scratch(n: number): Float64Array | null {
  reserveScratch(n);
  if (pinnedAt >= 0) return n <= pinnedAt ? heap : null;
  return heapOf(n);
}

/** The memory grown to at least n doubles, as a Float64Array. */
function heapOf(n: number): Float64Array {
  const memory = wasm!.memory;
  if (memory.buffer.byteLength < n * 8) memory.grow(Math.ceil((n * 8 - memory.buffer.byteLength) / 65536));
  if (heap.buffer !== memory.buffer) heap = new Float64Array(memory.buffer);
  return heap;
}

/** A region of `need` doubles of the memory for a step's workspace, above the scratch space the
 * kernels' copies have needed; null without the Wasm kernels. */
function pinRegion(need: number): Float64Array | null {
  if (wasm === null) return null;
  const at = (scratchWant + 1) & ~1;
  const H = heapOf(at + need);
  pinnedAt = at;
  return H.subarray(at, at + need);
}

export interface Workspace {
  chunks: Float64Array[]; // ordinary chunks, filled in order; never moved, so views stay valid
  chunk: number; // the chunk being filled
  offset: number; // its first free double
  wasm: Float64Array | null; // this step's region of the Wasm memory, null outside a step
  wasmOffset: number; // its first free double
  used: number; // doubles handed out in this step
  need: number; // the most any step has used
  busy: boolean;
}
const CHUNK = 1 << 20; // doubles per chunk (8 MB), or the tensor's size when larger
let active: Workspace | null = null;

/** An empty workspace (its memory is allocated on first use, then kept). */
export function newWorkspace(): Workspace {
  return { chunks: [], chunk: 0, offset: 0, wasm: null, wasmOffset: 0, used: 0, need: 0, busy: false };
}

/** fn() with zeros and empty drawing from ws, from its start: ws's previous contents are overwritten. */
export function inWorkspace<T>(ws: Workspace, fn: () => T): T {
  if (ws.busy) throw new Error("inWorkspace: this workspace is already in use (a step inside a step?); give each run its own");
  const outer = active;
  ws.busy = true;
  ws.chunk = 0;
  ws.offset = 0;
  ws.used = 0;
  ws.wasmOffset = 0;
  ws.wasm = outer === null && ws.need > 0 ? pinRegion(ws.need) : null;
  active = ws;
  try {
    return fn();
  } finally {
    active = outer;
    if (ws.wasm !== null) { ws.wasm = null; pinnedAt = -1; }
    if (ws.used > ws.need) ws.need = ws.used;
    ws.busy = false;
  }
}

/** n doubles: from the active workspace (zeroed unless fill is false: then it holds what an
 * earlier step left there), else a new (zero) array. */
export function doubles(n: number, fill: boolean): Float64Array {
  return active === null ? new Float64Array(n) : take(active, n, fill);
}

/** n doubles from ws, zeroed unless fill is false. */
function take(ws: Workspace, n: number, fill: boolean): Float64Array {
  const step = (n + 1) & ~1; // every start 16-byte aligned
  ws.used += step;
  let out: Float64Array;
  if (ws.wasm !== null && ws.wasmOffset + n <= ws.wasm.length) {
    out = ws.wasm.subarray(ws.wasmOffset, ws.wasmOffset + n);
    ws.wasmOffset += step;
  } else {
    for (;;) {
      const c = ws.chunks[ws.chunk];
      if (c === undefined) ws.chunks.push(new Float64Array(Math.max(n, CHUNK)));
      else if (ws.offset + n <= c.length) {
        out = c.subarray(ws.offset, ws.offset + n);
        ws.offset += step;
        break;
      } else {
        ws.chunk++;
        ws.offset = 0;
      }
    }
  }
  if (fill) out.fill(0);
  return out;
}
