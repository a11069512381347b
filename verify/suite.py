"""One verification run (`run`), top to bottom: 1. the catalogue's selected cases, less those that
cannot run here ("not run"); 2. the engine runs, scheduled as processes (verify/schedule.py);
3. each case judged once as both engines report it (verify/judge.py); 4. every entry decided
(verify/verdict.py), in catalogue order, and the failing forward cases arbitrated by PyTorch
(verify/arbiter.py); 5. the report (verify/records.py's Report), which the renderers draw.
`verify attention`, `regen`, `faults` and the browsers all run this."""

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import arbiter, assets, attribution, goldens, layout, lifecycle, schedule, verdict
from .errors import InputError
from .judge import Judge
from .plain import plain
from .records import Report
from .timings import Timings


@dataclass
class Context:
    root: Path
    suite: str
    schemas: object
    golden_dir: Path
    timeout: float
    display: object = field(default=lambda p: str(p))


@dataclass
class RunOptions:
    """How a run goes, and what its caller observes or keeps; none of it changes a verdict."""

    policy: verdict.Policy = field(default_factory=verdict.Policy)
    check_unused: bool = False  # committed goldens no case uses fail the run
    jobs: int = 2  # engine processes at once (1: one after the other, every case judged after them)
    progress: object = None  # verify/progress.py
    timings: Timings = field(default_factory=Timings)
    previous_report: Path = None  # the last JSON report, whose per-case seconds order the work
    reader: verdict.Reader = None  # verify faults shares one that remembers its kept documents
    on_case: object = None  # on_case(entry): told once per case as soon as its verdict is known
    keep: dict = None  # filled with {case id: {role: Fresh}} (verify regen writes them as goldens)
    keep_reference: Path = None  # where to keep the reference's run for verify/cached_engine.py (browsers)
    reference_cache: object = None  # a reference_cache.ReferenceCache answering the reference's side
    on_cache: object = None  # on_cache(outcome, cases to run): told once the cache has answered
    oracle: str = "none"  # the arbiter of failing forward cases (verify/arbiter.py): "auto", "torch" or "none"
    attribute: bool = False  # the failing cases of a composed op attributed to a sub-layer (verify/attribution.py)


def run(ctx, selected, all_ids, engines, options):
    """The Report of the selected cases. all_ids: every case of the catalogue (a golden of none
    of them is unused). An engine's own error (exit 2) is raised before an input error."""
    timings, on_case = options.timings, options.on_case or (lambda entry: None)
    timings.jobs = options.jobs
    # 1. catalogue: the pretrained cases' model directory, or why a case cannot run here
    extra, not_run = assets.plan(selected)
    to_run = [c for c in selected if c.id not in not_run]
    not_run_entries = {c.id: verdict.decide(verdict.not_run_entry(c, ctx.display, not_run[c.id]), options.policy)
                       for c in selected if c.id in not_run}
    for entry in not_run_entries.values():
        on_case(entry)
    with lifecycle.temp_dir("verify-") as work:  # named after this runner: a dead run's is reaped
        # 2. engine runs: the reference cache's answers first, then the processes
        specs = [c.spec for c in to_run]
        to_schedule = schedule.Cases(specs, extra=extra, replays=Judge.replays(to_run),
                                     answered=_cached_answers(to_run, extra, work, options),
                                     costs=schedule.estimate_costs(specs, options.previous_report))
        sched = schedule.Scheduler(engines, to_schedule, work, ctx.timeout, options.jobs, options.progress)
        # 3. per-case judge: fed the scheduler's events, it plans the replays and judges each case once
        judge = Judge(ctx, to_run, sched, options.policy, options.reader or verdict.Reader(ctx.schemas),
                      on_done=on_case, during=options.jobs > 1 and not plain())
        runs = _run_engines(sched, judge, selected, timings)
        for case in to_run:
            _unknown_op(runs["reference"], case, ctx.display)
        _keep_reference(runs["reference"], to_run, extra, options)
        # 4. verdict: every case decided, in catalogue order
        with timings.section("comparison: after the engines"):
            judged = judge.finish()
        # 4b. the arbiter: PyTorch on the failing forward cases only, from the same handed inputs
        arbiter.arbitrate(ctx, [(c, judged[c.id]) for c in to_run], {i: judge.cases[i].fresh for i in judged},
                          runs["reference"].out_dir, work, options.oracle, timings)
        if options.attribute and attribution.wanted(to_run, judged):  # only on failure: a passing run traces nothing
            with timings.section("attribution: the failing cases' sub-layers"):
                attribution.attribute(to_run, judged, engines, work, ctx.timeout, options.policy.tol,
                                      extra.get("assets"))
        if options.keep is not None:
            options.keep.update({case_id: judge.cases[case_id].fresh for case_id in judged})
    # 5. report
    entries = [not_run_entries.get(c.id) or judged[c.id] for c in selected]
    return _report(ctx, entries, engines, options, all_ids)


