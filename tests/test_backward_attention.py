"""Backward passes of the attention primitives, proven three ways: PyTorch float64 autograd,
central differences in float64, and the port's own backward on the same inputs.

Every case is a small JSON-able spec. Both engines draw its inputs from the shared generator
seeded by the spec, in one order: inputs, parameters, the upstream gradient dout, then whatever
the forward draws (the dropout keep mask). Neither engine hands its arrays to the other. The
gradients are those of L = sum(out * dout), the `(out * dout).sum()` trick with a random dout.

Masks cover 1-D lengths with 0 and the full length, 2-D (per-query) causal lengths, and rows of
length 0 (uniform weights from the -1e6 fill: torch gets the same fill, so those rows are
compared too). Self-attention's input gradient is dx_q + dx_kv, added here as a caller must.
"""

import json
import math

import numpy as np
import pytest
import torch

import reference.nn.additive_attention as additive_mod
import reference.nn.dot_product_attention as dpa_mod
import reference.nn.masked_softmax as softmax_mod
import reference.nn.multi_head_attention as mha_mod
from reference.core.ops import sum_last
from reference.core.rng import Generator
from toolkit import run_port, tolerance

# Tolerances: each spec's op declares them (its bundle, ops/attention/<op>.json: torch_backward, engines_backward,
# fd with its step), with their reasons. Not a tolerance: a wrong backward is off by O(1) relative,
# far above every tolerance.
WRONG = 1e-2

CAUSAL4 = [[1, 2, 3, 4]] * 2  # (B, Q): query i sees keys 0..i

SPECS = {
    # masked softmax
    "softmax-plain": {"op": "masked_softmax", "seed": 300, "x": [2, 3, 5], "lens": None},
    "softmax-lens1d": {"op": "masked_softmax", "seed": 301, "x": [3, 2, 5], "lens": [0, 3, 5]},
    "softmax-lens2d-4d": {"op": "masked_softmax", "seed": 302, "x": [2, 3, 4, 4], "lens": [[1, 2, 3, 4], [0, 4, 2, 1]]},
    # scaled dot-product attention
    "dpa-self": {"op": "dot_product_attention", "seed": 310, "q": [2, 4, 3], "k": [2, 4, 3], "v": [2, 4, 3], "lens": None, "p": 0.0},
    "dpa-cross-lens1d": {"op": "dot_product_attention", "seed": 311, "q": [3, 3, 4], "k": [3, 5, 4], "v": [3, 5, 2],
                         "lens": [0, 2, 5], "p": 0.0},
    "dpa-causal": {"op": "dot_product_attention", "seed": 312, "q": [2, 4, 5], "k": [2, 4, 5], "v": [2, 4, 3], "lens": CAUSAL4, "p": 0.0},
    "dpa-heads": {"op": "dot_product_attention", "seed": 313, "q": [2, 3, 2, 4], "k": [2, 3, 5, 4], "v": [2, 3, 5, 3],
                  "lens": [[5, 0], [3, 1]], "p": 0.0},
    "dpa-dropout": {"op": "dot_product_attention", "seed": 314, "q": [2, 3, 4], "k": [2, 5, 4], "v": [2, 5, 3],
                    "lens": [4, 5], "p": 0.3},
    # additive attention
    "add-plain": {"op": "additive_attention", "seed": 320, "B": 2, "Q": 3, "K": 4, "Dq": 5, "Dk": 3, "H": 6, "V": 2,
                  "lens": None, "p": 0.0, "std": 1.0},
    "add-lens1d": {"op": "additive_attention", "seed": 321, "B": 3, "Q": 2, "K": 4, "Dq": 3, "Dk": 5, "H": 4, "V": 3,
                   "lens": [0, 2, 4], "p": 0.0, "std": 1.0},
    "add-lens2d-dropout": {"op": "additive_attention", "seed": 322, "B": 2, "Q": 3, "K": 3, "Dq": 4, "Dk": 2, "H": 5, "V": 2,
                           "lens": [[1, 2, 3], [3, 0, 2]], "p": 0.25, "std": 1.0},
    "add-saturated": {"op": "additive_attention", "seed": 323, "B": 2, "Q": 2, "K": 3, "Dq": 3, "Dk": 3, "H": 4, "V": 2,
                      "lens": None, "p": 0.0, "std": 4.0},
    # multi-head attention
    "mha-self-causal": {"op": "multi_head_attention", "seed": 330, "self": True, "B": 2, "Q": 4, "K": 4, "dq": 6, "dkv": 6,
                        "d": 6, "heads": 2, "lens": CAUSAL4, "p": 0.0},
    "mha-cross-lens1d": {"op": "multi_head_attention", "seed": 331, "self": False, "B": 3, "Q": 3, "K": 5, "dq": 7, "dkv": 4,
                         "d": 6, "heads": 3, "lens": [0, 5, 2], "p": 0.0},
    "mha-self-dropout": {"op": "multi_head_attention", "seed": 332, "self": True, "B": 2, "Q": 3, "K": 3, "dq": 8, "dkv": 8,
                         "d": 8, "heads": 4, "lens": [3, 1], "p": 0.2},
    "mha-one-head": {"op": "multi_head_attention", "seed": 333, "self": False, "B": 2, "Q": 2, "K": 3, "dq": 3, "dkv": 5,
                     "d": 4, "heads": 1, "lens": None, "p": 0.0},
}


