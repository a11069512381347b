"""`verify faults attention`: does the verification catch porting bugs? (docs/faults.md)

Each op's bundle (ops/<suite>/<op>.json, "faults") lists its faults, each one text edit of one
engine's source aimed at one op (op; "shared", in ops/<suite>.json: the numeric core every op runs on),
anchored to the declaration that holds it (within: a function, Class.method or constant; find,
exactly once in that declaration's text; replace), wherever in the engine's tree the declaration
lives (verify/tools/anchors.py), so moving a function to another module keeps its faults. For each fault
the engine's tree is copied to a temporary directory, the edit applied, and the verification run
with that engine in place of the real one; the fault is
caught when a case that passes on the unmodified tree fails (how: tensor mismatch, gradcheck
bound, digest, quality bar, two ways disagree, replay, golden, engine error), or when the faulty engine fails as a
whole (crashes, hangs, prints garbage).

Speed:
- The unmodified engines run once per invocation per stage (the baseline, below); their outputs
  are kept, and a port fault is compared against the unmodified reference's kept output (and a
  reference fault against the unmodified port's): the other engine is never re-run. The baseline
  is itself a full verification of the stage's cases: a case that fails there cannot witness a
  fault and is named; an engine that cannot run the unmodified tree stops the command (exit 2).
- Cases run in stages, cheapest first: every forward and gradcheck case (seconds); then the
  pretrained cases and the training runs other than the reversal; then the reversal run. A
  fault caught in a stage is not run through the later ones (--all-stages runs them all).
- Faults run in parallel, --jobs at a time (each fault one engine process at a time).
"""

import argparse
import json
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import assets, catalogue, cli, known_faults, layout, lifecycle, ops, options, schedule, suite, verdict
from .. import engines as engines_mod
from ..documents import DocumentError, read
from ..errors import EXIT_MISMATCH, EXIT_PASS, InputError
from ..files import write_atomically
from . import anchors

AREAS = ("forward", "backward", "optimiser", "generator", "init", "decoding", "data")
ENGINES = ("port", "reference")
SHARED = "shared"  # the op of a fault in the numeric core every op runs on (the product kernel, the generator)
KEYS = {"id", "op", "engine", "within", "find", "replace", "description", "area"}
OPTIONAL = {"witness"}  # a case that must fail with the fault (tests/test_faults.py checks it end to end)
SLOW_OPS = {"train_reversal"}  # the last stage
STAGES = (
    ("fast", lambda c: c.kind in ("forward", "gradcheck")),
    ("training", lambda c: c.kind not in ("forward", "gradcheck") and c.op not in SLOW_OPS),
    ("reversal", lambda c: c.op in SLOW_OPS),
)
FAULT_TIMEOUT = 300.0  # seconds a faulty engine may run (--timeout); a hang counts as caught
TREES = {"port": ("port_ts/src", "port_ts/package.json"), "reference": ("reference",)}


@dataclass
class Fault:
    id: str
    op: str  # the op it targets (ops/<suite>.json), or SHARED
    engine: str
    within: str
    find: str
    replace: str
    description: str
    area: str
    witness: str = None
    file: str = field(default=None, compare=False)  # where `within` is declared today (found by load)


@dataclass
class Outcome:
    fault: Fault
    caught: list = field(default_factory=list)  # [(case id, [how, ...], {failing tensor: failing elements})]
    engine_error: str = None
    stage: str = None
    seconds: float = 0.0
    problem: str = None  # the fault could not be applied

    @property
    def is_caught(self):
        return bool(self.caught) or self.engine_error is not None


