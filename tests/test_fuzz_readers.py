"""Property-based tests of the runner's readers (Hypothesis; profiles in tests/conftest.py): the
catalogue reader, the golden reader, the protocol reader (status lines) and the reader of an
engine's documents. Whatever bytes come in, each either accepts what it promises to accept or
refuses with its own error, one clean line; never another exception, never a hang."""

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, strategies as st

from verify import catalogue, engines, verdict
from verify.catalogue import Case
from verify.documents import DocumentError, Schemas, decode_tensors, parse_bytes
from verify.errors import InputError
from verify.text import is_clean

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = Schemas(ROOT / "golden" / "schemas")
GOLDEN = (ROOT / "golden" / "attention" / "reference" / "masked_softmax.lens_1d.json").read_text()
CASE = {"id": "masked_softmax.x", "kind": "forward", "op": "masked_softmax", "seed": 1, "config": {"shape": [2, 3, 4]}}

HOSTILE_TEXT = st.sampled_from(["", " ", "\x1b[31m", "\x00", "\n", "\r", "\ud800", "\ufffe", "\u202e", "../x",
                                ".full", ".states", ".replay", "NaN", "Infinity", "1e400", "é", "a" * 201])
TEXT = st.one_of(st.text(st.characters(exclude_categories=()), max_size=12), HOSTILE_TEXT)
NUMBERS = st.one_of(st.integers(min_value=-(2 ** 70), max_value=2 ** 70), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0, -0.0, 5e-324, 2 ** 53, 2 ** 63, 100_000, 100_001, 65536, 1 << 20]))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(TEXT, inner, max_size=4)), max_leaves=12)


def _dumps(value):
    """JSON text; an infinity as 1e400 (which parses as one), NaN as Python writes it (bare NaN)."""
    return json.dumps(value).replace("Infinity", "1e400")


@st.composite
def mutated_cases(draw):
    """A valid case with a few of its fields replaced, added or removed."""
    case = json.loads(json.dumps(CASE))
    for _ in range(draw(st.integers(0, 3))):
        target = draw(st.sampled_from(["top", "config"]))
        where = case if target == "top" or not isinstance(case.get("config"), dict) else case["config"]
        key = draw(st.one_of(st.sampled_from(["id", "kind", "op", "seed", "config", "shape", "x_shape", "lead", "std",
                                              "expect", "B"]), TEXT))
        action = draw(st.sampled_from(["set", "drop", "shape"]))
        if action == "drop":
            where.pop(key, None)
        elif action == "shape":
            where[key] = draw(st.lists(st.integers(0, 2000), min_size=1, max_size=4))
        else:
            where[key] = draw(JSON)
    return case


@st.composite
def catalogue_files(draw):
    """The bytes of one to three catalogue files: mutated valid catalogues (several cases, ids that
    may collide), any JSON value, or any bytes."""
    files = []
    for _ in range(draw(st.integers(1, 3))):
        form = draw(st.sampled_from(["cases", "cases", "json", "bytes"]))
        if form == "cases":
            cases = draw(st.lists(mutated_cases(), min_size=1, max_size=4))
            for c in cases:  # ids built from one another: collisions, case folds, reserved suffixes
                if isinstance(c.get("id"), str) and draw(st.booleans()):
                    c["id"] = draw(st.sampled_from(["masked_softmax.x", "Masked_softmax.x", "masked_softmax.x.full",
                                                    "masked_softmax.x.states", "masked_softmax.x.replay", "m.y"]))
            files.append(_dumps({"cases": cases}).encode("utf-8", "surrogatepass"))
        elif form == "json":
            files.append(_dumps(draw(JSON)).encode("utf-8", "surrogatepass"))
        else:
            files.append(draw(st.binary(max_size=200)))
    return files


@given(catalogue_files())
@example([_dumps({"cases": [CASE, dict(CASE, id="masked_softmax.x.full")]}).encode()])
@example([b"[" * 50000])
def test_the_catalogue_reader_accepts_only_a_valid_catalogue(files):
    with tempfile.TemporaryDirectory(prefix="fuzz-catalogue-") as d:
        for i, data in enumerate(files):
            Path(d, f"f{i}.json").write_bytes(data)
        try:
            cases = catalogue.load(d, SCHEMAS)
        except InputError as exc:
            message = str(exc)
            assert "\n" not in message and is_clean(message), repr(message)
            return
    ids = [c.id for c in cases]
    assert len(set(i.lower() for i in ids)) == len(ids)
    for c in cases:
        SCHEMAS.check("catalogue", {"cases": [c.spec]})
        assert catalogue.non_finite(c.spec) is None and catalogue.size_problem(c.spec) is None
        assert not any(c.id.endswith(s) and c.id[: -len(s)] in ids for s in catalogue.RESERVED_SUFFIXES)


@st.composite
def golden_bytes(draw):
    """A real golden, mutated in its structure (values of any JSON type anywhere) or its bytes."""
    doc = json.loads(GOLDEN)
    form = draw(st.sampled_from(["value", "data", "bytes", "shape"]))
    if form == "bytes":
        data = bytearray(GOLDEN.encode())
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(data) - 1))
            data[i:i + draw(st.integers(0, 3))] = draw(st.binary(max_size=3))
        return bytes(data)
    part = draw(st.sampled_from(["inputs", "outputs"]))
    name = draw(st.sampled_from(sorted(doc[part])))
    tensor = doc[part][name]
    if form == "data" and tensor["data"]:
        tensor["data"][draw(st.integers(0, len(tensor["data"]) - 1))] = draw(st.one_of(SCALARS, st.sampled_from(
            ["NaN", "Infinity", "-Infinity", "nan", 1e308, -5e-324])))
    elif form == "shape":
        tensor["shape"] = draw(st.lists(st.integers(-1, 2 ** 40), max_size=3))
    else:
        key = draw(st.sampled_from(["schema_version", "engine", "generator", "case", "inputs", "outputs", "digests",
                                    "dtype", "shape", "data", "extra"]))
        (doc if key not in ("dtype", "shape", "data") else tensor)[key] = draw(JSON)
    return _dumps(doc).encode("utf-8", "surrogatepass")


