"""Rendering a report: the terminal text (shaped like torch.testing.assert_close's messages) and the
JSON file. The renderer reads the same dict the JSON holds, so `verify show` can re-render a saved
report."""

import json
import math
import os

NON_FINITE_TEXT = {"NaN", "Infinity", "-Infinity"}


class Style:
    """ANSI colour when writing to a terminal (and NO_COLOR is unset); plain text otherwise."""

    def __init__(self, stream):
        self.on = hasattr(stream, "isatty") and stream.isatty() and "NO_COLOR" not in os.environ

    def _wrap(self, code, text):
        return f"\033[{code}m{text}\033[0m" if self.on else text

    def good(self, text):
        return self._wrap("32", text)

    def bad(self, text):
        return self._wrap("31;1", text)

    def dim(self, text):
        return self._wrap("2", text)


def _num(x, fmt=".2e"):
    if x is None:
        return "-"
    if isinstance(x, str):  # a non-finite value as the JSON report writes it
        return x
    if isinstance(x, int):
        return str(x)
    if math.isnan(x) or math.isinf(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")  # as in the JSON
    if fmt == "r":
        return repr(x)
    return "0" if x == 0 else format(x, fmt)


def _index(index):
    if index is None:
        return "-"
    return "(" + ", ".join(str(i) for i in index) + ("," if len(index) == 1 else "") + ")"


def _worst(values):
    finite = [v for v in values if v is not None]
    if any(isinstance(v, str) or (isinstance(v, float) and not math.isfinite(v)) for v in finite):
        return math.inf
    return max(finite) if finite else None


def case_line(case, style):
    verdict = style.good("PASS") if case["passed"] else style.bad("FAIL")
    tensors = case["tensors"]
    worst_abs = _worst([t["max_abs"] for t in tensors])
    worst_ulp = _worst([t["max_ulp"] for t in tensors])
    golden = ", ".join(f"{name} {d['label']}" for name, d in case["golden_details"].items())
    if isinstance(worst_ulp, int) and worst_ulp > 99999:
        worst_ulp = float(worst_ulp)  # shown as 4.6e+18, not 19 digits
    return (
        f"{verdict} {case['kind']:<8} {case['id']:<44} max|diff| {_num(worst_abs):>8}  "
        f"max ULP {_num(worst_ulp, '.1e'):>4}  goldens: {golden}"
    )


def tensor_block(t, tol):
    """The assert_close-style explanation of one failing tensor."""
    expected, actual = t["sides"]
    shape = _index(t["shape"]) if t["shape"] is not None else "?"
    head = f"  {t['role']} '{t['name']}' ({t['dtype']}, shape {shape}): {actual} differs from {expected}"
    if t["message"] and t["max_abs"] is None and t["mismatched"] == t["total"] and not t["samples"]:
        return [head, f"    {t['message']}"]
    total = t["total"] or 1
    lines = [
        head,
        f"    Mismatched elements: {t['mismatched']} / {t['total']} ({100.0 * t['mismatched'] / total:.1f}%)",
        f"    Greatest absolute difference: {_num(t['max_abs'], '.6g')} at index {_index(t['max_abs_index'])}"
        f" (up to {_num(t['allowed_at_max_abs'], '.3g')} allowed)",
        f"    Greatest relative difference: {_num(t['max_rel'], '.6g')} at index {_index(t['max_rel_index'])}"
        f" (rule: |{actual} - {expected}| <= {tol:g} * (1 + |{expected}|))",
        f"    Greatest ULP distance: {_num(t['max_ulp'])}",
    ]
    if t["samples"]:
        lines.append(f"    first mismatches, {expected} (expected) vs {actual} (actual):")
        for s in t["samples"]:
            lines.append(f"      at {_index(s['index'])}: {_num(s['expected'], 'r')} vs {_num(s['actual'], 'r')}")
    counts = lambda kind: ", ".join(f"{side} {t[kind].get(side, 0)}" for side in (expected, actual))  # noqa: E731
    lines.append(f"    NaN: {counts('nan')}; Inf: {counts('inf')}")
    if t["message"]:
        lines.append(f"    {t['message']}")
    return lines


def _growth(run):
    return ", ".join(f"{step}: {_num(diff, '.1e')}" for step, diff in run["growth"])


def expectation_lines(case, style):
    """What a case showed beyond tensor agreement: gradcheck bounds, quality bars, digests, and
    for a training run how the free runs of the two engines compare step by step."""
    lines = []
    rel = [c for c in case["checks"] if c["name"].endswith(".rel_err") and c["value"] is not None]
    if rel:
        by_engine = {}
        for c in rel:
            by_engine[c["engine"]] = max(by_engine.get(c["engine"], 0.0), c["value"])
        worst = ", ".join(f"{e} {_num(v, '.2e')}" for e, v in by_engine.items())
        lines.append(f"  gradcheck: {len(rel)} record sets, worst relative error {worst} (bound {rel[0]['rule'][3:]})")
    for c in case["checks"]:
        if not c["passed"]:
            lines.append(f"  {style.bad('check failed:')} {c['engine']}: {c['name']} {c['rule']}: {c['detail']}")
        elif not c["name"].endswith(".rel_err") and c["name"] != "coverage":
            lines.append(f"  check: {c['engine']}: {c['name']} {c['rule']}: {c['detail']}")
    for run in case["free_runs"]:
        name, steps = run["tensor"], run["steps"]
        if run["first_step_beyond"] is None:
            lines.append(f"  free run {name}: engines within the tolerance at all {steps} steps "
                         f"(max |diff| {_num(run['max_abs'], '.1e')})")
        else:
            lines.append(f"  free run {name}: first beyond the tolerance at step {run['first_step_beyond']} "
                         f"({run['steps_beyond']} of {steps} steps); max |diff| up to step {_growth(run)}")
    segments = case.get("replay") or []
    if segments:
        bad = [r for r in segments if not r["passed"]]
        finite = [r["max_abs"] for r in segments if isinstance(r["max_abs"], float)]
        same = sum(r["bit_identical"] for r in segments)
        if not bad:
            lines.append(f"  replay: {len(segments)} segments from the reference's states, every one within the tolerance "
                         f"(max |diff| {_num(max(finite) if finite else None, '.1e')}; {same} bit-identical)")
        for r in bad:
            where = "" if r["segment"] is None else f" [{r['segment'][0]}, {r['segment'][1]}]"
            lines.append(f"  {style.bad('replay failed')}{where}: {r['error']}")
    if case["drifted"]:
        lines.append(f"  drift allowed (expect.may_drift): {', '.join(case['drifted'])}")
    return lines


def render(report, style):
    """The terminal text of a report, as a list of lines."""
    lines = []
    for case in report["cases"]:
        lines.append(case_line(case, style))
        lines += expectation_lines(case, style)
        if case["passed"]:
            continue
        for error in case["errors"]:
            lines.append(f"  {style.bad('error:')} {error}")
        for t in case["tensors"]:
            if not t["passed"]:
                lines += tensor_block(t, report["tolerance"])
    for path in report.get("unused_goldens", []):
        lines.append(f"{style.bad('unused golden')} {path}: no case has this id; run `verify regen {report['suite']}` to remove it")
    tol = report["tolerance"]
    lines.append(style.dim(f"tolerance: |port - reference| <= {tol:g} * (1 + |reference|) per element"))
    s = report["summary"]
    lines.append(f"{s['passed']} passed, {s['failed']} failed")
    return lines


def jsonable(value):
    """A copy of value with non-finite floats as "NaN" / "Infinity" / "-Infinity" strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def dumps(report):
    return json.dumps(jsonable(report), indent=2, allow_nan=False) + "\n"
