"""Step-wise replay of training runs (docs/training.md, "Replay"): the reference's state at the
start of each segment [t0, t1] goes to the port, which runs steps t0+1..t1; its state at t1 must
match the reference's state at t1 within the tolerance. Together the segments cover every step,
so every step of the port is checked from the reference's own starting point, however far the
two free runs have drifted apart. This is the one place where one engine's arrays reach the
other, by design."""

from pathlib import Path

from . import engines as engines_mod
from .compare import compare_named
from .documents import DocumentError, case_difference, decode_tensors, read


def segments_of(case):
    return case.spec.get("expect", {}).get("replay_segments") or []


def coverage_problem(case):
    """None when the segments chain from step 0 to the run's last step; else what is wrong."""
    segments = segments_of(case)
    steps = case.spec.get("config", {}).get("steps")
    at = 0
    for t0, t1 in segments:
        if t0 != at or t1 <= t0:
            return f"segment [{t0}, {t1}] does not continue from step {at}"
        at = t1
    if steps is not None and at != steps:
        return f"the segments end at step {at}, the run has {steps} steps"
    return None


def request_entry(case):
    """The case's entry of a replay request, without `from_dir` (the reference's states, added
    by whoever knows where they are): every segment, no free run (docs/protocol.md)."""
    return {"segments": segments_of(case), "free_run": False}


def run_port(port_engine, cases, reference_dir, work, timeout):
    """One port run replaying every segment of the given training cases (no free runs)."""
    request = {case.id: dict(request_entry(case), from_dir=str(Path(reference_dir) / f"{case.id}.states"))
               for case in cases}
    return engines_mod.run(port_engine, [c.spec for c in cases], Path(work) / "port-replay", timeout, {"replay": request})


def _state(path, case):
    try:
        doc = read(path)
        different = case_difference(case.spec, doc.get("case") if isinstance(doc, dict) else None)
        return f"{path.name} echoes a different case: {different}" if different else decode_tensors(doc)
    except (DocumentError, KeyError, TypeError) as exc:
        return str(exc)


def compare(case, reference_dir, replay_run, tol):
    """One entry per segment: {segment, passed, max_abs, max_ulp, worst, bit_identical, error}."""
    results = []
    status = replay_run.statuses.get(case.id) if replay_run else None
    problem = coverage_problem(case)
    if problem:
        return [{"segment": None, "passed": False, "max_abs": None, "max_ulp": None, "worst": None,
                 "bit_identical": False, "error": f"replay segments do not cover the run: {problem}"}]
    for t0, t1 in segments_of(case):
        entry = {"segment": [t0, t1], "passed": False, "max_abs": None, "max_ulp": None, "worst": None,
                 "bit_identical": False, "error": None}
        results.append(entry)
        if status is None or not status.get("ok"):
            entry["error"] = "port: " + str((status or {}).get("error") or "no status line for the replay")
            continue
        ref_path = Path(reference_dir) / f"{case.id}.states" / f"step_{t1}.json"
        port_path = replay_run.out_dir / f"{case.id}.replay" / f"step_{t1}.json"
        ref, port = _state(ref_path, case), _state(port_path, case)
        if isinstance(ref, str) or isinstance(port, str):
            entry["error"] = f"cannot read the state of step {t1}: {ref if isinstance(ref, str) else port}"
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
