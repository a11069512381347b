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
sources), and not at all with --fresh or VERIFY_FRESH=1 (the project's CI and its tests set it).
The report names it: "reference: N of M cases from cache, key K" in the terminal, and
`reference_cache` in the JSON report.

Layout, under cache_dir() ($VERIFY_REFERENCE_CACHE, else ~/.cache/attention-parity/reference):

    <environment key>/environment.json     what the key was made from (verify cache shows it)
    <environment key>/<case key>/status.json, manifest.json, out/<id>.json, <id>.full.json, <id>.states/

The environment key is the SHA-256 of the reference's sources (every file under reference/, by
path and content), the Python and NumPy versions, the platform, NumPy's CPU features and this
module's FORMAT. A case key adds the case's specification (canonical JSON) and, for a pretrained
case, the model's pinned SHA-256s. An entry is written whole (a temporary directory, then a
rename) and read only if every file's size and SHA-256 match its manifest; a damaged entry is run
afresh and reported as such. Storing never fails a run: a cache that cannot be written is a note.
"""

import hashlib
import json
import os
import platform
import shutil
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from . import decoded, models
from .engines import PROTOCOL

FORMAT = 1  # the layout and key recipe; raise it when either changes
FRESH_ENV = "VERIFY_FRESH"  # set to anything but "" or "0": the cache is not used
DIR_ENV = "VERIFY_REFERENCE_CACHE"  # another directory for it
SOURCES = "reference"  # the directory, under the project root, whose every file is a source
MEMO = "documents"  # the memo of decoded documents kept beside the environments (verify/decoded.py)
STALE_TEMP = 3600.0  # seconds after which a temporary entry left by a dead run is removed


def cache_dir(environ=None):
    """Where the reference's results are kept: $VERIFY_REFERENCE_CACHE, else
    <models.cache_root()>/reference (~/.cache/attention-parity/reference by default)."""
    environ = os.environ if environ is None else environ
    if environ.get(DIR_ENV):
        return Path(environ[DIR_ENV]).expanduser()
    return models.cache_root(environ) / "reference"


def fresh_requested(environ=None):
    environ = os.environ if environ is None else environ
    return environ.get(FRESH_ENV, "") not in ("", "0")


def _canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def sources_digest(root):
    """SHA-256 over every file under root/reference (path, size and content; caches of the
    interpreter excluded), and how many files it covered."""
    base = Path(root) / SOURCES
    h, count = hashlib.sha256(), 0
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = Path(dirpath) / name
            rel = path.relative_to(base).as_posix()
            data = path.read_bytes()
            h.update(f"{rel}\0{len(data)}\0".encode("utf-8"))
            h.update(data)
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
    digest, count = sources_digest(root)
    return {
        "format": FORMAT,
        "protocol": PROTOCOL,
        "reference_sources": digest,
        "reference_files": count,
        "python": sys.version,
        "implementation": sys.implementation.cache_tag,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "byteorder": sys.byteorder,
        "cpu_features": _cpu_features(),
    }


def _key(value):
    return hashlib.sha256(_canonical(value).encode("utf-8")).hexdigest()


def case_key(env_key, spec, assets):
    """The key of one case: the environment's, the case as written, and the pinned files of the
    model it reads (a pretrained case)."""
    model = (spec.get("config") or {}).get("model") if isinstance(spec.get("config"), dict) else None
    pinned = None
    if model is not None and model in (assets or {}):
        source = models.SOURCES.get(model)
        pinned = sorted((name, size, sha) for name, (size, sha) in source.files.items()) if source else None
    return _key({"environment": env_key, "case": spec, "model": model, "model_files": pinned})


def case_files(case_id):
    """The names a case's reference output may have in its engine directory (docs/protocol.md)."""
    return (f"{case_id}.json", f"{case_id}.full.json", f"{case_id}.states")


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
    seconds: float = 0.0  # the runner's time spent on the cache (keys, checks, copies, storing)

    def to_dict(self):
        return {
            "directory": self.directory, "key": self.key,
            "from_cache": list(self.hits), "stored": list(self.stored), "damaged": list(self.damaged),
            "notes": list(self.notes), "seconds": round(self.seconds, 4),
        }


def _same_file(a, b):
    """The same file, not written since: device, inode, size and modification time (a link changes
    the change time, so that one is not compared)."""
    return (a.st_dev, a.st_ino, a.st_size, a.st_mtime_ns) == (b.st_dev, b.st_ino, b.st_size, b.st_mtime_ns)


