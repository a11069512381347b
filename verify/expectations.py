"""What a case must satisfy beyond the two engines' agreement (docs/runner.md, "The verdict"):
gradcheck bounds and coverage, quality bars (`expect.at_least` / `at_most`), digests equal across
engines (`expect.equal_digests`; `bitwise_digests` under --bitwise only), two ways of the same maths
within the rule (`expect.agree`), and for training cases the free runs compared step by step
(reported, never failed for parting) and their outcomes within the case's band (`expect.free_run`).

Each check is a dict {engine, name, rule, passed, detail, value, required}; `required` is
"always" or "bitwise" (counted only under --bitwise).
"""

import numpy as np

from .compare import close, compare_tensor
from .ops import Undeclared, declarations

STEP_TENSORS = ("loss", "grad_norm")  # a training golden's per-step records, compared step by step
GROWTH_POINTS = 8  # how many steps the growth of a free run's difference is sampled at
# Outputs of a training case that follow from its config alone, not from the trained parameters:
# compared by the rule like a forward case's, never part of the free run.
SCHEDULE_OUTPUTS = frozenset(("checkpoint_steps",))


def check(engine, name, rule, passed, detail, value=None, required="always", source=None):
    entry = {"engine": engine, "name": name, "rule": rule, "passed": bool(passed), "detail": detail,
             "value": value, "required": required}
    if source is not None:
        entry["source"] = source
    return entry


def _bar(engine, name, values, op, bound, digits, source=None):
    """The check that every value is `op` bound ("<=" or ">="), naming the worst value and where."""
    flat, largest = values.ravel(), op == "<="
    worst, where = None, None
    if flat.size:
        i = 0 if np.isnan(flat).all() else int(np.nanargmax(flat) if largest else np.nanargmin(flat))
        worst, where = float(flat[i]), tuple(int(k) for k in np.unravel_index(i, values.shape))
    ok = flat.size > 0 and not np.isnan(flat).any() and (worst <= bound if largest else worst >= bound)
    detail = f"{'max' if largest else 'min'} {worst:.{digits}g} at {where}" if worst is not None else "empty"
    return check(engine, name, f"{op} {bound:g}", ok, detail, worst, source=source)


def free_run_names(kind, *fresh):
    """The outputs of a training case that its free run computes from the parameters it trained:
    every output but SCHEDULE_OUTPUTS. Empty for the other kinds."""
    if kind != "training":
        return frozenset()
    names = set()
    for f in fresh:
        if f.doc is not None:
            names |= set(f.tensors["outputs"])
    return frozenset(names - SCHEDULE_OUTPUTS)


def gradcheck_bound(op):
    """(the op's declared gradcheck bound, None) or (None, why there is none)."""
    try:
        return declarations().tolerance(op, "gradcheck")["value"], None
    except Undeclared as exc:
        return None, str(exc)


def gradcheck_checks(engine, outputs, op):
    """Every *.rel_err at most the op's declared bound (docs/gradcheck.md), and every grad.<name>
    covered by check.<name>.rel_err. An op that declares no bound fails its check, saying so."""
    checks = []
    bound, undeclared = gradcheck_bound(op)
    if undeclared:
        checks.append(check(engine, "rel_err", "a declared gradcheck bound", False, undeclared))
    rel = sorted(n for n in outputs if n.endswith(".rel_err"))
    if not rel:
        checks.append(check(engine, "rel_err", "gradcheck records", False, "no *.rel_err outputs: the case checks nothing"))
    checks += [_bar(engine, name, outputs[name].values, "<=", bound, 3) for name in rel if bound is not None]
    grads = sorted(n[len("grad."):] for n in outputs if n.startswith("grad."))
    uncovered = [g for g in grads if f"check.{g}.rel_err" not in outputs]
    checks.append(check(engine, "coverage", "every grad.<name> has check.<name>.rel_err", not uncovered and grads,
                        f"{len(grads) - len(uncovered)} of {len(grads)} parameter tensors checked"
                        + (f"; unchecked: {', '.join(uncovered)}" if uncovered else "")))
    return checks


def bound_checks(engine, outputs, expect, source=None):
    checks = []
    for key, op in (("at_least", ">="), ("at_most", "<=")):
        for name, bound in sorted(expect.get(key, {}).items()):
            if name in outputs:
                checks.append(_bar(engine, name, outputs[name].values, op, bound, 6, source))
            else:
                checks.append(check(engine, name, f"{op} {bound:g}", False, "no such output", source=source))
    return checks


