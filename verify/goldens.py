"""Committed goldens: checking each engine's fresh output against golden/<suite>/<engine>/<id>.json,
and regenerating them atomically (docs/goldens.md, docs/runner.md)."""

import ctypes
import json
import os
import re
import shlex
import shutil
import stat
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: no lock (one regeneration at a time is then the user's care)
    fcntl = None

from . import decoded, lifecycle

from .compare import compare_named
from .documents import DocumentError, case_difference, file_kind, read_bytes
from .errors import InputError
from .files import umask
from .text import clean

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

@dataclass
class Change:
    engine: str
    added: list
    changed: list
    removed: list
    unchanged: int
    kept: list = ()  # goldens of ids outside the catalogue, left in place (not the project's own catalogue)


def plan(golden_dir, fresh_files, catalogue_ids, own_catalogue=True):
    """What a regen would do. fresh_files: {engine: {id: bytes}}. Catalogue goldens that were not
    regenerated (--case) are kept. Goldens of ids outside the catalogue are removed only when it
    is the project's own (own_catalogue: cases/<suite>/, from which their cases were removed); a
    regeneration over another catalogue (--cases-dir) was not asked about them and keeps them."""
    result = {}
    for engine, fresh in fresh_files.items():
        directory = Path(golden_dir) / engine
        old = {p.stem: p.read_bytes() for p in sorted(directory.glob("*.json"))} if directory.is_dir() else {}
        new = {i: b for i, b in old.items() if i in catalogue_ids or not own_catalogue}
        new.update(fresh)
        change = Change(
            engine,
            added=sorted(set(new) - set(old)),
            changed=sorted(i for i in set(new) & set(old) if new[i] != old[i]),
            removed=sorted(set(old) - set(new)),
            unchanged=sum(1 for i in set(new) & set(old) if new[i] == old[i]),
            kept=sorted(set(old) - set(catalogue_ids)) if not own_catalogue else [],
        )
        result[engine] = (change, new, old)
    return result


def check_target(golden_dir, engines=("reference", "port"), display=str):
    """Refuse, before anything runs, a golden directory that regen cannot replace as it promises:
    a symbolic link (the swap would exchange the link, not the tree it points to, and leave the
    link behind under a staging name), or one whose engine directory is a link. InputError."""
    golden_dir = Path(golden_dir)
    for path in [golden_dir] + [golden_dir / e for e in engines]:
        if path.is_symlink():
            raise InputError(
                f"{display(path)} is a symbolic link (to {os.readlink(path)}); `verify regen` replaces the golden tree "
                "in one rename and would replace the link, not what it points to; give the real directory with "
                "--golden-dir, or replace the link by the directory")


def write_atomically(golden_dir, contents):
    """Replace golden_dir by a directory holding contents ({engine: {id: bytes}}) in one step: the
    new tree is written and fsynced in a sibling temporary directory, then swapped in. A run killed
    before the swap leaves the previous goldens untouched. Entries of golden_dir other than the
    engines' *.json files are carried over unchanged. An OSError means nothing changed; a
    failure after the swap is an InputError that says the new goldens are in place."""
    golden_dir = Path(golden_dir)
    check_target(golden_dir, contents)
    parent = golden_dir.parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{staging_prefix(golden_dir)}{lifecycle.token()}-", dir=parent))
    swapped = False
    try:
        os.chmod(staging, 0o777 & ~umask())  # mkdtemp makes it private; goldens are ordinary files
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
            swapped = True
            shutil.rmtree(staging)
        else:
            os.replace(staging, golden_dir)
            swapped = True
        _fsync_dir(parent)
    except OSError as exc:
        if not swapped:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        left = f"; the previous goldens are left in {staging} (delete it)" if staging.exists() else ""
        raise InputError(f"the new goldens are in {golden_dir}, but finishing the swap failed ({exc.strerror or exc})"
                         f"{left}") from None
    except BaseException:
        if not swapped and staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
        raise


def staging_prefix(golden_dir):
    return f".{Path(golden_dir).name}.new-"


_STAGING_OWNER = re.compile(r"\.new-(\d+)-(\d+)-[A-Za-z0-9_]+$")


def leftovers(golden_dir):
    """Staging directories beside golden_dir that no running regeneration owns: left by one that
    was killed (named after their owner, verify/lifecycle.py; an unnamed one only counts while the
    caller holds the lock, when no other regeneration can be writing)."""
    golden_dir = Path(golden_dir)
    found = []
    for path in sorted(golden_dir.parent.glob(f"{staging_prefix(golden_dir)}*")):
        m = _STAGING_OWNER.search(path.name)
        if m and lifecycle.alive(f"{m.group(1)}-{m.group(2)}"):
            continue
        found.append(path)
    return found


def lock_path(golden_dir):
    golden_dir = Path(golden_dir)
    return golden_dir.parent / f".{golden_dir.name}.lock"


def _holder(fd):
    """Who holds the lock, as its file says (pid, command, since), read through our own descriptor."""
    try:
        info = json.loads(os.pread(fd, 1 << 16, 0).decode("utf-8") or "{}")
        return f"pid {int(info['pid'])} (`{clean(info['command'])}`, since {clean(info['since'])})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another regeneration (it has not written who it is yet)"


def check_lock(golden_dir, display=str):
    """Refuse, before anything runs, a regeneration lock (lock_path()) that is anything but a
    regular file of its own: a symbolic link (dangling or not), a directory, a named pipe, a
    device, a socket, a hard link to another file. The lock file is truncated and rewritten by
    every regeneration, so whatever it points to or shares its data with would be destroyed.
    InputError; regen_lock() checks again through the descriptor it opens."""
    path = lock_path(golden_dir)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InputError(_lock_refused(path, f"cannot be examined ({exc.strerror or exc})", display)) from None
    problem = _lock_problem(path, info)
    if problem:
        raise InputError(_lock_refused(path, problem, display))


def _lock_problem(path, info):
    """What makes `info` (an lstat or fstat of the lock) unusable as the lock, or None."""
    if stat.S_ISLNK(info.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return f"is a symbolic link (to {clean(target)})"
    if not stat.S_ISREG(info.st_mode):
        return f"is {file_kind(info.st_mode)}, not a regular file"
    if info.st_nlink > 1:
        return f"is a regular file with {info.st_nlink} names (a hard link: another file shares its data)"
    return None


def _lock_refused(path, problem, display):
    return (f"the regeneration lock {display(path)} {problem}; `verify regen` empties and rewrites that file, so it "
            "must be a regular file of its own: remove it (nothing else needs it) and run again")


@contextmanager
def regen_lock(golden_dir, out=None, wait=600.0, display=str):
    """One regeneration at a time writes golden_dir: an exclusive flock on lock_path() (beside the
    golden directory; released by the kernel however the holder ends), which says who holds it.
    Taken after the engines ran, around planning and writing, so a second regeneration plans from
    the tree the first one wrote: both selections' goldens are kept. A regeneration that finds it
    held says so on `out` and waits up to `wait` seconds, then gives up (InputError). Yields the
    staging directories left over by killed regenerations (leftovers(), while the lock is held)."""
    golden_dir = Path(golden_dir)
    path = lock_path(golden_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_lock(path, display)
    held = False
    try:
        if fcntl is not None:
            deadline, said = time.monotonic() + wait, False
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    holder = _holder(fd)
                    if time.monotonic() > deadline:
                        raise InputError(f"{display(golden_dir)} is being regenerated by {holder}; gave up after {wait:g} s "
                                         "(--timeout); wait for it to finish, or stop it, and run again") from None
                    if not said and out is not None:
                        print(f"waiting: {display(golden_dir)} is being regenerated by {holder}", file=out, flush=True)
                        said = True
                    time.sleep(0.1)
        held = True
        info = {"pid": os.getpid(), "command": shlex.join(["verify", *sys.argv[1:]]),
                "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode("utf-8"), 0)
        yield leftovers(golden_dir)
    finally:
        if held:
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
        os.close(fd)  # releases the flock


def _open_lock(path, display):
    """A descriptor of the lock file, created if need be, opened without following a symbolic link
    (O_NOFOLLOW) and without blocking (O_NONBLOCK: a named pipe never waits for a writer), then
    required to be a regular file of its own (fstat); InputError otherwise."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:  # a link (ELOOP), a directory (EISDIR): said as check_lock says it
        try:
            problem = _lock_problem(path, os.lstat(path))
        except OSError:
            problem = None
        raise InputError(_lock_refused(path, problem or f"cannot be opened ({exc.strerror or exc})", display)) from None
    try:
        problem = _lock_problem(path, os.fstat(fd))
    except OSError as exc:
        problem = f"cannot be examined ({exc.strerror or exc})"
    if problem:
        os.close(fd)
        raise InputError(_lock_refused(path, problem, display))
    return fd


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
