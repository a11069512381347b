"""The lesson's Transformer block: pre-norm, PyTorch's biased multi-head attention, a ReLU FFN and
two layer norms, an optional mask (twin: port_ts/src/nn/lessonBlock.ts; docs/lesson_block.md).

    N1 = LN1(X)                  (B, T, d)
    A  = Attn(N1, keep)          (B, T, d)    lesson_attention: nn.MultiheadAttention, biased
    X1 = X + A                   (B, T, d)
    N2 = LN2(X1)                 (B, T, d)
    G  = FFN(N2)                 (B, T, d)    Linear(d -> F) -> ReLU -> Linear(F -> d)
    out = X1 + G                 (B, T, d)

Shape legend: B batch, T steps, d model dim, H heads, F FFN hidden. keep None | bool (B|1, T, T)
(causal: lesson_attention.causal_keep). Unlike the book's post-norm block (nn/encoder_block.py:
no attention biases, LN after each residual), the norms come first and the residual stream is
never normalised inside the block. No dropout (the lesson's block in eval mode).

Parameters, stripped of the block's prefix, in this order (the forward's):
    ln1.gamma, ln1.beta (d,); attn.W_in (3d, d), attn.b_in (3d,), attn.W_o (d, d), attn.b_o (d,);
    ln2.gamma, ln2.beta (d,); ffn.W1 (F, d), ffn.b1 (F,), ffn.W2 (d, F), ffn.b2 (d,)
    4d^2 + 4d + 2dF + F + d + 4d in all (lesson_block_param_count): 49,984 at d 64, F 256;
    7,087,872 at d 768, F 3072 (the heads do not count).
Drawn: attn (W_in, W_o), then ffn (W1, b1, W2, b2); layer norms and attention biases draw nothing.

Backward walks the six lines in reverse. A tensor used twice gets its gradients added in one
fixed order, the same in both engines:
    dX1 = dOut + dX1_ln2     the residual, then the FFN branch through LN2
    dX  = dX1 + dX_ln1       the residual, then the attention branch through LN1
"""

import numpy as np

from .encoder_block import init_ffn_params, init_layer_norm_params
from .ffn import ffn_backward, ffn_forward
from .layer_norm import layer_norm_backward, layer_norm_forward
from .lesson_attention import init_lesson_attention_params, lesson_attention_backward, lesson_attention_forward
from ..core.params import add_grads, param, sub_params
from ..core.trace import backward, sublayer

NAMES = ("ln1.gamma", "ln1.beta", "attn.W_in", "attn.b_in", "attn.W_o", "attn.b_o",
         "ln2.gamma", "ln2.beta", "ffn.W1", "ffn.b1", "ffn.W2", "ffn.b2")


def init_lesson_block_params(rng, d, ffn_hidden):
    """The block's parameters under the stripped names, in NAMES order (draws: attn, then ffn)."""
    attn = init_lesson_attention_params(rng, d, "attn.")
    ffn = init_ffn_params(rng, d, ffn_hidden, "ffn.")
    drawn = {**init_layer_norm_params(d, "ln1."), **attn, **init_layer_norm_params(d, "ln2."), **ffn}
    return {name: drawn[name] for name in NAMES}


def lesson_block_param_count(d, ffn_hidden):
    """How many numbers the block holds: attention 4d^2 + 4d, FFN 2dF + F + d, norms 4d."""
    return (4 * d * d + 4 * d) + (2 * d * ffn_hidden + ffn_hidden + d) + 4 * d


def lesson_block_attention(x, params, num_heads, keep=None):
    """The block's first half, x + attention(LN1(x)): x (B, T, d) -> (x1 (B, T, d), {"ln1", "attn"})."""
    n1, ln1 = layer_norm_forward(x, param(params, "ln1.gamma"), param(params, "ln1.beta"))  # (B, T, d)
    a, attn = lesson_attention_forward(n1, sub_params(params, "attn."), num_heads, keep)  # (B, T, d)
    x1 = x + a  # (B, T, d)
    return x1, {"ln1": ln1, "attn": attn}


