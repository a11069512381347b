"""Rendering a report: the terminal text (shaped like torch.testing.assert_close's messages) and the
JSON file, both from a Report (verify/records.py), which `verify show` reads back from a saved
JSON report to render it again."""

import json
import math
import os
from collections import Counter
from dataclasses import replace
from functools import partialmethod

from . import advice, known_faults, ops
from .axes import label
from .compare import DEFAULT_TOL
from .text import clean, clean_data
from .timings import NOT_WAITING, OWN_WORK


class Style:
    """ANSI colour when writing to a terminal (and NO_COLOR is unset); plain text otherwise."""

    def __init__(self, stream):
        self.on = hasattr(stream, "isatty") and stream.isatty() and "NO_COLOR" not in os.environ

    def _wrap(self, code, text):
        return f"\033[{code}m{text}\033[0m" if self.on else text

    good = partialmethod(_wrap, "32")
    bad = partialmethod(_wrap, "31;1")
    dim = partialmethod(_wrap, "2")


PLAIN = Style(None)  # the HTML report and JUnit: no colour


def num(x, fmt=".2e"):
    """A figure as the reports write it: "-" for none, a non-finite one as in the JSON report, "0"
    for zero; fmt "r" gives repr()."""
    if x is None or isinstance(x, (str, int)):  # a string: a non-finite value as the JSON report writes it
        return "-" if x is None else str(x)
    if not math.isfinite(x):
        return jsonable(x)
    return repr(x) if fmt == "r" else "0" if x == 0 else format(x, fmt)


def _worst(values):
    finite = [v for v in values if v is not None]
    if any(isinstance(v, str) or (isinstance(v, float) and not math.isfinite(v)) for v in finite):
        return math.inf
    return max(finite, default=None)


def _compared(case):
    """The tensors a case is judged on by the rule: its strict ones and its evaluation's (a
    training run's free-run outputs are reported on their own lines)."""
    shown = [t for t in case["tensors"] if t.get("part") != "free_run"]
    return shown + list((case.get("evaluation") or {}).get("tensors", []))


def _headline_figures(tensors):
    """(worst |diff|, worst ULP) over the tensors; NaN when an element is NaN on one side (or both)
    or infinite on one side only, as torch.testing reports it: a non-finite mismatch comes first."""
    for t in tensors:
        if t.get("nonfinite") or (t["message"] or "").startswith("NaN in both"):
            return math.nan, math.nan
    return _worst([t["max_abs"] for t in tensors]), _worst([t["max_ulp"] for t in tensors])


def case_line(case, style, tol=None):
    """One case's line; a tolerance of its own looser than the default is named at its end
    (tol: the run's --tol, named in the closing section instead)."""
    status = case.get("status") or ("passed" if case["passed"] else "failed")
    verdict = (style.bad("NOT RUN") if status == "not run" else
               style.good("PASS") if case["passed"] else style.bad("FAIL"))
    head = f"{verdict} {case['kind']:<8} {case['id']:<44}"
    if status == "not run":
        return f"{head} not run: {case['errors'][0] if case['errors'] else ''}"
    worst_abs, worst_ulp = _headline_figures(_compared(case))
    if isinstance(worst_ulp, int) and worst_ulp > 99999:
        worst_ulp = float(worst_ulp)  # shown as 4.6e+18, not 19 digits
    golden = ", ".join(f"{role} {d['label']}" for role, d in case["golden_details"].items())
    own = own_tolerance(case, tol)
    return (f"{head} {status:<21} max|diff| {num(worst_abs):>8}  max ULP {num(worst_ulp, '.1e'):>4}  "
            f"goldens: {golden}" + (f"; {own}" if own else ""))


def own_tolerance(case, tol=None):
    """What a case judged at a tolerance looser than the default says of it (its line, the closing
    section, JUnit, HTML), or None: a case may loosen its own rule only in plain sight."""
    value = case.get("tolerance")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > DEFAULT_TOL:
        return None
    reason = case.get("tolerance_reason")
    if reason is None and value == tol:
        return None  # judged at --tol, which the closing section names
    return f"tolerance {value:g}, looser than the default {DEFAULT_TOL:g}" + (f" ({reason})" if reason else "")


