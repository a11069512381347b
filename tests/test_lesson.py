"""The lesson's facts, checked on the reference: sinusoidal codes rotate with the offset and
their similarity depends only on the gap; Nadaraya-Watson is a softmax of -u^2/2 (against
PyTorch float64), the constant kernel gives the mean, a narrow width fits the training points;
Var(q.k) = d raw and about 1 scaled by 1/sqrt(d). Catalogue cases carry no NaN."""

import math
import os

import numpy as np
import pytest
import torch

from reference.cases.cases import run_case
from reference.nn.nadaraya_watson import mean_abs_error, nadaraya_watson, regression_data
from reference.nn.positional_encoding import position_similarity, positional_encoding_forward, sinusoidal_table
from reference.core.rng import Generator
from reference.nn.score_scaling import score_scaling
from toolkit import catalogue_cases, close, tolerance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = ("sinusoidal_table", "positional_encoding", "position_similarity", "score_scaling", "nadaraya_watson")  # the lesson's

# Tolerances: each op's declared ones (its bundle, ops/attention/<op>.json), each with its reason there.


def _omega(d):
    return 10000.0 ** (-(np.arange(0, d, 2) / d))  # (d/2,), independent of the engine's expression


# --- sinusoidal positions ------------------------------------------------------------------

@pytest.mark.parametrize("d", [2, 16, 64])
@pytest.mark.parametrize("pos, k", [(0, 1), (3, 7), (40, 1), (123, 45), (500, 99)])
def test_offset_is_a_fixed_rotation_of_each_frequency_pair(d, pos, k):
    P = sinusoidal_table(600, d)
    w = _omega(d)
    c, s = np.cos(k * w), np.sin(k * w)  # R(k w_j) = [[c, s], [-s, c]], the same for every pos
    sin_p, cos_p = P[pos, 0::2], P[pos, 1::2]
    rotated_sin = c * sin_p + s * cos_p  # sin((pos + k) w) = sin(pos w) cos(k w) + cos(pos w) sin(k w)
    rotated_cos = -s * sin_p + c * cos_p  # cos((pos + k) w) = cos(pos w) cos(k w) - sin(pos w) sin(k w)
    angle = tolerance("sinusoidal_table", "angle")
    close(P[pos + k, 0::2], rotated_sin, f"sin at position {pos} + {k}, d {d}", angle)
    close(P[pos + k, 1::2], rotated_cos, f"cos at position {pos} + {k}, d {d}", angle)


@pytest.mark.parametrize("L, d", [(32, 32), (16, 64), (50, 8)])
def test_similarity_depends_only_on_the_gap(L, d):
    S = position_similarity(sinusoidal_table(L, d))
    w = _omega(d)
    gaps = np.arange(L)[:, None] - np.arange(L)[None, :]
    closed = (2.0 / d) * np.array([[math.fsum(np.cos(g * w)) for g in row] for row in gaps])
    angle = tolerance("position_similarity", "angle")
    close(S, closed, f"similarity (L {L}, d {d}) against the closed form", angle)
    for g in range(-(L - 1), L):
        band = np.diagonal(S, offset=-g)  # all pairs with i - j = g
        assert np.ptp(band) <= angle, f"gap {g}: similarities spread by {np.ptp(band)}"
    assert np.all(np.abs(np.diagonal(S) - 1.0) <= 4e-16)


def test_sinusoidal_table_matches_a_torch_float64_build():
    L, d = 1000, 64
    pos = torch.arange(L, dtype=torch.float64).reshape(-1, 1)
    angle = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), torch.arange(0, d, 2, dtype=torch.float64) / d)
    expected = torch.zeros(L, d, dtype=torch.float64)
    expected[:, 0::2] = torch.sin(angle)
    expected[:, 1::2] = torch.cos(angle)
    P = sinusoidal_table(L, d)
    close(P, expected, "the table (position, feature) against torch's", tolerance("sinusoidal_table", "torch"))


def test_the_books_float32_table_differs_visibly_at_late_positions():
    """decisions.md builds P in float64; the book's float32 build is off by ~1e-5 near position 999."""
    L, d = 1000, 64
    X = torch.arange(L, dtype=torch.float32).reshape(-1, 1) / torch.pow(10000, torch.arange(0, d, 2, dtype=torch.float32) / d)
    P32 = np.zeros((L, d))
    P32[:, 0::2], P32[:, 1::2] = torch.sin(X).double().numpy(), torch.cos(X).double().numpy()
    diff = np.abs(sinusoidal_table(L, d) - P32)
    assert diff[:10].max() < 1e-6 < 1e-5 < diff[900:].max()


def test_forward_adds_the_table_and_refuses_odd_d():
    x = Generator(5).normal((2, 6, 8))
    out, cache = positional_encoding_forward(x)
    assert cache["mask"] is None
    np.testing.assert_array_equal(out, x + sinusoidal_table(6, 8)[None])
    with pytest.raises(ValueError, match="even, positive model dim d .* got d = 7"):
        sinusoidal_table(10, 7)


