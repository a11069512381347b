"""Parameter records (twin: port_ts/src/core/params.ts).

A model's parameters are one dict keyed by dotted names (enc.blk0.attn.W_q); a block or a
sub-layer takes its own out of it with sub_params(params, "enc.blk0.") and reads each by its
stripped name with param. add_grads adds the two gradients of a tensor used twice.
"""


def sub_params(params, prefix):
    """The entries of params whose names start with prefix, with the prefix removed."""
    return {name[len(prefix):]: value for name, value in params.items() if name.startswith(prefix)}


def prefixed_params(blocks, prefix):
    """The blocks' gradients under one name each, f"{prefix}{i}.{name}" (the inverse of sub_params),
    block by block in order."""
    return {f"{prefix}{i}.{name}": value for i, block in enumerate(blocks) for name, value in block.items()}


def param(params, name):
    """A parameter by name, or an error that lists what is there."""
    if name not in params:
        raise KeyError(f"params needs {name!r}; found {sorted(params)}")
    return params[name]


def add_grads(a, b):
    """a + b elementwise (the += of a tensor used twice), one rounded add per element."""
    if a.shape != b.shape:
        raise ValueError(f"add_grads: shapes {a.shape} and {b.shape} differ")
    return a + b
