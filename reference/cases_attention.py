"""Forward cases of the attention primitives: inputs from the case's seed, then the outputs
(twin: casesAttention.ts). Each builder draws in the order written and returns
(inputs, outputs) as dicts of named arrays."""

from . import case_config as cc
from .masked_softmax import masked_softmax_forward


def _valid_lens(config):
    value = cc.get(config, "valid_lens", None)
    return None if value is None else cc.int_array(value, "valid_lens")


def masked_softmax_case(config, rng):
    # config: shape [B, Q, K]; mean, std of the scores; valid_lens null | (B,) | (B, Q)
    shape = cc.shape(config, "shape", 3)
    x = rng.normal(shape, cc.get(config, "mean", 0.0), cc.get(config, "std", 1.0))
    lens = _valid_lens(config)
    out, _ = masked_softmax_forward(x, lens)
    inputs = {"x": x} if lens is None else {"x": x, "valid_lens": lens}
    return inputs, {"out": out}


BUILDERS = {
    "masked_softmax": masked_softmax_case,
}
