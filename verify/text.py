"""Text from outside the runner (engine output, case ids, golden paths, a saved report) made safe to
show: every renderer and every one-line error passes it through clean(), which writes each
character that could act on a terminal or break a format as a visible escape (\\xHH below U+0100,
\\uHHHH above): C0 and C1 controls, DEL, lone surrogates (no UTF-8 file holds them), the
noncharacters U+FFFE / U+FFFF (not allowed in XML) and the bidirectional controls that reorder what
a reader sees. A backslash stays a backslash: the text is for reading, not for unescaping."""

import re

_OTHERS = "\x7f-\x9f\ud800-\udfff\ufffe\uffff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # DEL, C1, surrogates, bidi
_UNSAFE = re.compile(f"[\x00-\x1f{_OTHERS}]")
_UNSAFE_KEEP_LINES = re.compile(f"[\x00-\x09\x0b-\x1f{_OTHERS}]")


def _escape(match):
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text, keep_newlines=False):
    """str(text) with every unsafe character escaped; keep_newlines leaves \\n as it is (never \\r)."""
    text = text if isinstance(text, str) else str(text)
    pattern = _UNSAFE_KEEP_LINES if keep_newlines else _UNSAFE
    return pattern.sub(_escape, text) if pattern.search(text) else text


def is_clean(text, keep_newlines=False):
    """Whether clean() would leave text as it is."""
    return (_UNSAFE_KEEP_LINES if keep_newlines else _UNSAFE).search(text) is None


_PLAIN = frozenset((int, float, bool, type(None)))


def clean_data(value):
    """A JSON-like value (a report) with every string, keys included, cleaned. What needs no
    change is returned as it is, not copied."""
    if isinstance(value, str):
        return clean(value)  # the very object when nothing changed
    kind = type(value)
    if kind is dict or isinstance(value, dict):
        changed = False
        out = {}
        for k, v in value.items():
            k2 = clean_data(k) if type(k) is str else k
            v2 = v if type(v) in _PLAIN else clean_data(v)
            changed = changed or k2 is not k or v2 is not v
            out[k2] = v2
        return out if changed else value
    if kind is list or kind is tuple or isinstance(value, (list, tuple)):
        if set(map(type, value)) <= _PLAIN:
            return value
        items = [clean_data(v) for v in value]
        if kind is list and all(a is b for a, b in zip(items, value)):
            return value
        return items
    return value
