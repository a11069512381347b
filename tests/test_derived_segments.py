"""Derived replay segments (docs/training.md, "Replay and evaluation"): a segment whose start the
port's free run reached bit for bit (equal `state.<t0>` digests in both main documents) is not
replayed: the port, being deterministic, would compute its free run's steps again, so the
segment is judged on the port's free-run state at t1, after the runner has checked from the state
files that the port's state at t0 is the reference's bit for bit. The last segment is always
replayed (the port's loading of a state runs on every run).

- Our bit-identical port: every training case's segments but the last are derived, the last is
  replayed, the verdicts pass, and the replay request the port received held the last segment only.
- A planted fault whose free run parts from the reference (port.layer_norm.wasm_rows_without_eps,
  caught in train.vit): the segments from the first checkpoint whose digests differ on are replayed,
  and the fault is still caught.
- A port whose main document claims the reference's digest at a checkpoint while its state file
  there differs (its output edited by a wrapper): that derived segment fails, saying so.
- A free run whose main document the runner cannot read: every segment is replayed.
- plan() on its own: missing, unreadable or different digests replay, the last segment always.

The reference runs once for the module (verify/cached_engine.py answers from its run); the port
runs through a wrapper that logs each request's replay segments and the main documents' digests.
"""

import json
import shlex
import sys
import textwrap

import pytest

from verify import replay
from verify.tools import faults
from verify.catalogue import load
from verify.documents import Schemas
from helpers import keep_run, run_verify

pytestmark = pytest.mark.slow

WRAPPER = textwrap.dedent('''
    """A port that logs what it is asked to replay and what its free run digested; `lie ID STEP`
    also nudges one value of its free-run state file at STEP by one ulp after it ran (its main
    document still holding the digest of the state it computed); `lie ID drop` deletes the main
    document of case ID after its free run reported it ok."""
    import json, math, pathlib, subprocess, sys
    log, lie_id, lie_step, port = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    text = sys.stdin.read()
    request = json.loads(text)
    proc = subprocess.run(port, input=text, capture_output=True, text=True)
    out = pathlib.Path(request["out_dir"])
    note = {"replay": {i: e["segments"] for i, e in (request.get("replay") or {}).items()}, "digests": {}}
    if not request.get("replay"):
        for case in request["cases"]:
            main = out / (case["id"] + ".json")
            if case["kind"] == "training" and main.is_file():
                note["digests"][case["id"]] = json.loads(main.read_text())["digests"]
            if case["id"] == lie_id and lie_step == "drop":
                main.unlink()  # ok, and no document: a free run the runner cannot read
            elif case["id"] == lie_id:
                path = out / (case["id"] + ".states") / ("step_" + lie_step + ".json")
                doc = json.loads(path.read_text())
                name = sorted(n for n in doc["outputs"] if n.startswith("param."))[0]
                data = doc["outputs"][name]["data"]
                data[0] = math.nextafter(data[0], math.inf)
                path.write_text(json.dumps(doc))
    with open(log, "a") as fh:
        fh.write(json.dumps(note) + "\\n")
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    sys.exit(proc.returncode)
''')


@pytest.fixture(scope="module")
def training_cases(repo_root):
    schemas = Schemas(repo_root / "golden" / "schemas")
    return {c.id: c for c in load(repo_root / "ops" / "attention", schemas) if c.kind == "training"
            and replay.segments_of(c)}


@pytest.fixture(scope="module")
def kept_reference(repo_root, training_cases, tmp_path_factory):
    """(the command of a reference answering from one kept run of the training cases, its out dir)."""
    kept = tmp_path_factory.mktemp("kept-reference")
    command = keep_run(repo_root, [sys.executable, "-m", "reference", "run"], [c.spec for c in training_cases.values()],
                       kept)
    return command, kept / "out"


def _verify(repo_root, reference_cmd, cli, node, tmp_path, *args, lie=("-", "-")):
    script, log, report = tmp_path / "wrapper.py", tmp_path / "requests.jsonl", tmp_path / "report.json"
    script.write_text(WRAPPER)
    port_cmd = shlex.join([sys.executable, str(script), str(log), *lie, str(node), str(cli), "run"])
    # --no-attribution: the requests logged are the verdict's alone (a failing run's attribution
    # replays its first failing segment again, traced)
    proc = run_verify(repo_root, "attention", "--reference-cmd", reference_cmd, "--port-cmd", port_cmd,
                      "--report", report, "--no-attribution", *args, timeout=1200)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]
    notes = [json.loads(line) for line in log.read_text().splitlines()]
    replays = {i: s for n in notes for i, s in n["replay"].items()}
    digests = {i: d for n in notes for i, d in n["digests"].items()}
    return proc, json.loads(report.read_text()), replays, digests


def _case(report, case_id):
    return next(c for c in report["cases"] if c["id"] == case_id)


def test_our_port_derives_every_segment_but_the_last(repo_root, node, kept_reference, training_cases, tmp_path):
    reference_cmd, _ = kept_reference
    cli = repo_root / "port_ts" / "src" / "cli.ts"
    proc, report, replays, _ = _verify(repo_root, reference_cmd, cli, node, tmp_path, "--case", "train.*")
    assert proc.returncode == 0, proc.stdout[-4000:]
    for case_id, case in training_cases.items():
        segments = replay.segments_of(case)
        entries = _case(report, case_id)["replay"]
        assert [e["segment"] for e in entries] == segments
        assert [e["derived"] for e in entries] == [True] * (len(segments) - 1) + [False], case_id
        assert all(e["passed"] and e["bit_identical"] for e in entries), case_id
        assert replays[case_id] == [segments[-1]], case_id  # the port was asked to replay the last one only
    shown = proc.stdout
    assert "11 derived from the port's free run, 1 replayed" in shown  # train.reversal, train.sort


