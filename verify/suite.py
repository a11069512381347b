"""One verification run: the engines scheduled (verify/schedule.py), each case judged as soon as
both engines have reported it (verify/verdict.py), its replay and evaluation joined once the port
has replayed it (the segments its free run already computed from the reference's own states are
derived from that free run, not replayed: verify/replay.py), giving the report (a plain dict, the shape of golden/schemas/report.schema.json
before non-finite numbers are turned into strings). `verify attention`, `verify regen` and
`verify faults` all run this; `verify show` decides a saved report with verify/verdict.py."""

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import assets
from . import documents
from . import lifecycle
from . import goldens
from . import replay as replay_mod
from . import schedule
from . import verdict
from .errors import InputError
from .timings import Timings


@dataclass
class Context:
    root: Path
    suite: str
    schemas: object
    golden_dir: Path
    timeout: float
    display: object = field(default=lambda p: str(p))


def _unknown_op(run, case, display):
    """An op the reference does not know is a catalogue error, not a mismatch."""
    status = run.statuses.get(case.id) or {}
    error = str(status.get("error") or "")
    if not status.get("ok", True) and error.startswith("unknown op"):
        raise InputError(f"case '{case.id}' in {display(case.file)} has an op the reference engine does not know: {error}")


def keep_run(run, cache_dir):
    """An engine's finished run kept where verify/cached_engine.py answers from it: cache_dir/out
    (its files) and cache_dir/statuses.json."""
    cache_dir = Path(cache_dir)
    shutil.copytree(run.out_dir, cache_dir / "out", symlinks=True)
    (cache_dir / "statuses.json").write_text(json.dumps(run.statuses), encoding="utf-8")


def summary(cases):
    """The counts of a report: passed, failed, and how the cases that ran compare bit by bit."""
    return {
        "passed": sum(c["passed"] for c in cases),
        "failed": sum(not c["passed"] for c in cases),
        "bit_identical": sum(c["status"] == verdict.BIT_IDENTICAL for c in cases),
        "within_tolerance": sum(c["status"] == verdict.WITHIN for c in cases),
        "not_run": sum(c["status"] == verdict.NOT_RUN for c in cases),
    }


