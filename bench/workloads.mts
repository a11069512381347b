// The port's side of the benchmarks' workloads (twin of REFERENCE in bench/workloads.py, which
// holds the list of workloads and explains the parts; docs/performance.md, "Benchmarks: every
// primitive, each model's step, a gradient check"). Each setup draws the op's inputs from
// new Generator(seed) in the reference's order, so both engines compute on the same numbers. A
// derived workload (part "compute") has no setup here: the request hands the document the
// reference hands the port for the case (`id`, `handed`), and each call runs the port's COMPUTE
// on it with a fresh generator at its position, as port_ts/src/cases/cases.ts runs a case.
//
//   node bench/workloads.mts list      prints the workloads' op names, {primitives, cases}
//   node bench/workloads.mts compute   prints the ops of the port's COMPUTE (the derived workloads' ops)
//   node bench/workloads.mts serve
// reads one request per line, {op, part, config, seed, budget_ms, min_rounds, max_rounds,
// warmup_calls, warmup_ms} (and id, handed for part "compute"), and answers one line per request:
//   {outputs: {name: number[]}, times_ms: number[], warmup_calls: number}   or   {error: string}
// outputs are those of the first call (compared with the reference's by bench/test_workloads.py);
// then the call is repeated as a warm-up (at least warmup_calls calls and warmup_ms ms, so the
// JIT has compiled it), then timed round by round with process.hrtime, as many rounds as fill
// budget_ms at the warm-up's median call time, within [min_rounds, max_rounds].
import { createInterface } from "node:readline";
import { Generator } from "../port_ts/src/core/rng.ts";
import type { IntTensor, Tensor } from "../port_ts/src/core/ops.ts";
import { type Config, handedDocument } from "../port_ts/src/core/caseConfig.ts";
import { COMPUTE } from "../port_ts/src/cases/cases.ts";
import { linearParams, embeddingParams } from "../port_ts/src/nn/init.ts";
import { maskedSoftmaxForward, maskedSoftmaxBackward } from "../port_ts/src/nn/maskedSoftmax.ts";
import { dotProductAttentionForward, dotProductAttentionBackward } from "../port_ts/src/nn/dotProductAttention.ts";
import { additiveAttentionForward, additiveAttentionBackward } from "../port_ts/src/nn/additiveAttention.ts";
import { multiHeadAttentionForward, multiHeadAttentionBackward } from "../port_ts/src/nn/multiHeadAttention.ts";
import { positionalEncodingForward, positionalEncodingBackward } from "../port_ts/src/nn/positionalEncoding.ts";
import { ropeBackward, ropeForward } from "../port_ts/src/nn/rope.ts";
import { layerNormForward, layerNormBackward } from "../port_ts/src/nn/layerNorm.ts";
import { ffnForward, ffnBackward } from "../port_ts/src/nn/ffn.ts";
import { geluForward, geluBackward } from "../port_ts/src/nn/gelu.ts";
import { dropoutForward, dropoutBackward } from "../port_ts/src/nn/dropout.ts";
import { linearForward, linearBackward } from "../port_ts/src/nn/linear.ts";
import { embeddingForward, embeddingBackward } from "../port_ts/src/nn/embedding.ts";
import { crossEntropyForward, crossEntropyBackward, sequenceWeights } from "../port_ts/src/nn/loss.ts";
import { addGrads } from "../port_ts/src/core/params.ts";
import {
  encoderBlockBackward, encoderBlockForward, initEncoderBlockParams, initFfnParams, initMhaParams,
} from "../port_ts/src/nn/encoderBlock.ts";
import { adamInit, adamStep } from "../port_ts/src/runs/optim.ts";
import { decoderBlockForward, decoderBlockBackward, initDecoderBlockParams } from "../port_ts/src/nn/decoderBlock.ts";
import { reversalSetup } from "../port_ts/src/runs/reversal.ts";
import { vitSetup } from "../port_ts/src/runs/garments.ts";
import { alignmentSetup } from "../port_ts/src/runs/alignmentRun.ts";
import type { Run } from "../port_ts/src/runs/schedule.ts";
import { COMPUTE as GRADCHECK } from "../port_ts/src/cases/casesGradcheck.ts";
import { alignmentData, initAlignmentParams } from "../port_ts/src/models/alignment.ts";

