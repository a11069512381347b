"""Control characters and ANSI escapes from an engine (status errors, stderr, ids, messages) reach
no output raw (issue 15, item 5): verify/text.py's clean() escapes them, and every renderer
(terminal, JSON, HTML, JUnit XML) applies it to the whole report, so the JUnit XML always parses,
the terminal receives no escape sequence, the HTML gets no markup from data."""

import json
import sys
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from report_samples import sample_report
from test_runner import cases_dir, goldens, run_verify, schemas, session_goldens  # noqa: F401 (fixtures)
from verify import html, junit
from verify.report import Style, dumps, render
from verify.text import clean, clean_data, is_clean

HOSTILE = "A\x01B\x1b[31mred\x1b[0m\x00\x07\x08\x7f\x85\ud800\ufffe\u202eevil\u202c</failure>]]><script>alert(1)</script>\nline 2\r\t"


class Plain(Style):
    def __init__(self):
        self.on = False


def unsafe(text):
    return [c for c in text if ord(c) < 0x20 and c != "\n" or 0x7f <= ord(c) <= 0x9f or 0xd800 <= ord(c) <= 0xdfff
            or c in "\ufffe\uffff\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"]


def test_clean_escapes_what_acts_and_keeps_what_reads():
    assert clean("plain, é, →, 中, \\ stays") == "plain, é, →, 中, \\ stays"
    assert clean("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m"
    assert clean("a\nb\tc\rd") == "a\\x0ab\\x09c\\x0dd"
    assert clean("a\nb\r", keep_newlines=True) == "a\nb\\x0d"
    assert clean("\ud800\ufffe\u202e\x85\x7f\x00") == "\\ud800\\ufffe\\u202e\\x85\\x7f\\x00"
    assert not unsafe(clean(HOSTILE)) and is_clean(clean(HOSTILE))
    assert clean(clean(HOSTILE)) == clean(HOSTILE)  # idempotent: a saved report shows as it ran
    report = sample_report(HOSTILE).to_dict()
    assert clean_data(clean_data(report)) == clean_data(report)
    plain = sample_report("nothing to escape").to_dict()
    assert clean_data(plain) is plain  # a clean report is not copied


def test_the_sample_report_is_a_report(schemas):  # noqa: F811
    schemas.check("report", json.loads(dumps(sample_report(HOSTILE))))


def test_every_renderer_escapes_engine_text():
    report = sample_report(HOSTILE)
    lines = render(report, Plain())
    assert not [l for l in lines if unsafe(l) or "\n" in l]
    assert any("\\x1b[31mred" in l for l in lines)  # shown, escaped, not dropped
    "\n".join(lines).encode("utf-8")  # a lone surrogate could not be written
    xml = junit.dumps(report)
    root = ET.fromstring(xml.encode("utf-8"))  # parses: no control character in XML
    failure = root.find("./testsuite/testcase/failure")
    assert "\\x01B\\x1b[31mred" in failure.get("message")
    assert not unsafe(xml.replace("\n", ""))
    page = html.dumps(report)
    page.encode("utf-8")
    assert "<script>alert" not in page and page.count("<script") == 2  # the data and the page's own script
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert not unsafe(page.replace("\n", ""))
    text = dumps(report)
    text.encode("utf-8")
    doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in the JSON report"))
    assert doc["cases"][0]["errors"][0] == clean(HOSTILE)


def test_a_coloured_terminal_gets_only_the_runners_own_escapes():
    class Colour(Style):
        def __init__(self):
            self.on = True
    lines = render(sample_report(HOSTILE), Colour())
    own = ("\x1b[32m", "\x1b[31;1m", "\x1b[2m", "\x1b[0m")
    for line in lines:
        for code in own:
            line = line.replace(code, "")
        assert not unsafe(line), line


ANSI_PORT = textwrap.dedent(r'''
    import json, sys
    request = json.load(sys.stdin)
    mode = sys.argv[1]
    if mode == "stderr":
        sys.stderr.write("\x1b[31mError: \x01boom\x1b[0m\n")
        sys.exit(4)
    for case in request["cases"]:
        print(json.dumps({"id": case["id"], "ok": False, "error": "\x1b[31mred\x1b[0m \x01 \x00 \u202e", "seconds": 0}))
''')


@pytest.fixture
def ansi_port(tmp_path):
    script = tmp_path / "ansi_port.py"
    script.write_text(ANSI_PORT)
    return lambda mode: f"{sys.executable} {script} {mode}"


def test_an_ansi_status_error_reaches_the_terminal_and_junit_escaped(repo_root, cases_dir, goldens, ansi_port,  # noqa: F811
                                                                     tmp_path):
    xml = tmp_path / "junit.xml"
    proc = run_verify(repo_root, "attention", "--cases-dir", cases_dir, "--golden-dir", goldens, "--case", "lens_1d",
                      "--port-cmd", ansi_port("status"), "--junit", xml, "--html", tmp_path / "r.html")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert not unsafe(proc.stdout.replace("\n", "")) and "\\x1b[31mred\\x1b[0m \\x01 \\x00 \\u202e" in proc.stdout
    root = ET.parse(xml).getroot()
    assert "\\x1b[31mred" in root.find("./testsuite/testcase/failure").get("message")


def test_an_ansi_stderr_reaches_the_one_line_error_escaped(repo_root, cases_dir, goldens, ansi_port):  # noqa: F811
    proc = run_verify(repo_root, "attention", "--cases-dir", cases_dir, "--golden-dir", goldens, "--case", "lens_1d",
                      "--port-cmd", ansi_port("stderr"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "exited with code 4" in proc.stderr and "\\x1b[31mError: \\x01boom\\x1b[0m" in proc.stderr
    assert not unsafe(proc.stderr.replace("\n", ""))


def _cleaned(value):
    """What clean_data promises, by the plainest walk: every string of a JSON-like value, keys
    included, through clean() (a tuple as a list, as JSON writes it)."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {_cleaned(k): _cleaned(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_cleaned(v) for v in value]
    return value


def test_clean_data_cleans_every_character_clean_escapes_wherever_it_stands():
    """Every character of the Basic Multilingual Plane (lone surrogates included) and a sample
    beyond it, alone, after backslashes or a quote, inside a word, as a value and as a key:
    clean_data gives what clean() gives for each string."""
    astral = [0x10000, 0x1F600, 0xE0001, 0x10FFFF]
    for code in list(range(0x10000)) + astral:
        c = chr(code)
        for text in (c, "\\" + c, "\\\\" + c, "\\\\\\" + c, "\"" + c, "a" + c + "b"):
            assert clean_data({"k": [text], text: 1}) == {"k": [clean(text)], clean(text): 1}, (hex(code), text)


def test_clean_data_gives_what_cleaning_every_string_gives():
    from hypothesis import given, strategies as st

    chars = st.one_of(st.characters(), st.sampled_from(list(HOSTILE) + ["\\", "\u00e9", "\U0001F600"]))
    text = st.text(chars, max_size=6)
    leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), text)
    values = st.recursive(leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(text, inner, max_size=4)), max_leaves=12)

    @given(values)
    def check(value):
        assert json.dumps(clean_data(value)) == json.dumps(_cleaned(value))
    check()


def _strict(constant):
    raise AssertionError(f"{constant} in the JSON report: not JSON")


def test_a_case_reads_back_from_the_json_report_as_the_case():
    """report.dumps writes each case so that it reads back as that very case (the JSON report is
    ASCII and strict JSON), whichever way it writes it: a tuple comes back as a list, a non-ASCII
    character as its \\u escape, an integer beyond 64 bits whole, and a NaN or an infinity as the
    strings "NaN" and "-Infinity"."""
    extra = {"id": "x", "tol": 1e-06, "big": 1e300, "neg": -0.0, "ints": [0, -3, 2 ** 63 - 1], "none": None}
    base = sample_report("nothing to escape")
    for case in base.cases + [extra]:
        text = dumps(replace(base, cases=[case]))
        assert text.isascii()
        read = json.loads(text, parse_constant=_strict)["cases"][0]
        try:
            expected = json.loads(json.dumps(case, allow_nan=False))
        except ValueError:  # a non-finite number: written as a string, the rest as it is
            continue
        assert read == expected == case
    for case, expected, written in (({"id": "x", "at": (0, 1)}, {"id": "x", "at": [0, 1]}, '"at":[0,1]'),
                                    ({"id": "caf\u00e9"}, {"id": "caf\u00e9"}, '"caf\\u00e9"'),
                                    ({"id": "x", "n": 2 ** 70}, {"id": "x", "n": 2 ** 70}, '"n":%d' % 2 ** 70)):
        text = dumps(replace(base, cases=[case]))
        assert json.loads(text)["cases"][0] == expected and written in text, text
    doc = json.loads(dumps(replace(base, cases=[{"id": "x", "v": float("nan"), "w": float("-inf")}])))
    assert doc["cases"][0]["v"] == "NaN" and doc["cases"][0]["w"] == "-Infinity"
