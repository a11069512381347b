"""Reading JSON documents strictly, validating them against the schemas in golden/schemas/, and
decoding golden tensors (docs/goldens.md)."""

import errno
import json
import math
import os
import stat
from pathlib import Path

import numpy as np
import orjson

from .compare import Tensor
from .files import file_kind
from .plain import plain

NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class DocumentError(ValueError):
    """A document that cannot be read or does not have the expected form; the message says where."""


def _no_bare_constant(token):
    raise ValueError(f"bare {token} is not JSON; write it as the string \"{token}\"")


MAX_BYTES = 64 << 20  # a document larger than this is refused unread (the largest today, a report, is ~1 MB)


# The parser's fast path: orjson, about three times faster than the stdlib's json on the engines'
# documents, mostly arrays of float64 (its check below included). Its result is taken only where
# it is the stdlib's to the bit: the same values, the same types, the same float64 bits. The two parsers
# agree on every valid JSON text but in four ways, each of which sends the text to the stdlib:
# orjson refuses what json accepts (bare NaN / Infinity, numbers beyond the float64 range, lone
# surrogate escapes: orjson raises, and json gives the result or the error it always gave); it
# reads an integer beyond 64 bits as a float (json as an int), so a float of magnitude 2**63 or
# more, which only such an integer or a float that large gives, is read again by json; it
# parses nesting deeper than json's recursion limit, which the runner's later walks (the schema
# validator) would then hit, so a document nested deeper than FAST_DEPTH is read again by json
# too; and it keeps the last of two equal keys in an object without a word, where the strict
# parser refuses the document (_unique_keys: a duplicate key can hide a value, a second "outputs"
# replacing the first). orjson's result cannot show a key it dropped, so the text tells: outside
# strings, a colon is only ever the separator of one key and its value, so the text's colons less
# those inside the parsed strings are the pairs the text wrote, which equal the keys of the parsed
# objects exactly when no key was dropped. A colon written as the escape \u003a would break the
# count, so a text with any \u escape goes to json too (no golden or catalogue file has one).
# It saves about 0.4 s of the runner's CPU in a cached full run (docs/journal/2026-12-04-
# accelerators.md); VERIFY_PLAIN=1 (verify/plain.py) turns it off. tests/test_parse.py checks the
# agreement, with and without VERIFY_PLAIN, on generated and mutated texts and every golden.
FAST_DEPTH = 64  # the engines' documents nest 5 deep; json refuses about 1000
_BIG = 2.0 ** 63
_SCALARS = frozenset((int, float, str, bool, type(None)))
_NOT_FAST = object()


def _same_as_json(value):
    """(whether orjson's `value` is what json gives for the same text: it nests at most FAST_DEPTH
    deep and holds no float of magnitude 2**63 or more; the number of its objects' keys; a
    function counting the colons in its strings, keys and values). One pass in C per list and
    object."""
    stack, keys, dicts, stringy = [(value, 1)], 0, [], [[value]] if type(value) is str else []
    while stack:
        node, depth = stack.pop()
        if type(node) not in (dict, list):
            if type(node) is float and not -_BIG < node < _BIG:
                return False, keys, None
            continue
        if depth > FAST_DEPTH:
            return False, keys, None
        if type(node) is dict:
            keys += len(node)
            dicts.append(node)
        items = node.values() if type(node) is dict else node
        types = set(map(type, items))
        if float in types:
            floats = items if types == {float} else [v for v in items if type(v) is float]
            if floats and not (-_BIG < min(floats) and max(floats) < _BIG):
                return False, keys, None
        if str in types:
            stringy.append(items)
        if not types <= _SCALARS:
            stack.extend((v, depth + 1) for v in items if type(v) in (dict, list))

    def colons():
        return (sum("".join(d).count(":") for d in dicts)
                + sum("".join(v for v in items if type(v) is str).count(":") for items in stringy))
    return True, keys, colons


def _fast(data):
    """orjson's reading of `data` (bytes or str) when it is json's to the bit, else _NOT_FAST
    (always with VERIFY_PLAIN)."""
    if plain():
        return _NOT_FAST
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return _NOT_FAST
    same, keys, colons = _same_as_json(value)
    escape, colon = (b"\\u", b":") if isinstance(data, bytes) else ("\\u", ":")
    if not same or (escape[:1] in data and escape in data):  # a \u escape may spell a colon (no backslash: 0.1 ms)
        return _NOT_FAST
    pairs = data.count(colon) - colons()  # the text's colons outside strings: one per key written
    return value if pairs == keys else _NOT_FAST  # a key dropped: json names it


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
    value = _fast(text)
    return value if value is not _NOT_FAST else _parse_stdlib(text)


