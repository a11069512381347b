"""The verdict of a case: what each kind of case must satisfy to pass (docs/runner.md, "The verdict"),
in one module that `verify attention`, `verify regen`, `verify faults` and `verify show` all call.

Two steps, kept apart so that a saved report can be judged again:
- `judge(ctx, case, fresh, policy)` gathers the evidence of one case: both engines' documents
  read and validated (`Reader`), every tensor compared by the rule, the checks of the case
  (verify/expectations.py), each engine against its own golden (verify/goldens.py), and what the
  reports draw (verify/views.py). `add_replay` adds the replay and the evaluation of a training
  case (verify/replay.py) once the port has replayed it.
- `decide(entry, policy)` turns the evidence into the verdict: `passed`, `status` (bit-identical,
  within the tolerance, failed, not run) and `failures` (why, one line each). It reads only the
  report entry, so `verify show` re-decides a saved report with the rule of today, and a report
  whose stored verdict does not follow from its evidence is named as such.

The rule is the one of docs/runner.md: an element passes when |port - reference| <= tol (1 + |ref|).
A training run's free-run outputs (everything it computes from the parameters it trained itself)
are reported, bit-identical, within the tolerance or parted, but never fail a case by parting:
last-bit differences grow over hundreds of Adam steps, so a faithful port's free run parts from the
reference's. What a training run must satisfy instead: every replay segment within the tolerance,
the evaluation of the reference's final parameters (decodes, metrics, maps) as the reference's,
and the free run's outcomes within the case's band. `Policy.bitwise` (`--bitwise`) makes anything
short of bit identity a failure, the free runs and the bitwise-only digests included.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from . import assets, decoded, goldens, layout, records, views
from .compare import DEFAULT_TOL, compare_named
from .documents import DocumentError, case_difference, read_bytes
from .expectations import case_checks, free_run_names
from .records import BIT_IDENTICAL, FAILED, NOT_RUN, PARTED, WITHIN  # also read as verdict.FAILED ...

ENGINE_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_-")


@dataclass(frozen=True)
class Policy:
    """How strictly a run judges: the default tolerance (a case may declare its own, tighter one in
    expect.tolerance) and whether anything short of bit identity fails."""

    tol: float = DEFAULT_TOL
    bitwise: bool = False

    def tol_of(self, spec):
        declared = (spec.get("expect") or {}).get("tolerance")
        return float(declared["value"]) if declared else self.tol


def declared_reason(spec):
    """The reason a case gives for its own tolerance (expect.tolerance), or None."""
    declared = (spec.get("expect") or {}).get("tolerance")
    return declared["reason"] if declared else None


@dataclass
class Fresh:
    """One engine's output for one case, once read and validated (or why it is unusable)."""

    bytes: bytes = None
    doc: dict = None
    tensors: dict = None
    error: str = None

    @property
    def engine_name(self):
        return None if self.doc is None else self.doc["engine"]["name"]


class Reader:
    """Reads and validates what an engine wrote for a case. With memo=True (verify faults, whose
    unmodified engines answer every fault from one kept run), a document is read once per
    distinct file and status line, not once per fault."""

    def __init__(self, schemas, memo=False):
        self.schemas = schemas
        self.memo = {} if memo else None

    def fresh(self, run, case, role):
        path = layout.main(run.out_dir, case.id)
        status = run.statuses.get(case.id)
        if self.memo is None or not path.is_symlink():
            return self._read(run.engine.name, role, status, path, case)
        key = (str(path.resolve()), role, json.dumps(status, sort_keys=True))
        if key not in self.memo:
            self.memo[key] = self._read(run.engine.name, role, status, path, case)
        return self.memo[key]

    def _read(self, name, role, status, path, case):
        if status is None:
            return Fresh(error=f"{name}: gave no status line for this case")
        if not status["ok"]:
            return Fresh(error=f"{name}: {status.get('error') or 'failed without a message'}")
        try:
            data = read_bytes(path)  # a regular file of bounded size; a link to /dev/zero or a pipe is refused unread
        except DocumentError as exc:
            if not path.exists():
                return Fresh(error=f"{name}: reported ok but wrote no {case.id}.json")
            return Fresh(error=f"{name}: wrote a {case.id}.json the runner does not read: {exc}")
        try:
            doc, tensors = decoded.golden(data, self.schemas)  # the bytes just read: each document is read once
        except DocumentError as exc:
            return Fresh(error=f"{name}: wrote an invalid golden document: {exc}")
        different = case_difference(case.spec, doc["case"])
        if different:
            return Fresh(error=f"{name}: echoed a different case: {different}")
        problem = engine_name_problem(role, doc["engine"]["name"])
        if problem:
            return Fresh(error=f"{name}: {problem}")
        return Fresh(bytes=data, doc=doc, tensors=tensors)


