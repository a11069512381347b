"""The report as JUnit XML (`--junit FILE`), for CI systems that show test results: one testcase
per case (classname <suite>.<kind>.<op>, name the case id, time the two engines' seconds), a
failing case carrying the terminal explanation; unused goldens are one more failing testcase."""

import xml.etree.ElementTree as ET

from .compare import DEFAULT_TOL
from .report import Style, explanation, own_tolerance, reference_origin
from .text import clean_data


class _Plain(Style):
    def __init__(self):
        self.on = False


def _seconds(case):
    return sum(v for v in (case.get("seconds") or {}).values() if isinstance(v, (int, float)))


def _headline(case, tol):
    """One line saying why a case failed: the first reason of its verdict (verify/verdict.py)."""
    return (case.get("failures") or case["errors"] or ["failed"])[0]


def dumps(report):
    report = clean_data(report)  # no control character from an engine, a case or a golden: the XML always parses
    suite = report["suite"]
    cases = report["cases"]
    unused = report.get("unused_goldens") or []
    in_browsers = [c for part in (report.get("browsers") or {}).values() for c in part["cases"].values()]
    failures = sum(not c["passed"] for c in cases) + (1 if unused else 0) + sum(not c["passed"] for c in in_browsers)
    # The suite's time is the run's wall time: the engines run in parallel, so the sum of the cases'
    # engine seconds overstates it (a report without timings falls back to that sum).
    total_time = (report.get("timings") or {}).get("total") or sum(_seconds(c) for c in cases)
    root = ET.Element("testsuites", name=f"verify {suite}", tests=str(len(cases) + (1 if unused else 0) + len(in_browsers)),
                      failures=str(failures), errors="0", time=f"{total_time:.3f}")
    node = ET.SubElement(root, "testsuite", name=f"verify.{suite}", tests=root.get("tests"),
                         failures=str(failures), errors="0", skipped="0", time=f"{total_time:.3f}")
    props = ET.SubElement(node, "properties")
    ET.SubElement(props, "property", name="tolerance", value=repr(report["tolerance"]))
    ET.SubElement(props, "property", name="rule", value=report["rule"])
    ET.SubElement(props, "property", name="bitwise", value=str(bool(report.get("bitwise"))).lower())
    for name, command in report["engines"].items():
        ET.SubElement(props, "property", name=f"engine.{name}", value=command)
    if report["tolerance"] > DEFAULT_TOL:
        ET.SubElement(props, "property", name="tolerance.looser_than_default",
                      value=f"--tol {report['tolerance']:g}, looser than the default {DEFAULT_TOL:g}")
    origin = reference_origin(report)  # a deploy gate can require reference.fresh = true
    ET.SubElement(props, "property", name="reference.fresh", value=str(origin["fresh"]).lower())
    ET.SubElement(props, "property", name="reference.cases_from_cache", value=str(origin["from_cache"]))
    cached = report.get("reference_cache") or {}
    if cached.get("from_cache"):  # these cases' reference side was not run afresh
        ET.SubElement(props, "property", name="reference.from_cache", value=f"{len(cached['from_cache'])} case(s), key "
                                                                          f"{cached.get('key')}")
    plain = _Plain()
    for case in cases:
        tc = ET.SubElement(node, "testcase", classname=f"{suite}.{case['kind']}.{case['op']}", name=case["id"],
                           file=case["file"], time=f"{_seconds(case):.3f}")
        own = own_tolerance(case, report["tolerance"])
        if case.get("status") or own:
            own_props = ET.SubElement(tc, "properties")
            if case.get("status"):
                ET.SubElement(own_props, "property", name="status", value=case["status"])
            if own:
                ET.SubElement(own_props, "property", name="tolerance", value=own)
        if not case["passed"]:
            failure = ET.SubElement(tc, "failure", message=_headline(case, report["tolerance"]), type="mismatch")
            failure.text = "\n".join(explanation(case, plain, report["tolerance"])) + "\n"
    for name, part in (report.get("browsers") or {}).items():  # --browser: each browser's verdict per case
        for case_id, c in part["cases"].items():
            tc = ET.SubElement(node, "testcase", classname=f"{suite}.browser.{name}", name=case_id,
                               time=f"{c['seconds'] or 0:.3f}")
            ET.SubElement(ET.SubElement(tc, "properties"), "property", name="identical_to_node",
                          value=str(c["identical_to_node"]).lower())
            if not c["passed"]:
                failure = ET.SubElement(tc, "failure", message=(c["failures"] or ["failed"])[0], type="mismatch")
                failure.text = "\n".join(c["failures"]) + "\n"
    if unused:
        tc = ET.SubElement(node, "testcase", classname=f"{suite}.goldens", name="unused goldens", time="0")
        failure = ET.SubElement(tc, "failure", message=f"{len(unused)} golden(s) of no case; run `verify regen {suite}`",
                                type="unused")
        failure.text = "\n".join(unused) + "\n"
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
