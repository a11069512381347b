"""`verify attention` on the user's path: the README's main command, run the way a maintainer runs
it, through the reference cache, and with --fresh (docs/runner.md, "The reference cache").

The runs take one case of each kind the cache answers differently: forward ops
(masked_softmax.lens_*), a gradient check (gradcheck.alignment.act4) and a training run whose
checkpoints the port replays from the reference's training states (train.alignment). The first
run computes the reference and keeps it; the second answers it from the cache; both must give the
first run's report, apart from the timings and the fields that say where the reference came from,
and `--fresh` must give it too. A wrong port fails alike on both paths: the port always runs.

The runs go in a copy of the checkout (their reports/ are their own) with a cache of their own:
the session's cache (conftest.py) is shared by every test, and here the first run must find it
empty. The cache key is the session's.
"""

import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers import judged, project_copy, split_output, user_attention
from toolkit import catalogue_fault

CASES = ("--case", "masked_softmax.lens_*", "--case", "gradcheck.alignment.act4", "--case", "train.alignment")
# in the runner's order: the bundles' (ops/attention/<op>.json) by name, then each one's own
IDS = ["gradcheck.alignment.act4", "masked_softmax.lens_1d", "masked_softmax.lens_2d", "train.alignment"]
WRONG_PORT = "port.softmax.valid_len_off_by_one"  # a fault of ops/attention/masked_softmax.json, witnessed by lens_1d


def _own_cache(cache):
    """The environment with the project's cache in `cache` ($ATTENTION_PARITY_CACHE: the reference
    cache is cache/reference), the session's cache key."""
    return dict(os.environ, ATTENTION_PARITY_CACHE=str(cache))


def _printed(stdout):
    """What a run printed about the cases and the verdict, without the lines that say where the
    reference came from (`reference: ...` before the cases and after them, `reference cache: ...`)."""
    kept = "\n".join(line for line in stdout.splitlines() if not line.startswith(("reference: ", "reference cache: ")))
    return split_output(kept)


def _passed(proc, report):
    assert proc.returncode == 0 and report is not None, proc.stdout[-3000:] + proc.stderr
    return report


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The three runs of the faithful checkout, in this order: first (an empty cache), second (the
    same cache), fresh (--fresh)."""
    tmp = tmp_path_factory.mktemp("user-path")
    project, env = project_copy(tmp), _own_cache(tmp / "cache")
    done = {name: user_attention(project, tmp / f"{name}.json", *CASES, *extra, env=env)
            for name, extra in (("first", ()), ("second", ()), ("fresh", ("--fresh",)))}
    return SimpleNamespace(tmp=tmp, cache=tmp / "cache", env=env, **done)


def test_the_first_run_computes_the_reference_and_keeps_it(runs):
    proc, report = runs.first
    _passed(proc, report)
    assert [c["id"] for c in report["cases"]] == IDS and all(c["passed"] for c in report["cases"])
    assert {c["kind"] for c in report["cases"]} == {"forward", "gradcheck", "training"}
    assert report["reference"] == {"fresh": True, "from_cache": 0, "cases": len(IDS)}
    cache = report["reference_cache"]
    assert cache["not_used"] is None and cache["from_cache"] == [] and sorted(cache["stored"]) == sorted(IDS), cache
    assert Path(cache["directory"]) == runs.cache / "reference"
    assert report["timings"]["engines"]["reference"]["processes"] >= 1


def test_the_second_run_answers_the_reference_from_the_cache_and_reports_the_same(runs):
    (first, before), (proc, report) = runs.first, runs.second
    _passed(proc, report)
    assert report["reference"] == {"fresh": False, "from_cache": len(IDS), "cases": len(IDS)}
    cache = report["reference_cache"]
    assert sorted(cache["from_cache"]) == sorted(IDS) and cache["stored"] == [] and cache["damaged"] == [], cache
    assert cache["key"] == before["reference_cache"]["key"]
    assert report["timings"]["engines"]["reference"]["processes"] == 0  # the reference did not run
    assert report["timings"]["engines"]["replay"]["processes"] >= 1  # the port replayed the cached training states
    assert judged(report) == judged(before)
    assert _printed(proc.stdout) == _printed(first.stdout)
    assert proc.stdout.splitlines()[0].startswith(f"reference: {len(IDS)} of {len(IDS)} case(s) from cache"), proc.stdout[:300]


def test_fresh_runs_the_reference_and_gives_the_same_verdicts(runs):
    (first, before), (proc, report) = runs.first, runs.fresh
    _passed(proc, report)
    assert report["reference"] == {"fresh": True, "from_cache": 0, "cases": len(IDS)} and "reference_cache" not in report
    assert report["timings"]["engines"]["reference"]["processes"] >= 1
    assert judged(report) == judged(before)
    assert _printed(proc.stdout) == _printed(first.stdout)


def _plant(project, fault_id):
    """Apply one fault of the catalogue (an op's bundle, ops/attention/<op>.json) to the copy's port: its `find` text, found once
    under port_ts/src, replaced."""
    fault = catalogue_fault(fault_id)
    assert fault["engine"] == "port", fault
    found = [p for p in sorted((project / "port_ts" / "src").rglob("*.ts")) if fault["find"] in p.read_text(encoding="utf-8")]
    assert len(found) == 1 and found[0].read_text(encoding="utf-8").count(fault["find"]) == 1, \
        f"expected the text of {fault_id} once under port_ts/src, found it in {found}"
    text = found[0].read_text(encoding="utf-8")
    found[0].write_text(text.replace(fault["find"], fault["replace"]), encoding="utf-8")


def test_a_wrong_port_fails_alike_with_the_reference_from_the_cache_and_fresh(runs, tmp_path):
    project = project_copy(tmp_path)
    _plant(project, WRONG_PORT)
    cache = tmp_path / "cache"
    shutil.copytree(runs.cache, cache)  # the faithful runs' cache: the reference is unchanged
    env = _own_cache(cache)
    cached, cached_report = user_attention(project, tmp_path / "cached.json", *CASES, env=env)
    fresh, fresh_report = user_attention(project, tmp_path / "fresh.json", *CASES, "--fresh", env=env)
    for proc, report in ((cached, cached_report), (fresh, fresh_report)):
        assert proc.returncode == 1 and report is not None, proc.stdout[-3000:] + proc.stderr
        failed = [c["id"] for c in report["cases"] if not c["passed"]]
        assert "masked_softmax.lens_1d" in failed, failed
    assert sorted(cached_report["reference_cache"]["from_cache"]) == sorted(IDS)  # the failure came on the cached path
    assert cached_report["reference"]["fresh"] is False and fresh_report["reference"]["fresh"] is True
    assert judged(cached_report) == judged(fresh_report)
    assert _printed(cached.stdout) == _printed(fresh.stdout)
