"""What the reports show beyond the verdict figures, built from both engines' tensors while they are
still in memory (the JSON report keeps it, so `verify show` and the HTML need nothing else): the
`axes` of every tensor, greedy `decodes` compared sequence by sequence with their logit margins, a
training run's per-step `curves`, and `heatmaps`: 2-D slices of each output matrix (attention
weights first), cropped around the greatest difference so the report stays small."""

import math
from itertools import chain

import numpy as np

from .axes import axis_names, is_matrix_of_weights
from .compare import close
from .expectations import STEP_TENSORS

MAX_MATRICES = 8  # heatmapped tensors per case
MAX_SLICES = 4  # 2-D slices per tensor: the one holding the greatest difference, then the first ones
CROP = 24  # rows and columns shown per slice (a window around the greatest difference)
DECODE_ROWS = 8  # sequences listed per decode
SHOWN_DIGITS = 4  # significant digits of the values drawn (the |difference| is exact, then rounded)


def _exact(x):
    """x as a float, a non-finite one as the JSON report writes it."""
    x = float(x)
    return x if math.isfinite(x) else "NaN" if math.isnan(x) else "Infinity" if x > 0 else "-Infinity"


def _round(x, digits=SHOWN_DIGITS):
    x = _exact(x)
    return x if isinstance(x, str) else 0.0 if x == 0 else float(f"{x:.{digits}g}")


def enrich(result, case, fresh, tol):
    """Add axes to result's tensors and the decodes / curves / heatmaps sections."""
    for t in result["tensors"]:
        t["axes"] = axis_names(case.op, t["name"], len(t["shape"])) if t["shape"] is not None else None
    result["decodes"], result["curves"], result["heatmaps"], result["heatmaps_omitted"] = [], [], [], 0
    ref, port = fresh.get("reference"), fresh.get("port")
    if ref is None or port is None or ref.doc is None or port.doc is None:
        return result
    outs = (ref.tensors["outputs"], port.tensors["outputs"])
    free_run = {t["name"] for t in result["tensors"] if t.get("part") == "free_run"}
    result["decodes"] = decodes(case, *outs, free_run)
    if case.kind == "training":
        result["curves"] = curves(*outs, tol)
    result["heatmaps"], result["heatmaps_omitted"] = heatmaps(result["tensors"], ref.tensors, port.tensors)
    return result


# --- decodes ------------------------------------------------------------------------------------

def _tokens(row):
    """A decoded sequence without its -1 padding."""
    return [int(v) for v in row if v >= 0]


def decodes(case, ref_out, port_out, free_run):
    found = []
    for name in sorted(ref_out):
        if not name.endswith(".tokens") or name not in port_out:
            continue
        e, a = ref_out[name], port_out[name]
        if e.dtype != "int64" or e.shape != a.shape or e.values.ndim not in (1, 2):
            continue
        margin_name = name[: -len("tokens")] + "margin"
        em, am = ref_out.get(margin_name), port_out.get(margin_name)
        margins_ok = em is not None and am is not None and em.shape == e.shape == am.shape
        E, A = np.atleast_2d(e.values), np.atleast_2d(a.values)
        EM, AM = (np.atleast_2d(em.values), np.atleast_2d(am.values)) if margins_ok else (None, None)
        differ = [i for i in range(E.shape[0]) if not np.array_equal(E[i], A[i])]

        def row(i):
            diverge = np.flatnonzero(E[i] != A[i])
            at = int(diverge[0]) if diverge.size else None
            return {"sequence": i, "reference": _tokens(E[i]), "port": _tokens(A[i]), "position": at,
                    "margin": ({"reference": _exact(EM[i, at]), "port": _exact(AM[i, at])}
                               if margins_ok and at is not None else None),
                    "margins": ({"reference": [_round(v) for v in EM[i]], "port": [_round(v) for v in AM[i]]}
                                if margins_ok else None)}

        shown = differ[:DECODE_ROWS]
        shown += [i for i in range(E.shape[0]) if i not in differ][: DECODE_ROWS - len(shown)]
        found.append({"tensor": name, "margin_tensor": margin_name if margins_ok else None,
                      "sequences": int(E.shape[0]), "differing": len(differ),
                      "first": row(differ[0]) if differ else None, "rows": [row(i) for i in sorted(shown)],
                      "free_run": name in free_run})
    return found


