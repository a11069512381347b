"""Reading a golden-layout document (verify/decoded.py): golden(data, schemas) is exactly the
strict parse, the schema check and the decoding of every tensor, with nothing kept between runs
(the memo of decoded documents is gone: docs/runner.md, "The reference cache"). It gives back every
tensor's dtype, shape, order and float64 bits (NaN, infinities, -0.0, empty and 0-d tensors
included) and the document's other fields; an invalid document fails with its DocumentError."""

import json
from pathlib import Path

import numpy as np
import pytest

from verify import decoded
from verify.documents import DocumentError, Schemas, decode_tensors, parse_bytes

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "golden" / "schemas"
GOLDENS = sorted((ROOT / "golden" / "attention" / "reference").glob("*.json"))
PARTS = ("inputs", "outputs")


@pytest.fixture(scope="module")
def schemas():
    return Schemas(SCHEMAS)


def _by_hand(data, schemas=None):
    doc = parse_bytes(data)
    if schemas is not None:
        schemas.check("golden", doc)
    return doc, decode_tensors(doc)


def _same(found, expected):
    """The same tensors (names in order, dtype, shape, every bit) and the same document."""
    (doc, tensors), (want_doc, want) = found, expected
    for part in PARTS:
        assert list(tensors[part]) == list(want[part])
        for name, t in tensors[part].items():
            w = want[part][name]
            assert (t.dtype, t.values.shape, t.values.dtype) == (w.dtype, w.values.shape, w.values.dtype), name
            assert t.values.tobytes() == w.values.tobytes(), f"{part}.{name}: other bits"
    assert json.dumps(doc, sort_keys=True) == json.dumps(want_doc, sort_keys=True)


def _document(tensors):
    base = json.loads(GOLDENS[0].read_text())
    base["inputs"], base["outputs"] = {}, tensors
    return json.dumps(base).encode()


EDGES = {
    "nonfinite": {"dtype": "float64", "shape": [5], "data": ["NaN", "Infinity", "-Infinity", -0.0, 5e-324]},
    "empty": {"dtype": "float64", "shape": [0, 3], "data": []},
    "scalar": {"dtype": "float64", "shape": [], "data": [1.5]},
    "tokens": {"dtype": "int64", "shape": [2, 2], "data": [0, -3, 9007199254740992, 7]},
}


@pytest.mark.parametrize("path", GOLDENS[::7], ids=lambda p: p.stem)
def test_golden_is_the_parse_the_check_and_the_decode(path, schemas):
    data = path.read_bytes()
    _same(decoded.golden(data, schemas), _by_hand(data, schemas))
    _same(decoded.golden(data), _by_hand(data))


def test_the_edges_of_float64_and_int64_come_back_bit_for_bit(schemas):
    data = _document(EDGES)
    found = decoded.golden(data, schemas)
    _same(found, _by_hand(data, schemas))
    values = found[1]["outputs"]["nonfinite"].values
    assert np.isnan(values[0]) and np.signbit(values[3]) and values[4] == 5e-324


def test_every_read_decodes_the_bytes_it_is_given(schemas):
    """Two reads of the same bytes, then of bytes one digit apart: each answer is its own bytes'."""
    data = GOLDENS[3].read_bytes()
    first, again = decoded.golden(data, schemas), decoded.golden(data, schemas)
    _same(again, first)
    start = data.index(b'"data"', data.index(b'"outputs"'))
    at = next(i for i in range(start, len(data)) if data[i:i + 1].isdigit())  # the first output's first value
    changed = data[:at] + (b"1" if data[at:at + 1] != b"1" else b"2") + data[at + 1:]
    found = decoded.golden(changed, schemas)
    _same(found, _by_hand(changed, schemas))
    name = next(iter(found[1]["outputs"]))
    assert found[1]["outputs"][name].values.tobytes() != first[1]["outputs"][name].values.tobytes()


@pytest.mark.parametrize("text", [b'{"inputs": {}, "outputs": NaN}', b"[1, 2", b"{}"])
def test_an_invalid_document_fails_with_its_document_error(text, schemas):
    with pytest.raises(DocumentError) as plain:
        _by_hand(text, schemas)
    with pytest.raises(DocumentError) as through:
        decoded.golden(text, schemas)
    assert str(through.value) == str(plain.value)


def test_the_schema_check_is_made_when_schemas_are_given(schemas):
    doc = json.loads(GOLDENS[2].read_bytes())
    doc["unexpected"] = 1  # decodes, but golden.schema.json allows no such field
    data = json.dumps(doc).encode()
    decoded.golden(data)  # a read without the check (a training state)
    with pytest.raises(DocumentError, match="unexpected"):
        decoded.golden(data, schemas)


def test_a_pinned_file_rewritten_in_place_is_found_at_the_next_lookup(tmp_path):
    """verify/models.py hashes a model's files at every lookup (nothing remembered): a file
    rewritten with the same size and its modification time put back is found."""
    import hashlib
    import os

    from verify import models

    data = bytes(range(256)) * 64
    (tmp_path / "model").mkdir()
    path = tmp_path / "model" / "model.safetensors"
    path.write_bytes(data)
    source = models.Source(model="fake", package="fake", version="0", module="fake", wheel="fake.whl", wheel_size=0,
                           wheel_sha256="", files={"model.safetensors": (len(data), hashlib.sha256(data).hexdigest())})
    assert models.problem(tmp_path / "model", source) is None
    before = path.stat()
    path.write_bytes(data[::-1])  # the same size, other bytes, and the modification time put back
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert "SHA-256 is not the pinned one" in models.problem(tmp_path / "model", source)


def test_the_non_finite_names_decode_to_their_values_and_a_number_beyond_float64_is_refused():
    """"NaN", "Infinity" and "-Infinity" are the only way a document writes a non-finite float64:
    each decodes to the value it names (Python's own bits), and a number that became infinite
    when parsed (1e999 through a lenient parser) is refused, naming its index."""
    from verify.documents import decode_tensor
    t = decode_tensor({"dtype": "float64", "shape": [4], "data": ["NaN", 1.5, "-Infinity", "Infinity"]}, "x")
    want = np.array([float("nan"), 1.5, float("-inf"), float("inf")], dtype=np.float64)
    assert t.values.tobytes() == want.tobytes()
    with pytest.raises(DocumentError, match=r"at x: data\[1\] is inf, beyond the range of float64"):
        decode_tensor({"dtype": "float64", "shape": [2], "data": [0.0, json.loads("1e999")]}, "x")