const DROPOUT_P = 0.1; // the dropout and positional-encoding workloads (as DROPOUT_P in workloads.py)
const ADAM_LR = 0.01;
const STEP_CYCLE = 10; // a step workload cycles over the batches of steps t = 1..STEP_CYCLE
const MAX_WARMUP_CALLS = 5000;

type Outputs = Record<string, Tensor | IntTensor | number>;
type Shape = { B: number; T: number; d: number; heads: number; F: number; V: number };
// forward() -> the outputs and the cache; backward(dout, cache) -> {"d<input name>": gradient}
interface Case { forward: () => { outputs: Outputs; cache: unknown }; backward?: (dout: Tensor | null, cache: any) => Outputs }

const out = ({ out, cache }: { out: Tensor; cache: unknown }) => ({ outputs: { out } as Outputs, cache });
const named = (grads: Record<string, Tensor>): Outputs => Object.fromEntries(Object.entries(grads).map(([n, g]) => [`d${n}`, g]));
const lens = (g: Generator, s: Shape): IntTensor => g.integers([s.B], 1, s.T + 1); // valid lengths in [1, T]

function affine(a: number, b: number, x: Tensor): Tensor { // a + b * x, elementwise (as NumPy's a + b * x)
  return { shape: x.shape, data: x.data.map((v) => a + b * v) };
}

// ---- the primitives: the same draws, in the same order, as the reference's setups --------------

