"""A port written from the project's pages alone (docs/protocol.md, docs/goldens.md, docs/engines.md
and the layer docstrings it points to), in plain Python with lists and the math module, for two
ops: masked softmax and layer norm. It has no generator: it computes from the inputs the runner
hands it. Its sums are math.fsum's (exactly rounded), not the project's in-order sums, so it is
faithful but not bit-identical. tests/test_foreign_port.py judges it with `verify attention
--port-cmd`.

    python tests/foreign_port.py [--bug softmax_keeps_len|layer_norm_eps]

A --bug makes it wrong on purpose, to show the verdict fails it.
"""

import json
import math
import os
import sys

BUG = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--bug" else None


def rows(t):
    """The tensor's data as rows of its last axis."""
    width = t["shape"][-1]
    return [t["data"][i:i + width] for i in range(0, len(t["data"]), width)]


def masked_softmax(inputs):
    x = inputs["x"]
    B, Q = x["shape"][0], x["shape"][-2]
    per_batch = len(x["data"]) // (B * x["shape"][-1])  # rows per batch item (heads x queries)
    lens = inputs.get("valid_lens")
    out = []
    for r, row in enumerate(rows(x)):
        b, q = r // per_batch, r % Q
        if lens is not None:
            n = lens["data"][b] if len(lens["shape"]) == 1 else lens["data"][b * Q + q]
            keep = n + 1 if BUG == "softmax_keeps_len" else n
            row = [v if k < keep else -1e6 for k, v in enumerate(row)]
        top = max(row)
        e = [math.exp(v - top) for v in row]
        s = math.fsum(e)
        out += [v / s for v in e]
    return {"out": {"dtype": "float64", "shape": x["shape"], "data": out}}


def layer_norm(inputs, config):
    x, gamma, beta = inputs["x"], inputs["gamma"]["data"], inputs["beta"]["data"]
    eps = config.get("eps", 1e-3 if BUG == "layer_norm_eps" else 1e-5)
    out, means, rstds = [], [], []
    for row in rows(x):
        d = len(row)
        mean = math.fsum(row) / d
        var = math.fsum((v - mean) ** 2 for v in row) / d
        rstd = 1 / math.sqrt(var + eps)
        out += [(v - mean) * rstd * g + b for v, g, b in zip(row, gamma, beta)]
        means.append(mean)
        rstds.append(rstd)
    lead = x["shape"][:-1]
    return {"out": {"dtype": "float64", "shape": x["shape"], "data": out},
            "mean": {"dtype": "float64", "shape": lead, "data": means},
            "rstd": {"dtype": "float64", "shape": lead, "data": rstds}}


def outputs(case, inputs):
    if case["op"] == "masked_softmax":
        return masked_softmax(inputs)
    if case["op"] == "layer_norm":
        return layer_norm(inputs, case.get("config", {}))
    raise ValueError(f"this port has no op {case['op']!r}")


def finite(value):
    """NaN and the infinities as the strings docs/goldens.md asks for."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def main():
    request = json.load(sys.stdin)
    os.makedirs(request["out_dir"], exist_ok=True)
    for case in request["cases"]:
        status = {"id": case["id"]}
        try:
            with open(request["inputs_from"][case["id"]], encoding="utf-8") as fh:
                inputs = json.load(fh)["inputs"]  # KeyError: no inputs handed for this case
            doc = {"schema_version": 1, "engine": {"name": "port", "version": "0.1.0"},
                   "generator": "threefry2x32-20/polar-v1", "case": case, "inputs": inputs,
                   "outputs": outputs(case, inputs)}
            with open(os.path.join(request["out_dir"], case["id"] + ".json"), "w", encoding="utf-8") as fh:
                json.dump(finite(doc), fh, sort_keys=True, indent=2)
            status.update(ok=True)
        except Exception as exc:
            status.update(ok=False, error=f"{type(exc).__name__}: {exc}")
        status["seconds"] = 0.0
        print(json.dumps(status), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
