"""The documents' parser (verify/documents.py, parse and parse_bytes: orjson where its reading is
json's to the bit, Python's json behind it) gives, for every text, what it gives with
VERIFY_PLAIN=1 (Python's json alone): the same values with the same types and the same float64
bits, or the same error message. Checked on the texts where the two parsers are known to part, on
generated JSON texts and their byte-level mutations, and on every committed golden."""

import json
import math
import os
import struct
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from verify.documents import DocumentError, parse, parse_bytes


def _canonical(value):
    """A value with its types and float bits spelt out, so == compares them too."""
    if type(value) is float:
        return ("float", struct.pack("<d", value))
    if type(value) in (int, bool, str) or value is None:
        return (type(value).__name__, value)
    if type(value) is list:
        return ("list", tuple(_canonical(v) for v in value))
    if type(value) is dict:
        return ("dict", tuple((k, _canonical(v)) for k, v in value.items()))
    raise AssertionError(f"a parser gave a {type(value).__name__}")


def _outcome(fn, data):
    try:
        return ("value", _canonical(fn(data)))
    except DocumentError as exc:
        return ("error", str(exc))


def _stdlib(fn, data):
    with mock.patch.dict(os.environ, {"VERIFY_PLAIN": "1"}):
        return _outcome(fn, data)


def _same(data):
    fast = _outcome(parse_bytes, data)
    assert fast == _stdlib(parse_bytes, data), data[:200]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return fast
    assert _outcome(parse, text) == _stdlib(parse, text), text[:200]
    return fast


# Where orjson alone would part from json: each must come out as json's.
PARTING = [
    b"NaN", b"[Infinity]", b"[-Infinity]", b"[1.5e308, 1.8e308]", b"-1e400",  # json accepts or refuses (bare constants)
    b"123456789012345678901234567890", b"[18446744073709551616]", b"{\"seed\": -9223372036854775809}",  # beyond 64 bits
    b"[1e19, -1e19, 9.3e18]",  # floats that large go to json too (orjson's big integers look like them)
    b"\"\\ud800\"", b"[\"\\udfff x\"]",  # lone surrogate escapes: json keeps them
    b"[" * 65 + b"]" * 65, b"[" * 2000 + b"]" * 2000, b"{\"a\": " * 70 + b"1" + b"}" * 70,  # deeper than FAST_DEPTH
    b"\xef\xbb\xbf{}", b"\"\xff\"", b"\"\xed\xa0\x80\"", b"[1]\r\n[2]", b"", b"[1,]", b"{\"a\" 1}",
    b"{\"a\": 1, \"a\": 2}", b"[{\"k\": {\"a:\": \":\", \"a:\": 1}}]",  # a key named twice: json refuses it
    b" \r\n\t{\"k\": [true, false, null, \"\\u00e9\\n\"]} ", b"{\"o\\u0075t\": 1, \"out\": 2}",  # an escape: json decides
]
AGREEING = [
    b"[" * 64 + b"]" * 64, b"[-0, -0.0, 0e0, 5e-324, 2.4703282292062327e-324, 2.2250738585072011e-308]",
    b"{\"a:b\": \"c:d\", \"e\": [\":\", 1]}", b"[9223372036854775807, -9223372036854775808, 18446744073709551615]",
    b"[9.2e18, -9.2e18, 1e-320, 0.1, 1e16, 12345678901234567890e-5]",
]


@pytest.mark.parametrize("data", PARTING + AGREEING, ids=lambda d: repr(d[:24]))
def test_the_parser_gives_jsons_result(data):
    _same(data)


_numbers = st.one_of(
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=-1e-300, max_value=1e-300, allow_nan=False),
)
_values = st.recursive(
    st.none() | st.booleans() | _numbers | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=5), inner, max_size=5),
    max_leaves=40,
)
# Float literals as engines and people write them: digits and exponents of every length.
_literal = st.builds(
    lambda sign, whole, frac, exp: f"{sign}{whole}{'.' + frac if frac else ''}{'e' + str(exp) if exp is not None else ''}",
    st.sampled_from(["", "-"]), st.from_regex(r"\A(0|[1-9][0-9]{0,24})\Z"), st.from_regex(r"\A[0-9]{0,30}\Z"),
    st.none() | st.integers(min_value=-400, max_value=400),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_values, indent=st.sampled_from([None, 0, 2]), ascii_only=st.booleans())
def test_generated_documents(value, indent, ascii_only):
    _same(json.dumps(value, indent=indent, ensure_ascii=ascii_only).encode("utf-8"))


@settings(max_examples=400, deadline=None)
@given(literals=st.lists(_literal, min_size=1, max_size=12))
def test_generated_number_literals(literals):
    _same(("[" + ", ".join(literals) + "]").encode())


@settings(max_examples=400, deadline=None)
@given(value=_values, edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255),
                                               st.sampled_from(["insert", "replace", "delete"])), min_size=1, max_size=3))
def test_mutated_documents(value, edits):
    data = bytearray(json.dumps({"outputs": value, "case": {"seed": 3}}).encode())
    for at, byte, how in edits:
        at %= len(data) + 1
        if how == "insert":
            data[at:at] = bytes([byte])
        elif at < len(data):
            data[at:at + 1] = b"" if how == "delete" else bytes([byte])
    _same(bytes(data))


def test_every_golden_reads_as_json_reads_it(repo_root):
    paths = sorted((repo_root / "golden").rglob("*.json"))
    assert len(paths) > 200
    for path in paths:
        assert _same(path.read_bytes())[0] == "value", path


def test_a_float_beyond_the_fast_range_still_reads_exactly():
    # 2**63 exactly, as an integer and as a float: json keeps the first an int
    value = parse_bytes(b"[9223372036854775808, 9223372036854775808.0, 1e300]")
    assert [type(v) for v in value] == [int, float, float] and value[0] == 2 ** 63 and math.isclose(value[2], 1e300)
