"""What the reports show beyond the verdict figures, built from both engines' tensors while they are
still in memory (the JSON report keeps it, so `verify show` and the HTML need nothing else):

- `axes` of every compared tensor (verify/axes.py), so indices read (batch 1, query 0, key 4);
- `decodes`: greedy decodes (`*.tokens`, int64) compared sequence by sequence: how many differ,
  the first diverging sequence and position, both token sequences, the logit margins there
  (`*.margin`), and a few rows for the HTML's table;
- `curves`: per-step records of a training run (`loss`, `grad_norm`) of both engines, with the
  first step at which they differ at all and the first beyond the tolerance;
- `heatmaps`: for every output matrix (attention weights first), a few 2-D slices of reference,
  port and |port - reference|, cropped around the greatest difference so the report stays small.
"""

import math

import numpy as np

from .axes import axis_names, is_matrix_of_weights
from .compare import close
from .expectations import STEP_TENSORS

MAX_MATRICES = 8  # heatmapped tensors per case
MAX_SLICES = 4  # 2-D slices per tensor: the one holding the greatest difference, then the first ones
CROP = 24  # rows and columns shown per slice (a window around the greatest difference)
DECODE_ROWS = 8  # sequences listed per decode
SHOWN_DIGITS = 4  # significant digits of the values drawn (the |difference| is exact, then rounded)


def _round(x, digits=SHOWN_DIGITS):
    x = float(x)
    if not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    return 0.0 if x == 0 else float(f"{x:.{digits}g}")


# _rounded's exact powers of ten: float(10**k) is 10**k itself for k <= 22 (5**22 < 2**53)
_POW10 = np.array([float(10 ** k) for k in range(23)])
_TIE_MARGIN = 1e-9  # how far from a rounding boundary a scaled value must be; its error is below 2e-12


def _rounded(values, digits=SHOWN_DIGITS):
    """[_round(v, digits) for v in values] of a 1-D float64 array (digits <= 4): the same floats
    and strings, bit for bit, in a few NumPy passes.

    For a finite x != 0 with e = floor(log10|x|) and s = digits - 1 - e, |s| <= 22, f"{x:.{digits}g}"
    writes N * 10**-s with N the integer nearest |x| * 10**s (N in [10**(digits-1), 10**digits)),
    and float() reads that back as the double nearest N * 10**-s. Here y = |x| * 10**s is one
    rounded product or quotient by an exact power of ten (relative error <= 2**-53, so |y - exact|
    < 2e-12 for y < 10**4), so rint(y) is that N wherever y lies farther than _TIE_MARGIN from a
    half-integer (and inside the range: log10's error could make e wrong by one near a power of
    ten); and N / 10**s or N * 10**-s, one correctly rounded operation on two exact doubles, is the
    double nearest N * 10**-s, as float() gives. Every other element (0, non-finite, |s| > 22, near
    a boundary) takes _round itself. tests/test_views.py compares the two on random and edge values."""
    flat = np.asarray(values, dtype=np.float64).ravel()
    a = np.abs(flat)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = (digits - 1) - np.floor(np.log10(a))  # inf for 0, nan for nan, -inf for inf
        fast = np.abs(s) <= 22  # False for the non-finite
        k = np.where(fast, s, 0).astype(np.int64)
        p = _POW10[np.abs(k)]
        up = k >= 0
        y = np.where(up, a * p, a / p)
        fast &= (y >= 10.0 ** (digits - 1) + _TIE_MARGIN) & (y < 10.0 ** digits - 0.5 - _TIE_MARGIN)
        fast &= np.abs(y - np.floor(y) - 0.5) > _TIE_MARGIN
        n = np.rint(y)
        v = np.copysign(np.where(up, n / p, n * p), flat)
    zero = flat == 0
    v[zero] = 0.0  # _round's 0.0, whatever the zero's sign
    found = v.tolist()
    for i in np.flatnonzero(~(fast | zero)).tolist():
        found[i] = _round(flat[i], digits)
    return found


def _exact(x):
    x = float(x)
    if not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    return x


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
        em = ref_out.get(margin_name)
        am = port_out.get(margin_name)
        margins_ok = em is not None and am is not None and em.shape == e.shape == am.shape
        E, A = np.atleast_2d(e.values), np.atleast_2d(a.values)
        EM = np.atleast_2d(em.values) if margins_ok else None
        AM = np.atleast_2d(am.values) if margins_ok else None
        differ = [i for i in range(E.shape[0]) if not np.array_equal(E[i], A[i])]

        def row(i):
            entry = {"sequence": i, "reference": _tokens(E[i]), "port": _tokens(A[i]), "position": None,
                     "margin": None}
            diverge = np.flatnonzero(E[i] != A[i])
            if diverge.size:
                entry["position"] = int(diverge[0])
            if margins_ok:
                at = entry["position"] if entry["position"] is not None else None
                entry["margins"] = {"reference": [_round(v) for v in EM[i]], "port": [_round(v) for v in AM[i]]}
                if at is not None:
                    entry["margin"] = {"reference": _exact(EM[i, at]), "port": _exact(AM[i, at])}
            else:
                entry["margins"] = None
            return entry

        shown = differ[:DECODE_ROWS]
        shown += [i for i in range(E.shape[0]) if i not in differ][: DECODE_ROWS - len(shown)]
        found.append({
            "tensor": name,
            "margin_tensor": margin_name if margins_ok else None,
            "sequences": int(E.shape[0]),
            "differing": len(differ),
            "first": row(differ[0]) if differ else None,
            "rows": [row(i) for i in sorted(shown)],
            "free_run": name in free_run,
        })
    return found


