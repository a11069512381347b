"""The benchmarks' workloads, in one place, and the reference's side of each (docs/performance.md,
"Benchmarks: every primitive, each model's step, a gradient check").

A workload is one op, its config (shapes, or a catalogue case's config), a seed and a part:
    forward    the op's forward pass (it builds the cache the backward needs, as training does)
    backward   the op's backward pass alone, from the cache of one forward and a fixed dout
    update     one Adam update of an encoder block's parameters (fixed gradients; each round
               moves the parameters on, the same work every time)
    step       one training step of a model: loss and every parameter's gradient (no Adam update,
               so every round is the same work), batches cycling over the run's steps t = 1..10
    gradcheck  one finite-difference gradient check, the whole catalogue case
    compute    a derived workload: an op's COMPUTE (reference/cases/cases.py, its twin in the port)
               on the inputs the reference hands the port for the op's largest forward case

The derived workloads come from the catalogue, not from bench/: every op with forward cases and a
COMPUTE entry gets one, `<op>.compute[<case id>]`, from its largest forward case (most elements of
the handed inputs; ties by id). Both engines compute from the same handed document
(docs/protocol.md, "Handed inputs"), each call with a fresh generator at its position, so a
dropout mask is the same every call. torch has no derived workloads (it would need each op
written again).

Same inputs in every engine: the reference (REFERENCE below) and the port (bench/workloads.mts,
PORT, the same setups in camelCase) each draw the op's inputs from Generator(seed) in the same
order, bit for bit the same; torch (bench/torch_ops.py) takes the reference's arrays. dout, the
upstream gradient of a backward, is drawn from Generator(seed + 1) with the output's shape.
Dropout masks are drawn by the forward from the op's generator, after the inputs; torch applies
the mask of the reference's first forward.

Every setup returns a Case:
    inputs     every drawn array by name (what torch takes)
    forward()  -> (outputs {name: array}, cache): "out" (an array) or "loss" (a scalar);
               a step's or gradcheck's outputs are the loss and its results
    backward(dout, cache) -> {"d<input name>": array}   (None where there is no backward)
"""

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/catalogue.py, when this file is loaded by its path
from catalogue import case as catalogue_case, catalogue_cases
from reference.runs import digits as dg
from reference.nn.additive_attention import additive_attention_backward, additive_attention_forward
from reference.models.alignment import alignment_data, init_alignment_params
from reference.cases.cases import COMPUTE, build, compute, draw, run_case_with_states
from reference.core.case_config import handed_document
from reference.core.golden import dumps
from reference.runs.alignment_run import alignment_setup
from reference.nn.decoder_block import decoder_block_backward, decoder_block_forward, init_decoder_block_params
from reference.nn.dot_product_attention import dot_product_attention_backward, dot_product_attention_forward
from reference.nn.dropout import dropout_backward, dropout_forward
from reference.nn.embedding import embedding_backward, embedding_forward
from reference.core.params import add_grads
from reference.nn.encoder_block import (encoder_block_backward, encoder_block_forward, init_encoder_block_params,
                                     init_ffn_params, init_mha_params)
from reference.nn.ffn import ffn_backward, ffn_forward
from reference.runs.garments import garment_splits, vit_model_config, vit_setup
from reference.nn.gelu import gelu_backward, gelu_forward
from reference.nn.init import embedding_params, linear_params
from reference.nn.layer_norm import layer_norm_backward, layer_norm_forward
from reference.nn.linear import linear_backward, linear_forward
from reference.nn.loss import cross_entropy_backward, cross_entropy_forward, sequence_weights
from reference.nn.masked_softmax import masked_softmax_backward, masked_softmax_forward
from reference.nn.multi_head_attention import multi_head_attention_backward, multi_head_attention_forward
from reference.runs.optim import adam_init, adam_step
from reference.nn.positional_encoding import positional_encoding_backward, positional_encoding_forward
from reference.nn.rope import rope_backward, rope_forward
from reference.runs.reversal import LAB_EXAMPLE, reversal_model_config, reversal_setup
from reference.core.rng import Generator
from reference.models.transformer import init_transformer_params
from reference.models.vit import init_vit_params

