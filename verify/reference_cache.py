"""The reference's results kept by content (docs/runner.md, "The reference cache").

The reference is deterministic: what it writes for a case is a function of its own sources, the
case as written, the pretrained model's pinned files, and the interpreter, NumPy and machine it
runs on. `verify attention` keys each case's reference output on all of those; when the key is
found, the case's documents, training states and status line are placed from the cache into the
run's reference directory (hard links to the files read and checked, else copies of their bytes)
and the reference does not run that case. The port always runs afresh: every verdict is still
judged on a fresh run of the port against these documents.

The cache is used by `verify attention` alone, never by `verify regen`, `verify faults`, `verify
export` or `verify inspect`, never with --reference-cmd (the runner cannot know another command's
sources), and not at all with --fresh or VERIFY_FRESH=1. The tests run with a cache and key of
their own (conftest.py).
The report names it: "reference: N of M cases from cache, key K" in the terminal, and
`reference_cache` in the JSON report.

What it trusts, and what it never trusts. <id>.full.json and training states have no committed
golden, so nothing but the entry vouches for them: an entry is used only when its manifest (the
size and SHA-256 of every file, the status line's digest, the case, the environment and the entry's
own key) carries an HMAC-SHA256 made with the user's own key, 32 random bytes in
$XDG_CONFIG_HOME/attention-parity/cache-key (else ~/.config/attention-parity/cache-key), a file the
cache directory does not hold: an entry restored from elsewhere, planted or rewritten never
verifies, and is run afresh and reported as not trusted. The cache is not used at all (one note;
the reference runs afresh) when the key file is not a regular file of this user with mode 0600,
when the cache directory or one of its parents is owned by another user or writable by group or
others (a root-owned sticky parent such as /tmp excepted), when the cache directory is /, the home
directory, the checkout, one of its parents or inside it, when cache and key share a directory, or
when anything under reference/ is a symbolic link (or not a regular file), whose target the key
would not cover.

Layout, under cache_dir() ($VERIFY_REFERENCE_CACHE, else ~/.cache/attention-parity/reference):

    <environment key>/environment.json     what the key was made from (verify cache shows it)
    <environment key>/<case key>/status.json, manifest.json, manifest.hmac, out/<id>.json, <id>.full.json, <id>.states/

The environment key is the SHA-256 of the reference's sources (every file under reference/, by
path and content), the Python and NumPy versions, the platform, NumPy's CPU features and this
module's FORMAT. A case key adds the case's specification (canonical JSON) and, for a pretrained
case, the model's pinned SHA-256s. An entry is written whole (a temporary directory, then a
rename). Storing never fails a run: a cache that cannot be written is a note. `verify cache
--prune` and `--clear` (verify/tools/cache.py) remove only what this module makes.
"""

import errno
import hashlib
import hmac
import json
import os
import platform
import re
import shutil
import stat
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from . import layout, models
from .engines import PROTOCOL
from .documents import DocumentError, read_bytes
from .files import write_atomically

FORMAT = 2  # the layout and key recipe; raise it when either changes (2: entries authenticated)
FRESH_ENV = "VERIFY_FRESH"  # set to anything but "" or "0": the cache is not used
DIR_ENV = "VERIFY_REFERENCE_CACHE"  # another directory for it
SOURCES = "reference"  # the directory, under the project root, whose every file is a source
STALE_TEMP = 3600.0  # seconds after which a temporary entry left by a dead run is removed
KEY_BYTES = 32
KEY_DIR = "attention-parity"  # under $XDG_CONFIG_HOME or ~/.config
KEY_FILE = "cache-key"
MAC_CONTEXT = b"attention-parity reference cache entry\0"  # what the HMAC is over: this, then manifest.json's bytes
OLD_MEMO = "documents"  # the decoded-document memo of earlier versions (removed): --prune and --clear remove it
MAX_MANIFEST = 16 << 20  # bytes: a manifest or status line larger than this is not an entry of ours
HEX64 = re.compile(r"[0-9a-f]{64}")


class NotUsed(Exception):
    """Why the cache is not used in this run (one line, the run's one note)."""


