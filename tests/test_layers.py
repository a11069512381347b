"""The building-block layers against PyTorch float64 (a third oracle) and against Python's
math.erf; dropout's statistics and its p = 0 identity; the initialiser's bounds and moments.

Tolerances: each layer's declared ones (its bundle, ops/attention/<op>.json: torch for linear, layer norm, FFN and
GELU, erf_ulps for GELU's erf), each with its reason there.
"""

import math

import numpy as np
import pytest
import torch
from torch import nn

from reference.nn.dropout import dropout_forward
from reference.nn.embedding import embedding_forward
from reference.nn.ffn import ffn_forward
from reference.nn.gelu import erf, gelu_forward
from reference.nn.init import embedding_params, layer_norm_params, linear_params, patch_embedding_params
from reference.nn.layer_norm import layer_norm_forward
from reference.nn.linear import linear_forward
from reference.core.rng import Generator
from toolkit import close, t, tolerance

ERF_ULPS = tolerance("gelu", "erf_ulps")


# ---- PyTorch oracle ---------------------------------------------------------------------------

@pytest.mark.parametrize("x_shape, out_f, bias", [((2, 3, 5), 4, True), ((6, 7), 3, False), ((4, 1), 5, True)])
def test_linear_matches_nn_linear(x_shape, out_f, bias):
    g = Generator(300)
    x = g.normal(x_shape)
    W, b = linear_params(g, out_f, x_shape[-1], bias)
    lin = nn.Linear(x_shape[-1], out_f, bias=bias, dtype=torch.float64)
    with torch.no_grad():
        lin.weight.copy_(t(W))
        if bias:
            lin.bias.copy_(t(b))
        expected = lin(t(x)).numpy()
    close(linear_forward(x, W, b)[0], expected, f"linear {x_shape} -> {out_f}", tolerance("linear", "torch"))


def test_embedding_matches_nn_embedding_and_rejects_bad_ids():
    g = Generator(301)
    E = embedding_params(g, 11, 6)
    tokens = np.array([[3, 3, 0, 10], [10, 1, 3, 3]])
    emb = nn.Embedding(11, 6, dtype=torch.float64)
    with torch.no_grad():
        emb.weight.copy_(t(E))
        expected = emb(torch.as_tensor(tokens)).numpy()
    out, _ = embedding_forward(tokens, E)
    assert np.array_equal(out, expected)  # a lookup: exact
    for bad in (11, -1):
        with pytest.raises(IndexError, match=f"token id {bad} .* outside \\[0, 11\\)"):
            embedding_forward(np.array([0, bad]), E)


@pytest.mark.parametrize("shape, offset, spread", [((2, 4, 8), 0.0, 1.0), ((3, 16), 5.0, 0.1), ((5, 32), -2.0, 30.0)])
def test_layer_norm_matches_nn_layer_norm(shape, offset, spread):
    g = Generator(302)
    x = g.normal(shape, offset, spread)
    d = shape[-1]
    gamma, beta = g.uniform((d,), 0.5, 1.5), g.normal((d,))
    ln = nn.LayerNorm(d, eps=1e-5, dtype=torch.float64)
    with torch.no_grad():
        ln.weight.copy_(t(gamma))
        ln.bias.copy_(t(beta))
        expected = ln(t(x)).numpy()
    out, cache = layer_norm_forward(x, gamma, beta)
    close(out, expected, f"layer norm {shape}", tolerance("layer_norm", "torch"))
    xt = t(x)
    close(cache["mean"], xt.mean(-1).numpy(), "layer norm mean", tolerance("layer_norm", "torch"))
    close(cache["rstd"], (1 / torch.sqrt(xt.var(-1, correction=0) + 1e-5)).numpy(), "layer norm rstd", tolerance("layer_norm", "torch"))


def test_layer_norm_constant_rows_give_beta():
    beta = np.array([0.5, -2.0, 7.0])
    x = np.array([[4.0, 4.0, 4.0], [-1e4, -1e4, -1e4]])
    out, _ = layer_norm_forward(x, np.array([3.0, 3.0, 3.0]), beta)
    assert np.array_equal(out, np.stack([beta, beta]))
    out1, _ = layer_norm_forward(np.array([[5.0], [-6.0]]), np.array([9.0]), np.array([0.25]))
    assert np.array_equal(out1, [[0.25], [0.25]])


