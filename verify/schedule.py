"""Scheduling the engine processes of one run so that the cores are never idle (docs/runner.md,
"Scheduling").

The work is three queues of cases: the reference's, the port's, and the port's replays of the
reference's training states (docs/training.md, "Replay"). A forward case reaches the port once
the reference has reported it: the port's request hands it the inputs of the reference's
document, and nothing else of it (docs/protocol.md, "Handed inputs"). The scheduler only runs processes and
tells what they reported: `events` gives (label, case id) once that label's process has reported
the case (its status line, or the end of the process without one), and None when all is done.
A replay is queued once the caller (verify/judge.py) submits its request (`submit_replay`).

`jobs` worker threads each run one engine process at a time; a free worker takes the most
expensive available case of any queue and, when that case is cheap, more cases of the same
queue, until the process has about `bundle_target()` seconds of work: the long training runs
start first, and the small cases fill the gaps in a few processes. Costs (`estimate_costs`) only
change the order, never a result. With jobs == 1 nothing overlaps: one reference process on every
case, then one port process, then, once every replay was submitted, one replay process.
"""

import json
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import engines as engines_mod
from . import layout, lifecycle
from .documents import read
from .files import write_atomically
from .errors import InputError

REPLAY = "replay"  # the label of the port's replay processes (the engine itself is the port)
# Seconds per case in either engine before a report has measured it: a guess by kind, so that a
# first run starts the training runs first (a forward case takes milliseconds).
FIRST_GUESS = {"training": 5.0, "gradcheck": 0.5, "pretrained": 0.5}
DEFAULT_COST = 0.01  # a forward case, and anything else unmeasured
REPLAY_SHARE = 0.85  # a replay of every segment costs about this share of the port's free run
MIN_BUNDLE = 1.0  # seconds of estimated work below which a process takes more cases


def estimate_costs(specs, previous_report=None):
    """{(label, case id): estimated seconds} for "reference", "port" and "replay": each engine's
    valid `seconds` in the previous JSON report, else FIRST_GUESS by the case's kind. The previous
    report is only a hint: read as every document is (documents.read), and ignored when unreadable."""
    seen = {}
    try:
        if previous_report:
            seen = {(name, case["id"]): float(value) for case in read(previous_report)["cases"]
                    for name, value in (case.get("seconds") or {}).items()
                    if type(value) in (int, float) and value >= 0}
    except (ValueError, TypeError, AttributeError, KeyError):  # a DocumentError is a ValueError
        seen = {}
    costs = {}
    for spec in specs:
        guess = FIRST_GUESS.get(spec.get("kind"), DEFAULT_COST)
        for name in ("reference", "port"):
            costs[(name, spec["id"])] = seen.get((name, spec["id"]), guess)
        costs[(REPLAY, spec["id"])] = REPLAY_SHARE * costs[("port", spec["id"])]
    return costs


HANDED_KINDS = ("forward", "gradcheck")  # the kinds whose inputs the reference draws and hands the port
HANDED_KEYS = ("inputs", "parameters", "position")  # all a handed document may hold (docs/protocol.md)


def hand_inputs(reference_dir, work_dir, case_id):
    """The path of the document handed to the port for a case: what the reference drew for it
    (<id>.handed.json: its inputs, a gradient check's parameters, the generator's position after
    them), rewritten under work_dir with those fields alone, never an output (a port that copied
    what it was handed must not pass); None when that document cannot be read (the verdict fails
    the case then)."""
    path = layout.handed(work_dir, case_id)
    try:
        doc = read(layout.drawn(reference_dir, case_id))
        if not (isinstance(doc, dict) and isinstance(doc.get("inputs"), dict)):
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, json.dumps({k: doc[k] for k in HANDED_KEYS if k in doc}, allow_nan=False))
    except (OSError, ValueError):  # a DocumentError is a ValueError
        return None
    return path


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
    """One engine's directory and the status lines received so far (case id -> status)."""

    engine: object
    out_dir: Path
    statuses: dict = field(default_factory=dict)


@dataclass
class Cases:
    """What a scheduler runs. extra: further request fields for every process (the pretrained
    cases' assets). replays: the ids of the training cases whose replay the caller will submit.
    answered: {engine name: {case id: status}} of cases already in that engine's directory (the
    reference cache): no process runs them and their events come first. costs: estimate_costs(...),
    or None for the declared costs."""

    specs: list
    extra: dict = None
    replays: frozenset = frozenset()
    answered: dict = None
    costs: dict = None