# ---------------------------------------------------------------- one case, in the reference

def lens_of(spec):
    return None if spec["lens"] is None else np.array(spec["lens"], dtype=np.int64)


def linear_weight(g, out, inp):
    return g.uniform((out, inp), -1 / math.sqrt(inp), 1 / math.sqrt(inp))


def draw(spec):
    """The spec's inputs and parameters (name -> array), dout, and the generator, positioned where
    the forward draws its dropout mask. The Node twin below draws in the same order."""
    g = Generator(spec["seed"])
    op, a = spec["op"], {}
    if op == "masked_softmax":
        a["x"] = g.normal(spec["x"], 0.0, 2.0)
        out_shape = spec["x"]
    elif op == "dot_product_attention":
        a["q"], a["k"], a["v"] = g.normal(spec["q"]), g.normal(spec["k"]), g.normal(spec["v"])
        out_shape = spec["q"][:-1] + spec["v"][-1:]
    elif op == "additive_attention":
        B, Q, K, std = spec["B"], spec["Q"], spec["K"], spec["std"]
        a["q"], a["k"] = g.normal((B, Q, spec["Dq"]), 0.0, std), g.normal((B, K, spec["Dk"]), 0.0, std)
        a["v"] = g.normal((B, K, spec["V"]))
        a["W_q"], a["W_k"] = linear_weight(g, spec["H"], spec["Dq"]), linear_weight(g, spec["H"], spec["Dk"])
        a["w_v"] = linear_weight(g, 1, spec["H"])
        out_shape = (B, Q, spec["V"])
    else:
        B, d = spec["B"], spec["d"]
        if spec["self"]:
            a["x"] = g.normal((B, spec["Q"], spec["dq"]))
        else:
            a["x_q"], a["x_kv"] = g.normal((B, spec["Q"], spec["dq"])), g.normal((B, spec["K"], spec["dkv"]))
        a["W_q"] = linear_weight(g, d, spec["dq"])
        a["W_k"], a["W_v"] = linear_weight(g, d, spec["dkv"]), linear_weight(g, d, spec["dkv"])
        a["W_o"] = linear_weight(g, d, d)
        out_shape = (B, spec["Q"], d)
    dout = g.normal(out_shape)
    return a, dout, g


def forward(spec, a, g):
    op, lens, p = spec["op"], lens_of(spec), spec.get("p", 0.0)
    if op == "masked_softmax":
        return softmax_mod.masked_softmax_forward(a["x"], lens)
    if op == "dot_product_attention":
        return dpa_mod.dot_product_attention_forward(a["q"], a["k"], a["v"], lens, p, g)
    if op == "additive_attention":
        params = {n: a[n] for n in ("W_q", "W_k", "w_v")}
        return additive_mod.additive_attention_forward(a["q"], a["k"], a["v"], params, lens, p, g)
    params = {n: a[n] for n in ("W_q", "W_k", "W_v", "W_o")}
    x_q, x_kv = (a["x"], a["x"]) if spec["self"] else (a["x_q"], a["x_kv"])
    return mha_mod.multi_head_attention_forward(x_q, x_kv, params, spec["heads"], lens, p, g)


