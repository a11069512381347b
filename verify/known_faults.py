"""The closest known fault: what a failing run looks like, matched against what each fault of the
catalogue broke when `verify faults` last ran (docs/faults.md, "The closest known fault").

A fingerprint is a set of (case id, evidence): each tensor that failed, by name, and each other
kind of evidence (`how`: a digest, a gradcheck bound, a quality bar, ...). A golden that differs or
an engine that fails is not evidence of which bug it is, so neither counts. `verify faults` records
each fault's failing cases with their kinds and failing tensors (with how many elements of each
failed), and the cases each stage ran (reports/faults-<suite>.json); a fault caught in the fast
stage never saw the training runs, so it is compared on the cases of the stages it ran only.

Two figures: `near`, the Jaccard index of the fingerprints by tensor name, and `exact`, the same
with each tensor's count of failing elements. A fault is named when `near` is at least CLOSE;
among those, the highest (exact, near) wins, and faults that tie are named together (two bugs can
break the same elements the same way). Nothing is said otherwise. The file is the last run's
account, read only for this hint: whatever it holds changes no verdict."""

import json

from .records import FAILED, error_kind

CLOSE = 0.8  # the least share of the union the two fingerprints must have in common
NOT_EVIDENCE = ("tensor mismatch", "golden", "engine error")  # tensors count by name; the others not at all


def how(case, bitwise=False):
    """How a failing case (a decided report entry) failed: the kinds of evidence, in a fixed order."""
    kinds = []
    if any(t.get("status") == FAILED for t in case.get("tensors", [])):
        kinds.append("tensor mismatch")
    for check in case.get("checks", []):
        if check["passed"] or not (check.get("required", "always") == "always" or bitwise):
            continue
        if check["name"].startswith("digest"):
            kinds.append("digest")
        elif check["name"].endswith("rel_err") or check["name"] == "coverage":
            kinds.append("gradcheck bound")
        elif check["name"].startswith("free run "):
            kinds.append("free-run band")
        elif check["name"].startswith("agree "):
            kinds.append("two ways disagree")
        else:
            kinds.append("quality bar")
    if any(not r["passed"] for r in case.get("replay", [])):
        kinds.append("replay")
    evaluation = case.get("evaluation")
    if evaluation and (evaluation["error"] or any(t.get("status") == FAILED and not t.get("near_tie")
                                                  for t in evaluation["tensors"])):
        kinds.append("evaluation")
    for error in case.get("errors", []):
        kinds.append(error_kind(case, error).value)  # "golden" or "engine error"
    return list(dict.fromkeys(kinds)) or ["failed"]


def failed_tensors(case):
    """{name: how many of its elements failed} of a decided entry's failing tensors."""
    return {t["name"]: t.get("mismatched") for t in case.get("tensors", []) if t.get("status") == FAILED}


def evidence(case_id, kinds, tensors, counted):
    """One case's part of a fingerprint: tensors by name (counted: with their failing elements'
    count), and the other kinds of evidence."""
    named = {(case_id, t, n) if counted else (case_id, t) for t, n in tensors.items()}
    return named | {(case_id, k) for k in kinds if k not in NOT_EVIDENCE}


def _fingerprints(failing, fault, scope, counted):
    mine = set().union(*(evidence(c["id"], how(c), failed_tensors(c), counted) for c in failing if c["id"] in scope))
    theirs = set().union(*(evidence(c["id"], c["how"], c["tensors"], counted) for c in fault["cases"]))
    return mine, theirs


def _jaccard(a, b):
    return len(a & b) / len(a | b) if a | b else 0.0


def read(path):
    """The last `verify faults` account at path, or None when there is none or it is not one."""
    try:
        account = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(account.get("faults"), list) and isinstance(account.get("stages"), dict):
            return account
    except (OSError, ValueError, AttributeError):
        pass
    return None


def closest(failing, account):
    """([the closest recorded faults], near, exact, the run's fingerprint by name, the faults') for
    the failing entries, or None when no fault is CLOSE (or nothing is recorded)."""
    if not failing or account is None:
        return None
    try:
        stages, ranked = list(account["stages"]), []
        for fault in account["faults"]:
            if not fault.get("cases") or fault.get("stage") not in stages:
                continue
            scope = {i for s in stages[:stages.index(fault["stage"]) + 1] for i in account["stages"][s]}
            mine, theirs = _fingerprints(failing, fault, scope, counted=False)
            near = _jaccard(mine, theirs)
            if near >= CLOSE:
                ranked.append((_jaccard(*_fingerprints(failing, fault, scope, counted=True)), near, fault, mine, theirs))
    except (KeyError, TypeError, ValueError, AttributeError):  # an account of another shape: no hint
        return None
    if not ranked:
        return None
    exact, near = max((r[0], r[1]) for r in ranked)
    best = [r for r in ranked if (r[0], r[1]) == (exact, near)]
    return [r[2] for r in best], near, exact, best[0][3], best[0][4]


def line(found):
    """The closing line that names the closest known fault(s)."""
    faults, near, exact, mine, theirs = found
    cases = len({e[0] for e in mine & theirs})
    if exact == 1:
        same = f"the same {cases} failing case(s), tensors and checks, the same elements of each"
    elif near == 1:
        same = f"the same {cases} failing case(s), tensors and checks (other elements of them)"
    else:
        same = f"{len(mine & theirs)} of the run's {len(mine)} failing tensors and checks in {cases} case(s), against its {len(theirs)}"
    named = "; ".join(f"{f['id']} ({f.get('description', '')})" for f in faults)
    which = "closest known fault" if len(faults) == 1 else f"closest known faults, {len(faults)} alike"
    return f"{which}: {named}: {same}, as `verify faults` last recorded them (docs/faults.md)"
