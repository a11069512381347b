"""The case catalogue: every cases/<suite>/*.json, validated, ids unique, selected by --case."""

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from .documents import DocumentError, read
from .errors import InputError

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


def load(cases_dir, schemas, display=lambda p: p):
    """All cases of the suite in file-name order, then catalogue order. InputError on a missing
    directory, an invalid file or a duplicate id (naming both files)."""
    cases_dir = Path(cases_dir)
    files = sorted(cases_dir.glob("*.json"))
    if not files:
        raise InputError(f"no catalogue files (*.json) in {display(cases_dir)}; add cases there (docs/runner.md)")
    cases, seen = [], {}
    for path in files:
        try:
            document = read(path)
            schemas.check("catalogue", document)
        except DocumentError as exc:
            raise InputError(f"catalogue {display(path)} is malformed: {exc}; fix the file") from None
        for spec in document["cases"]:
            case = Case(spec=spec, file=path)
            if case.id in seen:
                raise InputError(
                    f"duplicate case id '{case.id}' in {display(seen[case.id].file)} and {display(path)}; "
                    "ids must be unique across the suite"
                )
            seen[case.id] = case
            cases.append(case)
    return cases


def matches(case_id, pattern):
    """fnmatch glob on the whole id; a pattern without glob characters matches as a substring."""
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
