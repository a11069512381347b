"""What a case must satisfy beyond the two engines' agreement (docs/runner.md, "The verdict"):

- gradcheck cases: in each engine, every finite-difference relative error (outputs named
  `*.rel_err`) is at most the op's declared bound (tolerance `gradcheck`, ops/<suite>.json), and every parameter gradient `grad.<name>` has its
  coordinate checks `check.<name>.rel_err` (every parameter tensor covered);
- quality bars `expect.at_least` / `expect.at_most` on output tensors: in each engine, except that
  a training run's port is held to them on its evaluation of the reference's final parameters
  (verify/replay.py), its own free run being judged by the band below;
- digests: `expect.equal_digests` identical across engines always (data both engines must draw
  bit for bit: initial parameters, data sets); `expect.bitwise_digests` only under --bitwise
  (digests of computed values, which a faithful port with other last bits cannot match);
- two ways of the same maths, `expect.agree` {a: b}: in each engine, output a within the rule of
  output b at the case's tolerance (integers equal): tiled attention and its plain form, a KV
  cache and full recomputation. Reported bit-identical or within the tolerance with its ULP
  figure; the two ways may round differently in a correct engine (tiled and plain do, by a few
  ULP), so only the rule counts, with or without --bitwise;
- training cases: the free runs compared step by step (`loss`, `grad_norm`: where they part, how
  the difference grows; reported, never failed for parting), and the free run's outcomes
  `expect.free_run` {output: {"abs": b} or {"ratio": r}}, the answer to "does the port also
  train?", as an absolute difference or a ratio. Each band is derived from the spread of the
  outcome across seeds and across faithful variants of the port (docs/runner.md, "Free runs";
  scripts/free_run_spread.py measures it).

Each check is a dict {engine, name, rule, passed, detail, value, required}; `required` is
"always" or "bitwise" (counted only under --bitwise). The report lists them per case.
"""

import numpy as np

from .compare import close, compare_tensor
from .ops import Undeclared, declarations

# A gradcheck case's bound on every relative error, |analytic - numeric| / max(|analytic|, |numeric|,
# floor) (docs/gradcheck.md), is its op's declared tolerance `gradcheck` (ops/<suite>.json): each
# bound is a reviewed decision there; loosening one is a change of its own.
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


def _worst(values, largest=True):
    flat = values.ravel()
    if flat.size == 0:
        return None, None
    i = int(np.nanargmax(flat) if largest else np.nanargmin(flat)) if not np.isnan(flat).all() else 0
    return float(flat[i]), tuple(int(k) for k in np.unravel_index(i, values.shape))


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
    """Every rel_err at most the op's declared bound, and every gradient covered by coordinate checks.
    An op that declares no bound fails its check, saying so."""
    checks = []
    bound, undeclared = gradcheck_bound(op)
    if undeclared:
        checks.append(check(engine, "rel_err", "a declared gradcheck bound", False, undeclared))
    rel = sorted(n for n in outputs if n.endswith(".rel_err"))
    if not rel:
        checks.append(check(engine, "rel_err", "gradcheck records", False, "no *.rel_err outputs: the case checks nothing"))
    for name in rel if bound is not None else ():
        values = outputs[name].values
        worst, where = _worst(values)
        ok = values.size > 0 and not np.isnan(values).any() and worst <= bound
        checks.append(check(engine, name, f"<= {bound:g}", ok,
                            f"max {worst:.3g} at {where}" if worst is not None else "empty", worst))
    grads = sorted(n[len("grad."):] for n in outputs if n.startswith("grad."))
    uncovered = [g for g in grads if f"check.{g}.rel_err" not in outputs]
    checks.append(check(engine, "coverage", "every grad.<name> has check.<name>.rel_err", not uncovered and grads,
                        f"{len(grads) - len(uncovered)} of {len(grads)} parameter tensors checked"
                        + (f"; unchecked: {', '.join(uncovered)}" if uncovered else "")))
    return checks


def bound_checks(engine, outputs, expect, source=None):
    checks = []
    for key, op, largest in (("at_least", ">=", False), ("at_most", "<=", True)):
        for name, bound in sorted(expect.get(key, {}).items()):
            tensor = outputs.get(name)
            if tensor is None:
                checks.append(check(engine, name, f"{op} {bound:g}", False, "no such output", source=source))
                continue
            values = tensor.values
            worst, where = _worst(values, largest)
            ok = values.size > 0 and not np.isnan(values).any() and (worst >= bound if op == ">=" else worst <= bound)
            checks.append(check(engine, name, f"{op} {bound:g}", ok,
                                f"{'min' if op == '>=' else 'max'} {worst:.6g} at {where}", worst, source=source))
    return checks


def agree_checks(engine, outputs, expect, tol):
    """expect.agree {a: b}: output a of one engine within the rule of its output b (b the expected
    side), one check per pair: bit-identical, within the tolerance (max |diff|, max ULP) or not."""
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
            if missing:
                checks.append(check("both", f"digest {name}", rule, False, f"not written by {', '.join(missing)}",
                                    required=required))
                continue
            same = len(set(found.values())) == 1
            checks.append(check("both", f"digest {name}", rule, same,
                                "identical" if same else "; ".join(f"{e} {d[:12]}…" for e, d in found.items()),
                                required=required))
    return checks


def band_checks(ref_out, port_out, expect):
    """The free run's outcomes (scalars), one check per expect.free_run entry: {"abs": b} is
    |port - reference| <= b, {"ratio": r} is max(port / reference, reference / port) <= r (for
    positive outcomes that vary on a log scale, such as a small final loss)."""
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
    first not bit-identical, and the greatest |difference| up to a few sampled steps, so a person
    sees how it grows."""
    e, a = expected.values.ravel(), actual.values.ravel()
    steps = e.size
    if a.size != steps or steps == 0:
        return None
    ok = close(a, e, tol)
    beyond = np.flatnonzero(~ok)
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
    """All checks of one case that need only the engines' own documents; fresh: {role: Fresh}
    (documents already validated). Returns (checks, free runs). A training run's port is held to
    the quality bars on its evaluation (verify/replay.py), not here."""
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
            for name in STEP_TENSORS:
                if name in ref and name in port:
                    summary = free_run(name, ref[name], port[name], tol)
                    if summary:
                        runs.append(summary)
    return checks, runs