def engine_name_problem(role, name):
    """Goldens live in golden/<suite>/<engine name>/: the reference is "reference", a port any
    other lower-case name."""
    if role == "reference":
        return None if name == "reference" else f"the reference must name itself 'reference', not {name!r}"
    if name == "reference":
        return "a port must not name itself 'reference' (its goldens would overwrite the reference's)"
    if not name or not set(name) <= ENGINE_NAME_CHARS or name[0] in "_-":
        return (f"names itself {name!r}, which cannot name a golden directory "
                "(lower-case letters, digits, '_' and '-', starting with a letter or digit)")
    return None


def golden_path(ctx, role, fresh, case_id):
    """golden/<suite>/<engine name>/<id>.json; the role stands in for a name not known."""
    return Path(ctx.golden_dir) / (fresh.engine_name or role) / f"{case_id}.json"


# --- evidence -------------------------------------------------------------------------------------

def read_all(reader, case, runs):
    """{role: Fresh} of one case from {role: engine run} (EngineRun or schedule.Live)."""
    return {role: reader.fresh(run, case, role) for role, run in runs.items()}


ENGINE_FIELDS = ("kernel", "browser")  # what a status line may say of how it ran (docs/protocol.md)


def _engine_info(runs, case_id):
    """{role: {"kernel": {...}, "browser": {...}}} as each engine's status line gave them."""
    found = {}
    for role, r in runs.items():
        status = r.statuses.get(case_id) or {}
        info = {k: status[k] for k in ENGINE_FIELDS if isinstance(status.get(k), dict)}
        if info:
            found[role] = info
    return found


def _seconds(runs, case_id):
    found = {}
    for role, r in runs.items():
        seconds = (r.statuses.get(case_id) or {}).get("seconds")
        ok = isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds >= 0
        found[role] = float(seconds) if ok else None
    return found


def judge(ctx, case, runs, policy, reader, fresh=None):
    """The report entry of one case without its replay part, decided (decide() runs again once
    add_replay() adds the replay). runs: {"reference": run, "port": run}, each with out_dir and
    statuses; fresh: their documents if already read (read_all)."""
    fresh = fresh or read_all(reader, case, runs)
    tol = policy.tol_of(case.spec)
    errors = [f.error for f in fresh.values() if f.error]
    ref, port = fresh["reference"], fresh["port"]
    free_run = free_run_names(case.kind, ref, port)
    tensors = []
    if ref.doc is not None and port.doc is not None:
        for part, role in (("inputs", "input"), ("outputs", "output")):
            tensors += compare_named(role, ref.tensors[part], port.tensors[part], tol)
    if case.kind == "pretrained" and ref.doc is not None and port.doc is not None:
        full, full_errors = assets.compare_full(case, {role: r.out_dir for role, r in runs.items()}, tol, ctx.schemas)
        tensors += full
        errors += full_errors
    checks, free_runs = case_checks(case.kind, case.spec.get("expect", {}), fresh, tol, case.op)
    golden_checks = {}
    for role, f in fresh.items():
        path = golden_path(ctx, role, f, case.id)
        shown = ctx.display(path)
        if f.doc is None:
            golden_checks[role] = goldens.GoldenCheck("not run", shown, "the engine gave no usable output")
        else:
            golden_checks[role] = goldens.check(path, shown, f, tol, ctx.schemas, free_run,
                                                suite=ctx.suite,
                                                required_digests=case.spec.get("expect", {}).get("equal_digests", ()))
    golden_details = {role: dict(g.to_dict(), label=g.label, engine=fresh[role].engine_name)
                      for role, g in golden_checks.items()}
    outdated = records.golden_error(golden_details)
    if outdated:  # what to do follows from what else differs (verify/advice.py), not always a regen
        errors.append(outdated)
    entry = records.CaseEntry(
        case.id, case.kind, case.op, ctx.display(case.file), FAILED, tol, declared_reason(case.spec), golden_details,
        tensors, frozenset(free_run), checks, free_runs, errors, seconds=_seconds(runs, case.id),
        engine_info=_engine_info(runs, case.id)).to_dict()
    views.enrich(entry, case, fresh, tol)
    return decide(entry, policy)