def test_gelu_matches_nn_gelu_exact():
    x = np.concatenate([np.linspace(-10, 10, 20001), Generator(303).normal(4096, 0.0, 3.0)])
    expected = nn.GELU()(t(x)).numpy()
    close(gelu_forward(x)[0], expected, "GELU vs nn.GELU()", tolerance("gelu", "torch"))


def test_gelu_is_not_the_tanh_approximation():
    x = np.linspace(-10, 10, 20001)
    tanh_form = nn.GELU(approximate="tanh")(t(x)).numpy()
    gap = np.abs(gelu_forward(x)[0] - tanh_form)
    assert 4.5e-4 < gap.max() < 4.9e-4, f"largest gap to the tanh form {gap.max():.3e}"
    assert abs(x[np.argmax(gap)] - -2.7) < 0.2, f"largest gap at x = {x[np.argmax(gap)]}"


@pytest.mark.parametrize("x_shape, F", [((2, 3, 4), 8), ((5, 16), 64)])
def test_ffn_matches_two_linears_and_relu(x_shape, F):
    g = Generator(304)
    d = x_shape[-1]
    x = g.normal(x_shape)
    W1, b1 = linear_params(g, F, d)
    W2, b2 = linear_params(g, d, F)
    net = nn.Sequential(nn.Linear(d, F, dtype=torch.float64), nn.ReLU(), nn.Linear(F, d, dtype=torch.float64))
    with torch.no_grad():
        for layer, W, b in ((net[0], W1, b1), (net[2], W2, b2)):
            layer.weight.copy_(t(W))
            layer.bias.copy_(t(b))
        expected = net(t(x)).numpy()
    out, cache = ffn_forward(x, {"W1": W1, "b1": b1, "W2": W2, "b2": b2})
    close(out, expected, f"FFN {x_shape} F={F}", tolerance("ffn", "torch"))
    assert (cache["h"] >= 0).all() and (cache["h"] == 0).any(), "ReLU should zero some hidden units"


# ---- erf against math.erf ---------------------------------------------------------------------

def _ulps(got, want):
    want = np.asarray(want)
    return np.abs(got - want) / np.spacing(np.maximum(np.abs(want), np.finfo(float).tiny))


def test_erf_against_math_erf_dense_grid_tails_and_tiny_values():
    grid = np.linspace(-10, 10, 400001)
    tails = np.concatenate([np.linspace(1.2, 6.5, 20001), -np.linspace(1.2, 6.5, 20001)])
    tiny = np.concatenate([np.geomspace(1e-300, 1.0, 5001), -np.geomspace(1e-300, 1.0, 5001), [2.0 ** -28, 2.0 ** -1022]])
    edges = np.array([np.nextafter(v, s) for v in (0.84375, 1.25, 1 / 0.35, 6.0) for s in (0.0, 10.0)] + [0.84375, 1.25, 1 / 0.35, 6.0])
    x = np.concatenate([grid, tails, tiny, edges])
    want = np.array([math.erf(v) for v in x])
    ulps = _ulps(erf(x), want)
    worst = int(np.argmax(ulps))
    assert ulps.max() <= ERF_ULPS, f"erf({x[worst]!r}) is {ulps.max()} ulp from math.erf (allowed {ERF_ULPS})"
    assert np.mean(ulps == 0) > 0.95, f"only {np.mean(ulps == 0):.3f} of points agree exactly"


def test_erf_known_values_symmetry_and_specials():
    known = {0.5: 0.5204998778130465, 1.0: 0.8427007929497149, 2.0: 0.9953222650189527, -3.0: -0.9999779095030014}
    for v, want in known.items():
        assert _ulps(erf(v), want) <= ERF_ULPS, f"erf({v}) = {erf(v)!r}, want {want!r}"
    x = np.linspace(0, 10, 10007)
    assert np.array_equal(erf(-x), -erf(x))
    assert math.copysign(1.0, erf(-0.0)) == -1.0 and erf(0.0) == 0.0
    assert erf(np.inf) == 1.0 and erf(-np.inf) == -1.0 and np.isnan(erf(np.nan))
    assert erf(np.array(2.0)).shape == () and erf(np.ones((2, 3))).shape == (2, 3)


# ---- dropout ----------------------------------------------------------------------------------

