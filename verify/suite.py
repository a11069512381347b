"""One verification run: engines -> validated documents -> reference vs port -> goldens, giving
the report (a plain dict, the shape of golden/schemas/report.schema.json before non-finite
numbers are turned into strings)."""

import time
from dataclasses import dataclass, field
from pathlib import Path

from . import assets
from . import lifecycle
from . import goldens
from . import replay as replay_mod
from . import schedule
from . import views
from .compare import compare_named
from .expectations import case_checks
from .documents import DocumentError, case_difference, decode_tensors, parse_bytes, read_bytes
from .errors import InputError
from .timings import Timings

REGEN_HINT = "run `verify regen {suite}`"


@dataclass
class Fresh:
    """One engine's output for one case, once read and validated (or why it is unusable)."""

    bytes: bytes = None
    doc: dict = None
    tensors: dict = None
    error: str = None


@dataclass
class Context:
    root: Path
    suite: str
    schemas: object
    golden_dir: Path
    timeout: float
    display: object = field(default=lambda p: str(p))


def read_fresh(run, case, schemas):
    """Read and check what an engine wrote for a case; problems become Fresh.error."""
    name = run.engine.name
    status = run.statuses.get(case.id)
    if status is None:
        return Fresh(error=f"{name}: gave no status line for this case")
    if not status["ok"]:
        error = str(status.get("error") or "failed without a message")
        return Fresh(error=f"{name}: {error}")
    path = run.out_dir / f"{case.id}.json"
    try:
        data = read_bytes(path)  # a regular file of bounded size; a link to /dev/zero or a pipe is refused unread
    except DocumentError as exc:
        if not path.exists():
            return Fresh(error=f"{name}: reported ok but wrote no {case.id}.json")
        return Fresh(error=f"{name}: wrote a {case.id}.json the runner does not read: {exc}")
    try:
        doc = parse_bytes(data)  # the bytes just read: each document is read and parsed once
        schemas.check("golden", doc)
        tensors = decode_tensors(doc)
    except DocumentError as exc:
        return Fresh(error=f"{name}: wrote an invalid golden document: {exc}")
    different = case_difference(case.spec, doc["case"])
    if different:
        return Fresh(error=f"{name}: echoed a different case: {different}")
    return Fresh(bytes=data, doc=doc, tensors=tensors)


def _unknown_op(run, case, display):
    """An op the reference does not know is a catalogue error, not a mismatch."""
    status = run.statuses.get(case.id) or {}
    error = str(status.get("error") or "")
    if not status.get("ok", True) and error.startswith("unknown op"):
        raise InputError(f"case '{case.id}' in {display(case.file)} has an op the reference engine does not know: {error}")


def run(ctx, selected, all_ids, engines, tol, check_unused, jobs=2, progress=None, timings=None, previous_report=None):
    """Run the engines on the selected cases and build the report dict. progress and timings are
    optional observers (verify/progress.py, verify/timings.py); they change nothing reported.

    The engine processes are scheduled by verify/schedule.py (previous_report: the last JSON
    report, whose per-case seconds order the work). With jobs > 1 a case is compared as soon as
    both engines have reported it (and its replay part once the replay has), while the other
    processes still run; the result is the same as comparing everything at the end, which is
    what jobs == 1 does: every case whose statuses changed after it was compared (an engine that
    printed a case's status line twice) is compared again, and an input error found while
    comparing is raised only after the engines' own errors, in catalogue order."""
    extra, not_run = assets.plan(selected)  # pretrained cases: the model's directory, or why not run
    to_run = [c for c in selected if c.id not in not_run]
    specs = [c.spec for c in to_run]
    timings = timings or Timings()
    replays = {c.id: replay_mod.request_entry(c) for c in to_run if c.kind == "training" and replay_mod.segments_of(c)}
    costs = schedule.estimate_costs(specs, previous_report)
    by_id = {c.id: c for c in to_run}
    names = [e.name for e in engines]
    with lifecycle.temp_dir("verify-") as work:  # named after this runner: a dead run's is reaped
        sched = schedule.Scheduler(engines, specs, work, ctx.timeout, jobs=jobs, extra=extra, replays=replays,
                                   costs=costs, progress=progress)
        live = {n: sched.live[n] for n in names}
        reference_dir = live["reference"].out_dir
        mains, replay_parts, failures = {}, {}, {}  # case id -> (statuses used, result); -> InputError
        reported = {label: set() for label in names + [schedule.REPLAY]}

        def compare_main(case, runs):
            used = tuple(runs[n].statuses.get(case.id) for n in names)
            try:
                mains[case.id] = (used, _main_result(ctx, case, runs, tol))
                failures.pop(case.id, None)
            except InputError as exc:  # a damaged committed golden: raised at the end, in order
                mains[case.id], failures[case.id] = (used, None), exc

        def compare_replay(case, replay_run):
            used = replay_run.statuses.get(case.id) if replay_run is not None else None
            replay_parts[case.id] = (used, replay_mod.compare(case, reference_dir, replay_run, tol))

        def advance(case_id):
            case = by_id[case_id]
            if case_id not in mains and all(case_id in reported[n] for n in names):
                compare_main(case, live)
            if case_id in replays and case_id not in replay_parts:
                ref_status = live["reference"].statuses.get(case_id)
                no_replay = case_id in reported["reference"] and not (ref_status or {}).get("ok")
                if case_id in reported[schedule.REPLAY] or no_replay:
                    compare_replay(case, sched.live[schedule.REPLAY])

        overlap = jobs > 1
        timings.add("engines", 0.0)  # listed before the comparisons; the span is added at the end
        sched.start()
        try:
            while True:
                waited = time.monotonic()
                event = sched.next_event()
                timings.waited(time.monotonic() - waited)
                if event is None:
                    break
                label, case_id = event
                reported[label].add(case_id)
                if overlap:
                    with timings.section("comparison: during the engines"):
                        advance(case_id)
        except KeyboardInterrupt:  # the engines run in their own sessions: stop them too
            sched.stop()
            raise
        runs, replayed = sched.result()  # an engine's own error (exit 2) comes first
        timings.add("engines", sched.span())
        for r in runs.values():
            timings.engine(r)
            for case in selected:
                timings.case(case.op, r.engine.name, (r.statuses.get(case.id) or {}).get("seconds"))
        if replayed is not None:
            timings.engine(replayed, schedule.REPLAY)
            for case in selected:
                if case.id in replayed.statuses:
                    timings.case(case.op, schedule.REPLAY, replayed.statuses[case.id].get("seconds"))
        for case in to_run:
            _unknown_op(runs["reference"], case, ctx.display)
        runs = {n: runs[n] for n in names}  # report in the engines' order
        cases = []
        with timings.section("comparison: after the engines"):
            for case in selected:
                if case.id in not_run:
                    cases.append(assets.not_run_result(case, ctx.display, not_run[case.id]))
                    continue
                final = tuple(runs[n].statuses.get(case.id) for n in names)
                if case.id not in mains or mains[case.id][0] != final:
                    compare_main(case, runs)
                if case.id in failures:
                    raise failures[case.id]
                result = mains[case.id][1]
                if case.id in replays:
                    final_replay = replayed.statuses.get(case.id) if replayed is not None else None
                    if case.id not in replay_parts or replay_parts[case.id][0] != final_replay:
                        compare_replay(case, replayed)
                    result["replay"] = replay_parts[case.id][1]
                    result["passed"] = result["passed"] and all(r["passed"] for r in result["replay"])
                else:
                    result["replay"] = []
                cases.append(result)
    unused = []
    if check_unused:
        unused = [ctx.display(p) for p in goldens.unused(ctx.golden_dir, [e.name for e in engines], all_ids)]
    passed = all(c["passed"] for c in cases) and not unused
    return {
        "passed": passed,
        "suite": ctx.suite,
        "tolerance": tol,
        "rule": "|port - reference| <= tol * (1 + |reference|)",
        "summary": {"passed": sum(c["passed"] for c in cases), "failed": sum(not c["passed"] for c in cases)},
        "engines": {e.name: e.command for e in engines},
        "cases": cases,
        "unused_goldens": unused,
    }