const PRIMITIVES: Record<string, (s: Shape, g: Generator) => Case> = {
  masked_softmax(s, g) {
    const x = g.normal([s.B, s.heads, s.T, s.T]); // attention scores (B, H, T, T)
    const l = lens(g, s);
    return { forward: () => out(maskedSoftmaxForward(x, l)), backward: (dout, c) => ({ dx: maskedSoftmaxBackward(dout!, c) }) };
  },
  dot_product_attention(s, g) {
    const shape = [s.B, s.heads, s.T, s.d / s.heads]; // one head's queries, keys, values
    const q = g.normal(shape), k = g.normal(shape), v = g.normal(shape);
    const l = lens(g, s);
    return { forward: () => out(dotProductAttentionForward(q, k, v, l)), backward: (dout, c) => ({ ...dotProductAttentionBackward(dout!, c) }) };
  },
  additive_attention(s, g) {
    const shape = [s.B, s.T, s.d];
    const q = g.normal(shape), k = g.normal(shape), v = g.normal(shape);
    const p = { W_q: linearParams(g, s.d, s.d, false).W, W_k: linearParams(g, s.d, s.d, false).W, w_v: linearParams(g, 1, s.d, false).W };
    const l = lens(g, s);
    return {
      forward: () => out(additiveAttentionForward(q, k, v, p, l)),
      backward: (dout, c) => { const r = additiveAttentionBackward(dout!, c); return { dq: r.dq, dk: r.dk, dv: r.dv, ...named(r.grads) }; },
    };
  },
  multi_head_attention(s, g) {
    const x = g.normal([s.B, s.T, s.d]);
    const p = initMhaParams(g, s.d);
    const l = lens(g, s);
    return {
      forward: () => out(multiHeadAttentionForward(x, x, p, s.heads, l)),
      backward: (dout, c) => { const r = multiHeadAttentionBackward(dout!, c); return { dx: addGrads(r.dxQ, r.dxKv), ...named(r.grads) }; },
    };
  },
  positional_encoding(s, g) {
    const x = g.normal([s.B, s.T, s.d]);
    return { forward: () => out(positionalEncodingForward(x, DROPOUT_P, g)), backward: (dout, c) => ({ dx: positionalEncodingBackward(dout!, c) }) };
  },
  layer_norm(s, g) {
    const x = g.normal([s.B, s.T, s.d]);
    const gamma = affine(1, 0.1, g.normal([s.d])), beta = affine(0, 0.1, g.normal([s.d])); // away from init's 1 and 0
    return { forward: () => out(layerNormForward(x, gamma, beta)), backward: (dout, c) => ({ ...layerNormBackward(dout!, c) }) };
  },
  ffn(s, g) {
    const x = g.normal([s.B, s.T, s.d]);
    const p = initFfnParams(g, s.d, s.F);
    return { forward: () => out(ffnForward(x, p)), backward: (dout, c) => { const r = ffnBackward(dout!, c); return { dx: r.dx, ...named(r.grads) }; } };
  },
  gelu(s, g) {
    const x = g.normal([s.B, s.T, s.F]); // the ViT MLP's hidden layer
    return { forward: () => out(geluForward(x)), backward: (dout, c) => ({ dx: geluBackward(dout!, c) }) };
  },
  dropout(s, g) {
    const x = g.normal([s.B, s.T, s.d]);
    return { forward: () => out(dropoutForward(x, DROPOUT_P, g)), backward: (dout, c) => ({ dx: dropoutBackward(dout!, c) }) };
  },
  linear(s, g) {
    const x = g.normal([s.B, s.T, s.d]);
    const { W, b } = linearParams(g, s.F, s.d);
    return {
      forward: () => out(linearForward(x, W, b)),
      backward: (dout, c) => { const r = linearBackward(dout!, c); return { dx: r.dx, dW: r.dW, db: r.db as Tensor }; },
    };
  },
  embedding(s, g) {
    const tokens = g.integers([s.B, s.T], 0, s.V);
    const E = embeddingParams(g, s.V, s.d);
    return { forward: () => out(embeddingForward(tokens, E)), backward: (dout, c) => ({ dE: embeddingBackward(dout!, c) }) };
  },
  cross_entropy(s, g) {
    const logits = g.normal([s.B, s.T, s.V]);
    const targets = g.integers([s.B, s.T], 0, s.V);
    const weights = sequenceWeights(lens(g, s), s.T); // padded positions weigh 0, as the models' losses
    return {
      forward: () => { const { loss, cache } = crossEntropyForward(logits, targets, weights); return { outputs: { loss }, cache }; },
      backward: (_dout, c) => ({ dlogits: crossEntropyBackward(c) }),
    };
  },
  encoder_block(s, g) {
    const x = g.normal([s.B, s.T, s.d]);
    const p = initEncoderBlockParams(g, s.d, s.F);
    const l = lens(g, s);
    return {
      forward: () => out(encoderBlockForward(x, l, p, s.heads)),
      backward: (dout, c) => { const r = encoderBlockBackward(dout!, c); return { dx: r.dx, ...named(r.grads) }; },
    };
  },
  decoder_block(s, g) {
    const x = g.normal([s.B, s.T, s.d]), enc = g.normal([s.B, s.T, s.d]); // S = T source steps
    const p = initDecoderBlockParams(g, s.d, s.F);
    const l = lens(g, s);
    return {
      forward: () => out(decoderBlockForward(x, enc, l, p, s.heads)),
      backward: (dout, c) => { const r = decoderBlockBackward(dout!, c); return { dx: r.dx, denc: r.denc, ...named(r.grads) }; },
    };
  },
  adam(s, g) {
    const params = initEncoderBlockParams(g, s.d, s.F);
    const names = Object.keys(params);
    const grads = Object.fromEntries(names.map((n) => [n, g.normal(params[n].shape)])); // in parameter order
    const state = adamInit(params, names);
    return { forward: () => { adamStep(params, grads, names, state, ADAM_LR); return { outputs: { ...params }, cache: null }; } };
  },
  rope(s, g) {
    const x = g.normal([s.B, s.heads, s.T, s.d / s.heads]); // one head's queries (or keys), as attention rotates them
    return { forward: () => out(ropeForward(x)), backward: (dout, c) => ({ dx: ropeBackward(dout!, c) }) };
  },
};

// ---- the models' steps and the gradient check: the catalogue's own setups --------------------

function stepper(run: Run): Case { // forward() = step t of the run, t = 1, 2, ..., STEP_CYCLE, 1, ...
  let calls = 0;
  return {
    forward: () => {
      const { loss, grads } = run.stepFn(run.params, (calls++ % STEP_CYCLE) + 1);
      return { outputs: { loss, ...named(grads) }, cache: null };
    },
  };
}

const CASES: Record<string, (config: Config, g: Generator) => Case> = {
  reversal_step: (config, g) => stepper(reversalSetup(config, g)),
  vit_step: (config, g) => stepper(vitSetup(config, g)),
  alignment_step: (config, g) => stepper(alignmentSetup(config, g)),
  gradcheck_alignment: (config, g) => ({
    forward: () => {
      const rng = new Generator(g.seed); // the reference's draws (cases_gradcheck.py), then the check's from there
      const params = initAlignmentParams(rng, config.E as number, config.H as number);
      const data = alignmentData(rng, config.E as number, (config.pairs as number | undefined) ?? 1);
      return { outputs: GRADCHECK.gradcheck_alignment({ ...data }, config, rng, params), cache: null };
    },
  }),
};

