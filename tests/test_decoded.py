"""The memo of decoded documents (verify/decoded.py, docs/runner.md "The document memo").

What it must never do is answer for bytes it has not seen: a document changed by one digit is
decoded afresh, a damaged entry is a miss, an entry kept without the schema check does not answer
a read that checks, an invalid document is never kept and fails with the message it fails with
without the memo. What it must do is give back exactly what the text decodes to: every tensor's
dtype, shape, order and float64 bits (NaN, infinities, -0.0, empty and 0-d tensors included) and
the document's other fields. The end-to-end side (a wrong port fails and a faithful one passes on
a warm memo) is in tests/test_reference_cache.py."""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from verify import decoded
from verify.documents import DocumentError, Schemas

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "golden" / "schemas"
GOLDENS = sorted((ROOT / "golden" / "attention" / "reference").glob("*.json"))


@pytest.fixture(scope="module")
def schemas():
    return Schemas(SCHEMAS)


@pytest.fixture
def memo(tmp_path):
    return decoded.Memo(tmp_path / "memo", SCHEMAS)


def _plain(data, schemas=None):
    with decoded.active(None):
        return decoded.golden(data, schemas)


def _through(memo, data, schemas=None):
    with decoded.active(memo):
        return decoded.golden(data, schemas)


def _same(found, expected):
    """The same tensors (names in order, dtype, shape, every bit) and the same document but its data."""
    (doc, tensors), (want_doc, want) = found, expected
    for part in decoded.PARTS:
        assert list(tensors[part]) == list(want[part])
        for name, t in tensors[part].items():
            w = want[part][name]
            assert (t.dtype, t.values.shape, t.values.dtype) == (w.dtype, w.values.shape, w.values.dtype), name
            assert t.values.tobytes() == w.values.tobytes(), f"{part}.{name}: other bits"
            assert t.values.flags.writeable
    skeleton = {k: v for k, v in want_doc.items() if k not in decoded.PARTS}
    assert {k: v for k, v in doc.items() if k not in decoded.PARTS} == skeleton
    assert json.dumps(doc["case"], sort_keys=True) == json.dumps(want_doc["case"], sort_keys=True)  # types too
    for part in decoded.PARTS:  # the tensors' bodies but their data (a kept document holds no data)
        bodies = [{n: {k: v for k, v in b.items() if k != "data"} for n, b in d[part].items()} for d in (doc, want_doc)]
        assert bodies[0] == bodies[1]


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
def test_a_kept_document_is_what_its_text_decodes_to(path, memo, schemas):
    data = path.read_bytes()
    expected = _plain(data, schemas)
    first = _through(memo, data, schemas)
    assert (memo.decoded, memo.hits, memo.stored) == (1, 0, 1)
    _same(first, expected)
    again = _through(memo, data, schemas)
    assert (memo.decoded, memo.hits) == (1, 1)
    _same(again, expected)


def test_the_edges_of_float64_and_int64_come_back_bit_for_bit(memo, schemas):
    data = _document(EDGES)
    _through(memo, data, schemas)
    found = _through(memo, data, schemas)
    assert memo.hits == 1
    _same(found, _plain(data, schemas))
    assert np.isnan(found[1]["outputs"]["nonfinite"].values[0]) and np.signbit(found[1]["outputs"]["nonfinite"].values[3])


def test_one_changed_digit_is_decoded_afresh(memo, schemas):
    data = GOLDENS[3].read_bytes()
    _through(memo, data, schemas)
    start = data.index(b'"data"', data.index(b'"outputs"'))
    at = next(i for i in range(start, len(data)) if data[i:i + 1].isdigit())  # the first output's first value
    changed = data[:at] + (b"1" if data[at:at + 1] != b"1" else b"2") + data[at + 1:]
    found = _through(memo, changed, schemas)
    assert (memo.hits, memo.decoded) == (0, 2)
    _same(found, _plain(changed, schemas))
    name = next(iter(found[1]["outputs"]))
    assert found[1]["outputs"][name].values.tobytes() != _plain(data, schemas)[1]["outputs"][name].values.tobytes()


def test_a_damaged_entry_is_a_miss_decoded_afresh_and_replaced(memo, schemas):
    data = GOLDENS[5].read_bytes()
    _through(memo, data, schemas)
    entry, = memo.dir.glob("*/*.bin")
    raw = bytearray(entry.read_bytes())
    raw[-40] ^= 1  # one bit of the last value
    entry.write_bytes(bytes(raw))
    found = _through(memo, data, schemas)
    assert (memo.hits, memo.damaged, memo.decoded) == (0, 1, 2) and "SHA-256" in memo.notes[0]
    _same(found, _plain(data, schemas))
    entry.write_bytes(b"short")  # truncated: a miss too
    _same(_through(memo, data, schemas), _plain(data, schemas))
    assert memo.damaged == 2
    _through(memo, data, schemas)
    assert memo.hits == 1  # the damaged entry was written again, whole


@pytest.mark.parametrize("text", [b'{"inputs": {}, "outputs": NaN}', b"[1, 2", b"{}"])
def test_an_invalid_document_fails_as_without_the_memo_and_is_never_kept(text, memo, schemas):
    with pytest.raises(DocumentError) as plain:
        _plain(text, schemas)
    for _ in range(2):
        with pytest.raises(DocumentError) as through:
            _through(memo, text, schemas)
        assert str(through.value) == str(plain.value)
    assert memo.stored == 0 and not list(memo.root.rglob("*.bin"))


