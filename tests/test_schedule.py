"""The scheduler of engine processes (verify/schedule.py), with fake engines that speak
docs/protocol.md, sleep as told (the reference only, unless told otherwise) and log when each process starts
and ends. The scheduler emits (label, case id) events; the caller here plays verify/judge.py's part,
submitting a training case's replay request once both engines have reported it. The replay then
starts at once (before the reference's other cases finish; whichever engine reports last, the
reference cache included), with the segments the caller submitted, at most `jobs` processes run at
once, the expensive cases start first, every case runs exactly once per engine, --jobs 1 is strictly
sequential (the replay after every submission), an engine error stops the other processes at once,
and a forward case reaches the port with the reference's document, after the reference."""

import json
import sys
import textwrap
import time

import pytest

from verify import engines, schedule
from verify.errors import InputError

FAKE = textwrap.dedent('''
    import json, os, sys, time
    name, log = sys.argv[1], sys.argv[2]
    request = json.loads(sys.stdin.read())
    label = "replay" if request.get("replay") else name
    def note(what):
        with open(log, "a") as fh:
            fh.write(json.dumps([label, what, time.monotonic(), [c["id"] for c in request["cases"]]]) + "\\n")
    note("start")
    if request.get("inputs_from"):
        note({"inputs_from": request["inputs_from"]})
    if request.get("replay"):
        note({i: e["segments"] for i, e in request["replay"].items()})
    for case in request["cases"]:
        if case["config"].get("fail_" + name):
            sys.exit(3)
        if name == "reference":  # what it drew, to hand on, with a field the runner must not pass on
            os.makedirs(request["out_dir"], exist_ok=True)
            with open(os.path.join(request["out_dir"], case["id"] + ".handed.json"), "w") as fh:
                json.dump({"inputs": {"x": [case["id"]]}, "position": 7, "outputs": {"y": [1]}}, fh)
        pause = 0.0 if label == "replay" else case["config"].get(
            "sleep_" + name, case["config"].get("sleep", 0.0) * (name == "reference"))
        time.sleep(pause)
        note("case " + case["id"])
        ok = label == "replay" or not case["config"].get("not_ok_" + name)
        print(json.dumps({"id": case["id"], "ok": ok, "seconds": pause, **({} if ok else {"error": "boom"})}),
              flush=True)
    note("end")
''')


@pytest.fixture
def fake(tmp_path):
    script = tmp_path / "fake_engine.py"
    script.write_text(FAKE)
    log = tmp_path / "log.jsonl"

    def make():
        return [engines.Engine(name, [sys.executable, str(script), name, str(log)], tmp_path)
                for name in ("reference", "port")]

    def events():
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return make, events


def spec(case_id, sleep=0.0, op="x", **config):
    return {"id": case_id, "kind": "training" if op.startswith("train") else "forward", "op": op, "seed": 1,
            "config": dict(config, sleep=sleep)}


def run(engine_list, specs, tmp_path, jobs, replays=None, costs=None, planner=None, answered=None):
    """The scheduler run to its end as verify/judge.py drives it: once both engines have reported a
    case of `replays` ({case id: request entry}), its request is submitted, with the segments of
    planner(case id, statuses) when given, or None (no replay) when the reference failed the case."""
    replays = replays or {}
    cases = schedule.Cases(specs, replays=set(replays), answered=answered, costs=costs)
    sched = schedule.Scheduler(engine_list, cases, tmp_path / "work", 60, jobs=jobs)
    sched.start()
    seen, reported, submitted = [], {}, set()
    while (event := sched.next_event()) is not None:
        seen.append(event)
        label, case_id = event
        reported.setdefault(case_id, set()).add(label)
        if case_id in replays and case_id not in submitted and {"reference", "port"} <= reported[case_id]:
            submitted.add(case_id)
            statuses = {name: sched.live[name].statuses.get(case_id) for name in ("reference", "port")}
            if not (statuses["reference"] or {}).get("ok"):
                sched.submit_replay(case_id, None)
            else:
                segments = planner(case_id, statuses) if planner else replays[case_id]["segments"]
                sched.submit_replay(case_id, dict(replays[case_id], segments=segments))
    runs, replay = sched.result()
    return sched, runs, replay, seen


