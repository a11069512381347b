"""A port written from the docs alone is judged on the forward cases of its ops without porting the
generator (docs/protocol.md, "Handed inputs"): tests/foreign_port.py, plain Python and math.fsum,
passes the masked softmax and layer norm cases within the tolerance, and each of its two
deliberate bugs fails exactly its op's cases."""

import ast
import json
import sys
from pathlib import Path

import pytest

from helpers import run_verify

ROOT = Path(__file__).resolve().parent.parent
PORT = ROOT / "tests" / "foreign_port.py"
SELECT = ("--case", "masked_softmax.*", "--case", "layer_norm.*")


def _verify(tmp_path, *port_args):
    report = tmp_path / "report.json"
    proc = run_verify(ROOT, "attention", "--port-cmd", " ".join([sys.executable, str(PORT), *port_args]),
                      *SELECT, "--report", report, timeout=600)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc, {c["id"]: c for c in json.loads(report.read_text())["cases"]}


def test_the_foreign_port_draws_nothing():
    """Its only imports are the standard library's: no generator, no reference code."""
    imported = {alias.name for node in ast.walk(ast.parse(PORT.read_text())) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module for node in ast.walk(ast.parse(PORT.read_text())) if isinstance(node, ast.ImportFrom)}
    assert imported == {"json", "math", "os", "sys"}


def test_a_faithful_foreign_port_passes_without_being_bit_identical(tmp_path):
    proc, cases = _verify(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert len(cases) == 14 and all(c["passed"] for c in cases.values())
    assert sum(c["status"] == "within the tolerance" for c in cases.values()) >= 10  # fsum rounds otherwise


@pytest.mark.parametrize("bug, op", [("softmax_keeps_len", "masked_softmax"), ("layer_norm_eps", "layer_norm")])
def test_each_bug_of_the_foreign_port_fails_its_op(tmp_path, bug, op):
    proc, cases = _verify(tmp_path, "--bug", bug)
    assert proc.returncode == 1, proc.stdout[-3000:]
    failed = {i for i, c in cases.items() if not c["passed"]}
    expected = {i for i in cases if i.startswith(op + ".")}
    if bug == "softmax_keeps_len":  # one key too many is kept: no case without lengths or with one key sees it
        expected -= {"masked_softmax.no_mask", "masked_softmax.k1"}
    assert failed == expected


COPYING = '''
import json, os, sys
request = json.load(sys.stdin)
os.makedirs(request["out_dir"], exist_ok=True)
for case in request["cases"]:
    with open(request["inputs_from"][case["id"]]) as fh:
        doc = json.load(fh)  # whatever it was handed, written back as its own
    doc.update(case=case, engine={"name": "port", "version": "0.1.0"}, generator="threefry2x32-20/polar-v1",
               schema_version=1)
    with open(os.path.join(request["out_dir"], case["id"] + ".json"), "w") as fh:
        json.dump(doc, fh)
    print(json.dumps({"id": case["id"], "ok": True, "seconds": 0.0}), flush=True)
'''


def test_a_port_that_copies_what_it_is_handed_fails(tmp_path):
    """The port is handed the inputs of the reference's document, never its outputs: a port that
    writes back its handed document has no outputs to show, and every case fails."""
    script = tmp_path / "copying_port.py"
    script.write_text(COPYING)
    report = tmp_path / "report.json"
    proc = run_verify(ROOT, "attention", "--port-cmd", f"{sys.executable} {script}", *SELECT, "--report", report,
                      timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:]
    cases = json.loads(report.read_text())["cases"]
    assert len(cases) == 14 and not any(c["passed"] for c in cases)
