"""The tests' toolkit for the reference (and the benchmarks' torch side): the tolerances each op
declares (in their bundles, ops/attention/*.json, with their rules and reasons; docs/adding-an-op.md), the
catalogue's cases (the bundles' cases), closeness with one message
shape (verify/compare's figures: how many elements are beyond the tolerance, the greatest absolute
difference at its index, what was allowed there, both values), torch tensors of our arrays, golden
tensors for the runner's tests, central finite differences, and a port script run in Node. Its twin for the port is
port_ts/test/toolkit.ts."""

import json
import subprocess
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BUNDLES = ROOT / "ops" / "attention"  # one file per op: its declarations, its cases, its faults


def bundle(name):
    """The bundle ops/attention/<name>.json, parsed (an op's gradient check, gradcheck_<op>, is in <op>'s)."""
    path = BUNDLES / f"{name}.json"
    assert path.is_file(), f"no bundle {path.relative_to(ROOT)}; each op's cases live in ops/attention/<op>.json"
    return json.loads(path.read_text(encoding="utf-8"))


def catalogue_cases(op=None, kind=None):
    """The catalogue's case objects in the runner's order (the bundles by file name, then each one's
    order): all of them, or those of `op` and/or `kind`."""
    found = [c for path in sorted(BUNDLES.glob("*.json")) for c in json.loads(path.read_text(encoding="utf-8"))["cases"]]
    return [c for c in found if (op is None or c["op"] == op) and (kind is None or c["kind"] == kind)]


def catalogue_case(case_id):
    """The catalogue's case object `case_id`; a missing one fails the test, naming it."""
    found = [c for c in catalogue_cases() if c["id"] == case_id]
    assert len(found) == 1, f"the catalogue (ops/attention/*.json) must hold one case {case_id!r}, found {len(found)}"
    return found[0]


def catalogue_fault(fault_id):
    """The fault object `fault_id` as written (a bundle's, or one of ops/attention.json's shared
    ones); a missing one fails the test, naming it."""
    found = [f for path in [*sorted(BUNDLES.glob("*.json")), ROOT / "ops" / "attention.json"]
             for f in json.loads(path.read_text(encoding="utf-8")).get("faults", []) if f["id"] == fault_id]
    assert len(found) == 1, (f"the faults (ops/attention/*.json, ops/attention.json) must hold one fault "
                             f"{fault_id!r}, found {len(found)}")
    return found[0]


def array(x):
    """A float64 NumPy array of x (a NumPy array, a number, a list or a torch tensor)."""
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().numpy()
    return np.asarray(x, dtype=np.float64)


def t(a, grad=False):
    """A torch tensor of our array: float64 (requires_grad if asked), int64 for integers and bools."""
    import torch  # only the torch oracle's tests need it

    a = np.asarray(a)
    if a.dtype.kind in "iub":
        return torch.as_tensor(a.astype(np.int64))
    return torch.tensor(a, dtype=torch.float64, requires_grad=grad)


def tensor(values, dtype="float64"):
    """A decoded golden tensor (verify.compare.Tensor), as the runner reads one."""
    from verify.compare import Tensor

    return Tensor(dtype, np.asarray(values, dtype=np.float64))


class Tolerance(float):
    """A declared tolerance: its value (it is that float), `rule`, `why`, and for a finite-difference
    check its `step` (and `min_grad`, `floor`; None where not declared)."""

    def __new__(cls, op, name, entry):
        self = super().__new__(cls, entry["value"])
        self.op, self.name, self.rule, self.why = op, name, entry["rule"], entry["why"]
        self.step, self.min_grad, self.floor = entry.get("step"), entry.get("min_grad"), entry.get("floor")
        return self


def tolerance(op, name):
    """The op's declared tolerance `name` (its bundle); a missing one fails the test, naming
    what to declare."""
    from verify.ops import Undeclared, declarations

    try:
        return Tolerance(op, name, declarations().tolerance(op, name))
    except Undeclared as exc:
        raise AssertionError(str(exc)) from None


