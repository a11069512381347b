"""The per-case judge of one run: fed the scheduler's events (verify/schedule.py), it plans each
training case's replay and judges each case exactly once (verify/verdict.py). A case goes

    WAITING --both engines reported--> REPORTED --judged--> JUDGED --replay reported--> DONE

A training case's replay is planned once both engines have reported it (replay.plan: segments the
port's free run already computed are derived, not replayed). A status line is final when it
arrives (verify/engines.py refuses a different second one), so nothing is ever judged again.
An input error found while judging (a damaged golden) is raised by `finish`, in catalogue order.
Judging while the engines run is an accelerator; VERIFY_PLAIN=1 (or jobs == 1) judges after them."""

import enum
from dataclasses import dataclass, field

from . import documents, layout, verdict
from . import replay as replay_mod
from .errors import InputError
from .schedule import REPLAY

ROLES = ("reference", "port")


class State(enum.Enum):
    WAITING, REPORTED, JUDGED, DONE = range(4)


@dataclass
class CaseJudge:
    """Where one case is (State) and what was found on the way."""

    case: object
    replay_expected: bool
    state: State = State.WAITING
    reported: set = field(default_factory=set)  # the labels that have reported it, "replay" included
    planned: list = None  # the segments its replay request holds (the others derived)
    fresh: dict = None  # {role: verdict.Fresh}
    entry: dict = None
    error: InputError = None


class Judge:
    """The judges of one run's cases: the scheduler's `live` runs are judged, its `submit_replay`
    given each planned replay. on_done(entry) is told as each case is done; during=False judges
    only in finish()."""

    def __init__(self, ctx, cases, scheduler, policy, reader, on_done=None, during=True):
        self.ctx, self.live, self.submit_replay = ctx, scheduler.live, scheduler.submit_replay
        self.policy, self.reader = policy, reader
        self.on_done = on_done or (lambda entry: None)
        self.during = during
        self.cases = {c.id: CaseJudge(c, _has_replay(c)) for c in cases}

    @staticmethod
    def replays(cases):
        """The ids of the cases whose replay the judge will submit."""
        return {c.id for c in cases if _has_replay(c)}

    def event(self, label, case_id):
        """The scheduler's event: `label` has reported case_id (again, for a repeated status line)."""
        judged = self.cases[case_id]
        judged.reported.add(label)
        self._advance(judged, judge=self.during)

    def finish(self):
        """Once the engines are done: {case id: entry}, every case judged, in catalogue order."""
        found = {}
        for case_id, judged in self.cases.items():
            judged.reported |= {*ROLES, REPLAY}  # every process has ended: nothing more will come
            self._advance(judged, judge=True)
            if judged.error is not None:
                raise judged.error
            found[case_id] = judged.entry
        return found

    def _advance(self, judged, judge):
        if judged.state is State.WAITING and all(r in judged.reported for r in ROLES):
            self._plan_replay(judged)
            judged.state = State.REPORTED
        if judged.state is State.REPORTED and judge:
            self._judge_main(judged)
            judged.state = State.JUDGED
        if judged.state is State.JUDGED and (REPLAY in judged.reported or judged.planned is None):
            if judged.entry is not None and judged.replay_expected:
                part = replay_mod.compare(judged.case, judged.fresh["reference"], self.live["reference"].out_dir,
                                          self.live[REPLAY], self.policy.tol_of(judged.case.spec), self.ctx.schemas,
                                          port_dir=self.live["port"].out_dir, replayed=judged.planned)
                verdict.add_replay(judged.entry, part, self.policy)
            judged.state = State.DONE
            if judged.entry is not None:
                self.on_done(judged.entry)

    def _plan_replay(self, judged):
        """The segments to replay, from the digests of the two engines' main documents; none when
        the reference failed the case (it wrote no states to replay from)."""
        if not judged.replay_expected:
            return
        statuses = {name: self.live[name].statuses.get(judged.case.id) or {} for name in ROLES}
        if not statuses["reference"].get("ok"):
            self.submit_replay(judged.case.id, None)
            return
        docs = []
        for name in ROLES:
            try:
                path = layout.main(self.live[name].out_dir, judged.case.id)
                docs.append(documents.read(path) if statuses[name].get("ok") else None)
            except documents.DocumentError:
                docs.append(None)  # unreadable: every segment is replayed, the verdict says why
        judged.planned = replay_mod.plan(judged.case, *docs)
        self.submit_replay(judged.case.id, dict(replay_mod.request_entry(judged.case), segments=judged.planned))

    def _judge_main(self, judged):
        runs = {name: self.live[name] for name in ROLES}
        judged.fresh = verdict.read_all(self.reader, judged.case, runs)
        try:
            judged.entry = verdict.judge(self.ctx, judged.case, runs, self.policy, self.reader, judged.fresh)
        except InputError as exc:  # a damaged committed golden: raised by finish(), in order
            judged.error = exc


def _has_replay(case):
    return case.kind == "training" and bool(replay_mod.segments_of(case))