def _place(source, seen, data, target):
    """Put the checked bytes `data` of the cache's file `source` (its stat `seen` as it was read) at
    target in the run's reference directory: a hard link to that very file when the link is the
    file that was read and checked (_same_file), else a copy of the bytes. A link costs no writing
    (a copy of a full run's 21 MB took 0.06-0.15 s of the runner's CPU, a link of it 3 ms); entries
    are never written in place (written whole, then renamed) and nothing writes into a run's
    reference directory, so the link is as good as the copy. Across file systems, or where links
    are refused, the copy it is."""
    try:
        os.link(source, target)
    except OSError:
        target.write_bytes(data)
        return
    if not _same_file(os.stat(target), seen):  # written or replaced since it was read: the checked bytes
        os.unlink(target)
        target.write_bytes(data)


class ReferenceCache:
    def __init__(self, root, directory=None):
        self.root = Path(root)
        self.directory = Path(directory) if directory is not None else cache_dir()
        self.env = environment(self.root)
        self.env_key = _key(self.env)
        self.base = self.directory / self.env_key
        self.outcome = Outcome(directory=str(self.directory), key=self.env_key)
        self._keys = {}

    def _entry(self, spec, assets):
        key = case_key(self.env_key, spec, assets)
        self._keys[spec["id"]] = key
        return self.base / key

    def fetch(self, specs, assets, out_dir):
        """Place the output of every case found in the cache into out_dir (_place); returns {case
        id: status line} for them (each status marked "from_cache")."""
        t0 = time.monotonic()
        answered = {}
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        for spec in specs:
            entry = self._entry(spec, assets)
            if not entry.is_dir():
                continue
            found = self._read(entry, spec["id"])
            if found is None:
                self.outcome.damaged.append(spec["id"])
                continue
            status, contents = found
            for name in case_files(spec["id"]):
                if (entry / "out" / name).is_dir():  # a directory (the states), even an empty one
                    (out_dir / name).mkdir(exist_ok=True)
            for name, (source, seen, data) in contents.items():  # the very bytes checked against the manifest
                target = out_dir / name
                target.parent.mkdir(parents=True, exist_ok=True)
                _place(source, seen, data, target)
            answered[spec["id"]] = dict(status, from_cache=self._keys[spec["id"]])
            self.outcome.hits.append(spec["id"])
        self.outcome.seconds += time.monotonic() - t0
        return answered

    def _read(self, entry, case_id):
        """(status line, {relative name: (path, its stat as read, bytes)}) when the status and every
        file match the manifest, else None. Each file is read once: what is checked is what is
        placed in the run (_place)."""
        try:
            manifest = json.loads((entry / "manifest.json").read_text(encoding="utf-8"))
            status_bytes = (entry / "status.json").read_bytes()
            status = json.loads(status_bytes)
            if (manifest.get("format") != FORMAT or manifest.get("case") != case_id or status.get("id") != case_id
                    or manifest.get("status") != hashlib.sha256(status_bytes).hexdigest()):
                return None
            found = {}
            for name in case_files(case_id):
                tree = _tree(entry / "out" / name) if os.path.lexists(entry / "out" / name) else {}
                if tree is None:
                    return None
                found.update(tree)
            files = manifest.get("files")
            if not isinstance(files, dict) or set(files) != set(found):
                return None
            contents = {}
            for name, path in found.items():
                size, sha = files[name]
                seen = path.stat()
                if seen.st_size != size:
                    return None
                data = path.read_bytes()
                if len(data) != size or hashlib.sha256(data).hexdigest() != sha:
                    return None
                contents[name] = (path, seen, data)
        except (OSError, ValueError, TypeError, AttributeError):
            return None
        return (status, contents) if status.get("ok") is True else None

    def store(self, run, specs, assets):
        """Keep the output of every case the reference ran afresh in this run and passed (status
        ok). Never raises for the cache's own trouble: it becomes a note."""
        t0 = time.monotonic()
        try:
            self.base.mkdir(parents=True, exist_ok=True)
            env_file = self.base / "environment.json"
            if not env_file.exists():
                self._write_whole(env_file, json.dumps(self.env, indent=2, sort_keys=True) + "\n")
            self._reap_temp()
            for spec in specs:
                case_id = spec["id"]
                status = run.statuses.get(case_id)
                if not status or status.get("ok") is not True or "from_cache" in status:  # from_cache: a hit
                    continue
                entry = self._entry(spec, assets)
                if entry.exists() and case_id not in self.outcome.damaged:
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
            for name in case_files(case_id):
                source = out_dir / name
                if source.is_dir():
                    shutil.copytree(source, temp / "out" / name)
                elif source.is_file():
                    shutil.copyfile(source, temp / "out" / name)
            status_bytes = json.dumps(status, sort_keys=True).encode("utf-8")
            manifest = {"format": FORMAT, "case": case_id, "key": entry.name,
                        "status": hashlib.sha256(status_bytes).hexdigest(),
                        "files": {n: [(temp / "out" / n).stat().st_size, models.sha256_file(temp / "out" / n)] for n in files}}
            (temp / "status.json").write_bytes(status_bytes)
            (temp / "manifest.json").write_text(json.dumps(manifest, sort_keys=True, indent=1), encoding="utf-8")
            if entry.exists():  # damaged: replaced
                shutil.rmtree(entry, ignore_errors=True)
            try:
                os.rename(temp, entry)
            except OSError:
                if not entry.is_dir():  # not another run's entry arriving first
                    raise
                return False
            return True
        finally:
            if temp.exists():
                shutil.rmtree(temp, ignore_errors=True)

    def _write_whole(self, path, text):
        temp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex}")
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)

    def _reap_temp(self):
        now = time.time()
        for child in self.base.glob(".tmp-*"):
            try:
                if now - child.stat().st_mtime > STALE_TEMP:
                    shutil.rmtree(child, ignore_errors=True)
            except OSError:
                pass


