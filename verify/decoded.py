"""Golden-layout documents as the runner uses them, from their bytes, with a memo of the decoded
ones (docs/runner.md, "The document memo").

Reading a document is a pure function of its bytes: parse them (verify/documents.py, parse_bytes),
check the result against golden.schema.json, decode every tensor into float64 values. The same
bytes always give the same document, so `verify attention` (with the reference cache, never with
--fresh) keeps what that function gave, keyed on the SHA-256 of the bytes, and gives it back when
a file with the same SHA-256 is read again: the reference's documents from its cache and the
port's unchanged outputs decode in one read of a binary entry instead of a parse, a schema check
and a decode of decimal text. Every file is still read and hashed in every run, so a port whose
output changed by one byte is decoded afresh; the memo never says anything about a document it
has not seen byte for byte.

An entry is under <reference cache>/documents/<namespace>/<sha[:2]>/<sha>.bin, the namespace
being the SHA-256 of what the function depends on besides the bytes: this module's FORMAT, the
sources of the parser and decoder (documents.py, compare.py, decoded.py), golden.schema.json as
the run loads it, the Python and NumPy versions. An entry holds the document without its tensors'
data (JSON), the tensors' names, dtypes and shapes, their values as little-endian float64, and a
SHA-256 of all that: it is written whole (a temporary file, then a rename) and used only if its
SHA-256 holds; anything else about it makes it a miss, decoded afresh and written again. Only a
document that was read without error is kept, so every error is found, and worded, by the full
path. The memo is kept under MAX_BYTES by removing the entries used least recently (after a run that
kept new ones).
"""

import contextlib
import hashlib
import os
import struct
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import orjson

from .compare import Tensor
from .documents import decode_tensors, parse_bytes

FORMAT = 1
MAGIC = b"APDOCS01"
MAX_BYTES = 512 << 20  # the memo's size bound (a run of the whole catalogue keeps about 45 MB)
PARTS = ("inputs", "outputs")
_SOURCES = ("documents.py", "compare.py", "decoded.py")  # this package's files the decoded result depends on

_active = None  # the run's Memo, while `active()` holds; None: every document is decoded from its text
_lock = threading.Lock()


def golden(data, schemas=None):
    """(doc, tensors) of a golden-layout document's bytes: parsed strictly, checked against
    golden.schema.json when `schemas` is given, every tensor decoded (documents.decode_tensors:
    {"inputs": {name: Tensor}, "outputs": {...}}). DocumentError when it cannot be read.

    With a memo active, a document already decoded (by the SHA-256 of its bytes, and checked if
    this call checks) is taken from it; doc then holds each tensor's dtype and shape but not its
    data (the runner reads values from the tensors alone)."""
    memo = _active
    digest = hashlib.sha256(data).hexdigest() if memo is not None else None
    if memo is not None:
        found = memo.get(digest, checked=schemas is not None)
        if found is not None:
            return found
    doc = parse_bytes(data)
    if schemas is not None:
        schemas.check("golden", doc)
    tensors = decode_tensors(doc)
    if memo is not None:
        memo.put(digest, schemas is not None, doc, tensors)
    return doc, tensors


def check(schemas, name, data, document):
    """schemas.check(name, document) of a document parsed from `data`, unless the active memo has
    seen these very bytes pass that schema (the catalogue's files, read by every run)."""
    memo = _active
    digest = hashlib.sha256(data).hexdigest() if memo is not None else None
    if memo is not None and memo.known_valid(name, digest):
        return
    schemas.check(name, document)
    if memo is not None:
        memo.mark_valid(name, digest)


def _file_key(path, info, digest):
    """What identifies a file's content on disk without reading it: its path, device and inode,
    size, and modification and change times (the change time moves with any write and cannot be
    set back), with the SHA-256 it was pinned to."""
    return hashlib.sha256(f"{path}\0{info.st_dev}\0{info.st_ino}\0{info.st_size}\0{info.st_mtime_ns}\0"
                          f"{info.st_ctime_ns}\0{digest}".encode()).hexdigest()


def file_seen_intact(path, info, digest):
    """Whether the active memo saw the file at path, as it is on disk now (os.stat's `info`), hash
    to its pinned `digest` in an earlier run (a pretrained model's files, 90 MB hashed otherwise)."""
    memo = _active
    return memo is not None and memo._valid_path("file", _file_key(path, info, digest)).is_file()


def mark_file_intact(path, info, digest):
    """Remember, in the active memo, that the file hashed to its pinned digest as it is on disk now."""
    if _active is not None:
        _active.mark_valid("file", _file_key(path, info, digest))


@contextlib.contextmanager
def active(memo):
    """Use `memo` for every golden() call while the block runs (one run at a time: the runner's)."""
    global _active
    with _lock:
        previous, _active = _active, memo
    try:
        yield memo
    finally:
        with _lock:
            _active = previous


def namespace(schema_dir):
    """The SHA-256 of everything besides the bytes that a decoded document depends on."""
    h = hashlib.sha256(f"format {FORMAT}; python {sys.version}; numpy {np.__version__}\n".encode())
    here = Path(__file__).resolve().parent
    for name in _SOURCES:
        h.update(name.encode() + b"\0" + (here / name).read_bytes() + b"\0")
    for path in sorted(Path(schema_dir).glob("*.schema.json")):  # each may refer to another
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


