"""The `verify` command line (docs/runner.md).

  verify attention [--case PATTERN ...] [--tol T] [--report FILE] [--port-cmd CMD] [--timeout S] [--list]
  verify regen attention [--case PATTERN ...] [--force] [--port-cmd CMD]
  verify show REPORT [--case PATTERN ...]

Exit codes: 0 everything passed, 1 a mismatch (or a refused regen), 2 a usage or input error.
"""

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path

from . import catalogue, engines, goldens, suite
from .compare import DEFAULT_TOL, compare_named
from .documents import DocumentError, Schemas, decode_tensors, parse, read
from .errors import EXIT_INPUT, EXIT_MISMATCH, EXIT_PASS, InputError
from .report import Style, dumps, render

SUITES = ("attention",)


def repo_root():
    """The checkout this package was installed from (editable install): the directory above
    verify/, which must hold cases/ and port_ts/."""
    root = Path(__file__).resolve().parent.parent
    missing = [p for p in ("cases/attention", "port_ts") if not (root / p).is_dir()]
    if missing:
        raise InputError(
            f"{root} is not the project checkout (it lacks {' and '.join(missing)}); "
            "install the project from its checkout with `pip install -e .`"
        )
    return root


def _positive(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _common(p, with_tol=True):
    p.add_argument("--case", metavar="PATTERN", action="append", default=[],
                   help="select cases whose id matches PATTERN: a glob (fnmatch, on the whole id) or, "
                        "without * ? [, a substring; repeat to select more")
    if with_tol:
        p.add_argument("--tol", type=_positive, default=DEFAULT_TOL, metavar="T",
                       help=f"tolerance: an element passes when |port - reference| <= T * (1 + |reference|) "
                            f"(default {DEFAULT_TOL:g})")
    p.add_argument("--timeout", type=_positive, default=engines.DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"stop an engine that runs longer than this (default {engines.DEFAULT_TIMEOUT:g})")
    p.add_argument("--golden-dir", type=Path, metavar="DIR",
                   help="read (or regenerate) goldens in DIR/reference and DIR/port instead of golden/<suite>")
    p.add_argument("--cases-dir", type=Path, metavar="DIR",
                   help="read the catalogue from DIR/*.json instead of cases/<suite>")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="verify",
        description="Run the NumPy reference and the TypeScript port on the case catalogue, compare "
                    "their outputs with each other and with the committed goldens. Exit 0 all passed, "
                    "1 a mismatch, 2 a usage or input error.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUITES:
        p = sub.add_parser(name, help=f"verify the {name} suite (cases/{name}/*.json)",
                           description=f"Run both engines on the {name} cases, compare every input and output "
                                       "tensor, check the committed goldens, print one line per case and "
                                       "a summary 'N passed, M failed'.")
        _common(p)
        p.add_argument("--report", type=Path, metavar="FILE", help="also write the JSON report to FILE")
        p.add_argument("--port-cmd", metavar="CMD",
                       help="run CMD (split like a shell) as the port instead of node port_ts/src/cli.ts run; "
                            "it must speak docs/protocol.md; goldens are still those of golden/<suite>/port")
        p.add_argument("--list", action="store_true", help="list the (selected) case ids and exit")
        p.set_defaults(suite=name)
    r = sub.add_parser("regen", help="rewrite the committed goldens from fresh engine runs",
                       description="Run both engines, refuse when they disagree (unless --force), then replace "
                                   "golden/<suite>/reference and golden/<suite>/port in one atomic step, "
                                   "removing goldens of cases no longer in the catalogue.")
    r.add_argument("suite", choices=SUITES, help="the suite to regenerate")
    _common(r)
    r.add_argument("--force", action="store_true", help="write even where reference and port disagree")
    r.add_argument("--port-cmd", metavar="CMD",
                   help="take the port's goldens from CMD instead of node port_ts/src/cli.ts run (for testing "
                        "another implementation; the committed port goldens come from port_ts)")
    s = sub.add_parser("show", help="re-render a saved JSON report in the terminal",
                       description="Print a report written with --report as `verify <suite>` would have. "
                                   "Exit 0 when the shown cases passed, 1 otherwise.")
    s.add_argument("report", type=Path, metavar="REPORT")
    s.add_argument("--case", metavar="PATTERN", action="append", default=[], help="show only these cases")
    return parser


class Project:
    """Paths and schemas of one invocation."""

    def __init__(self, args, suite_name):
        self.root = repo_root()
        self.suite = suite_name
        try:
            self.schemas = Schemas(self.root / "golden" / "schemas")
        except DocumentError as exc:
            raise InputError(str(exc)) from None
        self.cases_dir = getattr(args, "cases_dir", None) or self.root / "cases" / suite_name
        self.golden_dir = getattr(args, "golden_dir", None) or self.root / "golden" / suite_name

    def display(self, path):
        path = Path(path)
        try:
            return str(path.resolve().relative_to(self.root))
        except ValueError:
            return str(path)

    def context(self, timeout):
        return suite.Context(self.root, self.suite, self.schemas, Path(self.golden_dir), timeout, self.display)

    def cases(self, patterns):
        every = catalogue.load(self.cases_dir, self.schemas, self.display)
        return every, catalogue.select(every, patterns, self.suite)


def cmd_verify(args, out):
    project = Project(args, args.suite)
    every, selected = project.cases(args.case)
    if args.list:
        for case in selected:
            print(f"{case.id:<48} {case.kind:<8} {case.op:<28} {project.display(case.file)}", file=out)
        return EXIT_PASS
    engine_list = [engines.reference_engine(project.root), engines.port_engine(project.root, args.port_cmd)]
    report = suite.run(project.context(args.timeout), selected, {c.id for c in every}, engine_list,
                       args.tol, check_unused=not args.case)
    for line in render(report, Style(out)):
        print(line, file=out)
    if args.report:
        try:
            args.report.write_text(dumps(report), encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write the report to {args.report} ({exc.strerror}); choose another path") from None
    return EXIT_PASS if report["passed"] else EXIT_MISMATCH


def cmd_regen(args, out):
    project = Project(args, args.suite)
    every, selected = project.cases(args.case)
    ctx = project.context(args.timeout)
    engine_list = [engines.reference_engine(project.root), engines.port_engine(project.root, args.port_cmd)]
    with tempfile.TemporaryDirectory(prefix="verify-regen-") as work:
        runs = engines.run_all(engine_list, [c.spec for c in selected], work, args.timeout)
        problems, disagree, fresh_files = [], [], {e.name: {} for e in engine_list}
        for case in selected:
            suite._unknown_op(runs["reference"], case, project.display)
            fresh = {name: suite.read_fresh(r, case, project.schemas) for name, r in runs.items()}
            problems += [f"{case.id}: {f.error}" for f in fresh.values() if f.error]
            if any(f.error for f in fresh.values()):
                continue
            for name, f in fresh.items():
                fresh_files[name][case.id] = f.bytes
            results = []
            for part, role in (("inputs", "input"), ("outputs", "output")):
                results += compare_named(role, fresh["reference"].tensors[part], fresh["port"].tensors[part], args.tol)
            may_drift = set(case.spec.get("expect", {}).get("may_drift", []))  # allowed to drift, as in a run
            bad = [f"{t.role} '{t.name}'" for t in results
                   if not t.passed and not (t.role == "output" and t.name in may_drift and t.message is None)]
            if bad:
                disagree.append(f"{case.id} ({', '.join(bad)})")
    if problems:
        for p in problems:
            print(f"error: {p}", file=out)
        print(f"nothing written: {len(problems)} engine error(s); fix them, then regenerate", file=out)
        return EXIT_MISMATCH
    if disagree and not args.force:
        for d in disagree:
            print(f"engines disagree: {d}", file=out)
        print(f"nothing written: reference and port disagree on {len(disagree)} case(s) beyond tol {args.tol:g}; "
              "fix the port (see `verify " + args.suite + "`) or pass --force to write anyway", file=out)
        return EXIT_MISMATCH
    plan = goldens.plan(project.golden_dir, fresh_files, {c.id for c in every})
    changed = any(c.added or c.changed or c.removed for c, _, _ in plan.values())
    if changed:  # write first: what follows is only the account of it
        goldens.write_atomically(project.golden_dir, {name: new for name, (_, new, _) in plan.items()})
    for name, (change, new, old) in plan.items():
        print(f"{name}: {len(change.changed)} changed, {len(change.added)} added, {len(change.removed)} removed, "
              f"{change.unchanged} unchanged", file=out)
        for case_id in change.changed:
            print(f"  changed {case_id}: {_describe_change(old[case_id], new[case_id], project.schemas, args.tol)}", file=out)
        for case_id in change.added:
            print(f"  added {case_id}", file=out)
        for case_id in change.removed:
            print(f"  removed {case_id}", file=out)
    print(f"{'wrote' if changed else 'no change in'} {project.display(project.golden_dir)}", file=out)
    if disagree:
        print(f"written with --force although the engines disagree on: {', '.join(disagree)}", file=out)
    return EXIT_PASS


def _describe_change(old_bytes, new_bytes, schemas, tol):
    """The worst change per tensor between two versions of a golden, in numbers, not a text diff."""
    try:
        old, new = parse(old_bytes.decode("utf-8")), parse(new_bytes.decode("utf-8"))
        schemas.check("golden", old)
        old_t, new_t = decode_tensors(old), decode_tensors(new)
    except (DocumentError, UnicodeDecodeError) as exc:
        return f"the previous file was not a valid golden ({exc})"
    parts = [f"{key} changed" for key in ("schema_version", "engine", "generator", "case") if old[key] != new[key]]
    for part, role in (("inputs", "input"), ("outputs", "output")):
        for t in compare_named(role, old_t[part], new_t[part], tol, ("old", "new")):
            if t.message and t.max_abs is None:
                parts.append(f"{part}.{t.name}: {t.message}")
            elif t.max_ulp:
                parts.append(f"{part}.{t.name} max|diff| {t.max_abs:.3g} ({t.max_ulp} ULP)")
    return "; ".join(parts) or "text only (same values)"


def cmd_show(args, out):
    root = repo_root()
    try:
        schemas = Schemas(root / "golden" / "schemas")
        report = read(args.report)
        schemas.check("report", report)
    except DocumentError as exc:
        raise InputError(f"{args.report} is not a report written by `verify --report`: {exc}") from None
    if args.case:
        chosen = [c for c in report["cases"] if any(catalogue.matches(c["id"], p) for p in args.case)]
        if not chosen:
            raise InputError(f"no case in {args.report} matches {', '.join(map(repr, args.case))}")
        report = dict(report, cases=chosen, unused_goldens=[],
                      summary={"passed": sum(c["passed"] for c in chosen), "failed": sum(not c["passed"] for c in chosen)})
    for line in render(report, Style(out)):
        print(line, file=out)
    return EXIT_PASS if all(c["passed"] for c in report["cases"]) and not report.get("unused_goldens") else EXIT_MISMATCH


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    out = sys.stdout
    try:
        if args.command == "regen":
            return cmd_regen(args, out)
        if args.command == "show":
            return cmd_show(args, out)
        return cmd_verify(args, out)
    except InputError as exc:
        out.flush()
        print(f"verify: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("verify: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (verify ... | head): stop quietly
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_MISMATCH