def _cached_answers(to_run, extra, work, options):
    """{"reference": {case id: status}} of the cases the reference cache answers (their files put
    where the reference's run writes), or {} without a cache."""
    cache = options.reference_cache
    if cache is None:
        return {}
    specs = [c.spec for c in to_run]
    with options.timings.section("reference cache"):
        answered = {"reference": cache.fetch(specs, extra.get("assets"), layout.engine_dir(work, "reference"))}
    if options.on_cache is not None:
        options.on_cache(cache.outcome.to_dict(), len(to_run))
    return answered


def _run_engines(sched, judge, selected, timings):
    """Run the scheduler to its end, each of its events given to the judge; {engine name:
    EngineRun} in the engines' order (the judge reads the replay's from the scheduler's live)."""
    timings.add("engines", 0.0)  # listed before the comparisons; the span is added at the end
    sched.start()
    try:
        while True:
            waited = time.monotonic()
            event = sched.next_event()
            timings.waited(time.monotonic() - waited)
            if event is None:
                break
            with timings.section("comparison: during the engines"):
                judge.event(*event)
    except BaseException:  # interrupted, or the judge failed: the engines run in their own sessions
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
    return {e: runs[e] for e in sched.order}


def _unknown_op(run, case, display):
    """An op the reference does not know is a catalogue error, not a mismatch."""
    status = run.statuses.get(case.id) or {}
    error = str(status.get("error") or "")
    if not status.get("ok", True) and error.startswith("unknown op"):
        raise InputError(f"case '{case.id}' in {display(case.file)} has an op the reference engine does not know: {error}")


def _keep_reference(reference_run, to_run, extra, options):
    """The reference's run kept for the browsers, where verify/cached_engine.py answers from it
    (verify/layout.py), and stored in the reference cache."""
    if options.keep_reference is not None:
        kept = Path(options.keep_reference)
        shutil.copytree(reference_run.out_dir, kept / layout.KEPT_OUT, symlinks=True)
        (kept / layout.STATUSES).write_text(json.dumps(reference_run.statuses), encoding="utf-8")
    if options.reference_cache is not None:
        with options.timings.section("reference cache"):
            options.reference_cache.store(reference_run, [c.spec for c in to_run], extra.get("assets"))


def summary(cases):
    """The counts of a report: passed, failed, and how the cases that ran compare bit by bit."""
    return {
        "passed": sum(c["passed"] for c in cases),
        "failed": sum(not c["passed"] for c in cases),
        "bit_identical": sum(c["status"] == verdict.BIT_IDENTICAL for c in cases),
        "within_tolerance": sum(c["status"] == verdict.WITHIN for c in cases),
        "not_run": sum(c["status"] == verdict.NOT_RUN for c in cases),
    }


def _report(ctx, cases, engines, options, all_ids):
    unused = []
    if options.check_unused:
        names = sorted({d.get("engine") or role for c in cases for role, d in c["golden_details"].items()})
        unused = [ctx.display(p) for p in goldens.unused(ctx.golden_dir, names, all_ids)]
    cache = options.reference_cache
    return Report(passed=all(c["passed"] for c in cases) and not unused, suite=ctx.suite,
                  tolerance=options.policy.tol, bitwise=options.policy.bitwise,
                  rule="|port - reference| <= tol * (1 + |reference|)", summary=summary(cases),
                  engines={e.name: e.command for e in engines}, cases=cases, unused_goldens=unused,
                  reference_cache=None if cache is None else cache.outcome.to_dict())
