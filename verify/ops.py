"""Each op in one bundle: ops/<suite>/<op>.json (schema golden/schemas/ops.schema.json; adding an
op: docs/adding-an-op.md) declares the op (and its gradient check, gradcheck_<op>, beside it): the
axis names of its tensors (verify/axes.py), the ops it builds on (the report names the primitive
that explains the others first), its tolerances with their reasons; and holds its cases (the
catalogue, verify/catalogue.py) and its faults (verify/tools/faults.py). ops/<suite>.json holds
what is no one op's: the axis rules for every op and the faults of the shared numeric core. Its
benchmark workloads are bench/workloads.py's (OPS names each one's op); an op with no workload or
no fault says why under "workloads" or "faults": {"none": why}. tests/test_ops_declared.py fails
when a catalogue op lacks its declaration or any of FIELDS."""

import fnmatch
import functools
import json
from pathlib import Path

from .plain import plain

ROOT = Path(__file__).resolve().parent.parent
FIELDS = ("summary", "uses", "axes", "tolerances")  # every op declares each
GUIDE = "docs/adding-an-op.md"


class Undeclared(LookupError):
    """A tolerance an op does not declare: the message says which, what it has, and what to do."""


class Declarations:
    def __init__(self, doc):
        self.rules = doc.get("rules", [])
        self.ops = doc.get("ops", {})
        self._axes = {}  # (op, name, ndim) -> axes(), found once: a run asks for thousands of tensors

    def missing(self, op):
        """The FIELDS the op's declaration lacks (all of them for an undeclared op)."""
        entry = self.ops.get(op, {})
        return [f for f in FIELDS if f not in entry]

    def tolerance(self, op, name):
        """The op's tolerance `name`: {value, rule, why[, step, min_grad, floor]}; Undeclared when
        the op or the tolerance is not declared."""
        if op not in self.ops:
            raise Undeclared(f"op {op!r} is not declared in ops/attention/; declare it in its bundle ({GUIDE})")
        own = self.ops[op].get("tolerances")
        if not isinstance(own, dict) or name not in own or name == "none":
            have = sorted(k for k in own if k != "none") if isinstance(own, dict) else []
            raise Undeclared(f"op {op!r} declares no tolerance {name!r} in its bundle, ops/attention/ (it declares "
                             f"{have or 'none'}); add it with its rule and its reason ({GUIDE})")
        return dict(own[name])

    def axes(self, op, name, ndim):
        """The names of the axes of tensor `name` written by `op`, or None when not declared: the op's
        exact entry, then its patterns, then the rules that hold for every op."""
        key = (op, name, ndim)
        if key not in self._axes:  # full.x, of a pretrained case's full document: as x
            self._axes[key] = self._find_axes(op, name.removeprefix("full."), ndim)
        found = self._axes[key]
        return None if found is None else list(found)

    def _find_axes(self, op, name, ndim):
        own = self.ops.get(op, {}).get("axes", {})
        candidates = [own[name]] if name in own else []
        candidates += [v for k, v in own.items() if k != name and fnmatch.fnmatchcase(name, k)]
        candidates += [r["axes"] for r in self.rules if any(fnmatch.fnmatchcase(name, n) for n in r["names"])]
        for names in candidates:
            if isinstance(names, dict):
                names = names.get(str(ndim))
            if names is not None and len(names) == ndim:
                return tuple(names)
        return None

    def uses(self, op):
        """Every op `op` builds on, directly or not (empty for an undeclared op)."""
        found, todo = set(), list(self.ops.get(op, {}).get("uses", []))
        while todo:
            other = todo.pop()
            if other not in found:
                found.add(other)
                todo += self.ops.get(other, {}).get("uses", [])
        return found

    def depth(self, op, seen=()):
        """0 for an op that builds on no other, else 1 + the greatest depth of the ops it uses."""
        if op in seen:
            return 0  # a cycle (refused by the tests): stop
        direct = self.ops.get(op, {}).get("uses", [])
        return 0 if not direct else 1 + max(self.depth(u, seen + (op,)) for u in direct)


def bundles(suite="attention"):
    """The suite's bundle files, ops/<suite>/*.json, in name order."""
    return sorted((ROOT / "ops" / suite).glob("*.json"))


def suite_file(suite="attention"):
    """ops/<suite>.json: the axis rules for every op and the shared faults."""
    return ROOT / "ops" / f"{suite}.json"


def fault_entries(suite="attention"):
    """[(fault object, the file that holds it)]: each bundle's faults in name order, then the
    shared ones of ops/<suite>.json."""
    found = []
    for path in bundles(suite) + [suite_file(suite)]:
        doc = json.loads(path.read_text(encoding="utf-8"))
        found += [(fault, path) for fault in doc.get("faults", [])]
    return found


def faults(suite="attention"):
    """{op: the ids of the faults that target it} (op "shared": the faults of the numeric core
    every op runs on)."""
    by_op = {}
    for fault, _ in fault_entries(suite):
        by_op.setdefault(fault["op"], []).append(fault["id"])
    return by_op


def declarations(suite="attention"):
    """The suite's declarations, read once per process (at every call with VERIFY_PLAIN=1); empty
    ones when the file is missing or unreadable (the reports then show bare indices)."""
    return _read.__wrapped__(suite) if plain() else _read(suite)


@functools.cache
def _read(suite):
    try:
        declared = {}
        for path in bundles(suite):
            declared.update(json.loads(path.read_text(encoding="utf-8")).get("ops", {}))
        rules = json.loads(suite_file(suite).read_text(encoding="utf-8")).get("rules", [])
        return Declarations({"rules": rules, "ops": declared})
    except (OSError, ValueError):
        return Declarations({})
