"""The size of the runner's core and of its functions (issue 31's budgets).

The core is every module of verify/ that an in-process `verify attention --html --junit` loads
(renderers included; side commands, which live in verify/tools/, are not loaded by it). Its size
is their lines (wc -l). Every function of verify/ is also held to at most MAX_LINES lines and
MAX_PARAMS parameters (tests/test_core_size.py checks that part on every run).

    python bench/core_size.py            # per-module lines, the total, the longest functions
"""

import ast
import contextlib
import io
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 80
MAX_PARAMS = 8


def functions(root=ROOT):
    """(where, lines, parameters) of every function and method in verify/."""
    found = []
    for path in sorted((root / "verify").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                params = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
                if a.args and a.args[0].arg in ("self", "cls"):
                    params -= 1
                where = f"{path.relative_to(root)}:{node.lineno} {node.name}"
                found.append((where, node.end_lineno - node.lineno + 1, params))
    return found


def core_modules():
    """{module name: lines} of the verify/ modules a full in-process `verify attention` loads."""
    sys.path.insert(0, str(ROOT))
    from verify import cli
    with tempfile.TemporaryDirectory() as d, contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        try:
            cli.main(["attention", "--html", f"{d}/r.html", "--junit", f"{d}/r.xml"])
        except SystemExit:
            pass
    return {name: len(Path(m.__file__).read_text().splitlines())
            for name, m in sorted(sys.modules.items()) if name == "verify" or name.startswith("verify.")}


def main():
    modules = core_modules()
    for name, lines in modules.items():
        print(f"{lines:6d}  {name}")
    print(f"{sum(modules.values()):6d}  lines in {len(modules)} modules of the core")
    fns = functions()
    for label, key, limit in (("lines", 1, MAX_LINES), ("parameters", 2, MAX_PARAMS)):
        worst = max(fns, key=lambda f: f[key])
        print(f"most {label}: {worst[key]} ({worst[0]}; limit {limit})")


if __name__ == "__main__":
    main()
