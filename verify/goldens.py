"""Committed goldens: checking each engine's fresh output against golden/<suite>/<engine>/<id>.json
(docs/goldens.md). They are written only by `verify regen` (verify/regen.py)."""

from dataclasses import dataclass
from pathlib import Path

from . import decoded
from .compare import compare_named
from .documents import DocumentError, case_difference, read_bytes
from .errors import InputError

METADATA = ("schema_version", "engine", "generator", "case")
STATUSES = ("fresh", "drift", "parted", "stale", "missing", "not run")
LAST_BIT_ULP = 16  # a drift up to this many ULP is called "last-bit"


@dataclass
class GoldenCheck:
    status: str  # one of STATUSES; fresh, drift and parted pass (unless --bitwise)
    file: str  # the golden's path as shown to the user
    detail: str = ""
    max_ulp: int = None

    @property
    def passed(self):
        return self.status in ("fresh", "drift", "parted")

    @property
    def label(self):
        if self.status == "drift" and not self.max_ulp:  # every value the same bits: what differs is named
            return f"same values, {self.detail}"
        if self.status == "drift":
            size = "fresh, last-bit drift" if self.max_ulp <= LAST_BIT_ULP else "within the tolerance"
            return f"{size} (max {self.max_ulp} ULP)"
        if self.status == "parted":
            return f"free run parted ({self.detail})"
        return self.status

    def to_dict(self):
        return {"status": self.status, "file": self.file, "detail": self.detail, "max_ulp": self.max_ulp}


def check(golden_path, shown, fresh, tol, schemas, free_run=(), suite="attention", required_digests=()):
    """Status of one committed golden against the engine's fresh output of the same case (fresh:
    its bytes, doc and decoded tensors, verify/verdict.py's Fresh). A golden that is not a valid
    document is an InputError (the repository is damaged).

    fresh: the same bytes. drift: the same metadata and required digests, every tensor within the
    rule, the bytes differ; detail names what differs (tensors in their last bits, digests of
    computed values, or the text alone: max_ulp 0, the same bits everywhere), and --bitwise fails
    every drift (verify/verdict.py). parted: as drift, except that outputs of a training run's
    free run (free_run: their names) moved beyond the rule: the engine's own arithmetic changed
    in its last bits, which hundreds of steps amplify; reported, not failed. stale: anything else
    differs (the case, the engine's name, a required digest changed or missing on either side, a
    tensor's name or shape, a tensor beyond the rule)."""
    golden_path = Path(golden_path)
    fresh_bytes, fresh_doc, fresh_tensors = fresh.bytes, fresh.doc, fresh.tensors
    if not golden_path.exists() and not golden_path.is_symlink():
        return GoldenCheck("missing", shown, "no such file")
    try:
        golden_bytes = read_bytes(golden_path)  # a regular file of bounded size, or refused unread
        if golden_bytes == fresh_bytes:
            return GoldenCheck("fresh", shown, max_ulp=0)
        golden_doc, golden_tensors = decoded.golden(golden_bytes, schemas)
    except DocumentError as exc:
        raise InputError(f"golden {shown} is not a valid golden: {exc}; rewrite it with `verify regen {suite}`") from None
    for key in METADATA:
        same = case_difference(fresh_doc[key], golden_doc[key]) is None if key == "case" else golden_doc[key] == fresh_doc[key]
        if not same:  # the case by value and by type, as the fresh output's echo was checked (true is not 1)
            return GoldenCheck("stale", shown, f"its {key} differs from the fresh output's")
    golden_digests, fresh_digests = golden_doc.get("digests") or {}, fresh_doc.get("digests") or {}
    moved_digests = sorted(n for n in set(golden_digests) | set(fresh_digests) if golden_digests.get(n) != fresh_digests.get(n))
    for name in moved_digests:  # a digest either side lacks counts as changed: removing one hides nothing
        if name.startswith("init") or name in required_digests:
            if name in golden_digests and name in fresh_digests:
                why = "differs from the fresh output's"
            else:
                why = "is missing (the fresh output writes it)" if name in fresh_digests else "is not in the fresh output"
            return GoldenCheck("stale", shown, f"its digest {name} {why}")
    worst, failing, parted, moved = 0, [], [], []
    for part, role in (("inputs", "input"), ("outputs", "output")):
        for result in compare_named(role, golden_tensors[part], fresh_tensors[part], tol, ("golden", "fresh")):
            free = part == "outputs" and result.name in free_run and result.message is None
            if not result.passed and free:
                parted.append(result.name)
            elif not result.passed:
                why = result.message or f"{result.mismatched} / {result.total} elements beyond the tolerance"
                failing.append(f"{part}.{result.name}: {why}")
            elif result.max_ulp:
                worst = max(worst, result.max_ulp)
                moved.append(f"{part}.{result.name}")
    if failing:
        return GoldenCheck("stale", shown, "; ".join(failing))
    if parted:
        return GoldenCheck("parted", shown, f"{len(parted)} output(s) beyond the tolerance: {_few(parted)}", max_ulp=None)
    what = ([f"values within the tolerance, not the same bits: {_few(moved)}"] if moved else []) \
        + ([f"digests differ: {_few(moved_digests)}"] if moved_digests else [])
    return GoldenCheck("drift", shown, "; ".join(what) or "the text alone differs", max_ulp=worst)


def _few(names, shown=3):
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def unused(golden_dir, engine_names, case_ids):
    """Golden files whose id is not in the catalogue, per engine, sorted."""
    found = []
    for name in engine_names:
        directory = Path(golden_dir) / name
        if directory.is_dir():
            found += [p for p in sorted(directory.glob("*.json")) if p.stem not in case_ids]
    return found


# --- regeneration -------------------------------------------------------------------------------