def test_the_replay_starts_before_the_references_last_case_finishes(fake, tmp_path):
    make, events = fake
    specs = [spec("train.a", 0.0, op="train_a"), spec("slow.b", 2.0)]
    costs = {("reference", "train.a"): 1.0, ("reference", "slow.b"): 1.0, ("port", "train.a"): 0.1,
             ("port", "slow.b"): 0.1, ("replay", "train.a"): 0.1, ("replay", "slow.b"): 0.1}
    sched, runs, replay, seen = run(make(), specs, tmp_path, 2, replays={"train.a": {"segments": [[0, 1]]}},
                                    costs=costs)
    log = events()
    replay_start = next(t for label, what, t, _ in log if label == "replay" and what == "start")
    slow_done = next(t for label, what, t, _ in log if label == "reference" and what == "case slow.b")
    assert replay_start < slow_done - 1.0  # while the reference still works on its slow case
    assert set(replay.statuses) == {"train.a"} and ("replay", "train.a") in seen
    assert seen.index(("replay", "train.a")) < seen.index(("reference", "slow.b"))


def test_a_forward_case_reaches_the_port_with_the_references_document_once_the_reference_reported_it(fake, tmp_path):
    """docs/protocol.md, "Handed inputs": the port's request names a document with what the
    reference drew (its inputs and position, nothing else) for each forward case the reference ran
    ok, and no port process takes a forward case before the reference reported it, however much
    the port's cost says it should go first."""
    make, events = fake
    specs = [spec("f.slow", 1.0), spec("f.fast"), spec("f.refused", not_ok_reference=True), spec("train.a", op="train_a")]
    costs = {(label, s["id"]): 0.01 for s in specs for label in ("reference", "replay")}
    costs.update({("port", s["id"]): 10.0 for s in specs})  # the port's cases look like the longest work
    costs[("reference", "f.slow")] = 5.0
    sched, runs, _, _ = run(make(), specs, tmp_path, 2, costs=costs)
    log = events()
    done = {(label, what[5:]): t for label, what, t, _ in log if isinstance(what, str) and what.startswith("case ")}
    for case_id in ("f.slow", "f.fast", "f.refused"):
        assert done[("reference", case_id)] < done[("port", case_id)], case_id
    handed = {}
    for label, what, _, _ in log:
        if label == "port" and isinstance(what, dict) and "inputs_from" in what:
            handed.update(what["inputs_from"])
    assert sorted(handed) == ["f.fast", "f.slow"]  # not the refused case, not the training case
    for case_id, path in handed.items():  # never an output: a port that copied one must not pass
        assert json.loads(open(path).read()) == {"inputs": {"x": [case_id]}, "position": 7}
    assert set(runs["port"].statuses) == {s["id"] for s in specs}


def test_at_most_jobs_processes_and_every_case_once_per_engine(fake, tmp_path):
    make, events = fake
    specs = [spec(f"c{i}", 0.3 if i % 3 == 0 else 0.05) for i in range(12)]
    costs = {(label, s["id"]): s["config"]["sleep"] * 5 for s in specs for label in ("reference", "port", "replay")}
    sched, runs, _, _ = run(make(), specs, tmp_path, 2, costs=costs)
    spans = [(p.started, p.ended) for p in sched.processes]
    for start, _ in spans:  # at every process start, at most 2 processes are running
        assert sum(s <= start < e for s, e in spans) <= 2
    assert len(sched.processes) > 2  # the work was split, not one process per engine
    for name in ("reference", "port"):
        ran = [i for label, what, _, ids in events() if label == name and what == "start" for i in ids]
        assert sorted(ran) == sorted(s["id"] for s in specs)  # each case exactly once
        assert set(runs[name].statuses) == {s["id"] for s in specs}
    first = {}
    for p in sched.processes:
        first.setdefault(p.label, p.ids)
    assert first["reference"][0] in {"c0", "c3", "c6", "c9"}  # an expensive case first


def test_jobs_one_is_sequential_reference_then_port_then_replay(fake, tmp_path):
    make, events = fake
    specs = [spec("train.a", 0.1, op="train_a"), spec("b", 0.1), spec("c", 0.1)]
    sched, runs, replay, _ = run(make(), specs, tmp_path, 1, replays={"train.a": {"segments": [[0, 1]]}})
    assert [(p.label, p.ids) for p in sched.processes] == [
        ("reference", ["train.a", "b", "c"]), ("port", ["train.a", "b", "c"]), ("replay", ["train.a"])]
    for before, after in zip(sched.processes, sched.processes[1:]):
        assert before.ended <= after.started
    assert runs["reference"].processes == runs["port"].processes == replay.processes == 1


def test_no_replay_when_the_reference_fails_the_case(fake, tmp_path):
    make, _ = fake
    script_dir = tmp_path
    specs = [spec("train.a", op="train_a")]
    reference, port = make()
    status = '{"id": "train.a", "ok": false, "error": "boom"}'
    reference = engines.Engine("reference", [sys.executable, "-c", f"import sys; sys.stdin.read(); print({status!r})"],
                               script_dir)
    sched, runs, replay, seen = run([reference, port], specs, tmp_path, 2, replays={"train.a": {"segments": [[0, 1]]}})
    assert replay is None and not runs["reference"].statuses["train.a"]["ok"]
    assert all(label != "replay" for label, _ in seen)


