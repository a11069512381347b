"""Committed goldens: checking each engine's fresh output against golden/<suite>/<engine>/<id>.json,
and regenerating them atomically (docs/goldens.md, docs/runner.md)."""

import ctypes
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .compare import compare_named
from .documents import DocumentError, case_difference, decode_tensors, parse_bytes, read_bytes
from .errors import InputError

METADATA = ("schema_version", "engine", "generator", "case")
STATUSES = ("fresh", "drift", "stale", "missing", "not run")
LAST_BIT_ULP = 16  # a drift up to this many ULP is called "last-bit"; beyond, "drift within the tolerance"


@dataclass
class GoldenCheck:
    status: str  # one of STATUSES; fresh and drift pass
    file: str  # the golden's path as shown to the user
    detail: str = ""
    max_ulp: int = None

    @property
    def passed(self):
        return self.status in ("fresh", "drift")

    @property
    def label(self):
        if self.status == "drift":
            size = "last-bit drift" if self.max_ulp <= LAST_BIT_ULP else "drift within the tolerance"
            return f"fresh, {size} (max {self.max_ulp} ULP)"
        return self.status

    def to_dict(self):
        return {"status": self.status, "file": self.file, "detail": self.detail, "max_ulp": self.max_ulp}


def check(golden_path, shown, fresh_bytes, fresh_doc, fresh_tensors, tol, schemas, may_drift=()):
    """Status of one committed golden against the engine's fresh output of the same case. A
    golden that is not a valid document is an InputError (the repository is damaged). Outputs
    named in may_drift (a free run's records) may differ beyond the tolerance: libm's last bits,
    amplified over many steps, can differ between machines; they do not make a golden stale."""
    golden_path = Path(golden_path)
    if not golden_path.exists() and not golden_path.is_symlink():
        return GoldenCheck("missing", shown, "no such file")
    try:
        golden_bytes = read_bytes(golden_path)  # a regular file of bounded size, or refused unread
        if golden_bytes == fresh_bytes:
            return GoldenCheck("fresh", shown, max_ulp=0)
        golden_doc = parse_bytes(golden_bytes)
        schemas.check("golden", golden_doc)
        golden_tensors = decode_tensors(golden_doc)
    except DocumentError as exc:
        raise InputError(f"golden {shown} is not a valid golden: {exc}; rewrite it with `verify regen attention`") from None
    for key in METADATA:
        same = case_difference(fresh_doc[key], golden_doc[key]) is None if key == "case" else golden_doc[key] == fresh_doc[key]
        if not same:  # the case by value and by type, as the fresh output's echo was checked (true is not 1)
            return GoldenCheck("stale", shown, f"its {key} differs from the fresh output's")
    for name, digest in sorted((golden_doc.get("digests") or {}).items()):
        if name.startswith("init") and (fresh_doc.get("digests") or {}).get(name) != digest:
            return GoldenCheck("stale", shown, f"its digest {name} differs from the fresh output's")
    worst, failing = 0, []
    for part, role in (("inputs", "input"), ("outputs", "output")):
        for result in compare_named(role, golden_tensors[part], fresh_tensors[part], tol, ("golden", "fresh")):
            drift_ok = part == "outputs" and result.name in may_drift and result.message is None
            if not result.passed and not drift_ok:
                why = result.message or f"{result.mismatched} / {result.total} elements beyond the tolerance"
                failing.append(f"{part}.{result.name}: {why}")
            elif result.max_ulp is not None:
                worst = max(worst, result.max_ulp)
    if failing:
        return GoldenCheck("stale", shown, "; ".join(failing))
    return GoldenCheck("drift", shown, "values within the tolerance, text differs", max_ulp=worst)


def unused(golden_dir, engine_names, case_ids):
    """Golden files whose id is not in the catalogue, per engine, sorted."""
    found = []
    for name in engine_names:
        directory = Path(golden_dir) / name
        if directory.is_dir():
            found += [p for p in sorted(directory.glob("*.json")) if p.stem not in case_ids]
    return found


# --- regeneration -------------------------------------------------------------------------------

@dataclass
class Change:
    engine: str
    added: list
    changed: list
    removed: list
    unchanged: int


def plan(golden_dir, fresh_files, catalogue_ids):
    """What a regen would do. fresh_files: {engine: {id: bytes}}. Goldens of ids outside the
    catalogue are removed; catalogue goldens that were not regenerated (--case) are kept."""
    result = {}
    for engine, fresh in fresh_files.items():
        directory = Path(golden_dir) / engine
        old = {p.stem: p.read_bytes() for p in sorted(directory.glob("*.json"))} if directory.is_dir() else {}
        new = {i: b for i, b in old.items() if i in catalogue_ids}
        new.update(fresh)
        change = Change(
            engine,
            added=sorted(set(new) - set(old)),
            changed=sorted(i for i in set(new) & set(old) if new[i] != old[i]),
            removed=sorted(set(old) - set(new)),
            unchanged=sum(1 for i in set(new) & set(old) if new[i] == old[i]),
        )
        result[engine] = (change, new, old)
    return result


def write_atomically(golden_dir, contents):
    """Replace golden_dir by a directory holding contents ({engine: {id: bytes}}) in one step: the
    new tree is written and fsynced in a sibling temporary directory, then swapped in. A run killed
    before the swap leaves the previous goldens untouched. Entries of golden_dir other than the
    engines' *.json files are carried over unchanged."""
    golden_dir = Path(golden_dir)
    parent = golden_dir.parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{golden_dir.name}.new-", dir=parent))
    try:
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes it private; goldens are ordinary files
        if golden_dir.is_dir():
            _carry_over(golden_dir, staging, set(contents))
        for engine, files in contents.items():
            directory = staging / engine
            directory.mkdir(exist_ok=True)
            for case_id, data in sorted(files.items()):
                _write_synced(directory / f"{case_id}.json", data)
            _fsync_dir(directory)
        _fsync_dir(staging)
        if golden_dir.exists():
            _swap(staging, golden_dir)  # staging now holds the previous goldens
            shutil.rmtree(staging)
        else:
            os.replace(staging, golden_dir)
        _fsync_dir(parent)
    except BaseException:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
        raise


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _carry_over(golden_dir, staging, engines):
    for entry in golden_dir.iterdir():
        target = staging / entry.name
        if entry.name in engines and entry.is_dir():
            target.mkdir()
            for item in entry.iterdir():
                if item.suffix != ".json":
                    _copy(item, target / item.name)
        else:
            _copy(entry, target)


def _copy(src, dst):
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True)
    else:
        shutil.copy2(src, dst, follow_symlinks=False)


def _write_synced(path, data):
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _fsync_dir(path):
    if os.name != "posix":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _swap(a, b):
    """Exchange two directories. Linux renameat2(RENAME_EXCHANGE) does it atomically; elsewhere two
    renames, with the previous tree kept under a dot-name if the second one fails."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        renameat2 = None
    if renameat2 is not None:
        if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
            return
    aside = Path(tempfile.mkdtemp(prefix=f".{b.name}.old-", dir=b.parent))
    aside.rmdir()
    os.rename(b, aside)
    try:
        os.rename(a, b)
    except OSError as exc:
        raise InputError(f"could not move the new goldens into {b} ({exc}); the previous ones are in {aside}") from None
    os.rename(aside, a)