def loose_cases(report):
    """[(case, what its own tolerance says)] of the cases judged at a tolerance of their own looser than the default."""
    return [(c, what) for c in report.cases if (what := own_tolerance(c, report.tolerance))]


def tensor_block(t, tol):
    """The assert_close-style explanation of one failing tensor; indices carry axis names where
    verify/axes.py knows them."""
    expected, actual = t["sides"]
    axes, integers, nonfinite = t.get("axes"), t["dtype"] == "int64", t.get("nonfinite") or 0
    shape = label(t["shape"]) if t["shape"] is not None else "?"
    if axes:
        shape += " = " + label(t["shape"], axes)
    head = f"  {t['role']} '{t['name']}' ({t['dtype']}, shape {shape}): {actual} differs from {expected}"
    if t["message"] and t["max_abs"] is None and t["mismatched"] == t["total"] and not t["samples"]:
        return [head, f"    {t['message']}"]
    mismatched = (f"    Mismatched elements: {t['mismatched']} / {t['total']} "
                  f"({100.0 * t['mismatched'] / (t['total'] or 1):.1f}%)")
    if integers:  # integers are compared exactly: no relative or ULP figure
        lines = [head, mismatched + ", compared exactly (integers)"]
        if t["samples"]:
            s = t["samples"][0]
            lines.append(f"    First difference at index {label(s['index'], axes)}: {expected} {_int(s['expected'])}, "
                         f"{actual} {_int(s['actual'])}; greatest |difference| {num(_int(t['max_abs']))}")
    else:
        lines = [head, mismatched + (f", {nonfinite} of them non-finite" if nonfinite else "")]
        greatest = f"{num(t['max_abs'], '.6g')} at index {label(t['max_abs_index'], axes)}"
        if nonfinite:
            first = next((s for s in t["samples"] if list(s["index"]) == list(t["nonfinite_index"])), None)
            shown = f": {expected} {num(first['expected'], 'r')}, {actual} {num(first['actual'], 'r')}" if first else ""
            lines.append(f"    Greatest absolute difference: NaN at index {label(t['nonfinite_index'], axes)}{shown}; "
                         f"among the finite elements {greatest}")
        else:
            lines.append(f"    Greatest absolute difference: {greatest} "
                         f"(up to {num(t['allowed_at_max_abs'], '.3g')} allowed)")
        lines += [
            f"    Greatest relative difference: {num(t['max_rel'], '.6g')} at index {label(t['max_rel_index'], axes)}"
            f" (rule: |{actual} - {expected}| <= {tol:g} * (1 + |{expected}|))",
            f"    Greatest ULP distance: {num(t['max_ulp'])}" + (" (over the finite elements)" if nonfinite else ""),
        ]
    if t["samples"]:
        lines.append(f"    first mismatches, {expected} (expected) vs {actual} (actual):")
        for s in t["samples"]:
            e, a = (_int(v) if integers else v for v in (s["expected"], s["actual"]))
            lines.append(f"      at {label(s['index'], axes)}: {num(e, 'r')} vs {num(a, 'r')}")
    if not integers:
        nan, inf = (", ".join(f"{side} {t[kind].get(side, 0)}" for side in (expected, actual))
                    for kind in ("nan", "inf"))
        lines.append(f"    NaN: {nan}; Inf: {inf}")
    if t["message"]:
        lines.append(f"    {t['message']}")
    return lines


def _int(v):
    return int(v) if isinstance(v, float) and v.is_integer() else v


