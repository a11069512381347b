"""Cases of the attention primitives (twin: casesAttention.ts): each op has a draw function (DRAWS,
the order of draws in its comment) and a compute function (COMPUTE) (cases.py). A case with
dropout_p > 0 draws its keep mask inside the forward, from where the inputs' draws ended.
Parameters are drawn as PyTorch's default Linear init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), after
the inputs. Grouped-query attention's gradient check (kind "gradcheck") lives beside its forward."""

import math

from ..core import case_config as cc
from ..core.ops import sum_last
from ..nn.additive_attention import additive_attention_forward
from ..nn.dot_product_attention import dot_product_attention_forward
from ..nn.grouped_query_attention import grouped_query_attention_backward, grouped_query_attention_forward
from ..nn.masked_softmax import masked_softmax_forward
from ..nn.multi_head_attention import multi_head_attention_forward
from ..nn.rope import rope_attention_forward, rope_forward
from ..runs.gradcheck import run_check


def _valid_lens(config):
    value = cc.get(config, "valid_lens", None)
    return None if value is None else cc.int_array(value, "valid_lens")


def _with_lens(inputs, lens):
    if lens is not None:
        inputs["valid_lens"] = lens
    return inputs


def _linear_weight(rng, out_dim, in_dim):
    """(out, in) from U(-1/sqrt(in), 1/sqrt(in)), PyTorch's default Linear weight init."""
    bound = 1.0 / math.sqrt(in_dim)
    return rng.uniform((out_dim, in_dim), -bound, bound)


def masked_softmax_inputs(config, rng):
    # config: shape [B, Q, K] or [B, H, Q, K]; mean, std of the scores; valid_lens null | (B,) | (B, Q)
    # draws: x ~ N(mean, std^2) of shape
    shape = cc.shape(config, "shape")
    if len(shape) not in (3, 4):
        raise cc.CaseError(f"config 'shape' must be [B, Q, K] or [B, H, Q, K], got {list(shape)}")
    x = rng.normal(shape, cc.get(config, "mean", 0.0), cc.get(config, "std", 1.0))
    return _with_lens({"x": x}, _valid_lens(config))


def masked_softmax(inputs, config, rng=None):
    (x,) = cc.need(inputs, "x")
    return {"out": masked_softmax_forward(x, inputs.get("valid_lens"))[0]}


def dot_product_attention_inputs(config, rng):
    # config: either literal q, k, v (nested lists, no draws), or lead (e.g. [B] or [B, H]),
    #   Q, K, D, V and std (default 1); valid_lens null | (B,) | (B, Q); dropout_p (default 0)
    # draws: q ~ N(0, std^2) (lead, Q, D); k (lead, K, D); v (lead, K, V); then, in the forward,
    #   the keep mask
    if "q" in config:
        q, k, v = (cc.float_array(cc.get(config, n), n) for n in ("q", "k", "v"))
    else:
        lead = cc.shape(config, "lead")
        Q, K, D, V = (cc.positive_int(config, n) for n in ("Q", "K", "D", "V"))
        std = cc.get(config, "std", 1.0)
        q = rng.normal(lead + (Q, D), 0.0, std)
        k = rng.normal(lead + (K, D), 0.0, std)
        v = rng.normal(lead + (K, V), 0.0, std)
    return _with_lens({"q": q, "k": k, "v": v}, _valid_lens(config))


def dot_product_attention(inputs, config, rng=None):
    q, k, v = cc.need(inputs, "q", "k", "v")
    out, cache = dot_product_attention_forward(q, k, v, inputs.get("valid_lens"), cc.get(config, "dropout_p", 0.0), rng)
    return {"out": out, "weights": cache["weights"]}


def additive_attention_inputs(config, rng):
    # config: B, Q, K, Dq, Dk, H, V; std of the inputs (default 1); valid_lens; dropout_p
    # draws: q ~ N(0, std^2) (B, Q, Dq); k (B, K, Dk); v (B, K, V);
    #   W_q U(+-1/sqrt(Dq)) (H, Dq); W_k U(+-1/sqrt(Dk)) (H, Dk); w_v U(+-1/sqrt(H)) (1, H);
    #   then, in the forward, the keep mask
    B, Q, K, Dq, Dk, H, V = (cc.positive_int(config, n) for n in ("B", "Q", "K", "Dq", "Dk", "H", "V"))
    std = cc.get(config, "std", 1.0)
    q = rng.normal((B, Q, Dq), 0.0, std)
    k = rng.normal((B, K, Dk), 0.0, std)
    v = rng.normal((B, K, V), 0.0, std)
    params = {"W_q": _linear_weight(rng, H, Dq), "W_k": _linear_weight(rng, H, Dk),
              "w_v": _linear_weight(rng, 1, H)}
    return _with_lens({"q": q, "k": k, "v": v, **params}, _valid_lens(config))


