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
GoldenCheck; their to_dict() give their report forms."""

import enum
from dataclasses import dataclass, field


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
