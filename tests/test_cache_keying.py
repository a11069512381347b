"""The reference cache's key, tried by changing each thing it is made from (verify/reference_cache.py,
environment() and case_key(); docs/runner.md, "The reference cache"): the next `verify attention`
must miss the cache for the cases the change concerns, and only those, then keep their fresh
output beside the old entries. What the key leaves out (the goldens, the port) is judged afresh on
every run, cached or not.

Each test starts from a copy of one warm cache (the module's: masked_softmax.lens_1d and lens_2d,
kept by a run of a copy of the checkout) and runs `verify attention` as the README does
(helpers.user_attention), with the session's cache key. What every case's key shares is changed
one input at a time by the rows of tests/hostile_kinds.py's area "reference cache key": the
interpreter, NumPy and the platform for the runner alone, by a `python -c` wrapper that rewrites
what the key reads (sys.version, numpy.__version__, platform.platform(), ...) before the runner
is imported; NumPy's CPU features by NPY_DISABLE_CPU_FEATURES, which really changes NumPy's
dispatch; the protocol and the cache's format in a copy of the checkout. Tried elsewhere:
the reference's sources (a planted reference fault is a miss and is caught:
tests/test_reference_cache.py, with the digest's own test there) and a pretrained case's pinned
model files (case_key, tests/test_reference_cache.py: another pinned release cannot be placed
for an end-to-end run, its files would not verify).
"""

import json
import os
import re
import shutil
import subprocess
import sys
from types import SimpleNamespace

import pytest

from helpers import judged, project_copy, user_attention
from hostile_kinds import params

CASES = ("--case", "masked_softmax.lens_*")
IDS = ["masked_softmax.lens_1d", "masked_softmax.lens_2d"]
WRAPPER = """import sys
sys.dont_write_bytecode = True  # nothing written under another interpreter's name
{change}
from verify.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _env(cache, **more):
    return dict(os.environ, ATTENTION_PARITY_CACHE=str(cache), **more)


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A copy of the checkout and a cache root holding the reference's output of IDS, with its key."""
    tmp = tmp_path_factory.mktemp("keying")
    project = project_copy(tmp)
    proc, report = user_attention(project, tmp / "warm.json", *CASES, env=_env(tmp / "cache"))
    assert proc.returncode == 0 and report is not None, proc.stdout[-3000:] + proc.stderr
    assert sorted(report["reference_cache"]["stored"]) == IDS, report["reference_cache"]
    return SimpleNamespace(project=project, cache=tmp / "cache", key=report["reference_cache"]["key"])


@pytest.fixture
def cache(warm, tmp_path):
    """A copy of the warm cache root for this test."""
    shutil.copytree(warm.cache, tmp_path / "cache")
    return tmp_path / "cache"


def _cache_of(proc, report):
    assert report is not None and "Traceback" not in proc.stderr, proc.stdout[-3000:] + proc.stderr
    outcome = report["reference_cache"]
    assert outcome["not_used"] is None and outcome["damaged"] == [], outcome
    return outcome


def test_an_unchanged_run_is_answered_from_the_cache_whole(warm, cache, tmp_path):
    proc, report = user_attention(warm.project, tmp_path / "r.json", *CASES, env=_env(cache))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    outcome = _cache_of(proc, report)
    assert sorted(outcome["from_cache"]) == IDS and outcome["stored"] == [] and outcome["key"] == warm.key


def _a_dispatched_cpu_feature():
    """A CPU feature NumPy dispatches to on this machine (on, and not in its baseline), or None."""
    probe = ("import numpy\n"
             "try:\n    from numpy._core import _multiarray_umath as m\n"
             "except ImportError:\n    from numpy.core import _multiarray_umath as m\n"
             "print(' '.join(f for f in m.__cpu_dispatch__ if m.__cpu_features__.get(f)))")
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    features = found.stdout.split()
    return features[-1] if features else None


