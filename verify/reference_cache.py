"""The reference's results kept by content (docs/runner.md, "The reference cache").

`verify attention` keys each case's reference output on the reference's sources, the case, the
pretrained model's pinned files, the interpreter, NumPy and the machine; on a hit the case's files
are written from the cache into the run and the reference does not run that case (the port always
runs). An entry counts only when its manifest carries an HMAC-SHA256 under the user's own key,
kept outside the cache directory; the cache is not used at all (one note) when it, its key or
reference/ could be changed by someone else or behind the key's back.

Layout, under cache_dir():

    <environment key>/environment.json     what the key was made from (shown by `verify cache`)
    <environment key>/<case key>/status.json, manifest.json, manifest.hmac, out/<case's files>
"""

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
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import layout, models
from .engines import PROTOCOL
from .documents import DocumentError, read_bytes
from .files import write_atomically

FORMAT = 3  # the layout and key recipe; raise it when either changes (2: entries authenticated; 3: <id>.handed.json)
FRESH_ENV = "VERIFY_FRESH"  # set to anything but "" or "0": the cache is not used
DIR_ENV = "VERIFY_REFERENCE_CACHE"  # another directory for it
SOURCES = "reference"  # the directory, under the project root, whose every file is a source
STALE_TEMP = 3600.0  # seconds after which a temporary entry left by a dead run is removed
KEY_BYTES = 32
KEY_DIR = "attention-parity"  # under $XDG_CONFIG_HOME or ~/.config
KEY_FILE = "cache-key"
MAC_CONTEXT = b"attention-parity reference cache entry\0"  # the HMAC is over this, then manifest.json's bytes
OLD_MEMO = "documents"  # an earlier version's decoded-document memo: --prune and --clear remove it
MAX_MANIFEST = 16 << 20  # bytes: a manifest or status line larger than this is not an entry of ours
HEX64 = re.compile(r"[0-9a-f]{64}")
case_files = layout.case_files  # the names a case's reference output may have in its engine directory


class NotUsed(Exception):
    """Why the cache is not used in this run (one line, the run's one note)."""


class Untrusted(Exception):
    """Why one entry is not used, in a few words."""


def cache_dir(environ=None):
    """$VERIFY_REFERENCE_CACHE, else <models.cache_root()>/reference."""
    environ = os.environ if environ is None else environ
    if environ.get(DIR_ENV):
        return models.expand(environ[DIR_ENV], f"${DIR_ENV}")
    return models.cache_root(environ) / "reference"


def key_path(environ=None):
    """$XDG_CONFIG_HOME (an absolute one), else ~/.config, then attention-parity/cache-key.
    models.NoCacheDir when there is no home to put it in."""
    environ = os.environ if environ is None else environ
    config = environ.get("XDG_CONFIG_HOME", "")
    if config and os.path.isabs(config):
        return Path(config) / KEY_DIR / KEY_FILE
    return models.expand("~", "the home directory") / ".config" / KEY_DIR / KEY_FILE


def fresh_requested(environ=None):
    environ = os.environ if environ is None else environ
    return environ.get(FRESH_ENV, "") not in ("", "0")


def is_dir(path):
    """A directory itself, not a symbolic link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _odd(path):
    """What path is when it is neither a directory nor a regular file (no link followed), else None."""
    mode = os.lstat(path).st_mode
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
        return None
    return "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"


def sources_digest(root):
    """(SHA-256 over every file under root/reference by path, size and content, how many files).
    NotUsed when anything there is a symbolic link or not a regular file: the digest would not
    cover what it points to."""
    base = Path(root) / SOURCES
    if base.is_symlink():
        raise NotUsed(f"{SOURCES}/ is a symbolic link")
    h, count = hashlib.sha256(), 0
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in dirnames + sorted(filenames):
            path = Path(dirpath) / name
            if what := _odd(path):
                raise NotUsed(f"{path.relative_to(base.parent).as_posix()} is {what}; the cache key covers "
                              "only the files under reference/ themselves")
            if name in filenames and not name.endswith((".pyc", ".pyo")):
                data = path.read_bytes()
                h.update(f"{path.relative_to(base).as_posix()}\0{len(data)}\0".encode("utf-8") + data)
                count += 1
    return h.hexdigest(), count


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
    return {"format": FORMAT, "protocol": PROTOCOL, "reference_sources": sources, "reference_files": count,
            "python": sys.version, "implementation": sys.implementation.cache_tag, "numpy": numpy.__version__,
            "platform": platform.platform(), "machine": platform.machine(), "byteorder": sys.byteorder,
            "cpu_features": _cpu_features()}


def digest(value):
    """The SHA-256 of a value's canonical JSON (an environment's key, a part of a case's)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def case_key(env_key, spec, assets):
    """The key of one case: the environment's, the case as written, and the pinned files of the
    model it reads (a pretrained case)."""
    model = spec["config"].get("model") if isinstance(spec.get("config"), dict) else None
    pinned = None
    if model is not None and model in (assets or {}):
        source = models.SOURCES.get(model)
        pinned = sorted((name, size, sha) for name, (size, sha) in source.files.items()) if source else None
    return digest({"environment": env_key, "case": spec, "model": model, "model_files": pinned})