def expectation_lines(case, style):
    """What a case showed beyond tensor agreement: gradcheck bounds, quality bars, digests, and
    for a training run how the free runs of the two engines compare step by step."""
    lines = []
    rel = [c for c in case["checks"] if c["name"].endswith(".rel_err") and c["value"] is not None]
    if rel:
        by_engine = {}
        for c in rel:
            by_engine[c["engine"]] = max(by_engine.get(c["engine"], 0.0), c["value"])
        worst = ", ".join(f"{e} {num(v, '.2e')}" for e, v in by_engine.items())
        lines.append(f"  gradcheck: {len(rel)} record sets, worst relative error {worst} (bound {rel[0]['rule'][3:]})")
    for c in case["checks"]:
        if not c["passed"]:
            lines.append(f"  {style.bad('check failed:')} {c['engine']}: {c['name']} {c['rule']}: {c['detail']}")
        elif not c["name"].endswith(".rel_err") and c["name"] != "coverage":
            lines.append(f"  check: {c['engine']}: {c['name']} {c['rule']}: {c['detail']}")
    for run in case["free_runs"]:
        name, steps, first = run["tensor"], run["steps"], run.get("first_step_different", "?")
        identical = ("" if first == "?" else "; bit-identical at every step" if first is None else
                     f"; bit-identical through step {first - 1}" if first > 1 else "; different from step 1")
        growth = ", ".join(f"{step}: {num(diff, '.1e')}" for step, diff in run["growth"])
        if run["first_step_beyond"] is None:
            lines.append(f"  free run {name}: engines within the tolerance at all {steps} steps "
                         f"(max |diff| {num(run['max_abs'], '.1e')}{identical})")
        else:
            lines.append(f"  free run {name}: the engines part at step {run['first_step_beyond']} (first beyond the "
                         f"tolerance; {run['steps_beyond']} of {steps} steps beyond{identical}); "
                         f"max |diff| up to step {growth}; reported, not failed")
    parted = [t["name"] for t in case["tensors"] if t.get("part") == "free_run" and t.get("status") == "parted"]
    if parted:
        lines.append(f"  free run outputs beyond the tolerance (reported, not failed): {', '.join(parted)}")
    segments = case.get("replay") or []
    if segments:
        bad = [r for r in segments if not r["passed"]]
        worst = max((r["max_abs"] for r in segments if isinstance(r["max_abs"], float)), default=None)
        same = sum(r["bit_identical"] for r in segments)
        derived = sum(bool(r.get("derived")) for r in segments)
        how = (f"{derived} derived from the port's free run, {len(segments) - derived} replayed"
               if derived else f"{len(segments)} replayed")
        lines.append(f"  replay: {len(segments)} segments from the reference's states" + (
            f" ({how}), {len(bad)} failed" if bad else
            f", every one within the tolerance (max |diff| {num(worst, '.1e')}; {same} bit-identical; {how})"))
        for r in bad:
            where = "" if r["segment"] is None else f" [{r['segment'][0]}, {r['segment'][1]}]"
            where += " (derived from the port's free run)" if r.get("derived") else ""
            lines.append(f"  {style.bad('replay failed')}{where}: {r['error']}")
    lines += evaluation_lines(case, style)
    lines += decode_lines(case, style)
    return lines


def evaluation_lines(case, style):
    """The port's evaluation of the reference's final parameters (training runs)."""
    ev = case.get("evaluation")
    if not ev:
        return []
    head = f"  evaluation of the reference's final parameters (step {ev['step']})"
    if ev["error"]:
        return [f"{head}: {style.bad('failed')}: {ev['error']}"]
    tensors = ev["tensors"]
    counts = Counter(t.get("status", "?") for t in tensors)
    worst = _worst([t["max_ulp"] for t in tensors])
    lines = [f"{head}: {len(tensors)} outputs, " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
             + (f" (max {num(worst)} ULP)" if worst else "")]
    for tie in ev.get("near_ties", []):
        lines.append(f"    near tie in {tie['tensor']} sequence {tie['sequence']} at position {tie['position']}: the "
                     f"reference's margin {num(tie['margin'], '.3g')} is at most {num(tie['bound'], '.3g')}, so the "
                     f"port may take the other token: reference {_seq(tie['reference'], tie['position'])}, "
                     f"port {_seq(tie['port'], tie['position'])} (reported, not failed)")
    for t in tensors:
        if t.get("status") == "failed" and not t.get("near_tie"):
            lines.append(f"    {style.bad('differs')}: {t['name']}: " + (t["message"] or
                         f"{t['mismatched']} / {t['total']} elements beyond the tolerance, "
                         f"max |diff| {num(t['max_abs'])}"))
    return lines


