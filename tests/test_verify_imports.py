"""The runner treats both engines alike, as processes behind docs/protocol.md: no module of verify/
imports the reference engine (reference/), at the top or inside a function, by statement or by
importlib. An exception would be listed in ALLOWED with the reason its docs give; there is none."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGINE = "reference"
ALLOWED = {}  # "verify/<module>.py": "why it may import the reference in-process (and the doc that says so)"


def engine_imports(path):
    """[(line, what)] of every import of the reference package in one Python file."""
    found = []
    for node in ast.walk(ast.parse(Path(path).read_text(encoding="utf-8"), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in ("import_module", "__import__", "find_spec"):
                names = [node.args[0].value]
        found += [(node.lineno, n) for n in names if n == ENGINE or n.startswith(ENGINE + ".")]
    return found


def offenders(folder):
    return {f"verify/{p.relative_to(folder).as_posix()}": hits for p in sorted(Path(folder).rglob("*.py"))
            if (hits := engine_imports(p))}  # verify/tools/ too


def test_no_module_of_verify_imports_the_reference_engine():
    found = {module: hits for module, hits in offenders(ROOT / "verify").items() if module not in ALLOWED}
    assert not found, ("verify/ reaches into the reference engine instead of asking it through the protocol "
                       f"(docs/protocol.md, Request kinds): {found}")
    stale = [m for m in ALLOWED if not (ROOT / m).exists() or not engine_imports(ROOT / m)]
    assert not stale, f"ALLOWED names modules that no longer import the reference: {stale}"


def test_the_check_sees_every_form_and_only_the_engine(tmp_path):
    """The forms verify/inspect.py and verify/export.py used before they spoke the protocol (a
    function-local `from reference.models.bert import ...`), the others, and look-alikes that are
    not the engine (jsonschema's `referencing`, which verify/documents.py imports)."""
    (tmp_path / "bad.py").write_text(
        "import reference\n"
        "def f():\n"
        "    from reference.models.bert import bert_forward\n"
        "    import reference.core.golden as g\n"
        "    import importlib; importlib.import_module('reference.cases.cases')\n"
        "    __import__('reference')\n")
    (tmp_path / "good.py").write_text(
        "from referencing import Registry\n"
        "import references_elsewhere\n"
        "from . import reference\n"  # a module of verify/ of that name would be verify.reference, not the engine
        "name = 'reference.models.bert'\n")
    assert offenders(tmp_path) == {"verify/bad.py": [(1, "reference"), (3, "reference.models.bert"),
                                                     (4, "reference.core.golden"), (5, "reference.cases.cases"),
                                                     (6, "reference")]}
