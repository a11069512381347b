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

import type { Tensor } from "../core/ops.ts";
import { float64Digest } from "../core/digest.ts";
import type { Params } from "../core/params.ts";
import { type AdamState, adamInit, adamStep, clipGradients, globalNorm } from "./optim.ts";
import { ENGINE, SCHEMA_VERSION, type Json, tensorDoc } from "../core/golden.ts";
import { GENERATOR } from "../core/rng.ts";
import { record, untraced } from "../core/trace.ts";

const scalar = (x: number): Tensor => ({ shape: [], data: Float64Array.of(x) });

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
    const step = untraced(() => stepFn(params, t)); // a traced run traces its steps' stages, not the model
    const loss = record(`step${t}.forward`, { loss: scalar(step.loss) }).loss.data[0];
    const raw: Params = {};
    for (const name of names) raw[name] = step.grads[name];
    const grads: Params = { ...record(`step${t}.backward`, { grads: raw }).grads }; // clipping replaces entries of this record only
    const norm = clip === null ? globalNorm(grads, names) : clipGradients(grads, names, clip);
    const clipped = record(`step${t}.clipping`, { grads, norm: scalar(norm) });
    const n = clipped.norm.data[0];
    history.loss.push(loss);
    history.gradNorm.push(n);
    adamStep(params, clipped.grads, names, st, lr);
    const now: Params = {};
    for (const name of names) now[name] = params[name];
    const after = record(`step${t}.adam`, { params: now, m: st.m, v: st.v });
    Object.assign(params, after.params);
    st.m = { ...after.m };
    st.v = { ...after.v };
    if (t % checkpointEvery === 0 || t === steps) checkpoints.set(t, copyState(params, names, st));
  }
  return { history, checkpoints };
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
  return float64Digest(parts);
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
