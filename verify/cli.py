"""The `verify` command line: `verify attention` (the suite command), and the dispatch to the side
commands, each of which declares and runs itself (SIDE_COMMANDS). Every command and option:
docs/reference/command-line.md. Exit codes: 0 everything passed, 1 a mismatch (or a refused regen),
2 a usage or input error.
"""

import argparse
import importlib
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path

from . import arbiter, catalogue, engines, files, lifecycle, models, options, reference_cache, suite, verdict
from .documents import DocumentError, Schemas
from .errors import EXIT_INPUT, EXIT_MISMATCH, EXIT_PASS, InputError
from .progress import Progress
from .report import Style, cache_opening, case_lines, closing_lines, dumps
from .text import clean
from .timings import Timings

SUITES = ("attention",)
DEFAULT_REPORT = "reports/verify-{suite}.json"  # the last full run's report
SUBSET_REPORT = "reports/verify-{suite}.subset.json"  # the last run with --case: a full run's report is kept

# The side commands, in the order `verify --help` lists them: name -> (module, one-line help). The
# module (imported only when its command runs, so `verify attention` reads none) declares the
# command's options in parser() and carries it out in run(args, out).
SIDE_COMMANDS = {
    "regen": ("regen", "rewrite the committed goldens from fresh engine runs"),
    "export": ("tools.export", "write the baked training runs in the form a site replays"),
    "inspect": ("tools.inspect", "where each head of all-MiniLM-L6-v2 looks, in one sentence or two"),
    "fetch-model": ("tools.fetch_model", f"download {models.MODEL}'s weights for the pretrained cases into the cache"),
    "faults": ("tools.faults", "apply each fault of ops/<suite>/ to a copy of its engine and report which "
                               "cases catch it (docs/faults.md)"),
    "show": ("tools.show", "re-render a saved JSON report (terminal, and optionally HTML or JUnit)"),
    "diff": ("tools.diff", "the worst change per tensor between two goldens or two golden directories, or between "
                           "a git revision's goldens and the working tree's"),
    "bisect": ("tools.bisect", "the first commit at which the failing cases start to fail, each commit's own verify "
                               "run in a temporary worktree"),
    "cache": ("tools.cache", "show (or empty) the reference cache that `verify attention` answers unchanged cases "
                             "from"),
}


def side_command(name):
    """The module of the side command `name`, imported now: its parser() and run(args, out)."""
    return importlib.import_module(f".{SIDE_COMMANDS[name][0]}", __package__)


def repo_root():
    """The checkout this package was installed from (editable install): the directory above
    verify/, which must hold ops/ and port_ts/."""
    root = Path(__file__).resolve().parent.parent
    missing = [p for p in ("ops/attention", "port_ts") if not (root / p).is_dir()]
    if missing:
        raise InputError(
            f"{root} is not the project checkout (it lacks {' and '.join(missing)}); "
            "install the project from its checkout with `pip install -e .`"
        )
    return root


def _browsers(text):
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in engines.BROWSERS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"expected browser names among {', '.join(engines.BROWSERS)} "
                                         f"(comma-separated), got {text!r}")
    return list(dict.fromkeys(names))


FIRST_MINUTE = """what a maintainer does (README):
  verify before a deploy      verify attention --fresh --junit reports/junit.xml --html reports/verify-attention.html
                              (npm run verify:attention -- --fresh ... the same; docs/deploy.md)
  after a reviewed change     verify regen attention   (rewrites the goldens; verify diff shows what moved)
  read a failing report       verify show reports/verify-attention.json --html reports/verify-attention.html"""


