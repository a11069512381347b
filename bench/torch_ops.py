"""PyTorch's side of the benchmarks' workloads (bench/workloads.py): the same maths composed from
torch float64 ops on the CPU, on the reference's arrays.

TORCH[op](config, inputs, cache) -> TorchCase, where inputs are the reference's drawn arrays and
cache that of the reference's first forward (it carries the dropout masks, which torch applies
as they are instead of drawing its own):
    leaves     {name: tensor}, the differentiable inputs (requires_grad); a backward's gradients
               are named "d<name>", as the engines name theirs
    forward()  -> {"out": tensor} or {"loss": tensor}, the autograd graph recorded (as the engines'
               forwards record their caches); a step's or gradcheck's forward also does the rest
               and returns numpy outputs named as the reference's
Each composition follows the reference's definition (the tests compare the same compositions
against the reference: tests/test_attention.py, tests/test_layers.py, tests/test_backward_*.py).
"""

import importlib.util
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from reference.nn.masked_softmax import MASK_VALUE
from reference.nn.positional_encoding import sinusoidal_table

from toolkit import t
from workloads import ADAM_LR, CASES, DROPOUT_P, PRIMITIVES, STEP_CYCLE, dout_for

EPS = 1e-5  # layer norm's, as reference/nn/layer_norm.py


@dataclass
class TorchCase:
    forward: object
    leaves: dict = field(default_factory=dict)


def _leaves(inputs, names):
    return {n: t(inputs[n], grad=True) for n in names}


def _keep(lens, K):
    """(B, 1, 1, K) bool, True where key k < the row's valid length (1-D lengths, every query)."""
    return (torch.arange(K)[None, :] < t(lens)[:, None])[:, None, None, :]


def _softmax(scores, keep):
    return torch.softmax(scores if keep is None else scores.masked_fill(~keep, MASK_VALUE), dim=-1)


def _attend(q, k, v, keep):
    return _softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), keep) @ v


def _mha(P, pre, xq, xkv, heads, keep):
    """Multi-head attention without biases; keep broadcasts over (B, H, Q, K)."""
    B, Q, d = xq.shape
    K, D = xkv.shape[1], d // heads
    q = (xq @ P[pre + "W_q"].T).reshape(B, Q, heads, D).transpose(1, 2)
    k = (xkv @ P[pre + "W_k"].T).reshape(B, K, heads, D).transpose(1, 2)
    v = (xkv @ P[pre + "W_v"].T).reshape(B, K, heads, D).transpose(1, 2)
    return _attend(q, k, v, keep).transpose(1, 2).reshape(B, Q, d) @ P[pre + "W_o"].T


def _norm(P, pre, x):
    return F.layer_norm(x, (x.shape[-1],), P[pre + "gamma"], P[pre + "beta"], EPS)


def _ffn(P, pre, x):
    return F.linear(torch.relu(F.linear(x, P[pre + "W1"], P[pre + "b1"])), P[pre + "W2"], P[pre + "b2"])


def _ffn_gelu(P, pre, x):
    """The ViT's MLP: Linear -> GELU (erf) -> Linear."""
    return F.linear(F.gelu(F.linear(x, P[pre + "W1"], P[pre + "b1"])), P[pre + "W2"], P[pre + "b2"])


def _float_names(inputs, skip=()):
    return [n for n, a in inputs.items() if n not in skip and np.asarray(a).dtype.kind == "f"]


# ---- the primitives ---------------------------------------------------------------------------

def masked_softmax(s, a, cache):
    L = _leaves(a, ["x"])
    keep = _keep(a["lens"], s["T"])
    return TorchCase(lambda: {"out": _softmax(L["x"], keep)}, L)


def dot_product_attention(s, a, cache):
    L = _leaves(a, ["q", "k", "v"])
    keep = _keep(a["lens"], s["T"])
    return TorchCase(lambda: {"out": _attend(L["q"], L["k"], L["v"], keep)}, L)


def additive_attention(s, a, cache):
    L = _leaves(a, ["q", "k", "v", "W_q", "W_k", "w_v"])
    keep = _keep(a["lens"], s["T"])[:, 0]  # (B, 1, K)

    def forward():
        features = (L["q"] @ L["W_q"].T)[:, :, None, :] + (L["k"] @ L["W_k"].T)[:, None, :, :]  # (B, Q, K, H)
        scores = (torch.tanh(features) @ L["w_v"].T)[..., 0]  # (B, Q, K)
        return {"out": _softmax(scores, keep) @ L["v"]}
    return TorchCase(forward, L)