class SourceLink(NotUsed):
    """Something under reference/ is a symbolic link or not a regular file: the sources digest
    cannot vouch for what it points to."""


def cache_dir(environ=None):
    """Where the reference's results are kept: $VERIFY_REFERENCE_CACHE, else
    <models.cache_root()>/reference (~/.cache/attention-parity/reference by default)."""
    environ = os.environ if environ is None else environ
    if environ.get(DIR_ENV):
        return models.expand(environ[DIR_ENV], f"${DIR_ENV}")
    return models.cache_root(environ) / "reference"


def key_path(environ=None):
    """The user's cache key: $XDG_CONFIG_HOME/attention-parity/cache-key (an absolute one), else
    ~/.config/attention-parity/cache-key. models.NoCacheDir when there is no home to put it in."""
    environ = os.environ if environ is None else environ
    config = environ.get("XDG_CONFIG_HOME", "")
    if config and os.path.isabs(config):
        return Path(config) / KEY_DIR / KEY_FILE
    return models.expand("~", "the home directory") / ".config" / KEY_DIR / KEY_FILE


def fresh_requested(environ=None):
    environ = os.environ if environ is None else environ
    return environ.get(FRESH_ENV, "") not in ("", "0")


def _canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def sources_digest(root):
    """SHA-256 over every file under root/reference (path, size and content; caches of the
    interpreter excluded), and how many files it covered. SourceLink when reference/ or anything
    under it is a symbolic link, or neither a regular file nor a directory: a link's target could
    change without the digest seeing it (os.walk does not follow links to directories)."""
    base = Path(root) / SOURCES
    h, count = hashlib.sha256(), 0
    if base.is_symlink():
        raise SourceLink(f"{SOURCES}/ is a symbolic link")

    def refuse(path, what):
        return SourceLink(f"{path.relative_to(base.parent).as_posix()} is {what}; the cache key covers "
                          "only the files under reference/ themselves")

    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in dirnames:
            if (Path(dirpath) / name).is_symlink():
                raise refuse(Path(dirpath) / name, "a symbolic link")
        for name in sorted(filenames):
            path = Path(dirpath) / name
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                raise refuse(path, "a symbolic link")
            if not stat.S_ISREG(info.st_mode):
                raise refuse(path, "not a regular file")
            if name.endswith((".pyc", ".pyo")):
                continue
            rel = path.relative_to(base).as_posix()
            data = path.read_bytes()
            h.update(f"{rel}\0{len(data)}\0".encode("utf-8"))
            h.update(data)
            count += 1
    return h.hexdigest(), count


# --- what the cache trusts ------------------------------------------------------------------------

def _owners():
    return (os.geteuid(), 0)


def _mode_problem(path, info, parent):
    """What makes one directory of the cache's path unfit, or None (a parent may be a root-owned
    sticky directory such as /tmp)."""
    if info.st_uid not in _owners():
        return f"{path} is owned by another user (uid {info.st_uid}), not by you (uid {os.geteuid()}) or root"
    if info.st_mode & 0o022:
        if parent and info.st_uid == 0 and info.st_mode & stat.S_ISVTX:
            return None
        who = "others" if info.st_mode & 0o002 else "its group"
        return f"{path} is writable by {who} (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def private_problem(path):
    """None when `path` (a directory, or one to be made) can hold what a run trusts: it and each of
    its parents owned by this user or root and not writable by group or others (a root-owned
    sticky parent, such as /tmp, excepted), every symbolic link on the way owned by this user or
    root. Else what is wrong, in one line."""
    path = Path(os.path.abspath(path))
    for p in (path, *path.parents):  # the links on the way, as written
        try:
            info = os.lstat(p)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return f"{p} cannot be examined ({exc.strerror or exc})"
        if stat.S_ISLNK(info.st_mode) and info.st_uid not in _owners():
            return f"{p} is a symbolic link owned by another user (uid {info.st_uid})"
    real = Path(os.path.realpath(path))
    for p in (real, *real.parents):
        try:
            info = os.stat(p)
        except FileNotFoundError:
            continue  # made by the run, 0700
        except OSError as exc:
            return f"{p} cannot be examined ({exc.strerror or exc})"
        if not stat.S_ISDIR(info.st_mode):
            return f"{p} is a file, not a directory" if stat.S_ISREG(info.st_mode) else f"{p} is not a directory"
        problem = _mode_problem(p, info, parent=p != real)
        if problem:
            return problem
    return None