def _relative(tol, relative):
    """Whether tol applies to the tensor's scale: a declared tolerance says so by its rule."""
    if not isinstance(tol, Tolerance):
        return bool(relative)
    assert tol.rule in ("absolute", "scale"), (f"{tol.op}.{tol.name}: close() applies the rules absolute and scale, "
                                               f"not {tol.rule!r}; apply that rule in the test")
    return tol.rule == "scale"


def mismatch(actual, expected, what, tol, relative=False):
    """None when |actual - expected| <= tol everywhere (relative: tol times the expected tensor's
    scale, its greatest |value|, or 1 when that is 0); otherwise the message. NaN is never close
    and an infinity only to itself, as in verify/compare.py. A declared tolerance (tolerance())
    brings its rule."""
    relative = _relative(tol, relative)
    a, e = array(actual), array(expected)
    if a.shape != e.shape:
        return f"{what}: shape {a.shape}, expected {e.shape}"
    if a.size == 0:
        return None
    scale = 1.0
    if relative:
        finite = np.abs(e[np.isfinite(e)])
        scale = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    allowed = tol * scale
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(a == e, 0.0, np.abs(a - e))
    bad = ~(diff <= allowed)  # NaN differences are beyond any tolerance
    if not bad.any():
        return None
    worst = np.unravel_index(int(np.argmax(np.where(np.isnan(diff), np.inf, diff))), diff.shape)
    rule = f"{float(tol):g} x scale {scale:.3g}" if relative else f"{float(tol):g}"
    return (f"{what}: {int(bad.sum())} / {a.size} elements beyond the tolerance; greatest absolute difference "
            f"{diff[worst]:.6g} at index {tuple(int(i) for i in worst)} (up to {allowed:.3g} allowed: {rule}); "
            f"expected {float(e[worst])!r}, actual {float(a[worst])!r}")


def close(actual, expected, what, tol, relative=False):
    """Asserts mismatch(...) is None; returns the greatest |actual - expected| (relative: over the
    scale), for tests that also bound how small it is."""
    relative = _relative(tol, relative)
    message = mismatch(actual, expected, what, tol, relative)
    assert message is None, message
    a, e = array(actual), array(expected)
    if a.size == 0:
        return 0.0
    finite = np.abs(e[np.isfinite(e)])
    scale = float(finite.max()) if relative and finite.size and finite.max() > 0 else 1.0
    return float(np.max(np.where(a == e, 0.0, np.abs(a - e)))) / scale


STENCILS = {
    2: ((-1, -1.0), (1, 1.0)),  # (f(x + h) - f(x - h)) / 2h: truncation ~h^2
    4: ((-2, 1.0), (-1, -8.0), (1, 8.0), (2, -1.0)),  # (f(x-2h) - 8 f(x-h) + 8 f(x+h) - f(x+2h)) / 12h: ~h^4
}
DENOMINATORS = {2: 2.0, 4: 12.0}


def central_difference(f, x, index, h, order=4):
    """The central difference of the scalar f() along x[index], x perturbed in place and restored."""
    saved = x[index]
    values = []
    for step, _ in STENCILS[order]:
        x[index] = saved + step * h
        values.append(f())
    x[index] = saved
    total = 0.0
    for (_, weight), value in zip(STENCILS[order], values):
        total = total + weight * value
    return total / (DENOMINATORS[order] * h)


def fd_gradient(f, x, h, order=4):
    """The central differences of the scalar f() in every coordinate of x (perturbed in place)."""
    grad = np.empty_like(x)
    for index in np.ndindex(x.shape):
        grad[index] = central_difference(f, x, index, h, order)
    return grad


def run_port(node, root, script, *args, stdin=None, timeout=300):
    """Run the ES module `script` in Node from the checkout `root` (its imports are ./port_ts/...),
    with args as its argv[1:] and stdin as its input; the JSON it prints. A failing script fails
    the test with its stderr."""
    done = subprocess.run([str(node), "--input-type=module", "-e", script, *map(str, args)], cwd=root, input=stdin,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"the port's script failed:\n{done.stderr}"
    return json.loads(done.stdout)
