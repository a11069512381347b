"""Axis names of the tensors the engines write, so a report can say "(batch 1, head 0, query 2,
key 4)" instead of "(1, 0, 2, 4)". Only a presentation aid: a tensor with no entry here, or whose
number of axes differs from the entry's, is shown with bare indices.

Lookup order: the exact (op, tensor name), then (op, "*suffix") patterns, then ("*", ...) rules
that hold for every op (attention weights are (batch, [head,] query, key) everywhere).
"""

import fnmatch

# (op, tensor name or fnmatch pattern) -> axis names, outermost first. Shape legend of the engines:
# B batch, H heads, Tq queries, Tk keys, T steps, D features.
AXES = {
    ("masked_softmax", "x"): {3: ("batch", "query", "key"), 4: ("batch", "head", "query", "key")},
    ("masked_softmax", "out"): {3: ("batch", "query", "key"), 4: ("batch", "head", "query", "key")},
    ("dot_product_attention", "q"): {3: ("batch", "query", "feature"), 4: ("batch", "head", "query", "feature")},
    ("dot_product_attention", "k"): {3: ("batch", "key", "feature"), 4: ("batch", "head", "key", "feature")},
    ("dot_product_attention", "v"): {3: ("batch", "key", "value"), 4: ("batch", "head", "key", "value")},
    ("dot_product_attention", "out"): {3: ("batch", "query", "value"), 4: ("batch", "head", "query", "value")},
    ("additive_attention", "q"): ("batch", "query", "feature"),
    ("additive_attention", "k"): ("batch", "key", "feature"),
    ("additive_attention", "v"): ("batch", "key", "value"),
    ("additive_attention", "out"): ("batch", "query", "value"),
    ("multi_head_attention", "x_q"): ("batch", "query", "feature"),
    ("multi_head_attention", "x_kv"): ("batch", "key", "feature"),
    ("multi_head_attention", "out"): ("batch", "query", "feature"),
    ("encoder_block", "x"): ("batch", "step", "feature"),
    ("encoder_block", "out"): ("batch", "step", "feature"),
    ("decoder_block", "x"): ("batch", "step", "feature"),
    ("decoder_block", "enc_out"): ("batch", "key", "feature"),
    ("decoder_block", "out"): ("batch", "step", "feature"),
    ("transformer", "logits"): ("batch", "step", "vocab"),
    ("transformer", "src"): ("batch", "step"),
    ("transformer", "tgt_in"): ("batch", "step"),
    ("vit", "images"): ("batch", "channel", "row", "column"),
    ("vit", "logits"): ("batch", "class"),
    ("vit_patch_embedding", "images"): ("batch", "channel", "row", "column"),
    ("vit_patch_embedding", "out"): ("batch", "patch", "feature"),
    ("embedding", "tokens"): ("batch", "step"),
    ("embedding", "out"): ("batch", "step", "feature"),
    ("positional_encoding", "x"): ("batch", "step", "feature"),
    ("positional_encoding", "out"): ("batch", "step", "feature"),
    ("sinusoidal_table", "P"): ("step", "feature"),
    ("sinusoidal_table", "P_rows"): ("row", "feature"),
    ("position_similarity", "similarity"): ("step", "step"),
    ("nadaraya_watson", "weights"): ("train", "query"),
    ("nadaraya_watson", "y_hat"): ("query",),
    ("train_alignment", "alignment.weights"): ("query", "key"),
    ("train_alignment", "alignment.checkpoints"): ("checkpoint", "query", "key"),
    ("train_alignment", "alignment.argmax"): ("pair", "query"),
    ("train_reversal", "decode.tokens"): ("sequence", "position"),
    ("train_reversal", "decode.margin"): ("sequence", "position"),
    ("train_reversal", "lab.tokens"): ("position",),
    ("train_reversal", "lab.margin"): ("position",),
    ("train_reversal", "lab.cross_weights"): ("head", "query", "key"),
    ("train_vit", "cls_attention"): ("image", "head", "key"),
    ("*", "loss"): ("step",),
    ("*", "grad_norm"): ("step",),
    ("*", "*weights"): {3: ("batch", "query", "key"), 4: ("batch", "head", "query", "key")},
}


def axis_names(op, name, ndim):
    """The names of the axes of tensor `name` written by `op`, or None when unknown."""
    for key_op, key_name in ((op, name), (op, None), ("*", None)):
        for (o, n), names in AXES.items():
            if o != key_op:
                continue
            if key_name is not None and n != key_name:
                continue
            if key_name is None and not fnmatch.fnmatchcase(name, n):
                continue
            if isinstance(names, dict):
                names = names.get(ndim)
            if names is not None and len(names) == ndim:
                return list(names)
            if key_name is not None:
                break  # an exact entry that does not fit: try the patterns
    return None


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
