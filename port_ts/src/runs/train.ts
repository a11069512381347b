// The training loop of the baked runs, their checkpoints and state documents (twin:
// reference/runs/train.py; the contract is docs/training.md).
//
// train(params, names, stepFn, steps, lr, clip, checkpointEvery, state?) -> { history, checkpoints }
//   params           Record<name, Tensor>, updated in place
//   names            the model's parameter order: every sum, loop and digest walks it
//   stepFn(params, t) -> { loss, grads } for the batch of step t (a deterministic function of
//                    the data and t); grads keyed by the same names
//   steps            the last step to run: a fresh run does steps 1..steps, a run resumed from a
//                    state at step t0 does t0+1..steps
//   lr, clip         Adam's learning rate; the clipping threshold theta (null: never clip)
//   checkpointEvery  K: the state is kept at every step t with t % K == 0, at the starting step
//                    when it is such a multiple (t = 0 for a fresh run) and at the last
//   state            the optimiser state to resume from (adamInit's form), or undefined
// Each step t: { loss, grads } = stepFn(params, t); n = clipGradients(grads) (the norm before
// clipping; globalNorm when clip is null); record loss and n; adamStep. So the loss and n of
// step t are those of the parameters before update t.
// history = { loss: number[], gradNorm: number[] } for steps t0+1..steps, in order;
// checkpoints = Map t -> { params copy, state copy }, in increasing t.
//
// A state document is a golden-layout document (docs/goldens.md) with empty inputs, outputs
// "param.<name>", "m.<name>", "v.<name>" and "opt" = [t, b1t, b2t], and digests { state: hex }.
// Its digest is the SHA-256 of the little-endian float64 bytes of each parameter (names order),
// then each m, then each v, then [t, b1t, b2t]; with no optimiser state, the parameters alone.
// SHA-256 is written out below (FIPS 180-4) so the core needs neither node:crypto nor the
// asynchronous WebCrypto.

import type { Tensor } from "../core/ops.ts";
import type { Params } from "../core/params.ts";
import { type AdamState, adamInit, adamStep, clipGradients, globalNorm } from "./optim.ts";
import { ENGINE, SCHEMA_VERSION, type Json, tensorDoc } from "../core/golden.ts";
import { GENERATOR } from "../core/rng.ts";

export type StepFn = (params: Params, t: number) => { loss: number; grads: Params };
export interface History { loss: number[]; gradNorm: number[] }
export interface Snapshot { params: Params; state: AdamState }
export type StateDocument = { [key: string]: Json };

function copyTensor(x: Tensor): Tensor {
  return { shape: [...x.shape], data: Float64Array.from(x.data) };
}

/** An independent copy { params, state } of a run's state. */
export function copyState(params: Params, names: readonly string[], state: AdamState): Snapshot {
  const p: Params = {}, m: Params = {}, v: Params = {};
  for (const name of names) {
    p[name] = copyTensor(params[name]);
    m[name] = copyTensor(state.m[name]);
    v[name] = copyTensor(state.v[name]);
  }
  return { params: p, state: { t: state.t, b1t: state.b1t, b2t: state.b2t, m, v } };
}

/** Adam (with the book's clipping) from the state (or step 0) to step `steps`; see the header. */
export function train(
  params: Params, names: readonly string[], stepFn: StepFn, steps: number, lr: number, clip: number | null,
  checkpointEvery: number, state?: AdamState,
): { history: History; checkpoints: Map<number, Snapshot> } {
  if (!(Number.isInteger(checkpointEvery) && checkpointEvery >= 1)) {
    throw new RangeError(`train: checkpointEvery must be a positive integer, got ${checkpointEvery}`);
  }
  const st = state ?? adamInit(params, names);
  const start = st.t;
  if (!(Number.isInteger(steps) && steps >= start)) {
    throw new RangeError(`train: steps must be an integer >= the state's step ${start}, got ${steps}`);
  }
  const history: History = { loss: [], gradNorm: [] };
  const checkpoints = new Map<number, Snapshot>();
  if (start % checkpointEvery === 0) checkpoints.set(start, copyState(params, names, st));
  for (let t = start + 1; t <= steps; t++) {
    const { loss, grads: raw } = stepFn(params, t);
    const grads: Params = {}; // clipping replaces entries of this record only
    for (const name of names) grads[name] = raw[name];
    const n = clip === null ? globalNorm(grads, names) : clipGradients(grads, names, clip);
    history.loss.push(loss);
    history.gradNorm.push(n);
    adamStep(params, grads, names, st, lr);
    if (t % checkpointEvery === 0 || t === steps) checkpoints.set(t, copyState(params, names, st));
  }
  return { history, checkpoints };
}

