"""`verify export attention`: a baked run in the form a site replays. The exported parameters
must reproduce what the site shows, the history must be the committed golden's, and a re-export
must change no byte."""

import json
import subprocess
import sys

import numpy as np

from reference.models.alignment import alignment_data, alignment_loss, init_alignment_params
from reference.core.rng import Generator


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
