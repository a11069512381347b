// Cheap forward cases that reach what otherwise only the training runs reach (twin:
// cases_faults.py; docs/faults.md): the digits data, greedy decoding on a small untrained model,
// a few steps of clipping and Adam on drawn gradients, the garment images, and the bits of erf
// and GELU (a 1e-7-accurate erf moves GELU by less than the tolerance; the digests are bit-exact).

import type { Builder, Compute } from "../core/caseConfig.ts";
import type { Generator } from "../core/rng.ts";
import type { Named } from "../core/golden.ts";
import { type IntTensor, type Tensor, zeros } from "../core/ops.ts";
import { type Config, get, need, positiveInt } from "../core/caseConfig.ts";
import { greedyDecode } from "../runs/decode.ts";
import { type DigitArrays, BOS, EOS, batchRows, digitsData, drawDigitSet, encodeInputs } from "../runs/digits.ts";
import { makeGarments } from "../runs/garments.ts";
import { crossEntropyBackward, crossEntropyForward, sequenceWeights } from "../nn/loss.ts";
import { erf, geluBackward, geluForward } from "../nn/gelu.ts";
import type { Params } from "../core/params.ts";
import { adamInit, adamStep, clipGradients } from "../runs/optim.ts";
import { sinusoidalTable } from "../nn/positionalEncoding.ts";
import { exactRows, reversalModelConfig } from "../runs/reversal.ts";
import { stateDigest } from "../runs/train.ts";
import { initTransformerParams } from "../models/transformer.ts";

const ARRAY_NAMES: [keyof DigitArrays, string][] = [
  ["src", "src"], ["srcLens", "src_lens"], ["tgtIn", "tgt_in"], ["tgtOut", "tgt_out"], ["tgtLens", "tgt_lens"],
];

// config: n_train, n_test, min_digits, max_digits, batch, steps
// draws: digitsData (the training set, then the held-out set)
function digitsDataCase(config: Config, rng: Generator) {
  const nTrain = positiveInt(config, "n_train");
  const data = digitsData(rng, nTrain, positiveInt(config, "n_test"), positiveInt(config, "min_digits"), positiveInt(config, "max_digits"));
  const outputs: Named = {};
  for (const split of ["train", "test"] as const) {
    for (const [key, name] of ARRAY_NAMES) outputs[`${split}.${name}`] = data[split][key];
  }
  const batch = positiveInt(config, "batch"), steps = positiveInt(config, "steps");
  const rows = new Int32Array(steps * batch);
  for (let t = 1; t <= steps; t++) rows.set(batchRows(nTrain, batch, t), (t - 1) * batch);
  outputs["batch_rows"] = { shape: [steps, batch], data: rows };
  return { inputs: {}, outputs };
}

// config: the reversal model's sizes (d, heads, ffn_hidden, enc_blocks, dec_blocks), n,
//   min_digits, max_digits, eos_bias (added to the output bias of <eos>, so rows end early)
// draws: initTransformerParams; n distinct inputs (drawDigitSet)
function greedyDecodeCase(config: Config, rng: Generator) {
  const model = reversalModelConfig(config);
  const params = initTransformerParams(rng, model);
  const b = params["dec.out.b"];
  params["dec.out.b"] = { shape: [...b.shape], data: b.data.slice() };
  params["dec.out.b"].data[EOS] = params["dec.out.b"].data[EOS] + get<number>(config, "eos_bias", 0);
  const hi = get<number>(config, "max_digits");
  const inputs = drawDigitSet(rng, get<number>(config, "n"), get<number>(config, "min_digits"), hi);
  const arrays = encodeInputs(inputs, hi);
  const dec = greedyDecode(params, model, arrays.src, arrays.srcLens, hi + 1, BOS, EOS);
  const outputs: Named = {
    "decode.tokens": dec.tokens, "decode.margin": dec.margins, "decode.lengths": dec.lengths,
    "decode.exact": exactRows(dec.tokens, arrays), cross_weights: dec.crossWeights[0],
  };
  return { inputs: { src: arrays.src, src_lens: arrays.srcLens, ...params } as Named, outputs };
}