# --- `verify cache` ---------------------------------------------------------------------------

def _size(path):
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            try:
                total += (Path(dirpath) / name).lstat().st_size
            except OSError:
                pass
    return total


def describe(root, directory=None):
    """Lines about the cache: where it is, each environment's entries and size, which one the
    reference as it is now would use."""
    directory = Path(directory) if directory is not None else cache_dir()
    current = _key(environment(root))
    lines = [f"reference cache: {directory}"]
    envs = sorted(p for p in directory.iterdir() if p.is_dir() and p.name != MEMO) if directory.is_dir() else []
    if not envs:
        lines.append("  empty (`verify attention` fills it; `verify attention --fresh` neither reads nor fills it)")
    for env in envs:
        entries = [p for p in env.iterdir() if p.is_dir() and not p.name.startswith(".")]
        try:
            made = json.loads((env / "environment.json").read_text(encoding="utf-8"))
            what = f"numpy {made.get('numpy')}, python {str(made.get('python', '')).split()[0]}, " \
                   f"reference sources {str(made.get('reference_sources'))[:12]}"
        except (OSError, ValueError, AttributeError):
            what = "no readable environment.json"
        mark = "  (the reference as it is now)" if env.name == current else ""
        lines.append(f"  {env.name[:16]}  {len(entries)} case(s), {_size(env) / 1e6:.1f} MB; {what}{mark}")
    memo = directory / MEMO
    if memo.is_dir():
        kept = sum(1 for _ in memo.glob("*/*/*.bin"))
        lines.append(f"document memo: {memo}, {kept} decoded document(s), {_size(memo) / 1e6:.1f} MB "
                     "(verify/decoded.py; filled and read with the cache, never with --fresh)")
    return lines


def remove(root, directory=None, stale_only=False):
    """Remove every environment (or, stale_only, every one but the current); returns how many."""
    directory = Path(directory) if directory is not None else cache_dir()
    if not directory.is_dir():
        return 0
    current = _key(environment(root)) if stale_only else None
    removed = 0
    for env in directory.iterdir():
        if env.is_dir() and not env.is_symlink() and env.name not in (current, MEMO):
            shutil.rmtree(env, ignore_errors=True)
            removed += 1
    memo = directory / MEMO
    if memo.is_dir() and not memo.is_symlink():
        if stale_only:  # the decoded documents of other versions of the decoder or its schema
            keep = decoded.namespace(Path(root) / "golden" / "schemas")
            for space in memo.iterdir():
                if space.is_dir() and not space.is_symlink() and space.name != keep:
                    shutil.rmtree(space, ignore_errors=True)
        else:
            shutil.rmtree(memo, ignore_errors=True)
    return removed
