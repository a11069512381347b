"""Both engines import leaf to root: no import cycle, and no layer imports a layer above it
(core, with the port's kernels, < nn < models < runs < cases < the command line; docs/engines.md).

The graphs are read from the sources: in the reference every `import` and `from` statement,
function-local ones included (a cycle hidden inside a function is still a cycle); in the port
every `import ... from` and `export ... from` statement, `import type` included."""

import ast
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("core", "nn", "models", "runs", "cases")  # leaf to root; the command line sits above all
# Folders of a layer under a name of their own: the port's kernels/ is part of its core layer (core/ops
# runs its products there, the row kernels read mathlib's exp; docs/engines.md)
PART_OF = {"kernels": "core"}


def python_graph(root, package="reference"):
    """{module path: {imported module path}} of the package's sources (paths relative to root)."""
    top = Path(root) / package
    files = sorted(p for p in top.rglob("*.py") if "__pycache__" not in p.parts)
    known = {p.relative_to(root).as_posix() for p in files}

    def module_file(dotted):
        """The file of a dotted module name inside the package, or None (outside, or not a module)."""
        base = dotted.replace(".", "/")
        for candidate in (f"{base}.py", f"{base}/__init__.py"):
            if candidate in known:
                return candidate
        return None

    graph = {}
    for path in files:
        rel = path.relative_to(root).as_posix()
        parts = rel[:-3].split("/")
        here = parts[:-1]  # the package the module (or the package's __init__) belongs to
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), rel)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    anchor = here[:len(here) - (node.level - 1)]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # `from P import name`: name is a submodule when P/name.py exists, else P itself
                targets = [f"{base}.{alias.name}" if module_file(f"{base}.{alias.name}") else base for alias in node.names]
            else:
                continue
            edges |= {f for f in map(module_file, targets) if f is not None and f != rel}
        graph[rel] = edges
    return graph


_TS_FROM = re.compile(r"""^(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["']""", re.M | re.S)
_TS_BARE = re.compile(r"""^import\s*["']([^"']+)["']""", re.M)