class Memo:
    """The decoded documents kept under directory/<namespace>; counts what it did in this run."""

    def __init__(self, directory, schema_dir):
        self.root = Path(directory)
        self.dir = self.root / namespace(schema_dir)
        self.hits = self.decoded = self.stored = self.damaged = 0
        self.notes = []
        self._count = threading.Lock()

    def _path(self, digest):
        return self.dir / digest[:2] / f"{digest}.bin"

    def get(self, digest, checked):
        path = self._path(digest)
        try:
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                buf = bytearray(size)  # writable: the values are ordinary arrays, as decoded ones are
                if fh.readinto(buf) != size:
                    raise ValueError("short read")
            found = _unpack(buf, checked)
        except FileNotFoundError:
            found = None
        except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
            with self._count:
                self.damaged += 1
                if len(self.notes) < 3:
                    self.notes.append(f"document memo: {path.name} unreadable ({exc}); decoded afresh")
            found = None
        with self._count:
            if found is None:
                self.decoded += 1
            else:
                self.hits += 1
        if found is not None:
            with contextlib.suppress(OSError):
                os.utime(path)  # most recently used: the last to go when the memo is trimmed
        return found

    def _valid_path(self, name, digest):
        return self.dir / "valid" / f"{name}-{digest}"

    def known_valid(self, name, digest):
        """Whether bytes of this SHA-256 passed schema `name` in an earlier run (an empty marker file)."""
        found = self._valid_path(name, digest).is_file()
        with self._count:
            if found:
                self.hits += 1
            else:
                self.decoded += 1
        return found

    def mark_valid(self, name, digest):
        path = self._valid_path(name, digest)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        except OSError:
            pass  # not kept: the next run checks these bytes again

    def put(self, digest, checked, doc, tensors):
        path = self._path(digest)
        try:
            entry = _pack(checked, doc, tensors)
        except (TypeError, ValueError):  # a document whose skeleton JSON cannot carry exactly: not kept
            return
        tmp = path.parent / f".{digest}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as fh:
                fh.write(entry)
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            with self._count:
                if len(self.notes) < 3:
                    self.notes.append(f"document memo: cannot keep a document under {self.dir} ({exc.strerror or exc})")
            return
        with self._count:
            self.stored += 1

    def trim(self, limit=MAX_BYTES):
        """Remove the least recently used entries (of any namespace) until the memo holds at most
        three quarters of `limit`, when it holds more than `limit`; and temporary files over an
        hour old (a killed run's)."""
        entries, total = [], 0
        for path in self.root.glob("*/*/*"):
            try:
                info = path.stat()
            except OSError:
                continue
            if path.name.endswith(".tmp"):
                if info.st_mtime < time.time() - 3600:
                    with contextlib.suppress(OSError):
                        path.unlink()
                continue
            entries.append((info.st_mtime, info.st_size, path))
            total += info.st_size
        if total <= limit:
            return
        for _, size, path in sorted(entries):
            if total <= limit * 3 // 4:
                break
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size

    def to_dict(self):
        return {"directory": str(self.root), "from_memo": self.hits, "decoded": self.decoded,
                "stored": self.stored, "damaged": self.damaged, **({"notes": self.notes} if self.notes else {})}


_HEAD = struct.Struct("<8sQ")  # magic, length of the JSON header


def _pack(checked, doc, tensors):
    """An entry: magic, header length, header (the document without data, the tensors' layout),
    padding to 8 bytes, the values, the SHA-256 of everything before it."""
    skeleton = dict(doc)
    layout = []
    for part in PARTS:
        skeleton[part] = {name: {k: v for k, v in body.items() if k != "data"} for name, body in doc[part].items()}
        layout += [[part, name, t.dtype, list(t.shape)] for name, t in tensors[part].items()]
    head = {"checked": checked, "doc": skeleton, "tensors": layout}
    header = orjson.dumps(head)  # TypeError beyond 64-bit integers; NaN and infinities become null:
    if orjson.loads(header) != head:  # a document whose fields JSON would not give back exactly is not kept
        raise ValueError("not carried exactly by JSON")
    header += b" " * (-(_HEAD.size + len(header)) % 8)
    values = [np.ascontiguousarray(tensors[part][name].values, dtype="<f8").ravel() for part, name, _, _ in layout]
    body = _HEAD.pack(MAGIC, len(header)) + header + b"".join(v.tobytes() for v in values)
    return body + hashlib.sha256(body).digest()


def _unpack(buf, checked):
    """(doc, tensors) of an entry, None when it was kept unchecked and a check is wanted;
    ValueError when it is not an intact entry of this format."""
    if len(buf) < _HEAD.size + 32 or hashlib.sha256(memoryview(buf)[:-32]).digest() != bytes(buf[-32:]):
        raise ValueError("its SHA-256 does not hold")
    magic, length = _HEAD.unpack_from(buf)
    if magic != MAGIC:
        raise ValueError("not an entry of this format")
    header = orjson.loads(memoryview(buf)[_HEAD.size:_HEAD.size + length])
    if checked and not header["checked"]:
        return None
    start = _HEAD.size + length
    if (len(buf) - 32 - start) % 8:
        raise ValueError("its values do not fill it")
    every = np.frombuffer(buf, dtype="<f8", count=(len(buf) - 32 - start) // 8, offset=start)  # one view, sliced
    tensors = {part: {} for part in PARTS}
    offset = 0
    for part, name, dtype, shape in header["tensors"]:
        count = 1
        for n in shape:
            count *= n
        if offset + count > every.size:
            raise ValueError("its values do not fill it")
        tensors[part][name] = Tensor(dtype=dtype, values=every[offset:offset + count].reshape(shape))
        offset += count
    if offset != every.size:
        raise ValueError("its values do not fill it")
    return header["doc"], tensors

