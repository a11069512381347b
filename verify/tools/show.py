"""`verify show REPORT`: a saved report rendered again (terminal, and optionally HTML or JUnit), its
verdict decided again from the evidence it holds."""

import argparse
import json
from dataclasses import replace
from pathlib import Path

from .. import catalogue, cli, options, suite, verdict
from ..documents import DocumentError, read
from ..errors import EXIT_MISMATCH, EXIT_PASS, InputError
from ..records import Report
from ..report import Style, render
from ..timings import Timings


def parser():
    p = argparse.ArgumentParser(prog="verify show",
                                description="Print a saved JSON report (reports/verify-<suite>.json or one written "
                                            "with --report) as `verify <suite>` printed it; --html / --junit render "
                                            "it again as files. Exit 0 when the shown cases passed, 1 otherwise.")
    p.add_argument("report", type=Path, metavar="REPORT", help="a JSON report written by `verify <suite>`")
    p.add_argument("--case", metavar="PATTERN", action="append", default=[], help="show only these cases")
    options.bitwise_option(p)
    options.output_options(p)
    return p


def run(args, out):
    """Re-render a saved report, its verdict decided again from its evidence as the run decided it:
    every case's tensors judged by their figures (verify/verdict.py, contradiction), its checks,
    replay and goldens; the browsers; the unused goldens. A stored failure is never shown as a
    pass; a report that holds no case is refused (exit 2), as no run of verify writes one."""
    cli.check_outputs(args, reserved=[("the report being shown", args.report, ("--html", "--junit"))])
    schemas = cli.load_schemas(cli.repo_root())
    try:
        saved_doc = read(args.report)
        schemas.check("report", saved_doc)
    except DocumentError as exc:
        raise InputError(f"{args.report} is not a report written by `verify`: {exc}") from None
    report = Report.from_dict(saved_doc)
    if not report.cases:
        raise InputError(f"{args.report} holds no case: every run of `verify` reports at least one, so this report was "
                         "emptied or not written by `verify`, and it shows nothing that passed; run the verification again")
    saved = verdict.Policy(report.tolerance, report.bitwise)
    policy = verdict.Policy(report.tolerance, saved.bitwise or args.bitwise)
    cases = report.cases
    if args.case:
        cases = [c for c in cases if any(catalogue.matches(c["id"], p) for p in args.case)]
        if not cases:
            raise InputError(f"no case in {args.report} matches {', '.join(map(repr, args.case))}")
    notes = []
    for c in cases:  # the verdict follows from the evidence, decided again, never read back
        problem = verdict.consistency(c, saved)
        if problem:
            notes.append(f"note: {c['id']}: {problem} (the report was edited, or written by another version); "
                         "shown as its evidence gives" + (", and as failed: a stored failure is never shown as a pass"
                                                          if not c["passed"] else ""))
        stored_failed = not c["passed"]
        verdict.decide(c, policy)
        if stored_failed and c["passed"]:
            c.update(passed=False, status=verdict.FAILED,
                     failures=["stored as failed in the report, though its evidence passes: a stored failure is never "
                               "shown as a pass"])
    whole = not args.case
    unused = report.unused_goldens if whole else []
    shown = replace(report, cases=cases, unused_goldens=unused, bitwise=policy.bitwise, summary=suite.summary(cases))
    if report.browsers:
        shown.browsers = verdict.decide_browsers(report.browsers, [c["id"] for c in cases], policy, whole)
    passed = all(c["passed"] for c in cases) and not unused and all(b["passed"] for b in (shown.browsers or {}).values())
    stored = report.passed if whole else True  # the whole report's stored verdict covers every case
    shown.passed = passed and stored
    stored_reference = saved_doc.get("reference")
    if stored_reference is not None and stored_reference != (shown if whole else report).reference_origin():
        notes.append(f"note: the report's `reference` field {json.dumps(stored_reference)} does not follow from its "
                     "reference_cache; shown as reference_cache gives (the report was edited)")
    lines = notes + render(shown, Style(out), timings=args.timings)
    if passed and not stored:
        lines.append("not a pass: the report's stored verdict is FAIL though the evidence it holds passes (the report "
                     "was edited, or written by another version); run the verification again")
    for line in lines:
        print(line, file=out)
    cli.write_outputs(args, shown, Timings())
    return EXIT_PASS if shown.passed else EXIT_MISMATCH