// config: shapes (a list of parameter shapes), steps, lr, clip (null: never), grad_scale (one per step)
// draws: every parameter ~ N(0, 1) in order; then per step every gradient ~ N(0, 1) in order,
//   multiplied by that step's grad_scale
function optimStepsCase(config: Config, rng: Generator) {
  const shapes = get<number[][]>(config, "shapes");
  const names = shapes.map((_, i) => `p${i}`);
  const params: Params = {}, start: Named = {};
  names.forEach((name, i) => {
    params[name] = rng.normal(shapes[i], 0, 1);
    start[`init.${name}`] = { shape: [...shapes[i]], data: params[name].data.slice() };
  });
  const state = adamInit(params, names);
  const clip = get<number | null>(config, "clip"), lr = get<number>(config, "lr"), scales = get<number[]>(config, "grad_scale");
  const steps = get<number>(config, "steps");
  const norms = new Float64Array(steps);
  for (let t = 0; t < steps; t++) {
    const grads: Params = {};
    names.forEach((name, i) => {
      const g = rng.normal(shapes[i], 0, 1);
      for (let k = 0; k < g.data.length; k++) g.data[k] = g.data[k] * scales[t];
      grads[name] = g;
    });
    norms[t] = clip !== null ? clipGradients(grads, names, clip) : 0;
    adamStep(params, grads, names, state, lr);
  }
  const outputs: Named = {
    grad_norm: { shape: [steps], data: norms },
    opt: { shape: [3], data: Float64Array.of(state.t, state.b1t, state.b2t) },
  };
  for (const name of names) {
    outputs[`param.${name}`] = params[name];
    outputs[`m.${name}`] = state.m[name];
    outputs[`v.${name}`] = state.v[name];
  }
  return { inputs: start, outputs, digests: { state: stateDigest(params, names, state) } };
}

// config: n, classes; draws: makeGarments (permutation, variants, shifts, scales, noise)
function garmentsDataCase(config: Config, rng: Generator) {
  const { images, labels } = makeGarments(rng, positiveInt(config, "n"), positiveInt(config, "classes"));
  return { inputs: {}, outputs: { images, labels } as Named };
}

// config: grid [lo, hi, n] or points [x, ...] (no draws); table [L, d] (optional); outputs erf,
// GELU and GELU's derivative at x, the sinusoidal table when asked, and the SHA-256 digest of each
// (bit identity, where the tolerance would let a 1e-7 erf or a last-bit ln 10000 through)
function erfBitsCase(config: Config, _rng: Generator) {
  let x: Tensor;
  if ("points" in config) {
    const points = get<number[]>(config, "points");
    x = { shape: [points.length], data: Float64Array.from(points) };
  } else {
    const [lo, hi, n] = get<number[]>(config, "grid");
    x = zeros([n]);
    const step = (hi - lo) / (n - 1);
    for (let i = 0; i < n; i++) x.data[i] = lo + i * step;
  }
  const n = x.data.length;
  const e = zeros([n]);
  for (let i = 0; i < n; i++) e.data[i] = erf(x.data[i]);
  const { out, cache } = geluForward(x);
  const ones = zeros([n]);
  ones.data.fill(1);
  const dx = geluBackward(ones, cache);
  const outputs: Record<string, Tensor> = { erf: e, gelu: out, dgelu: dx };
  if ("table" in config) {
    const [L, d] = get<number[]>(config, "table");
    outputs.table = sinusoidalTable(L, d);
  }
  const digests: Record<string, string> = {};
  for (const [name, value] of Object.entries(outputs)) digests[name] = stateDigest({ [name]: value }, [name]);
  return { inputs: { x } as Named, outputs: outputs as Named, digests };
}

// inputs: logits (B, T, V), targets (B, T), valid_lens (B,) (weights: sequenceWeights)
function crossEntropy(inputs: Named): Named {
  const { logits, targets, valid_lens: lens } = need(inputs, "logits", "targets", "valid_lens");
  const { loss, cache } = crossEntropyForward(logits, targets as unknown as IntTensor, sequenceWeights(lens as unknown as IntTensor, logits.shape[1]));
  return { loss: { shape: [], data: Float64Array.of(loss) }, dlogits: crossEntropyBackward(cache) };
}

export const COMPUTE: Record<string, Compute> = { cross_entropy: crossEntropy };

export const BUILDERS: Record<string, Builder> = {
  digits_data: digitsDataCase,
  greedy_decode: greedyDecodeCase,
  optim_steps: optimStepsCase,
  garments_data: garmentsDataCase,
  erf_bits: erfBitsCase,
};

