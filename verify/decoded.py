"""Golden-layout documents read from their bytes, in every run (never from a memo of earlier runs)."""

from .documents import decode_tensors, parse_bytes


def golden(data, schemas=None):
    """(doc, tensors) of a golden-layout document's bytes: parsed strictly, checked against
    golden.schema.json when `schemas` is given, every tensor decoded (documents.decode_tensors).
    DocumentError when it cannot be read."""
    doc = parse_bytes(data)
    if schemas is not None:
        schemas.check("golden", doc)
    return doc, decode_tensors(doc)