def _seq(tokens, at=None):
    """The tokens, the one at position `at` in brackets."""
    return " ".join([f"[{tok}]" if i == at else str(tok) for i, tok in enumerate(tokens)] + ["<end>"])


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
        free = " in the free runs (reported, not failed)" if d.get("free_run") else ""
        lines.append(f"  {style.bad('decode') if not free else 'decode'} {name}: {d['differing']} of {n} sequence(s) differ{free}; "
                     f"first at {where}")
        lines.append(f"    reference: {_seq(first['reference'], first['position'])}")
        lines.append(f"    port:      {_seq(first['port'], first['position'])}")
        if first.get("margin"):
            m = first["margin"]
            lines.append(f"    logit margin (top-1 minus top-2) at position {first['position']} in {d['margin_tensor']}: "
                         f"reference {num(m['reference'], '.6g')}, port {num(m['port'], '.6g')}")
    return lines


def _terminal_view(case):
    """The case entry without what only the HTML report draws (no terminal line reads it): less to clean."""
    return {k: v for k, v in case.items() if k not in ("heatmaps", "curves")}


def case_lines(case, style, tol):
    """What the terminal says about one case as soon as its verdict is known: its line and what it
    showed beyond the tensors (the failure details come in the closing section, failure_lines)."""
    case = clean_data(_terminal_view(case))  # engine text never reaches the terminal raw
    return [case_line(case, style, tol)] + expectation_lines(case, style)


def failure_lines(case, style, tol):
    """Why a failing case failed: its errors, its failures, the block of every failing tensor, what
    to do (verify/advice.py) and, for a forward case, which side PyTorch agrees with (verify/arbiter.py)."""
    lines = [case_line(case, style, tol)]
    for error in case["errors"]:
        lines.append(f"  {style.bad('error:')} {error}")
    for failure in case.get("failures", []):
        if failure not in case["errors"]:
            lines.append(f"  {style.bad('failed:')} {failure}")
    for t in _compared(case) + [t for t in case["tensors"] if t.get("part") == "free_run"]:
        if t.get("status", "failed" if not t["passed"] else "") == "failed" and not t.get("near_tie"):
            lines += tensor_block(t, case.get("tolerance") or tol)
    found = advice.situation(case)
    if found:
        lines.append(f"  what to do ({found[0]}): {found[1]}")
    if case.get("attribution"):
        lines += attribution_lines(case["attribution"])
    if case.get("arbitration"):  # verify/arbiter.py: which side PyTorch agrees with
        lines.append(f"  arbiter ({case['arbitration']['outcome']}): {case['arbitration']['advice']}")
    return lines


def explanation(case, style, tol):
    """Everything about one case in one block (the HTML report, JUnit): its lines, and for a
    failing case why it failed."""
    return case_lines(case, style, tol) + (failure_lines(case, style, tol)[1:] if not case["passed"] else [])


def first_failure(case):
    """The first reason of a failing case's verdict (verify/verdict.py)."""
    return (case.get("failures") or case["errors"] or ["failed"])[0]


def _short(case):
    """One line of the closing summary: the first reason, and the worst figure."""
    worst_abs, _ = _headline_figures(_compared(case))
    text = first_failure(case) + (f" (max|diff| {num(worst_abs)})" if worst_abs not in (None, 0) else "")
    return text if len(text) <= 180 else text[:177] + "..."