def backward(spec, dout, cache):
    """Gradients under the names of draw()'s arrays, through the module attributes (so that a
    test can monkeypatch a wrong backward in)."""
    op = spec["op"]
    if op == "masked_softmax":
        return {"x": softmax_mod.masked_softmax_backward(dout, cache)}
    if op == "dot_product_attention":
        return dict(zip("qkv", dpa_mod.dot_product_attention_backward(dout, cache)))
    if op == "additive_attention":
        dq, dk, dv, grads = additive_mod.additive_attention_backward(dout, cache)
        return {"q": dq, "k": dk, "v": dv, **grads}
    dx_q, dx_kv, grads = mha_mod.multi_head_attention_backward(dout, cache)
    if spec["self"]:
        return {"x": dx_q + dx_kv, **grads}  # the caller's sum: x fed the queries and the keys/values
    return {"x_q": dx_q, "x_kv": dx_kv, **grads}


def reference_gradients(spec):
    a, dout, g = draw(spec)
    out, cache = forward(spec, a, g)
    return a, dout, out, cache, backward(spec, dout, cache)


# ---------------------------------------------------------------- oracle 1: torch autograd

def keep_mask_for(spec, scores_shape):
    """Bool mask of the scores' shape, True where kept, from the spec's lengths (None: all)."""
    lens = lens_of(spec)
    if lens is None:
        return None
    Q, K = scores_shape[-2:]
    per_row = np.broadcast_to(lens[:, None], (lens.shape[0], Q)) if lens.ndim == 1 else lens  # (B, Q)
    keep = np.arange(K)[None, None, :] < per_row[:, :, None]  # (B, Q, K)
    middle = (1,) * (len(scores_shape) - 3)
    return torch.from_numpy(np.array(np.broadcast_to(keep.reshape((keep.shape[0],) + middle + keep.shape[1:]),
                                                                 scores_shape)))


def torch_attend(spec, scores, v, dropout_mask):
    """The book's masked softmax (-1e6 fill) on torch scores, dropout by the given mask, then v."""
    keep = keep_mask_for(spec, tuple(scores.shape))
    if keep is not None:
        scores = scores.masked_fill(~keep, -1e6)
    w = torch.softmax(scores, dim=-1)
    if dropout_mask is not None:
        w = w * (dropout_mask / (1.0 - spec["p"]))
    return w if v is None else w @ v


def replayed_dropout_mask(spec, a, shape):
    """The keep mask the forward drew, drawn again by a fresh generator at the same counter."""
    if spec.get("p", 0.0) == 0.0:
        return None
    _, _, g = draw(spec)
    return torch.from_numpy(g.keep_mask(shape, spec["p"]))