def _bump(project, name):
    """Raise the runner's constant `name = N` (defined once under verify/) to N + 1 in the copy."""
    pattern = re.compile(rf"^{name} = (\d+)\b", re.M)
    found = [p for p in sorted((project / "verify").rglob("*.py")) if pattern.search(p.read_text(encoding="utf-8"))]
    assert len(found) == 1, f"expected `{name} = N` in one module under verify/, found it in {found}"
    text = found[0].read_text(encoding="utf-8")
    found[0].write_text(pattern.sub(lambda m: f"{name} = {int(m.group(1)) + 1}", text, count=1), encoding="utf-8")


@pytest.mark.parametrize("kind", params("reference cache key"))
def test_a_changed_key_input_misses_every_case(kind, warm, cache, tmp_path):
    how, what = kind.data
    project, env, python = warm.project, _env(cache), None
    if how == "python":
        python = WRAPPER.format(change=what)
    elif how == "environment":
        assert what == "NPY_DISABLE_CPU_FEATURES", what
        env[what] = _a_dispatched_cpu_feature()
        if env[what] is None:
            pytest.skip("NumPy dispatches to no optional CPU feature on this machine: there is none to switch off")
    else:
        assert how == "bump", how
        project = project_copy(tmp_path)
        _bump(project, what)
    proc, report = user_attention(project, tmp_path / "changed.json", *CASES, env=env, python=python)
    assert proc.returncode == kind.exit and kind.says in proc.stdout, proc.stdout[-3000:] + proc.stderr
    outcome = _cache_of(proc, report)
    assert outcome["from_cache"] == [] and sorted(outcome["stored"]) == IDS and outcome["key"] != warm.key, outcome
    proc, report = user_attention(warm.project, tmp_path / "unchanged.json", *CASES, env=_env(cache))
    assert sorted(_cache_of(proc, report)["from_cache"]) == IDS  # the old entries kept beside, still answered


def test_a_changed_case_misses_that_case_alone(warm, cache, tmp_path):
    project = project_copy(tmp_path)
    changed, kept = "masked_softmax.lens_2d", "masked_softmax.lens_1d"
    for path in sorted((project / "ops" / "attention").glob("*.json")):
        catalogue = json.loads(path.read_text(encoding="utf-8"))
        for case in catalogue["cases"]:
            if case["id"] == changed:
                case["seed"] += 1  # other inputs: a reference answered from the old entry would disagree with the port
                path.write_text(json.dumps(catalogue, indent=2) + "\n", encoding="utf-8")
    proc, report = user_attention(project, tmp_path / "r.json", *CASES, env=_env(cache))
    outcome = _cache_of(proc, report)
    assert outcome["from_cache"] == [kept] and outcome["stored"] == [changed] and outcome["key"] == warm.key, outcome
    entry = next(c for c in report["cases"] if c["id"] == changed)
    assert entry["tensors"] and all(t["passed"] for t in entry["tensors"]), entry["tensors"]  # the reference ran afresh
    assert entry["goldens"]["reference"] != "fresh"  # the committed golden is of the old seed
    assert proc.returncode == 1 and [c["id"] for c in report["cases"] if not c["passed"]] == [changed], proc.stdout[-3000:]


def test_a_changed_golden_is_not_in_the_key_and_is_judged_alike_from_the_cache_and_fresh(warm, cache, tmp_path):
    project = project_copy(tmp_path)
    golden = project / "golden" / "attention" / "reference" / "masked_softmax.lens_1d.json"
    doc = json.loads(golden.read_text(encoding="utf-8"))
    tensor = next(iter(doc["outputs"].values()))
    tensor["data"][0] += 1.0
    golden.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    cached, cached_report = user_attention(project, tmp_path / "cached.json", *CASES, env=_env(cache))
    fresh, fresh_report = user_attention(project, tmp_path / "fresh.json", *CASES, "--fresh", env=_env(cache))
    assert sorted(_cache_of(cached, cached_report)["from_cache"]) == IDS  # the goldens are no part of the key
    for proc, report in ((cached, cached_report), (fresh, fresh_report)):
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
        assert [c["id"] for c in report["cases"] if not c["passed"]] == ["masked_softmax.lens_1d"]
    assert judged(cached_report) == judged(fresh_report)
