// A BERT-style encoder run from pretrained weights, in float64 (twin: bert.py). docs/pretrained.md.
//
//     x0  = LN(word[ids] + type[token_type_ids] + pos[0..T-1])      embeddings, that order of adds
//     per layer l = 0..L-1 (post-norm, as BertLayer in eval mode):
//       q, k, v = x W_q^T + b_q, x W_k^T + b_k, x W_v^T + b_v          (B, T, d)
//       heads   = attention(split(q), split(k), split(v), lens)        (B, H, T, D)  scores / sqrt(D)
//       a       = merge(heads) W_o^T + b_o                             (B, T, d)
//       h       = LN(a + x)
//       f       = gelu(h W_i^T + b_i) W_2^T + b_2                       (B, T, F) -> (B, T, d)
//       x       = LN(f + h)
// LN is layer norm with the config's eps (1e-12 here). Attention reuses dotProductAttention and
// its masked softmax; BERT's q/k/v/o biases are added here by linear, so multi-head attention
// stays as the book's. The padding mask becomes valid lengths (the mask must be 1...1 0...0 per
// row): a padded key's score is replaced by -1e6, where Hugging Face adds finfo(float64).min;
// both make exp underflow to exactly 0, so the weights are the same (docs/pretrained.md).
// No dropout (inference).
//
// Shape legend: B batch, T steps, d model dim (hidden_size), H heads, D = d / H head dim,
// F FFN hidden (intermediate_size), L layers, V vocabulary.
// Parameters keep Hugging Face's names: embeddings.word_embeddings.weight (V, d),
// encoder.layer.<l>.attention.self.query.weight (d, d), ... output.dense.weight (d, F).

import { type IntTensor, type Tensor, zeros } from "../core/ops.ts";
import { dotProductAttentionForward } from "../nn/dotProductAttention.ts";
import { embeddingForward } from "../nn/embedding.ts";
import { geluForward } from "../nn/gelu.ts";
import { layerNormForward } from "../nn/layerNorm.ts";
import { linearForward } from "../nn/linear.ts";
import { mergeHeads, splitHeads } from "../nn/multiHeadAttention.ts";
import { type SafetensorsFile, loadTensor, tensorNames } from "../core/safetensors.ts";
import { scope, sublayer } from "../core/trace.ts";

export interface BertConfig {
  vocab_size: number;
  hidden_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  intermediate_size: number;
  max_position_embeddings: number;
  type_vocab_size: number;
  layer_norm_eps: number;
}

export type BertParams = Record<string, Tensor>;

// config.json keys this encoder needs, and the values it supports where only one is implemented
const REQUIRED: (keyof BertConfig)[] = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
  "intermediate_size", "max_position_embeddings", "type_vocab_size", "layer_norm_eps"];
const SUPPORTED: Record<string, string> = { hidden_act: "gelu", position_embedding_type: "absolute" };

/** The encoder's sizes from a Hugging Face config.json (parsed), checked. */
export function bertConfig(configJson: Record<string, unknown>): BertConfig {
  const missing = REQUIRED.filter((k) => !Object.hasOwn(configJson, k));
  if (missing.length > 0) throw new RangeError(`bert: config.json lacks ${missing.join(", ")}; a BERT config.json has ${REQUIRED.join(", ")}`);
  for (const [key, value] of Object.entries(SUPPORTED)) {
    if (Object.hasOwn(configJson, key) && configJson[key] !== value) {
      throw new RangeError(`bert: config ${key} = ${JSON.stringify(configJson[key])}; this encoder implements only '${value}'`);
    }
  }
  const cfg = Object.fromEntries(REQUIRED.map((k) => [k, configJson[k]])) as unknown as BertConfig;
  if (cfg.hidden_size % cfg.num_attention_heads !== 0) {
    throw new RangeError(`bert: hidden_size ${cfg.hidden_size} is not a multiple of num_attention_heads ${cfg.num_attention_heads}`);
  }
  return cfg;
}

/** {name: shape} of every parameter the encoder reads, in Hugging Face's names. */
export function paramShapes(cfg: BertConfig): Map<string, number[]> {
  const d = cfg.hidden_size, F = cfg.intermediate_size;
  const shapes = new Map<string, number[]>([
    ["embeddings.word_embeddings.weight", [cfg.vocab_size, d]],
    ["embeddings.position_embeddings.weight", [cfg.max_position_embeddings, d]],
    ["embeddings.token_type_embeddings.weight", [cfg.type_vocab_size, d]],
    ["embeddings.LayerNorm.weight", [d]], ["embeddings.LayerNorm.bias", [d]],
  ]);
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    const p = `encoder.layer.${l}.`;
    for (const part of ["query", "key", "value"]) {
      shapes.set(p + `attention.self.${part}.weight`, [d, d]);
      shapes.set(p + `attention.self.${part}.bias`, [d]);
    }
    shapes.set(p + "attention.output.dense.weight", [d, d]).set(p + "attention.output.dense.bias", [d])
      .set(p + "attention.output.LayerNorm.weight", [d]).set(p + "attention.output.LayerNorm.bias", [d])
      .set(p + "intermediate.dense.weight", [F, d]).set(p + "intermediate.dense.bias", [F])
      .set(p + "output.dense.weight", [d, F]).set(p + "output.dense.bias", [d])
      .set(p + "output.LayerNorm.weight", [d]).set(p + "output.LayerNorm.bias", [d]);
  }
  return shapes;
}

