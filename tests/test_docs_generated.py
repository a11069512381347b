"""The reference pages in docs/reference/ (command line, limits, hostile conditions, faults, ops) are
exactly what `python scripts/generate_docs.py` writes from the code and the declarations today:
each is regenerated in memory and compared with the committed page, so a changed option, limit,
hostile row, fault or op fails here until its page is regenerated."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import generate_docs  # noqa: E402


@pytest.mark.parametrize("name", sorted(generate_docs.PAGES))
def test_the_committed_page_is_what_the_generator_writes(name):
    path = generate_docs.OUT / name
    committed = ROOT / path
    assert committed.is_file(), f"{path} is missing: run `{generate_docs.COMMAND}` and commit it"
    assert committed.read_text(encoding="utf-8") == generate_docs.PAGES[name](), (
        f"{path} differs from what its sources give today: run `{generate_docs.COMMAND}` and commit the page")


def test_every_page_in_docs_reference_is_generated():
    pages = {p.name for p in (ROOT / generate_docs.OUT).iterdir()}
    assert pages == set(generate_docs.PAGES), (
        f"{generate_docs.OUT} holds pages the generator does not write ({sorted(pages - set(generate_docs.PAGES))}) "
        f"or lacks some ({sorted(set(generate_docs.PAGES) - pages)}): remove them, or run `{generate_docs.COMMAND}`")
