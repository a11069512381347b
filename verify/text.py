"""Text from outside the runner (an engine's status lines and stderr, case ids, golden paths, a saved
report) made safe to show: every renderer (terminal, JSON, HTML, JUnit XML) and every one-line
error passes it through clean() first.

clean() replaces each character that could act on a terminal or break a format by a visible
escape, so nothing is lost and nothing acts: C0 and C1 control characters (ESC of an ANSI
sequence, NUL, BEL, backspace, carriage return, and newline and tab unless kept), DEL, lone
surrogates (which no UTF-8 file can hold), the Unicode noncharacters U+FFFE / U+FFFF (not allowed
in XML), and the bidirectional controls that reorder what a reader sees (U+061C, U+200E/F,
U+202A-U+202E, U+2066-U+2069). A character is written \\xHH when below U+0100 and \\uHHHH
otherwise; a backslash stays a backslash (the text is for reading, not for unescaping).
"""

import re

import orjson

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff" + _BIDI + "]")
_UNSAFE_KEEP_LINES = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff" + _BIDI + "]")


def _escape(match):
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text, keep_newlines=False):
    """text (any object: str() of it) with every unsafe character escaped (module docstring).
    keep_newlines: leave \\n as it is (a multi-line explanation); a \\r is always escaped."""
    text = text if isinstance(text, str) else str(text)
    pattern = _UNSAFE_KEEP_LINES if keep_newlines else _UNSAFE
    return pattern.sub(_escape, text) if pattern.search(text) else text


def is_clean(text, keep_newlines=False):
    """Whether clean() would leave text as it is."""
    return (_UNSAFE_KEEP_LINES if keep_newlines else _UNSAFE).search(text) is None


_PLAIN = frozenset((int, float, bool, type(None)))


# What json.dumps (ensure_ascii, its default) writes for a character that clean() escapes: a C0
# control as \b \f \n \r \t or \u00XX, and every other unsafe character as \uXXXX (lower-case
# hex, as json writes it). Every backslash of JSON text starts an escape, so the escapes are
# found left to right with an escaped backslash (\\) taken as a whole. A character beyond U+FFFF
# is written as a surrogate pair, which this also matches: a false alarm only, never a miss.
_JSON_ESCAPE = re.compile(r"\\\\|\\(?:[bfnrt]|u(?:00[01][0-9a-f]|007f|008[0-9a-f]|009[0-9a-f]"
                          r"|d[89a-f][0-9a-f]{2}|fff[ef]|061c|200[ef]|202[a-e]|206[6-9]))")


def json_text_is_clean(text):
    """Whether no string of the JSON text `text`, as json.dumps writes it with ensure_ascii, holds
    a character clean() would escape (keys included)."""
    if "\\" not in text:  # the common report: no escape at all
        return True
    return all(m.group() == "\\\\" for m in _JSON_ESCAPE.finditer(text))


def clean_data(value):
    """A JSON-like value (a report) with every string, keys included, cleaned. What needs no
    change is returned as it is, not copied; each distinct string is looked at once. The common
    case, nothing to change, is told by writing the value as JSON (orjson, in C) and looking at
    the text once (_written_clean); only a value that may hold something to change is walked."""
    try:
        if _written_clean(orjson.dumps(value)):
            return value
    except (TypeError, ValueError, RecursionError):  # not JSON as orjson writes it (a tuple key, a set, a lone surrogate): walk it
        pass
    return _clean_data(value, {})


def _written_clean(data):
    """Whether JSON `data` as orjson writes it holds no string with a character clean() escapes.
    orjson escapes the C0 controls as json does (\\b \\f \\n \\r \\t, else \\u00xx, lower-case) but
    writes DEL and every non-ASCII character as it is: text with either is not shown clean here
    (the walk decides), so what is left is ASCII for json_text_is_clean."""
    return data.isascii() and b"\x7f" not in data and json_text_is_clean(data.decode("ascii"))


def _clean_data(value, seen):
    kind = type(value)
    if kind is str:
        done = seen.get(value)
        if done is None:
            done = seen[value] = clean(value)
        return value if done == value else done  # an equal string object, not another: nothing changed
    if kind is dict or isinstance(value, dict):
        changed = False
        out = {}
        for k, v in value.items():
            k2 = _clean_data(k, seen) if type(k) is str else k
            v2 = v if type(v) in _PLAIN else _clean_data(v, seen)
            changed = changed or k2 is not k or v2 is not v
            out[k2] = v2
        return out if changed else value
    if kind is list or kind is tuple or isinstance(value, (list, tuple)):
        if set(map(type, value)) <= _PLAIN:
            return value
        items = [_clean_data(v, seen) for v in value]
        if kind is list and all(a is b for a, b in zip(items, value)):
            return value
        return items
    if isinstance(value, str):
        return clean(value)
    return value
