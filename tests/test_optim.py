"""The optimiser (reference/runs/optim.py, port_ts/src/runs/optim.ts) and the state digest (train.py):
Adam against torch.optim.Adam, the book's clipping against a hand-written one and against
torch.nn.utils.clip_grad_norm_ where d2l-book-facts §12/§13 says they differ, the port bit for
bit on the same seed-drawn arrays, and the digest's stability and sensitivity."""

import hashlib
import json
import math
import struct

import numpy as np
import pytest
import torch

from reference.core.golden import dumps
from reference.runs.optim import BETA1, BETA2, EPS, adam_init, adam_step, clip_gradients, global_norm
from reference.core.rng import Generator
from reference.runs.train import copy_state, state_digest, state_document, state_from_document
from toolkit import run_port

SHAPES = {"W": (3, 4), "b": (5,), "T": (2, 2, 3)}
NAMES = ["W", "b", "T"]


def _draw(seed):
    g = Generator(seed)
    return {name: g.normal(SHAPES[name]) for name in NAMES}, g


def book_clip(grads, names, theta):
    """d2l's clip_gradients written out element by element: n = sqrt(sum g^2); if n > theta,
    g *= theta / n. Returns n and the new gradients."""
    acc = 0.0
    for name in names:
        for x in grads[name].ravel().tolist():
            acc += x * x
    n = math.sqrt(acc)
    if n > theta:
        return n, {name: grads[name] * (theta / n) for name in names}
    return n, {name: grads[name].copy() for name in names}


def torch_clip(grads, names, theta):
    ts = [torch.nn.Parameter(torch.zeros(grads[name].shape, dtype=torch.float64)) for name in names]
    for p, name in zip(ts, names):
        p.grad = torch.tensor(grads[name], dtype=torch.float64)
    n = torch.nn.utils.clip_grad_norm_(ts, theta)
    return float(n), {name: p.grad.numpy().copy() for p, name in zip(ts, names)}


def ours(grads, names, theta):
    g = {name: grads[name].copy() for name in names}
    n = clip_gradients(g, names, theta)
    return n, g


def scaled_to_norm(seed, target):
    """Gradients whose in-order norm is as close to `target` as rounding allows."""
    grads, _ = _draw(seed)
    n = global_norm(grads, NAMES)
    return {name: grads[name] * (target / n) for name in NAMES}


# --- Adam ---------------------------------------------------------------------------------

@pytest.mark.parametrize("lr", [0.01, 1e-3])
def test_adam_equals_torch_adam_over_20_steps(lr):
    params, g = _draw(301)
    mine = {name: params[name].copy() for name in NAMES}
    state = adam_init(mine, NAMES)
    ts = [torch.nn.Parameter(torch.tensor(params[name], dtype=torch.float64)) for name in NAMES]
    opt = torch.optim.Adam(ts, lr=lr)  # defaults: betas (0.9, 0.999), eps 1e-8, no weight decay
    assert opt.defaults["betas"] == (BETA1, BETA2) and opt.defaults["eps"] == EPS
    worst = 0.0
    for step in range(1, 21):
        grads = {name: g.normal(SHAPES[name]) * (0.1 * step) for name in NAMES}  # growing scale
        adam_step(mine, grads, NAMES, state, lr)
        for p, name in zip(ts, NAMES):
            p.grad = torch.tensor(grads[name], dtype=torch.float64)
        opt.step()
        for p, name in zip(ts, NAMES):
            worst = max(worst, float(np.max(np.abs(mine[name] - p.detach().numpy()))))
            torch_state = opt.state[p]
            np.testing.assert_allclose(state["m"][name], torch_state["exp_avg"].numpy(), rtol=0, atol=1e-15)
            np.testing.assert_allclose(state["v"][name], torch_state["exp_avg_sq"].numpy(), rtol=0, atol=1e-15)
        assert state["t"] == step == int(opt.state[ts[0]]["step"])
    assert worst <= 1e-12, f"params differ from torch.optim.Adam by {worst:.3g} after 20 steps"
    # and the run moved the parameters: a no-op Adam would not pass the comparison above anyway
    assert max(float(np.max(np.abs(mine[n] - params[n]))) for n in NAMES) > 5 * lr


