"""Replay and evaluation of training runs (docs/training.md): the one place where one engine's
arrays reach the other, by design.

- Replay: the port runs each segment [t0, t1] from the reference's state at t0 and must reach the
  reference's state at t1 within the tolerance; the segments chain over every step. Where the two
  main documents' `state.<t0>` digests agree, the port's free run already did that (`plan`): the
  segment is derived from its state files, not replayed; the last one always is.
- Evaluation: the port evaluates the reference's final state and must find the reference's
  outputs by the rule and its greedy decodes token for token, except that a decode may part at a
  near tie (reported with the outputs that `follow` it, not failed). The quality bars hold there.
"""

import functools

import numpy as np

from . import decoded, layout
from .compare import bits_differ, compare_named
from .documents import DocumentError, case_difference, decode_tensors, read, read_bytes
from .expectations import bound_checks

# Two logits closer than this (in logit units) are a near tie. A port passes the rule with
# |logit difference| <= tol (1 + |logit|) per logit; the logits of these models stay below 49 in
# magnitude (docs/reversal.md), so two logits may move by up to 2 tol (1 + 49) = 100 tol together.
NEAR_TIE_FACTOR = 100


def segments_of(case):
    return case.spec.get("expect", {}).get("replay_segments") or []


def evaluation_of(case):
    """expect.evaluation: {"outputs": [...], "decodes": {tokens: {"margin", "follow"}}} or {}."""
    return case.spec.get("expect", {}).get("evaluation") or {}


def coverage_problem(case):
    """None when the segments chain from step 0 to the run's last step; else what is wrong."""
    steps = case.spec.get("config", {}).get("steps")
    at = 0
    for t0, t1 in segments_of(case):
        if t0 != at or t1 <= t0:
            return f"segment [{t0}, {t1}] does not continue from step {at}"
        at = t1
    if steps is not None and at != steps:
        return f"the segments end at step {at}, the run has {steps} steps"
    return None


def evaluation_step(case):
    """The step whose reference state the port evaluates: the run's last (the final parameters)."""
    segments = segments_of(case)
    return segments[-1][1] if segments and evaluation_of(case) else None


def request_entry(case):
    """The case's entry of a replay request (docs/protocol.md), without `from_dir`."""
    step = evaluation_step(case)
    return {"segments": segments_of(case), "evaluate": [] if step is None else [step], "free_run": False}


def _state_digest(doc, t):
    """The document's `digests["state.<t>"]`, or None where it has none a plan can use."""
    digests = doc.get("digests") if isinstance(doc, dict) else None
    value = digests.get(f"state.{t}") if isinstance(digests, dict) else None
    return value if isinstance(value, str) and value else None


def plan(case, reference_doc, port_doc):
    """The segments the port must replay ([[t0, t1], ...]), from the main documents of the reference
    and of the port's free run (None when unusable: every segment): the last segment and each whose
    t0 has no `state.<t0>` digest equal in both."""
    segments = [list(s) for s in segments_of(case)]
    if not isinstance(reference_doc, dict) or not isinstance(port_doc, dict):
        return segments
    last = len(segments) - 1
    return [[t0, t1] for n, (t0, t1) in enumerate(segments)
            if n == last or _state_digest(reference_doc, t0) is None
            or _state_digest(reference_doc, t0) != _state_digest(port_doc, t0)]


def _state(path, case):
    """The tensors of a state document, or what is wrong with it (a different case echoed first)."""
    try:
        doc = read(path)
        different = case_difference(case.spec, doc.get("case") if isinstance(doc, dict) else None)
        return f"{path.name} echoes a different case: {different}" if different else decode_tensors(doc)
    except (DocumentError, KeyError, TypeError) as exc:
        return str(exc)


def _port_error(status):
    """Why the port's replay of a case gave nothing to compare, or None."""
    if not (status or {}).get("ok"):
        return "port: " + str((status or {}).get("error") or "no status line for the replay")
    return None


def _segment(segment, derived=False, error=None):
    return {"segment": segment, "derived": derived, "passed": False, "max_abs": None, "max_ulp": None,
            "worst": None, "bit_identical": False, "error": error}