def _parse_stdlib(text):
    """parse() by Python's json alone: the reference behaviour, and every error message."""
    if text.startswith("\ufeff"):
        raise DocumentError("not valid JSON: it starts with a byte order mark (U+FEFF), which JSON does not allow "
                            "(RFC 8259); save it as UTF-8 without one")
    try:
        return json.loads(text, parse_constant=_no_bare_constant, object_pairs_hook=_unique_keys)
    except DocumentError:
        raise
    except json.JSONDecodeError as exc:
        raise DocumentError(f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise DocumentError("not a document the runner reads: its arrays or objects are nested too deeply") from None
    except ValueError as exc:
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
        chunks, size = [], 0
        want = info.st_size + 1  # the whole file and a byte more in one read (a 1 MB buffer per read cost more than the read)
        while size <= limit:
            chunk = os.read(fd, min(max(want - size, 1 << 16), limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise DocumentError(f"it holds more than the {limit} bytes allowed")
        return b"".join(chunks)
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
    value = _fast(data)
    if value is not _NOT_FAST:
        return value
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"cannot read it ({exc})") from None
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _parse_stdlib(text)


class Schemas:
    """The suite's JSON Schemas (Draft 2020-12), loaded once; golden.schema.json refers to the
    case definition in catalogue.schema.json. The validators are built, and jsonschema imported,
    at the first check."""

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
        self._built = None

    def _build(self):
        """({name: validator}, the quick golden check), built once."""
        if self._built is None:
            from jsonschema import Draft202012Validator
            from referencing import Registry, Resource

            registry = Registry().with_resources(
                (doc["$id"], Resource.from_contents(doc)) for doc in self._raw.values()
            )
            self._built = ({n: Draft202012Validator(doc, registry=registry) for n, doc in self._raw.items()},
                           _GoldenQuick(self._raw["golden"], registry))
        return self._built

    @property
    def _validators(self):
        return self._build()[0]

    @property
    def _golden_quick(self):
        return self._build()[1]

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


# What golden.schema.json allows in a tensor's `data`, per dtype, as Python types of json.loads:
# "number" is int or float (never bool), "integer" is int or a float with no fractional part
# (jsonschema's rule: 2.0 is an integer), and a float64 may be one of the three strings.
_NUMBER_TYPES = frozenset((int, float))
NON_FINITE_STRINGS = frozenset(("NaN", "Infinity", "-Infinity"))


def _items_valid(dtype, data):
    """Whether every item of a tensor's data list is what golden.schema.json allows for dtype.
    The common case costs one pass in C (the set of the items' types)."""
    types = set(map(type, data))
    if types <= _NUMBER_TYPES:
        return dtype != "int64" or float not in types or all(v.is_integer() for v in data if type(v) is float)
    if dtype == "int64" or not types <= {int, float, str}:
        return False
    return all(v in NON_FINITE_STRINGS for v in data if type(v) is str)


class _GoldenQuick:
    """Decides that a document is valid under golden.schema.json without walking every data item
    (and every tensor) through the schema validator, which costs about 10 us per value: about 20 s
    of the runner's CPU in a cached full run (docs/journal/2026-12-04-accelerators.md). VERIFY_PLAIN=1
    (verify/plain.py) leaves every document to the full validator.

    The schema constrains a tensor's data only through `items`, by dtype, and every tensor of
    `inputs` / `outputs` by the same two definitions (`tensors`: the name pattern; `tensor`: the
    body). So: the document is validated with `inputs` and `outputs` emptied; each tensor name
    alone, by the rule `tensors` gives names; each tensor body with its data emptied, once per
    distinct body (dtype, shape, keys: the few of a run, each seen thousands of times); and the
    data items by _items_valid. All of it goes through the schema itself; only the items rule is
    restated, and tests/test_documents.py fuzzes Schemas.check with and without VERIFY_PLAIN.

    valid() returning False means "not shown valid": Schemas.check then runs the full validator,
    whose best error is the message, so a refused document is described exactly as before."""

    STUB = {"dtype": "int64", "shape": [], "data": []}  # a valid tensor body, to validate names alone
    TENSORS_KEYWORDS = frozenset(("type", "propertyNames", "additionalProperties", "description", "title"))

    def __init__(self, schema, registry):
        from jsonschema import Draft202012Validator

        base = schema["$id"]
        self.top = Draft202012Validator(schema, registry=registry)
        self.tensor = Draft202012Validator({"$ref": f"{base}#/$defs/tensor"}, registry=registry)
        self.tensors = Draft202012Validator({"$ref": f"{base}#/$defs/tensors"}, registry=registry)
        # A name alone, through the rule `tensors` gives names (a pattern), when that is all the
        # map asks of its keys: a tenth of the cost of a map {name: STUB}, for hundreds of names.
        tensors = schema["$defs"]["tensors"]
        names_only = set(tensors) <= self.TENSORS_KEYWORDS and tensors.get("additionalProperties") == {"$ref": "#/$defs/tensor"}
        self.name = Draft202012Validator({"$ref": f"{base}#/$defs/tensors/propertyNames"}, registry=registry) \
            if names_only and "propertyNames" in tensors else None
        self._bodies = {}  # repr of a body without its data -> whether the schema accepts it

    def _name_ok(self, name):
        return self.name.is_valid(name) if self.name is not None else self.tensors.is_valid({name: self.STUB})

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
                if not (self._name_ok(name) and self._body_ok(body)):
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
            # numpy reads the schema's only strings, "NaN", "Infinity" and "-Infinity", as the values
            # they name (the same bits as NON_FINITE's); a non-finite value is then checked to come
            # from one of them, not from a number beyond the range of float64 (1e999)
            values = np.array(data, dtype=np.float64)
            finite = np.isfinite(values)
            for i in np.flatnonzero(~finite):
                finite[i] = isinstance(data[i], str) and data[i] in NON_FINITE
        else:
            if data and not (-(2 ** 63) <= min(data) and max(data) <= 2 ** 63 - 1):
                i = next(i for i, v in enumerate(data) if not -(2 ** 63) <= v <= 2 ** 63 - 1)
                raise DocumentError(f"at {where}: data[{i}] is {data[i]!r}, beyond the range of int64")
            values = np.array(data, dtype=np.float64) + 0.0  # as float64: exact up to 2**53; -0.0 (an integer 0) is 0
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
