"""Finite-difference gradient checks, run inside one engine in float64 (twin: gradcheck.ts).

A model is a loss function f(params) -> (loss, kinks) and its analytic gradients (a dict keyed
like params, in the model's parameter order). kinks is None, or a 1-D array that changes when a
perturbation crosses a point where f is not differentiable (the Transformer's ReLUs: the sign
pattern of every FFN pre-activation). docs/gradcheck.md explains the choices and the figures.

Numeric derivative of phi(t) = f(params + t * v) at t = 0, fourth-order central stencil:
    numeric = (8 * (phi(h) - phi(-h)) - (phi(2h) - phi(-2h))) / (12 * h)    error O(h^4)
(order 2, (phi(h) - phi(-h)) / (2 * h), error O(h^2), is there for the step sweep.)
Relative error of an analytic value a against its numeric value n:
    rel_err = |a - n| / max(|a|, |n|, FLOOR)
FLOOR turns the test into an absolute one, |a - n| <= 1e-6 * FLOOR, where the gradient itself is
about as small as finite-difference noise.

What is checked, drawing from the generator in this order:
  1. coordinates, tensor by tensor in parameter order: every element of a tensor with at most
     full_max elements; otherwise `samples` distinct flat indices, the first `samples` entries of
     rng.permutation(size), checked in ascending order. phi perturbs that one element: x + t.
  2. `directions` random directions over all parameters jointly: v = rng.normal(P) (one draw of
     all P parameter values, in parameter order, row-major), scaled to unit norm,
     v / sqrt(sum of v * v) (in-order sum); analytic = sum of g * v over all P values, in order.
Kinks: when the kink pattern at any stencil point differs from the pattern at params, the check
is repeated with the step halved (up to KINK_HALVINGS times); such a repeat is counted in
"kink_retries". A check that still crosses a kink keeps its last value and fails honestly.
"""

import math

import numpy as np

from ..core.case_config import positive_int
from ..core.ops import sum_last
from ..core.trace import untraced

STEP = 1e-3  # fourth-order stencil: truncation ~h^4, rounding ~eps/h; see docs/gradcheck.md
ORDER = 4
FLOOR = 1e-3  # |a - n| below 1e-9 passes whatever a is
KINK_HALVINGS = 20


def relative_error(analytic, numeric, floor=FLOOR):
    """|a - n| / max(|a|, |n|, floor), elementwise (arrays or floats)."""
    a, n = np.asarray(analytic, dtype=np.float64), np.asarray(numeric, dtype=np.float64)
    return np.abs(a - n) / np.maximum(np.maximum(np.abs(a), np.abs(n)), floor)


def central_difference(phi, h, order=ORDER):
    """The numeric derivative of phi (a float function of t) at 0, and whether a kink was crossed.
    phi(t) returns (value, crossed)."""
    if order == 2:
        (fp, cp), (fm, cm) = phi(h), phi(-h)
        return (fp - fm) / (2.0 * h), cp or cm
    if order == 4:
        (fp, cp), (fm, cm), (fp2, cp2), (fm2, cm2) = phi(h), phi(-h), phi(2.0 * h), phi(-2.0 * h)
        return (8.0 * (fp - fm) - (fp2 - fm2)) / (12.0 * h), cp or cm or cp2 or cm2
    raise ValueError(f"central_difference: order must be 2 or 4, got {order!r}")


def check_indices(rng, size, full_max, samples):
    """Flat indices to check in a tensor of `size` elements: all of them when size <= full_max,
    else the first `samples` of rng.permutation(size), ascending."""
    if size <= full_max:
        return np.arange(size, dtype=np.int64)
    return np.sort(rng.permutation(size)[:min(samples, size)]).astype(np.int64)


def random_directions(rng, params, count):
    """`count` unit directions over all parameters jointly, each a dict shaped like params."""
    sizes = [params[n].size for n in params]
    total = int(sum(sizes))
    out = []
    for _ in range(count):
        v = rng.normal((total,))  # (P,) in parameter order, row-major
        v = v / math.sqrt(float(sum_last(v * v)))  # unit norm, in-order sum
        direction, start = {}, 0
        for name, size in zip(params, sizes):
            direction[name] = v[start:start + size].reshape(params[name].shape)
            start += size
        out.append(direction)
    return out