def additive_attention(inputs, config, rng=None):
    q, k, v, W_q, W_k, w_v = cc.need(inputs, "q", "k", "v", "W_q", "W_k", "w_v")
    out, cache = additive_attention_forward(q, k, v, {"W_q": W_q, "W_k": W_k, "w_v": w_v}, inputs.get("valid_lens"),
                                            cc.get(config, "dropout_p", 0.0), rng)
    return {"out": out, "weights": cache["weights"]}


def multi_head_attention_inputs(config, rng):
    # config: B, Tq, d, heads, dq_in; self (default true: x_kv = x_q); when not self: Tk, dkv_in;
    #   valid_lens null | (B,) | (B, Tq); dropout_p (default 0)
    # draws: x_q ~ N(0, 1) (B, Tq, dq_in); x_kv (B, Tk, dkv_in) unless self;
    #   W_q U(+-1/sqrt(dq_in)) (d, dq_in); W_k, W_v U(+-1/sqrt(dkv_in)) (d, dkv_in);
    #   W_o U(+-1/sqrt(d)) (d, d); then, in the forward, the keep mask of the weights (B, H, Tq, Tk)
    B, Tq, d, dq_in = (cc.positive_int(config, n) for n in ("B", "Tq", "d", "dq_in"))
    inputs = {"x_q": rng.normal((B, Tq, dq_in))}
    dkv_in = dq_in
    if not cc.get(config, "self", True):
        Tk, dkv_in = cc.positive_int(config, "Tk"), cc.positive_int(config, "dkv_in")
        inputs["x_kv"] = rng.normal((B, Tk, dkv_in))
    inputs.update({"W_q": _linear_weight(rng, d, dq_in), "W_k": _linear_weight(rng, d, dkv_in),
                   "W_v": _linear_weight(rng, d, dkv_in), "W_o": _linear_weight(rng, d, d)})
    return _with_lens(inputs, _valid_lens(config))


def multi_head_attention(inputs, config, rng=None):
    x_q, W_q, W_k, W_v, W_o = cc.need(inputs, "x_q", "W_q", "W_k", "W_v", "W_o")
    params = {"W_q": W_q, "W_k": W_k, "W_v": W_v, "W_o": W_o}
    out, cache = multi_head_attention_forward(x_q, inputs.get("x_kv", x_q), params, cc.positive_int(config, "heads"),
                                              inputs.get("valid_lens"), cc.get(config, "dropout_p", 0.0), rng)
    return {"out": out, "weights": cache["weights"]}


def _positions(config, key, T):
    """None (positions 0..T-1) or the config's T integer positions."""
    value = cc.get(config, key, None)
    if value is None:
        return None
    positions = cc.int_array(value, key)
    if positions.shape != (T,) or (positions < 0).any():
        raise cc.CaseError(f"config {key!r} must list {T} non-negative integer positions (one per step), got {value!r}")
    return positions


def _even(config, key):
    n = cc.positive_int(config, key)
    if n % 2:
        raise cc.CaseError(f"config {key!r} must be even (RoPE rotates pairs of features), got {n}")
    return n


def _with_positions(inputs, **positions):
    inputs.update({name: p for name, p in positions.items() if p is not None})
    return inputs


def rope_inputs(config, rng):
    # config: lead (e.g. [B] or [B, H]), T, d (even), std (default 1); positions null | (T,)
    # draws: x ~ N(0, std^2) (lead, T, d)
    lead, T, d = cc.shape(config, "lead"), cc.positive_int(config, "T"), _even(config, "d")
    positions = _positions(config, "positions", T)
    x = rng.normal(lead + (T, d), 0.0, cc.get(config, "std", 1.0))
    return _with_positions({"x": x}, positions=positions)


def rope(inputs, config, rng=None):
    (x,) = cc.need(inputs, "x")
    out, cache = rope_forward(x, inputs.get("positions"))
    return {"out": out, "cos": cache["cos"], "sin": cache["sin"]}


def rope_attention_inputs(config, rng):
    # config: lead (e.g. [B] or [B, H]), Q, K, D (even), V, std (default 1); valid_lens null | (B,) | (B, Q);
    #   q_positions null | (Q,), k_positions null | (K,)
    # draws: q ~ N(0, std^2) (lead, Q, D); k (lead, K, D); v (lead, K, V)
    lead = cc.shape(config, "lead")
    Q, K, V = (cc.positive_int(config, n) for n in ("Q", "K", "V"))
    D = _even(config, "D")
    std = cc.get(config, "std", 1.0)
    q, k, v = rng.normal(lead + (Q, D), 0.0, std), rng.normal(lead + (K, D), 0.0, std), rng.normal(lead + (K, V), 0.0, std)
    lens = _valid_lens(config)
    q_pos, k_pos = _positions(config, "q_positions", Q), _positions(config, "k_positions", K)
    return _with_positions(_with_lens({"q": q, "k": k, "v": v}, lens), q_positions=q_pos, k_positions=k_pos)


