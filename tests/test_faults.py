"""The fault catalogue (each op's bundle's faults, ops/attention/<op>.json, and the shared ones of
ops/attention.json) and `verify faults` (docs/faults.md): every fault is a valid edit of today's
sources, anchored to the declaration that holds it (a function moved to another module keeps its
faults), every fault is caught (a fault with a witness by that case, also end to end through
`verify attention --port-cmd`), a harmless edit is reported missed, a broken catalogue is exit 2."""

import json
import re
import shutil
from pathlib import Path

import pytest

from verify.tools import anchors
from verify.tools.faults import AREAS, TREES, Fault, apply, load, widened
from helpers import assert_one_line_error, run_verify
from toolkit import catalogue_cases


def test_the_catalogue_is_valid_and_covers_every_area(repo_root):
    faults = load(None, repo_root, str)  # the bundles' faults and ops/attention.json's shared ones
    port = [f for f in faults if f.engine == "port"]
    reference = [f for f in faults if f.engine == "reference"]
    assert len(port) >= 30 and len(reference) >= 5
    assert {f.area for f in port} == set(AREAS)
    assert all(f.description and "\n" not in f.description for f in faults)


def _catalogue(tmp_path, faults):
    path = tmp_path / "faults.json"
    path.write_text(json.dumps({"faults": faults}) if not isinstance(faults, str) else faults)
    return path


FAULT = {"id": "x", "op": "layer_norm", "engine": "port", "within": "EPS", "find": "export const EPS = 1e-5;",
         "replace": "export const EPS = 1e-4;", "description": "d", "area": "forward"}


@pytest.mark.parametrize("faults,fragments", [
    ('{"faults": [', ["not valid JSON", "fix it"]),
    ([], ["non-empty list 'faults'"]),
    ([dict(FAULT, find="no such text")], ["occurs 0 times in EPS (port_ts/src/nn/layerNorm.ts, port_ts/src/runs/optim.ts)",
                                           "update 'find' (or 'within') to today's sources"]),
    ([dict(FAULT, within="layerNormJs", find="for (let k = 0; k < d; k++)")],
     ["occurs 3 times in layerNormJs (port_ts/src/kernels/rows.ts)", "make it longer"]),
    ([dict(FAULT, find="export const EPS = ")], ["EPS holding its 'find' text is declared in port_ts/src/nn/layerNorm.ts, "
                                                  "port_ts/src/runs/optim.ts", "make 'find' longer"]),
    ([dict(FAULT, within="layer_norm_forward")], ["no module of port_ts/src/ declares layer_norm_forward",
                                                  "set 'within' to the function that holds the text today"]),
    ([dict(FAULT, within="Generator.noSuchMethod")], ["declares Generator.noSuchMethod"]),
    ([dict(FAULT, within="x.y.z")], ["'within' must name a declaration"]),
    ([dict(FAULT, replace=FAULT["find"])], ["the same text"]),
    ([dict(FAULT, engine="reference", within="EPS", find="EPS = 1e-5", witness="layer_norm.d1")], ["only a port fault"]),
    ([dict(FAULT, area="elsewhere")], ["area one of"]),
    ([dict(FAULT, op="layer_norms")], ["its op 'layer_norms' is not declared in ops/attention/",
                                       "set 'op' to the op the fault targets", "'shared'"]),
    ([dict(FAULT, file="port_ts/src/nn/layerNorm.ts")], ["must have exactly the string fields", "not a file"]),
    ([FAULT, FAULT], ["the id is used twice"]),
    ([{"id": "x"}], ["must have exactly the string fields"]),
])
def test_a_broken_fault_catalogue_is_an_input_error(repo_root, tmp_path, faults, fragments):
    proc = run_verify(repo_root, "faults", "attention", "--catalogue", _catalogue(tmp_path, faults), timeout=60)
    assert_one_line_error(proc, *fragments)