DROPOUT_P = 0.1  # the dropout and positional-encoding workloads (the other ops run with p = 0, as the models train)
ADAM_LR = 0.01
STEP_CYCLE = 10  # a step workload cycles over the batches of steps t = 1..STEP_CYCLE

# The shapes of the primitives. "chapter" is the reversal model's (batch 96 of 7 tokens, d 16,
# 2 heads, FFN 64, its 13-token vocabulary); "large" a wider one (d 64 over 32 tokens, 4 heads).
SHAPES = {
    "chapter": {"B": 96, "T": 7, "d": 16, "heads": 2, "F": 64, "V": 13},
    "large": {"B": 16, "T": 32, "d": 64, "heads": 4, "F": 256, "V": 256},
}

# The primitives, in the order of the table; each has a forward and a backward workload per shape,
# Adam an update.
PRIMITIVES = ["masked_softmax", "dot_product_attention", "additive_attention", "multi_head_attention",
              "positional_encoding", "layer_norm", "ffn", "gelu", "dropout", "linear", "embedding",
              "cross_entropy", "encoder_block", "decoder_block", "adam", "rope"]
PARTS = {"adam": ("update",)}  # the others: ("forward", "backward")

# The models' steps and the gradient check: (op, catalogue case id). Seed and config are the case's.
CASES = [("reversal_step", "train.reversal"),
         ("vit_step", "train.vit"),
         ("alignment_step", "train.alignment"),
         ("gradcheck_alignment", "gradcheck.alignment.act4")]

# Time per engine and workload (seconds of calls after the warm-up; the rounds follow from the
# warm-up's mean call time), and the bounds on the rounds. BENCH_BUDGET_SCALE scales the budgets
# (e.g. 0.2 for a quick look).
BUDGET_S = {"forward": 0.25, "backward": 0.25, "update": 0.25, "step": 2.5, "gradcheck": 1.5, "compute": 0.25}
MIN_ROUNDS, MAX_ROUNDS = 5, 200
# The warm-up before the timed rounds: at least this many calls and this long. Node's is longer,
# so that V8 has compiled the hot functions (its JIT tiers up after some hundred calls).
WARMUP = {"python": {"calls": 2, "seconds": 0.03}, "node": {"calls": 10, "seconds": 0.2}}
MAX_WARMUP_CALLS = 5000


@dataclass(frozen=True)
class Workload:
    op: str
    part: str  # forward | backward | update | step | gradcheck | compute
    label: str  # the shape's name or the case id
    config: dict = field(hash=False)
    seed: int = 0

    @property
    def name(self):
        return f"{self.op}[{self.label}]" if self.part in ("step", "gradcheck") else f"{self.op}.{self.part}[{self.label}]"


def derived_workloads(cases):
    """The derived workloads of the catalogue's cases: for each op with forward cases and a COMPUTE
    entry, one from its largest forward case, in the order of the ops' first forward cases."""
    largest = {}  # op -> ((-elements of the handed inputs, case id), case): the smallest key wins
    for case in cases:
        op = case["op"]
        if case["kind"] != "forward" or op not in COMPUTE:
            continue
        inputs, _ = draw(op, case.get("config", {}), Generator(case["seed"]))  # the inputs handed to the port
        key = (-sum(np.size(value) for value in inputs.values()), case["id"])
        if op not in largest or key < largest[op][0]:
            largest[op] = (key, case)
    return [Workload(op, "compute", case["id"], case.get("config", {}), case["seed"]) for op, (_, case) in largest.items()]