# --- what the cache trusts ------------------------------------------------------------------------

def private_problem(path):
    """None when `path` (a directory, or one to be made) and each of its parents are owned by this
    user or root and not writable by group or others (a root-owned sticky parent such as /tmp
    excepted), and every symbolic link on the way is owned by this user or root. Else what is wrong."""
    owners = (os.geteuid(), 0)
    path = Path(os.path.abspath(path))
    real = Path(os.path.realpath(path))
    # the links on the way as written (lstat), then the directories they lead to (stat)
    steps = [(p, os.lstat) for p in (path, *path.parents)] + [(p, os.stat) for p in (real, *real.parents)]
    for p, look in steps:
        try:
            info = look(p)
        except FileNotFoundError:
            continue  # made by the run, 0700
        except OSError as exc:
            return f"{p} cannot be examined ({exc.strerror or exc})"
        mode = info.st_mode
        if look is os.lstat:
            if stat.S_ISLNK(mode) and info.st_uid not in owners:
                return f"{p} is a symbolic link owned by another user (uid {info.st_uid})"
        elif not stat.S_ISDIR(mode):
            return f"{p} is a file, not a directory" if stat.S_ISREG(mode) else f"{p} is not a directory"
        elif info.st_uid not in owners:
            return f"{p} is owned by another user (uid {info.st_uid}), not by you (uid {os.geteuid()}) or root"
        elif mode & 0o022 and not (p != real and info.st_uid == 0 and mode & stat.S_ISVTX):
            who = "others" if mode & 0o002 else "its group"
            return f"{p} is writable by {who} (mode {stat.S_IMODE(mode):04o})"
    return None


def place_problem(directory, root, environ=None):
    """What makes `directory` no place for the cache (nor for --prune and --clear to delete in), or
    None: /, the home directory, the checkout, a parent of it, or a directory inside it."""
    environ = os.environ if environ is None else environ
    real, checkout = Path(os.path.realpath(directory)), Path(os.path.realpath(root))
    home = environ.get("HOME")
    home = Path(os.path.realpath(home)) if home and os.path.isabs(home) else None
    for wrong, why in ((real == Path(real.anchor), "is the root directory"),
                       (real == home, "is the home directory"),
                       (real == checkout, "is the checkout"),
                       (real in checkout.parents, f"is a parent of the checkout {checkout}"),
                       (checkout in real.parents, f"is inside the checkout {checkout}")):
        if wrong:
            return f"{directory} {why}"
    return None


def _make_private(path):
    """Make the missing directories of path, each 0700 whatever the umask."""
    path = Path(path)
    if not os.path.lexists(path):
        _make_private(path.parent)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            return
        os.chmod(path, 0o700)


def _read_key(path):
    """The key's bytes; FileNotFoundError when there is none; NotUsed when the file is unfit. Its
    directory is private (load_key): no one else can swap it between the look and the read."""
    def unfit(problem):
        return NotUsed(f"the cache key {path} {problem}")

    try:
        info = os.lstat(path)
        mode, size = info.st_mode, info.st_size
        if stat.S_ISLNK(mode):
            raise unfit("is a symbolic link")
        if not stat.S_ISREG(mode):
            raise unfit("is not a regular file")
        if info.st_uid != os.geteuid():
            raise unfit(f"is owned by uid {info.st_uid}, not by you (uid {os.geteuid()})")
        if stat.S_IMODE(mode) != 0o600:
            raise unfit(f"has mode {stat.S_IMODE(mode):04o}, not 0600")
        if size == KEY_BYTES:
            with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NOFOLLOW)) as fh:
                data = fh.read(KEY_BYTES + 1)
                size = len(data)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise unfit(f"cannot be read ({exc.strerror or exc})") from None
    if size != KEY_BYTES:
        raise unfit(f"holds {size} bytes, not {KEY_BYTES}")
    return data


