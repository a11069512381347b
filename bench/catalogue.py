"""The case catalogue as the benchmarks read it: its directory named once (CATALOGUE), its cases
read by one function (catalogue_cases), a case found by its id (case), never by its file.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # verify/ of this checkout, when run as a script

from verify.catalogue import load  # noqa: E402
from verify.documents import Schemas  # noqa: E402

CATALOGUE = Path("ops") / "attention"  # the op bundles, whose cases are the catalogue: the one place bench/ names it
SCHEMAS = Path("golden") / "schemas"


def catalogue_cases(root=ROOT):
    """Every case of the catalogue of the checkout at root, each as written ({id, kind, op, seed,
    config, ...}), in the catalogue's order, validated as `verify` validates it."""
    return [c.spec for c in load(root / CATALOGUE, Schemas(root / SCHEMAS))]


def case(case_id, root=ROOT):
    """The catalogue's case `case_id`."""
    for spec in catalogue_cases(root):
        if spec["id"] == case_id:
            return spec
    raise LookupError(f"no case with the id {case_id!r} in the catalogue {root / CATALOGUE}; expected one, as the "
                      "benchmarks name it: fix the id in bench/ (the ids: python -m verify attention --list)")

