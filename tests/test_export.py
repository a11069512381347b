"""`verify export attention`: a baked run in the form a site replays. The exported parameters
must reproduce what the site shows, the history must be the committed golden's, and a re-export
must change no byte; the export is asked of the engine through the protocol (request kind "export")."""

import json
import subprocess
import sys

import numpy as np

from reference.models.alignment import alignment_data, alignment_loss, init_alignment_params
from reference.core.rng import Generator
from toolkit import catalogue_case


def _export(repo_root, out):
    proc = subprocess.run([sys.executable, "-m", "verify", "export", "attention", "--case", "train.alignment",
                           "--out", str(out)], cwd=repo_root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out / "train.alignment.json"


def _array(t):
    return np.array(t["data"], dtype=np.float64).reshape(t["shape"])


def test_export_reproduces_the_site_view_and_is_deterministic(repo_root, tmp_path):
    first = _export(repo_root, tmp_path / "a")
    second = _export(repo_root, tmp_path / "b")
    assert first.read_bytes() == second.read_bytes()
    doc = json.loads(first.read_text())
    golden = json.loads((repo_root / "golden/attention/port/train.alignment.json").read_text())
    assert doc["history"]["loss"] == golden["outputs"]["loss"]
    assert doc["digests"]["init_params"] == golden["digests"]["init_params"]
    # The trained parameters alone reproduce the alignment the site shows, on the run's data
    # (drawn again from the seed: parameters first, then the embeddings).
    config = doc["config"]
    rng = Generator(doc["seed"])
    init_alignment_params(rng, config["E"], config["H"])
    data = alignment_data(rng, config["E"], config["pairs"])
    params = {name: _array(t) for name, t in doc["parameters"].items()}
    _, cache = alignment_loss(params, data)
    assert np.array_equal(cache["weights"][0], _array(doc["shown"]["alignment.weights"]))
    assert np.argmax(cache["weights"][0], axis=-1).tolist() == [0, 2, 1, 3]


def test_export_without_a_training_case_is_a_usage_error(repo_root, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "verify", "export", "attention", "--case", "masked_softmax.*",
                           "--out", str(tmp_path)], cwd=repo_root, capture_output=True, text=True)
    assert proc.returncode == 2 and "no training case" in proc.stderr and "Traceback" not in proc.stderr


def test_the_export_is_asked_of_the_engine_through_the_protocol(repo_root, node, tmp_path):
    """A request of kind "export" (docs/protocol.md): both engines write the same run's export
    document, the same values but the engine's name; a case that does not train is refused by name."""
    case = catalogue_case("train.alignment")
    docs = {}
    for name, argv in (("reference", [sys.executable, "-m", "reference", "run"]), ("port", [str(node), "port_ts/src/cli.ts", "run"])):
        request = {"protocol": 1, "kind": "export", "out_dir": str(tmp_path / name),
                   "cases": [case, {"id": "masked_softmax.x", "kind": "forward", "op": "masked_softmax", "seed": 0, "config": {}}]}
        proc = subprocess.run(argv, cwd=repo_root, input=json.dumps(request), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        statuses = [json.loads(line) for line in proc.stdout.splitlines()]
        assert statuses[0]["ok"] and not statuses[1]["ok"]
        assert statuses[1]["error"] == "export takes training cases; 'masked_softmax.x' is of kind 'forward'"
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == ["train.alignment.json"]
        docs[name] = json.loads((tmp_path / name / "train.alignment.json").read_text())
    assert docs["reference"]["engine"]["name"] == "reference" and docs["port"]["engine"]["name"] == "port"
    assert dict(docs["reference"], engine=None) == dict(docs["port"], engine=None)


FAKE_PORT = """
import json, os, sys
request = json.load(sys.stdin)
os.makedirs(request["out_dir"], exist_ok=True)
for case in request["cases"]:  # answers every request as if it were of kind "cases": a golden, not an export
    with open(os.path.join(request["out_dir"], case["id"] + ".json"), "w") as fh:
        json.dump({"schema_version": 1, "case": case, "inputs": {}, "outputs": {}}, fh)
    print(json.dumps({"id": case["id"], "ok": True}))
"""


def test_a_port_that_does_not_answer_the_export_kind_is_refused_and_nothing_is_written(repo_root, tmp_path):
    fake = tmp_path / "fake_port.py"
    fake.write_text(FAKE_PORT)
    out = tmp_path / "exports"
    proc = subprocess.run([sys.executable, "-m", "verify", "export", "attention", "--case", "train.alignment",
                           "--out", str(out), "--port-cmd", f"{sys.executable} {fake}"],
                          cwd=repo_root, capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "the port's export of train.alignment is not an export document: it lacks export_version, id" in proc.stderr
    assert 'request of kind "export"' in proc.stderr and not out.exists()
    # The faithful variant: any engine that speaks the kind, here the reference given as the port.
    proc = subprocess.run([sys.executable, "-m", "verify", "export", "attention", "--case", "train.alignment",
                           "--out", str(out), "--port-cmd", f"{sys.executable} -m reference run"],
                          cwd=repo_root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((out / "train.alignment.json").read_text())["engine"]["name"] == "reference"
