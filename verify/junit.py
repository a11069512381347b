"""The report as JUnit XML (`--junit FILE`), for CI systems that show test results: one testcase
per case (classname <suite>.<kind>.<op>, name the case id, time the two engines' seconds), a
failing case carrying the terminal explanation; unused goldens are one more failing testcase."""

import xml.etree.ElementTree as ET

from .compare import DEFAULT_TOL
from .report import PLAIN, explanation, first_failure, own_tolerance
from .text import clean_data


def _seconds(case):
    return sum(v for v in (case.get("seconds") or {}).values() if isinstance(v, (int, float)))


def _properties(parent, pairs):
    """A <properties> element under parent, one <property> per (name, value)."""
    props = ET.SubElement(parent, "properties")
    for name, value in pairs:
        ET.SubElement(props, "property", name=name, value=value)


def _failure(parent, message, lines, kind="mismatch"):
    ET.SubElement(parent, "failure", message=message, type=kind).text = "\n".join(lines) + "\n"


def dumps(report):
    report = report.cleaned(clean_data)  # no control character from an engine, a case or a golden: the XML always parses
    suite, cases, tol = report.suite, report.cases, report.tolerance
    unused = report.unused_goldens or []
    in_browsers = [c for part in (report.browsers or {}).values() for c in part["cases"].values()]
    failures = str(sum(not c["passed"] for c in cases + in_browsers) + (1 if unused else 0))
    # The suite's time is the run's wall time: the engines run in parallel, so the sum of the cases'
    # engine seconds overstates it (a report without timings falls back to that sum).
    total_time = f'{(report.timings or {}).get("total") or sum(_seconds(c) for c in cases):.3f}'
    tests = str(len(cases) + (1 if unused else 0) + len(in_browsers))
    counts = dict(tests=tests, failures=failures, errors="0")
    root = ET.Element("testsuites", name=f"verify {suite}", **counts, time=total_time)
    node = ET.SubElement(root, "testsuite", name=f"verify.{suite}", **counts, skipped="0", time=total_time)
    props = [("tolerance", repr(tol)), ("rule", report.rule), ("bitwise", str(bool(report.bitwise)).lower())]
    props += [(f"engine.{name}", command) for name, command in report.engines.items()]
    if tol > DEFAULT_TOL:
        props.append(("tolerance.looser_than_default", f"--tol {tol:g}, looser than the default {DEFAULT_TOL:g}"))
    origin, cached = report.reference_origin(), report.reference_cache or {}  # a deploy gate reads these
    props += [("reference.fresh", str(origin["fresh"]).lower()),
              ("reference.cases_from_cache", str(origin["from_cache"]))]
    if cached.get("from_cache"):  # these cases' reference side was not run afresh
        props.append(("reference.from_cache", f"{len(cached['from_cache'])} case(s), key {cached.get('key')}"))
    _properties(node, props)
    for case in cases:
        tc = ET.SubElement(node, "testcase", classname=f"{suite}.{case['kind']}.{case['op']}", name=case["id"],
                           file=case["file"], time=f"{_seconds(case):.3f}")
        own = [(k, v) for k, v in (("status", case.get("status")), ("tolerance", own_tolerance(case, tol))) if v]
        if own:
            _properties(tc, own)
        if not case["passed"]:
            _failure(tc, first_failure(case), explanation(case, PLAIN, tol))
    for name, part in (report.browsers or {}).items():  # --browser: each browser's verdict per case
        for case_id, c in part["cases"].items():
            tc = ET.SubElement(node, "testcase", classname=f"{suite}.browser.{name}", name=case_id,
                               time=f"{c['seconds'] or 0:.3f}")
            _properties(tc, [("identical_to_node", str(c["identical_to_node"]).lower())])
            if not c["passed"]:
                _failure(tc, (c["failures"] or ["failed"])[0], c["failures"])
    if unused:
        tc = ET.SubElement(node, "testcase", classname=f"{suite}.goldens", name="unused goldens", time="0")
        _failure(tc, f"{len(unused)} golden(s) of no case; run `verify regen {suite}`", unused, kind="unused")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