# --- training curves ----------------------------------------------------------------------------

def curves(ref_out, port_out, tol):
    found = []
    for name in STEP_TENSORS:
        e, a = ref_out.get(name), port_out.get(name)
        if e is None or a is None or e.values.size != a.values.size or e.values.size == 0:
            continue
        ev, av = e.values.ravel(), a.values.ravel()
        same_bits = (ev == av) | (np.isnan(ev) & np.isnan(av))
        beyond = np.flatnonzero(~close(av, ev, tol))
        different = np.flatnonzero(~same_bits)
        found.append({
            "tensor": name,
            "steps": int(ev.size),
            "first_step_different": int(different[0]) + 1 if different.size else None,
            "first_step_beyond": int(beyond[0]) + 1 if beyond.size else None,
            "reference": [_exact(v) for v in ev],
            "port": [_exact(v) for v in av],
        })
    return found


# --- heatmaps -----------------------------------------------------------------------------------

def _window(center, size, limit):
    start = max(0, min(center - size // 2, limit - size))
    return start, min(limit, start + size)


def _crop(e, a, lead, center):
    """One 2-D slice (leading index `lead`) of both engines' tensors, cropped to CROP x CROP around
    `center` (row, col): (lead, rows, cols, E, A)."""
    E, A = e[lead], a[lead]
    r0, r1 = _window(center[0], CROP, E.shape[0])
    c0, c1 = _window(center[1], CROP, E.shape[1])
    return lead, (r0, r1), (c0, c1), E[r0:r1, c0:c1], A[r0:r1, c0:c1]


def _rows(found, start, shape):
    """found[start:] as shape[0] rows of shape[1] values, and where the next matrix starts."""
    r, c = shape
    return [found[start + i * c:start + (i + 1) * c] for i in range(r)], start + r * c


def _slice_views(crops):
    """The drawings of cropped slices (_crop): each engine's values to SHOWN_DIGITS digits and
    |port - reference| to 3; every value of every slice rounded in one _rounded pass per digits."""
    same = [bool((E.view(np.uint64) == A.view(np.uint64)).all()) for *_, E, A in crops]
    four, three = [], []
    for (*_, E, A), alike in zip(crops, same):
        four.append(E.ravel())
        if not alike:
            four.append(A.ravel())
            with np.errstate(invalid="ignore", over="ignore"):
                three.append(np.where(E == A, 0.0, np.abs(A - E)).ravel())
    found4 = _rounded(np.concatenate(four)) if four else []
    found3 = _rounded(np.concatenate(three), 3) if three else []
    at4 = at3 = 0
    views = []
    for (lead, rows, cols, E, A), alike in zip(crops, same):
        reference, at4 = _rows(found4, at4, E.shape)
        if alike:  # the same doubles: the same drawing, no difference
            port = [list(r) for r in reference]
            nan = np.isnan(E)
            abs_diff = [[_round(math.nan if n else 0.0, 3) for n in r] for r in nan.tolist()] if nan.any() \
                else [[0.0] * E.shape[1] for _ in range(E.shape[0])]
        else:
            port, at4 = _rows(found4, at4, A.shape)
            abs_diff, at3 = _rows(found3, at3, E.shape)
        views.append({
            "index": [int(i) for i in lead],
            "rows": list(rows),
            "cols": list(cols),
            "reference": reference,
            "port": port,
            "abs_diff": abs_diff,
        })
    return views


def _slice_view(e, a, lead, center):
    """One 2-D slice (leading index `lead`), cropped to CROP x CROP around `center` (row, col)."""
    return _slice_views([_crop(e, a, lead, center)])[0]


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
        leads = [tuple(worst[:-2])]
        for lead in np.ndindex(*lead_shape):
            if len(leads) >= MAX_SLICES:
                break
            if tuple(lead) not in leads:
                leads.append(tuple(lead))
        slices = [_crop(e, a, lead, worst[-2:] if lead == tuple(worst[:-2]) else (0, 0))  # drawn below
                  for lead in leads[:MAX_SLICES]]
        found.append({
            "tensor": t["name"],
            "role": t["role"],
            "shape": list(e.shape),
            "axes": t.get("axes"),
            "passed": t["passed"],
            "slices_total": int(np.prod(lead_shape)) if lead_shape else 1,
            "slices": slices,
        })
    drawn = iter(_slice_views([c for h in found for c in h["slices"]]))  # every slice's values in one pass
    for h in found:
        h["slices"] = [next(drawn) for _ in h["slices"]]
    return found, len(candidates) - len(found)
