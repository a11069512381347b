"""The case catalogue: the cases of every ops/<suite>/*.json (each op's bundle), validated, ids unique,
selected by --case."""

import fnmatch
import json
import math
from dataclasses import dataclass
from pathlib import Path

from . import layout
from .documents import DocumentError, parse_bytes, read_bytes
from .errors import InputError
from .text import clean

GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class Case:
    """One catalogue entry; `spec` is the case object exactly as written in `file`."""

    spec: dict
    file: Path

    @property
    def id(self):
        return self.spec["id"]

    @property
    def kind(self):
        return self.spec["kind"]

    @property
    def op(self):
        return self.spec["op"]


# Limits of a catalogue (docs/runner.md, "Limits"): well above the largest case today (a 10 KB file,
# 256 elements, the integer 13,523), well below what would exhaust the machine.
MAX_FILE_BYTES = 1 << 20  # one catalogue file
MAX_SHAPE_ELEMENTS = 1 << 16  # the product of a shape list (config `shape`, `*_shape`, `lead`, `table`, `shapes[i]`)
MAX_INTEGER = 100_000  # any integer in a config (a count, a size, an index, a token id)
RESERVED_SUFFIXES = layout.RESERVED_SUFFIXES  # an id that is another id plus one would share its files


def load(cases_dir, schemas, display=lambda p: p):
    """All cases of the suite in file-name order, then catalogue order. InputError on a missing
    directory, an unreadable or invalid file (a file that is not a regular one, or larger than
    MAX_FILE_BYTES, is refused unread), a non-finite number, a case beyond the limits, a
    duplicate id, or two ids whose files would collide (naming both files). The message shows
    file names and config keys escaped (verify/text.py)."""
    try:
        return _load(Path(cases_dir), schemas, display)
    except InputError as exc:
        raise InputError(clean(str(exc))) from None


def _load(cases_dir, schemas, display):
    if not cases_dir.is_dir():
        raise InputError(f"the catalogue directory {display(cases_dir)} does not exist or is not a directory; "
                         "give a directory of *.json catalogue files (docs/runner.md)")
    files = sorted(cases_dir.glob("*.json"))
    if not files:
        raise InputError(f"no catalogue files (*.json) in {display(cases_dir)}; add cases there (docs/runner.md)")
    cases, folded = [], {}  # case id in lower case -> its case
    for path in files:
        try:
            data = read_bytes(path, limit=MAX_FILE_BYTES)
            document = parse_bytes(data)
            schemas.check("catalogue", document)
            where = non_finite(document)
            if where:
                raise DocumentError(f"at {where}: a number beyond the float64 range (it reads as Infinity); "
                                    "every number in a catalogue must be finite")
        except DocumentError as exc:
            raise InputError(f"catalogue {display(path)} is malformed: {exc}; fix the file") from None
        for spec in document["cases"]:
            case = Case(spec=spec, file=path)
            problem = size_problem(spec)
            if problem:
                raise InputError(f"case '{case.id}' in {display(path)} is too large: {problem}; make it smaller "
                                 "(docs/runner.md, \"Limits\")")
            other = folded.setdefault(case.id.lower(), case)
            if other is not case and other.id == case.id:
                raise InputError(f"duplicate case id '{case.id}' in {display(other.file)} and {display(path)}; "
                                 "ids must be unique across the suite")
            if other is not case:
                raise InputError(
                    f"case ids '{other.id}' ({display(other.file)}) and '{case.id}' ({display(path)}) differ only in "
                    "case, so their goldens would be one file where file names ignore case; rename one")
            cases.append(case)
    seen = {case.id: case for case in cases}
    for case in cases:
        for suffix in RESERVED_SUFFIXES:
            base = seen.get(case.id[: -len(suffix)]) if case.id.endswith(suffix) else None
            if base is not None:
                raise InputError(
                    f"case id '{case.id}' ({display(case.file)}) is case '{base.id}' ({display(base.file)}) plus "
                    f"'{suffix}': an engine writes {base.id}{suffix}{'.json' if suffix == '.full' else '/'} for "
                    f"'{base.id}', so their files would collide; rename '{case.id}'")
    return cases


def non_finite(value):
    """The JSON path of the first non-finite number in a parsed document (1e400 parses as
    Infinity), or None. Iterative: a document nested as deep as the parser allows is walked."""
    stack = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return where or "the top level"
        if isinstance(item, dict):
            children = [(v, f"{where}.{k}" if where else str(k)) for k, v in item.items()]
        elif isinstance(item, list):
            children = [(v, f"{where}[{i}]") for i, v in enumerate(item)]
        else:
            continue
        stack += reversed(children)  # depth first, in document order
    return None


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def size_problem(spec):
    """Why a case exceeds the limits (MAX_SHAPE_ELEMENTS, MAX_INTEGER), or None."""
    config = spec.get("config") if isinstance(spec, dict) else None
    if not isinstance(config, dict):
        return None
    shapes = []  # (where, a shape list), in the config's order
    for key, value in config.items():
        if key in ("shape", "lead", "table") or key.endswith("_shape"):
            shapes.append((f"config.{key}", value))
        elif key == "shapes" and isinstance(value, list):
            shapes += [(f"config.{key}[{i}]", item) for i, item in enumerate(value)]
    for where, value in shapes:
        if isinstance(value, list) and value and all(_is_int(v) and v >= 0 for v in value):
            elements = math.prod(value)
            if elements > MAX_SHAPE_ELEMENTS:
                return (f"{where} {json.dumps(value)} has {elements} elements, more than the limit of "
                        f"{MAX_SHAPE_ELEMENTS}")
    stack = [("config", config)]
    while stack:
        where, value = stack.pop()
        if _is_int(value) and abs(value) > MAX_INTEGER:
            return f"{where} is {value}, beyond the limit of {MAX_INTEGER} for any integer in a config"
        if isinstance(value, dict):
            stack += [(f"{where}.{k}", v) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(f"{where}[{i}]", v) for i, v in enumerate(value)]
    return None


def matches(case_id, pattern):
    """fnmatch glob on the whole id; a pattern without glob characters matches as a substring. An
    empty pattern (an unset shell variable) is a usage error, not "every case"."""
    if not pattern:
        raise InputError("an empty pattern (--case '' or --fault '', an unset shell variable?) would select "
                         "everything; give a glob or a substring of the ids, or leave the option out")
    if GLOB_CHARS & set(pattern):
        return fnmatch.fnmatchcase(case_id, pattern)
    return pattern in case_id


def select(cases, patterns, suite):
    """The cases matching any pattern (all when patterns is empty); InputError when none match."""
    if not patterns:
        return list(cases)
    chosen = [c for c in cases if any(matches(c.id, p) for p in patterns)]
    if not chosen:
        shown = ", ".join(repr(p) for p in patterns)
        raise InputError(f"no case id matches {shown}; see the ids with `verify {suite} --list`")
    return chosen
