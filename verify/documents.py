"""Reading JSON documents strictly, validating them against the schemas in golden/schemas/, and
decoding golden tensors (docs/goldens.md)."""

import errno
import functools
import json
import math
import os
import stat
from pathlib import Path

import numpy as np

from .compare import Tensor
from .files import file_kind
from .plain import plain

class DocumentError(ValueError):
    """A document that cannot be read or does not have the expected form; the message says where."""


def _no_bare_constant(token):
    raise ValueError(f"bare {token} is not JSON; write it as the string \"{token}\"")


MAX_BYTES = 64 << 20  # a document larger than this is refused unread (the largest today, a report, is ~1 MB)


def _unique_keys(pairs):
    """json's object_pairs_hook: the object, unless it names a key twice."""
    found = dict(pairs)
    if len(found) != len(pairs):
        seen = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise DocumentError(f"the key {_short(json.dumps(key, ensure_ascii=False), 80)} appears twice in one object; "
                            "a document names each key once (a reader would keep one of the two values without a word)")
    return found


def parse(text):
    """JSON text to Python values; bare NaN / Infinity (which Python's json accepts) are refused,
    and so are a key named twice in one object and nesting too deep for the parser."""
    if text.startswith("\ufeff"):
        raise DocumentError("not valid JSON: it starts with a byte order mark (U+FEFF), which JSON does not allow "
                            "(RFC 8259); save it as UTF-8 without one")
    try:
        return json.loads(text, parse_constant=_no_bare_constant, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise DocumentError(f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise DocumentError("not a document the runner reads: its arrays or objects are nested too deeply") from None
    except ValueError as exc:  # a bare constant, a key named twice (a DocumentError already)
        raise DocumentError(str(exc)) from None


def read_bytes(path, limit=MAX_BYTES, follow_links=True):
    """The bytes of the regular file at path (a symbolic link to one is fine unless follow_links
    is false), at most `limit` of them; DocumentError for anything else (a directory, a device
    such as /dev/zero, a pipe, a larger file), said at once, never read. The file is opened
    without blocking (a named pipe would wait for a writer) and checked through its descriptor."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags if follow_links else flags | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_links:
            raise DocumentError("it is a symbolic link") from None
        raise DocumentError(f"cannot read it ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DocumentError(f"it is {file_kind(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise DocumentError(f"it holds {info.st_size} bytes, more than the {limit} allowed")
        data = b""
        while len(data) <= limit:  # as a rule one read: the whole file and a byte more
            chunk = os.read(fd, max(info.st_size + 1 - len(data), 1 << 16))
            if not chunk:
                break
            data += chunk
        if len(data) > limit:
            raise DocumentError(f"it holds more than the {limit} bytes allowed")
        return data
    except OSError as exc:
        raise DocumentError(f"cannot read it ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def read(path, limit=MAX_BYTES):
    """Parse the JSON file at path; DocumentError when unreadable (read_bytes) or invalid."""
    return parse_bytes(read_bytes(path, limit))


def parse_bytes(data):
    """As read(), for a file's bytes already in memory (UTF-8); line ends are translated as read()'s
    text mode does, so an error names the same line and column."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"cannot read it ({exc})") from None
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return parse(text)


class Schemas:
    """The suite's JSON Schemas (Draft 2020-12), loaded once; golden.schema.json refers to the
    case definition in catalogue.schema.json. jsonschema is imported at the first check."""

    NAMES = ("catalogue", "golden", "report")

    def __init__(self, schema_dir):
        self.dir = Path(schema_dir)
        self._raw = {}
        for name in self.NAMES:
            path = self.dir / f"{name}.schema.json"
            try:
                self._raw[name] = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise DocumentError(f"cannot load the schema {path} ({exc})") from None

    @functools.cached_property
    def _registry(self):
        from referencing import Registry, Resource

        resources = ((doc["$id"], Resource.from_contents(doc)) for doc in self._raw.values())
        return Registry().with_resources(resources)

    @functools.cached_property
    def _validators(self):
        from jsonschema import Draft202012Validator

        return {n: Draft202012Validator(doc, registry=self._registry) for n, doc in self._raw.items()}

    @functools.cached_property
    def _golden_quick(self):
        return _GoldenQuick(self._raw["golden"], self._registry)

    def check(self, name, document):
        """Raise DocumentError naming the first place where document breaks schema `name`."""
        if name == "golden" and not plain() and self._golden_quick.valid(document):
            return
        validator = self._validators[name]
        if validator.is_valid(document):
            return
        from jsonschema.exceptions import best_match

        error = best_match(validator.iter_errors(document))
        where = json_path(error.absolute_path) or "the top level"
        raise DocumentError(f"at {where}: {_short(error.message)} (schema {name}.schema.json)")


NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _items_valid(dtype, data):
    """Whether every item of a tensor's data is what golden.schema.json allows for dtype: a number
    (never a bool); for int64 without a fraction (jsonschema's rule: 2.0 is an integer); for
    float64 also one of the strings of NON_FINITE. Mostly one pass in C."""
    types = set(map(type, data))
    if types <= {int, float}:
        return dtype != "int64" or float not in types or all(v.is_integer() for v in data if type(v) is float)
    if dtype == "int64" or not types <= {int, float, str}:
        return False
    return all(v in NON_FINITE for v in data if type(v) is str)


class _GoldenQuick:
    """Shows a document valid under golden.schema.json without walking every data item through the
    validator (about 10 us a value, some 20 s of a cached full run; off with VERIFY_PLAIN=1). The
    schema constrains a tensor's data only through `items`, by dtype, and every tensor by the same
    two definitions, so: the document is validated with its tensors taken out; each tensor name and
    each distinct tensor body without its data once (a run has few of each); the data items by
    _items_valid, the one rule restated here. False means "not shown valid": Schemas.check then
    runs the full validator, whose best error is the message."""

    STUB = {"dtype": "int64", "shape": [], "data": []}  # a valid tensor body, to validate a name alone

    def __init__(self, schema, registry):
        from jsonschema import Draft202012Validator

        self.top = Draft202012Validator(schema, registry=registry)
        self.tensor, self.tensors = (Draft202012Validator({"$ref": f"{schema['$id']}#/$defs/{d}"},
                                                          registry=registry) for d in ("tensor", "tensors"))
        self._names, self._bodies = {}, {}  # name / repr of a body without its data -> whether valid

    def _body_ok(self, body):
        if not (isinstance(body, dict) and isinstance(body.get("data"), list)):
            return self.tensor.is_valid(body)  # invalid whatever it holds; rare, not remembered
        head = {k: v for k, v in body.items() if k != "data"}
        key = repr(head)  # types kept: 2 and 2.0, 1 and True differ
        if key not in self._bodies:
            self._bodies[key] = self.tensor.is_valid(dict(head, data=[]))
        return self._bodies[key] and _items_valid(body.get("dtype"), body["data"])

    def valid(self, document):
        if not isinstance(document, dict):
            return False
        skeleton = dict(document)
        for part in ("inputs", "outputs"):
            tensors = document.get(part)
            if not isinstance(tensors, dict):
                continue  # the top-level validation refuses it
            for name, body in tensors.items():
                if name not in self._names:
                    self._names[name] = self.tensors.is_valid({name: self.STUB})
                if not (self._names[name] and self._body_ok(body)):
                    return False
            skeleton[part] = {}
        return self.top.is_valid(skeleton)


def json_path(parts):
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _short(message, limit=160):
    return message if len(message) <= limit else message[: limit - 3] + "..."


def decode_tensor(doc, where):
    """One schema-valid tensor document to a Tensor; checks len(data) == product(shape)."""
    shape = tuple(doc["shape"])
    data = doc["data"]
    expected = math.prod(shape)
    if len(data) != expected:
        raise DocumentError(f"at {where}: shape {list(shape)} needs {expected} values, data has {len(data)}")
    try:
        if doc["dtype"] == "float64":
            # numpy reads the strings of NON_FINITE as the values they name; any other non-finite
            # value came from a number beyond the range of float64 (1e999)
            values = np.array(data, dtype=np.float64)
            finite = np.isfinite(values)
            for i in np.flatnonzero(~finite):
                finite[i] = isinstance(data[i], str) and data[i] in NON_FINITE
        else:
            if data and not (-(2 ** 63) <= min(data) and max(data) <= 2 ** 63 - 1):
                i = next(i for i, v in enumerate(data) if not -(2 ** 63) <= v <= 2 ** 63 - 1)
                raise DocumentError(f"at {where}: data[{i}] is {data[i]!r}, beyond the range of int64")
            values = np.array(data, dtype=np.float64) + 0.0  # exact up to 2**53; -0.0 (an integer 0) is 0
            finite = np.isfinite(values)
    except DocumentError:
        raise
    except (OverflowError, ValueError, TypeError) as exc:
        raise DocumentError(f"at {where}: data cannot be read as {doc['dtype']} ({exc})") from None
    if not finite.all():
        i = int(np.flatnonzero(~finite)[0])
        raise DocumentError(f"at {where}: data[{i}] is {data[i]!r}, beyond the range of {doc['dtype']}; a non-finite "
                            'float64 is written as the string "NaN", "Infinity" or "-Infinity"')
    return Tensor(dtype=doc["dtype"], values=values.reshape(shape))


def decode_tensors(document):
    """{"inputs": {name: Tensor}, "outputs": {name: Tensor}} of a schema-valid golden document."""
    return {
        part: {name: decode_tensor(t, f"{part}.{name}") for name, t in document[part].items()}
        for part in ("inputs", "outputs")
    }


def case_difference(catalogue_case, echoed, where="case"):
    """None when the echoed case equals the catalogue's (numbers by value: 2 == 2.0, but a
    boolean is not a number); otherwise where and how they differ."""
    try:
        return _case_difference(catalogue_case, echoed, where)
    except RecursionError:
        return f"{where} is nested too deeply to compare with the catalogue"


def _case_difference(catalogue_case, echoed, where):
    a, b = catalogue_case, echoed
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in b:
                return f"{where}.{key} is missing"
            if key not in a:
                return f"{where}.{key} is not in the catalogue"
            found = _case_difference(a[key], b[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where} has {len(b)} items, the catalogue {len(a)}"
        for i, (x, y) in enumerate(zip(a, b)):
            found = _case_difference(x, y, f"{where}[{i}]")
            if found:
                return found
        return None
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return None if a == b else f"{where} is {b!r}, the catalogue says {a!r}"
    if type(a) is type(b) and a == b:
        return None
    return f"{where} is {json.dumps(b)}, the catalogue says {json.dumps(a)}"
