"""`verify regen`: run the verification as `verify attention` does, refuse when an engine failed a
case or (without --force) when a case fails for any reason but its goldens, then replace
golden/<suite>/<engine>/ in one atomic step (docs/goldens.md). The committed goldens are only
ever written here: a staging tree beside them, filled and synced, swapped in with one rename
(RENAME_EXCHANGE where the kernel has it), under a lock that keeps a second regeneration out."""

import argparse
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

from . import advice, cli, engines, lifecycle, options, suite, verdict
from .documents import file_kind
from .errors import EXIT_MISMATCH, EXIT_PASS, InputError
from .files import umask
from .progress import Progress
from .report import Style, case_lines
from .text import clean


def parser():
    p = argparse.ArgumentParser(prog="verify regen",
                                description="Run both engines, refuse when they disagree (unless --force), then "
                                            "replace golden/<suite>/reference and golden/<suite>/port in one atomic "
                                            "step, removing goldens of cases no longer in the catalogue.")
    p.add_argument("suite", choices=cli.SUITES, help="the suite to regenerate")
    options.run_options(p)
    p.add_argument("--force", action="store_true", help="write even where reference and port disagree")
    options.engine_options(p)
    return p


def run(args, out):
    """Run the verification as `verify attention` does (replays included), refuse when an engine
    failed a case or, without --force, when a case fails for any reason but its goldens, then write
    each engine's documents into golden/<suite>/<engine name>/ in one atomic step."""
    project, policy = cli.Project(args, args.suite), verdict.Policy(args.tol, args.bitwise)
    check_target(project.golden_dir, display=project.display)  # a symlinked golden tree: refused up front
    check_lock(project.golden_dir, display=project.display)  # a lock that is a link, a pipe ...: likewise
    own_catalogue = Path(project.cases_dir).resolve() == (project.root / "ops" / args.suite).resolve()
    every, selected = project.cases(args.case)
    progress, kept, style = Progress(out), {}, Style(out)
    try:
        report = suite.run(project.context(args.timeout), selected, {c.id for c in every},
                           engines.engines_of(project.root, args),
                           suite.RunOptions(policy, jobs=args.jobs, progress=progress, keep=kept,
                                            on_case=lambda entry: progress.print_lines(case_lines(entry, style, policy.tol)[:1])))
    finally:
        progress.clear()
    problems, disagree, fresh_files = [], [], {}
    for entry in report.cases:
        if entry["status"] == verdict.NOT_RUN:
            print(clean(f"skipped {entry['id']}: {entry['errors'][0]}"), file=out)  # its goldens are kept
            continue
        fresh = kept[entry["id"]]
        engine_errors = [f.error for f in fresh.values() if f.error]
        problems += [f"{entry['id']}: {e}" for e in engine_errors]
        if engine_errors:
            continue
        for f in fresh.values():
            fresh_files.setdefault(f.engine_name, {})[entry["id"]] = f.bytes
        without_goldens = verdict.decide(json.loads(json.dumps(entry)), policy, include_goldens=False)
        if not without_goldens["passed"]:
            disagree.append((entry["id"], without_goldens["failures"], advice.situation(entry)))
    if problems:
        for p in problems:
            print(f"error: {clean(p)}", file=out)
        print(f"nothing written: {len(problems)} engine error(s); fix them, then regenerate", file=out)
        return EXIT_MISMATCH
    if disagree and not args.force:
        for case_id, why, found in disagree:
            print(clean(f"engines disagree: {case_id}: {'; '.join(why[:3])}" + (f" and {len(why) - 3} more" if len(why) > 3 else "")),
                  file=out)
            if found:
                print(clean(f"  what to do ({found[0]}): {found[1]}"), file=out)
        print(f"nothing written: {len(disagree)} case(s) fail the verdict of `verify {args.suite}` whatever their goldens "
              f"(the first: `verify {args.suite} --case {disagree[0][0]}`); --force writes them anyway, as they are",
              file=out)
        return EXIT_MISMATCH
    with regen_lock(project.golden_dir, out, args.timeout, project.display) as leftovers:  # one writer at a time
        planned = plan(project.golden_dir, fresh_files, {c.id for c in every}, own_catalogue)  # the tree as it is now
        changed = any(c.added or c.changed or c.removed for c, _, _ in planned.values())
        if changed:  # write first: what follows is only the account of it
            try:
                write_atomically(project.golden_dir, {name: new for name, (_, new, _) in planned.items()})
            except OSError as exc:
                raise InputError(f"could not write the new goldens ({exc.strerror or exc}); "
                                 f"{project.display(project.golden_dir)} is as it was before") from None
    _account(args, out, project, planned, changed, leftovers, disagree)
    return EXIT_PASS


def _account(args, out, project, planned, changed, leftovers, disagree):
    """What a regeneration did, golden by golden: each change in numbers (verify/tools/diff.py)."""
    from .tools.diff import describe

    for name, (change, new, old) in planned.items():
        print(f"{name}: {len(change.changed)} changed, {len(change.added)} added, {len(change.removed)} removed, "
              f"{change.unchanged} unchanged", file=out)
        for case_id in change.changed:
            print(f"  changed {case_id}: {describe(old[case_id], new[case_id], project.schemas, args.tol)}", file=out)
        for case_id in change.added:
            print(f"  added {case_id}", file=out)
        for case_id in change.removed:
            print(f"  removed {case_id}", file=out)
    print(f"{'wrote' if changed else 'no change in'} {project.display(project.golden_dir)}", file=out)
    left = {name: len(change.kept) for name, (change, _, _) in planned.items() if change.kept}
    if left:
        counts = ", ".join(f"{name} {n}" for name, n in left.items())
        print(f"note: kept {sum(left.values())} golden(s) of cases not in {project.display(project.cases_dir)} ({counts}): "
              f"only a regeneration of the project's own catalogue (ops/{args.suite}/) removes the goldens of cases "
              "removed from it; delete them by hand if they are stale", file=out)
    for path in leftovers:
        print(f"note: {project.display(path)} is left over from an interrupted regeneration; the goldens were "
              "never touched by it and it can be deleted", file=out)
    if disagree:
        print(f"written with --force although these cases fail: {', '.join(c for c, _, _ in disagree)}", file=out)


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
    is the project's own (own_catalogue: ops/<suite>/, from which their cases were removed); a
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
                write_synced(directory / f"{case_id}.json", data)
            fsync_dir(directory)
        fsync_dir(staging)
        if golden_dir.exists():
            swap(staging, golden_dir)  # staging now holds the previous goldens
            swapped = True
            shutil.rmtree(staging)
        else:
            os.replace(staging, golden_dir)
            swapped = True
        fsync_dir(parent)
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


def write_synced(path, data):
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def fsync_dir(path):
    if os.name != "posix":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def swap(a, b):
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
