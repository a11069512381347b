"""Reading a case's configuration, with errors that say what is wrong (twin: caseConfig.ts)."""

import json
import math
import traceback

import numpy as np


class CaseError(ValueError):
    """A case's configuration is malformed; the message says what was expected and found."""


def error_fields(exc):
    """What a case's status line says of an error: a CaseError's own message; anything else (a bug
    in the engine) by its type and message, with the last frames of its traceback as the trace."""
    if isinstance(exc, CaseError):
        return {"error": str(exc)}
    return {"error": f"{type(exc).__name__}: {exc}", "trace": "".join(traceback.format_exception(exc, limit=4))}


def shown(value):
    """A config value as both engines write it in a message: compact JSON, the non-finite numbers
    as Infinity, -Infinity, NaN (twin: caseConfig.ts shown)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=True)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_numbers(config):
    """Every number anywhere in a config is finite (JSON's 1e400 reads as Infinity in both
    engines); the same rule and message as caseConfig.ts checkNumbers."""
    if not isinstance(config, dict):
        raise CaseError(f"config must be an object, got {shown(config)}")
    for key, value in config.items():
        stack = [(value, key)]
        while stack:
            item, where = stack.pop()
            if isinstance(item, float) and not math.isfinite(item):
                if where == key:
                    raise CaseError(f"config '{key}' must be a finite number, got {shown(item)}")
                raise CaseError(f"config '{key}' must hold finite numbers, got {shown(item)} at {where}")
            if isinstance(item, list):
                stack += [(v, f"{where}[{i}]") for i, v in reversed(list(enumerate(item)))]
            elif isinstance(item, dict):
                stack += [(v, f"{where}.{k}") for k, v in reversed(list(item.items()))]


def get(config, key, default=...):
    """config[key], or default when given; a missing required key is a CaseError. With a number
    as the default, a value given must be a finite number too ("NaN" or true is not one)."""
    if key in config:
        value = config[key]
        if _is_number(default) and not (_is_number(value) and math.isfinite(value)):
            raise CaseError(f"config '{key}' must be a finite number, got {shown(value)}")
        return value
    if default is ...:
        raise CaseError(f"config needs {key!r}; found keys {sorted(config)}")
    return default


def positive_int(config, key, default=...):
    """config[key] as a positive integer (a count, a size, a number of steps); default when the key
    is missing, if given. true is not an integer here, as in the port."""
    value = get(config, key, default)
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        raise CaseError(f"config {key!r} must be a positive integer, got {value!r}")
    return value


def positive_number(config, key):
    """config[key] as a positive number (a learning rate, a clipping threshold), as a float."""
    value = get(config, key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise CaseError(f"config {key!r} must be a positive number, got {value!r}")
    return float(value)


def shape(config, key, rank=None):
    value = get(config, key)
    if not (isinstance(value, list) and all(isinstance(s, int) and s >= 0 for s in value)):
        raise CaseError(f"config {key!r} must be a list of non-negative integers, got {value!r}")
    if rank is not None and len(value) != rank:
        raise CaseError(f"config {key!r} must have {rank} entries, got {value!r}")
    return tuple(value)


def int_array(value, name):
    """An explicit integer list (1-D or nested 2-D) from the config, as int64."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu":
        raise CaseError(f"config {name!r} must hold integers, got {value!r}")
    return arr.astype(np.int64)


def float_array(value, name):
    """An explicit float list (any nesting) from the config, as float64."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise CaseError(f"config {name!r} must be a (nested) list of numbers, got {value!r}") from None


def need(inputs, *names):
    """The named tensors of a case's inputs, in order; a name they lack is a CaseError."""
    missing = [n for n in names if n not in inputs]
    if missing:
        raise CaseError(f"the handed inputs lack [{', '.join(missing)}]; they hold [{', '.join(sorted(inputs))}]")
    return tuple(inputs[n] for n in names)


_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def handed_inputs(value, ident):
    """The tensors a request hands to case `ident` (docs/protocol.md, "Handed inputs"): the `inputs`
    object of a golden document, name -> {dtype, shape, data}, read back exactly as golden.py wrote it."""
    def fail(what):
        raise CaseError(f"the inputs handed to {ident!r} {what}")

    if not isinstance(value, dict):
        fail(f"must be an object of tensors, got {shown(value)}")
    named = {}
    for name, t in value.items():
        shape, data = (t.get("shape"), t.get("data")) if isinstance(t, dict) else (None, None)
        if not (isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape)
                and isinstance(data, list) and len(data) == math.prod(shape)):
            fail(f"hold {name!r} without a shape and as many items as its shape says")
        if t.get("dtype") == "int64":
            if not all(type(v) is int for v in data):
                fail(f"hold {name!r}, int64, with an item that is not an integer")
            named[name] = np.array(data, dtype=np.int64).reshape(shape)
        elif t.get("dtype") == "float64":
            if not all(type(v) in (int, float) or v in _FLOAT_WORDS for v in data):
                fail(f"hold {name!r}, float64, with an item that is neither a number nor NaN, Infinity, -Infinity")
            named[name] = np.array([_FLOAT_WORDS.get(v, v) if isinstance(v, str) else v for v in data],
                                   dtype=np.float64).reshape(shape)
        else:
            fail(f"hold {name!r} of dtype {shown(t.get('dtype'))}; the dtypes are float64 and int64")
    return named


def handed_document(doc, ident):
    """(inputs, parameters or None, position) of the document a request hands to case `ident`
    (docs/protocol.md, "Handed inputs"): {"inputs": tensors by name, "parameters": a gradient
    check's [name, tensor] pairs in order, "position": the generator's counter after the draws};
    a malformed one is a CaseError."""
    if not isinstance(doc, dict):
        raise CaseError(f"the document handed to {ident!r} must be an object, got {shown(doc)}")
    position = doc.get("position")
    if type(position) is not int or not 0 <= position < 2**53:
        raise CaseError(f"the document handed to {ident!r} needs 'position', the generator's counter after "
                        f"the inputs were drawn (an integer >= 0), got {shown(position)}")
    params = doc.get("parameters")
    if params is not None:
        if not (isinstance(params, list) and all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in params)
                and len({p[0] for p in params}) == len(params)):
            raise CaseError(f"the document handed to {ident!r} must list its 'parameters' as [name, tensor] pairs, "
                            "each name once, in the model's order")
        params = handed_inputs(dict(params), ident)
    return handed_inputs(doc.get("inputs"), ident), params, position