/** Every parameter from a parsed safetensors file (parseSafetensors), float64. A checkpoint
 *  saved from BertForX prefixes its names with "bert."; both spellings are read. */
export function bertParams(st: SafetensorsFile, cfg: BertConfig): BertParams {
  const names = new Set(tensorNames(st));
  const params: BertParams = {};
  for (const [name, shape] of paramShapes(cfg)) {
    const stored = names.has(name) ? name : "bert." + name;
    if (!names.has(stored)) throw new RangeError(`bert: the weights lack '${name}'; is this a BERT checkpoint of this config?`);
    const t = loadTensor(st, stored);
    if (!(t.data instanceof Float64Array) || t.shape.join() !== shape.join()) {
      throw new RangeError(`bert: ${stored} has shape (${t.shape}) of ${t.data.constructor.name}, the config implies float (${shape})`);
    }
    params[name] = t as Tensor;
  }
  return params;
}

/** (B, T) of 0/1 -> (B,) lengths; every row must be ones then zeros (right padding). */
export function validLengths(attentionMask: IntTensor): IntTensor {
  const [B, T] = attentionMask.shape;
  const lens = new Int32Array(B);
  for (let b = 0; b < B; b++) {
    const row = attentionMask.data.subarray(b * T, (b + 1) * T);
    let n = 0;
    for (let t = 0; t < T; t++) if (row[t] !== 0) n++;
    for (let t = 0; t < T; t++) {
      if (row[t] !== (t < n ? 1 : 0)) {
        throw new RangeError(`bert: attention_mask row ${b} is [${Array.from(row).join(", ")}]; it must be ones then zeros ` +
          "(right padding, as the tokenizer pads)");
      }
    }
    lens[b] = n;
  }
  return { shape: [B], data: lens };
}

function add(a: Tensor, b: Tensor): Tensor {
  const out = zeros(a.shape);
  for (let i = 0; i < out.data.length; i++) out.data[i] = a.data[i] + b.data[i];
  return out;
}

/** ids (B, T) int -> x0 (B, T, d). */
export function bertEmbeddingsForward(inputIds: IntTensor, tokenTypeIds: IntTensor, params: BertParams, cfg: BertConfig):
    { out: Tensor; cache: { summed: Tensor } } {
  const [B, T] = inputIds.shape;
  if (T > cfg.max_position_embeddings) throw new RangeError(`bert: ${T} tokens exceed max_position_embeddings = ${cfg.max_position_embeddings}`);
  const positions: IntTensor = { shape: [B, T], data: new Int32Array(B * T) }; // (B, T)
  for (let i = 0; i < B * T; i++) positions.data[i] = i % T;
  const word = embeddingForward(inputIds, params["embeddings.word_embeddings.weight"]).out; // (B, T, d)
  const typ = embeddingForward(tokenTypeIds, params["embeddings.token_type_embeddings.weight"]).out; // (B, T, d)
  const pos = embeddingForward(positions, params["embeddings.position_embeddings.weight"]).out; // (B, T, d)
  const summed = add(add(word, typ), pos); // (B, T, d)  Hugging Face's order of adds
  const { out } = layerNormForward(summed, params["embeddings.LayerNorm.weight"], params["embeddings.LayerNorm.bias"], cfg.layer_norm_eps);
  return { out, cache: { summed } };
}

/** Self-attention with biases: x (B, T, d) -> a (B, T, d), cache with weights (B, H, T, T). */
export function bertAttentionForward(x: Tensor, params: BertParams, prefix: string, numHeads: number, validLens: IntTensor):
    { out: Tensor; cache: { weights: Tensor; q: Tensor; k: Tensor; v: Tensor } } {
  const p = prefix + "attention.";
  const q = linearForward(x, params[p + "self.query.weight"], params[p + "self.query.bias"]).out; // (B, T, d)
  const k = linearForward(x, params[p + "self.key.weight"], params[p + "self.key.bias"]).out; // (B, T, d)
  const v = linearForward(x, params[p + "self.value.weight"], params[p + "self.value.bias"]).out; // (B, T, d)
  const { out: heads, cache: attn } = dotProductAttentionForward(splitHeads(q, numHeads), splitHeads(k, numHeads),
    splitHeads(v, numHeads), validLens); // (B, H, T, D)
  const a = linearForward(mergeHeads(heads), params[p + "output.dense.weight"], params[p + "output.dense.bias"]).out; // (B, T, d)
  return { out: a, cache: { weights: attn.weights, q, k, v } };
}

