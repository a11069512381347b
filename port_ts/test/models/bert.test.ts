// The BERT encoder on a tiny random checkpoint written here as safetensors (F32, names with the
// "bert." prefix of a BertForX checkpoint): padding that changes no bit of the valid positions
// and gives padded keys weight exactly 0, and config checks. Shapes, attention rows and the
// embeddings' order of adds are the cases pretrained.minilm.*, the real model bit for bit against
// the reference, itself checked against Hugging Face by tests/test_pretrained.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { intTensor } from "../../src/core/ops.ts";
import { parseSafetensors } from "../../src/core/safetensors.ts";
import { bertConfig, bertForward, bertParams, paramShapes, validLengths, type BertConfig } from "../../src/models/bert.ts";

const CONFIG = { vocab_size: 10, hidden_size: 8, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 12,
  max_position_embeddings: 6, type_vocab_size: 2, layer_norm_eps: 1e-12, hidden_act: "gelu", position_embedding_type: "absolute" };

function checkpoint(cfg: BertConfig): Uint8Array {
  const g = new Generator(70);
  const header: Record<string, unknown> = {};
  const chunks: Uint8Array[] = [];
  let offset = 0;
  for (const [name, shape] of paramShapes(cfg)) {
    const values = g.normal(shape, 0, 0.5).data;
    const bytes = new Uint8Array(values.length * 4);
    const view = new DataView(bytes.buffer);
    values.forEach((v, i) => view.setFloat32(4 * i, v, true));
    header["bert." + name] = { dtype: "F32", shape, data_offsets: [offset, offset + bytes.length] };
    chunks.push(bytes);
    offset += bytes.length;
  }
  const text = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + text.length + offset);
  new DataView(out.buffer).setUint32(0, text.length, true);
  out.set(text, 8);
  let at = 8 + text.length;
  for (const c of chunks) { out.set(c, at); at += c.length; }
  return out;
}

const cfg = bertConfig(CONFIG);
const params = bertParams(parseSafetensors(checkpoint(cfg)), cfg);

// No case runs a sentence both alone and padded: pretrained.minilm.padded_batch pads the shorter two.
test("padding changes no bit of the valid positions; padded keys get weight exactly 0", () => {
  const alone = bertForward(intTensor([1, 3], [1, 9, 8]), null, intTensor([1, 3], [0, 1, 1]), params, cfg).cache;
  const padded = bertForward(intTensor([1, 5], [1, 9, 8, 0, 0]), intTensor([1, 5], [1, 1, 1, 0, 0]),
    intTensor([1, 5], [0, 1, 1, 0, 0]), params, cfg).cache;
  for (let l = 0; l < 3; l++)
    for (let t = 0; t < 3; t++)
      for (let j = 0; j < 8; j++) {
        assert.ok(Object.is(padded.hiddenStates.data[(l * 5 + t) * 8 + j], alone.hiddenStates.data[(l * 3 + t) * 8 + j]));
      }
  for (let l = 0; l < 2; l++)
    for (let h = 0; h < 2; h++)
      for (let q = 0; q < 5; q++)
        for (let k = 0; k < 5; k++) {
          const w = padded.attentions.data[(((l * 2 + h) * 5 + q) * 5) + k];
          if (k >= 3) assert.equal(w, 0);
          else if (q < 3) assert.ok(Object.is(w, alone.attentions.data[(((l * 2 + h) * 3 + q) * 3) + k]));
        }
});

test("checks: left padding, too many tokens, an unsupported activation, a missing key", () => {
  assert.deepEqual(Array.from(validLengths(intTensor([2, 3], [1, 1, 0, 1, 1, 1])).data), [2, 3]);
  assert.throws(() => validLengths(intTensor([1, 3], [0, 1, 1])), /ones then zeros/);
  assert.throws(() => bertForward(intTensor([1, 7], [1, 1, 1, 1, 1, 1, 1]), null, null, params, cfg), /max_position_embeddings/);
  assert.throws(() => bertConfig({ ...CONFIG, hidden_act: "relu" }), /implements only 'gelu'/);
  const { vocab_size: _, ...rest } = CONFIG;
  assert.throws(() => bertConfig(rest), /lacks vocab_size/);
});