def _derived_premise(case, ref0, port0, t0):
    """Why a derived segment's premise fails (the two states at t0 not the same bits), or None."""
    if isinstance(ref0, str) or isinstance(port0, str):
        side = "the reference's" if isinstance(ref0, str) else "the port's free-run"
        return (f"derived from the port's free run, whose digest of its state at step {t0} equals the reference's, "
                f"but {side} state of step {t0} cannot be read: {ref0 if isinstance(ref0, str) else port0}")
    differ = bits_differ(ref0["outputs"], port0["outputs"])
    if differ:
        return (f"the port's digest of its state at step {t0} equals the reference's, but its state file differs: "
                f"{len(differ)} tensor(s) not bit-identical, first {differ[0]} ({case.id}.states/step_{t0}.json "
                "of each engine); a state's digest is the SHA-256 of the state the engine writes "
                "(docs/training.md, \"State and checkpoints\"): fix the port's digest or the state it writes")
    return None


def _segments(case, reference_dir, replay_run, status, tol, port_dir=None, replayed=None):
    """One entry per segment. replayed: the segments the port was asked to replay (plan()); given
    port_dir, the others are derived from the port's free run. Each state file is read once."""
    problem = coverage_problem(case)
    if problem:
        return [_segment(None, error=f"replay segments do not cover the run: {problem}")]
    state, results = functools.cache(lambda path: _state(path, case)), []
    asked = None if replayed is None else {tuple(s) for s in replayed}
    for t0, t1 in segments_of(case):
        derived = asked is not None and port_dir is not None and (t0, t1) not in asked
        entry = _segment([t0, t1], derived)
        results.append(entry)
        if derived:
            entry["error"] = _derived_premise(case, state(layout.state(reference_dir, case.id, t0)),
                                              state(layout.state(port_dir, case.id, t0)), t0)
        else:
            entry["error"] = _port_error(status)
        if entry["error"]:
            continue
        if derived:
            port_path, whose = layout.state(port_dir, case.id, t1), "the port's free-run state"
        else:
            port_path, whose = layout.replayed_state(replay_run.out_dir, case.id, t1), "the state"
        ref, port = state(layout.state(reference_dir, case.id, t1)), state(port_path)
        if isinstance(ref, str) or isinstance(port, str):
            entry["error"] = f"cannot read {whose} of step {t1}: {ref if isinstance(ref, str) else port}"
            continue
        tensors = compare_named("output", ref["outputs"], port["outputs"], tol)
        failing = [t for t in tensors if not t.passed]
        worst = max(tensors, key=lambda t: -1.0 if t.max_abs is None else t.max_abs, default=None)
        entry.update(
            passed=not failing and bool(tensors),
            max_abs=None if worst is None else worst.max_abs,
            max_ulp=max((t.max_ulp or 0 for t in tensors), default=None),
            worst=None if worst is None else worst.name,
            bit_identical=bool(tensors) and all(t.max_ulp == 0 for t in tensors),
        )
        if failing:
            entry["error"] = f"{len(failing)} state tensor(s) beyond the tolerance, first {failing[0].name}"
    return results


def near_ties(name, spec, expected, actual, tol):
    """Sequences of decode `name` that part only at a near tie: [{sequence, position, margin, ...}]."""
    e, a = expected.get(name), actual.get(name)
    m = expected.get(spec.get("margin", ""))
    if e is None or a is None or m is None or e.shape != a.shape or m.shape != e.shape or e.values.ndim not in (1, 2):
        return []
    E, A, M = (np.atleast_2d(t.values) for t in (e, a, m))
    ties = []
    for i in range(E.shape[0]):
        diverge = np.flatnonzero(E[i] != A[i])
        if diverge.size and M[i, diverge[0]] <= NEAR_TIE_FACTOR * tol:
            j = int(diverge[0])
            ties.append({"tensor": name, "sequence": i, "position": j, "margin": float(M[i, j]),
                         "bound": NEAR_TIE_FACTOR * tol,
                         "reference": [int(v) for v in E[i] if v >= 0], "port": [int(v) for v in A[i] if v >= 0]})
    return ties