def ts_graph(root, src="port_ts/src"):
    """{module path: {imported module path}} of the port's sources (relative imports only)."""
    top = Path(root) / src
    graph = {}
    for path in sorted(top.rglob("*.ts")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        specs = _TS_FROM.findall(text) + _TS_BARE.findall(text)
        graph[rel] = {os.path.normpath(os.path.join(os.path.dirname(rel), s)).replace(os.sep, "/")
                      for s in specs if s.startswith(".")}
    return graph


def cycles(graph):
    """One import cycle [a, b, ..., a] through each knot of modules that import each other (each
    strongly connected component of more than one module, Tarjan's algorithm), with the knot's
    other modules: [(cycle, others)]."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    found = []
    for component in components:
        start = min(component)
        path, seen, v = [start], {start}, start
        while True:  # walk inside the component until a module repeats
            v = min(w for w in graph[v] if w in component)
            path.append(v)
            if v in seen:
                cycle = path[path.index(v):]
                found.append((cycle, sorted(component - set(cycle))))
                break
            seen.add(v)
    return found


def layer_of(path):
    """The layer of a module path (reference/nn/linear.py -> "nn"), or None for the root modules."""
    parts = path.split("/")
    for part in parts[:-1]:
        if part in LAYERS:
            return part
        if part in PART_OF:
            return PART_OF[part]
    return None


def upward_imports(graph):
    """(importer, imported) pairs where a module imports a layer above its own (the root modules,
    the command line, sit above every layer)."""
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    rank[None] = len(LAYERS)
    return [(a, b) for a, targets in sorted(graph.items()) for b in sorted(targets) if rank[layer_of(b)] > rank[layer_of(a)]]


def describe_cycles(found):
    return "; ".join(" -> ".join(cycle) + (f" (in one knot with {', '.join(others)})" if others else "")
                     for cycle, others in found)


ENGINES = {"reference": python_graph, "port": ts_graph}


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_no_import_cycle(engine):
    found = cycles(ENGINES[engine](ROOT))
    assert not found, (f"the {engine} has import cycles: {describe_cycles(found)}; move what both modules need "
                       "into a lower module (docs/engines.md, the layers)")


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_layers_import_only_downwards(engine):
    bad = upward_imports(ENGINES[engine](ROOT))
    assert not bad, (f"the {engine} imports upwards (layers leaf to root: {' < '.join(LAYERS)}): "
                     + "; ".join(f"{a} imports {b}" for a, b in bad))


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_the_graph_sees_every_module_and_its_imports(engine):
    """The parsers read the real trees: every layer has modules, and the models import the nn."""
    graph = ENGINES[engine](ROOT)
    assert {layer_of(p) for p in graph} >= set(LAYERS)
    transformer = next(p for p in graph if p.endswith(("models/transformer.py", "models/transformer.ts")))
    assert any(layer_of(b) == "nn" for b in graph[transformer]), graph[transformer]


# --- the checks on small trees: the bug they catch, and a faithful layout they pass ---------------

def _tree(tmp_path, files):
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_a_function_local_import_cycle_is_found_and_named(tmp_path):
    """The cycle the engines had: schedule() lived with the case builders, which import the run,
    and the run imported it back inside a function."""
    root = _tree(tmp_path, {
        "reference/__init__.py": "",
        "reference/runs/__init__.py": "",
        "reference/cases/__init__.py": "",
        "reference/core/__init__.py": "",
        "reference/core/case_config.py": "",
        "reference/runs/reversal.py": "from ..core import case_config as cc\n\ndef setup():\n    from ..cases.cases_training import schedule\n",
        "reference/cases/cases_training.py": "from ..runs.reversal import setup\n\ndef schedule():\n    pass\n",
    })
    graph = python_graph(root)
    assert graph["reference/runs/reversal.py"] == {"reference/core/case_config.py", "reference/cases/cases_training.py"}
    assert describe_cycles(cycles(graph)) == (
        "reference/cases/cases_training.py -> reference/runs/reversal.py -> reference/cases/cases_training.py")
    assert upward_imports(graph) == [("reference/runs/reversal.py", "reference/cases/cases_training.py")]
    # The fix: schedule() one layer down, beside the run.
    (root / "reference/runs/schedule.py").write_text("def schedule():\n    pass\n")
    (root / "reference/runs/reversal.py").write_text("from .schedule import schedule\n")
    (root / "reference/cases/cases_training.py").write_text("from ..runs.reversal import setup\nfrom ..runs import schedule\n")
    graph = python_graph(root)
    assert cycles(graph) == [] and upward_imports(graph) == []
    assert graph["reference/cases/cases_training.py"] == {"reference/runs/reversal.py", "reference/runs/schedule.py"}


def test_a_type_only_import_cycle_in_the_port_is_found(tmp_path):
    root = _tree(tmp_path, {
        "port_ts/src/runs/reversal.ts": 'import type { Generator } from "../core/rng.ts";\nimport {\n  type Run,\n  schedule,\n} from "../cases/casesTraining.ts";\n',
        "port_ts/src/cases/casesTraining.ts": 'import { reversalSetup } from "../runs/reversal.ts";\nexport { x } from "./other.ts";\n',
        "port_ts/src/cases/other.ts": "// import { nothing } from './reversal.ts' is a comment, not a statement\n",
        "port_ts/src/core/rng.ts": "",
        "port_ts/src/cli.ts": 'import { readFileSync } from "node:fs";\nimport { x } from "./cases/casesTraining.ts";\n',
    })
    graph = ts_graph(root)
    assert graph["port_ts/src/runs/reversal.ts"] == {"port_ts/src/core/rng.ts", "port_ts/src/cases/casesTraining.ts"}
    assert graph["port_ts/src/cases/other.ts"] == set()
    assert graph["port_ts/src/cli.ts"] == {"port_ts/src/cases/casesTraining.ts"}  # node: modules are outside
    assert describe_cycles(cycles(graph)) == (
        "port_ts/src/cases/casesTraining.ts -> port_ts/src/runs/reversal.ts -> port_ts/src/cases/casesTraining.ts")
    assert upward_imports(graph) == [("port_ts/src/runs/reversal.ts", "port_ts/src/cases/casesTraining.ts")]


def test_a_longer_cycle_is_named_module_by_module():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e2"}, "e2": set()}
    assert cycles(graph) == [(["a", "b", "c", "a"], [])]
    graph["d"] = {"b"}  # c -> d -> b: a second cycle in the same knot
    assert describe_cycles(cycles(graph)) == "a -> b -> c -> a (in one knot with d)"