def rope_attention(inputs, config, rng=None):
    q, k, v = cc.need(inputs, "q", "k", "v")
    out, cache = rope_attention_forward(q, k, v, inputs.get("valid_lens"), inputs.get("q_positions"),
                                        inputs.get("k_positions"))
    return {"out": out, "weights": cache["weights"]}



def grouped_query_attention_inputs(config, rng):
    # config: B, Tq, d, heads, kv_heads (dividing heads), dq_in; self (default true: x_kv = x_q);
    #   when not self: Tk, dkv_in; valid_lens null | (B,) | (B, Tq); dropout_p (default 0)
    # draws: x_q ~ N(0, 1) (B, Tq, dq_in); x_kv (B, Tk, dkv_in) unless self;
    #   W_q U(+-1/sqrt(dq_in)) (d, dq_in); W_k, W_v U(+-1/sqrt(dkv_in)) (kv_heads * d / heads, dkv_in);
    #   W_o U(+-1/sqrt(d)) (d, d); then, in the forward, the keep mask of the weights (B, H, Tq, Tk).
    #   With kv_heads = heads these are multi_head_attention's draws.
    B, Tq, d, heads, kv_heads, dq_in = (cc.positive_int(config, n) for n in ("B", "Tq", "d", "heads", "kv_heads", "dq_in"))
    if d % heads or heads % kv_heads:
        raise cc.CaseError(f"config heads = {heads} must divide d = {d}, and kv_heads = {kv_heads} divide heads")
    inputs = {"x_q": rng.normal((B, Tq, dq_in))}
    dkv_in = dq_in
    if not cc.get(config, "self", True):
        Tk, dkv_in = cc.positive_int(config, "Tk"), cc.positive_int(config, "dkv_in")
        inputs["x_kv"] = rng.normal((B, Tk, dkv_in))
    dkv = kv_heads * (d // heads)
    inputs.update({"W_q": _linear_weight(rng, d, dq_in), "W_k": _linear_weight(rng, dkv, dkv_in),
                   "W_v": _linear_weight(rng, dkv, dkv_in), "W_o": _linear_weight(rng, d, d)})
    return _with_lens(inputs, _valid_lens(config))


def gqa(inputs, params, config, rng):
    (x_q,) = cc.need(inputs, "x_q")
    return grouped_query_attention_forward(x_q, inputs.get("x_kv", x_q), params, cc.positive_int(config, "heads"),
                                           cc.positive_int(config, "kv_heads"), inputs.get("valid_lens"),
                                           cc.get(config, "dropout_p", 0.0), rng)


def grouped_query_attention(inputs, config, rng=None):
    params = dict(zip(("W_q", "W_k", "W_v", "W_o"), cc.need(inputs, "W_q", "W_k", "W_v", "W_o")))
    out, cache = gqa(inputs, params, config, rng)
    return {"out": out, "weights": cache["weights"]}


def gradcheck_grouped_query_attention_inputs(config, rng):
    # config: grouped_query_attention's but dropout_p, and gradcheck's
    # draws: grouped_query_attention_inputs' (its W_* the parameters); dout ~ N(0, 1) (B, Tq, d);
    #   then, in the check, gradcheck's draws. loss = sum(out * dout), summed in index order
    drawn = grouped_query_attention_inputs(config, rng)
    params = {n: drawn.pop(n) for n in ("W_q", "W_k", "W_v", "W_o")}
    drawn["dout"] = rng.normal(drawn["x_q"].shape[:2] + (cc.positive_int(config, "d"),))
    return drawn, params


def gradcheck_grouped_query_attention(inputs, config, rng, params):
    (dout,) = cc.need(inputs, "dout")

    def loss_fn(p):
        out, _ = gqa(inputs, p, config, None)
        return float(sum_last((out * dout).reshape(1, -1))[0]), None

    _, cache = gqa(inputs, params, config, None)
    grads = grouped_query_attention_backward(dout, cache)[2]
    return run_check(config, rng, params, loss_fn, grads, loss_fn(params)[0])

DRAWS = {"masked_softmax": masked_softmax_inputs, "dot_product_attention": dot_product_attention_inputs,
         "additive_attention": additive_attention_inputs, "multi_head_attention": multi_head_attention_inputs,
         "rope": rope_inputs, "rope_attention": rope_attention_inputs,
         "grouped_query_attention": grouped_query_attention_inputs,
         "gradcheck_grouped_query_attention": gradcheck_grouped_query_attention_inputs}
COMPUTE = {"masked_softmax": masked_softmax, "dot_product_attention": dot_product_attention,
           "additive_attention": additive_attention, "multi_head_attention": multi_head_attention,
           "rope": rope, "rope_attention": rope_attention, "grouped_query_attention": grouped_query_attention,
           "gradcheck_grouped_query_attention": gradcheck_grouped_query_attention}