def load(path, root, display, suite="attention"):
    """The faults, checked: those of the suite's bundles (ops/<suite>/*.json, then ops/<suite>.json's
    shared ones), or of the file `path` (--catalogue); every key present, a declared op (or SHARED),
    a known engine and area, and one declaration of `within` in that engine's tree whose text holds
    `find` exactly once."""
    if path is None:
        entries = [(entry, display(file)) for entry, file in ops.fault_entries(suite)]
    else:
        entries = [(entry, display(path)) for entry in read_list(path, display)]
    faults, seen, declared = [], set(), ops.declarations(suite).ops
    for n, (entry, source) in enumerate(entries):
        where = f"fault {n} of {source}"
        if (not isinstance(entry, dict) or not KEYS <= set(entry) <= KEYS | OPTIONAL
                or not all(isinstance(v, str) for v in entry.values())):
            raise InputError(f"{where} must have exactly the string fields {sorted(KEYS)} (and optionally "
                             f"{sorted(OPTIONAL)}); a fault names the declaration that holds its text, not a file")
        fault = Fault(**entry)
        where = f"fault '{fault.id}' in {source}"
        if fault.id in seen:
            raise InputError(f"{where}: the id is used twice")
        seen.add(fault.id)
        if fault.op != SHARED and fault.op not in declared:
            raise InputError(f"{where}: its op {fault.op!r} is not declared in ops/{suite}/; set 'op' to the op "
                             f"the fault targets, one declared in its bundle, or {SHARED!r} for the numeric core every op "
                             "runs on (docs/faults.md)")
        if fault.engine not in ENGINES or fault.area not in AREAS:
            raise InputError(f"{where}: engine must be one of {ENGINES} and area one of {AREAS}")
        if fault.find == fault.replace:
            raise InputError(f"{where}: its 'find' and 'replace' are the same text; make 'replace' the fault")
        if fault.witness is not None and fault.engine != "port":
            raise InputError(f"{where}: a witness is checked through --port-cmd, so only a port fault can have one")
        try:
            fault.file = anchors.locate(root, TREES[fault.engine][0], fault.within, fault.find).file
        except anchors.AnchorError as exc:
            raise InputError(f"{where}: {exc}") from None
        faults.append(fault)
    return faults


def read_list(path, display):
    """The non-empty list 'faults' of the file `path`."""
    try:
        doc = read(path)  # bounded and without blocking: a pipe or /dev/zero is said at once
    except DocumentError as exc:
        raise InputError(f"the fault catalogue {display(path)} cannot be read: {exc}; fix it or give another "
                         "--catalogue (it lists the faults, one text edit each: docs/faults.md)") from None
    entries = doc.get("faults") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise InputError(f"the fault catalogue {display(path)} needs a non-empty list 'faults' (docs/faults.md)")
    return entries


def apply(fault, root, into):
    """Copy the fault's engine tree from root into `into` and apply the edit there, inside the
    declaration `within` (anchors.locate in the copy). Returns the edited file's path."""
    for part in TREES[fault.engine]:
        source, target = Path(root) / part, Path(into) / part
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "node_modules"))
        else:
            shutil.copy2(source, target)
    span = anchors.locate(into, TREES[fault.engine][0], fault.within, fault.find)
    path = Path(into) / span.file
    text = path.read_text(encoding="utf-8")
    [found] = anchors.occurrences(fault.find, text, span.start, span.end, span.file)
    start, end, replace = widened(text, found.start, found.end, fault.find, anchors.renamed(fault.replace, found.renamed))
    path.write_text(text[:start] + replace + text[end:], encoding="utf-8")
    return path


def widened(text, start, end, find, replace):
    """The match covers tokens only. The whitespace `find` has before its first token and after its
    last is taken in too where the text has exactly that (so a verbatim find is a literal edit,
    indentation included); where it does not (a reformatted file), it is dropped from `replace`."""
    lead, trail = find[:len(find) - len(find.lstrip())], find[len(find.rstrip()):]
    if text[:start].endswith(lead):
        start -= len(lead)
    elif replace.startswith(lead):
        replace = replace[len(lead):]
    if text[end:].startswith(trail):
        end += len(trail)
    elif replace.endswith(trail):
        replace = replace[:len(replace) - len(trail)]
    return start, end, replace


def faulty_engine(fault, copy_root, root):
    if fault.engine == "port":
        return engines_mod.Engine("port", [str(engines_mod.node_binary()), str(Path(copy_root) / "port_ts/src/cli.ts"), "run"], Path(root))
    return engines_mod.Engine("reference", [sys.executable, "-m", "reference", "run"], Path(copy_root))