def run(ctx, selected, all_ids, engines, policy, check_unused, jobs=2, progress=None, timings=None,
        previous_report=None, reader=None, keep=None, on_case=None, keep_reference=None, reference_cache=None,
        on_cache=None):
    """Run the engines on the selected cases and build the report dict. progress and timings are
    optional observers (verify/progress.py, verify/timings.py); they change nothing reported.
    reader: a verdict.Reader (verify faults shares one that remembers its kept documents). keep:
    a dict to fill with {case id: {role: Fresh}} (verify regen writes them as goldens). on_case(entry)
    is called once per case as soon as its verdict is known (a training case's once its replay
    is in), so a log shows progress; the report itself is in catalogue order. keep_reference: a
    directory to keep the reference's run in, as verify/cached_engine.py answers from it (the
    browsers' runs are judged against the same reference run). reference_cache: a
    verify.reference_cache.ReferenceCache answering the reference's side of the cases it holds
    (verify attention only); its outcome goes into the report as `reference_cache`, and
    on_cache(outcome, cases to run) is called once the cache has answered, before any engine runs.

    The engine processes are scheduled by verify/schedule.py (previous_report: the last JSON
    report, whose per-case seconds order the work). With jobs > 1 a case is judged as soon as
    both engines have reported it (and its replay part once the replay has), while the other
    processes still run; the result is the same as judging everything at the end, which is what
    jobs == 1 does: every case whose statuses changed after it was judged (an engine that printed
    a case's status line twice) is judged again, and an input error found while judging (a
    damaged golden) is raised only after the engines' own errors, in catalogue order."""
    extra, not_run = assets.plan(selected)  # pretrained cases: the model's directory, or why not run
    to_run = [c for c in selected if c.id not in not_run]
    specs = [c.spec for c in to_run]
    timings = timings or Timings()
    timings.jobs = jobs
    reader = reader or verdict.Reader(ctx.schemas)
    replays = {c.id: replay_mod.request_entry(c) for c in to_run if c.kind == "training" and replay_mod.segments_of(c)}
    costs = schedule.estimate_costs(specs, previous_report)
    by_id = {c.id: c for c in to_run}
    roles = [e.name for e in engines]
    told = set()

    def tell(entry):
        if on_case is not None and entry["id"] not in told:
            told.add(entry["id"])
            on_case(entry)

    not_run_entries = {c.id: verdict.decide(verdict.not_run_entry(c, ctx.display, not_run[c.id]), policy)
                       for c in selected if c.id in not_run}
    for entry in not_run_entries.values():
        tell(entry)
    with lifecycle.temp_dir("verify-") as work:  # named after this runner: a dead run's is reaped
        answered = {}
        if reference_cache is not None:
            with timings.section("reference cache"):
                answered["reference"] = reference_cache.fetch(specs, extra.get("assets"),
                                                              schedule.engine_dir(work, "reference"))
            if on_cache is not None:
                on_cache(reference_cache.outcome.to_dict(), len(to_run))
        planned = {}  # case id -> the segments its replay request holds (the others derived)

        def plan_replay(case_id, statuses):
            """The segments to replay, from the digests of the two engines' main documents
            (verify/replay.py, plan); called by the scheduler once both engines have reported."""
            docs = []
            for name in ("reference", "port"):
                try:
                    ok = bool((statuses.get(name) or {}).get("ok"))
                    docs.append(documents.read(live[name].out_dir / f"{case_id}.json") if ok else None)
                except documents.DocumentError:
                    docs.append(None)  # unreadable: every segment is replayed, the verdict says why
            planned[case_id] = replay_mod.plan(by_id[case_id], *docs)
            return planned[case_id]

        sched = schedule.Scheduler(engines, specs, work, ctx.timeout, jobs=jobs, extra=extra, replays=replays,
                                   costs=costs, progress=progress, answered=answered, planner=plan_replay)
        live = {n: sched.live[n] for n in roles}
        reference_dir = live["reference"].out_dir
        mains, replay_parts, failures, fresh_of = {}, {}, {}, {}  # case id -> (statuses used, entry); ...
        reported = {label: set() for label in roles + [schedule.REPLAY]}

        def judge_main(case, runs):
            used = tuple(runs[n].statuses.get(case.id) for n in roles)
            fresh = verdict.read_all(reader, case, runs)
            fresh_of[case.id] = (used, fresh)
            try:
                mains[case.id] = (used, verdict.judge(ctx, case, runs, policy, reader, fresh))
                failures.pop(case.id, None)
            except InputError as exc:  # a damaged committed golden: raised at the end, in order
                mains[case.id], failures[case.id] = (used, None), exc

        def reference_fresh(case):
            status = live["reference"].statuses.get(case.id)
            kept = fresh_of.get(case.id)
            if kept is not None and kept[0][0] == status:
                return kept[1]["reference"]
            return reader.fresh(live["reference"], case, "reference")

        def judge_replay(case, replay_run):
            used = replay_run.statuses.get(case.id) if replay_run is not None else None
            part = replay_mod.compare(case, reference_fresh(case), reference_dir, replay_run, policy.tol_of(case.spec),
                                      ctx.schemas, port_dir=live["port"].out_dir, replayed=planned.get(case.id))
            replay_parts[case.id] = (used, part)

        def advance(case_id):
            case = by_id[case_id]
            if case_id not in mains and all(case_id in reported[n] for n in roles):
                judge_main(case, live)
            if case_id in replays and case_id not in replay_parts:
                ref_status = live["reference"].statuses.get(case_id)
                no_replay = case_id in reported["reference"] and not (ref_status or {}).get("ok")
                if case_id in reported[schedule.REPLAY] or no_replay:
                    judge_replay(case, sched.live[schedule.REPLAY])
            entry = mains.get(case_id, (None, None))[1]
            if entry is not None and (case_id not in replays or case_id in replay_parts):
                if case_id in replays:
                    verdict.add_replay(entry, replay_parts[case_id][1], policy)
                tell(entry)

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
                status = r.statuses.get(case.id) or {}
                if "from_cache" not in status:  # a cached case cost this run nothing
                    timings.case(case.op, r.engine.name, status.get("seconds"))
        if replayed is not None:
            timings.engine(replayed, schedule.REPLAY)
            for case in selected:
                if case.id in replayed.statuses:
                    timings.case(case.op, schedule.REPLAY, replayed.statuses[case.id].get("seconds"))
        for case in to_run:
            _unknown_op(runs["reference"], case, ctx.display)
        runs = {n: runs[n] for n in roles}  # report in the engines' order
        if keep_reference is not None:
            keep_run(runs["reference"], keep_reference)
        if reference_cache is not None:
            with timings.section("reference cache"):
                reference_cache.store(runs["reference"], specs, extra.get("assets"))
        cases = []
        with timings.section("comparison: after the engines"):
            for case in selected:
                if case.id in not_run:
                    cases.append(not_run_entries[case.id])
                    continue
                final = tuple(runs[n].statuses.get(case.id) for n in roles)
                if case.id not in mains or mains[case.id][0] != final:
                    judge_main(case, runs)
                if case.id in failures:
                    raise failures[case.id]
                entry = mains[case.id][1]
                if case.id in replays:
                    final_replay = replayed.statuses.get(case.id) if replayed is not None else None
                    if case.id not in replay_parts or replay_parts[case.id][0] != final_replay:
                        judge_replay(case, replayed)
                    verdict.add_replay(entry, replay_parts[case.id][1], policy)
                cases.append(entry)
                tell(entry)
                if keep is not None:
                    keep[case.id] = fresh_of[case.id][1]
    unused = []
    if check_unused:
        names = sorted({d.get("engine") or role for c in cases for role, d in c["golden_details"].items()})
        unused = [ctx.display(p) for p in goldens.unused(ctx.golden_dir, names, all_ids)]
    return {
        "passed": all(c["passed"] for c in cases) and not unused,
        "suite": ctx.suite,
        "tolerance": policy.tol,
        "bitwise": policy.bitwise,
        "rule": "|port - reference| <= tol * (1 + |reference|)",
        "summary": summary(cases),
        "engines": {e.name: e.command for e in engines},
        "cases": cases,
        "unused_goldens": unused,
        **({"reference_cache": reference_cache.outcome.to_dict()} if reference_cache is not None else {}),
    }