# --- Nadaraya-Watson -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def data():
    return regression_data(Generator(430))  # the catalogue's seed


def test_constant_kernel_predicts_the_mean(data):
    y_hat, _ = nadaraya_watson(data["x_train"], data["y_train"], data["x_val"], "constant")
    close(y_hat, np.full(50, np.mean(data["y_train"])), "constant kernel against the mean", tolerance("nadaraya_watson", "mean"))


@pytest.mark.parametrize("sigma", [0.1, 0.5, 1.0])
def test_gaussian_pooling_is_a_softmax_of_minus_half_u_squared(data, sigma):
    x_t = torch.tensor(data["x_train"], dtype=torch.float64)
    y_t = torch.tensor(data["y_train"], dtype=torch.float64)
    x_v = torch.tensor(data["x_val"], dtype=torch.float64)
    u = (x_t[:, None] - x_v[None, :]) / sigma  # (N, Q)
    W_torch = torch.softmax(-(u ** 2) / 2, dim=0)  # over the training keys
    y_torch = y_t @ W_torch
    y_hat, W = nadaraya_watson(data["x_train"], data["y_train"], data["x_val"], "gaussian", sigma)
    close(W, W_torch, f"weights (train, query), sigma {sigma}", tolerance("nadaraya_watson", "direct"))
    close(y_hat, y_torch, f"estimates (query), sigma {sigma}", tolerance("nadaraya_watson", "direct"))


def test_narrow_gaussian_fits_training_points_more_tightly(data):
    x, y = data["x_train"], data["y_train"]
    narrow = mean_abs_error(nadaraya_watson(x, y, x, "gaussian", 0.1)[0], y)
    wide = mean_abs_error(nadaraya_watson(x, y, x, "gaussian", 1.0)[0], y)
    assert narrow < wide, f"training error: sigma 0.1 gives {narrow}, sigma 1 gives {wide}"


def test_on_these_data_a_middle_width_generalises_best(data):
    """The lab's point, on the catalogue's data: 0.1 chases the noise, 1 smooths the bumps away."""
    mae = {s: mean_abs_error(nadaraya_watson(data["x_train"], data["y_train"], data["x_val"], "gaussian", s)[0],
                             data["y_true"]) for s in (0.1, 0.5, 1.0)}
    assert mae[0.5] < mae[0.1] and mae[0.5] < mae[1.0], mae


def test_boxcar_is_strict_and_an_uncovered_query_is_nan():
    x, y = np.array([0.0, 2.0]), np.array([1.0, 3.0])
    y_hat, W = nadaraya_watson(x, y, np.array([1.0, 5.0]), "boxcar", 1.0)  # both keys at distance exactly 1
    assert np.isnan(y_hat).all() and np.isnan(W).all()
    y_hat, _ = nadaraya_watson(x, y, np.array([1.0]), "boxcar", 1.0 + 1e-12)
    assert y_hat[0] == 2.0


# --- act 3: scaling q.k by 1/sqrt(d) -------------------------------------------------------

def _bound(d, n, z):
    """z standard errors of var/d: Var(q.k) = d, E (q.k)^4 = 3d^2 + 6d for unit normals, so the
    sample variance / d has standard error sqrt((2 + 6/d) / n); by Chebyshev, |error| > z se has
    probability <= 1/z^2 whatever the distribution."""
    return z * math.sqrt((2.0 + 6.0 / d) / n)


@pytest.mark.parametrize("n, dims", [(1000, [1, 2, 4, 8, 16, 32, 64, 128, 256]), (20000, [1, 8, 64])])
def test_raw_variance_grows_like_d_and_the_scaled_one_stays_near_1(n, dims):
    st = score_scaling(dims, n, Generator(440))
    expected = (n - 1) / n  # the biased variance's expectation, per unit of d
    for s, d in enumerate(dims):
        assert abs(st["var_raw"][s] / d - expected) <= _bound(d, n, 6), f"d = {d}: var_raw / d = {st['var_raw'][s] / d}"
        assert abs(st["var_scaled"][s] - expected) <= _bound(d, n, 6), f"d = {d}: var_scaled = {st['var_scaled'][s]}"
    assert st["var_raw"][-1] > 30 * st["var_raw"][0]


# --- the catalogue -------------------------------------------------------------------------

def test_catalogue_cases_have_no_nan_and_stay_small():
    cases = [c for op in OPS for c in catalogue_cases(op=op)]  # their bundles, ops/attention/<op>.json
    assert len(cases) >= 12
    for case in cases:
        assert 400 <= case["seed"] <= 499, case["id"]
        doc = run_case(case)
        size = 0
        for name, t in doc["outputs"].items():
            values = np.array([float(v) for v in t["data"]])
            assert not np.isnan(values).any(), f"{case['id']}: NaN in output {name}"
            size += values.size
        assert size <= 5000, f"{case['id']}: {size} output values; keep goldens small"