class Baselines:
    """The unmodified engines' outputs per stage, run once (lazily, one stage at a time). Every
    verification of the command shares one verdict.Reader that remembers the kept documents, so
    each is read and validated once, not once per fault."""

    def __init__(self, ctx, every, work, timeout, policy, display, out):
        self.ctx, self.every, self.work, self.timeout, self.policy = ctx, every, Path(work), timeout, policy
        self.display, self.out = display, out
        self.reader = verdict.Reader(ctx.schemas, memo=True)
        self.real = {"reference": engines_mod.reference_engine(ctx.root), "port": engines_mod.port_engine(ctx.root)}
        self.done, self.lock = {}, threading.Lock()
        self.seconds = 0.0

    def cases(self, stage):
        rule = dict(STAGES)[stage]
        return [c for c in self.every if rule(c)]

    def get(self, stage):
        """(cached engines {name: Engine}, ids of the stage's cases that pass unmodified)."""
        with self.lock:
            if stage not in self.done:
                self.done[stage] = self._run(stage)
            return self.done[stage]

    def _run(self, stage):
        started = time.monotonic()
        selected = self.cases(stage)
        extra, not_run = assets.plan(selected)
        specs = [c.spec for c in selected if c.id not in not_run]
        base = self.work / f"baseline-{stage}"
        try:
            runs = schedule.run_all(list(self.real.values()), specs, base / "runs", self.timeout, jobs=2, extra=extra)
        except InputError as exc:
            raise InputError(f"the unmodified engines do not run the {stage} cases ({exc}); "
                             "fix that first: `verify attention` must run before faults can be judged") from None
        cached = {}
        for name, run in runs.items():
            cache = base / f"cache-{name}"
            cache.mkdir(parents=True)
            (cache / layout.STATUSES).write_text(json.dumps(run.statuses), encoding="utf-8")
            (cache / layout.KEPT_OUT).symlink_to(run.out_dir.resolve(), target_is_directory=True)
            cached[name] = engines_mod.cached(self.real[name], cache)
        report = suite.run(self.ctx, selected, {c.id for c in self.every}, [cached["reference"], cached["port"]],
                           suite.RunOptions(self.policy, jobs=1, reader=self.reader))
        passing = {c["id"] for c in report.cases if c["passed"]}
        failing = [c["id"] for c in report.cases if not c["passed"]]
        self.seconds += time.monotonic() - started
        print(f"baseline {stage}: {len(passing)} of {len(selected)} cases pass on the unmodified tree "
              f"({time.monotonic() - started:.1f} s)", file=self.out, flush=True)
        if failing:
            print(f"  note: failing already, so they cannot witness a fault: {', '.join(failing)}", file=self.out, flush=True)
        return cached, passing


def run_fault(fault, root, baselines, all_ids, stages, timeout):
    outcome = Outcome(fault)
    started = time.monotonic()
    with lifecycle.temp_dir("verify-fault-") as copy_root:
        apply(fault, root, copy_root)
        faulty = faulty_engine(fault, copy_root, root)
        for stage in stages:
            selected = baselines.cases(stage)
            if not selected:
                continue
            cached, passing = baselines.get(stage)
            engine_list = [faulty, cached["port"]] if fault.engine == "reference" else [cached["reference"], faulty]
            ctx = suite.Context(baselines.ctx.root, baselines.ctx.suite, baselines.ctx.schemas,
                                baselines.ctx.golden_dir, timeout, baselines.ctx.display)
            outcome.stage = stage
            try:
                report = suite.run(ctx, selected, all_ids, engine_list,
                                   suite.RunOptions(baselines.policy, jobs=1, reader=baselines.reader))
            except InputError as exc:
                outcome.engine_error = str(exc)
                break
            outcome.caught += [(c["id"], known_faults.how(c, baselines.policy.bitwise), known_faults.failed_tensors(c))
                               for c in report.cases if not c["passed"] and c["id"] in passing]
            if outcome.caught and not baselines.all_stages:
                break
    outcome.seconds = time.monotonic() - started
    return outcome


def line(outcome):
    f = outcome.fault
    head = f"{'CAUGHT' if outcome.is_caught else 'MISSED'} {f.engine:<9} {f.area:<9} {f.id}"
    if outcome.engine_error is not None:
        return f"{head}: engine error in stage {outcome.stage}: {outcome.engine_error[:160]} ({outcome.seconds:.1f} s)"
    if not outcome.caught:
        return f"{head}: no case failed in any stage ({outcome.seconds:.1f} s): {f.description}"
    shown = ", ".join(f"{cid} ({'; '.join(kinds)})" for cid, kinds, _ in outcome.caught[:4])
    more = f" and {len(outcome.caught) - 4} more" if len(outcome.caught) > 4 else ""
    return f"{head}: {len(outcome.caught)} case(s) in stage {outcome.stage}: {shown}{more} ({outcome.seconds:.1f} s)"


