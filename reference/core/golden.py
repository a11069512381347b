"""Golden documents: how an engine writes one case's tensors as JSON (twin: port_ts/src/core/golden.ts).

A training case's document also holds "digests": name -> SHA-256 hex (docs/training.md).
Layout (docs/goldens.md): keys sorted, two-space indent, a list of scalars on one line, a
trailing newline. float64 in the shortest round-trip form (Python's repr); NaN and +-Infinity
as the strings "NaN", "Infinity", "-Infinity". Same input, same bytes.
"""

import json
import math
import os

import numpy as np

from .rng import GENERATOR

SCHEMA_VERSION = 1
ENGINE = {"name": "reference", "version": "0.1.0"}


def tensor_doc(arr):
    arr = np.asarray(arr)
    if arr.dtype.kind in "iub":
        return {"dtype": "int64", "shape": list(arr.shape), "data": [int(v) for v in arr.ravel()]}
    arr = arr.astype(np.float64, copy=False)
    return {"dtype": "float64", "shape": list(arr.shape), "data": [float(v) for v in arr.ravel()]}


def case_document(case, inputs, outputs, digests=None):
    """The golden document; `digests` (name -> SHA-256 hex, training cases) only when given."""
    doc = {
        "schema_version": SCHEMA_VERSION,
        "engine": dict(ENGINE),
        "generator": GENERATOR,
        "case": case,
        "inputs": {k: tensor_doc(v) for k, v in inputs.items()},
        "outputs": {k: tensor_doc(v) for k, v in outputs.items()},
    }
    if digests is not None:
        doc["digests"] = {str(k): str(v) for k, v in digests.items()}
    return doc


def _scalar(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return '"NaN"'
        if math.isinf(v):
            return '"Infinity"' if v > 0 else '"-Infinity"'
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    raise TypeError(f"cannot write {type(v).__name__} into a golden")


def _scalars(values):
    """A list of scalars on one line. json writes a long one whose numbers are all finite and whose
    elements are all Python bools, ints, floats, strings or None as _scalar would (repr of a float,
    str of an int, json's string), in C, a fifth faster (a state of 1,000 doubles: 0.90 ms against
    1.13 ms); anything else (a short list, where json's set-up costs more; NaN or an infinity,
    which json refuses here; a NumPy scalar, whose repr differs) goes element by element."""
    if len(values) >= _LONG and set(map(type, values)) <= _PLAIN:
        try:
            return json.dumps(values, allow_nan=False)
        except ValueError:  # a NaN or an infinity: written as strings below
            pass
    return "[" + ", ".join(_scalar(v) for v in values) + "]"


_PLAIN = frozenset((float, int, bool, str, type(None)))
_LONG = 16  # elements from which json's one call is the faster (at 8 about even)


def dumps(value, indent=0):
    """The golden text of value (dicts, lists, numbers, strings)."""
    pad = "  " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}{json.dumps(str(k))}: {dumps(value[k], indent + 1)}" for k in sorted(value)]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(value, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            return _scalars(value)
        items = [pad + dumps(v, indent + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "  " * indent + "]"
    return _scalar(value)


def write(path, doc):
    """Write the document whole or not at all: into a temporary file beside it, then renamed, so a
    reader never sees half a document (the runner reads a training run's states while it runs)."""
    path = os.fspath(path)
    part = f"{path}.part-{os.getpid()}"
    try:
        with open(part, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(dumps(doc) + "\n")
        os.replace(part, path)
    except BaseException:
        try:
            os.remove(part)  # nothing left behind, not even the temporary file
        except OSError:
            pass
        raise