def load_key(directory, environ=None):
    """The user's 32-byte cache key, made (0600, in a 0700 directory) when there is none yet.
    NotUsed when it cannot be trusted (no home, a key file that is not this user's 0600 regular
    file of 32 bytes, a key directory others could write) or shares a directory with the cache."""
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
    temp = keydir / f".{KEY_FILE}.{os.getpid()}-{uuid.uuid4().hex}"
    try:
        _make_private(keydir)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, os.urandom(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(temp, path)  # whole or not at all; another run's key arriving first is kept
    except FileExistsError:
        pass
    except OSError as exc:
        raise NotUsed(f"the cache key {path} cannot be made ({exc.strerror or exc})") from None
    finally:
        if os.path.lexists(temp):
            os.unlink(temp)
    try:
        return _read_key(path)
    except FileNotFoundError:
        raise NotUsed(f"the cache key {path} vanished as it was made") from None


def _mac(key, manifest_bytes):
    return hmac.new(key, MAC_CONTEXT + manifest_bytes, hashlib.sha256).hexdigest()


def _read(path, limit):
    """The bytes of a regular file of at most `limit` bytes, never through a symbolic link."""
    try:
        return read_bytes(path, limit, follow_links=False)
    except DocumentError as exc:
        raise Untrusted(f"{path.name}: {exc}") from None


@dataclass
class Outcome:
    """What the cache did in one run (the report's `reference_cache`)."""

    directory: str
    key: str = None  # the environment key
    from_cache: list = field(default_factory=list)  # case ids answered from the cache
    stored: list = field(default_factory=list)
    damaged: list = field(default_factory=list)  # entries found but not trusted
    notes: list = field(default_factory=list)
    not_used: str = None  # why the cache was not used at all in this run
    seconds: float = 0.0  # the runner's time spent on the cache (keys, checks, copies, storing)

    def to_dict(self):
        return dict(asdict(self), seconds=round(self.seconds, 4))


class ReferenceCache:
    """The cache as one `verify attention` run uses it. When it cannot be trusted (NotUsed),
    `refused` says why, the outcome holds that one note, and fetch and store do nothing."""

    def __init__(self, root, directory=None, environ=None):
        self.root, self.refused, self.key = Path(root), None, None
        self.outcome = Outcome(directory=None)
        try:
            try:
                given = Path(directory) if directory is not None else cache_dir(environ)
            except models.NoCacheDir as exc:
                raise NotUsed(f"no place for it: {exc}") from None
            self.outcome.directory = str(given)
            self.directory = Path(os.path.realpath(given))  # every use goes by the path as checked
            self.env = environment(self.root)
            self.env_key = self.outcome.key = digest(self.env)
            self.base = self.directory / self.env_key
            problem = place_problem(given, self.root, environ) or private_problem(given)
            if not problem and os.path.lexists(self.base):
                problem = f"{self.base} is not a directory" if not is_dir(self.base) else private_problem(self.base)
            if problem:
                raise NotUsed(problem)
            self.key = load_key(self.directory, environ)
        except NotUsed as exc:
            self.refused = self.outcome.not_used = str(exc)
            self.outcome.notes.append(f"the reference cache is not used in this run: {exc}; the reference ran "
                                      "afresh (docs/runner.md, \"The reference cache\")")

    def _entry(self, spec, assets):
        return self.base / case_key(self.env_key, spec, assets)

    def fetch(self, specs, assets, out_dir):
        """Write the output of every case found in the cache into out_dir (the very bytes checked
        against its manifest); returns {case id: status line} for them (each marked "from_cache")."""
        t0 = time.monotonic()
        answered, untrusted = {}, {}  # why -> [case ids]
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        if self.refused:
            return answered
        for spec in specs:
            entry = self._entry(spec, assets)
            if not os.path.lexists(entry):
                continue
            try:
                status, contents, dirs = self._check(entry, spec["id"])
            except Untrusted as exc:
                self.outcome.damaged.append(spec["id"])
                untrusted.setdefault(str(exc), []).append(spec["id"])
                continue
            for name in dirs:  # a directory (the states), even an empty one
                (out_dir / name).mkdir(exist_ok=True)
            for name, data in contents.items():
                (out_dir / name).parent.mkdir(parents=True, exist_ok=True)
                (out_dir / name).write_bytes(data)
            answered[spec["id"]] = dict(status, from_cache=entry.name)
            self.outcome.from_cache.append(spec["id"])
        for why, ids in list(untrusted.items())[:3]:
            self.outcome.notes.append(f"reference cache: {len(ids)} entry(ies) not trusted, run afresh and replaced "
                                      f"({why}): {', '.join(ids[:5])}{' ...' if len(ids) > 5 else ''}")
        self.outcome.seconds += time.monotonic() - t0
        return answered

    def _check(self, entry, case_id):
        """(status line, {relative name: bytes}, [directories]) when the manifest's HMAC verifies
        with the user's key, it names this very entry, and the status and every file match it;
        Untrusted else. Each file is read once: what is checked is what fetch writes."""
        if not is_dir(entry):
            raise Untrusted(f"the entry is {'a symbolic link' if os.path.islink(entry) else 'not a directory'}")
        manifest_bytes = _read(entry / "manifest.json", MAX_MANIFEST)
        if not hmac.compare_digest(_read(entry / "manifest.hmac", 1024).strip(),
                                   _mac(self.key, manifest_bytes).encode("ascii")):
            raise Untrusted("its manifest is not authenticated by your cache key: restored, planted or rewritten")
        try:
            manifest = json.loads(manifest_bytes)
            status_bytes = _read(entry / "status.json", MAX_MANIFEST)
            status = json.loads(status_bytes)
            if (manifest.get("format") != FORMAT or manifest.get("case") != case_id or manifest.get("key") != entry.name
                    or manifest.get("environment") != self.env_key or status.get("id") != case_id
                    or manifest.get("status") != hashlib.sha256(status_bytes).hexdigest() or status.get("ok") is not True):
                raise Untrusted("it is not the entry its manifest describes")
            if not is_dir(entry / "out"):
                raise Untrusted("out/ is not a directory")
            found, dirs = _case_tree(entry / "out", case_id)  # Untrusted: a link or a special file
            files = manifest.get("files")
            if not isinstance(files, dict) or set(files) != set(found) or manifest.get("dirs") != dirs:
                raise Untrusted("its files are not the ones its manifest names")
            contents = {}
            for name, path in found.items():
                size, sha = files[name]
                try:
                    contents[name] = _read(path, size)
                except Untrusted:
                    contents[name] = None
                if contents[name] is None or hashlib.sha256(contents[name]).hexdigest() != sha:
                    raise Untrusted(f"{name} does not match its manifest")
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
        """Write one entry whole: a temporary directory, then a rename. False when not kept."""
        try:
            files, dirs = _case_tree(out_dir, case_id)
        except Untrusted:
            return False  # not plain files: not kept
        if f"{case_id}.json" not in files:
            return False
        temp = self.base / f".tmp-{os.getpid()}-{uuid.uuid4().hex}"
        try:
            (temp / "out").mkdir(parents=True)
            for name in dirs:
                (temp / "out" / name).mkdir()
            sums = {}
            for name, path in files.items():
                data = path.read_bytes()
                (temp / "out" / name).parent.mkdir(parents=True, exist_ok=True)
                (temp / "out" / name).write_bytes(data)
                sums[name] = [len(data), hashlib.sha256(data).hexdigest()]
            status_bytes = json.dumps(status, sort_keys=True).encode("utf-8")
            manifest = {"format": FORMAT, "case": case_id, "key": entry.name, "environment": self.env_key,
                        "status": hashlib.sha256(status_bytes).hexdigest(), "dirs": dirs, "files": sums}
            manifest_bytes = json.dumps(manifest, sort_keys=True, indent=1).encode("utf-8")
            (temp / "status.json").write_bytes(status_bytes)
            (temp / "manifest.json").write_bytes(manifest_bytes)
            (temp / "manifest.hmac").write_text(_mac(self.key, manifest_bytes) + "\n", encoding="ascii")
            if is_dir(entry):  # not trusted: replaced
                shutil.rmtree(entry, ignore_errors=True)
            elif os.path.lexists(entry):
                os.unlink(entry)
            try:
                os.rename(temp, entry)
            except OSError:
                if not is_dir(entry):  # not another run's entry arriving first
                    raise
                return False
            return True
        finally:
            shutil.rmtree(temp, ignore_errors=True)

    def _reap_temp(self):
        for child in self.base.glob(".tmp-*"):
            try:
                if is_dir(child) and time.time() - child.lstat().st_mtime > STALE_TEMP:
                    shutil.rmtree(child, ignore_errors=True)
            except OSError:
                pass


def _case_tree(out_dir, case_id):
    """({relative name: path} of the files of a case's output in out_dir, [its directories]);
    Untrusted when any of it is a symbolic link or a special file."""
    found, dirs = {}, []
    for top in case_files(case_id):
        if is_dir(out_dir / top):
            dirs.append(top)
            walk = os.walk(out_dir / top)
        else:
            walk = [(out_dir, [], [top])] if os.path.lexists(out_dir / top) else []
        for dirpath, dirnames, filenames in walk:
            for name in dirnames + filenames:
                path = Path(dirpath) / name
                if _odd(path):
                    raise Untrusted(f"{top} is or holds a symbolic link or a special file")
                if name in filenames:
                    found[path.relative_to(out_dir).as_posix()] = path
    return found, dirs