def test_adam_keeps_running_products_not_pow():
    params, _ = _draw(302)
    state = adam_init(params, NAMES)
    grads = {name: np.ones(SHAPES[name]) for name in NAMES}
    b1t, b2t = 1.0, 1.0
    for _ in range(30):
        adam_step(params, grads, NAMES, state, 0.01)
        b1t, b2t = b1t * 0.9, b2t * 0.999
    assert (state["b1t"], state["b2t"]) == (b1t, b2t)


def test_adam_first_step_is_lr_times_sign():
    """Step 1: the corrected m is g and the corrected sqrt(v) is |g|, so each parameter moves by
    -lr g / (|g| + eps): lr, except where |g| is small enough for eps to show (1e-3: 1e-5 short)."""
    params = {"x": np.array([1.0, -2.0, 0.5])}
    g = np.array([3.0, -0.25, 1e-3])
    state = adam_init(params, ["x"])
    adam_step(params, {"x": g}, ["x"], state, 0.1)
    want = np.array([1.0, -2.0, 0.5]) - 0.1 * g / (np.abs(g) + 1e-8)
    np.testing.assert_allclose(params["x"], want, rtol=0, atol=1e-15)
    assert abs(params["x"][2] - 0.4) > 0.9e-6  # eps is outside the square root, as PyTorch


def test_adam_rejects_a_gradient_of_the_wrong_shape():
    params = {"x": np.zeros((2, 3))}
    state = adam_init(params, ["x"])
    with pytest.raises(ValueError, match="shape"):
        adam_step(params, {"x": np.zeros((3, 2))}, ["x"], state, 0.1)


# --- clipping -----------------------------------------------------------------------------

@pytest.mark.parametrize("target", [0.3, 2.0, 17.5])
def test_clip_equals_the_hand_written_book_clip(target):
    grads = scaled_to_norm(303, target)
    n_ours, g_ours = ours(grads, NAMES, 1.0)
    n_book, g_book = book_clip(grads, NAMES, 1.0)
    assert n_ours == n_book
    for name in NAMES:
        assert np.array_equal(g_ours[name], g_book[name]), name
    if target > 1.0:
        assert abs(global_norm(g_ours, NAMES) - 1.0) <= 4e-16


def test_global_norm_sums_in_parameter_then_element_order():
    g = Generator(304)
    grads = {"a": g.normal((1000,)) * 1e3, "b": g.normal((7, 9)) * 1e-3}
    acc = 0.0
    for name in ("a", "b"):
        for x in grads[name].ravel().tolist():
            acc += x * x
    assert global_norm(grads, ["a", "b"]) == math.sqrt(acc)
    acc = 0.0
    for name in ("b", "a"):
        for x in grads[name].ravel().tolist():
            acc += x * x
    assert global_norm(grads, ["b", "a"]) == math.sqrt(acc)


def test_clip_just_above_theta_differs_from_torch_by_its_epsilon():
    """n = theta (1 + 1e-7): the book scales by theta / n, torch by theta / (n + 1e-6), which
    leaves torch's norm about 1e-6 below theta; ours lands on theta."""
    theta = 1.0
    grads = scaled_to_norm(305, theta * (1 + 1e-7))
    n_ours, g_ours = ours(grads, NAMES, theta)
    n_torch, g_torch = torch_clip(grads, NAMES, theta)
    assert n_ours > theta
    assert abs(n_ours - n_torch) <= 1e-15
    assert abs(global_norm(g_ours, NAMES) - theta) <= 4e-16
    after_torch = global_norm(g_torch, NAMES)
    assert theta - after_torch > 0.9e-6, f"torch's post-clip norm {after_torch!r}"
    for name in NAMES:
        rel = np.abs(g_ours[name] - g_torch[name]) / np.abs(g_ours[name])
        assert np.all(rel > 0.9e-6), name  # every element differs by about 1e-6 relative