def multi_head_attention(s, a, cache):
    L = _leaves(a, _float_names(a))
    keep = _keep(a["lens"], s["T"])
    return TorchCase(lambda: {"out": _mha(L, "", L["x"], L["x"], s["heads"], keep)}, L)


def positional_encoding(s, a, cache):
    L = _leaves(a, ["x"])
    P = t(sinusoidal_table(s["T"], s["d"]))  # a constant, as the reference's cached table
    scale = t(cache["mask"]) / (1.0 - DROPOUT_P)
    return TorchCase(lambda: {"out": (L["x"] + P) * scale}, L)


def layer_norm(s, a, cache):
    L = _leaves(a, ["x", "gamma", "beta"])
    return TorchCase(lambda: {"out": _norm(L, "", L["x"])}, L)


def ffn(s, a, cache):
    L = _leaves(a, ["x", "W1", "b1", "W2", "b2"])
    return TorchCase(lambda: {"out": _ffn(L, "", L["x"])}, L)


def gelu(s, a, cache):
    L = _leaves(a, ["x"])
    return TorchCase(lambda: {"out": F.gelu(L["x"], approximate="none")}, L)


def dropout(s, a, cache):
    L = _leaves(a, ["x"])
    scale = t(cache["mask"]) / (1.0 - DROPOUT_P)
    return TorchCase(lambda: {"out": L["x"] * scale}, L)


def linear(s, a, cache):
    L = _leaves(a, ["x", "W", "b"])
    return TorchCase(lambda: {"out": F.linear(L["x"], L["W"], L["b"])}, L)


def embedding(s, a, cache):
    L = _leaves(a, ["E"])
    tokens = t(a["tokens"])
    return TorchCase(lambda: {"out": F.embedding(tokens, L["E"])}, L)


def cross_entropy(s, a, cache):
    L = _leaves(a, ["logits"])
    targets = t(a["targets"]).reshape(-1)
    w = (torch.arange(s["T"])[None, :] < t(a["lens"])[:, None]).reshape(-1).to(torch.float64)

    def forward():
        per = F.cross_entropy(L["logits"].reshape(-1, s["V"]), targets, reduction="none")
        return {"loss": (per * w).sum() / w.sum()}
    return TorchCase(forward, L)


def encoder_block(s, a, cache):
    L = _leaves(a, _float_names(a))
    keep = _keep(a["lens"], s["T"])

    def forward():
        x = L["x"]
        y = _norm(L, "ln1.", x + _mha(L, "attn.", x, x, s["heads"], keep))
        return {"out": _norm(L, "ln2.", y + _ffn(L, "ffn.", y))}
    return TorchCase(forward, L)


def decoder_block(s, a, cache):
    L = _leaves(a, _float_names(a))
    keep = _keep(a["lens"], s["T"])
    causal = torch.tril(torch.ones(s["T"], s["T"], dtype=torch.bool))[None, None]  # query t sees keys 0..t

    def forward():
        x, enc = L["x"], L["enc"]
        y = _norm(L, "ln1.", x + _mha(L, "self_attn.", x, x, s["heads"], causal))
        z = _norm(L, "ln2.", y + _mha(L, "cross_attn.", y, enc, s["heads"], keep))
        return {"out": _norm(L, "ln3.", z + _ffn(L, "ffn.", z))}
    return TorchCase(forward, L)


def adam(s, a, cache):
    """torch.optim.Adam (its defaults: betas 0.9, 0.999, eps 1e-8; on the CPU one loop over the
    parameters), the gradients set once."""
    P = {n: t(v, grad=True) for n, v in a["params"].items()}
    for n, p in P.items():
        p.grad = t(a["grads"][n])
    opt = torch.optim.Adam(list(P.values()), lr=ADAM_LR)

    def forward():
        opt.step()
        return {n: p.detach() for n, p in P.items()}
    return TorchCase(forward)


def rope(s, a, cache):
    torch_rope = _tests_module("test_rope").torch_rope  # the oracle of tests/test_rope.py
    L = _leaves(a, ["x"])
    positions = np.arange(s["T"])
    return TorchCase(lambda: {"out": torch_rope(L["x"], positions)}, L)


# ---- the models' steps and the gradient check ------------------------------------------------

def _stepper(P, loss_of_batch):
    """forward() = loss and gradients of the batch of step t = 1, 2, ..., STEP_CYCLE, 1, ..."""
    calls = iter(range(10**12))

    def forward():
        for p in P.values():
            p.grad = None
        loss = loss_of_batch(next(calls) % STEP_CYCLE + 1)
        loss.backward()
        return {"loss": loss.detach().numpy(), **{f"d{n}": p.grad.numpy() for n, p in P.items()}}
    return forward