def workloads():
    """Every workload, in table order: each primitive's forward then backward per shape, then the
    models' steps and the gradient check, then the derived workloads."""
    out = []
    for i, op in enumerate(PRIMITIVES):
        for label, shape in SHAPES.items():
            for part in PARTS.get(op, ("forward", "backward")):
                out.append(Workload(op, part, label, shape, 800 + 10 * i))
    for op, case_id in CASES:
        case = catalogue_case(case_id)
        out.append(Workload(op, "gradcheck" if op.startswith("gradcheck") else "step", case_id, case["config"], case["seed"]))
    return out + derived_workloads(catalogue_cases())


WORKLOADS = workloads()
DERIVED = [w for w in WORKLOADS if w.part == "compute"]
# {name of PRIMITIVES or CASES, or a derived workload's name: the declared op it
# times}: a primitive's is its name (Adam's, optim_steps), a case's the catalogue case's op, a
# derived workload's its op. The one list of an op's workloads (tests/test_ops_declared.py,
# docs/reference/ops.md).
OPS = {**{name: name for name in PRIMITIVES}, "adam": "optim_steps",
       **{name: catalogue_case(case_id)["op"] for name, case_id in CASES},
       **{w.name: w.op for w in DERIVED}}


@dataclass
class Case:
    inputs: dict
    forward: object
    backward: object = None


# ---- the reference's setups: draw the inputs, then name what forward and backward return ------

def _lens(g, s):
    """Valid lengths (B,) in [1, T]: padded keys in most rows."""
    return g.integers((s["B"],), 1, s["T"] + 1)


def masked_softmax(s, g):
    x = g.normal((s["B"], s["heads"], s["T"], s["T"]))  # attention scores (B, H, T, T)
    lens = _lens(g, s)
    return Case({"x": x, "lens": lens},
                lambda: _out(masked_softmax_forward(x, lens)),
                lambda dout, c: {"dx": masked_softmax_backward(dout, c)})


