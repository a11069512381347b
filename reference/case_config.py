"""Reading a case's configuration, with errors that say what is wrong (twin: caseConfig.ts)."""

import numpy as np


class CaseError(ValueError):
    """A case's configuration is malformed; the message says what was expected and found."""


def get(config, key, default=...):
    """config[key], or default when given; a missing required key is a CaseError."""
    if key in config:
        return config[key]
    if default is ...:
        raise CaseError(f"config needs {key!r}; found keys {sorted(config)}")
    return default


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
