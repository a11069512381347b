"""The reference engine's command line; the runner speaks to it as to the port (docs/protocol.md).

  python -m reference run            request on stdin, one golden file per case, status lines out
                                     (a case the request's "inputs_from" names computes from that
                                     document's inputs; a case it drew the inputs of writes them in
                                     out_dir/<id>.handed.json; a training case also writes out_dir/<id>.states/step_<t>.json,
                                     and the request's "replay" field out_dir/<id>.replay/step_<t1>.json
                                     and, for its "evaluate" steps, out_dir/<id>.replay/evaluate_<t>.json;
                                     a pretrained case reads the request's "assets" {model: directory}
                                     and writes out_dir/<id>.full.json beside its golden view;
                                     the request's "trace" {id: "record" | {"fed": path}} writes
                                     out_dir/<id>.trace.json, its sub-layers' tensors (core/trace.py);
                                     a request of "kind" encode or export writes out_dir/<id>.json,
                                     the document of that kind, per item: cases/requests.py)
  python -m reference rng-hash --seed S --count N --kind uniform|normal
"""

import argparse
import hashlib
import json
import os
import sys
import threading
import time

from .core import golden, trace
from .core.case_config import CaseError, error_fields, handed_inputs
from .cases.cases import run_case_with_states
from .cases.cases_pretrained import split_documents
from .cases import requests
from .cases.cases_training import evaluate_state, replay_segment
from .core.rng import Generator


def _read_state(from_dir, t, what):
    """The state document of step t in from_dir (the reference's states), checked to hold step t."""
    source = os.path.join(from_dir, f"step_{t}.json")
    try:
        with open(source, encoding="utf-8") as fh:
            state_doc = json.load(fh)
    except (OSError, ValueError) as exc:
        raise CaseError(f"{what}: cannot read the state of step {t} from {source}: {exc}") from None
    opt = state_doc.get("outputs", {}).get("opt", {}).get("data", [None])
    if opt[0] != t:
        raise CaseError(f"{what}: {source} holds the state of step {opt[0]}, not {t}")
    return state_doc


def _handed(inputs, ident):
    """The document the request hands to case `ident` (docs/protocol.md, "Handed inputs"), read
    from the path it names; None when it names none."""
    if ident not in inputs:
        return None
    path = inputs[ident]
    try:
        if not isinstance(path, str):
            raise ValueError(f"not a path: {json.dumps(path)}")
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        if not isinstance(doc, dict) or "inputs" not in doc:
            raise ValueError(f"{path} has no 'inputs'")
    except (OSError, ValueError) as exc:
        raise CaseError(f"cannot read the inputs handed to {ident!r}: {exc}") from None
    return doc


