"""Scheduling the engine processes of one run so that the cores are never idle (docs/runner.md,
"Scheduling").

The work is three queues of cases: the reference's, the port's, and the port's replays of the
reference's training states (docs/training.md, "Replay"). The scheduler only runs processes and
tells what they reported: the caller reads `events`, (label, case id) once that label's process
has reported the case (its status line, or the end of the process without one), and None when
the scheduler is done. The replays it is to run are known up front (`replays`, their case ids),
but a replay is queued only once the caller submits its request (`submit_replay`: the case's
replay request entry, or None for no replay); the caller (verify/judge.py) plans it once both
engines have reported the case. The run is done when every process has ended and every expected
replay was submitted and run (or submitted as None).

`jobs` worker threads each run one engine process at a time; a free worker takes the most
expensive available case of any queue and, when that case is cheap, more cases of the same
queue, until the process has about `bundle_target()` seconds of work. So the long training runs
start first, on both engines at once, and the small cases fill the gaps in a few processes (an
engine process costs about 0.2 s to start, so there is never a process per small case).

Costs are estimates (`estimate_costs`): each engine's seconds for the case in the previous JSON
report, when it has them; otherwise the op's declared cost (COSTS, from ops/<suite>.json). A wrong estimate only changes the
order, never a result: every case is run by exactly one process per engine, each into the
engine's one directory, and the runner reads the same files whatever the order. The previous
report is read as every other document is (documents.read: a regular file of at most
MAX_BYTES, opened without blocking, parsed strictly), so a pipe, a device or a huge file there is no estimate,
never a wait.

With jobs == 1 nothing overlaps: one reference process on every case, then one port process,
then, once every replay was submitted, one replay process.
"""

import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import engines as engines_mod
from . import layout
from .documents import read
from .errors import InputError
from .ops import declarations

REPLAY = "replay"  # the label of the port's replay processes (the engine itself is the port)

# Seconds per case, used when the previous report does not have a case: each op's declared cost
# (ops/<suite>.json, `cost`; verify/ops.py). Only the order depends on them.
COSTS = declarations().costs()  # op -> (reference, port)
DEFAULT_COST = 0.01  # a case of an op that declares no cost
REPLAY_SHARE = 0.85  # a replay of every segment costs about this share of the port's free run
MIN_BUNDLE = 1.0  # seconds of estimated work below which a process takes more cases


def estimate_costs(specs, previous_report=None):
    """{(label, case id): estimated seconds} for "reference", "port" and "replay". The previous
    report's `seconds` are used where present and valid; anything unreadable there (not a
    regular file, too large, not JSON, nested too deep, another form) is ignored: it is only a
    hint."""
    seen = {}
    try:
        seen = _seconds_of(read(previous_report)["cases"]) if previous_report else {}
    except (ValueError, TypeError, AttributeError, KeyError):  # a DocumentError is a ValueError
        seen = {}
    costs = {}
    for spec in specs:
        static = COSTS.get(spec.get("op"), (DEFAULT_COST, DEFAULT_COST))
        for n, name in enumerate(("reference", "port")):
            costs[(name, spec["id"])] = seen.get((name, spec["id"]), static[n])
        costs[(REPLAY, spec["id"])] = REPLAY_SHARE * costs[("port", spec["id"])]
    return costs