def timing_lines(timings):
    """Where the wall time went (--timings)."""
    if not timings:
        return ["timings: not recorded in this report"]
    lines = [f"timings (wall {timings['total']:.2f} s):"]
    for name, e in timings["engines"].items():
        start = "-" if e["startup"] is None else f"{e['startup']:.2f} s"
        lines.append(f"  engine {name:<10} wall {e['wall']:7.2f} s  start-up {start:>8}  cases {e['cases']:7.2f} s"
                     f"  ({e['processes']} process{'es' if e['processes'] != 1 else ''} in turn"
                     + (f", at most {timings['jobs']} of all engines at once)" if timings.get("jobs") else ")"))
    for name, seconds in timings["sections"].items():
        share = (f"  ({100.0 * seconds / timings['total']:.0f} % of the wall)"
                 if name in (OWN_WORK, NOT_WAITING) and timings["total"] else "")
        unit = " of CPU" if name == OWN_WORK else ""  # verify/timings.py: its CPU time, the others wall
        lines.append(f"  {name:<30} {seconds:7.2f} s{unit}{share}")
    families = sorted(timings["families"].items(), key=lambda kv: -sum(kv[1].values()))
    if families:
        lines.append("  case families (each engine's own seconds, slowest first):")
        for op, per in families:
            lines.append(f"    {op:<28} " + "  ".join(f"{e} {v:7.3f} s" for e, v in per.items()))
    return lines


def closing_lines(report, style, timings=False, written=()):
    """What follows the cases: the failing ones explained, primitives first (leaf to root, by the
    ops' declared uses), where to start, a short summary (one line per failing case), unused goldens,
    timings, the rule, bit identity, and last `N passed, M failed`."""
    # engine text, ids, paths: no control character reaches the terminal
    report = replace(report, cases=[_terminal_view(c) for c in report.cases]).cleaned(clean_data)
    lines, tol, suite = [], report.tolerance, report.suite
    decl = ops.declarations(suite)
    failing = advice.leaf_to_root([c for c in report.cases if not c["passed"]], decl)
    if failing:
        lines.append(style.bad(f"=== {len(failing)} failing case(s), primitives first ==="))
        for case in failing:
            lines += failure_lines(case, style, tol)
        roots = advice.root_causes([c for c in failing if c.get("status") != "not run"], decl)
        if roots:
            op, own, explained = roots[0]
            more = f", and {len(explained)} of the others use it" if explained else ""
            lines.append(f"where to start: {len(failing)} case(s) fail; {op} fails on its own{more}: start there "
                         f"(verify {suite} --case {own[0]['id']})")
            for op, own, explained in roots[1:]:
                lines.append(f"  also failing on its own: {op} ({len(own)} case(s){f', used by {len(explained)}' if explained else ''})")
        found = known_faults.closest(failing, known_faults.read(ops.ROOT / "reports" / f"faults-{suite}.json"))
        if found:
            lines.append(known_faults.line(found))
        lines.append("short summary:")
        for case in failing:
            lines.append(f"{style.bad('NOT RUN' if case.get('status') == 'not run' else 'FAILED')} {case['kind']:<8} "
                         f"{case['id']:<44} {_short(case)}")
    drifting = [c for c in report.cases if c["passed"] and (advice.situation(c) or ("",))[0] == advice.DRIFT]
    if drifting:
        lines.append(f"note: {len(drifting)} passing case(s) have goldens that differ from their fresh outputs within the "
                     f"tolerance (or a free run that parted): nothing to do; `verify regen {suite}` "
                     "makes them byte-identical")
    for path in report.unused_goldens:
        lines.append(f"{style.bad('unused golden')} {path}: no case has this id; "
                     f"run `verify regen {suite}` to remove it")
    lines += kernel_lines(report) + browser_lines(report, style) + cache_lines(report)
    if timings:
        lines += timing_lines(report.timings)
    if written:
        lines.append("reports: " + ", ".join(str(w) for w in written))
    for case, what in loose_cases(report):
        lines.append(f"{style.bad('looser tolerance')} {case['id']}: {what}")
    looser = f" (--tol, looser than the default {DEFAULT_TOL:g})" if tol > DEFAULT_TOL else ""
    lines.append(style.dim(f"tolerance: |port - reference| <= {tol:g} * (1 + |reference|) per element{looser}"
                           + (" (a case may declare its own); --bitwise: anything short of bit identity fails"
                              if report.bitwise else " (a case may declare its own)")))
    s = report.summary
    if "bit_identical" in s:
        ran = s["bit_identical"] + s["within_tolerance"]
        lines.append(f"bit identity: {s['bit_identical']} of {ran} passing case(s) bit-identical to the reference, "
                     f"{s['within_tolerance']} within the tolerance" + (f"; {s['not_run']} not run" if s["not_run"] else ""))
    if report.browsers:  # a case passes when it passes in Node and in every browser
        failing = len(failing_ids(report))
        lines.append(f"{len(report.cases) - failing} passed, {failing} failed")
    else:
        lines.append(f"{s['passed']} passed, {s['failed']} failed")
    return lines