def _tracer(mode, ident):
    """Turn tracing on for case `ident` as the request's "trace" asks: "record", or {"fed": the
    path of another engine's <id>.trace.json} (docs/protocol.md, "Traces")."""
    if mode == "record":
        return trace.start()
    if not (isinstance(mode, dict) and isinstance(mode.get("fed"), str)):
        raise CaseError(f"'trace' of {ident!r} must be \"record\" or {{\"fed\": a path}}, got {json.dumps(mode)}")
    try:
        with open(mode["fed"], encoding="utf-8") as fh:
            tensors = json.load(fh)["tensors"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CaseError(f"cannot read the trace fed to {ident!r} from {mode['fed']}: {exc}") from None
    return trace.start(handed_inputs(tensors, ident))


def _free_run(case, assets, handed, out_dir):
    """The case's own run: its document, what the runner hands the port, and a training run's states."""
    doc, states, given = run_case_with_states(case, assets, handed)
    if given is not None:  # what the runner hands the port: docs/protocol.md, "Handed inputs"
        golden.write(os.path.join(out_dir, f"{case['id']}.handed.json"), given)
    if case.get("kind") == "pretrained":  # docs/pretrained.md: the golden keeps a view
        doc, full = split_documents(doc)
        golden.write(os.path.join(out_dir, f"{case['id']}.full.json"), full)
    golden.write(os.path.join(out_dir, f"{case['id']}.json"), doc)
    if states:
        state_dir = os.path.join(out_dir, f"{case['id']}.states")
        os.makedirs(state_dir, exist_ok=True)
        for t, state in states.items():
            golden.write(os.path.join(state_dir, f"step_{t}.json"), state)


def _steps(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _replay(case, entry, out_dir):
    """docs/training.md, Replay: for each segment [t0, t1], the state of step t0 read from
    entry["from_dir"], steps t0+1..t1 run here, the state at t1 written to out_dir/<id>.replay/;
    then for each step t of entry["evaluate"], the state of step t evaluated (the run's
    evaluate()), written to out_dir/<id>.replay/evaluate_<t>.json. Returns (segments, evaluations)."""
    segments, evaluate = entry.get("segments"), entry.get("evaluate", [])
    if not (isinstance(entry.get("from_dir"), str) and isinstance(segments, list)
            and all(isinstance(s, list) and len(s) == 2 and all(map(_steps, s)) for s in segments)
            and isinstance(evaluate, list) and all(map(_steps, evaluate))):
        raise CaseError(f"replay of {case['id']!r} needs 'from_dir', 'segments' [[t0, t1], ...] and optionally "
                        f"'evaluate' [t, ...], got {entry!r}")
    target = os.path.join(out_dir, f"{case['id']}.replay")
    os.makedirs(target, exist_ok=True)
    for t0, t1 in segments:
        state_doc = _read_state(entry["from_dir"], t0, f"replay [{t0}, {t1}]")
        golden.write(os.path.join(target, f"step_{t1}.json"), replay_segment(case, state_doc, t1))
    for t in evaluate:
        state_doc = _read_state(entry["from_dir"], t, f"evaluate {t}")
        golden.write(os.path.join(target, f"evaluate_{t}.json"),
                     golden.case_document(case, {}, evaluate_state(case, state_doc)))
    return len(segments), len(evaluate)


def _alive(owner):
    """Whether the runner named by VERIFY_RUN_OWNER ("<pid>-<start ticks>") still runs (twin:
    cli.ts ownerAlive); True without one."""
    try:
        pid, ticks = (int(p) for p in owner.split("-"))
    except ValueError:
        return True
    if not os.path.exists("/proc/self/stat"):  # no /proc: the pid alone
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            pass
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != b"Z" and (ticks == 0 or fields[19] == str(ticks).encode())


def exit_with_parent(poll=0.25):
    """Stop when the runner that started this engine is gone, however it died (SIGKILL leaves it
    no way to stop its engines): a daemon thread watches the parent pid and the runner named by
    VERIFY_RUN_OWNER, which also holds when the runner died before this engine got going or
    through a wrapper between them (docs/protocol.md)."""
    parent, owner = os.getppid(), os.environ.get("VERIFY_RUN_OWNER", "")

    def watch():
        while os.getppid() == parent and _alive(owner):
            time.sleep(poll)
        os._exit(3)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _run(stream_in, stream_out):
    exit_with_parent()
    try:
        request = json.load(stream_in)
        out_dir = request["out_dir"]
        kind = request.get("kind", "cases")  # docs/protocol.md, "Request kinds"
        if kind not in requests.KINDS:
            raise TypeError(f"'kind' must be one of {', '.join(requests.KINDS)}, got {kind!r}")
        cases = request[requests.ITEMS[kind]]
        if not isinstance(cases, list):
            raise TypeError(f"'{requests.ITEMS[kind]}' must be a list")
        replay = request.get("replay", {})
        if not isinstance(replay, dict):
            raise TypeError("'replay' must be an object {id: {from_dir, segments}}")
        assets = request.get("assets", {})
        if not isinstance(assets, dict):
            raise TypeError("'assets' must be an object {model name: directory}")
        handed = request.get("inputs_from", {}) if kind == "cases" else {}
        if not isinstance(handed, dict):
            raise TypeError("'inputs_from' must be an object {id: the path of a document with the case's inputs}")
        traced = request.get("trace", {}) if kind == "cases" else {}
        if not isinstance(traced, dict):
            raise TypeError("'trace' must be an object {id: \"record\" | {\"fed\": a path}}")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        print(f"reference: the request on stdin must be JSON with 'out_dir' and 'cases' (or, of kind encode, "
              f"'inputs'): {exc}", file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    for case in cases:
        start = time.perf_counter()
        status = {"id": case.get("id")}
        try:
            entry = replay.get(case.get("id"))
            if kind != "cases":  # one document per item, nothing else
                doc = requests.document(kind, case, assets)
                golden.write(os.path.join(out_dir, f"{requests.item_id(case)}.json"), doc)
            else:  # a traced case traces its free run and its replay alike (docs/protocol.md, "Traces")
                tracer = _tracer(traced[case["id"]], case["id"]) if case.get("id") in traced else None
                try:
                    if entry is None or entry.get("free_run", True):
                        _free_run(case, assets, _handed(handed, case.get("id")), out_dir)
                    if entry is not None:
                        status["replayed"], status["evaluated"] = _replay(case, entry, out_dir)
                finally:
                    trace.stop()
                if tracer is not None:
                    golden.write(os.path.join(out_dir, f"{case['id']}.trace.json"), trace.document(tracer, golden.tensor_doc))
            status["ok"] = True
        except Exception as exc:  # a bad case, or a bug in the engine: reported on the case, the others go on
            status.update(ok=False, **error_fields(exc))
        status["seconds"] = time.perf_counter() - start
        stream_out.write(json.dumps(status) + "\n")
        stream_out.flush()
    return 0


def _rng_hash(seed, count, kind):
    g = Generator(seed)
    draws = g.uniform(count) if kind == "uniform" else g.normal(count)
    print(hashlib.sha256(draws.astype("<f8").tobytes()).hexdigest())
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m reference", description="The NumPy reference engine.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="run the cases of a request read from stdin (docs/protocol.md)")
    h = sub.add_parser("rng-hash", help="SHA-256 of COUNT draws as little-endian float64")
    h.add_argument("--seed", type=int, required=True)
    h.add_argument("--count", type=int, required=True)
    h.add_argument("--kind", choices=["uniform", "normal"], required=True)
    args = parser.parse_args(argv)
    if args.command == "run":
        return _run(sys.stdin, sys.stdout)
    return _rng_hash(args.seed, args.count, args.kind)


if __name__ == "__main__":
    sys.exit(main())