def test_a_broken_fault_of_a_bundle_is_named_with_its_bundle(repo_root, tmp_path, monkeypatch):
    """Read from the bundles (no --catalogue), a broken fault is named with the file that holds it."""
    from verify import ops
    from verify.errors import InputError

    shutil.copytree(repo_root / "ops", tmp_path / "ops")
    path = tmp_path / "ops" / "attention" / "layer_norm.json"
    doc = json.loads(path.read_text())
    doc["faults"][0]["find"] = "no such text"
    path.write_text(json.dumps(doc))
    monkeypatch.setattr(ops, "ROOT", tmp_path)
    with pytest.raises(InputError) as caught:
        load(None, repo_root, lambda p: p.relative_to(tmp_path).as_posix())
    assert str(caught.value).startswith(f"fault {doc['faults'][0]['id']!r} in ops/attention/layer_norm.json: "), caught.value


def test_a_fault_pattern_without_a_match_is_an_input_error(repo_root):
    proc = run_verify(repo_root, "faults", "attention", "--fault", "no.such.fault", timeout=60)
    assert_one_line_error(proc, "no fault", "no.such.fault")


# --- anchored by declaration: a refactor that moves a function keeps its faults -----------------

def _copy_engines(repo_root, tmp_path):
    shutil.copytree(repo_root / "port_ts" / "src", tmp_path / "port_ts" / "src")
    shutil.copy(repo_root / "port_ts" / "package.json", tmp_path / "port_ts" / "package.json")
    shutil.copytree(repo_root / "reference", tmp_path / "reference", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _cut(path, start_marker, end_marker):
    """Remove from path the text from start_marker up to (not including) end_marker; return it."""
    text = path.read_text()
    start, end = text.index(start_marker), text.index(end_marker)
    path.write_text(text[:start] + text[end:])
    return text[start:end]


def test_moving_a_function_to_another_module_keeps_its_faults(repo_root, tmp_path):
    """keptIn (three faults) and the reference's masked_softmax_forward move to new modules:
    every fault of the catalogue still loads, those follow their function, and applying one
    edits the new module only."""
    root = _copy_engines(repo_root, tmp_path)
    port = root / "port_ts/src/nn"
    moved = _cut(port / "maskedSoftmax.ts", "/** The keys kept in row r", "/** The keep mask")
    (port / "keptIn.ts").write_text('import type { RowLengths } from "./maskedSoftmax.ts";\n\n' + moved)
    ref = root / "reference/nn"
    text = (ref / "masked_softmax.py").read_text()
    at = text.index("def masked_softmax_forward")
    (ref / "softmax_forward.py").write_text(text[at:text.index("def masked_softmax_backward")])
    (ref / "masked_softmax.py").write_text(text[:at] + text[text.index("def masked_softmax_backward"):])

    faults = {f.id: f for f in load(None, root, str)}
    assert len(faults) == len(load(None, repo_root, str))
    for fid in ("port.softmax.mask_polarity", "port.softmax.valid_len_off_by_one", "port.softmax.two_d_lens_by_batch"):
        assert faults[fid].file == "port_ts/src/nn/keptIn.ts", faults[fid]
    assert faults["port.softmax.no_max_subtraction"].file == "port_ts/src/kernels/rows.ts"
    assert faults["reference.softmax.mask_polarity"].file == "reference/nn/softmax_forward.py"

    into = tmp_path / "applied"
    edited = apply(faults["port.softmax.mask_polarity"], root, into)
    assert edited == into / "port_ts/src/nn/keptIn.ts"
    assert "return K - (len < 0 ? 0 : len > K ? K : len);" in edited.read_text()
    assert (into / "port_ts/src/nn/maskedSoftmax.ts").read_text() == (port / "maskedSoftmax.ts").read_text()


def test_the_anchor_is_the_declaration_text_only(tmp_path):
    """A find text that occurs once in the declaration is edited there, even where the same text
    occurs elsewhere in the file (outside the declaration), and never elsewhere."""
    src = tmp_path / "port_ts" / "src"
    src.mkdir(parents=True)
    (tmp_path / "port_ts" / "package.json").write_text("{}")
    (src / "a.ts").write_text('export const SCALE = 2;\n\nexport function f(x: number): number {\n'
                              '  const s = `${"}"}`; // a brace in a template literal and a string: not the end\n'
                              '  return x * 2 + s.length; /* } */\n}\n\nexport function g(x: number): number {\n'
                              '  return x * 2;\n}\n')
    fault = Fault(id="y", op="shared", engine="port", within="g", find="x * 2", replace="x * 3", description="d",
                  area="forward")
    edited = apply(fault, tmp_path, tmp_path / "out")
    text = edited.read_text()
    assert "return x * 2 + s.length" in text and text.endswith("  return x * 3;\n}\n"), text
    with pytest.raises(anchors.AnchorError, match="occurs 0 times in f"):
        anchors.locate(tmp_path, "port_ts/src", "f", "x * 3")


def test_python_declarations_read_decorators_methods_and_nested_functions(tmp_path):
    text = ("import functools\n\nLIMIT = 3\n\n\n@functools.cache\ndef outer(n):\n    def step_fn(p):\n"
            "        return p + LIMIT\n    return step_fn(n)\n\n\nclass Gen:\n    def draw(self):\n"
            "        return 4\n")
    [(s, e)] = anchors.python_declarations(text, "outer")
    assert text[s:e].startswith("@functools.cache\n") and text[s:e].endswith("return step_fn(n)\n")
    [(s, e)] = anchors.python_declarations(text, "outer.step_fn")
    assert text[s:e] == "    def step_fn(p):\n        return p + LIMIT\n"
    [(s, e)] = anchors.python_declarations(text, "Gen.draw")
    assert text[s:e] == "    def draw(self):\n        return 4\n"
    [(s, e)] = anchors.python_declarations(text, "LIMIT")
    assert text[s:e] == "LIMIT = 3\n"


def test_typescript_declarations_read_methods_constants_and_inner_functions():
    text = ("const PARITY = 0x1bd11bda;\nconst TABLE = Uint32Array.from([\n  1, 2,\n]);\n\n"
            "/** doc */\nexport class Gen {\n  readonly seed: number;\n  next(): number {\n    return 1;\n  }\n\n"
            "  normal(shape: number[]): number[] {\n    return shape.map((s) => s / 2); // a / 2 is no regex\n  }\n}\n\n"
            "export function setup(config: string): number {\n  const stepFn = (p: number) => {\n    return p + 1;\n  };\n"
            "  const re = /[}]/;\n  return stepFn(config.length) + (re.test(config) ? 1 : 0);\n}\n")
    [(s, e)] = anchors.ts_declarations(text, "TABLE")
    assert text[s:e] == "const TABLE = Uint32Array.from([\n  1, 2,\n]);\n"
    [(s, e)] = anchors.ts_declarations(text, "Gen.next")
    assert text[s:e] == "  next(): number {\n    return 1;\n  }\n"
    [(s, e)] = anchors.ts_declarations(text, "Gen.normal")
    assert text[s:e].endswith("// a / 2 is no regex\n  }\n")
    [(s, e)] = anchors.ts_declarations(text, "setup.stepFn")
    assert text[s:e] == "  const stepFn = (p: number) => {\n    return p + 1;\n  };\n"
    [(s, e)] = anchors.ts_declarations(text, "setup")
    assert text[s:e].endswith("? 1 : 0);\n}\n")
    with pytest.raises(anchors.AnchorError, match="ends inside"):
        anchors.ts_lines("function f() {\n  return `${x;\n}\n")


# --- the faults with a witness fail `verify attention` end to end -------------------------------

WITNESSED = [f for f in load(None, Path(__file__).resolve().parent.parent, str) if f.witness]


def test_every_witness_is_a_case_of_the_catalogue(repo_root):
    proc = run_verify(repo_root, "attention", "--list", timeout=60)
    ids = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert len(WITNESSED) >= 9
    assert {f.witness for f in WITNESSED} <= ids, {f.witness for f in WITNESSED} - ids


@pytest.mark.parametrize("fault", WITNESSED, ids=[f.id for f in WITNESSED])
def test_a_witnessed_fault_fails_verify_against_the_committed_goldens(repo_root, node, tmp_path, fault):
    """A one-line change of the port makes `verify attention` exit 1 and name the witness (the
    faulty copy run through --port-cmd, against golden/attention)."""
    apply(fault, repo_root, tmp_path)
    cli = tmp_path / "port_ts" / "src" / "cli.ts"
    proc = run_verify(repo_root, "attention", "--case", fault.witness, "--port-cmd", f"{node} {cli} run",
                      "--report", tmp_path / "report.json", timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    failing = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
    assert any(fault.witness in line for line in failing), f"no FAIL line names {fault.witness}:\n" + proc.stdout[-2000:]


LAYERS = ("linear", "embedding", "layer_norm", "ffn", "gelu", "dropout")  # the layers' cases: a run of seconds


def test_a_harmless_edit_is_reported_missed(repo_root, tmp_path):
    """A missed fault runs every stage of the cases it is given: here the cases of the layers alone
    (LAYERS' bundles, through --cases-dir), so that the run takes seconds; the whole catalogue's run is the test below."""
    harmless = dict(FAULT, id="comment", within="layerNormJs", find="H[o + k] = c; // xc for now",
                    replace="H[o + k] = c; // x - mean for now")
    caught = dict(FAULT, id="eps")
    cases = tmp_path / "cases"
    cases.mkdir()
    layers = [c for op in LAYERS for c in catalogue_cases(op=op)]
    (cases / "forward_layers.json").write_text(json.dumps({"cases": layers}))
    proc = run_verify(repo_root, "faults", "attention", "--catalogue", _catalogue(tmp_path, [harmless, caught]),
                      "--cases-dir", cases, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "MISSED port      forward   comment" in proc.stdout
    assert "CAUGHT port      forward   eps" in proc.stdout and "layer_norm." in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("1 of 2 faults caught in ")


@pytest.mark.slow
def test_every_fault_of_the_catalogue_is_caught(repo_root):
    """The whole catalogue (a few minutes on two cores): exit 0, every fault caught, a report."""
    proc = run_verify(repo_root, "faults", "attention", "--jobs", "2")
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    report = json.loads((repo_root / "reports" / "faults-attention.json").read_text())
    catalogue = {f.id: f for f in load(None, repo_root, str)}
    assert report["caught"] == report["total"] == len(catalogue)
    assert all(f["op"] == catalogue[f["id"]].op for f in report["faults"])  # each fault's op, in the account
    assert all(f["caught"] and (f["cases"] or f["engine_error"]) for f in report["faults"])
    witnesses = {f.id: f.witness for f in WITNESSED}
    missed = [(f["id"], witnesses[f["id"]]) for f in report["faults"]
              if f["id"] in witnesses and witnesses[f["id"]] not in {c["id"] for c in f["cases"]}]
    assert not missed, f"faults not caught by their witness case: {missed}"


def _relaid(text):
    """The same tokens in another layout: spaces around '=', after ',' and inside brackets."""
    for old, new in ((" = ", "  =  "), (", ", " ,  "), ("(", "( "), (")", " )")):
        text = text.replace(old, new)
    return text


def test_a_reformatted_tree_keeps_every_fault(repo_root, tmp_path):
    """Reformatting (here: the layout of every line of both engines changed) moves no fault: each
    still finds its one place, and applying it puts its replacement there."""
    tree = tmp_path / "tree"
    for part in ("reference", "port_ts/src", "port_ts/package.json"):
        source, target = repo_root / part, tree / part
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, target)
    for path in [*tree.rglob("*.py"), *tree.rglob("*.ts")]:
        path.write_text(_relaid(path.read_text()))
    faults = load(None, tree, str)
    assert len(faults) == len(load(None, repo_root, str))
    for fault in faults:
        assert fault.find not in (tree / fault.file).read_text() or _relaid(fault.find) == fault.find
        edited = apply(fault, tree, tmp_path / "applied" / fault.id)
        assert fault.replace in edited.read_text(), fault.id


def test_a_find_matches_across_line_breaks_and_only_whole_tokens_apart():
    text = "def f(x):\n    return scale * (\n        x\n        + 1)\n"
    found = anchors.occurrences("scale * (x + 1)", text, path="f.py")
    assert [text[f.start:f.end] for f in found] == ["scale * (\n        x\n        + 1)"]
    assert anchors.occurrences("returnscale", text, path="f.py") == []  # two words stay two words
    assert anchors.occurrences("scale*(x+2)", text, path="f.py") == []


def test_a_renamed_local_keeps_every_fault_that_names_it(repo_root, tmp_path):
    """Each fault whose find names a local of its declaration (a parameter or variable) still
    finds its one place after that local is renamed throughout the declaration, one at a time as
    a refactoring does, and its replacement is written with the new name; a name the declaration
    does not bind (a module's function) is never taken for a renamed local."""
    exercised = []
    for fault in load(None, repo_root, str):
        span = anchors.locate(repo_root, TREES[fault.engine][0], fault.within, fault.find)
        text = (repo_root / span.file).read_text(encoding="utf-8")
        declaration = text[span.start:span.end]
        for local in sorted(set(re.findall(r"[A-Za-z_]\w*", fault.find)) & anchors.bound_names(span.file, declaration)):
            names = {local: f"{local}_renamed"}
            moved = anchors.renamed(declaration, names)
            [found] = anchors.occurrences(fault.find, moved, path=span.file)
            assert found.renamed == names, (fault.id, found.renamed)
            start, end, replace = widened(moved, found.start, found.end, fault.find, anchors.renamed(fault.replace, names))
            assert anchors.renamed(fault.replace, names).strip() in moved[:start] + replace + moved[end:], (fault.id, local)
            exercised.append((fault, span, names))
    assert len(exercised) >= 50, len(exercised)
    fault, span, names = exercised[0]  # and once through the files, as `verify faults` applies it
    tree = tmp_path / "tree"
    for part in TREES[fault.engine]:
        (shutil.copytree if (repo_root / part).is_dir() else shutil.copy2)(repo_root / part, tree / part)
    text = (repo_root / span.file).read_text(encoding="utf-8")
    (tree / span.file).write_text(text[:span.start] + anchors.renamed(text[span.start:span.end], names) + text[span.end:])
    edited = apply(fault, tree, tmp_path / "applied").read_text(encoding="utf-8")
    assert anchors.renamed(fault.replace, names).strip() in edited
    module = "def f(x):\n    return helper(x) + 1\n"
    assert anchors.occurrences("other(x) + 1", module, path="m.py") == []  # helper is no local of f


def test_every_fault_applied_to_the_tree_as_it_is_is_the_literal_edit(repo_root, tmp_path):
    """Token matching changes nothing where the text is verbatim: applying each fault gives the
    file that replacing its `find` by its `replace` gives (indentation included), so no fault is
    "caught" only because its edit broke the syntax."""
    for fault in load(None, repo_root, str):
        original = (repo_root / fault.file).read_text(encoding="utf-8")
        span = anchors.locate(repo_root, TREES[fault.engine][0], fault.within, fault.find)
        at = original.index(fault.find, span.start, span.end)
        expected = original[:at] + fault.replace + original[at + len(fault.find):]
        assert apply(fault, repo_root, tmp_path / fault.id).read_text(encoding="utf-8") == expected, fault.id
