"""Golden-layout documents as the runner uses them, from their bytes.

Reading a document is a pure function of its bytes: parse them strictly (verify/documents.py,
parse_bytes), check the result against golden.schema.json, decode every tensor into float64
values. Every document is read this way in every run: nothing the runner reads is answered from a
memo of earlier runs (docs/runner.md, "The reference cache": what the runner trusts).
"""

from .documents import decode_tensors, parse_bytes


def golden(data, schemas=None):
    """(doc, tensors) of a golden-layout document's bytes: parsed strictly, checked against
    golden.schema.json when `schemas` is given, every tensor decoded (documents.decode_tensors:
    {"inputs": {name: Tensor}, "outputs": {...}}). DocumentError when it cannot be read."""
    doc = parse_bytes(data)
    if schemas is not None:
        schemas.check("golden", doc)
    return doc, decode_tensors(doc)
