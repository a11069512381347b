"""Each op declared once: ops/<suite>.json (schema golden/schemas/ops.schema.json; adding an op:
docs/adding-an-op.md), read here for the runner and the tests: the axis names of an op's tensors
(verify/axes.py); the ops it builds on, which order failing cases leaf to root (verify/report.py)
so that the primitive that explains the others is named first; its cost estimate (the scheduler's
static table, verify/schedule.py); its tolerances with their reasons (the gradcheck bound of
verify/expectations.py, and every bound of the tests, through tests/toolkit.py and
port_ts/test/toolkit.ts); its benchmark workloads and the faults that target it.
tests/test_ops_declared.py fails when a catalogue op lacks its declaration or any of FIELDS, or a
tensor of a committed golden lacks its axis names."""

import fnmatch
import functools
import json
import re
from pathlib import Path

from .plain import plain

_GLOB = re.compile(r"[*?[]")  # fnmatch's special characters: '*', '?' and a '[' that opens a set

ROOT = Path(__file__).resolve().parent.parent
FIELDS = ("summary", "uses", "axes", "cost", "tolerances", "workloads", "faults")  # every op declares each
GUIDE = "docs/adding-an-op.md"


class Undeclared(LookupError):
    """A tolerance an op does not declare: the message says which, what it has, and what to do."""


class Declarations:
    def __init__(self, doc):
        self.rules = doc.get("rules", [])
        self.ops = doc.get("ops", {})
        self.shared_faults = list(doc.get("shared_faults", {}).get("faults", []))
        self._axes = {}  # (op, name, ndim) -> axes(), found once: a run asks for thousands of tensors
        self._rules = None  # the shared rules' patterns, compiled on first use

    def missing(self, op):
        """The FIELDS the op's declaration lacks (all of them for an undeclared op)."""
        entry = self.ops.get(op, {})
        return [f for f in FIELDS if f not in entry]

    def costs(self):
        """{op: (reference seconds, port seconds)} for every op that declares its cost."""
        return {op: (e["cost"]["reference"], e["cost"]["port"]) for op, e in self.ops.items() if "cost" in e}

    def tolerance(self, op, name):
        """The op's tolerance `name`: {value, rule, why[, step, min_grad, floor]}; Undeclared when
        the op or the tolerance is not declared."""
        if op not in self.ops:
            raise Undeclared(f"op {op!r} is not declared in ops/attention.json; declare it ({GUIDE})")
        own = self.ops[op].get("tolerances")
        if not isinstance(own, dict) or name not in own or name == "none":
            have = sorted(k for k in own if k != "none") if isinstance(own, dict) else []
            raise Undeclared(f"op {op!r} declares no tolerance {name!r} in ops/attention.json (it declares "
                             f"{have or 'none'}); add it with its rule and its reason ({GUIDE})")
        return dict(own[name])

    def listed(self, op, field):
        """The op's workloads or faults as a list: empty for {"none": why} or an absent field."""
        value = self.ops.get(op, {}).get(field)
        return list(value) if isinstance(value, list) else []

    def axes(self, op, name, ndim):
        """The names of the axes of tensor `name` written by `op`, or None when not declared: the op's
        exact entry, then its patterns, then the rules that hold for every op."""
        key = (op, name, ndim)
        if key not in self._axes:
            self._axes[key] = self._find_axes(op, name, ndim)
        found = self._axes[key]
        return None if found is None else list(found)

    def _rule_patterns(self):
        """[(match, axes)] of the shared rules, in order: match(name) is true when name matches any of
        the rule's glob patterns (fnmatchcase's, as one regular expression)."""
        if self._rules is None:
            self._rules = [(re.compile("|".join(fnmatch.translate(n) for n in r["names"])).match, r["axes"])
                           for r in self.rules if r["names"]]
        return self._rules

    def _find_axes(self, op, name, ndim):
        if name.startswith("full."):  # a pretrained case's full document: the tensor of the same name
            name = name[len("full."):]
        own = self.ops.get(op, {}).get("axes", {})
        candidates = [own[name]] if name in own else []
        # a key without a glob character matches only itself, the exact entry above: it is not
        # compiled into a pattern (118 of them cost 0.07 s of a run's 1 s of runner CPU)
        candidates += [v for k, v in own.items() if k != name and _GLOB.search(k) and fnmatch.fnmatchcase(name, k)]
        candidates += [axes for matches, axes in self._rule_patterns() if matches(name)]
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

    def depth(self, op):
        """0 for an op that builds on no other, else 1 + the greatest depth of the ops it uses."""
        return self._depth(op, ())

    def _depth(self, op, seen):
        if op in seen:
            return 0  # a cycle (refused by the tests): stop
        direct = self.ops.get(op, {}).get("uses", [])
        return 0 if not direct else 1 + max(self._depth(u, seen + (op,)) for u in direct)


def declarations(suite="attention"):
    """The suite's declarations; empty ones when the file is missing or unreadable (the reports then
    show bare indices; the tests fail on it). Read once per process: a run asks thousands of times
    (about 1 s of the runner's CPU when read at every call, as it is with VERIFY_PLAIN=1)."""
    return _read(suite) if plain() else _read_once(suite)


def _read(suite):
    try:
        return Declarations(json.loads((ROOT / "ops" / f"{suite}.json").read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return Declarations({})


_read_once = functools.lru_cache(maxsize=None)(_read)