def add_replay(entry, replay_part, policy):
    """The replay segments and the evaluation (verify/replay.py compare) joined to a case's entry;
    the evaluation's checks (quality bars on the port's evaluation) join the case's checks."""
    entry["replay"] = replay_part["segments"]
    entry["evaluation"] = replay_part["evaluation"]
    entry["checks"] = [c for c in entry["checks"] if c.get("source") != "evaluation"] + replay_part["checks"]
    return decide(entry, policy)


# --- the decision ---------------------------------------------------------------------------------

def _number(x):
    """A figure of a tensor record as a float ("NaN", "Infinity" as the JSON report writes them)."""
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, str):
        return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.get(x)
    return float(x)


def contradiction(t, tol=None):
    """Why a tensor record that says `passed` cannot have passed by its own figures, or None. A
    saved report is an input like any other: `verify show` judges its figures, never its stored
    `passed` (a record of compare.py always agrees with itself, so a run is judged the same).
    Every element passes when the greatest |diff| is within what is allowed there, nothing is
    mismatched, no element is NaN (NaN is never close), no non-finite mismatch is counted, both
    sides hold as many infinities, and no mismatch is sampled."""
    if not t.get("passed"):
        return None
    found = []
    if t.get("message"):
        found.append(f"it says {t['message']!r}")
    if t.get("mismatched"):
        found.append(f"mismatched {t['mismatched']} of {t.get('total')}")
    if t.get("nonfinite"):
        found.append(f"{t['nonfinite']} non-finite mismatch(es)")
    nan = {k: v for k, v in (t.get("nan") or {}).items() if v}
    if nan:
        found.append("NaN " + ", ".join(f"{k} {v}" for k, v in nan.items()))
    inf = list((t.get("inf") or {}).values())
    if len(set(inf)) > 1:
        found.append("Inf " + ", ".join(f"{k} {v}" for k, v in t["inf"].items()))
    if t.get("samples"):
        found.append(f"{len(t['samples'])} mismatch(es) sampled")
    max_abs, allowed = _number(t.get("max_abs")), _number(t.get("allowed_at_max_abs"))
    if max_abs is not None:
        if t.get("dtype") == "int64":
            allowed = 0.0  # integers compare exactly
        elif tol is not None and (allowed is None or not allowed >= tol):
            allowed = tol  # tol * (1 + |reference|) is never below tol
        if not max_abs <= (allowed if allowed is not None else 0.0):
            found.append(f"max|diff| {max_abs:g} against {allowed if allowed is not None else 0.0:g} allowed")
    return f"recorded as passed, but {'; '.join(found)}" if found else None


def _tensor_identical(t):
    """Bit identity by the figures: passed, 0 ULP apart and 0 apart (integers: compared exactly), no NaN."""
    if t["dtype"] == "int64":
        exact = t["message"] is None and _number(t.get("max_abs")) in (0.0, None)
    else:
        exact = t["max_ulp"] == 0 and _number(t.get("max_abs")) in (0.0, None)
    return t["passed"] and exact and not any((t.get("nan") or {}).values())