def dot_product_attention(s, g):
    shape = (s["B"], s["heads"], s["T"], s["d"] // s["heads"])  # one head's queries, keys, values
    q, k, v = g.normal(shape), g.normal(shape), g.normal(shape)
    lens = _lens(g, s)
    return Case({"q": q, "k": k, "v": v, "lens": lens},
                lambda: _out(dot_product_attention_forward(q, k, v, lens)),
                lambda dout, c: dict(zip(("dq", "dk", "dv"), dot_product_attention_backward(dout, c))))


def additive_attention(s, g):
    B, T, d = s["B"], s["T"], s["d"]
    q, k, v = g.normal((B, T, d)), g.normal((B, T, d)), g.normal((B, T, d))
    p = {"W_q": linear_params(g, d, d, bias=False)[0], "W_k": linear_params(g, d, d, bias=False)[0],
         "w_v": linear_params(g, 1, d, bias=False)[0]}  # hidden units H = d
    lens = _lens(g, s)

    def backward(dout, c):
        dq, dk, dv, grads = additive_attention_backward(dout, c)
        return {"dq": dq, "dk": dk, "dv": dv, **_named(grads)}
    return Case({"q": q, "k": k, "v": v, **p, "lens": lens},
                lambda: _out(additive_attention_forward(q, k, v, p, lens)), backward)


def multi_head_attention(s, g):
    x = g.normal((s["B"], s["T"], s["d"]))
    p = init_mha_params(g, s["d"])
    lens = _lens(g, s)

    def backward(dout, c):
        dx_q, dx_kv, grads = multi_head_attention_backward(dout, c)
        return {"dx": add_grads(dx_q, dx_kv), **_named(grads)}  # self-attention: x is queries, keys and values
    return Case({"x": x, **p, "lens": lens},
                lambda: _out(multi_head_attention_forward(x, x, p, s["heads"], lens)), backward)


def positional_encoding(s, g):
    x = g.normal((s["B"], s["T"], s["d"]))
    return Case({"x": x}, lambda: _out(positional_encoding_forward(x, DROPOUT_P, g)),
                lambda dout, c: {"dx": positional_encoding_backward(dout, c)})


def layer_norm(s, g):
    x = g.normal((s["B"], s["T"], s["d"]))
    gamma, beta = 1.0 + 0.1 * g.normal((s["d"],)), 0.1 * g.normal((s["d"],))  # away from init's 1 and 0

    def backward(dout, c):
        return dict(zip(("dx", "dgamma", "dbeta"), layer_norm_backward(dout, c)))
    return Case({"x": x, "gamma": gamma, "beta": beta}, lambda: _out(layer_norm_forward(x, gamma, beta)), backward)


def ffn(s, g):
    x = g.normal((s["B"], s["T"], s["d"]))
    p = init_ffn_params(g, s["d"], s["F"])

    def backward(dout, c):
        dx, grads = ffn_backward(dout, c)
        return {"dx": dx, **_named(grads)}
    return Case({"x": x, **p}, lambda: _out(ffn_forward(x, p)), backward)


def gelu(s, g):
    x = g.normal((s["B"], s["T"], s["F"]))  # the ViT MLP's hidden layer
    return Case({"x": x}, lambda: _out(gelu_forward(x)), lambda dout, c: {"dx": gelu_backward(dout, c)})


def dropout(s, g):
    x = g.normal((s["B"], s["T"], s["d"]))
    return Case({"x": x}, lambda: _out(dropout_forward(x, DROPOUT_P, g)), lambda dout, c: {"dx": dropout_backward(dout, c)})


def linear(s, g):
    x = g.normal((s["B"], s["T"], s["d"]))
    W, b = linear_params(g, s["F"], s["d"])

    def backward(dout, c):
        return dict(zip(("dx", "dW", "db"), linear_backward(dout, c)))
    return Case({"x": x, "W": W, "b": b}, lambda: _out(linear_forward(x, W, b)), backward)


def embedding(s, g):
    tokens = g.integers((s["B"], s["T"]), 0, s["V"])
    E = embedding_params(g, s["V"], s["d"])
    return Case({"tokens": tokens, "E": E}, lambda: _out(embedding_forward(tokens, E)),
                lambda dout, c: {"dE": embedding_backward(dout, c)})


def cross_entropy(s, g):
    logits = g.normal((s["B"], s["T"], s["V"]))
    targets = g.integers((s["B"], s["T"]), 0, s["V"])
    lens = _lens(g, s)
    weights = sequence_weights(lens, s["T"])  # padded positions weigh 0, as the models' losses

    def forward():
        loss, cache = cross_entropy_forward(logits, targets, weights)
        return {"loss": np.array(loss)}, cache
    return Case({"logits": logits, "targets": targets, "lens": lens}, forward,
                lambda dout, c: {"dlogits": cross_entropy_backward(c)})


def encoder_block(s, g):
    x = g.normal((s["B"], s["T"], s["d"]))
    p = init_encoder_block_params(g, s["d"], s["F"])
    lens = _lens(g, s)

    def backward(dout, c):
        dx, grads = encoder_block_backward(dout, c)
        return {"dx": dx, **_named(grads)}
    return Case({"x": x, **p, "lens": lens}, lambda: _out(encoder_block_forward(x, lens, p, s["heads"])), backward)


def decoder_block(s, g):
    x, enc = g.normal((s["B"], s["T"], s["d"])), g.normal((s["B"], s["T"], s["d"]))  # S = T source steps
    p = init_decoder_block_params(g, s["d"], s["F"])
    lens = _lens(g, s)

    def backward(dout, c):
        dx, denc, grads = decoder_block_backward(dout, c)
        return {"dx": dx, "denc": denc, **_named(grads)}
    return Case({"x": x, "enc": enc, **p, "lens": lens},
                lambda: _out(decoder_block_forward(x, enc, lens, p, s["heads"])), backward)


def adam(s, g):
    params = init_encoder_block_params(g, s["d"], s["F"])
    names = list(params)
    grads = {n: g.normal(params[n].shape) for n in names}  # in parameter order
    state = adam_init(params, names)

    def forward():  # adam_step replaces each params[name] by a new array: `inputs` keeps the drawn ones
        adam_step(params, grads, names, state, ADAM_LR)
        return {n: params[n] for n in names}, None
    return Case({"params": dict(params), "grads": grads}, forward)


def rope(s, g):
    x = g.normal((s["B"], s["heads"], s["T"], s["d"] // s["heads"]))  # one head's queries (or keys), as attention rotates them
    return Case({"x": x}, lambda: _out(rope_forward(x)), lambda dout, c: {"dx": rope_backward(dout, c)})


# ---- the models' steps and the gradient check: the catalogue's own setups --------------------

def _stepper(run):
    """forward() = step t of the run (t = 1, 2, ..., STEP_CYCLE, 1, ...): its loss and gradients."""
    calls = iter(range(10**12))

    def forward():
        loss, grads = run["step_fn"](run["params"], next(calls) % STEP_CYCLE + 1)
        return {"loss": np.array(loss), **_named(grads)}, None
    return forward


def reversal_step(config, g):
    run = reversal_setup(config, g)
    # torch's inputs: the run's parameters and the batches of steps 1..STEP_CYCLE (the same draws again)
    rng = Generator(g.seed)
    init_transformer_params(rng, reversal_model_config(config))
    train = dg.digits_data(rng, config["n_train"], config["n_test"], config["min_digits"], config["max_digits"],
                           reserved=[LAB_EXAMPLE])["train"]
    batches = [dg.take_rows(train, dg.batch_rows(config["n_train"], config["batch"], t)) for t in range(1, STEP_CYCLE + 1)]
    return Case({"params": run["params"], "batches": batches}, _stepper(run))


def vit_step(config, g):
    run = vit_setup(config, g)
    rng, model = Generator(g.seed), vit_model_config(config)
    init_vit_params(rng, model)
    data = garment_splits(rng, config["n_train"], config["n_test"], model["classes"])
    return Case({"params": run["params"], "model": model, "images": data["train_images"],
                 "labels": data["train_labels"]}, _stepper(run))


def alignment_step(config, g):
    run = alignment_setup(config, g)
    return Case({"params": run["params"], **run["inputs"]}, _stepper(run))


def gradcheck_alignment(config, g):
    rng = Generator(g.seed)  # torch's inputs: the builder's first draws again
    params = init_alignment_params(rng, config["E"], config["H"])
    data = alignment_data(rng, config["E"], config.get("pairs", 1))

    def forward():
        _, outputs = build("gradcheck_alignment", config, Generator(g.seed))
        return outputs, None
    return Case({"params": params, **data}, forward)


REFERENCE = {name: globals()[name] for name in PRIMITIVES + [op for op, _ in CASES]}  # op -> its setup above


# ---- the width sweep (bench/scale.py; docs/performance.md, "Scale") --------------------------

def width_workloads(d, heads, B, T, F=None):
    """One encoder block (multi-head self-attention, add & norm, FFN, add & norm; p 0) at width d:
    its forward and its backward, batch B of T tokens, FFN F (default 4 d). The encoder_block
    setups above in each engine, at this shape, with the seed of the encoder_block workloads."""
    shape = {"B": B, "T": T, "d": d, "heads": heads, "F": 4 * d if F is None else F}
    seed = 800 + 10 * PRIMITIVES.index("encoder_block")  # as workloads() gives the encoder_block workloads
    return [Workload("encoder_block", part, f"d{d}", shape, seed) for part in ("forward", "backward")]


def encoder_block_multiply_adds(s):
    """(forward, backward): the multiply-adds of the block's products. Forward, per token the four
    d x d projections and the FFN's two d x F layers, per sequence and head the T x T scores and
    their weighted sum of the values: B T (4 d^2 + 2 d F) + 2 B T^2 d. The backward computes two
    products for each (the input's and the weight's gradient; dq, dk and the weights', dv's), twice
    the forward. Layer norm, softmax, ReLU and the additions are not counted."""
    B, T, d, F = s["B"], s["T"], s["d"], s["F"]
    forward = B * T * (4 * d * d + 2 * d * F) + 2 * B * T * T * d
    return forward, 2 * forward


def _out(result):
    out, cache = result
    return {"out": out}, cache


def _named(grads):
    return {f"d{name}": value for name, value in grads.items()}


# ---- running a workload in the reference; the rules shared by the engines --------------------

def dout_for(workload, outputs):
    """The upstream gradient of a backward: N(0, 1) of the output's shape from Generator(seed + 1);
    None for a scalar loss (dloss = 1)."""
    return Generator(workload.seed + 1).normal(outputs["out"].shape) if "out" in outputs else None


def handed(workload):
    """The document the reference hands the port for a derived workload's case (docs/protocol.md,
    "Handed inputs"): {inputs, position}, as JSON text reads it back (a NaN or an infinity as a
    string, as the runner writes it)."""
    case = {"id": workload.label, "kind": "forward", "op": workload.op, "seed": workload.seed, "config": workload.config}
    _, _, given = run_case_with_states(case)
    return json.loads(dumps(given))


def compute_call(workload, document):
    """call() computes the derived workload's op from the handed document, with a fresh generator
    at the handed position, as the runner has each engine do (reference/cases/cases.py)."""
    inputs, params, position = handed_document(document, workload.label)

    def call():
        rng = Generator(workload.seed)
        rng.counter = position
        return compute(workload.op, inputs, params, workload.config, rng)
    return call


def reference_call(workload):
    """(call, outputs): call() runs the timed work once; outputs are those of its first run."""
    if workload.part == "compute":
        call = compute_call(workload, handed(workload))
        return call, call()
    case = REFERENCE[workload.op](workload.config, Generator(workload.seed))
    outputs, cache = case.forward()
    if workload.part != "backward":
        return (lambda: case.forward()), outputs
    dout = dout_for(workload, outputs)
    grads = case.backward(dout, cache)
    return (lambda: case.backward(dout, cache)), grads


def budget(workload, scale=1.0):
    return BUDGET_S[workload.part] * scale


def rounds_for(mean_call_s, budget_s):
    """The rounds that fill the budget at the warm-up's mean call time, within the bounds."""
    return max(MIN_ROUNDS, min(MAX_ROUNDS, int(budget_s / max(mean_call_s, 1e-9))))


def agree(got, want, tol, what, complete=True):
    """Every output of `got` is also in `want` (complete: and the other way round), and
    |got - want| <= tol * max(1, max |want|) element by element."""
    assert got, f"{what}: no outputs to compare"
    if complete:
        assert set(got) == set(want), f"{what}: outputs {sorted(got)}, the reference's {sorted(want)}"
    for name, value in got.items():
        assert name in want, f"{what}: output {name!r} is not among the reference's {sorted(want)}"
        a = np.asarray(value, dtype=np.float64).ravel()
        b = np.asarray(want[name], dtype=np.float64).ravel()
        assert a.size == b.size, f"{what}: {name} has {a.size} values, the reference {b.size}"
        if a.size == 0:
            continue
        scale = max(1.0, float(np.max(np.abs(b))))
        worst = float(np.max(np.abs(a - b)))
        assert worst <= tol * scale, f"{what}: {name} differs from the reference by {worst:.3e} (allowed {tol * scale:.1e})"


def _self_check():
    names = [w.name for w in WORKLOADS]
    assert len(names) == len(set(names)), "workload names must be unique"
    assert math.isfinite(sum(BUDGET_S.values()))


_self_check()
