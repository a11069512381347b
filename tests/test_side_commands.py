"""The side commands (`verify show`, `inspect`, `export`, `diff`, `faults`, `fetch-model`, `cache`, `bisect`) live
beside the verification core, in verify/tools/, and the renderers import nothing of the run (issue 31):

- `verify attention` imports no module of verify/tools/ (what a run loaded, read from sys.modules
  as it exits), while `verify diff` does load its own;
- the core (verify/*.py) imports verify/tools/ only inside a function; verify/cli.py imports a side
  command's module by its name in cli.SIDE_COMMANDS when that command runs;
- the side commands use only the core's public names (no `_private` name of a core module);
- verify/report.py, html.py and junit.py import none of the modules that run or judge the engines;
- every side command's --help still answers (its options are declared in its own module)."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import main_in_process, project_copy
from verify import models

ROOT = Path(__file__).resolve().parent.parent
SIDE = ("show", "inspect", "export", "diff", "faults", "fetch-model", "cache", "bisect")
# The side commands' modules, by their name wherever they live (verify/tools/<name>.py).
SIDE_MODULES = ("show", "inspect", "inspect_page", "inspect_tables", "export", "diff", "faults", "anchors",
                "fetch_model", "cache", "bisect")

# Runs `verify ARGS...` as `python -m verify` does, then writes the names of every module loaded to
# the file given first (atexit: after the command's own exit).
RECORDER = ("import atexit, runpy, sys\n"
            "out, sys.argv = sys.argv[1], ['verify', *sys.argv[2:]]\n"
            "atexit.register(lambda: open(out, 'w').write('\\n'.join(sorted(sys.modules))))\n"
            "runpy.run_module('verify', run_name='__main__', alter_sys=True)\n")


def loaded_by(root, tmp_path, *args):
    """(the process, the verify modules it loaded) of `verify ARGS` run from the checkout `root`."""
    record = tmp_path / "modules.txt"
    proc = subprocess.run([sys.executable, "-c", RECORDER, str(record), *map(str, args)], cwd=root,
                          capture_output=True, text=True, timeout=600)
    assert record.is_file(), proc.stdout + proc.stderr
    return proc, {m for m in record.read_text().split() if m == "verify" or m.startswith("verify.")}


def test_verify_attention_imports_no_side_command(tmp_path):
    copy = project_copy(tmp_path)  # the run writes its reports into the copy, not the checkout
    proc, modules = loaded_by(copy, tmp_path, "attention", "--case", "masked_softmax.*")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert {"verify.cli", "verify.engines", "verify.report"} <= modules, sorted(modules)  # the record is the run's
    side = sorted(m for m in modules if m.startswith("verify.tools") or m.rpartition(".")[2] in SIDE_MODULES)
    assert not side, f"`verify attention` imported side commands: {side}; import them in their command's handler"


def test_the_recorder_sees_a_side_command_load_its_module(tmp_path):
    golden = next((ROOT / "golden" / "attention" / "reference").glob("*.json"))
    proc, modules = loaded_by(ROOT, tmp_path, "diff", golden, golden)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verify.tools.diff" in modules and "verify.tools.inspect" not in modules, sorted(modules)


def test_the_side_commands_live_in_verify_tools():
    tools, core = ROOT / "verify" / "tools", ROOT / "verify"
    assert [m for m in SIDE_MODULES if not (tools / f"{m}.py").is_file()] == []
    assert [m for m in SIDE_MODULES if (core / f"{m}.py").exists()] == []
    fetching = [n for n in ("fetch", "run", "add_parser") if n in vars(models)]
    assert not fetching, f"verify/models.py still holds `verify fetch-model`'s {fetching}"


def _imports(path):
    """[(node, inside a function?)] of every import statement of a Python file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    inside = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside |= {id(n) for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return [(n, id(n) in inside) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def _tools_named(node):
    """The verify/tools/ modules an import statement of a core module names ("tools" for the package)."""
    if isinstance(node, ast.Import):
        return {a.name.split(".")[2] if a.name.count(".") > 1 else "tools" for a in node.names
                if a.name == "verify.tools" or a.name.startswith("verify.tools.")}
    module = node.module or ""
    if node.level == 0:
        module = module[len("verify."):] if module.startswith("verify.") else "" if module == "verify" else None
    elif node.level != 1:
        return set()
    if module is None:
        return set()
    if module == "tools":  # from .tools import diff
        return {a.name for a in node.names}
    if module.startswith("tools."):  # from .tools.diff import run
        return {module.split(".")[1]}
    return {"tools"} if not module and any(a.name == "tools" for a in node.names) else set()


def test_the_core_imports_side_commands_only_when_they_run():
    found = [f"verify/{path.name}:{node.lineno}" for path in sorted((ROOT / "verify").glob("*.py"))
             for node, in_function in _imports(path) if _tools_named(node) and not in_function]
    assert not found, (f"the core imports verify/tools/ at {', '.join(found)}: only inside the function that runs "
                       "the command, or by name in verify/cli.py's SIDE_COMMANDS")
    from verify import cli
    for command in SIDE:
        module = cli.side_command(command)
        assert module.__name__.startswith("verify.tools."), (command, module.__name__)
        assert callable(module.parser) and callable(module.run), command


def test_side_commands_use_only_public_names_of_the_core():
    core = {p.stem for p in (ROOT / "verify").glob("*.py")}
    found, tools = [], sorted((ROOT / "verify" / "tools").glob("*.py"))
    assert {p.stem for p in tools} >= set(SIDE_MODULES)
    for path in tools:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        aliases = {}  # local name -> core module, of `from .. import engines as engines_mod`
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 2:
                if node.module is None:
                    aliases.update({a.asname or a.name: a.name for a in node.names if a.name in core})
                found += [f"{path.name}:{node.lineno} imports {node.module or ''}.{a.name}" for a in node.names
                          if a.name.startswith("_")]
        found += [f"{path.name}:{node.lineno} uses {node.value.id}.{node.attr}" for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id in aliases and node.attr.startswith("_") and not node.attr.startswith("__")]
    assert not found, f"side commands reach into the core's private names: {found}; give the core a public function"


# What runs or judges the engines: a renderer reads the report, never these.
OF_THE_RUN = ("verify.engines", "verify.suite", "verify.schedule", "verify.lifecycle", "verify.browsers",
              "verify.verdict", "verify.replay", "verify.goldens", "verify.reference_cache", "verify.views")


@pytest.mark.parametrize("renderer", ["verify.report", "verify.html", "verify.junit"])
def test_a_renderer_imports_nothing_of_the_run(renderer):
    code = f"import sys, json, {renderer}; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    modules = set(json.loads(proc.stdout))
    assert renderer in modules
    found = sorted(m for m in modules if m in OF_THE_RUN or m.startswith("verify.tools"))
    assert not found, f"{renderer} imports {found}: a renderer reads the report's data and imports nothing of the run"


@pytest.mark.parametrize("command", (*SIDE, "regen"))
def test_every_side_command_answers_help(capsys, command):
    argv = [command, *(("attention",) if command in ("export", "faults") else ()), "--help"]
    code, out, err = main_in_process(capsys, argv)
    assert code == 0 and out.startswith(f"usage: verify {command}"), out + err