def test_an_engine_error_stops_the_other_processes_at_once(fake, tmp_path):
    make, _ = fake
    specs = [spec("slow", 30.0), spec("bad", 0.0, fail_port=True)]
    costs = {("reference", "slow"): 30.0, ("port", "slow"): 0.01, ("reference", "bad"): 0.01, ("port", "bad"): 0.01}
    started = time.monotonic()
    with pytest.raises(InputError, match="port engine exited with code 3"):
        run(make(), specs, tmp_path, 2, costs=costs)
    assert time.monotonic() - started < 15  # the reference's 30 s case was killed, not waited for


def test_costs_come_from_the_previous_report_else_a_first_guess_by_kind(tmp_path):
    specs = [spec("train.r", op="train_reversal"), spec("m", op="masked_softmax")]
    report = tmp_path / "previous.json"
    report.write_text(json.dumps({"cases": [{"id": "m", "seconds": {"reference": 3.0, "port": None}}]}))
    costs = schedule.estimate_costs(specs, report)
    assert costs[("reference", "m")] == 3.0 and costs[("port", "m")] == schedule.DEFAULT_COST
    assert costs[("reference", "train.r")] == costs[("port", "train.r")] == schedule.FIRST_GUESS["training"]
    assert costs[("replay", "train.r")] == pytest.approx(schedule.REPLAY_SHARE * schedule.FIRST_GUESS["training"])
    report.write_text("{not json")
    assert schedule.estimate_costs(specs, report) == schedule.estimate_costs(specs, None)  # only a hint


@pytest.mark.parametrize("text", [
    '{"cases": [{"id": "m", "seconds": {"reference": 3.5, "port": 2}}]}',
    '{"cases": [{"id": "m", "seconds": {"reference": NaN, "port": Infinity}}]}',  # not JSON: no estimate
    '{"cases": [{"id": "m", "seconds": {"reference": 1e400, "port": -1}}]}',
    '{"cases": [{"id": "m", "seconds": {"reference": 123456789012345678901234567890}}]}',  # beyond 64 bits
    '{"cases": [{"id": "\\ud800", "seconds": {}}, {"id": "m", "seconds": {"port": 4}}]}',  # a lone surrogate
    '\ufeff{"cases": [{"id": "m", "seconds": {"reference": 3.0}}]}',  # a byte order mark
    '{"cases": [{"id": "m", "seconds": {"reference": 1}}, {"id": "m", "seconds": {"reference": 2}}]}',
    '{"cases": [{"id": "m", "seconds": {"reference": 1, "reference": 5}}]}',  # the last of a repeated key
    '{"cases": {"id": "m"}}', '[]', '{"cases": [{"seconds": {"port": 1}}]}', '{"cases": [' * 3000 + ']' * 3000 + '}',
    '[' * 100_000 + ']' * 100_000, '{"cases": 7}', '{"cases": [7]}', '{"cases": [{"id": [], "seconds": {"port": 1}}]}',
    '{"cases": [{"id": "m", "seconds": {"reference": 3.0}}]}\r\n',
])
def test_any_previous_report_gives_an_estimate_or_none_never_an_error(tmp_path, text):
    """The previous report is a hint: whatever its text, estimate_costs gives costs, each either
    the report's valid seconds or the static table's."""
    specs = [spec("train.r", op="train_reversal"), spec("m", op="masked_softmax")]
    report = tmp_path / "previous.json"
    report.write_bytes(text.encode("utf-8", "surrogatepass"))
    static = schedule.estimate_costs(specs, None)
    costs = schedule.estimate_costs(specs, report)
    assert costs.keys() == static.keys()
    assert all(v >= 0 and (v == static[k] or k[1] == "m") for k, v in costs.items())


def _sparse(path, size):
    with open(path, "wb") as fh:
        fh.truncate(size)


@pytest.mark.parametrize("make", [lambda p: p.mkdir(), lambda p: _sparse(p, 3 << 30)], ids=["directory", "3-gb"])
def test_a_previous_report_that_is_not_a_small_regular_file_is_no_estimate_at_once(tmp_path, make):
    """(A named pipe and /dev/zero: tests/test_trust_outputs.py, in a process with a timeout.)"""
    specs = [spec("m", op="masked_softmax")]
    report = tmp_path / "previous.json"
    make(report)
    started = time.monotonic()
    assert schedule.estimate_costs(specs, report) == schedule.estimate_costs(specs, None)
    assert time.monotonic() - started < 5


