"""The documents of the request kinds other than "cases" (docs/protocol.md, "Request kinds";
twin: requests.ts). The command line writes each to out_dir/<id>.json and prints its status line,
as for a case.

  encode   one pretrained encoder run on given token ids (verify inspect): a golden-layout
           document whose case is the run as a pretrained case, its inputs the ids, its outputs
             hidden_states  (L + 1, B, T, d)  the embeddings, then each layer's output
             attentions     (L, B, H, T, T)   every head's weights
  export   one training case run from its seed, in the form a site replays (docs/training.md,
           "Export"; verify export): its case, per-step history, what the site shows, the trained
           parameters and the digests that tie it to the goldens

Shapes: L layers, B rows, T tokens, d hidden features, H heads.
"""

import re

from ..core import case_config as cc
from ..core.golden import case_document
from ..core.rng import Generator
from .cases import run_case_with_states
from .cases_pretrained import bert_encoder_case

KINDS = ("cases", "encode", "export")  # "cases" is the default: a request without "kind"
ITEMS = {"cases": "cases", "encode": "inputs", "export": "cases"}  # the request's list of work, per kind
EXPORT_VERSION = 1
HISTORY = ("loss", "grad_norm")  # per-step outputs of a training case: the export's history
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # as a case id: also a file name


def item_id(item):
    """The id of one item of a request: also its file name, so checked as a case id is."""
    ident = item.get("id") if isinstance(item, dict) else None
    if not (isinstance(ident, str) and _ID.match(ident) and len(ident) <= 200):
        raise cc.CaseError(f"each item needs an 'id' of letters, digits, '_', '.', '-' (a file name), got {ident!r}")
    return ident


def encode_case(item):
    """The pretrained case an encode input stands for: {id, kind, op, seed, config}; the mask
    defaults to all ones, the token types to zeros (one sentence, unpadded)."""
    ident = item_id(item)
    model, ids = item.get("model"), item.get("input_ids")
    if not isinstance(model, str):
        raise cc.CaseError(f"encode input {ident!r} needs 'model', the name of a model in the request's assets")
    if not (isinstance(ids, list) and ids and all(isinstance(r, list) for r in ids)):
        raise cc.CaseError(f"encode input {ident!r} needs 'input_ids', a (B, T) list of lists of token ids")
    config = {
        "model": model,
        "input_ids": ids,
        "attention_mask": item.get("attention_mask", [[1] * len(r) for r in ids]),
        "token_type_ids": item.get("token_type_ids", [[0] * len(r) for r in ids]),
    }
    return {"id": ident, "kind": "pretrained", "op": "bert_encoder", "seed": 0, "config": config}


def encode_document(item, assets):
    """The encoder's every hidden state and attention weight on the input's ids (golden layout)."""
    case = encode_case(item)
    inputs, outputs = bert_encoder_case(case["config"], Generator(case["seed"]), assets)  # draws nothing
    kept_inputs = {k: inputs[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    kept_outputs = {k: outputs[k] for k in ("hidden_states", "attentions")}
    return case_document(case, kept_inputs, kept_outputs)


def export_document(case, assets=None):
    """A training case trained from its seed here, as the site replays it: everything to retrain
    it, its history, what it shows, the final parameters and the digests."""
    ident = item_id(case)
    if case.get("kind") != "training":
        raise cc.CaseError(f"export takes training cases; {ident!r} is of kind {case.get('kind')!r}")
    doc, states, _ = run_case_with_states(case, assets)
    steps = case["config"].get("steps")
    final = states.get(steps)
    if final is None:
        raise cc.CaseError(f"{ident!r} wrote no state at its last step {steps!r} (it has {sorted(states)})")
    outputs = doc["outputs"]
    return {
        "export_version": EXPORT_VERSION,
        "id": ident,
        "op": case["op"],
        "seed": case["seed"],
        "config": case["config"],
        "generator": doc["generator"],
        "engine": doc["engine"],
        "steps": steps,
        "history": {name: outputs[name] for name in HISTORY if name in outputs},
        "shown": {name: t for name, t in outputs.items() if name not in HISTORY},
        "parameters": {name[len("param."):]: t for name, t in final["outputs"].items() if name.startswith("param.")},
        "digests": dict(doc.get("digests") or {}, final_state=final.get("digests", {}).get("state")),
    }


def document(kind, item, assets=None):
    """The document of one item of a request of this kind (not "cases": the command line runs those)."""
    if kind == "encode":
        return encode_document(item, assets)
    if kind == "export":
        return export_document(item, assets)
    raise cc.CaseError(f"request kind {kind!r} has no documents here; the kinds are {', '.join(KINDS)}")
