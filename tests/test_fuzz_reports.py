"""Property-based tests of the report writers: any string a case, an engine or a golden can carry
(ids, files, errors, tensor names, messages, golden details, engine commands; any Unicode, lone
surrogates, control characters, ANSI escapes, markup) reaches the terminal, the JSON report, the
HTML report and the JUnit XML escaped: the terminal gets no control character but the runner's
own colours, the JUnit XML parses, the HTML holds no markup from data, the JSON is strict and
UTF-8, and `verify show` of the JSON renders what the run rendered."""

import html as html_lib
import json
import re
import xml.etree.ElementTree as ET

from hypothesis import example, given, strategies as st

from report_samples import sample_case, sample_report
from verify import html, junit
from verify.records import Report
from verify.report import Style, dumps, render
from verify.text import clean, is_clean

HOSTILE = st.sampled_from(["\x1b[31m", "\x1b]0;title\x07", "\x00", "\x08", "\r", "\n", "\t", "\x7f", "\x85", "\x9b",
                           "\ud800", "\udfff", "\ufffe", "\uffff", "\u202e", "\u2066", "<script>", "</script>", "]]>",
                           "<!--", "&amp;", '"', "'", "\\", "é", "中", "\U0001f600"])
TEXT = st.lists(st.one_of(HOSTILE, st.text(st.characters(exclude_categories=()), max_size=6)), max_size=6).map("".join)
OWN_SGR = re.compile(r"\x1b\[(?:32|31;1|2|0)m")


class _Style(Style):
    def __init__(self, on):
        self.on = on


def unsafe(text):
    return [ch for ch in text if not is_clean(ch, keep_newlines=True)]


@given(TEXT, TEXT, st.booleans())
@example("\x1b[31mred\x1b[0m", "</failure>]]>\x01", True)
def test_every_string_reaches_every_writer_escaped(text, other, colour):
    report = sample_report(text, cases=[sample_case(text), sample_case(other, case_id=f"{other}.b")])
    lines = render(report, _Style(colour))
    for line in lines:
        assert "\n" not in line and not unsafe(OWN_SGR.sub("", line)), repr(line)
    shown = clean(text)
    assert any(shown in line for line in lines)  # escaped, never dropped

    xml = junit.dumps(report)
    root = ET.fromstring(xml.encode("utf-8"))
    messages = [f.get("message") for f in root.iter("failure")]
    assert any(shown in m for m in messages)

    page = html.dumps(report)
    page.encode("utf-8")
    assert page.lower().count("<script") == 2  # the data block and the page's own script, never one from data
    assert html_lib.escape(shown, quote=True) in page
    assert not unsafe(page)

    text_json = dumps(report)
    text_json.encode("utf-8")
    doc = json.loads(text_json, parse_constant=lambda token: (_ for _ in ()).throw(ValueError(token)))
    assert doc["cases"][0]["id"] == shown and all(is_clean(e) for e in doc["cases"][0]["errors"])
    assert render(Report.from_dict(doc), _Style(colour)) == lines  # `verify show` of the saved report prints what the run printed