# --- when a replay becomes available: both engines have reported the case ------------------

SEGMENTS = [[0, 1], [1, 2], [2, 3]]


class Planner:
    """Records each call (case id, statuses, when) and plans the last segment only."""

    def __init__(self):
        self.calls = []

    def __call__(self, case_id, statuses):
        self.calls.append((case_id, statuses, time.monotonic()))
        return [SEGMENTS[-1]]


def _times(log, label, what):
    return [t for lab, w, t, _ in log if lab == label and w == what]


def _replayed_segments(log):
    return [w for lab, w, _, _ in log if lab == "replay" and isinstance(w, dict)]


@pytest.mark.parametrize("last", ["port", "reference"])
def test_the_replay_waits_for_both_engines_and_is_planned_then(fake, tmp_path, last):
    make, events = fake
    slow = {"sleep_reference": 0.0, "sleep_port": 1.5} if last == "port" else {"sleep_reference": 1.5, "sleep_port": 0.0}
    specs = [spec("train.a", op="train_a", **slow), spec("b", 0.0, sleep_reference=0.0, sleep_port=0.0)]
    costs = {(label, i): 1.0 for label in ("reference", "port", "replay") for i in ("train.a", "b")}
    planner = Planner()
    sched, runs, replay, seen = run(make(), specs, tmp_path, 2, replays={"train.a": {"segments": SEGMENTS}},
                                    costs=costs, planner=planner)
    log = events()
    [reported] = _times(log, last, "case train.a")
    [replay_start] = _times(log, "replay", "start")
    assert replay_start > reported  # not before the engine that reports last has
    [(case_id, statuses, when)] = planner.calls
    assert case_id == "train.a" and when > reported
    assert statuses["reference"]["ok"] and statuses["port"]["ok"]
    assert _replayed_segments(log) == [{"train.a": [SEGMENTS[-1]]}]  # the planner's segments, not the entry's
    assert set(replay.statuses) == {"train.a"}
    assert seen.index(("replay", "train.a")) > seen.index((last, "train.a"))


def test_a_reference_from_the_cache_waits_for_the_port_only(fake, tmp_path):
    make, events = fake
    specs = [spec("train.a", op="train_a", sleep_port=1.0)]
    planner = Planner()
    answered = {"reference": {"train.a": {"id": "train.a", "ok": True, "seconds": 0.0}}}
    started = time.monotonic()
    sched, runs, replay, seen = run(make(), specs, tmp_path, 2, replays={"train.a": {"segments": SEGMENTS}},
                                    planner=planner, answered=answered)
    log = events()
    assert [p.label for p in sched.processes] == ["port", "replay"]  # no reference process
    [reported] = _times(log, "port", "case train.a")
    assert min(_times(log, "replay", "start")) > reported > started + 0.9
    [(_, statuses, when)] = planner.calls
    assert when > reported and statuses["reference"]["ok"] and statuses["port"]["ok"]
    assert _replayed_segments(log) == [{"train.a": [SEGMENTS[-1]]}]


def test_a_port_that_fails_the_case_still_gets_its_replay_planned(fake, tmp_path):
    make, events = fake
    specs = [spec("train.a", op="train_a", not_ok_port=True)]
    seen_statuses = []

    def planner(case_id, statuses):  # the suite's rule: a failed free run replays every segment
        seen_statuses.append(statuses)
        return SEGMENTS if not statuses["port"]["ok"] else [SEGMENTS[-1]]

    sched, runs, replay, _ = run(make(), specs, tmp_path, 2, replays={"train.a": {"segments": SEGMENTS}},
                                 planner=planner)
    [statuses] = seen_statuses
    assert statuses["reference"]["ok"] and not statuses["port"]["ok"]
    assert _replayed_segments(events()) == [{"train.a": SEGMENTS}]


def test_jobs_one_plans_the_replay_after_the_port_process(fake, tmp_path):
    make, events = fake
    specs = [spec("train.a", 0.1, op="train_a"), spec("b", 0.1)]
    planner = Planner()
    sched, runs, replay, _ = run(make(), specs, tmp_path, 1, replays={"train.a": {"segments": SEGMENTS}},
                                 planner=planner)
    assert [(p.label, p.ids) for p in sched.processes] == [
        ("reference", ["train.a", "b"]), ("port", ["train.a", "b"]), ("replay", ["train.a"])]
    [(_, _, when)] = planner.calls
    assert sched.processes[1].started < when < sched.processes[2].started
    assert _replayed_segments(events()) == [{"train.a": [SEGMENTS[-1]]}]