def failing_ids(report):
    """The cases that fail in Node or in any browser."""
    ids = {c["id"] for c in report.cases if not c["passed"]}
    for part in (report.browsers or {}).values():
        ids |= {i for i, c in part["cases"].items() if not c["passed"]}
    return ids


def _where(rc):
    return f"key {str(rc.get('key'))[:16]}, {rc.get('directory')}"


def _from_cache(rc, hits, ran):
    return (f"reference: {hits} of {ran} case(s) from cache ({_where(rc)}), not run afresh; the port ran every case "
            "afresh; `--fresh` runs the reference too")


def cache_opening(rc, ran):
    """The line printed before the cases when the reference cache (its outcome rc) answers some of
    the `ran` cases to run, so a run answered from it is never taken for a fresh run of the reference."""
    hits = len(rc.get("from_cache", [])) if rc else 0
    return [_from_cache(rc, hits, ran)] if hits else []


def cache_lines(report):
    """What the reference cache did (verify/reference_cache.py), after the cases."""
    rc = report.reference_cache
    if not rc:
        return ["reference: run afresh on every case (the reference cache was not used)"]
    hits = len(rc.get("from_cache", []))
    if hits:
        lines = [_from_cache(rc, hits, sum(1 for c in report.cases if c.get("status") != "not run"))]
    elif rc.get("not_used"):
        lines = ["reference: run afresh on every case (the reference cache was not used: see the note below)"]
    else:
        lines = [f"reference: run afresh on every case (nothing in the cache for it: {_where(rc)})"]
    failing = [c["id"] for c in report.cases if not c.get("passed") and c["id"] in rc.get("from_cache", [])]
    if failing:
        lines.append(f"reference cache: {len(failing)} failing case(s) had the reference from the cache; "
                     f"`verify {report.suite} --fresh --case {failing[0]}` rules the cache out")
    if rc.get("stored"):
        lines.append(f"reference cache: kept {len(rc['stored'])} case(s) for the next run")
    return lines + [f"note: {n}" for n in rc.get("notes", [])]


def _kernels(counts):
    return f"{counts.get('wasm', 0)} products in Wasm SIMD, {counts.get('js', 0)} in the JavaScript kernel"


def kernel_counts(cases):
    """{"wasm": n, "js": n}: the products each kernel of the port ran, summed over its status lines."""
    total = {"wasm": 0, "js": 0}
    for case in cases:
        for k, n in (((case.get("engine_info") or {}).get("port") or {}).get("kernel") or {}).items():
            if k in total and isinstance(n, int):
                total[k] += n
    return total


def kernel_lines(report):
    """Which product kernel the port ran, so a silent fallback shows."""
    total = kernel_counts(report.cases)
    return [f"port: {_kernels(total)}"] if any(total.values()) else []


