"""Assets of the pretrained cases (docs/pretrained.md): the model directory the runner sends both
engines ({"assets": {"all-MiniLM-L6-v2": dir}}), the "not run" reason of a case whose model is
missing (never counted as passed), and the comparison of the engines' <id>.full.json documents,
every hidden state and attention weight, by the rule of every other case.
"""

from . import decoded, layout, models
from .compare import compare_named
from .documents import DocumentError, case_difference, read_bytes

MODEL = models.MODEL
KIND = "pretrained"


def model_dir(name=MODEL):
    """The directory holding the model's checked files (verify/models.py), or None."""
    return models.model_dir(name)


def plan(cases):
    """(request fields for the engines {"assets": {name: dir}} or {}, {case id: why it is not run})
    for the selected cases."""
    assets, missing, absent = {}, {}, {}
    for case in cases:
        name = case.spec.get("config", {}).get("model") if case.kind == KIND else None
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


def compare_full(case, out_dirs, tol, schemas=None):
    """Compare the engines' <id>.full.json (reference as expected, port as actual) ->
    (TensorResults of every input and output, errors). out_dirs: {"reference": dir, "port": dir}."""
    tensors, errors, docs = [], [], {}
    for name in ("reference", "port"):
        path = layout.full(out_dirs[name], case.id)
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