def _main_result(ctx, case, runs, tol):
    """A case's report entry without its replay part: both engines against each other and their
    goldens, the expectations, the views, and for a pretrained case the full documents."""
    result = _case_result(ctx, case, runs, tol)
    if case.kind == "pretrained" and all((r.statuses.get(case.id) or {}).get("ok") for r in runs.values()):
        full, errors = assets.compare_full(case, {n: r.out_dir for n, r in runs.items()}, tol, ctx.schemas)
        result["tensors"] += [t.to_dict() for t in full]
        result["errors"] += errors
        result["passed"] = result["passed"] and not errors and all(t.passed for t in full)
    return result


def _case_result(ctx, case, runs, tol):
    fresh = {name: read_fresh(r, case, ctx.schemas) for name, r in runs.items()}
    result = _verdict(ctx, case, fresh, tol)
    result["seconds"] = {}
    for name, r in runs.items():
        seconds = (r.statuses.get(case.id) or {}).get("seconds")
        ok = isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds >= 0
        result["seconds"][name] = float(seconds) if ok else None
    return views.enrich(result, case, fresh, tol)  # what the reports show: axes, decodes, curves, heatmaps


def _verdict(ctx, case, fresh, tol):
    errors = [f.error for f in fresh.values() if f.error]
    expect = case.spec.get("expect", {})
    may_drift = set(expect.get("may_drift", []))
    tensors = []
    ref, port = fresh["reference"], fresh["port"]
    if ref.doc is not None and port.doc is not None:
        for part, role in (("inputs", "input"), ("outputs", "output")):
            tensors += compare_named(role, ref.tensors[part], port.tensors[part], tol)
    drifted = []
    for t in tensors:  # a free run's records may drift: reported below, not failed
        if t.role == "output" and t.name in may_drift and not t.passed and t.message is None:
            t.passed = True
            drifted.append(t.name)
    checks, free_runs = case_checks(case.kind, expect, fresh, tol)
    golden_checks = {}
    for name, f in fresh.items():
        path = ctx.golden_dir / name / f"{case.id}.json"
        shown = ctx.display(path)
        if f.doc is None:
            golden_checks[name] = goldens.GoldenCheck("not run", shown, "the engine gave no usable output")
        else:
            golden_checks[name] = goldens.check(path, shown, f.bytes, f.doc, f.tensors, tol, ctx.schemas, may_drift)
    outdated = [f"{g.file} is missing" if g.status == "missing" else f"{g.file} is stale: {g.detail}"
                for g in golden_checks.values() if g.status in ("stale", "missing")]
    if outdated:
        errors.append(f"golden {'; golden '.join(outdated)}; {REGEN_HINT.format(suite=ctx.suite)}")
    passed = (not errors and all(t.passed for t in tensors) and all(g.passed for g in golden_checks.values())
              and all(c["passed"] for c in checks))
    return {
        "id": case.id,
        "kind": case.kind,
        "op": case.op,
        "file": ctx.display(case.file),
        "passed": passed,
        "goldens": {name: g.status for name, g in golden_checks.items()},
        "golden_details": {name: dict(g.to_dict(), label=g.label) for name, g in golden_checks.items()},
        "tensors": [t.to_dict() for t in tensors],
        "drifted": drifted,
        "checks": checks,
        "free_runs": free_runs,
        "errors": errors,
    }