// SHA-256 round constants: the first 32 bits of the fractional parts of the cube roots of the
// first 64 primes (FIPS 180-4, 4.2.2).
const K256 = Uint32Array.from([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

/** SHA-256 (hex) of a byte string. */
function sha256Hex(bytes: Uint8Array): string {
  const bitLen = bytes.length * 8;
  const padded = new Uint8Array(Math.ceil((bytes.length + 9) / 64) * 64);
  padded.set(bytes);
  padded[bytes.length] = 0x80;
  const tail = new DataView(padded.buffer);
  tail.setUint32(padded.length - 8, Math.floor(bitLen / 2 ** 32), false);
  tail.setUint32(padded.length - 4, bitLen >>> 0, false);
  const h = Uint32Array.from([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const w = new Uint32Array(64);
  const rotr = (x: number, n: number) => (x >>> n) | (x << (32 - n));
  for (let off = 0; off < padded.length; off += 64) {
    for (let i = 0; i < 16; i++) w[i] = tail.getUint32(off + 4 * i, false);
    for (let i = 16; i < 64; i++) {
      const s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >>> 3);
      const s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >>> 10);
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) >>> 0;
    }
    let a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (let i = 0; i < 64; i++) {
      const t1 = (k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i]) >>> 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) >>> 0;
      k = g; g = f; f = e; e = (d + t1) >>> 0; d = c; c = b; b = a; a = (t1 + t2) >>> 0;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
  }
  return Array.from(h, (x) => x.toString(16).padStart(8, "0")).join("");
}

/** SHA-256 (hex) of the state's little-endian float64 bytes; the parameters alone when state
 *  is undefined (the initial-parameter digest). */
export function stateDigest(params: Params, names: readonly string[], state?: AdamState): string {
  const parts: ArrayLike<number>[] = names.map((name) => params[name].data);
  if (state !== undefined) {
    for (const name of names) parts.push(state.m[name].data);
    for (const name of names) parts.push(state.v[name].data);
    parts.push([state.t, state.b1t, state.b2t]);
  }
  let count = 0;
  for (const p of parts) count += p.length;
  const bytes = new Uint8Array(count * 8);
  const view = new DataView(bytes.buffer);
  let at = 0;
  for (const p of parts) {
    for (let i = 0; i < p.length; i++, at += 8) view.setFloat64(at, p[i], true);
  }
  return sha256Hex(bytes);
}

/** The state as a golden-layout document (no "case": cases.ts echoes the case into it). */
export function stateDocument(params: Params, names: readonly string[], state: AdamState): StateDocument {
  const outputs: { [key: string]: Json } = {};
  for (const name of names) {
    outputs[`param.${name}`] = tensorDoc(params[name]);
    outputs[`m.${name}`] = tensorDoc(state.m[name]);
    outputs[`v.${name}`] = tensorDoc(state.v[name]);
  }
  outputs.opt = tensorDoc({ shape: [3], data: Float64Array.from([state.t, state.b1t, state.b2t]) });
  return {
    schema_version: SCHEMA_VERSION, engine: { ...ENGINE }, generator: GENERATOR,
    inputs: {}, outputs, digests: { state: stateDigest(params, names, state) },
  };
}

/** { params, state } read back from a state document; checks every tensor is there and the
 *  digest, when the document has one, matches what was read. */
export function stateFromDocument(doc: StateDocument, names: readonly string[]): Snapshot {
  const outputs = (doc.outputs ?? {}) as { [key: string]: { shape: number[]; data: (number | string)[] } };
  const read = (key: string): Tensor => {
    if (!Object.hasOwn(outputs, key)) {
      throw new RangeError(`state document: missing tensor '${key}'; it has [${Object.keys(outputs).sort().join(", ")}]`);
    }
    const t = outputs[key];
    return { shape: [...t.shape], data: Float64Array.from(t.data, (x) => Number(x)) };
  };
  const params: Params = {}, m: Params = {}, v: Params = {};
  for (const name of names) params[name] = read(`param.${name}`);
  const opt = read("opt").data;
  if (opt.length !== 3 || !Number.isInteger(opt[0]) || opt[0] < 0) {
    throw new RangeError(`state document: opt must be [t, b1t, b2t] with t a step count, got [${Array.from(opt)}]`);
  }
  for (const name of names) m[name] = read(`m.${name}`);
  for (const name of names) v[name] = read(`v.${name}`);
  const state: AdamState = { t: opt[0], b1t: opt[1], b2t: opt[2], m, v };
  const digests = (doc.digests ?? {}) as { [key: string]: Json };
  const want = digests.state;
  if (typeof want === "string" && want !== stateDigest(params, names, state)) {
    throw new RangeError(`state document of step ${state.t}: its digest ${want} does not match its tensors`);
  }
  return { params, state };
}