def tensor_status(t, bitwise=False, tol=None):
    """bit-identical, within the tolerance, parted (a free-run output beyond the tolerance) or failed;
    a record whose figures contradict its `passed` (contradiction) is failed."""
    if contradiction(t, tol):
        return FAILED
    if _tensor_identical(t):
        return BIT_IDENTICAL
    if t["passed"]:
        return FAILED if bitwise else WITHIN
    if t.get("part") == "free_run" and t["message"] is None:
        return FAILED if bitwise else PARTED
    return FAILED


def _describe(t):
    if t["message"]:
        return t["message"]
    if t["passed"]:
        return f"{t['total']} elements within the tolerance, max {t['max_ulp']} ULP, not bit-identical"
    if t["dtype"] == "int64":
        return f"{t['mismatched']} / {t['total']} integers differ"
    nonfinite = t.get("nonfinite") or 0
    return (f"{t['mismatched']} / {t['total']} elements beyond the tolerance"
            + (f", {nonfinite} of them non-finite (NaN or infinity on one side)" if nonfinite else ""))


def decide(entry, policy, include_goldens=True):
    """Set entry's passed, status and failures from its evidence; returns the entry. With
    include_goldens=False the committed goldens do not count (`verify regen` asks whether the
    engines agree, whatever the goldens hold)."""
    # The engines' own errors first, then what the engines disagree on, then the goldens.
    failures = records.errors_of(entry, records.ErrorKind.ENGINE)
    golden_errors = records.errors_of(entry, records.ErrorKind.GOLDEN) if include_goldens else []
    if entry.get("status") == NOT_RUN:
        entry.update(passed=False, failures=failures or ["not run"])
        return entry
    identical = True
    tol = entry.get("tolerance") or policy.tol
    if not (entry["tensors"] or entry["checks"] or entry["replay"] or entry.get("evaluation")) and not failures:
        failures.append("no tensor was compared: nothing shows that the engines agree")  # a run always compares some
    for t in entry["tensors"]:
        t["status"] = tensor_status(t, policy.bitwise, tol)
        identical &= t["status"] == BIT_IDENTICAL
        if t["status"] == FAILED:
            free = t.get("part") == "free_run"
            lie = contradiction(t, tol)
            bitwise_only = not lie and (t["passed"] or (free and t["message"] is None))
            failures.append(f"{t['role']} '{t['name']}'{' (free run)' if free else ''}: {lie or _describe(t)}"
                            + (" (--bitwise)" if bitwise_only else ""))
    for c in entry["checks"]:
        bitwise_only = c.get("required", "always") == "bitwise"
        if bitwise_only:
            identical &= c["passed"]
        if (policy.bitwise or not bitwise_only) and not c["passed"]:
            failures.append(f"check {c['engine']}: {c['name']} {c['rule']}: {c['detail']}")
    for r in entry["replay"]:
        identical &= r["bit_identical"]
        if not r["passed"]:
            how = " (derived from the port's free run)" if r.get("derived") else ""
            failures.append(f"replay {r['segment']}{how}: {r['error']}")
        elif policy.bitwise and not r["bit_identical"]:
            failures.append(f"replay {r['segment']}: within the tolerance (max {r['max_ulp']} ULP), not bit-identical (--bitwise)")
    evaluation = entry.get("evaluation")
    if evaluation is not None:
        if evaluation["error"]:
            failures.append(f"evaluation: {evaluation['error']}")
        for t in evaluation["tensors"]:
            t["status"] = tensor_status(t, policy.bitwise, tol)
            tie = bool(t.get("near_tie") or t.get("near_tie_rows"))
            identical &= t["status"] == BIT_IDENTICAL and not tie
            lie = contradiction(t, tol)
            if t["status"] == FAILED and (lie or not t.get("near_tie")):
                failures.append(f"evaluation of the reference's final parameters, '{t['name']}': {lie or _describe(t)}"
                                + (" (--bitwise)" if t["passed"] and not lie else ""))
            elif tie and policy.bitwise:
                failures.append(f"evaluation '{t['name']}': parted at a near tie, not bit-identical (--bitwise)")
    if include_goldens:
        for role, g in entry["golden_details"].items():
            if g["status"] in (*records.OUTDATED, records.GoldenStatus.NOT_RUN):
                if not golden_errors and not failures:  # named in errors or by the engine's own error, or edited out
                    failures.append(f"golden {g['file']}: {g['status']}")
                continue
            if policy.bitwise and g["status"] in (records.GoldenStatus.PARTED, records.GoldenStatus.DRIFT):  # drift at 0 ULP too: the text or a digest differs
                failures.append(f"golden {g['file']}: {g['label']}, not byte-identical (--bitwise)")
    failures += golden_errors
    entry["passed"] = not failures
    entry["failures"] = failures
    entry["status"] = FAILED if failures else (BIT_IDENTICAL if identical else WITHIN)
    return entry