def place_problem(directory, root, environ=None):
    """What makes `directory` no place for the cache (nor for --prune and --clear to delete in), or
    None: /, the home directory, the checkout, a parent of it, or a directory inside it."""
    environ = os.environ if environ is None else environ
    real = Path(os.path.realpath(directory))
    checkout = Path(os.path.realpath(root))
    if real == Path(real.anchor):
        return f"{directory} is the root directory"
    home = environ.get("HOME")
    if home and os.path.isabs(home) and real == Path(os.path.realpath(home)):
        return f"{directory} is the home directory"
    if real == checkout:
        return f"{directory} is the checkout"
    if real in checkout.parents:
        return f"{directory} is a parent of the checkout {checkout}"
    if checkout in real.parents:
        return f"{directory} is inside the checkout {checkout}"
    return None


def _make_private(path):
    """Make the missing directories of path, each 0700."""
    path = Path(path)
    missing = []
    while not os.path.lexists(path):
        missing.append(path)
        path = path.parent
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            continue
        os.chmod(p, 0o700)  # whatever the umask


def _key_problem(info, path):
    if not stat.S_ISREG(info.st_mode):
        return f"the cache key {path} is not a regular file"
    if info.st_uid != os.geteuid():
        return f"the cache key {path} is owned by uid {info.st_uid}, not by you (uid {os.geteuid()})"
    if stat.S_IMODE(info.st_mode) != 0o600:
        return f"the cache key {path} has mode {stat.S_IMODE(info.st_mode):04o}, not 0600"
    if info.st_size != KEY_BYTES:
        return f"the cache key {path} holds {info.st_size} bytes, not {KEY_BYTES}"
    return None


def _read_key(path):
    """The key's bytes; FileNotFoundError when there is none; NotUsed when the file is unfit."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotUsed(f"the cache key {path} is a symbolic link") from None
        if exc.errno == errno.ENOENT:
            raise
        raise NotUsed(f"the cache key {path} cannot be read ({exc.strerror or exc})") from None
    try:
        problem = _key_problem(os.fstat(fd), path)
        if problem:
            raise NotUsed(problem)
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise NotUsed(f"the cache key {path} holds {len(data)} bytes, not {KEY_BYTES}")
    return data


def load_key(directory, environ=None):
    """The user's 32-byte cache key, made (0600, in a 0700 directory) when there is none yet.
    NotUsed, in one line, when it cannot be trusted: no home, a key file that is not a regular file
    of this user with mode 0600 and 32 bytes, a key directory another user or group could write,
    or a cache directory and key that share a directory."""
    try:
        path = key_path(environ)
    except models.NoCacheDir as exc:
        raise NotUsed(f"no place for the cache key: {exc}") from None
    keydir = path.parent
    real_keydir, real_cache = Path(os.path.realpath(keydir)), Path(os.path.realpath(directory))
    if real_cache == real_keydir or real_keydir in real_cache.parents:
        raise NotUsed(f"the cache directory {directory} is inside the cache key's directory {keydir}")
    if real_cache in real_keydir.parents:
        raise NotUsed(f"the cache key's directory {keydir} is inside the cache directory {directory}")
    problem = private_problem(keydir)
    if problem:
        raise NotUsed(f"the cache key's directory is not private: {problem}")
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    try:
        _make_private(keydir)
        temp = keydir / f".{KEY_FILE}.{os.getpid()}-{uuid.uuid4().hex}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, os.urandom(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)  # whole or not at all; another run's key arriving first is kept
        except FileExistsError:
            pass
        finally:
            os.unlink(temp)
    except OSError as exc:
        raise NotUsed(f"the cache key {path} cannot be made ({exc.strerror or exc})") from None
    try:
        return _read_key(path)
    except FileNotFoundError:
        raise NotUsed(f"the cache key {path} vanished as it was made") from None


def _mac(key, manifest_bytes):
    return hmac.new(key, MAC_CONTEXT + manifest_bytes, hashlib.sha256).hexdigest()


def _cpu_features():
    """NumPy's CPU features that are on (its SIMD dispatch may change a result's last bits)."""
    import numpy
    for name in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):
        try:
            module = __import__(name, fromlist=["__cpu_features__"])
            return sorted(k for k, on in module.__cpu_features__.items() if on)
        except (ImportError, AttributeError):
            continue
    return [f"unknown (numpy {numpy.__version__})"]


def environment(root):
    """What every case's key shares, as a dict (environment.json)."""
    import numpy
    sources, count = sources_digest(root)
    return {
        "format": FORMAT,
        "protocol": PROTOCOL,
        "reference_sources": sources,
        "reference_files": count,
        "python": sys.version,
        "implementation": sys.implementation.cache_tag,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "byteorder": sys.byteorder,
        "cpu_features": _cpu_features(),
    }