def _valid_seconds(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def _seconds_of(cases):
    """{(engine label, case id): seconds} of a report's cases, each valid value."""
    return {(name, case["id"]): float(value) for case in cases
            for name, value in (case.get("seconds") or {}).items() if _valid_seconds(value)}


@dataclass
class Process:
    """One engine process as it ran: what it was given and what it took."""

    label: str
    ids: list
    started: float
    ended: float = None
    run: object = None  # its EngineRun, once it exited cleanly


@dataclass
class Live:
    """What the caller reads while the processes run: one engine's directory and the status lines
    received so far (case id -> status). `engine` and `out_dir` are those of EngineRun."""

    engine: object
    out_dir: Path
    statuses: dict = field(default_factory=dict)


@dataclass
class Cases:
    """What a scheduler runs. specs: the cases. extra: further request fields for every process
    (the pretrained cases' assets). replays: the ids of the training cases whose replay request
    the caller will submit (Scheduler.submit_replay). answered: {engine name: {case id: status
    line}} for cases whose output is already in that engine's directory (the reference cache,
    verify/reference_cache.py): no process runs them and their events come first. costs:
    estimate_costs(...), or None for the static table."""

    specs: list
    extra: dict = None
    replays: frozenset = frozenset()
    answered: dict = None
    costs: dict = None


class Scheduler:
    def __init__(self, engine_list, cases, work_dir, timeout, jobs=2, progress=None):
        """engine_list: the reference and the port (in report order); cases: Cases; work_dir: each
        engine's directory goes there (verify/layout.py)."""
        specs = cases.specs
        self.engines = {e.name: e for e in engine_list}
        self.order = [e.name for e in engine_list]
        self.work = Path(work_dir)
        self.timeout, self.jobs, self.extra = timeout, jobs, cases.extra or {}
        self.costs = cases.costs if cases.costs is not None else estimate_costs(specs)
        self.progress = progress
        self.specs = {s["id"]: s for s in specs}
        self.position = {s["id"]: i for i, s in enumerate(specs)}
        self.expected = frozenset(cases.replays) & set(self.specs)  # the replays the caller will submit
        self.replays = {}  # case id -> its submitted replay request entry (without from_dir)
        self.live = {name: Live(self.engines[name], layout.engine_dir(self.work, name)) for name in self.order}
        self.live[REPLAY] = Live(self.engines["port"], layout.replay_dir(self.work))
        self.processes = []  # Process, in start order
        self.events = queue.Queue()
        self.started = self.ended = None
        self._lock = threading.Condition()
        self.answered = {name: dict(found) for name, found in (cases.answered or {}).items() if name in self.live}
        for name, found in self.answered.items():
            self.live[name].statuses.update(found)
        self._queues = {name: self._sorted(name, [i for i in self.specs if i not in self.answered.get(name, {})])
                        for name in self.order}
        self._waiting = set(self.expected)  # replays not yet submitted
        self._queues[REPLAY] = []  # filled as the caller submits replays
        self._error = None
        self._stopped = False
        self._threads = []

    # --- the plan ---------------------------------------------------------------------------

    def _priority(self, label, case_id):
        """The case's own cost, plus, for a reference training case, the replay it unlocks: the
        pair is the longest chain of the run, so it starts first."""
        cost = self.costs.get((label, case_id), DEFAULT_COST)
        if label == "reference" and case_id in self.expected:
            cost += self.costs.get((REPLAY, case_id), DEFAULT_COST)
        return cost

    def _sorted(self, label, ids):
        return sorted(ids, key=lambda i: (-self._priority(label, i), self.position[i]))

    def remaining(self):
        """Estimated seconds of work not yet started (replays not yet submitted included)."""
        total = sum(self.costs.get((label, i), DEFAULT_COST) for label, ids in self._queues.items() for i in ids)
        return total + sum(self.costs.get((REPLAY, i), DEFAULT_COST) for i in self._waiting)

    def bundle_target(self):
        """A process takes cases until it has this many estimated seconds: a share of what is
        left, so processes are long while much is left and short near the end (both cores
        finish together), never below MIN_BUNDLE (the start-up of a process)."""
        return max(MIN_BUNDLE, self.remaining() / (2 * self.jobs))

    def _take(self):
        """The next process to start, as (label, [case ids]), or None when nothing is available
        now. Called with the lock held."""
        if self.jobs <= 1:  # sequential: each engine's every case in one process, then the replay
            for label in self.order:
                if self._queues[label]:
                    ids = sorted(self._queues[label], key=self.position.get)
                    self._queues[label] = []
                    return label, ids
            if self._queues[REPLAY] and not self._busy() and not self._waiting:
                ids = sorted(self._queues[REPLAY], key=self.position.get)
                self._queues[REPLAY] = []
                return REPLAY, ids
            return None
        heads = [(self._priority(label, q[0]), -n, label) for n, (label, q) in enumerate(self._queues.items()) if q]
        if not heads:
            return None
        label = max(heads)[2]
        target, q = self.bundle_target(), self._queues[label]
        ids, cost = [], 0.0
        while q and (not ids or cost < target):
            ids.append(q.pop(0))
            cost += self.costs.get((label, ids[-1]), DEFAULT_COST)
        return label, ids

    def _busy(self):
        return any(p.ended is None for p in self.processes)

    def submit_replay(self, case_id, request):
        """The caller's plan for an expected replay: its request entry (segments, evaluate,
        free_run; docs/protocol.md), queued to run, or None: the case has no replay (its reference
        failed it). Each expected replay is submitted once."""
        with self._lock:
            if case_id not in self._waiting:
                raise ValueError(f"replay of {case_id!r} submitted twice or never expected")
            self._waiting.discard(case_id)
            if request is not None:
                self.replays[case_id] = request
                self._queues[REPLAY] = self._sorted(REPLAY, self._queues[REPLAY] + [case_id])
            self._lock.notify_all()

    # --- running ----------------------------------------------------------------------------

    def start(self):
        self.started = time.monotonic()
        if self.progress is not None:
            for name in self.order:
                self.progress.start(name, len(self.specs))
            if self._waiting or self._queues[REPLAY]:
                self.progress.start(REPLAY, len(self._waiting) + len(self._queues[REPLAY]))
            for name, found in self.answered.items():
                for _ in found:
                    self.progress.advance(name)
        for name, found in self.answered.items():
            for case_id in found:
                self.events.put((name, case_id))
        work = sum(map(len, self._queues.values())) + len(self._waiting)
        for _ in range(max(1, min(self.jobs, work))):  # a thread per process that can run, never more
            t = threading.Thread(target=self._worker, daemon=True)
            self._threads.append(t)
            t.start()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self):
        for t in self._threads:
            t.join()
        self.ended = time.monotonic()
        self.events.put(None)

    def _worker(self):
        while True:
            with self._lock:
                while True:
                    if self._error is not None or self._stopped:
                        return
                    task = self._take()
                    if task is not None:
                        break
                    if not self._busy() and not self._waiting:
                        return  # nothing runs and nothing is left to start: the run is complete
                    self._lock.wait()  # a running process, or the caller, may yet give a replay
                label, ids = task
                process = Process(label, ids, time.monotonic())
                self.processes.append(process)
            try:
                run = self._run(label, ids)
            except InputError as exc:
                with self._lock:
                    process.ended = time.monotonic()
                    if self._error is None and not self._stopped:
                        self._error = exc
                        engines_mod._kill_live()  # the run is over: stop the other processes now
                    self._lock.notify_all()
                return
            with self._lock:
                process.ended, process.run = time.monotonic(), run
                for case_id in ids:
                    if case_id not in self.live[label].statuses:  # no status line: reported as such
                        self.events.put((label, case_id))
                self._lock.notify_all()

    def _run(self, label, ids):
        engine = self.engines["port" if label == REPLAY else label]
        specs = [self.specs[i] for i in ids]
        extra = dict(self.extra)
        if label == REPLAY:
            from_dir = self.live["reference"].out_dir
            extra["replay"] = {i: dict(self.replays[i], from_dir=str(layout.states(from_dir, i))) for i in ids}
        wanted = set(ids)

        def on_status(status):
            if self._error is not None or self._stopped:
                engines_mod._kill_live()  # started just as the run failed or was interrupted
                return
            case_id = status["id"]
            if case_id not in wanted:
                return  # refused when the process ends (docs/protocol.md)
            with self._lock:
                self.live[label].statuses[case_id] = status
            if self.progress is not None:
                self.progress.advance(label)
            self.events.put((label, case_id))

        return engines_mod.run(engine, specs, self.live[label].out_dir, self.timeout, extra=extra, on_status=on_status)

    def next_event(self, poll=0.5):
        """The next event (blocking; None once every process has ended). Polls, so that the
        main thread stays responsive to KeyboardInterrupt."""
        while True:
            try:
                return self.events.get(timeout=poll)
            except queue.Empty:
                continue

    def stop(self):
        """Stop everything (KeyboardInterrupt): no new process, the running ones killed."""
        with self._lock:
            self._stopped = True
            self._lock.notify_all()
        engines_mod._kill_live()

    # --- the outcome ------------------------------------------------------------------------

    def result(self):
        """Once `events` gave None: ({engine name: EngineRun}, the replay's EngineRun or None),
        with the statuses exactly as each process's run() validated them; or the first error."""
        if self._error is not None:
            raise self._error
        runs = {}
        for label in self.order + [REPLAY]:
            mine = [p for p in self.processes if p.label == label]
            if label == REPLAY and not mine:
                runs[label] = None
                continue
            merged = engines_mod.EngineRun(engine=self.live[label].engine, out_dir=self.live[label].out_dir,
                                           processes=len(mine))
            merged.statuses.update(self.answered.get(label, {}))
            for p in mine:
                merged.statuses.update(p.run.statuses)
                merged.stderr += p.run.stderr
            if mine:  # the engine's span: from its first process's start to its last one's exit
                merged.wall = max(p.ended for p in mine) - min(p.started for p in mine)
            starts = [p.run.startup for p in mine if p.run.startup is not None]
            merged.startup = sum(starts) / len(starts) if starts else None
            merged.busy = sum(p.ended - p.started for p in mine)
            runs[label] = merged
        replay = runs.pop(REPLAY)
        return runs, replay

    def span(self):
        """Seconds from the first process's start to the last one's exit."""
        if not self.processes:
            return 0.0
        return max(p.ended for p in self.processes) - min(p.started for p in self.processes)


def run_all(engines, case_specs, work_dir, timeout, jobs=2, progress=None, extra=None):
    """Run the engines on the cases, each into work_dir/<name>, without replays; {name: EngineRun}.
    Scheduled as `verify attention` schedules them: jobs is how many engine processes may run at
    once; 1 runs the engines one after the other, each in one process. extra: further request
    fields for every process (the pretrained cases' assets). The first engine-level error stops
    the other processes and is raised."""
    sched = Scheduler(engines, Cases(case_specs, extra=extra), work_dir, timeout, jobs=jobs, progress=progress)
    sched.start()
    try:
        while sched.next_event() is not None:
            pass
    except KeyboardInterrupt:  # the engines run in their own sessions: stop them too
        sched.stop()
        raise
    runs, _ = sched.result()
    return runs
