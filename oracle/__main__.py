"""The torch engine's command line (docs/protocol.md), for the runner's arbiter (verify/arbiter.py):

  python -m oracle run     request on stdin; for each forward case named in "inputs_from", the
                           handed inputs in, out_dir/<id>.json (a golden document of engine "torch")
                           out, one status line per case. A case without handed inputs, of another
                           kind, of an op without a twin, or with a dropout mask to draw, is
                           reported ok: false with the reason (oracle/ops.py, refusal).

The maths is PyTorch's (oracle/ops.py); reading the handed document, writing the golden document
and watching the runner are the reference engine's code (they compute nothing)."""

import json
import os
import sys
import time

import torch

from reference.__main__ import exit_with_parent
from reference.core import golden
from reference.core.case_config import error_fields, handed_inputs

from .ops import TWINS, refusal

ENGINE = {"name": "torch", "version": torch.__version__}


def run_case(case, handed_path):
    """The golden document of one case computed by its twin from the handed inputs; ValueError
    with the reason when the case is not arbitrated."""
    why = refusal(case) or (None if case.get("kind") == "forward" else f"a {case.get('kind')} case: not arbitrated")
    if why is None and handed_path is None:
        why = "the request hands no inputs for this case: not arbitrated"
    if why:
        raise ValueError(why)
    with open(handed_path, encoding="utf-8") as fh:
        arrays = handed_inputs(json.load(fh).get("inputs"), case["id"])
    inputs = {name: torch.from_numpy(a) for name, a in arrays.items()}
    with torch.no_grad():
        outputs = TWINS[case["op"]](inputs, case.get("config") or {})
    doc = golden.case_document(case, arrays, {name: t.numpy() for name, t in outputs.items()})
    return dict(doc, engine=dict(ENGINE), generator="none: PyTorch draws nothing, its inputs are handed")


def answer(case, handed_path, out_dir):
    """The status line of one case, its document written: ok, or not with the reason (a refused
    case, or a bug in a twin: said on the case, and the others go on)."""
    start = time.perf_counter()
    try:
        golden.write(os.path.join(out_dir, f"{case['id']}.json"), run_case(case, handed_path))
        said = {"ok": True}
    except Exception as exc:
        said = {"ok": False, **({"error": str(exc)} if isinstance(exc, ValueError) else error_fields(exc))}
    return {"id": case.get("id"), **said, "seconds": time.perf_counter() - start}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["run"]:
        print("usage: python -m oracle run  (a request on stdin, docs/protocol.md)", file=sys.stderr)
        return 2
    exit_with_parent()
    torch.set_num_threads(1)  # a few small cases: threads cost more than they give, and the runner has the cores
    try:
        request = json.load(sys.stdin)
        out_dir, cases, handed = request["out_dir"], request["cases"], request.get("inputs_from", {})
        if not (isinstance(cases, list) and isinstance(handed, dict)):
            raise TypeError("'cases' must be a list and 'inputs_from' an object {id: path}")
    except (ValueError, KeyError, TypeError) as exc:
        print(f"oracle: the request on stdin must be JSON with 'out_dir', 'cases' and 'inputs_from': {exc}",
              file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    for case in cases:
        print(json.dumps(answer(case, handed.get(case.get("id")), out_dir)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