def agree_checks(engine, outputs, expect, tol):
    """expect.agree {a: b}: output a of one engine within the rule of its output b, one check per
    pair; the two ways may round differently in a correct engine, so --bitwise does not apply."""
    checks = []
    for a, b in sorted(expect.get("agree", {}).items()):
        rule = f"within the tolerance of {b}"
        if a not in outputs or b not in outputs:
            missing = ", ".join(n for n in (a, b) if n not in outputs)
            checks.append(check(engine, f"agree {a}", rule, False, f"no such output: {missing}"))
            continue
        r = compare_tensor(a, "output", outputs[b], outputs[a], tol, sides=(b, a))
        if r.message:
            detail = r.message
        elif r.passed and (r.dtype == "int64" or r.max_ulp == 0):
            detail = f"bit-identical ({r.total} elements)"
        elif r.passed:
            detail = f"within the tolerance: max |diff| {r.max_abs:.3g}, max {r.max_ulp} ULP ({r.total} elements)"
        else:
            detail = (f"{r.mismatched} / {r.total} elements differ beyond the tolerance; greatest |diff| "
                      f"{r.max_abs:.3g} at {r.max_abs_index}")
        checks.append(check(engine, f"agree {a}", rule, r.passed, detail, r.max_ulp))
    return checks


def digest_checks(docs, expect):
    checks = []
    for key, required in (("equal_digests", "always"), ("bitwise_digests", "bitwise")):
        for name in expect.get(key, []):
            found = {engine: (doc.get("digests") or {}).get(name) for engine, doc in docs.items()}
            missing = [e for e, d in found.items() if d is None]
            rule = "identical across engines" + (" (--bitwise)" if required == "bitwise" else "")
            same = not missing and len(set(found.values())) == 1
            if missing:
                detail = f"not written by {', '.join(missing)}"
            else:
                detail = "identical" if same else "; ".join(f"{e} {d[:12]}…" for e, d in found.items())
            checks.append(check("both", f"digest {name}", rule, same, detail, required=required))
    return checks


def band_checks(ref_out, port_out, expect):
    """The free run's outcomes (scalars), one check per expect.free_run entry: {"abs": b} is
    |port - reference| <= b, {"ratio": r} is max(port / reference, reference / port) <= r."""
    checks = []
    for name, band in sorted(expect.get("free_run", {}).items()):
        e, a = ref_out.get(name), port_out.get(name)
        kind, bound = next(iter(band.items()))
        rule = f"|port - reference| <= {bound:g}" if kind == "abs" else f"port / reference within [1/{bound:g}, {bound:g}]"
        if e is None or a is None or e.values.size != 1 or a.values.size != 1:
            checks.append(check("both", f"free run {name}", rule, False, "not a scalar output of both engines"))
            continue
        ev, av = float(e.values.ravel()[0]), float(a.values.ravel()[0])
        if kind == "abs":
            value = abs(av - ev)
            shown = f"difference {value:.3g}"
        else:
            value = max(av / ev, ev / av) if ev > 0 and av > 0 else float("inf")
            shown = f"ratio {value:.3g}"
        ok = bool(np.isfinite(value) and value <= bound)
        checks.append(check("both", f"free run {name}", rule, ok, f"reference {ev:.6g}, port {av:.6g} ({shown})", value))
    return checks


def free_run(name, expected, actual, tol):
    """A per-step record compared step by step: the first step (1-based) beyond the tolerance, the
    first not bit-identical, and the greatest |difference| so far at a few sampled steps."""
    e, a = expected.values.ravel(), actual.values.ravel()
    steps = e.size
    if a.size != steps or steps == 0:
        return None
    beyond = np.flatnonzero(~close(a, e, tol))
    different = np.flatnonzero(~((a == e) | (np.isnan(a) & np.isnan(e))))
    diff = np.abs(a - e)
    running = np.maximum.accumulate(np.where(np.isnan(diff), np.inf, diff))
    marks = sorted({max(1, round(steps * k / GROWTH_POINTS)) for k in range(1, GROWTH_POINTS + 1)})
    return {
        "tensor": name,
        "steps": int(steps),
        "first_step_beyond": int(beyond[0]) + 1 if beyond.size else None,
        "first_step_different": int(different[0]) + 1 if different.size else None,
        "steps_beyond": int(beyond.size),
        "max_abs": float(running[-1]),
        "growth": [[m, float(running[m - 1])] for m in marks],
    }


def case_checks(kind, expect, fresh, tol, op=None):
    """All checks of one case that need only the engines' own documents ({role: Fresh}): (checks,
    free runs). A training run's port meets the quality bars on its evaluation (verify/replay.py)."""
    usable = {role: f for role, f in fresh.items() if f.doc is not None}
    checks, runs = [], []
    for role, f in usable.items():
        outputs = f.tensors["outputs"]
        if kind == "gradcheck":
            checks += gradcheck_checks(role, outputs, op)
        if not (kind == "training" and role == "port"):
            checks += bound_checks(role, outputs, expect)
            checks += agree_checks(role, outputs, expect, tol)
    if len(usable) == len(fresh):
        checks += digest_checks({role: f.doc for role, f in usable.items()}, expect)
        if kind == "training":
            ref, port = usable["reference"].tensors["outputs"], usable["port"].tensors["outputs"]
            checks += band_checks(ref, port, expect)
            runs = [free_run(n, ref[n], port[n], tol) for n in STEP_TENSORS if n in ref and n in port]
            runs = [r for r in runs if r]
    return checks, runs