@pytest.mark.parametrize("below", [4e-7, 0.0])
def test_clip_at_or_just_below_theta_leaves_gradients_alone_where_torch_scales(below):
    """n in (theta - 1e-6, theta]: the book does nothing (strict >); torch multiplies by
    theta / (n + 1e-6) < 1."""
    theta = 5.0
    if below == 0.0:
        grads = {"W": np.array([[3.0, 4.0]]), "b": np.zeros(3), "T": np.zeros((1, 1, 1))}  # n = 5 exactly
    else:
        grads = scaled_to_norm(306, theta - below)
    n_ours, g_ours = ours(grads, NAMES, theta)
    assert n_ours <= theta and n_ours > theta - 1e-6
    _, g_torch = torch_clip(grads, NAMES, theta)
    for name in NAMES:
        assert np.array_equal(g_ours[name], grads[name]), name
    changed = [name for name in NAMES if np.any(grads[name] != 0) and not np.array_equal(g_torch[name], grads[name])]
    assert changed, "torch's clip_grad_norm_ should have scaled these gradients"


def test_clip_far_below_theta_agrees_with_torch():
    grads = scaled_to_norm(307, 0.25)
    n_ours, g_ours = ours(grads, NAMES, 1.0)
    n_torch, g_torch = torch_clip(grads, NAMES, 1.0)
    assert abs(n_ours - n_torch) <= 1e-15
    for name in NAMES:
        assert np.array_equal(g_ours[name], grads[name]) and np.array_equal(g_torch[name], grads[name])


# --- the port, bit for bit ----------------------------------------------------------------

PORT_SCRIPT = """
import { Generator } from './port_ts/src/core/rng.ts';
import { adamInit, adamStep, clipGradients } from './port_ts/src/runs/optim.ts';
import { stateDigest } from './port_ts/src/runs/train.ts';
const shapes = %(shapes)s, names = %(names)s;
const g = new Generator(%(seed)d);
const params = {};
for (const n of names) params[n] = g.normal(shapes[n]);
const init = stateDigest(params, names);
const state = adamInit(params, names);
const norms = [];
for (let t = 1; t <= %(steps)d; t++) {
  const scale = t %% 2 === 0 ? 0.05 : 2.0;
  const grads = {};
  for (const n of names) { const x = g.normal(shapes[n]); for (let i = 0; i < x.data.length; i++) x.data[i] = x.data[i] * scale; grads[n] = x; }
  norms.push(clipGradients(grads, names, %(theta)r));
  adamStep(params, grads, names, state, %(lr)r);
}
console.log(JSON.stringify({ init, norms, digest: stateDigest(params, names, state),
  params: Object.fromEntries(names.map((n) => [n, Array.from(params[n].data)])) }));
"""


def _reference_optim_run(seed, steps, theta, lr):
    params, g = _draw(seed)
    init = state_digest(params, NAMES)
    state = adam_init(params, NAMES)
    norms = []
    for t in range(1, steps + 1):
        scale = 0.05 if t % 2 == 0 else 2.0
        grads = {name: g.normal(SHAPES[name]) * scale for name in NAMES}
        norms.append(clip_gradients(grads, NAMES, theta))
        adam_step(params, grads, NAMES, state, lr)
    return init, norms, params, state