// ---- running a request ----------------------------------------------------------------------

interface Request {
  op: string; part: string; config: Config; seed: number;
  budget_ms: number; min_rounds: number; max_rounds: number; warmup_calls: number; warmup_ms: number;
  id?: string; handed?: unknown; // part "compute": the case's id and the document handed for it
}

// ---- the derived workloads: the port's COMPUTE on the handed document ------------------------

function computeCall(req: Request): () => Outputs {
  if (!Object.hasOwn(COMPUTE, req.op)) {
    throw new Error(`expected op '${req.op}' in the port's COMPUTE (port_ts/src/cases/cases.ts) for the derived workload of case '${req.id}', found none; add its compute there`);
  }
  const { inputs, params, position } = handedDocument(req.handed, req.id ?? "");
  const compute = COMPUTE[req.op];
  return () => {
    const rng = new Generator(req.seed);
    rng.counter = position; // the dropout masks follow the inputs in the stream, the same every call
    return compute(inputs, req.config, rng, params);
  };
}

const now = () => Number(process.hrtime.bigint()) / 1e6; // ms

function flat(outputs: Outputs): Record<string, number[]> {
  return Object.fromEntries(Object.entries(outputs).map(([n, v]) => [n, typeof v === "number" ? [v] : Array.from(v.data)]));
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b), h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
}

type Answer = { outputs: Record<string, number[]>; times_ms: number[]; warmup_calls: number };

function run(req: Request): Answer {
  if (req.part === "compute") {
    const call = computeCall(req);
    return timed(call, flat(call()), req);
  }
  const g = new Generator(req.seed);
  const c = Object.hasOwn(PRIMITIVES, req.op) ? PRIMITIVES[req.op](req.config as unknown as Shape, g)
    : Object.hasOwn(CASES, req.op) ? CASES[req.op](req.config, g) : null;
  if (c === null) throw new Error(`unknown op ${req.op}`);
  const first = c.forward();
  let call: () => unknown = c.forward;
  let outputs = flat(first.outputs); // copied now: later calls may change them in place (Adam does)
  if (req.part === "backward") {
    if (c.backward === undefined) throw new Error(`${req.op} has no backward`);
    const o = first.outputs.out; // the upstream gradient: N(0, 1) of the output's shape from Generator(seed + 1)
    const dout = typeof o === "object" ? new Generator(req.seed + 1).normal(o.shape) : null;
    const backward = c.backward, cache = first.cache;
    outputs = flat(backward(dout, cache));
    call = () => backward(dout, cache);
  }
  return timed(call, outputs, req);
}

// The warm-up, then the timed rounds (outputs: those of the first call, already made).
function timed(call: () => unknown, outputs: Record<string, number[]>, req: Request): Answer {
  const warm: number[] = [];
  for (const t0 = now(); warm.length < req.warmup_calls || now() - t0 < req.warmup_ms;) {
    const t1 = now();
    call();
    warm.push(now() - t1);
    if (warm.length >= MAX_WARMUP_CALLS) break; // enough for the tiniest calls
  }
  const rounds = Math.max(req.min_rounds, Math.min(req.max_rounds, Math.floor(req.budget_ms / Math.max(median(warm), 1e-6))));
  const times: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = process.hrtime.bigint();
    call();
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return { outputs, times_ms: times, warmup_calls: warm.length };
}

if (process.argv[2] === "list") { // the workloads' names (tests/test_ops_declared.py: bench/workloads.py's, in its order)
  process.stdout.write(`${JSON.stringify({ primitives: Object.keys(PRIMITIVES), cases: Object.keys(CASES) })}\n`);
} else if (process.argv[2] === "compute") { // the ops a derived workload can time in the port (bench/test_workloads.py)
  process.stdout.write(`${JSON.stringify(Object.keys(COMPUTE))}\n`);
} else if (process.argv[2] === "serve") {
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() === "") continue;
    let answer: object;
    try {
      answer = run(JSON.parse(line) as Request);
    } catch (e) {
      answer = { error: e instanceof Error ? `${e.message}\n${e.stack}` : String(e) };
    }
    process.stdout.write(`${JSON.stringify(answer)}\n`);
  }
} else {
  console.error("usage: node bench/workloads.mts serve   (driven by bench/test_workloads.py), list (the workloads' names), or compute (the port's COMPUTE ops)");
  process.exit(2);
}