FAULT = "port.layer_norm.wasm_rows_without_eps"  # the port's training step leaves eps out of layer norm


def test_a_port_whose_free_run_parts_replays_from_the_first_differing_checkpoint(
        repo_root, node, kept_reference, training_cases, tmp_path):
    reference_cmd, reference_out = kept_reference
    fault = {f.id: f for f in faults.load(None, repo_root, str)}[FAULT]
    faults.apply(fault, repo_root, tmp_path / "faulty")
    cli = tmp_path / "faulty" / "port_ts" / "src" / "cli.ts"
    proc, report, replays, digests = _verify(repo_root, reference_cmd, cli, node, tmp_path, "--case", "train.vit")
    assert proc.returncode == 1, proc.stdout[-4000:]
    case = training_cases["train.vit"]
    segments = replay.segments_of(case)
    ref_digests = json.loads((reference_out / "train.vit.json").read_text())["digests"]
    port_digests = digests["train.vit"]
    parted = [t0 for t0, _ in segments if ref_digests[f"state.{t0}"] != port_digests.get(f"state.{t0}")]
    assert parted and parted[0] > 0, "the fault's free run must part after the initial state, or nothing is derived"
    first = parted[0]
    entries = _case(report, "train.vit")["replay"]
    assert [e["derived"] for e in entries] == [t0 < first and n < len(segments) - 1
                                               for n, (t0, _) in enumerate(segments)]
    assert replays["train.vit"] == [s for s in segments if s[0] >= first or s == segments[-1]]
    entry = _case(report, "train.vit")
    assert not entry["passed"] and any(not e["passed"] for e in entries)  # still caught
    assert all("state file differs" not in (e["error"] or "") for e in entries)  # the premise held where derived


def test_a_port_whose_digest_claims_a_state_its_file_does_not_hold_fails(
        repo_root, node, kept_reference, training_cases, tmp_path):
    reference_cmd, _ = kept_reference
    case = training_cases["train.alignment"]
    segments = replay.segments_of(case)
    t0 = segments[1][0]
    cli = repo_root / "port_ts" / "src" / "cli.ts"
    proc, report, _, _ = _verify(repo_root, reference_cmd, cli, node, tmp_path, "--case", "train.alignment",
                                 lie=("train.alignment", str(t0)))
    assert proc.returncode == 1, proc.stdout[-4000:]
    entries = _case(report, "train.alignment")["replay"]
    failed = [e for e in entries if not e["passed"]]
    assert [e["segment"] for e in failed] == [segments[1]]  # the segment from the edited state, only
    assert failed[0]["derived"]
    assert failed[0]["error"].startswith(f"the port's digest of its state at step {t0} equals the reference's, "
                                         "but its state file differs: 1 tensor(s) not bit-identical")
    assert entries[0]["passed"] and not entries[0]["bit_identical"]  # one ulp at t1 of [0, t0]: within the tolerance
    assert f"replay failed [{t0}, {segments[1][1]}] (derived from the port's free run)" in proc.stdout


def test_a_free_run_the_runner_cannot_read_replays_every_segment(
        repo_root, node, kept_reference, training_cases, tmp_path):
    reference_cmd, _ = kept_reference
    segments = replay.segments_of(training_cases["train.alignment"])
    cli = repo_root / "port_ts" / "src" / "cli.ts"
    proc, report, replays, _ = _verify(repo_root, reference_cmd, cli, node, tmp_path, "--case", "train.alignment",
                                       lie=("train.alignment", "drop"))
    assert proc.returncode == 1, proc.stdout[-4000:]
    assert replays["train.alignment"] == segments
    entries = _case(report, "train.alignment")["replay"]
    assert not any(e["derived"] for e in entries) and all(e["passed"] for e in entries)


class _Case:
    def __init__(self, segments, steps):
        self.spec = {"config": {"steps": steps}, "expect": {"replay_segments": segments}}


def test_the_plan_replays_what_the_digests_do_not_show_reached_and_the_last_segment():
    case = _Case([[0, 2], [2, 4], [4, 6], [6, 8]], 8)
    ref = {"digests": {"state.0": "a", "state.2": "b", "state.4": "c", "state.6": "d", "state.8": "e"}}
    assert replay.plan(case, ref, ref) == [[6, 8]]
    assert replay.plan(case, ref, {"digests": {"state.0": "a", "state.2": "b", "state.4": "x", "state.6": "d"}}) == [
        [4, 6], [6, 8]]  # a digest that differs
    assert replay.plan(case, ref, {"digests": {"state.0": "a", "state.4": "c", "state.6": "d"}}) == [
        [2, 4], [6, 8]]  # one that is missing
    assert replay.plan(case, ref, {"digests": {"state.0": "a", "state.2": 7, "state.4": "c", "state.6": "d"}}) == [
        [2, 4], [6, 8]]  # one that is not a digest
    every = [[0, 2], [2, 4], [4, 6], [6, 8]]
    assert replay.plan(case, ref, None) == every  # the free run failed or its document is unreadable
    assert replay.plan(case, None, ref) == every
    assert replay.plan(case, ref, {"digests": "no"}) == every  # no digests at all