def lesson_block_ffn(x1, params):
    """The block's second half, x1 + FFN(LN2(x1)): x1 (B, T, d) -> (out (B, T, d), {"ln2", "ffn"})."""
    n2, ln2 = layer_norm_forward(x1, param(params, "ln2.gamma"), param(params, "ln2.beta"))  # (B, T, d)
    g, ffn = ffn_forward(n2, sub_params(params, "ffn."))  # (B, T, d)
    out = x1 + g  # (B, T, d)
    return out, {"ln2": ln2, "ffn": ffn}


def lesson_block_forward(x, params, num_heads, keep=None):
    """x (B, T, d), keep None | bool (B|1, T, T) -> (out (B, T, d), cache).
    Traced sub-layers (core/trace.py): attention (the first half), ffn (the second), forward and backward."""
    x = np.asarray(x, dtype=np.float64)
    x1, first = sublayer("attention", lesson_block_attention, x, params, num_heads, keep)  # (B, T, d)
    out, second = sublayer("ffn", lesson_block_ffn, x1, params)  # (B, T, d)
    return out, {"ln1": first["ln1"], "attn": first["attn"], "ln2": second["ln2"], "ffn": second["ffn"],
                 "weights": first["attn"]["weights"]}


# the labels a traced backward gives each returned gradient: the port's field names (core/trace.py)
HALF_GRADS = ("dx", "dgamma", "dbeta", "grads")  # either half of the block


def lesson_block_ffn_backward(dout, cache):
    """The block's second half: dout (B, T, d) -> (dx1 (B, T, d), dgamma2 (d,), dbeta2 (d,),
    {"W1", "b1", "W2", "b2"})."""
    # inverts: out = x1 + g; g = FFN(n2)
    dn2, ffn_grads = ffn_backward(dout, cache["ffn"])  # (B, T, d)
    # inverts: n2 = LN2(x1)
    dx1_ln, dgamma2, dbeta2 = layer_norm_backward(dn2, cache["ln2"])  # (B, T, d)
    dx1 = add_grads(dout, dx1_ln)  # x1 feeds the residual and LN2
    return dx1, dgamma2, dbeta2, ffn_grads


def lesson_block_attention_backward(dx1, cache):
    """The block's first half: dx1 (B, T, d) -> (dx (B, T, d), dgamma1 (d,), dbeta1 (d,),
    {"W_in", "b_in", "W_o", "b_o"})."""
    # inverts: x1 = x + a; a = Attn(n1, keep)
    dn1, attn_grads = lesson_attention_backward(dx1, cache["attn"])  # (B, T, d)
    # inverts: n1 = LN1(x)
    dx_ln, dgamma1, dbeta1 = layer_norm_backward(dn1, cache["ln1"])  # (B, T, d)
    dx = add_grads(dx1, dx_ln)  # x feeds the residual and LN1
    return dx, dgamma1, dbeta1, attn_grads


def lesson_block_backward(dout, cache):
    """dout (B, T, d) -> (dx (B, T, d), grads under the stripped names, in NAMES order)."""
    dout = np.asarray(dout, dtype=np.float64)
    dx1, dgamma2, dbeta2, ffn_grads = backward("ffn", HALF_GRADS, lesson_block_ffn_backward, dout, cache)  # (B, T, d)
    dx, dgamma1, dbeta1, attn_grads = backward("attention", HALF_GRADS, lesson_block_attention_backward, dx1, cache)
    grads = {"ln1.gamma": dgamma1, "ln1.beta": dbeta1}
    grads.update({f"attn.{name}": attn_grads[name] for name in ("W_in", "b_in", "W_o", "b_o")})
    grads.update({"ln2.gamma": dgamma2, "ln2.beta": dbeta2})
    grads.update({f"ffn.{name}": ffn_grads[name] for name in ("W1", "b1", "W2", "b2")})
    return dx, grads
