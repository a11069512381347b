"""The status words and the kinds (enums) of what a report entry holds, for the verdict
(verify/verdict.py) and whoever reads a report (verify/advice.py, the renderers): this module
imports nothing of the run.

An entry's `errors` are one-line strings in the JSON report (its schema is unchanged); what each
is about is an ErrorKind, known from the entry itself rather than from the text's wording: the
one GOLDEN error is the message `golden_error` makes of the entry's golden_details (every
committed golden that is missing or stale), and every other error is an ENGINE error (an engine's
output that cannot be judged). A saved report is classified the same way (`verify show`).

CaseEntry is a case's entry as the judge builds it; to_dict() is the one place that gives it the
report's form (a dict with the keys in the report's order), which verify/views.py enriches and
verify/verdict.py decides (decide reads only the dict form, so a saved report is decided alike).
A tensor's comparison is verify/compare.py's TensorResult, a golden's status verify/goldens.py's
GoldenCheck; their to_dict() give their report forms. Report is the whole report
(golden/schemas/report.schema.json) that the renderers read; its cases are entries in their report
form."""

import enum
from dataclasses import dataclass, field, fields


# The status words a report holds (docs/runner.md), of a tensor, a case, a check: verify/verdict.py
# decides them; verify/advice.py and the renderers read them.
BIT_IDENTICAL = "bit-identical"
WITHIN = "within the tolerance"
PARTED = "parted"  # a free-run output beyond the tolerance: reported, not failed (unless --bitwise)
FAILED = "failed"
NOT_RUN = "not run"


class ErrorKind(enum.Enum):
    ENGINE = "engine error"  # an engine's output unusable: no status line, an invalid document ...
    GOLDEN = "golden"  # a committed golden missing or stale: the verdict names it last


class GoldenStatus(str, enum.Enum):
    """A committed golden against an engine's fresh output (verify/goldens.py); the values are the
    words the report holds."""

    FRESH = "fresh"
    DRIFT = "drift"
    PARTED = "parted"
    STALE = "stale"
    MISSING = "missing"
    NOT_RUN = "not run"


OUTDATED = (GoldenStatus.STALE, GoldenStatus.MISSING)  # the goldens that want `verify regen`


def golden_error(golden_details):
    """The error naming every committed golden that is missing or stale, from an entry's
    golden_details ({role: {"status", "file", "detail", ...}}), or None when none is."""
    outdated = [f"{g['file']} is missing" if g["status"] == GoldenStatus.MISSING else f"{g['file']} is stale: {g['detail']}"
                for g in golden_details.values() if g["status"] in OUTDATED]
    return f"golden {'; golden '.join(outdated)}" if outdated else None


def error_kind(entry, error):
    """The ErrorKind of one of entry["errors"]."""
    return ErrorKind.GOLDEN if error == golden_error(entry.get("golden_details") or {}) else ErrorKind.ENGINE


def errors_of(entry, kind):
    """entry["errors"] of one ErrorKind, in order."""
    return [e for e in entry["errors"] if error_kind(entry, e) is kind]


@dataclass
class CaseEntry:
    """A case's entry before its verdict. golden_details: {role: golden detail dict} (GoldenCheck's
    form with its label and the engine's name); tensors: [TensorResult]; free_run: the names of
    the outputs that are the case's free run (reported, not failed, when they part); checks and
    free_runs: verify/expectations.py's records; engine_info: {role: {"kernel", "browser"}}, None
    for a case that was not run (the key is then absent)."""

    id: str
    kind: str
    op: str
    file: str
    status: str
    tolerance: float = None
    tolerance_reason: str = None
    golden_details: dict = field(default_factory=dict)
    tensors: list = field(default_factory=list)
    free_run: frozenset = frozenset()
    checks: list = field(default_factory=list)
    free_runs: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    failures: list = field(default_factory=list)
    seconds: dict = field(default_factory=dict)
    engine_info: dict = None

    def to_dict(self):
        return {
            "id": self.id,
            "kind": self.kind,
            "op": self.op,
            "file": self.file,
            "passed": False,
            "status": self.status,
            "tolerance": self.tolerance,
            **({"tolerance_reason": self.tolerance_reason} if self.tolerance_reason else {}),
            "goldens": {role: d["status"] for role, d in self.golden_details.items()},
            "golden_details": self.golden_details,
            "tensors": [dict(t.to_dict(), part="free_run" if t.role == "output" and t.name in self.free_run else "strict")
                        for t in self.tensors],
            "checks": self.checks,
            "free_runs": self.free_runs,
            "replay": [],
            "evaluation": None,
            "errors": self.errors,
            "failures": self.failures,
            "seconds": self.seconds,
            **({"engine_info": self.engine_info} if self.engine_info is not None else {}),
        }


@dataclass(kw_only=True)
class Report:
    """The report of a run (verify/suite.py), or a saved one read back (from_dict, `verify show`).
    cases: the entries in their report form, decided; reference_cache: what the reference cache did
    (verify/reference_cache.py); browsers: --browser's verdict per browser (verify/browsers.py);
    timings: verify/timings.py's sections. The optional ones are None when absent."""

    passed: bool
    suite: str
    tolerance: float
    bitwise: bool = False
    rule: str
    summary: dict
    engines: dict
    cases: list
    unused_goldens: list = field(default_factory=list)
    reference_cache: dict = None
    browsers: dict = None
    timings: dict = None

    def reference_origin(self):
        """The report's `reference` field, so a deploy gate can require fresh: whether the reference
        was computed fresh for every case that ran or taken from the reference cache for some."""
        ran = [c["id"] for c in self.cases if c.get("status") != NOT_RUN]
        ids = set(ran)
        hits = sum(i in ids for i in (self.reference_cache or {}).get("from_cache", []))
        return {"fresh": hits == 0, "from_cache": hits, "cases": len(ran)}

    def to_dict(self):
        """The JSON report's form: the keys in the report's order, the optional ones only when
        present, and last the `reference` that follows from the cases and the reference cache."""
        optional = {"reference_cache": self.reference_cache, "browsers": self.browsers, "timings": self.timings}
        return {"passed": self.passed, "suite": self.suite, "tolerance": self.tolerance, "bitwise": self.bitwise,
                "rule": self.rule, "summary": self.summary, "engines": self.engines, "cases": self.cases,
                "unused_goldens": self.unused_goldens, **{k: v for k, v in optional.items() if v is not None},
                "reference": self.reference_origin()}

    @classmethod
    def from_dict(cls, doc):
        """A saved report (a dict the report schema accepts). `reference` is derived, never read back;
        `document_memo`, which older reports hold, is read by nothing."""
        return cls(**{f.name: doc[f.name] for f in fields(cls) if f.name in doc})

    def cleaned(self, clean):
        """A copy with clean applied to every field (verify/text.py's clean_data, or
        verify/report.py's jsonable), so no renderer writes a control character from the data."""
        return Report(**{f.name: clean(getattr(self, f.name)) for f in fields(self)})