/** An add-and-norm: LN(y + x) with the parameters <name>.weight, <name>.bias -> out (B, T, d). */
export function bertAddNormForward(y: Tensor, x: Tensor, params: BertParams, name: string, eps: number): Tensor {
  return layerNormForward(add(y, x), params[name + ".weight"], params[name + ".bias"], eps).out;
}

/** The feed-forward: gelu(h W_i^T + b_i) W_2^T + b_2, h (B, T, d) -> f (B, T, d). */
export function bertFfnForward(h: Tensor, params: BertParams, prefix: string): Tensor {
  const i = linearForward(h, params[prefix + "intermediate.dense.weight"], params[prefix + "intermediate.dense.bias"]).out; // (B, T, F)
  const g = geluForward(i).out; // (B, T, F)
  return linearForward(g, params[prefix + "output.dense.weight"], params[prefix + "output.dense.bias"]).out; // (B, T, d)
}

/** One post-norm encoder layer: x (B, T, d) -> out (B, T, d), cache with weights (B, H, T, T).
 *  Traced sub-layers (core/trace.ts): attention, addnorm1, ffn, addnorm2. */
export function bertLayerForward(x: Tensor, params: BertParams, layer: number, cfg: BertConfig, validLens: IntTensor):
    { out: Tensor; cache: { weights: Tensor; h: Tensor } } {
  const p = `encoder.layer.${layer}.`, eps = cfg.layer_norm_eps;
  const { out: a, cache: attn } = sublayer("attention", bertAttentionForward, x, params, p, cfg.num_attention_heads, validLens); // (B, T, d)
  const h = sublayer("addnorm1", bertAddNormForward, a, x, params, p + "attention.output.LayerNorm", eps); // (B, T, d)
  const f = sublayer("ffn", bertFfnForward, h, params, p); // (B, T, d)
  const out = sublayer("addnorm2", bertAddNormForward, f, h, params, p + "output.LayerNorm", eps); // (B, T, d)
  return { out, cache: { weights: attn.weights, h } };
}

function stack(parts: Tensor[]): Tensor {
  const n = parts[0].data.length;
  const out = zeros([parts.length, ...parts[0].shape]);
  parts.forEach((t, i) => out.data.set(t.data, i * n));
  return out;
}

/** ids, mask, token types (B, T) int -> last hidden state (B, T, d) and a cache with
 *  hiddenStates (L + 1, B, T, d): the embeddings, then every layer's output, and
 *  attentions (L, B, H, T, T): every head's weights, as Hugging Face's outputs.
 *  Traced sub-layers (core/trace.ts): embedding, then layer<l>.attention .. layer<l>.addnorm2. */
export function bertForward(inputIds: IntTensor, attentionMask: IntTensor | null, tokenTypeIds: IntTensor | null,
  params: BertParams, cfg: BertConfig): { out: Tensor; cache: { hiddenStates: Tensor; attentions: Tensor; validLens: IntTensor } } {
  if (inputIds.shape.length !== 2) throw new RangeError(`bert: input_ids must be (B, T), got shape (${inputIds.shape})`);
  const n = inputIds.data.length;
  const mask = attentionMask ?? { shape: [...inputIds.shape], data: new Int32Array(n).fill(1) };
  const types = tokenTypeIds ?? { shape: [...inputIds.shape], data: new Int32Array(n) };
  if (mask.shape.join() !== inputIds.shape.join() || types.shape.join() !== inputIds.shape.join()) {
    throw new RangeError(`bert: attention_mask (${mask.shape}) and token_type_ids (${types.shape}) must match input_ids (${inputIds.shape})`);
  }
  const validLens = validLengths(mask); // (B,)
  let x = sublayer("embedding", bertEmbeddingsForward, inputIds, types, params, cfg).out; // (B, T, d)
  const hidden = [x], weights: Tensor[] = [];
  for (let layer = 0; layer < cfg.num_hidden_layers; layer++) {
    scope(`layer${layer}.`); // names the layer's traced sub-layers
    const r = bertLayerForward(x, params, layer, cfg, validLens); // (B, T, d)
    x = r.out;
    hidden.push(x);
    weights.push(r.cache.weights);
  }
  scope("");
  return { out: x, cache: { hiddenStates: stack(hidden), attentions: stack(weights), validLens } };
}