def build_parser():
    """The parser of `verify`: the suite commands in full, each side command by its name and help
    (its own parser, side_command(name).parser(), reads the rest of the command line)."""
    parser = argparse.ArgumentParser(
        prog="verify",
        description="Run the NumPy reference and the TypeScript port on the case catalogue, compare\n"
                    "their outputs with each other and with the committed goldens. Exit 0 all passed,\n"
                    "1 a mismatch, 2 a usage or input error.",
        epilog=FIRST_MINUTE, formatter_class=argparse.RawDescriptionHelpFormatter,  # both as written
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUITES:
        report = DEFAULT_REPORT.format(suite=name)
        p = sub.add_parser(name, help=f"verify the {name} suite (the cases of ops/{name}/*.json)",
                           description=f"Run both engines on the {name} cases, compare every input and output "
                                       "tensor, check the committed goldens, print one line per case and "
                                       "a summary 'N passed, M failed'. The JSON report is always written to "
                                       f"{report}. A progress line is shown while the "
                                       "engines run when stdout is a terminal.")
        options.run_options(p)
        p.add_argument("--report", type=Path, metavar="FILE",
                       help=f"also write the JSON report to FILE (it is always written to {report})")
        options.output_options(p)
        options.engine_options(p)
        p.add_argument("--browser", type=_browsers, metavar="NAME[,NAME...]", default=[],
                       help=f"also run the port's cases in these browsers ({', '.join(engines.BROWSERS)}; "
                            "docs/browsers.md), each judged against the same reference run, and say per case whether "
                            "each browser's document is byte-identical to Node's")
        p.add_argument("--fresh", action="store_true",
                       help="run the reference afresh on every case; without it, a case whose reference output is "
                            "in the reference cache under the same key (the reference's sources, the case, Python, "
                            "NumPy, the platform) is answered from there and the report says so (`verify cache`; "
                            f"{reference_cache.FRESH_ENV}=1 does the same as --fresh). The port always runs afresh")
        p.add_argument("--oracle", choices=arbiter.MODES, default="auto",
                       help="the arbiter of failing forward cases: PyTorch float64 computes them from the same inputs "
                            "and each one's advice says whether it agrees with the reference or the port (docs/runner.md, "
                            "The arbiter). auto (the default): when PyTorch is installed, else the advice says how to "
                            f"install it ({arbiter.INSTALL}); torch: required (exit 2 without it); none: off. "
                            "It runs only when a forward case fails")
        p.add_argument("--no-attribution", dest="attribute", action="store_false",
                       help="do not attribute failing cases to the unit that introduces the difference (docs/runner.md, "
                            "Attribution: a composed op's sub-layer, a gradient check's backward, a training step's "
                            "stage). It runs only when such a case fails: three more engine runs of it")
        p.add_argument("--list", action="store_true", help="list the (selected) case ids and exit")
        p.set_defaults(suite=name)
    for name, (_, help_text) in SIDE_COMMANDS.items():
        sub.add_parser(name, help=help_text)
    return parser


def load_schemas(root):
    try:
        return Schemas(root / "golden" / "schemas")
    except DocumentError as exc:
        raise InputError(str(exc)) from None


class Project:
    """Paths and schemas of one invocation."""

    def __init__(self, args, suite_name):
        self.root = repo_root()
        self.suite = suite_name
        self.schemas = load_schemas(self.root)
        self.cases_dir = getattr(args, "cases_dir", None) or self.root / "ops" / suite_name
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
    """Write a report file atomically (files.write_atomically: never into a device, a pipe or a
    directory at the path)."""
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
    except (OSError, RuntimeError):  # a loop of links: check_outputs says so
        same = False
    return [main_report] + ([] if same else [args.report])


def protected(args):
    """[(what, directory)] no output of a command may lie in: golden/ and ops/, and the
    --golden-dir / --cases-dir in use."""
    root = repo_root()
    found = [("the goldens", root / "golden"), ("the catalogue", root / "ops")]
    if getattr(args, "golden_dir", None):
        found.append(("the goldens in use (--golden-dir)", args.golden_dir))
    if getattr(args, "cases_dir", None):
        found.append(("the catalogue in use (--cases-dir)", args.cases_dir))
    return found


def check_outputs(args, outputs=(), reserved=()):
    """Refuse, before anything runs, a file the command would write (outputs: [(option, path)], then
    --html and --junit) that is not a regular file, lies in a protected() directory, replaces the
    runner's JSON reports or another reserved file (files.check_outputs), or is given twice."""
    suite_name = getattr(args, "suite", None) or SUITES[0]
    runner_reports = [repo_root() / name.format(suite=suite_name) for name in (DEFAULT_REPORT, SUBSET_REPORT)]
    reserved = [("the JSON report the runner writes", p, ("--html", "--junit")) for p in runner_reports] + [*reserved]
    outputs = [*outputs] + [(option, getattr(args, option[2:], None)) for option in ("--html", "--junit")]
    files.check_outputs([(option, path) for option, path in outputs if path], protected(args), reserved)


def write_outputs(args, report, timings, json_paths=()):
    """The JSON report (to each of json_paths), then --html and --junit, each timed; each with the
    timings so far (a saved report being shown again keeps its own)."""
    for target in json_paths:
        with timings.section("report: json"):
            _write(target, dumps(replace(report, timings=timings.to_dict())), "JSON report")
    for path, renderer, what in ((args.html, "html", "HTML report"), (args.junit, "junit", "JUnit XML")):
        if path:  # the renderer is imported only when its file is asked for
            dumps_as = importlib.import_module(f".{renderer}", __package__).dumps
            with timings.section(f"report: {renderer}"):
                _write(path, dumps_as(replace(report, timings=report.timings or timings.to_dict())), what)


def cmd_verify(args, out):
    timings = Timings(from_process_start=True)  # the interpreter, imports, schemas and catalogue count too
    json_paths = _json_paths(args, repo_root())
    if not args.list:  # refused before anything is read or run
        check_outputs(args, [("the JSON report", json_paths[0])] + [("--report", p) for p in json_paths[1:]])
        arbiter.check(args.oracle)
    # Nothing from a cache with --fresh, VERIFY_FRESH, or a --reference-cmd (whose sources are unknown).
    fresh = args.fresh or reference_cache.fresh_requested() or args.reference_cmd
    note = None if fresh else models.cache_note()
    if note is not None:  # no home directory: no cache, never one in the working directory
        print(f"verify: {note}", file=sys.stderr)
        fresh = True
    with timings.section("loading: schemas, catalogue"):
        project = Project(args, args.suite)
        every, selected = project.cases(args.case)
    if args.list:
        for case in selected:
            print(f"{case.id:<48} {case.kind:<8} {case.op:<28} {project.display(case.file)}", file=out)
        return EXIT_PASS
    engine_list = engines.engines_of(project.root, args)
    if args.browser:  # what the browsers need, checked before anything runs
        from . import browsers
        browsers.preflight(project.root, args.browser)
    progress, style = Progress(out), Style(out)
    previous = project.root / DEFAULT_REPORT.format(suite=args.suite)  # its per-case seconds order the work

    def on_case(entry):  # each case's verdict as soon as it is known, in a log as on a terminal
        progress.print_lines(case_lines(entry, style, args.tol))

    def on_cache(outcome, ran):  # before the cases: which of the reference's answers are not fresh
        progress.print_lines(cache_opening(outcome, ran))

    with lifecycle.temp_dir("verify-browsers-") as work:
        node_kept = {}
        browsers_on = dict(keep=node_kept, keep_reference=Path(work) / "reference") if args.browser else {}
        run_options = suite.RunOptions(verdict.Policy(args.tol, args.bitwise), check_unused=not args.case,
                                       jobs=args.jobs, progress=progress, timings=timings, previous_report=previous,
                                       on_case=on_case, on_cache=on_cache, oracle=args.oracle, attribute=args.attribute,
                                       **browsers_on,
                                       reference_cache=None if fresh else reference_cache.ReferenceCache(project.root))
        try:
            report = suite.run(project.context(args.timeout), selected, {c.id for c in every}, engine_list, run_options)
        finally:
            progress.clear()
        if args.browser:
            from . import browsers
            with timings.section("engines: browsers"):
                kept_reference = engines.cached(engine_list[0], Path(work) / "reference")
                report.browsers = browsers.run(project.context(args.timeout), selected, kept_reference,
                                               args.browser, args.port_kernel, node_kept, run_options,
                                               say=lambda text: print(text, file=out, flush=True))
            report.passed = report.passed and all(b["passed"] for b in report.browsers.values())
    write_outputs(args, report, timings, json_paths)
    report.timings = timings.to_dict()
    written = [project.display(p) for p in json_paths + [p for p in (args.html, args.junit) if p]]
    with timings.section("report: terminal"):
        lines = closing_lines(report, style, timings=args.timings, written=written)
    for line in lines:
        print(line, file=out)
    return EXIT_PASS if report.passed else EXIT_MISMATCH


def _parse(argv):
    """The arguments of `verify ARGV`; a side command's are read by its own parser (prog `verify NAME`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in SIDE_COMMANDS:
        return build_parser().parse_args(argv)
    args, extra = side_command(argv[0]).parser().parse_known_args(argv[1:])
    if extra:  # said by `verify`, as argparse says it of a subcommand's
        build_parser().error(f"unrecognized arguments: {' '.join(extra)}")
    args.command = argv[0]
    return args


def main(argv=None):
    with lifecycle.guard():  # SIGTERM/SIGHUP stop the engines too; what a dead run left is removed
        return _main(argv)


def _main(argv=None):
    args = _parse(argv)
    out = sys.stdout
    try:
        if getattr(args, "jobs", 1) > options.MAX_JOBS:
            print(f"verify: note: --jobs {args.jobs} is more than the {options.MAX_JOBS} processes the runner starts "
                  f"at once; running {options.MAX_JOBS}", file=sys.stderr)
            args.jobs = options.MAX_JOBS
        if args.command in SIDE_COMMANDS:
            return side_command(args.command).run(args, out)
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