def test_port_optim_is_bit_identical_to_the_reference(node, repo_root):
    seed, steps, theta, lr = 308, 20, 1.0, 0.01
    init, norms, params, state = _reference_optim_run(seed, steps, theta, lr)
    assert any(n > theta for n in norms) and any(n <= theta for n in norms), "both clipping branches"
    script = PORT_SCRIPT % {"shapes": json.dumps({k: list(v) for k, v in SHAPES.items()}), "names": json.dumps(NAMES),
                            "seed": seed, "steps": steps, "theta": theta, "lr": lr}
    port = run_port(node, repo_root, script)
    assert port["init"] == init
    assert port["norms"] == norms  # JSON numbers read back exactly
    for name in NAMES:
        assert port["params"][name] == params[name].ravel().tolist(), name
    assert port["digest"] == state_digest(params, NAMES, state)


# --- the state digest and documents --------------------------------------------------------

def _state(seed):
    params, _ = _draw(seed)
    state = adam_init(params, NAMES)
    g = Generator(seed + 1)
    for _ in range(3):
        adam_step(params, {name: g.normal(SHAPES[name]) for name in NAMES}, NAMES, state, 0.01)
    return params, state


def test_state_digest_is_the_sha256_of_the_documented_bytes():
    params, state = _state(309)
    parts = [params[n].ravel().tolist() for n in NAMES] + [state["m"][n].ravel().tolist() for n in NAMES] \
        + [state["v"][n].ravel().tolist() for n in NAMES] + [[float(state["t"]), state["b1t"], state["b2t"]]]
    raw = b"".join(struct.pack("<d", x) for part in parts for x in part)
    assert state_digest(params, NAMES, state) == hashlib.sha256(raw).hexdigest()
    raw_params = b"".join(struct.pack("<d", x) for n in NAMES for x in params[n].ravel().tolist())
    assert state_digest(params, NAMES) == hashlib.sha256(raw_params).hexdigest()
    p2, s2 = copy_state(params, NAMES, state)  # stable: equal data, equal digest
    assert state_digest(p2, NAMES, s2) == state_digest(params, NAMES, state)


def _flip_last_bit(x):
    return struct.unpack("<d", struct.pack("<Q", struct.unpack("<Q", struct.pack("<d", x))[0] ^ 1))[0]


def test_state_digest_changes_with_any_last_bit_and_with_the_order():
    params, state = _state(310)
    base = state_digest(params, NAMES, state)
    seen = {base}
    for part in ("param", "m", "v"):
        for name in NAMES:
            p2, s2 = copy_state(params, NAMES, state)
            arr = p2[name] if part == "param" else s2[part][name]
            flat = arr.reshape(-1)
            flat[-1] = _flip_last_bit(float(flat[-1]))
            d = state_digest(p2, NAMES, s2)
            assert d not in seen, f"{part}.{name}: a flipped last bit left the digest unchanged"
            seen.add(d)
    for key in ("b1t", "b2t"):
        p2, s2 = copy_state(params, NAMES, state)
        s2[key] = _flip_last_bit(s2[key])
        assert state_digest(p2, NAMES, s2) not in seen
    p2, s2 = copy_state(params, NAMES, state)
    s2["t"] += 1
    assert state_digest(p2, NAMES, s2) != base
    assert state_digest(params, ["b", "W", "T"], state) != base


def test_state_document_round_trips_through_its_text_and_checks_its_digest():
    params, state = _state(311)
    doc = json.loads(dumps(state_document(params, NAMES, state)))
    p2, s2 = state_from_document(doc, NAMES)
    for name in NAMES:
        assert np.array_equal(p2[name], params[name]) and np.array_equal(s2["m"][name], state["m"][name])
        assert np.array_equal(s2["v"][name], state["v"][name])
    assert (s2["t"], s2["b1t"], s2["b2t"]) == (state["t"], state["b1t"], state["b2t"])
    doc["outputs"]["v.b"]["data"][2] = _flip_last_bit(doc["outputs"]["v.b"]["data"][2])
    with pytest.raises(ValueError, match="digest"):
        state_from_document(doc, NAMES)
    del doc["outputs"]["m.T"]
    with pytest.raises(ValueError, match="missing tensor 'm.T'"):
        state_from_document(doc, NAMES)