def _tests_module(name):
    """A module of tests/ (not a package) by file name."""
    path = Path(__file__).resolve().parent.parent / "tests" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reversal_step(config, a, cache):
    # tests/test_reversal.py's composition of the encoder-decoder, checked there against the
    # reference to 1e-9 over 20 Adam steps of this run
    torch_loss = _tests_module("test_reversal").torch_loss
    from reference.runs.reversal import reversal_model_config

    P = _leaves(a["params"], list(a["params"]))
    model = reversal_model_config(config)
    return TorchCase(_stepper(P, lambda step: torch_loss(P, model, a["batches"][step - 1])))


def vit_step(config, a, cache):
    from reference.runs.garments import batch_indices

    P = _leaves(a["params"], list(a["params"]))
    c = a["model"]
    d, p, h = c["d"], c["patch"], c["heads"]

    def loss_of_batch(step):
        idx = batch_indices(step, config["batch"], config["n_train"])
        images, labels = t(a["images"][idx]), t(a["labels"][idx])
        e = F.conv2d(images, P["patch.W"], P["patch.b"], stride=p).flatten(2).transpose(1, 2)  # (B, N, d)
        x = torch.cat([P["cls"].expand(e.shape[0], 1, d), e], dim=1) + P["pos"]  # (B, N+1, d), <cls> first
        for i in range(c["blocks"]):  # pre-norm blocks, GELU MLP
            b = f"blk{i}."
            n1 = _norm(P, b + "ln1.", x)
            x = x + _mha(P, b + "attn.", n1, n1, h, None)
            x = x + _ffn_gelu(P, b + "mlp.", _norm(P, b + "ln2.", x))
        logits = F.linear(_norm(P, "head.ln.", x[:, 0]), P["head.W"], P["head.b"])
        return F.cross_entropy(logits, labels)
    return TorchCase(_stepper(P, loss_of_batch))


def _alignment_loss(W_q, W_k, w_v, q, k, gold):
    """Mean over the target words of -log(attention weight on the gold source word)."""
    features = torch.tanh((q @ W_q.T)[:, :, None, :] + (k @ W_k.T)[:, None, :, :])  # (B, Q, K, H)
    logp = torch.log_softmax((features @ w_v.T)[..., 0], dim=-1)  # (B, Q, K)
    return -logp.gather(-1, gold[..., None]).mean()


def alignment_step(config, a, cache):
    P = _leaves(a["params"], ["W_q", "W_k", "w_v"])
    q, k, gold = t(a["queries"]), t(a["keys"]), t(a["gold"])
    return TorchCase(_stepper(P, lambda step: _alignment_loss(P["W_q"], P["W_k"], P["w_v"], q, k, gold)))


def gradcheck_alignment(config, a, cache):
    """torch.autograd.gradcheck (float64, its defaults: every coordinate of every parameter by
    second-order central differences, eps 1e-6) of the same loss."""
    P = _leaves(a["params"], ["W_q", "W_k", "w_v"])
    q, k, gold = t(a["queries"]), t(a["keys"]), t(a["gold"])
    fn = lambda W_q, W_k, w_v: _alignment_loss(W_q, W_k, w_v, q, k, gold)  # noqa: E731

    def forward():
        assert torch.autograd.gradcheck(fn, (P["W_q"], P["W_k"], P["w_v"])), "torch's gradcheck failed"
        return {"loss": fn(P["W_q"], P["W_k"], P["w_v"]).detach().numpy()}
    return TorchCase(forward)


TORCH = {name: globals()[name] for name in PRIMITIVES + [op for op, _ in CASES]}  # op -> its setup above


def torch_call(workload, inputs, cache):
    """(call, outputs) as reference_call: the timed work once, and its first run's outputs (numpy)."""
    case = TORCH[workload.op](workload.config, inputs, cache)
    first = case.forward()
    if workload.part == "backward":
        (name, out), = first.items()
        leaves = list(case.leaves.values())
        dout = None
        if name == "out":
            dout = t(dout_for(workload, {"out": out.detach().numpy()}))
        grads = torch.autograd.grad(out, leaves, dout, retain_graph=True)
        outputs = {f"d{n}": g.numpy() for n, g in zip(case.leaves, grads)}
        return (lambda: torch.autograd.grad(out, leaves, dout, retain_graph=True)), outputs
    # copies: later calls may change the tensors in place (Adam does)
    outputs = {n: np.array(v.detach().numpy() if torch.is_tensor(v) else v) for n, v in first.items()}
    return case.forward, outputs