def parser():
    p = argparse.ArgumentParser(prog="verify faults",
                                description="For each fault (one text edit of one engine's source) run the "
                                            "verification with the faulty engine against the unmodified other "
                                            "engine's kept output, stage by stage (fast cases first), and name the "
                                            "cases that catch it. Exit 0 only when every fault is caught, 1 when one "
                                            "is missed, 2 on a usage or input error.")
    p.add_argument("suite", choices=cli.SUITES, help="the suite whose fault catalogue to run")
    p.add_argument("--fault", metavar="PATTERN", action="append", default=[],
                   help="run only faults whose id matches PATTERN (glob on the whole id, or a substring); repeatable")
    p.add_argument("--jobs", type=options.jobs, default=2, metavar="N", help="faults run at once (default 2)")
    options.timeout_option(p, "stop a faulty engine that runs longer than this; counted as caught", FAULT_TIMEOUT)
    options.tol_option(p, "tolerance")
    p.add_argument("--all-stages", action="store_true",
                   help="run every stage for every fault, also after a stage has caught it")
    options.bitwise_option(p)
    p.add_argument("--catalogue", type=Path, metavar="FILE",
                   help="read the faults from FILE (a list 'faults') instead of the bundles, ops/<suite>/")
    p.add_argument("--cases-dir", type=Path, metavar="DIR",
                   help="run the cases of DIR/*.json instead of ops/<suite> (a smaller catalogue of cases)")
    p.add_argument("--golden-dir", type=Path, metavar="DIR",
                   help="judge against the goldens in DIR/reference and DIR/port instead of golden/<suite>")
    return p


def run(args, out):
    """The `verify faults SUITE` command; returns the exit code."""
    project = cli.Project(args, args.suite)
    started = time.monotonic()
    faults = load(args.catalogue, project.root, project.display, project.suite)
    source = project.display(args.catalogue) if args.catalogue else f"ops/{project.suite}/"
    if args.fault:
        faults = [f for f in faults if any(catalogue.matches(f.id, p) for p in args.fault)]
        if not faults:
            raise InputError(f"no fault in {source} matches {', '.join(map(repr, args.fault))}")
    every, _ = project.cases([])
    stages = [name for name, _ in STAGES]
    report = {"suite": project.suite, "catalogue": source, "faults": []}
    with lifecycle.temp_dir("verify-faults-") as work:
        baselines = Baselines(project.context(args.timeout), every, work, args.timeout,
                              verdict.Policy(args.tol, args.bitwise), project.display, out)
        baselines.all_stages = args.all_stages
        baselines.get("fast")  # refuse early when the unmodified tree does not run
        all_ids = {c.id for c in every}
        pool = ThreadPoolExecutor(max_workers=args.jobs)
        try:
            futures = [pool.submit(run_fault, f, project.root, baselines, all_ids, stages, args.timeout)
                       for f in faults]
            outcomes = []
            for future in futures:
                outcome = future.result()
                outcomes.append(outcome)
                print(line(outcome), file=out, flush=True)
        finally:  # on a signal or an error, the faults not yet started never start
            pool.shutdown(cancel_futures=True)
    caught = sum(o.is_caught for o in outcomes)
    wall = time.monotonic() - started
    for o in outcomes:
        report["faults"].append({
            "id": o.fault.id, "op": o.fault.op, "engine": o.fault.engine, "area": o.fault.area,
            "description": o.fault.description,
            "caught": o.is_caught, "stage": o.stage, "engine_error": o.engine_error, "seconds": round(o.seconds, 2),
            "cases": [{"id": cid, "how": kinds, "tensors": tensors} for cid, kinds, tensors in o.caught],
        })
    report.update(caught=caught, total=len(outcomes), seconds=round(wall, 1), baseline_seconds=round(baselines.seconds, 1),
                  stages={stage: sorted(baselines.done[stage][1]) for stage, _ in STAGES if stage in baselines.done})
    target = project.root / "reports" / f"faults-{project.suite}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(target, json.dumps(report, indent=2) + "\n")
    missed = [o.fault.id for o in outcomes if not o.is_caught]
    if missed:
        print(f"missed: {', '.join(missed)}; add a case that catches each (docs/faults.md), never weaken a fault", file=out)
    print(f"{caught} of {len(outcomes)} faults caught in {wall:.0f} s (baselines {baselines.seconds:.0f} s, "
          f"--jobs {args.jobs}); report {project.display(target)}", file=out)
    return EXIT_PASS if not missed else EXIT_MISMATCH