def digest(value):
    """The SHA-256 of a value's canonical JSON (an environment's key, a part of a case's)."""
    return hashlib.sha256(_canonical(value).encode("utf-8")).hexdigest()


def case_key(env_key, spec, assets):
    """The key of one case: the environment's, the case as written, and the pinned files of the
    model it reads (a pretrained case)."""
    model = (spec.get("config") or {}).get("model") if isinstance(spec.get("config"), dict) else None
    pinned = None
    if model is not None and model in (assets or {}):
        source = models.SOURCES.get(model)
        pinned = sorted((name, size, sha) for name, (size, sha) in source.files.items()) if source else None
    return digest({"environment": env_key, "case": spec, "model": model, "model_files": pinned})


case_files = layout.case_files  # the names a case's reference output may have in its engine directory


def _tree(path):
    """{relative name: path} of the files under path (path itself when it is a file); None when a
    symlink or anything but a regular file or directory is found."""
    path = Path(path)
    if path.is_symlink():
        return None
    if path.is_file():
        return {path.name: path}
    if not path.is_dir():
        return None
    found = {}
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            full = Path(dirpath) / name
            if full.is_symlink() or not (full.is_dir() or full.is_file()):
                return None
        for name in sorted(filenames):
            full = Path(dirpath) / name
            found[(Path(path.name) / full.relative_to(path)).as_posix()] = full
    return found


@dataclass
class Outcome:
    """What the cache did in one run (the report's `reference_cache`)."""

    directory: str
    key: str = None  # the environment key
    hits: list = field(default_factory=list)  # case ids answered from the cache
    stored: list = field(default_factory=list)
    damaged: list = field(default_factory=list)  # entries found but not matching their manifest
    notes: list = field(default_factory=list)
    not_used: str = None  # why the cache was not used at all in this run
    seconds: float = 0.0  # the runner's time spent on the cache (keys, checks, copies, storing)

    def to_dict(self):
        return {
            "directory": self.directory, "key": self.key,
            "from_cache": list(self.hits), "stored": list(self.stored), "damaged": list(self.damaged),
            "notes": list(self.notes), "not_used": self.not_used, "seconds": round(self.seconds, 4),
        }


class Untrusted(Exception):
    """An entry that is not used: why, in a few words."""


def _open_regular(path, limit):
    """The bytes of a regular file of at most `limit` bytes, never through a symbolic link
    (documents.read_bytes); Untrusted else."""
    try:
        return read_bytes(path, limit, follow_links=False)
    except DocumentError as exc:
        raise Untrusted(f"{path.name}: {exc}") from None