def torch_forward(spec, a, ta):
    op = spec["op"]
    if op == "masked_softmax":
        return torch_attend(spec, ta["x"], None, None)
    if op == "dot_product_attention":
        scores = ta["q"] @ ta["k"].transpose(-1, -2) / math.sqrt(spec["q"][-1])
        return torch_attend(spec, scores, ta["v"], replayed_dropout_mask(spec, a, tuple(scores.shape)))
    if op == "additive_attention":
        feats = (ta["q"] @ ta["W_q"].T)[:, :, None, :] + (ta["k"] @ ta["W_k"].T)[:, None, :, :]
        scores = (torch.tanh(feats) @ ta["w_v"].T).squeeze(-1)
        return torch_attend(spec, scores, ta["v"], replayed_dropout_mask(spec, a, tuple(scores.shape)))
    x_q, x_kv = (ta["x"], ta["x"]) if spec["self"] else (ta["x_q"], ta["x_kv"])
    B, h, d = spec["B"], spec["heads"], spec["d"]

    def split(y):
        return y.reshape(B, y.shape[1], h, d // h).transpose(1, 2)  # (B, H, T, D)

    qh, kh, vh = split(x_q @ ta["W_q"].T), split(x_kv @ ta["W_k"].T), split(x_kv @ ta["W_v"].T)
    scores = qh @ kh.transpose(-1, -2) / math.sqrt(d // h)
    heads = torch_attend(spec, scores, vh, replayed_dropout_mask(spec, a, tuple(scores.shape)))
    return heads.transpose(1, 2).reshape(B, -1, d) @ ta["W_o"].T


def torch_gradients(spec, a, dout):
    ta = {n: torch.tensor(x, dtype=torch.float64, requires_grad=True) for n, x in a.items()}
    out = torch_forward(spec, a, ta)
    (out * torch.from_numpy(dout)).sum().backward()
    return out.detach().numpy(), {n: t.grad.numpy() for n, t in ta.items()}


def rel_err(ours, theirs):
    scale = np.max(np.abs(theirs))
    return float(np.max(np.abs(ours - theirs)) / scale) if scale > 0 else float(np.max(np.abs(ours)))


def worst_vs(grads, expected):
    """(worst relative error, name) over the tensors; asserts the names and shapes match."""
    assert sorted(grads) == sorted(expected), f"gradient names {sorted(grads)} vs {sorted(expected)}"
    errs = {}
    for n in grads:
        assert grads[n].shape == expected[n].shape, f"d{n}: shape {grads[n].shape}, expected {expected[n].shape}"
        errs[n] = rel_err(grads[n], expected[n])
    name = max(errs, key=errs.get)
    return errs[name], name


def torch_error(spec):
    a, dout, out, _, grads = reference_gradients(spec)
    t_out, t_grads = torch_gradients(spec, a, dout)
    assert rel_err(out, t_out) <= tolerance(spec["op"], "torch_backward"), "the forward must agree before the backward is judged"
    return worst_vs(grads, t_grads)


@pytest.mark.parametrize("case", sorted(SPECS))
def test_backward_matches_torch_autograd(case):
    err, name = torch_error(SPECS[case])
    bound = tolerance(SPECS[case]["op"], "torch_backward")
    assert err <= bound, f"{case}: d{name} differs from torch autograd by {err:.3g} of its scale (allowed {bound})"


def test_the_cases_exercise_dropout_and_empty_rows():
    """The dropout cases really drop something, and the length-0 rows really get gradient 0."""
    for case in ("dpa-dropout", "add-lens2d-dropout", "mha-self-dropout"):
        _, _, _, cache, _ = reference_gradients(SPECS[case])
        mask = (cache["attn"] if "attn" in cache else cache)["mask"]
        assert 0 < mask.sum() < mask.size, f"{case}: the keep mask must drop some weights and keep others"
    _, _, _, cache, grads = reference_gradients(SPECS["softmax-lens1d"])
    assert np.all(cache["out"][0] == 0.2), "length 0: uniform weights"
    assert np.all(grads["x"][0] == 0.0) and np.all(grads["x"][1, :, 3:] == 0.0), "masked scores get exactly 0"
    assert np.max(np.abs(grads["x"][1, :, :3])) > WRONG


# ---------------------------------------------------------------- oracle 2: central differences

def loss(spec, a, dout, counter):
    """L = sum(out * dout) in index order, the forward's dropout drawn at the same counter."""
    g = Generator(spec["seed"])
    g.counter = counter
    out, _ = forward(spec, a, g)
    return sum_last((out * dout).reshape(1, -1))[0]


def fd_error(spec, h=None):
    """Worst relative error of the analytic gradient against (L(x + h) - L(x - h)) / 2h, every
    coordinate of every input and parameter; h: the op's declared step unless given."""
    h = tolerance(spec["op"], "fd").step if h is None else h
    a, dout, g = draw(spec)
    counter = g.counter
    _, cache = forward(spec, a, g)
    grads = backward(spec, dout, cache)
    numeric = {}
    for name, x in a.items():
        num = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            saved = x[i]
            x[i] = saved + h
            up = loss(spec, a, dout, counter)
            x[i] = saved - h
            down = loss(spec, a, dout, counter)
            x[i] = saved
            num[i] = (up - down) / (2 * h)
        numeric[name] = num
    return worst_vs(grads, numeric)


@pytest.mark.parametrize("case", sorted(SPECS))
def test_backward_matches_central_differences(case):
    err, name = fd_error(SPECS[case])
    fd = tolerance(SPECS[case]["op"], "fd")
    assert err <= fd, f"{case}: d{name} differs from central differences (h = {fd.step}) by {err:.3g} (allowed {fd})"


def test_fd_error_falls_as_h_squared():
    """The step is in the regime where the error is the Taylor remainder: a tenth of the step
    gives about a hundredth of the error, down to a floor far under the declared bound at the
    declared step. A wrong gradient would leave an error that does not shrink."""
    spec = SPECS["mha-cross-lens1d"]
    fd = tolerance(spec["op"], "fd")
    errs = [fd_error(spec, h)[0] for h in (1e-2, 1e-3, 1e-4, fd.step)]
    assert 30 < errs[0] / errs[1] < 300, f"h 1e-2 -> 1e-3: error {errs[0]:.3g} -> {errs[1]:.3g}, expected ~100x smaller"
    assert 30 < errs[1] / errs[2] < 300, f"h 1e-3 -> 1e-4: error {errs[1]:.3g} -> {errs[2]:.3g}, expected ~100x smaller"
    assert errs[3] <= fd / 100, f"at h = {fd.step} the error {errs[3]:.3g} should sit far below the bound {fd}"


# ---------------------------------------------------------------- oracle 3: the port

PORT_SCRIPT = r"""
import { readFileSync } from "node:fs";
import { Generator } from "./port_ts/src/core/rng.ts";
import { intTensor } from "./port_ts/src/core/ops.ts";
import { maskedSoftmaxForward, maskedSoftmaxBackward } from "./port_ts/src/nn/maskedSoftmax.ts";
import { dotProductAttentionForward, dotProductAttentionBackward } from "./port_ts/src/nn/dotProductAttention.ts";
import { additiveAttentionForward, additiveAttentionBackward } from "./port_ts/src/nn/additiveAttention.ts";
import { multiHeadAttentionForward, multiHeadAttentionBackward } from "./port_ts/src/nn/multiHeadAttention.ts";

const w = (g, o, i) => g.uniform([o, i], -1 / Math.sqrt(i), 1 / Math.sqrt(i));
const lensOf = (s) => s.lens === null ? null
  : Array.isArray(s.lens[0]) ? intTensor([s.lens.length, s.lens[0].length], s.lens.flat()) : intTensor([s.lens.length], s.lens);
const flat = (t) => Array.from(t.data);

function run(s) {
  const g = new Generator(s.seed), lens = lensOf(s), p = s.p ?? 0;
  if (s.op === "masked_softmax") {
    const x = g.normal(s.x, 0, 2), dout = g.normal(s.x);
    const { out, cache } = maskedSoftmaxForward(x, lens);
    return { out: flat(out), grads: { x: flat(maskedSoftmaxBackward(dout, cache)) } };
  }
  if (s.op === "dot_product_attention") {
    const q = g.normal(s.q), k = g.normal(s.k), v = g.normal(s.v);
    const dout = g.normal([...s.q.slice(0, -1), s.v[s.v.length - 1]]);
    const { out, cache } = dotProductAttentionForward(q, k, v, lens, p, g);
    const { dq, dk, dv } = dotProductAttentionBackward(dout, cache);
    return { out: flat(out), grads: { q: flat(dq), k: flat(dk), v: flat(dv) } };
  }
  if (s.op === "additive_attention") {
    const q = g.normal([s.B, s.Q, s.Dq], 0, s.std), k = g.normal([s.B, s.K, s.Dk], 0, s.std), v = g.normal([s.B, s.K, s.V]);
    const params = { W_q: w(g, s.H, s.Dq), W_k: w(g, s.H, s.Dk), w_v: w(g, 1, s.H) };
    const dout = g.normal([s.B, s.Q, s.V]);
    const { out, cache } = additiveAttentionForward(q, k, v, params, lens, p, g);
    const { dq, dk, dv, grads } = additiveAttentionBackward(dout, cache);
    return { out: flat(out), grads: { q: flat(dq), k: flat(dk), v: flat(dv), W_q: flat(grads.W_q), W_k: flat(grads.W_k), w_v: flat(grads.w_v) } };
  }
  const xq = g.normal([s.B, s.Q, s.dq]);
  const xkv = s.self ? xq : g.normal([s.B, s.K, s.dkv]);
  const params = { W_q: w(g, s.d, s.dq), W_k: w(g, s.d, s.dkv), W_v: w(g, s.d, s.dkv), W_o: w(g, s.d, s.d) };
  const dout = g.normal([s.B, s.Q, s.d]);
  const { out, cache } = multiHeadAttentionForward(xq, xkv, params, s.heads, lens, p, g);
  const { dxQ, dxKv, grads } = multiHeadAttentionBackward(dout, cache);
  const named = {};
  for (const n of ["W_q", "W_k", "W_v", "W_o"]) named[n] = flat(grads[n]);
  if (s.self) return { out: flat(out), grads: { x: flat(dxQ).map((a, i) => a + dxKv.data[i]), ...named } };
  return { out: flat(out), grads: { x_q: flat(dxQ), x_kv: flat(dxKv), ...named } };
}

const specs = JSON.parse(readFileSync(0, "utf8"));
console.log(JSON.stringify(Object.fromEntries(Object.entries(specs).map(([id, s]) => [id, run(s)]))));
"""


@pytest.fixture(scope="module")
def port(node, repo_root):
    """Every spec run by the port in one Node process: outputs and gradients as JSON numbers
    (shortest round-trip form, read back exactly)."""
    return run_port(node, repo_root, PORT_SCRIPT, stdin=json.dumps(SPECS))


def engine_error(spec, ported):
    _, _, out, _, grads = reference_gradients(spec)
    theirs = {n: np.array(v, dtype=np.float64).reshape(grads[n].shape) for n, v in ported["grads"].items()}
    assert rel_err(out, np.array(ported["out"]).reshape(out.shape)) <= tolerance(spec["op"], "engines_backward"), \
        "the forwards must agree first"
    return worst_vs(grads, theirs), grads, theirs


@pytest.mark.parametrize("case", sorted(SPECS))
def test_port_backward_matches_the_reference(case, port):
    (err, name), _, _ = engine_error(SPECS[case], port[case])
    bound = tolerance(SPECS[case]["op"], "engines_backward")
    assert err <= bound, f"{case}: d{name} differs between the engines by {err:.3g} of its scale (allowed {bound})"


# ---------------------------------------------------------------- a wrong backward is caught

def forgot_the_scale(dout, cache, right=dpa_mod.dot_product_attention_backward):
    """Wrong: the score gradient without the 1/sqrt(D) of scores = q k^T / sqrt(D)."""
    dq, dk, dv = right(dout, cache)
    s = math.sqrt(cache["q"].shape[-1])
    return dq * s, dk * s, dv


def swapped_dq_dk(dout, cache, right=dpa_mod.dot_product_attention_backward):
    """Wrong: dq and dk swapped (same shapes in self-attention with Q = K)."""
    dq, dk, dv = right(dout, cache)
    return dk, dq, dv


def masked_not_zeroed(dout, cache):
    """Wrong: masked scores keep y * (dout - <dout, y>), non-zero in a length-0 row."""
    y = cache["out"]
    return y * (dout - sum_last(dout * y)[..., None])


WRONG_VARIANTS = [
    ("dpa-self", dpa_mod, "dot_product_attention_backward", forgot_the_scale),
    ("dpa-self", dpa_mod, "dot_product_attention_backward", swapped_dq_dk),
    ("mha-cross-lens1d", mha_mod, "dot_product_attention_backward", forgot_the_scale),  # wrong inside MHA
    ("softmax-lens1d", softmax_mod, "masked_softmax_backward", masked_not_zeroed),
]


@pytest.mark.parametrize("case, module, attr, wrong", WRONG_VARIANTS, ids=lambda x: getattr(x, "__name__", str(x)))
def test_a_wrong_backward_fails_every_oracle(case, module, attr, wrong, monkeypatch, port):
    spec = SPECS[case]
    for check in (torch_error, fd_error):
        err, _ = check(spec)
        assert err <= max(tolerance(spec["op"], "torch_backward"), tolerance(spec["op"], "fd")), f"{case} must pass {check.__name__} before the wrong variant is swapped in"
    monkeypatch.setattr(module, attr, wrong)
    for check in (torch_error, fd_error):
        err, name = check(spec)
        assert err > WRONG, f"{wrong.__name__} in {case}: {check.__name__} saw only {err:.3g} on d{name}"
    (err, name), _, _ = engine_error(spec, port[case])
    assert err > WRONG, f"{wrong.__name__} in {case}: the port comparison saw only {err:.3g} on d{name}"