def _with_rows(tensor, rows, like):
    """A copy of `tensor` whose given rows (of its 2-D view) are those of `like`."""
    values = np.atleast_2d(tensor.values).copy()
    values[rows] = np.atleast_2d(like.values)[rows]
    return type(tensor)(dtype=tensor.dtype, values=values.reshape(tensor.values.shape))


def _read_evaluation(case, ref_fresh, replay_run, status, schemas, step):
    """(the port's evaluation outputs, None), or (None, why there is nothing to compare)."""
    if ref_fresh is None or ref_fresh.doc is None:
        return None, "the reference wrote no document to evaluate against"
    if _port_error(status):
        return None, _port_error(status)
    path = layout.evaluation(replay_run.out_dir, case.id, step)
    try:
        doc, tensors = decoded.golden(read_bytes(path), schemas)
    except DocumentError as exc:
        return None, (f"no readable evaluation of the reference's state at step {step} ({path.name}: {exc}); "
                      "a port answers a replay entry's 'evaluate' steps (docs/protocol.md)")
    different = case_difference(case.spec, doc["case"])
    if different:
        return None, f"the evaluation echoed a different case: {different}"
    missing = [n for n in evaluation_of(case).get("outputs", []) if n not in ref_fresh.tensors["outputs"]]
    if missing:
        return None, f"expect.evaluation names outputs the reference does not write: {', '.join(missing)}"
    return tensors["outputs"], None


def _evaluation(case, ref_fresh, replay_run, status, tol, schemas):
    """The port's evaluation of the reference's final state against the reference's own outputs
    there: {step, tensors, near_ties, error}, and the quality bars on it."""
    spec, step = evaluation_of(case), evaluation_step(case)
    actual, error = _read_evaluation(case, ref_fresh, replay_run, status, schemas, step)
    result = {"step": step, "tensors": [], "near_ties": [], "error": error}
    if error:
        return result, []
    reference = ref_fresh.tensors["outputs"]
    expected = {n: reference[n] for n in [*spec.get("outputs", []), *actual] if n in reference}
    ties, exempt, masked = [], set(), {}
    for name, decode in sorted((spec.get("decodes") or {}).items()):
        found = near_ties(name, decode, expected, actual, tol)
        if not found:
            continue
        rows = [t["sequence"] for t in found]
        for part in (name, decode.get("margin")):
            masked.setdefault(part, []).extend(rows)
            if part in actual and part in expected:
                actual[part] = _with_rows(actual[part], rows, expected[part])
        exempt |= set(decode.get("follow", []))
        ties += found
    tensors = []
    for t in compare_named("output", expected, actual, tol):
        entry = dict(t.to_dict(), part="strict")
        if t.name in exempt:
            entry["near_tie"] = True  # follows a decode that parted at a near tie: reported, not failed
        if t.name in masked:
            entry["near_tie_rows"] = sorted(masked[t.name])  # compared without these sequences
        tensors.append(entry)
    result["tensors"], result["near_ties"] = tensors, ties
    expect = case.spec.get("expect", {})
    bars = {key: {n: b for n, b in expect.get(key, {}).items() if n in actual} for key in ("at_least", "at_most")}
    checks = bound_checks("port (evaluating the reference's final parameters)", actual, bars, source="evaluation")
    return result, checks


def compare(case, ref_fresh, reference_dir, replay_run, tol, schemas, port_dir=None, replayed=None):
    """{"segments": [...], "evaluation": {...} or None, "checks": [quality bars on the evaluation]}.
    port_dir: the port's free-run directory; replayed: the segments the port was asked to replay
    (plan()), the others derived from its free run; None: every segment replayed."""
    status = replay_run.statuses.get(case.id) if replay_run else None
    part = {"segments": _segments(case, reference_dir, replay_run, status, tol, port_dir, replayed),
            "evaluation": None, "checks": []}
    if evaluation_step(case) is not None:
        part["evaluation"], part["checks"] = _evaluation(case, ref_fresh, replay_run, status, tol, schemas)
    return part