@given(golden_bytes())
@example(GOLDEN.encode().replace(b'"data": [1.', b'"data": [1e400, 1.', 1))
def test_the_golden_reader_accepts_only_a_valid_golden(data):
    try:
        doc = parse_bytes(data)
        SCHEMAS.check("golden", doc)
        tensors = decode_tensors(doc)
    except DocumentError as exc:
        assert "\n" not in str(exc)
        return
    for part in ("inputs", "outputs"):
        for name, t in tensors[part].items():
            raw = doc[part][name]
            assert t.values.dtype == np.float64 and t.shape == tuple(raw["shape"])
            strings = np.array([isinstance(v, str) for v in raw["data"]], dtype=bool).reshape(t.shape)
            assert np.isfinite(t.values[~strings]).all()  # a number is finite; only the strings are not


STATUS = st.fixed_dictionaries({"id": st.one_of(st.sampled_from(["a", "b"]), TEXT), "ok": st.one_of(st.booleans(), SCALARS)},
                               optional={"seconds": NUMBERS, "error": SCALARS})


@st.composite
def stdout_bytes(draw):
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        form = draw(st.sampled_from(["status", "status", "json", "bytes", "blank"]))
        if form == "status":
            lines.append(_dumps(draw(STATUS)).encode("utf-8", "surrogatepass"))
        elif form == "json":
            lines.append(_dumps(draw(JSON)).encode("utf-8", "surrogatepass"))
        elif form == "blank":
            lines.append(draw(st.sampled_from([b"", b" ", b"\t", b"\r"])))
        else:
            lines.append(draw(st.binary(max_size=30)).replace(b"\n", b""))
    return b"\n".join(lines) + draw(st.sampled_from([b"", b"\n"]))


def _read(data, cuts, max_line=engines.MAX_LINE, max_bytes=engines.MAX_STDOUT):
    reader = engines.StatusReader("port", ["a", "b"], max_line=max_line, max_bytes=max_bytes)
    bounds = sorted(set([0, len(data)] + [c % (len(data) + 1) for c in cuts]))
    try:
        for lo, hi in zip(bounds, bounds[1:]):
            reader.feed(data[lo:hi])
        reader.close()
    except engines.ProtocolError as exc:
        return "error", str(exc), reader.statuses
    return "ok", None, reader.statuses


@given(stdout_bytes(), st.lists(st.integers(0, 10 ** 6), max_size=6), st.lists(st.integers(0, 10 ** 6), max_size=6))
@example(b"\n" * 100, [], [3])
def test_the_protocol_reader_does_not_depend_on_how_stdout_is_cut(data, cuts, other_cuts):
    first = _read(data, cuts)
    assert first == _read(data, other_cuts)
    outcome, message, statuses = first
    if outcome == "error":
        assert "\n" not in message and is_clean(message), repr(message)
    else:  # every line was a status line of a case it was sent
        lines = [l for l in data.split(b"\n")]
        if lines and lines[-1] == b"":
            lines.pop()
        assert len(lines) >= len(statuses)
        for s in statuses.values():
            assert s["id"] in ("a", "b") and isinstance(s["ok"], bool)
            assert "seconds" not in s or (isinstance(s["seconds"], (int, float)) and 0 <= s["seconds"] < float("inf"))


@given(stdout_bytes(), st.integers(1, 200), st.integers(1, 400))
def test_the_protocol_reader_keeps_its_bounds(data, max_line, max_bytes):
    outcome, message, _ = _read(data, [7, 19], max_line=max_line, max_bytes=max_bytes)
    longest = max((len(l) for l in data.split(b"\n")), default=0)
    if len(data) > max_bytes or longest > max_line:
        assert outcome == "error"


@given(st.one_of(golden_bytes(), st.binary(max_size=300)), st.one_of(STATUS, st.none()))
def test_reading_an_engines_document_never_raises(data, status):
    case = Case(spec=json.loads(GOLDEN)["case"], file=Path("f.json"))
    with tempfile.TemporaryDirectory(prefix="fuzz-doc-") as d:
        Path(d, f"{case.id}.json").write_bytes(data)
        statuses = {} if status is None else {case.id: dict(status, id=case.id) if isinstance(status.get("ok"), bool)
                                              else {"id": case.id, "ok": True}}
        run = engines.EngineRun(engine=engines.Engine("port", ["x"], Path(d)), out_dir=Path(d), statuses=statuses)
        fresh = verdict.Reader(SCHEMAS).fresh(run, case, "port")
    assert (fresh.error is None) == (fresh.doc is not None)
    if fresh.doc is not None:
        assert data.replace(b"\r\n", b"\n") == fresh.bytes.replace(b"\r\n", b"\n")


def test_the_fuzzing_profile_is_the_one_asked_for():
    from hypothesis import settings
    assert settings().max_examples == {"fast": 40, "long": 2000}[os.environ.get("HYPOTHESIS_PROFILE", "fast")]