def consistency(entry, policy):
    """None when the stored verdict of a saved report entry follows from its evidence under
    policy; otherwise what was stored and what the evidence says (verify show)."""
    decided = decide(json.loads(json.dumps(entry)), policy)
    if "status" in entry:
        stored, found = (entry.get("passed"), entry["status"]), (decided["passed"], decided["status"])
    else:  # a report from before statuses: its verdict alone
        stored, found = (entry.get("passed"), "-"), (decided["passed"], "-")
    if stored == found:
        return None
    return f"stored {'PASS' if stored[0] else 'FAIL'} ({stored[1]}), its evidence gives {'PASS' if found[0] else 'FAIL'} ({found[1]})"


def not_run_entry(case, display, reason):
    """The report entry of a case that was not sent to the engines (a model that is not installed):
    not passed, goldens "not run", the reason (with the command that fetches the model) as its failure."""
    not_run = {"status": "not run", "label": "not run", "file": "", "detail": reason, "max_ulp": None, "engine": None}
    return records.CaseEntry(case.id, case.kind, case.op, display(case.file), NOT_RUN,
                             golden_details={"reference": dict(not_run), "port": dict(not_run)},
                             errors=[reason], failures=[reason]).to_dict()


# --- a saved report's browsers (verify show) --------------------------------------------------------

def decide_browsers(browsers, ids, policy, whole):
    """Judge again report["browsers"] (verify/browsers.py) for the cases `ids` shown: a browser passes
    when it ran and each of these cases has a verdict of its own there that passed (bit-identical or
    within the tolerance, no failure; bit-identical under --bitwise); a case it holds no verdict for
    fails. whole: every case of the report is shown, so the browser's stored verdict counts too (a
    stored failure is never shown as a pass). Returns {name: part} as the report holds them."""
    found = {}
    for name, part in browsers.items():
        cases = {}
        for case_id in ids:
            c = part["cases"].get(case_id)
            if c is None:
                c = {"passed": False, "status": NOT_RUN, "identical_to_node": False, "seconds": None,
                     "failures": [f"browser {name} holds no verdict for this case (the report was edited)"]}
            else:
                c = dict(c)
                good = (BIT_IDENTICAL,) if policy.bitwise else (BIT_IDENTICAL, WITHIN)
                if c["passed"] and (c["status"] not in good or c["failures"]):
                    why = c["failures"][0] if c["failures"] else f"status {c['status']}"
                    c["failures"] = [f"recorded as passed, but {why}"
                                     + (" (--bitwise)" if c["status"] == WITHIN and not c["failures"] else "")]
                    c["passed"] = False
            cases[case_id] = c
        extra = sorted(set(part["cases"]) - set(ids)) if whole else []
        passed = part["ran"] and all(c["passed"] for c in cases.values()) and not extra and (part["passed"] or not whole)
        found[name] = dict(part, cases=cases, passed=passed,
                           summary=dict(part["summary"], passed=sum(c["passed"] for c in cases.values()),
                                        failed=sum(not c["passed"] for c in cases.values()),
                                        identical_to_node=sum(bool(c["identical_to_node"]) for c in cases.values())))
    return found
