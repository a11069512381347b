"""The documents' parser (verify/documents.py, parse and parse_bytes): JSON read as Python's json
reads it, with the same types and float64 bits, except that it refuses what a document must not
hold (bare NaN / Infinity, a key named twice, a byte order mark, nesting too deep), each with a
one-line error; bytes with CR line ends give the line and column a text-mode read would."""

import json
import struct

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
    raise AssertionError(f"the parser gave a {type(value).__name__}")


def _reads_as_json(data):
    expected = _canonical(json.loads(data))
    assert _canonical(parse_bytes(data)) == expected, data[:200]
    assert _canonical(parse(data.decode("utf-8"))) == expected, data[:200]


@pytest.mark.parametrize("data", [
    b"123456789012345678901234567890", b"[18446744073709551616]", b"{\"seed\": -9223372036854775809}",
    b"[1e19, -1e19, 9.3e18, 1.5e308]", b"\"\\ud800\"", b"[\"\\udfff x\"]", b"[" * 64 + b"]" * 64,
    b"[-0, -0.0, 0e0, 5e-324, 2.4703282292062327e-324, 2.2250738585072011e-308]",
    b"{\"a:b\": \"c:d\", \"e\": [\":\", 1]}", b" \r\n\t{\"k\": [true, false, null, \"\\u00e9\\n\"]} ",
    b"[9223372036854775807, -9223372036854775808, 18446744073709551615, 12345678901234567890e-5]",
], ids=lambda d: repr(d[:24]))
def test_a_document_reads_as_json_reads_it(data):
    _reads_as_json(data)


@pytest.mark.parametrize("data,says", [
    (b"NaN", "bare NaN is not JSON"), (b"[-Infinity]", "bare -Infinity is not JSON"),
    (b"{\"a\": 1, \"a\": 2}", "appears twice in one object"),
    (b"[{\"k\": {\"a:\": \":\", \"a:\": 1}}]", "appears twice in one object"),
    (b"{\"o\\u0075t\": 1, \"out\": 2}", "appears twice in one object"),
    (b"\xef\xbb\xbf{}", "byte order mark"), (b"[" * 2000 + b"]" * 2000, "nested too deeply"),
    (b"[1]\r\n[2]", "(Extra data at line 2, column 1)"), (b"", "not valid JSON"), (b"[1,]", "not valid JSON"),
    (b"\"\xff\"", "cannot read it"),
])
def test_what_a_document_must_not_hold_is_refused_in_one_line(data, says):
    with pytest.raises(DocumentError) as refused:
        parse_bytes(data)
    assert says in str(refused.value) and "\n" not in str(refused.value)


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


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_values, indent=st.sampled_from([None, 0, 2]), ascii_only=st.booleans())
def test_generated_documents_read_as_json_reads_them(value, indent, ascii_only):
    _reads_as_json(json.dumps(value, indent=indent, ensure_ascii=ascii_only).encode("utf-8"))


def test_every_golden_reads_as_json_reads_it(repo_root):
    paths = sorted((repo_root / "golden").rglob("*.json"))
    assert len(paths) > 200
    for path in paths:
        _reads_as_json(path.read_bytes())