def browser_lines(report, style):
    """--browser: per browser its verdict, its byte identity to Node, its kernels, its failing cases."""
    lines = []
    for name, part in (report.browsers or {}).items():
        if not part["ran"]:
            lines.append(f"{style.bad('NOT RUN')} browser {name}: {part['error']}")
            continue
        s = part["summary"]
        version = part["version"] or {}
        head = style.good("PASS") if part["passed"] else style.bad("FAIL")
        lines.append(f"{head} browser {name} {version.get('version', '')}: {s['passed']} passed, {s['failed']} failed; "
                     f"{s['identical_to_node']} of {len(part['cases'])} case(s) byte-identical to node; "
                     f"{_kernels(part['kernel'])}")
        for case_id, c in part["cases"].items():
            if not c["passed"]:
                lines.append(f"  {style.bad('FAILED')} {case_id}: {(c['failures'] or ['failed'])[0]}")
            elif not c["identical_to_node"]:
                lines.append(f"  {case_id}: {c['status']}, not byte-identical to node")
    return lines


def render(report, style, timings=False):
    """The terminal text of a report, as a list of lines: every case in catalogue order, then the
    closing section; the last line is `N passed, M failed`."""
    lines = []
    for case in report.cases:
        lines += case_lines(case, style, report.tolerance)
    return lines + closing_lines(report, style, timings)


_NUMBERS = frozenset((int, float))


def jsonable(value):
    """A copy of value (a report) as the JSON and HTML reports hold it: every string, keys included,
    cleaned (verify/text.py), every non-finite float as the string "NaN", "Infinity" or "-Infinity"."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {(clean(k) if isinstance(k, str) else k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if set(map(type, value)) <= _NUMBERS and all(map(math.isfinite, value)):
            return list(value)
        return [jsonable(v) for v in value]
    return value


def dumps(report):
    """The JSON report: top-level keys one per line, each case on one compact line (the heatmaps and
    curves make an indented file several times larger), non-finite numbers as strings, every
    string cleaned (verify/text.py)."""
    doc = jsonable(report.to_dict())
    compact = dict(separators=(",", ":"), allow_nan=False)
    lines = []
    for key, value in doc.items():
        if key == "cases":
            items = ",\n".join("    " + json.dumps(c, **compact) for c in value)
            lines.append(f'  "cases": [\n{items}\n  ]' if value else '  "cases": []')
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value, **compact)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def _sci(x):
    return "n/a" if x is None else f"{x:.2e}"


def attribution_lines(attribution):
    """What the terminal says of a case's attribution (verify/attribution.py), under its explanation."""
    if "error" in attribution:
        return [f"  attribution: not made: {attribution['error']}"]
    rows, culprit = attribution["sublayers"], attribution["culprit"]
    if not rows:
        return ["  attribution: the traced case ran no traced unit"]
    if culprit is None:
        head = ("  attribution: no traced unit introduces it on its own (each is within the tolerance fed the "
                "reference's input): look between the units, at the model's own code")
    else:
        row = next(r for r in rows if r["name"] == culprit)
        amp, last = attribution["amplification"], attribution.get("last")
        after = ("" if last is None or culprit == last["name"] or amp is None else
                 f"; the units after it take it x{amp:.3g} to {_sci(last['own'])} at the last one, {last['name']}")
        shown = ", ".join(row["beyond"][:6]) + (f" and {len(row['beyond']) - 6} more" if len(row["beyond"]) > 6 else "")
        head = (f"  attribution: {culprit} introduces it (fed max|diff| {_sci(row['fed'])} > tolerance "
                f"{attribution['tolerance']:g}, in {shown}){after}")
    lines = [head]
    if attribution.get("segment"):
        t0, t1 = attribution["segment"]
        lines.append(f"    replaying [{t0}, {t1}] from the reference's state at step {t0}: the {attribution['steps_before']} "
                     "step(s) before this one agree at every stage")
    width = max(len(r["name"]) for r in rows)
    lines.append(f"    {'unit':<{width}}  {'own input':>9}  {'fed':>9}")
    lines += [f"    {r['name']:<{width}}  {_sci(r['own']):>9}  {_sci(r['fed']):>9}{'  <- introduced here' if r['name'] == culprit else ''}"
              for r in rows]
    if culprit is not None:
        lines.append("    (fed: the unit run on the reference's input to it; a difference there is the unit's own, or "
                     "the model hands it another tensor than the reference does)")
    return lines
