"""The report as JUnit XML (`--junit FILE`), for CI systems that show test results: one testcase
per case (classname <suite>.<kind>.<op>, name the case id, time the two engines' seconds), a
failing case carrying the terminal explanation; unused goldens are one more failing testcase."""

import xml.etree.ElementTree as ET

from .report import Style, case_lines
from .text import clean_data


class _Plain(Style):
    def __init__(self):
        self.on = False


def _seconds(case):
    return sum(v for v in (case.get("seconds") or {}).values() if isinstance(v, (int, float)))


def _headline(case, tol):
    """One line saying why a case failed: its first error, else its first failing tensor."""
    if case["errors"]:
        return case["errors"][0]
    for t in case["tensors"]:
        if not t["passed"]:
            return t["message"] or f"{t['role']} '{t['name']}': {t['mismatched']} / {t['total']} elements beyond tol {tol:g}"
    for c in case.get("checks") or []:
        if not c["passed"]:
            return f"{c['engine']}: {c['name']} {c['rule']}: {c['detail']}"
    for r in case.get("replay") or []:
        if not r["passed"]:
            return f"replay: {r['error']}"
    return "failed"


def dumps(report):
    report = clean_data(report)  # no control character from an engine, a case or a golden: the XML always parses
    suite = report["suite"]
    cases = report["cases"]
    unused = report.get("unused_goldens") or []
    failures = sum(not c["passed"] for c in cases) + (1 if unused else 0)
    total_time = sum(_seconds(c) for c in cases)
    root = ET.Element("testsuites", name=f"verify {suite}", tests=str(len(cases) + (1 if unused else 0)),
                      failures=str(failures), errors="0", time=f"{total_time:.3f}")
    node = ET.SubElement(root, "testsuite", name=f"verify.{suite}", tests=root.get("tests"),
                         failures=str(failures), errors="0", skipped="0", time=f"{total_time:.3f}")
    props = ET.SubElement(node, "properties")
    ET.SubElement(props, "property", name="tolerance", value=repr(report["tolerance"]))
    ET.SubElement(props, "property", name="rule", value=report["rule"])
    for name, command in report["engines"].items():
        ET.SubElement(props, "property", name=f"engine.{name}", value=command)
    plain = _Plain()
    for case in cases:
        tc = ET.SubElement(node, "testcase", classname=f"{suite}.{case['kind']}.{case['op']}", name=case["id"],
                           file=case["file"], time=f"{_seconds(case):.3f}")
        if not case["passed"]:
            failure = ET.SubElement(tc, "failure", message=_headline(case, report["tolerance"]), type="mismatch")
            failure.text = "\n".join(case_lines(case, plain, report["tolerance"])) + "\n"
    if unused:
        tc = ET.SubElement(node, "testcase", classname=f"{suite}.goldens", name="unused goldens", time="0")
        failure = ET.SubElement(tc, "failure", message=f"{len(unused)} golden(s) of no case; run `verify regen {suite}`",
                                type="unused")
        failure.text = "\n".join(unused) + "\n"
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