def test_dropout_p0_is_an_exact_copy_and_draws_nothing():
    x = np.array([-0.0, 1.5, -2.0, 0.0])
    g = Generator(305)
    out, cache = dropout_forward(x, 0.0, g)
    assert g.counter == 0 and cache["mask"] is None
    assert out is not x and np.array_equal(out, x)
    assert np.signbit(out[0]) and not np.signbit(out[3])
    assert np.array_equal(dropout_forward(x, 0, None)[0], x)  # no generator needed at p = 0


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_statistics_and_scaling(p):
    n = 100_000
    x = Generator(306).normal(n)
    g = Generator(307)
    out, cache = dropout_forward(x, p, g)
    mask = cache["mask"]
    assert g.counter == n, "one draw per element"
    assert set(np.unique(mask)) <= {0.0, 1.0}
    kept = int(mask.sum())
    sigma = math.sqrt(n * p * (1 - p))
    assert abs(kept - n * (1 - p)) <= 5 * sigma, f"kept {kept} of {n} at p = {p}"
    keep = mask == 1.0
    assert np.array_equal(out[keep], x[keep] * (1.0 / (1.0 - p)))
    assert np.all(out[~keep] == 0.0)
    close(out[keep], x[keep] / (1 - p), "kept values scaled by 1/(1-p)", 2.3e-16 * np.abs(x).max() / (1 - p))
    assert abs(out.mean() - x.mean()) < 5 * x.std() * math.sqrt(p / (1 - p) / n), "E[out] = E[x]"


def test_dropout_matches_torch_given_the_same_mask():
    x = Generator(308).normal((4, 8))
    out, cache = dropout_forward(x, 0.5, Generator(309))
    # torch's dropout multiplies by bernoulli(1 - p) / (1 - p); with our mask that is exact.
    expected = (t(x) * (t(cache["mask"]) / (1 - 0.5))).numpy()
    assert np.array_equal(out, expected)


@pytest.mark.parametrize("p", [1.0, -0.1, 1.5, float("nan"), "0.5"])
def test_dropout_rejects_p_outside_unit_interval(p):
    with pytest.raises(ValueError, match=r"p must be a number in \[0, 1\)"):
        dropout_forward(np.ones(3), p, Generator(0))


def test_dropout_needs_a_generator_when_p_positive():
    with pytest.raises(ValueError, match="needs a generator"):
        dropout_forward(np.ones(3), 0.5, None)


# ---- init -------------------------------------------------------------------------------------

@pytest.mark.parametrize("fan_out, fan_in", [(30, 49), (64, 16), (5, 1)])
def test_linear_init_bounds_and_draw_order(fan_out, fan_in):
    g = Generator(310)
    W, b = linear_params(g, fan_out, fan_in)
    k = 1 / math.sqrt(fan_in)
    assert W.shape == (fan_out, fan_in) and b.shape == (fan_out,)
    assert np.abs(W).max() <= k and np.abs(b).max() <= k
    assert g.counter == fan_out * fan_in + fan_out
    u = Generator(310).uniform(fan_out * fan_in + fan_out)
    assert np.array_equal(W.ravel(), -k + (2 * k) * u[:W.size])  # W first,
    assert np.array_equal(b, -k + (2 * k) * u[W.size:])  # then b


def test_linear_init_matches_torch_default_bound():
    # torch's default: kaiming_uniform(a = sqrt 5) on the weight, U(+-1/sqrt(fan_in)) on the bias
    lin = nn.Linear(49, 300, dtype=torch.float64)
    torch_bound = lin.weight.abs().max().item()
    ours = np.abs(linear_params(Generator(311), 300, 49)[0]).max()
    assert ours <= 1 / 7 and torch_bound <= 1 / 7 + 1e-16
    assert ours > 0.99 / 7 and torch_bound > 0.99 / 7, "both fill the interval"


def test_linear_init_without_bias_draws_only_W():
    g = Generator(312)
    W, b = linear_params(g, 3, 4, bias=False)
    assert b is None and g.counter == 12


def test_embedding_init_is_standard_normal():
    E = embedding_params(Generator(313), 1000, 200)
    n = E.size
    mean = E.ravel().sum() / n
    std = math.sqrt(((E.ravel() - mean) ** 2).sum() / n)
    assert E.shape == (1000, 200)
    assert abs(mean) < 5 / math.sqrt(n) and abs(std - 1) < 5 / math.sqrt(2 * n), f"mean {mean}, std {std}"


def test_layer_norm_and_patch_init():
    gamma, beta = layer_norm_params(5)
    assert np.array_equal(gamma, np.ones(5)) and np.array_equal(beta, np.zeros(5))
    g = Generator(314)
    W, b = patch_embedding_params(g, 8, 3, 4)
    assert W.shape == (8, 48) and b.shape == (8,)
    assert np.abs(W).max() <= 1 / math.sqrt(48) and g.counter == 8 * 48 + 8