# --- training curves ----------------------------------------------------------------------------

def curves(ref_out, port_out, tol):
    found = []
    for name in STEP_TENSORS:
        e, a = ref_out.get(name), port_out.get(name)
        if e is None or a is None or e.values.size != a.values.size or e.values.size == 0:
            continue
        ev, av = e.values.ravel(), a.values.ravel()
        different = np.flatnonzero(~((ev == av) | (np.isnan(ev) & np.isnan(av))))
        beyond = np.flatnonzero(~close(av, ev, tol))
        found.append({"tensor": name, "steps": int(ev.size),
                      "first_step_different": int(different[0]) + 1 if different.size else None,
                      "first_step_beyond": int(beyond[0]) + 1 if beyond.size else None,
                      "reference": [_exact(v) for v in ev], "port": [_exact(v) for v in av]})
    return found


# --- heatmaps -----------------------------------------------------------------------------------

def _window(center, limit):
    """[start, stop) of CROP positions around center, inside [0, limit)."""
    start = max(0, min(center - CROP // 2, limit - CROP))
    return [start, min(limit, start + CROP)]


def _drawn(matrix, digits=SHOWN_DIGITS):
    return [[_round(v, digits) for v in row] for row in matrix.tolist()]


def _slice_view(e, a, lead, center):
    """One 2-D slice (leading index `lead`), cropped to CROP x CROP around `center` (row, col): each
    engine's values to SHOWN_DIGITS digits and |port - reference| to 3."""
    rows, cols = _window(center[0], e.shape[-2]), _window(center[1], e.shape[-1])
    E, A = (x[lead][rows[0]:rows[1], cols[0]:cols[1]] for x in (e, a))
    with np.errstate(invalid="ignore", over="ignore"):
        abs_diff = np.where(E == A, 0.0, np.abs(A - E))
    return {"index": [int(i) for i in lead], "rows": rows, "cols": cols,
            "reference": _drawn(E), "port": _drawn(A), "abs_diff": _drawn(abs_diff, 3)}


def heatmaps(tensor_results, ref_tensors, port_tensors):
    candidates = []
    for t in tensor_results:
        if t["shape"] is None or len(t["shape"]) < 2 or t["dtype"] != "float64" or t["message"] and t["max_abs"] is None:
            continue
        if t["role"] == "input" and t["passed"]:
            continue  # inputs come from the shared generator: shown only when they differ
        part = "outputs" if t["role"] == "output" else "inputs"
        e, a = ref_tensors[part].get(t["name"]), port_tensors[part].get(t["name"])
        if e is None or a is None or e.shape != a.shape or 0 in e.shape:
            continue
        rank = (0 if is_matrix_of_weights(t.get("axes")) else 1, 0 if not t["passed"] else 1)
        candidates.append((rank, t, e.values, a.values))
    candidates.sort(key=lambda c: c[0])
    found = []
    for _, t, e, a in candidates[:MAX_MATRICES]:
        lead_shape = e.shape[:-2]
        worst = tuple(t["max_abs_index"]) if t["max_abs_index"] is not None else (0,) * e.ndim
        leads = list(dict.fromkeys(chain([tuple(worst[:-2])], np.ndindex(*lead_shape))))[:MAX_SLICES]
        slices = [_slice_view(e, a, lead, worst[-2:] if lead == tuple(worst[:-2]) else (0, 0)) for lead in leads]
        found.append({"tensor": t["name"], "role": t["role"], "shape": list(e.shape), "axes": t.get("axes"),
                      "passed": t["passed"], "slices_total": int(np.prod(lead_shape)), "slices": slices})
    return found, len(candidates) - len(found)
