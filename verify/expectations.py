"""What a case must satisfy beyond the two engines' agreement (docs/runner.md, "Expectations"):

- gradcheck cases: in each engine, every finite-difference relative error (outputs named
  `*.rel_err`) is at most GRADCHECK_REL_ERR, and every parameter gradient `grad.<name>` has its
  coordinate checks `check.<name>.rel_err` (every parameter tensor covered);
- training cases: the free run compared step by step (the first step whose loss or gradient norm
  differs beyond the tolerance, and how the difference grows); tensors listed in
  `expect.may_drift` report their drift instead of failing;
- any case: `expect.at_least` / `expect.at_most` bounds on output tensors in each engine, and
  `expect.equal_digests` digests identical across engines.

Each check is a dict {engine, name, rule, passed, detail}; the report lists them per case.
"""

import numpy as np

from .compare import close

# The tolerance table. Each bound is a reviewed decision; loosening one is a change of its own.
GRADCHECK_REL_ERR = 1e-6  # |analytic - numeric| / max(|analytic|, |numeric|, floor), docs/gradcheck.md
STEP_TENSORS = ("loss", "grad_norm")  # a training golden's per-step records, compared step by step
GROWTH_POINTS = 8  # how many steps the growth of a free run's difference is sampled at


def _check(engine, name, rule, passed, detail, value=None):
    return {"engine": engine, "name": name, "rule": rule, "passed": bool(passed), "detail": detail, "value": value}


def _worst(values, largest=True):
    flat = values.ravel()
    if flat.size == 0:
        return None, None
    i = int(np.nanargmax(flat) if largest else np.nanargmin(flat)) if not np.isnan(flat).all() else 0
    return float(flat[i]), tuple(int(k) for k in np.unravel_index(i, values.shape))


def gradcheck_checks(engine, outputs):
    """Every rel_err at most GRADCHECK_REL_ERR, and every gradient covered by coordinate checks."""
    checks = []
    rel = sorted(n for n in outputs if n.endswith(".rel_err"))
    if not rel:
        checks.append(_check(engine, "rel_err", "gradcheck records", False, "no *.rel_err outputs: the case checks nothing"))
    for name in rel:
        values = outputs[name].values
        worst, where = _worst(values)
        ok = values.size > 0 and not np.isnan(values).any() and worst <= GRADCHECK_REL_ERR
        checks.append(_check(engine, name, f"<= {GRADCHECK_REL_ERR:g}", ok,
                             f"max {worst:.3g} at {where}" if worst is not None else "empty", worst))
    grads = sorted(n[len("grad."):] for n in outputs if n.startswith("grad."))
    uncovered = [g for g in grads if f"check.{g}.rel_err" not in outputs]
    checks.append(_check(engine, "coverage", "every grad.<name> has check.<name>.rel_err", not uncovered and grads,
                         f"{len(grads) - len(uncovered)} of {len(grads)} parameter tensors checked"
                         + (f"; unchecked: {', '.join(uncovered)}" if uncovered else "")))
    return checks


def bound_checks(engine, outputs, expect):
    checks = []
    for key, op, largest in (("at_least", ">=", False), ("at_most", "<=", True)):
        for name, bound in sorted(expect.get(key, {}).items()):
            tensor = outputs.get(name)
            if tensor is None:
                checks.append(_check(engine, name, f"{op} {bound:g}", False, "no such output"))
                continue
            values = tensor.values
            worst, where = _worst(values, largest)
            ok = values.size > 0 and not np.isnan(values).any() and (worst >= bound if op == ">=" else worst <= bound)
            checks.append(_check(engine, name, f"{op} {bound:g}", ok,
                                 f"{'min' if op == '>=' else 'max'} {worst:.6g} at {where}", worst))
    return checks


def digest_checks(docs, expect):
    checks = []
    for name in expect.get("equal_digests", []):
        found = {engine: (doc.get("digests") or {}).get(name) for engine, doc in docs.items()}
        missing = [e for e, d in found.items() if d is None]
        if missing:
            checks.append(_check("both", f"digest {name}", "identical across engines", False,
                                 f"not written by {', '.join(missing)}"))
            continue
        same = len(set(found.values())) == 1
        checks.append(_check("both", f"digest {name}", "identical across engines", same,
                             "identical" if same else "; ".join(f"{e} {d[:12]}…" for e, d in found.items())))
    return checks


def free_run(name, expected, actual, tol):
    """A per-step record compared step by step: the first step (1-based) beyond the tolerance and
    the greatest |difference| up to a few sampled steps, so a person sees how it grows."""
    e, a = expected.values.ravel(), actual.values.ravel()
    steps = e.size
    if a.size != steps or steps == 0:
        return None
    ok = close(a, e, tol)
    beyond = np.flatnonzero(~ok)
    diff = np.abs(a - e)
    running = np.maximum.accumulate(np.where(np.isnan(diff), np.inf, diff))
    marks = sorted({max(1, round(steps * k / GROWTH_POINTS)) for k in range(1, GROWTH_POINTS + 1)})
    return {
        "tensor": name,
        "steps": int(steps),
        "first_step_beyond": int(beyond[0]) + 1 if beyond.size else None,
        "steps_beyond": int(beyond.size),
        "max_abs": float(running[-1]),
        "growth": [[m, float(running[m - 1])] for m in marks],
    }


def case_checks(kind, expect, fresh, tol):
    """All checks of one case. fresh: {engine: Fresh} (documents already validated); returns
    (checks, free_runs, drifting names)."""
    usable = {name: f for name, f in fresh.items() if f.doc is not None}
    checks, runs = [], []
    for engine, f in usable.items():
        outputs = f.tensors["outputs"]
        if kind == "gradcheck":
            checks += gradcheck_checks(engine, outputs)
        checks += bound_checks(engine, outputs, expect)
    if len(usable) == len(fresh):
        checks += digest_checks({e: f.doc for e, f in usable.items()}, expect)
        if kind == "training":
            ref, port = usable["reference"].tensors["outputs"], usable["port"].tensors["outputs"]
            for name in STEP_TENSORS:
                if name in ref and name in port:
                    summary = free_run(name, ref[name], port[name], tol)
                    if summary:
                        runs.append(summary)
    return checks, runs