def directional_derivative(grads, direction):
    """sum of g * v over every parameter value, in parameter order, row-major, from +0."""
    flat = np.concatenate([(grads[n] * direction[n]).reshape(-1) for n in direction])
    return float(sum_last(flat))


def _numeric(loss_fn, perturbed, base_kinks, step, order):
    """Numeric derivative along `perturbed(t) -> params`, halving the step while a kink is crossed."""
    def phi(t):
        value, kinks = loss_fn(perturbed(t))
        crossed = base_kinks is not None and not np.array_equal(kinks, base_kinks)
        return value, crossed

    retries = 0
    h = step
    numeric, crossed = central_difference(phi, h, order)
    while crossed and retries < KINK_HALVINGS:
        retries += 1
        h = h / 2.0
        numeric, crossed = central_difference(phi, h, order)
    return numeric, retries


def gradcheck(loss_fn, params, grads, rng, full_max=32, samples=8, directions=3, step=STEP, order=ORDER):
    """Check grads against central differences of loss_fn. Returns
    {"checks": {name: {"index", "analytic", "numeric", "rel_err"}} in parameter order,
     "direction": {"analytic", "numeric", "rel_err"} (directions,), "kink_retries": int}."""
    missing = [n for n in params if n not in grads]
    if missing:
        raise KeyError(f"gradcheck: no analytic gradient for {missing}; grads has {list(grads)}")
    _, base_kinks = loss_fn(params)
    indices = {name: check_indices(rng, params[name].size, full_max, samples) for name in params}
    dirs = random_directions(rng, params, directions)
    retries = 0
    checks = {}
    for name in params:
        analytic = grads[name].reshape(-1)[indices[name]]
        numeric = np.zeros(len(indices[name]))
        for c, i in enumerate(indices[name]):
            def perturbed(t, name=name, i=i):
                moved = params[name].copy()
                moved.flat[i] = moved.flat[i] + t  # x + t
                return {**params, name: moved}
            numeric[c], r = _numeric(loss_fn, perturbed, base_kinks, step, order)
            retries += r
        checks[name] = {"index": indices[name], "analytic": analytic, "numeric": numeric,
                        "rel_err": relative_error(analytic, numeric)}
    d_analytic, d_numeric = np.zeros(directions), np.zeros(directions)
    for r_, v in enumerate(dirs):
        d_analytic[r_] = directional_derivative(grads, v)
        d_numeric[r_], r = _numeric(loss_fn, lambda t, v=v: {n: params[n] + t * v[n] for n in params},
                                    base_kinks, step, order)
        retries += r
    return {"checks": checks, "direction": {"analytic": d_analytic, "numeric": d_numeric,
                                            "rel_err": relative_error(d_analytic, d_numeric)},
            "kink_retries": retries}


def run_check(config, rng, params, loss_fn, grads, loss):
    """gradcheck's draws and checks of loss_fn at params (grads its analytic gradients, loss its
    value there), with the case config's full_max, samples and directions, as the outputs every
    gradient-check case writes."""
    # the loss's many evaluations are not traced: a traced case traces its one forward and backward
    result = untraced(gradcheck, loss_fn, params, grads, rng, positive_int(config, "full_max", 32),
                      positive_int(config, "samples", 8), positive_int(config, "directions", 3))
    outputs = {"loss": np.array(loss), **{f"grad.{name}": grads[name] for name in params}}
    for name, c in result["checks"].items():
        for field in ("index", "analytic", "numeric", "rel_err"):
            outputs[f"check.{name}.{field}"] = c[field]
    for field in ("analytic", "numeric", "rel_err"):
        outputs[f"direction.{field}"] = result["direction"][field]
    outputs["kink_retries"] = np.array(result["kink_retries"], dtype=np.int64)
    return outputs


def step_sweep(loss_fn, params, grads, rng, steps, order=ORDER):
    """For one random unit direction (drawn from rng): the numeric directional derivative at each
    step h in steps (no kink handling) and its relative error. Returns (analytic, numeric (S,),
    rel_err (S,)): the figures of docs/gradcheck.md and the Taylor-rate test."""
    (v,) = random_directions(rng, params, 1)
    analytic = directional_derivative(grads, v)
    numeric = np.zeros(len(steps))
    for s, h in enumerate(steps):
        numeric[s], _ = central_difference(lambda t: (loss_fn({n: params[n] + t * v[n] for n in params})[0], False),
                                           h, order)
    return analytic, numeric, relative_error(analytic, numeric)
