"""Axis names of the tensors the engines write, so a report can say "(batch 1, head 0, query 2,
key 4)" instead of "(1, 0, 2, 4)". Declared once per op in ops/<suite>.json (verify/ops.py); a
tensor with no declaration, or whose number of axes differs from it, is shown with bare indices
(tests/test_ops_declared.py requires one for every tensor of every committed golden)."""

from .ops import declarations


def axis_names(op, name, ndim):
    """The names of the axes of tensor `name` written by `op`, or None when unknown."""
    return declarations().axes(op, name, ndim)


def is_matrix_of_weights(axes):
    """Attention weights: the last two axes are (query, key)."""
    return bool(axes) and len(axes) >= 2 and tuple(axes[-2:]) == ("query", "key")


def label(index, axes=None):
    """(1, 0, 2) or, with axis names, (batch 1, query 0, key 2)."""
    if index is None:
        return "-"
    index = list(index)
    if axes and len(axes) == len(index):
        return "(" + ", ".join(f"{a} {i}" for a, i in zip(axes, index)) + ")"
    return "(" + ", ".join(str(i) for i in index) + ("," if len(index) == 1 else "") + ")"