class Scheduler:
    def __init__(self, engine_list, cases, work_dir, timeout, jobs=2, progress=None):
        """engine_list: the reference and the port (in report order); cases: Cases; work_dir: each
        engine's directory goes there (verify/layout.py)."""
        engines = {e.name: e for e in engine_list}
        self.order = list(engines)
        self.timeout, self.jobs, self.extra, self.progress = timeout, jobs, cases.extra or {}, progress
        self.costs = cases.costs if cases.costs is not None else estimate_costs(cases.specs)
        self.specs = {s["id"]: s for s in cases.specs}
        self.position = {s["id"]: i for i, s in enumerate(cases.specs)}
        self.expected = frozenset(cases.replays) & set(self.specs)  # the replays the caller will submit
        self.replays = {}  # case id -> its submitted replay request entry (without from_dir)
        self.work_dir = Path(work_dir)
        self.live = {name: Live(e, layout.engine_dir(work_dir, name)) for name, e in engines.items()}
        self.live[REPLAY] = Live(engines["port"], layout.replay_dir(work_dir))
        self.answered = {name: dict(found) for name, found in (cases.answered or {}).items()
                         if name in self.live}
        for name, found in self.answered.items():
            self.live[name].statuses.update(found)
        self.processes = []  # Process, in start order
        self.events = queue.Queue()
        self._queues = {name: self._sorted(name, [i for i in self.specs if i not in self.live[name].statuses])
                        for name in self.order}
        self._queues[REPLAY] = []  # filled as the caller submits replays
        self._waiting = set(self.expected)  # replays not yet submitted
        self._reported = {name: set(found) for name, found in self.answered.items()}  # label -> ids with an event
        self._lock = threading.Condition()
        self._error, self._stopped, self._threads = None, False, []

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

    def _handed(self, label, case_id):
        """Whether the port's request hands this case what the reference drew: a forward case or a
        gradient check, in a run with the reference."""
        return label == "port" and "reference" in self.live and self.specs[case_id].get("kind") in HANDED_KINDS

    def _ready(self, label, case_id):
        """A case the port is handed inputs for waits until the reference has reported it."""
        return not self._handed(label, case_id) or case_id in self._reported.get("reference", ())

    def _inputs_of(self, case_id):
        """The document handed to the port for a case (hand_inputs), or None when the reference
        did not run the case well."""
        if (self.live["reference"].statuses.get(case_id) or {}).get("ok") is not True:
            return None
        return hand_inputs(self.live["reference"].out_dir, self.work_dir, case_id)

    def _event(self, label, case_id):
        """Tell the caller that label's process reported the case; wakes a worker waiting for it.
        Called with the lock held."""
        self._reported.setdefault(label, set()).add(case_id)
        self.events.put((label, case_id))
        self._lock.notify_all()

    def bundle_target(self):
        """A process takes cases until it has this many estimated seconds: a share of the work not
        yet started (replays not yet submitted included), so processes are long while much is left
        and short near the end, never below MIN_BUNDLE (the start-up of a process)."""
        left = sum(self.costs.get((label, i), DEFAULT_COST)
                   for label, ids in self._queues.items() for i in ids)
        left += sum(self.costs.get((REPLAY, i), DEFAULT_COST) for i in self._waiting)
        return max(MIN_BUNDLE, left / (2 * self.jobs))

    def _take(self):
        """The next process to start, as (label, [case ids]), or None when nothing is available
        now. Called with the lock held."""
        labels = [label for label, q in self._queues.items() if q]  # in report order, the replay last
        if self.jobs <= 1:  # each engine's every case in one process, then every replay in one
            if not labels or (labels[0] == REPLAY and self._waiting):
                return None
            ids, self._queues[labels[0]] = sorted(self._queues[labels[0]], key=self.position.get), []
            return labels[0], ids
        ready = {label: [i for i in self._queues[label] if self._ready(label, i)] for label in labels}
        labels = [label for label in labels if ready[label]]
        if not labels:
            return None
        label = max(labels, key=lambda name: (self._priority(name, ready[name][0]), -labels.index(name)))
        target = self.bundle_target()
        ids, cost = [], 0.0
        for case_id in ready[label]:
            if ids and cost >= target:
                break
            ids.append(case_id)
            cost += self.costs.get((label, case_id), DEFAULT_COST)
        self._queues[label] = [i for i in self._queues[label] if i not in ids]
        return label, ids

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
        if self.progress is not None:
            for name in self.order:
                self.progress.start(name, len(self.specs))
            if self._waiting:
                self.progress.start(REPLAY, len(self._waiting))
        for name, found in self.answered.items():
            if self.progress is not None and found:
                self.progress.advance(name, by=len(found))
            for case_id in found:
                self.events.put((name, case_id))  # already in _reported
        work = sum(map(len, self._queues.values())) + len(self._waiting)
        for _ in range(max(1, min(self.jobs, work))):  # a thread per process that can run, never more
            self._threads.append(threading.Thread(target=self._worker, daemon=True))
            self._threads[-1].start()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self):
        for t in self._threads:
            t.join()
        self.events.put(None)

    def _busy(self):
        return any(p.ended is None for p in self.processes)

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
                process = Process(*task, time.monotonic())
                self.processes.append(process)
            try:
                run = self._run(*task)
            except lifecycle.Terminated:
                return  # a signal stops the runner: its main thread is cleaning up
            except InputError as exc:
                with self._lock:
                    process.ended = time.monotonic()
                    if self._error is None and not self._stopped:
                        self._error = exc
                        lifecycle.kill_groups()  # the run is over: stop the other processes now
                    self._lock.notify_all()
                return
            with self._lock:
                process.ended, process.run = time.monotonic(), run
                for case_id in process.ids:
                    if case_id not in self.live[process.label].statuses:  # no status line: an event too
                        self._event(process.label, case_id)
                self._lock.notify_all()

    def _run(self, label, ids):
        extra = dict(self.extra)
        if label == REPLAY:
            from_dir = self.live["reference"].out_dir
            extra["replay"] = {i: dict(self.replays[i], from_dir=str(layout.states(from_dir, i)))
                               for i in ids}
        handed = {i: self._inputs_of(i) for i in ids if self._handed(label, i)}
        if any(handed.values()):
            extra["inputs_from"] = {i: str(path) for i, path in handed.items() if path is not None}

        def on_status(status):
            if self._error is not None or self._stopped:
                lifecycle.kill_groups()  # started just as the run failed or was interrupted
                return
            if status["id"] not in ids:
                return  # refused when the process ends (docs/protocol.md)
            if self.progress is not None:
                self.progress.advance(label)
            with self._lock:
                self.live[label].statuses[status["id"]] = status
                self._event(label, status["id"])

        live = self.live[label]
        specs = [self.specs[i] for i in ids]
        return engines_mod.run(live.engine, specs, live.out_dir, self.timeout, extra, on_status)

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
        lifecycle.kill_groups()

    # --- the outcome ------------------------------------------------------------------------

    def result(self):
        """Once `events` gave None: ({engine name: EngineRun}, the replay's EngineRun or None),
        with the statuses exactly as each process's run() validated them; or the first error."""
        if self._error is not None:
            raise self._error
        runs = {}
        for label in self.order + [REPLAY]:
            mine = [p for p in self.processes if p.label == label]
            merged = engines_mod.EngineRun(engine=self.live[label].engine, out_dir=self.live[label].out_dir,
                                           statuses=dict(self.answered.get(label, {})), processes=len(mine))
            for p in mine:
                merged.statuses.update(p.run.statuses)
                merged.stderr += p.run.stderr
            merged.wall = _span(mine)
            starts = [p.run.startup for p in mine if p.run.startup is not None]
            merged.startup = sum(starts) / len(starts) if starts else None
            runs[label] = merged if mine or label != REPLAY else None
        return runs, runs.pop(REPLAY)

    def span(self):
        """Seconds from the first process's start to the last one's exit."""
        return _span(self.processes)


def _span(processes):
    return max(p.ended for p in processes) - min(p.started for p in processes) if processes else 0.0


def run_all(engines, case_specs, work_dir, timeout, jobs=2, progress=None, extra=None):
    """Run the engines on the cases, each into work_dir/<name>, without replays, as `verify
    attention` schedules them; {name: EngineRun}. The first engine-level error stops the other
    processes and is raised."""
    sched = Scheduler(engines, Cases(case_specs, extra=extra), work_dir, timeout, jobs, progress)
    sched.start()
    try:
        while sched.next_event() is not None:
            pass
    except KeyboardInterrupt:  # the engines run in their own sessions: stop them too
        sched.stop()
        raise
    runs, _ = sched.result()
    return runs