def is_dir(path):
    """A directory itself, not a symbolic link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


class ReferenceCache:
    """The cache as one `verify attention` run uses it. When it cannot be trusted (NotUsed: the
    directory, the key, the checkout's reference/), `refused` says why, the outcome holds that one
    note, and fetch and store do nothing."""

    def __init__(self, root, directory=None, environ=None):
        self.root = Path(root)
        self.refused = None
        self.env = self.env_key = self.key = None
        self._keys = {}
        self._untrusted = {}  # why -> [case ids]
        try:
            given = Path(directory) if directory is not None else cache_dir(environ)
        except models.NoCacheDir as exc:
            given = None
            self.refused = f"no place for it: {exc}"
        self.outcome = Outcome(directory=str(given) if given is not None else None)
        if given is None:
            return self._refuse(self.refused)
        self.directory = Path(os.path.realpath(given))  # every use goes by the path as checked
        try:
            self.env = environment(self.root)  # SourceLink: a symbolic link under reference/
            self.env_key = digest(self.env)
            self.outcome.key = self.env_key
            self.base = self.directory / self.env_key
            problem = place_problem(given, self.root, environ) or private_problem(given)
            if problem:
                raise NotUsed(problem)
            if os.path.lexists(self.base):
                problem = private_problem(self.base) if is_dir(self.base) else f"{self.base} is not a directory"
                if problem:
                    raise NotUsed(problem)
            self.key = load_key(self.directory, environ)
        except NotUsed as exc:
            self._refuse(str(exc))

    def _refuse(self, why):
        self.refused = self.outcome.not_used = why
        self.outcome.notes.append(f"the reference cache is not used in this run: {why}; the reference ran afresh "
                                  "(docs/runner.md, \"The reference cache\")")

    def _entry(self, spec, assets):
        key = case_key(self.env_key, spec, assets)
        self._keys[spec["id"]] = key
        return self.base / key

    def fetch(self, specs, assets, out_dir):
        """Write the output of every case found in the cache into out_dir (the very bytes checked
        against its manifest); returns {case id: status line} for them (each marked "from_cache")."""
        t0 = time.monotonic()
        answered = {}
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        if self.refused:
            return answered
        for spec in specs:
            entry = self._entry(spec, assets)
            if not os.path.lexists(entry):
                continue
            try:
                status, contents, dirs = self._read(entry, spec["id"])
            except Untrusted as exc:
                self.outcome.damaged.append(spec["id"])
                self._untrusted.setdefault(str(exc), []).append(spec["id"])
                continue
            for name in dirs:  # a directory (the states), even an empty one
                (out_dir / name).mkdir(exist_ok=True)
            for name, data in contents.items():
                target = out_dir / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            answered[spec["id"]] = dict(status, from_cache=self._keys[spec["id"]])
            self.outcome.hits.append(spec["id"])
        for why, ids in list(self._untrusted.items())[:3]:
            self.outcome.notes.append(f"reference cache: {len(ids)} entry(ies) not trusted, run afresh and replaced "
                                      f"({why}): {', '.join(ids[:5])}{' ...' if len(ids) > 5 else ''}")
        self.outcome.seconds += time.monotonic() - t0
        return answered

    def _read(self, entry, case_id):
        """(status line, {relative name: bytes}, [directories]) when the
        manifest's HMAC verifies with the user's key, it names this very entry, and the status and
        every file match it; Untrusted (why) else. Each file is read once: what is checked is what
        is written into the run (fetch)."""
        if not is_dir(entry):
            raise Untrusted("the entry is a symbolic link" if os.path.islink(entry) else "the entry is not a directory")
        manifest_bytes = _open_regular(entry / "manifest.json", MAX_MANIFEST)
        mac = _open_regular(entry / "manifest.hmac", 1024)
        if not hmac.compare_digest(mac.strip(), _mac(self.key, manifest_bytes).encode("ascii")):
            raise Untrusted("its manifest is not authenticated by your cache key: restored, planted or rewritten")
        try:
            manifest = json.loads(manifest_bytes)
            status_bytes = _open_regular(entry / "status.json", MAX_MANIFEST)
            status = json.loads(status_bytes)
            if (manifest.get("format") != FORMAT or manifest.get("case") != case_id or manifest.get("key") != entry.name
                    or manifest.get("environment") != self.env_key or status.get("id") != case_id
                    or manifest.get("status") != hashlib.sha256(status_bytes).hexdigest() or status.get("ok") is not True):
                raise Untrusted("it is not the entry its manifest describes")
            if not is_dir(entry / "out"):
                raise Untrusted("out/ is not a directory")
            found, dirs = {}, []
            for name in case_files(case_id):
                where = entry / "out" / name
                if not os.path.lexists(where):
                    continue
                tree = _tree(where)
                if tree is None:
                    raise Untrusted(f"{name} is or holds a symbolic link or a special file")
                if is_dir(where):
                    dirs.append(name)
                found.update(tree)
            files = manifest.get("files")
            if not isinstance(files, dict) or set(files) != set(found) or manifest.get("dirs") != dirs:
                raise Untrusted("its files are not the ones its manifest names")
            contents = {}
            for name, path in found.items():
                size, sha = files[name]
                try:
                    data = _open_regular(path, size)
                except Untrusted:
                    data = None
                if data is None or len(data) != size or hashlib.sha256(data).hexdigest() != sha:
                    raise Untrusted(f"{name} does not match its manifest")
                contents[name] = data
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise Untrusted(f"it cannot be read ({exc})") from None
        return status, contents, dirs

    def store(self, run, specs, assets):
        """Keep the output of every case the reference ran afresh in this run and passed (status
        ok). Never raises for the cache's own trouble: it becomes a note."""
        if self.refused:
            return
        t0 = time.monotonic()
        try:
            _make_private(self.base)
            env_file = self.base / "environment.json"
            if not os.path.lexists(env_file):
                write_atomically(env_file, json.dumps(self.env, indent=2, sort_keys=True) + "\n")
            self._reap_temp()
            for spec in specs:
                case_id = spec["id"]
                status = run.statuses.get(case_id)
                if not status or status.get("ok") is not True or "from_cache" in status:  # from_cache: a hit
                    continue
                entry = self._entry(spec, assets)
                if os.path.lexists(entry) and case_id not in self.outcome.damaged:
                    continue
                if self._store_one(entry, case_id, status, Path(run.out_dir)):
                    self.outcome.stored.append(case_id)
        except OSError as exc:
            self.outcome.notes.append(f"the reference cache could not be written ({exc.strerror or exc}): "
                                      f"{self.directory}; the run itself is not affected")
        self.outcome.seconds += time.monotonic() - t0

    def _store_one(self, entry, case_id, status, out_dir):
        files = {}
        for name in case_files(case_id):
            if not os.path.lexists(out_dir / name):
                continue
            tree = _tree(out_dir / name)
            if tree is None:
                return False  # not plain files: not kept
            files.update(tree)
        if f"{case_id}.json" not in files:
            return False
        temp = self.base / f".tmp-{os.getpid()}-{uuid.uuid4().hex}"
        try:
            (temp / "out").mkdir(parents=True)
            dirs = []
            for name in case_files(case_id):
                source = out_dir / name
                if source.is_dir():
                    shutil.copytree(source, temp / "out" / name)
                    dirs.append(name)
                elif source.is_file():
                    shutil.copyfile(source, temp / "out" / name)
            status_bytes = json.dumps(status, sort_keys=True).encode("utf-8")
            manifest = {"format": FORMAT, "case": case_id, "key": entry.name, "environment": self.env_key,
                        "status": hashlib.sha256(status_bytes).hexdigest(), "dirs": dirs,
                        "files": {n: [(temp / "out" / n).stat().st_size, models.sha256_file(temp / "out" / n)] for n in files}}
            manifest_bytes = json.dumps(manifest, sort_keys=True, indent=1).encode("utf-8")
            (temp / "status.json").write_bytes(status_bytes)
            (temp / "manifest.json").write_bytes(manifest_bytes)
            (temp / "manifest.hmac").write_text(_mac(self.key, manifest_bytes) + "\n", encoding="ascii")
            if os.path.islink(entry) or (os.path.lexists(entry) and not is_dir(entry)):
                os.unlink(entry)  # not trusted: replaced
            elif os.path.lexists(entry):
                shutil.rmtree(entry, ignore_errors=True)
            try:
                os.rename(temp, entry)
            except OSError:
                if not is_dir(entry):  # not another run's entry arriving first
                    raise
                return False
            return True
        finally:
            if os.path.lexists(temp):
                shutil.rmtree(temp, ignore_errors=True)

    def _reap_temp(self):
        now = time.time()
        for child in self.base.glob(".tmp-*"):
            try:
                if is_dir(child) and now - child.lstat().st_mtime > STALE_TEMP:
                    shutil.rmtree(child, ignore_errors=True)
            except OSError:
                pass


# --- `verify cache` ---------------------------------------------------------------------------
