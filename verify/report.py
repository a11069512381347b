"""Rendering a report: the terminal text (shaped like torch.testing.assert_close's messages) and the
JSON file. The renderer reads the same dict the JSON holds, so `verify show` can re-render a saved
report."""

import json
import math
import os

from .axes import label
from .text import clean_data

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
    """The assert_close-style explanation of one failing tensor; indices carry axis names where
    verify/axes.py knows them."""
    expected, actual = t["sides"]
    axes = t.get("axes")
    shape = _index(t["shape"]) if t["shape"] is not None else "?"
    if axes:
        shape += " = " + label(t["shape"], axes)
    head = f"  {t['role']} '{t['name']}' ({t['dtype']}, shape {shape}): {actual} differs from {expected}"
    if t["message"] and t["max_abs"] is None and t["mismatched"] == t["total"] and not t["samples"]:
        return [head, f"    {t['message']}"]
    total = t["total"] or 1
    lines = [
        head,
        f"    Mismatched elements: {t['mismatched']} / {t['total']} ({100.0 * t['mismatched'] / total:.1f}%)",
        f"    Greatest absolute difference: {_num(t['max_abs'], '.6g')} at index {label(t['max_abs_index'], axes)}"
        f" (up to {_num(t['allowed_at_max_abs'], '.3g')} allowed)",
        f"    Greatest relative difference: {_num(t['max_rel'], '.6g')} at index {label(t['max_rel_index'], axes)}"
        f" (rule: |{actual} - {expected}| <= {tol:g} * (1 + |{expected}|))",
        f"    Greatest ULP distance: {_num(t['max_ulp'])}",
    ]
    if t["samples"]:
        lines.append(f"    first mismatches, {expected} (expected) vs {actual} (actual):")
        for s in t["samples"]:
            shown = [int(v) if t["dtype"] == "int64" and isinstance(v, float) and v.is_integer() else v
                     for v in (s["expected"], s["actual"])]
            lines.append(f"      at {label(s['index'], axes)}: {_num(shown[0], 'r')} vs {_num(shown[1], 'r')}")
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
    bits = {c["tensor"]: c.get("first_step_different") for c in case.get("curves") or []}
    for run in case["free_runs"]:
        name, steps = run["tensor"], run["steps"]
        first_diff = bits.get(name, "?")
        identical = ("bit-identical at every step" if first_diff is None else
                     "" if first_diff == "?" else
                     f"bit-identical through step {first_diff - 1}" if first_diff > 1 else "different from step 1")
        identical = f"; {identical}" if identical else ""
        if run["first_step_beyond"] is None:
            lines.append(f"  free run {name}: engines within the tolerance at all {steps} steps "
                         f"(max |diff| {_num(run['max_abs'], '.1e')}{identical})")
        else:
            lines.append(f"  free run {name}: the engines part at step {run['first_step_beyond']} (first beyond the "
                         f"tolerance; {run['steps_beyond']} of {steps} steps beyond{identical}); "
                         f"max |diff| up to step {_growth(run)}")
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
    lines += decode_lines(case, style)
    if case["drifted"]:
        lines.append(f"  drift allowed (expect.may_drift): {', '.join(case['drifted'])}")
    return lines


def _seq(tokens, at=None):
    words = [str(tok) for tok in tokens]
    if at is not None and at < len(words):
        words[at] = f"[{words[at]}]"
    return " ".join(words) + " <end>" if words else "<end>"


def decode_lines(case, style):
    """A decode (int64 *.tokens): how many sequences differ, the first diverging sequence with both
    token sequences (the diverging position in brackets) and the logit margins there."""
    lines = []
    for d in case.get("decodes") or []:
        name, n = d["tensor"], d["sequences"]
        if not d["differing"]:
            lines.append(f"  decode {name}: {'the sequence is' if n == 1 else f'all {n} sequences'} identical in both engines")
            continue
        first = d["first"]
        where = f"sequence {first['sequence']}, position {first['position']}" if n > 1 else f"position {first['position']}"
        drift = " (drift allowed)" if d.get("drift_allowed") else ""
        lines.append(f"  {style.bad('decode') if not drift else 'decode'} {name}: {d['differing']} of {n} sequence(s) differ{drift}; "
                     f"first at {where}")
        lines.append(f"    reference: {_seq(first['reference'], first['position'])}")
        lines.append(f"    port:      {_seq(first['port'], first['position'])}")
        if first.get("margin"):
            m = first["margin"]
            lines.append(f"    logit margin (top-1 minus top-2) at position {first['position']} in {d['margin_tensor']}: "
                         f"reference {_num(m['reference'], '.6g')}, port {_num(m['port'], '.6g')}")
    return lines


def case_lines(case, style, tol):
    """Everything the terminal says about one case."""
    lines = [case_line(case, style)]
    lines += expectation_lines(case, style)
    if case["passed"]:
        return lines
    for error in case["errors"]:
        lines.append(f"  {style.bad('error:')} {error}")
    for t in case["tensors"]:
        if not t["passed"]:
            lines += tensor_block(t, tol)
    return lines


def timing_lines(timings):
    """Where the wall time went (--timings)."""
    if not timings:
        return ["timings: not recorded in this report"]
    lines = [f"timings (wall {timings['total']:.2f} s):"]
    for name, e in timings["engines"].items():
        start = "-" if e["startup"] is None else f"{e['startup']:.2f} s"
        lines.append(f"  engine {name:<10} wall {e['wall']:7.2f} s  start-up {start:>8}  cases {e['cases']:7.2f} s"
                     f"  ({e['processes']} process{'es' if e['processes'] != 1 else ''})")
    for name, seconds in timings["sections"].items():
        share = f"  ({100.0 * seconds / timings['total']:.0f} % of the wall)" if name == "runner's own work" and timings["total"] else ""
        lines.append(f"  {name:<30} {seconds:7.2f} s{share}")
    families = sorted(timings["families"].items(), key=lambda kv: -sum(kv[1].values()))
    if families:
        lines.append("  case families (each engine's own seconds, slowest first):")
        for op, per in families:
            lines.append(f"    {op:<28} " + "  ".join(f"{e} {v:7.3f} s" for e, v in per.items()))
    return lines


def render(report, style, timings=False):
    """The terminal text of a report, as a list of lines; the last is `N passed, M failed`."""
    report = clean_data(report)  # engine text, ids, paths: no control character reaches the terminal
    lines = []
    tol = report["tolerance"]
    for case in report["cases"]:
        lines += case_lines(case, style, tol)
    for path in report.get("unused_goldens", []):
        lines.append(f"{style.bad('unused golden')} {path}: no case has this id; run `verify regen {report['suite']}` to remove it")
    if timings:
        lines += timing_lines(report.get("timings"))
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
    """The JSON report: top-level keys one per line, each case on one compact line (the heatmaps and
    curves make an indented file several times larger), non-finite numbers as strings."""
    doc = jsonable(clean_data(report))
    compact = dict(separators=(",", ":"), allow_nan=False)
    lines = []
    for key, value in doc.items():
        if key == "cases":
            items = ",\n".join("    " + json.dumps(c, **compact) for c in value)
            lines.append(f'  "cases": [\n{items}\n  ]' if value else '  "cases": []')
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value, **compact)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"