def test_an_entry_kept_unchecked_does_not_answer_a_checked_read(memo, schemas):
    doc = json.loads(GOLDENS[2].read_bytes())
    doc["unexpected"] = 1  # decodes, but golden.schema.json allows no such field
    data = json.dumps(doc).encode()
    _through(memo, data)  # a read without the check (a training state) keeps it unchecked
    assert memo.stored == 1
    with pytest.raises(DocumentError, match="unexpected"):
        _through(memo, data, schemas)


@pytest.mark.parametrize("schema", ["golden", "catalogue"])
def test_the_namespace_follows_every_schema(tmp_path, schema):
    other = tmp_path / "schemas"
    shutil.copytree(SCHEMAS, other)
    assert decoded.namespace(other) == decoded.namespace(SCHEMAS)
    doc = json.loads((other / f"{schema}.schema.json").read_text())
    doc["description"] = doc.get("description", "") + " (edited)"
    (other / f"{schema}.schema.json").write_text(json.dumps(doc))
    assert decoded.namespace(other) != decoded.namespace(SCHEMAS)


def test_a_catalogue_file_seen_valid_is_not_checked_again_and_a_changed_one_is(memo, schemas):
    data = (ROOT / "cases" / "attention" / "forward_attention.json").read_bytes()
    with decoded.active(memo):
        decoded.check(schemas, "catalogue", data, json.loads(data))
        assert (memo.hits, memo.decoded) == (0, 1)
        decoded.check(schemas, "catalogue", data, json.loads(data))
        assert (memo.hits, memo.decoded) == (1, 1)
        broken = json.loads(data)
        broken["cases"][0]["seed"] = "seven"
        text = json.dumps(broken).encode()
        with pytest.raises(DocumentError, match="seed"):
            decoded.check(schemas, "catalogue", text, broken)
        with pytest.raises(DocumentError, match="seed"):  # never marked valid
            decoded.check(schemas, "catalogue", text, broken)
    assert (memo.hits, memo.decoded) == (1, 3)


def test_trim_removes_the_least_recently_used_entries(memo, schemas):
    for i, path in enumerate(GOLDENS[:6]):
        _through(memo, path.read_bytes(), schemas)
    entries = sorted(memo.dir.glob("*/*.bin"))
    for i, entry in enumerate(entries):
        os.utime(entry, (1_000_000 + i, 1_000_000 + i))  # entries[0] the least recently used
    (memo.dir / "ab").mkdir(exist_ok=True)
    stale = memo.dir / "ab" / ".x.1.deadbeef.tmp"
    stale.write_bytes(b"half")
    os.utime(stale, (1_000_000, 1_000_000))
    sizes = [e.stat().st_size for e in entries]
    memo.trim(limit=sum(sizes) - 1)
    kept = sorted(memo.dir.glob("*/*.bin"))
    assert kept and kept == [e for e in entries if e in kept]
    assert entries[0] not in kept and entries[-1] in kept
    assert sum(e.stat().st_size for e in kept) <= (sum(sizes) - 1) * 3 // 4
    assert not stale.exists()


def test_a_pinned_file_is_hashed_once_and_again_after_any_write(memo, tmp_path, monkeypatch):
    import hashlib
    import time

    from verify import models

    data = bytes(range(256)) * 64
    (tmp_path / "model").mkdir()
    path = tmp_path / "model" / "model.safetensors"
    path.write_bytes(data)
    source = models.Source(model="fake", package="fake", version="0", module="fake", wheel="fake.whl", wheel_size=0,
                           wheel_sha256="", files={"model.safetensors": (len(data), hashlib.sha256(data).hexdigest())})
    hashed = []
    real = models.sha256_file
    monkeypatch.setattr(models, "sha256_file", lambda p: hashed.append(p) or real(p))
    with decoded.active(memo):
        monkeypatch.setattr(models, "_checked", {})
        assert models.problem(tmp_path / "model", source) is None and len(hashed) == 1
        monkeypatch.setattr(models, "_checked", {})  # a later run: a new process
        assert models.problem(tmp_path / "model", source) is None and len(hashed) == 1, "hashed again"
        before = path.stat()
        time.sleep(0.05)
        path.write_bytes(data[::-1])  # the same size, other bytes, and the modification time put back
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        monkeypatch.setattr(models, "_checked", {})
        assert "SHA-256 is not the pinned one" in models.problem(tmp_path / "model", source)
        assert len(hashed) == 2
    monkeypatch.setattr(models, "_checked", {})
    path.write_bytes(data)
    assert models.problem(tmp_path / "model", source) is None and len(hashed) == 3  # no memo: hashed


@pytest.mark.parametrize("value", [b"1e999", b"-1e999", str(2 ** 70).encode()], ids=["inf", "-inf", "2**70"])
def test_a_field_json_would_not_give_back_exactly_is_never_kept(memo, value):
    data = _document(EDGES)
    data = data[:-1] + b', "extra": ' + value + b"}"  # the stdlib's reading: an infinity, an int beyond 64 bits
    expected = _plain(data)
    for _ in range(2):
        found = _through(memo, data)
        assert found[0]["extra"] == expected[0]["extra"] and type(found[0]["extra"]) is type(expected[0]["extra"])
    assert memo.stored == 0 and memo.hits == 0
