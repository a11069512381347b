"""The reference cache (verify/reference_cache.py, docs/runner.md "The reference cache").

What it must never do is hide something: a change of the reference (a planted fault), of the case
or of the environment is a miss, so the reference runs afresh and the fault is caught; a wrong
port fails with the reference answered from the cache (the port always runs); a damaged entry is
run afresh and reported; --fresh, VERIFY_FRESH and --reference-cmd bypass it. What it must do is
answer an unchanged case with the very documents a fresh run writes: the verdicts of a warm run
equal the fresh run's, and a faithful variant of the port still passes.

These tests run with a cache directory and a cache key (XDG_CONFIG_HOME) of their own, not the
session's (conftest.py). The key's every input, changed one at a time, is tried in
tests/test_cache_keying.py; the user's own path (a run, a second run, --fresh) in
tests/test_user_path.py; what the cache trusts (its key, its directory's owner, symbolic links) in
tests/test_trust_cache.py.
"""

import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import port_variants
from helpers import judged, project_copy
from toolkit import catalogue_case, catalogue_fault
from verify.tools import anchors
from verify import reference_cache as rc

ROOT = Path(__file__).resolve().parent.parent
CASES = ("--case", "layer_norm.*", "--case", "train.alignment")  # forward cases and a training run with replay
CHEAP = ("--case", "layer_norm.*")
CHEAP_IDS = ("layer_norm.random_affine", "layer_norm.huge_offset", "layer_norm.constant_rows", "layer_norm.d1")


CONFIG = {}  # the module's XDG_CONFIG_HOME: one cache key for the warm cache and its copies


@pytest.fixture(scope="module", autouse=True)
def _config(tmp_path_factory):
    CONFIG["dir"] = tmp_path_factory.mktemp("config")
    yield
    CONFIG.clear()


def _env(cache):
    env = dict(os.environ)
    env.pop(rc.FRESH_ENV, None)
    env[rc.DIR_ENV] = str(cache)
    env["XDG_CONFIG_HOME"] = str(CONFIG["dir"])
    return env


def _verify(root, cache, *args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "verify", "attention", *map(str, args)], cwd=root,
                          env=env or _env(cache), capture_output=True, text=True, timeout=timeout)


def _report(path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _verdicts(report):
    """Each case's verdict and evidence, without what may differ between two runs (seconds)."""
    return {c["id"]: {k: v for k, v in c.items() if k != "seconds"} for c in report["cases"]}


def _apply_fault(copy, fault_id):
    fault = catalogue_fault(fault_id)
    base = "reference" if fault["engine"] == "reference" else "port_ts/src"
    span = anchors.locate(copy, base, fault["within"], fault["find"])
    target = copy / span.file
    text = target.read_text(encoding="utf-8")
    at = text.index(fault["find"], span.start, span.end)
    target.write_text(text[:at] + fault["replace"] + text[at + len(fault["find"]):], encoding="utf-8")


# --- the keys ---------------------------------------------------------------------------------

def _fake_reference(root, text="EPS = 1e-5\n"):
    (root / "reference" / "core").mkdir(parents=True, exist_ok=True)
    (root / "reference" / "core" / "ops.py").write_text(text, encoding="utf-8")
    return root


def test_the_sources_digest_covers_every_file_of_the_reference_by_path_and_content(tmp_path):
    a = _fake_reference(tmp_path / "a")
    first, count = rc.sources_digest(a)
    assert count == 1
    assert rc.sources_digest(_fake_reference(tmp_path / "b"))[0] == first  # the same files: the same digest
    assert rc.sources_digest(_fake_reference(tmp_path / "c", "EPS = 1e-6\n"))[0] != first  # one byte
    moved = _fake_reference(tmp_path / "d")
    (moved / "reference" / "core" / "ops.py").rename(moved / "reference" / "core" / "ops2.py")
    assert rc.sources_digest(moved)[0] != first  # the same bytes under another name
    added = _fake_reference(tmp_path / "e")
    (added / "reference" / "README").write_text("", encoding="utf-8")
    assert rc.sources_digest(added)[0] != first  # any file, not only .py
    cached = _fake_reference(tmp_path / "f")
    (cached / "reference" / "core" / "__pycache__").mkdir()
    (cached / "reference" / "core" / "__pycache__" / "ops.cpython-311.pyc").write_bytes(b"\0")
    assert rc.sources_digest(cached)[0] == first  # the interpreter's caches are not sources


def test_the_environment_names_python_numpy_the_platform_and_the_cpu_features():
    env = rc.environment(ROOT)
    import numpy
    assert env["numpy"] == numpy.__version__ and env["python"] == sys.version
    assert env["reference_files"] >= 60 and len(env["reference_sources"]) == 64
    assert env["cpu_features"] and env["platform"] and env["format"] == rc.FORMAT


def test_a_case_key_changes_with_the_case_the_environment_and_the_model():
    spec = {"id": "x", "op": "layer_norm", "seed": 1, "config": {"d": 4}}
    key = rc.case_key("e" * 64, spec, None)
    assert rc.case_key("e" * 64, json.loads(json.dumps(spec)), None) == key  # a copy: the same key
    assert rc.case_key("f" * 64, spec, None) != key
    assert rc.case_key("e" * 64, dict(spec, seed=2), None) != key
    assert rc.case_key("e" * 64, dict(spec, config={"d": 5}), None) != key
    pretrained = {"id": "p", "op": "pretrained", "seed": 0, "config": {"model": "all-MiniLM-L6-v2"}}
    with_model = rc.case_key("e" * 64, pretrained, {"all-MiniLM-L6-v2": "/some/dir"})
    assert with_model != rc.case_key("e" * 64, pretrained, None)
    assert with_model == rc.case_key("e" * 64, pretrained, {"all-MiniLM-L6-v2": "/another/dir"})  # pins, not paths


# --- end to end -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A cache holding the reference's output of the CHEAP cases (filled once per module)."""
    cache = tmp_path_factory.mktemp("warm") / "cache"
    proc = _verify(ROOT, cache, *CHEAP)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    return cache


@pytest.fixture
def cache(warm, tmp_path):
    """A copy of the warm cache this test may change."""
    copy = tmp_path / "cache"
    shutil.copytree(warm, copy)
    return copy


def test_a_warm_run_answers_the_reference_from_the_cache_with_the_fresh_runs_verdicts(tmp_path):
    cache = tmp_path / "cache"
    cold = _verify(ROOT, cache, *CASES, "--report", tmp_path / "cold.json")
    assert cold.returncode == 0, cold.stdout[-3000:] + cold.stderr
    first = _report(tmp_path / "cold.json")
    n = len(first["cases"])
    assert first["reference_cache"]["from_cache"] == [] and len(first["reference_cache"]["stored"]) == n
    assert "reference: run afresh on every case" in cold.stdout and f"kept {n} case(s)" in cold.stdout

    warm = _verify(ROOT, cache, *CASES, "--report", tmp_path / "warm.json", "--timings")
    assert warm.returncode == 0, warm.stdout[-3000:] + warm.stderr
    second = _report(tmp_path / "warm.json")
    assert sorted(second["reference_cache"]["from_cache"]) == sorted(c["id"] for c in first["cases"])
    assert second["reference_cache"]["stored"] == [] and second["reference_cache"]["key"] == first["reference_cache"]["key"]
    line = f"reference: {n} of {n} case(s) from cache (key {first['reference_cache']['key'][:16]}"
    assert warm.stdout.splitlines()[0].startswith(line), warm.stdout[:500]  # said before any case
    assert sum(l.startswith(line) for l in warm.stdout.splitlines()) == 2, warm.stdout[-1500:]  # and at the end
    assert second["timings"]["engines"]["reference"]["processes"] == 0  # the reference did not run
    assert second["timings"]["engines"]["replay"]["processes"] >= 1  # the port replayed the cached states
    assert "document_memo" not in second and not (cache / "documents").exists()  # no memo of decoded documents
    assert _verdicts(second) == _verdicts(first)


def test_a_planted_reference_fault_is_a_miss_and_is_caught_with_a_warm_cache(tmp_path):
    copy = project_copy(tmp_path)
    cache = tmp_path / "cache"
    env = dict(_env(cache), PYTHONPATH=str(copy))
    warm = _verify(copy, cache, *CHEAP, "--report", tmp_path / "a.json", env=env)
    assert warm.returncode == 0, warm.stdout[-3000:] + warm.stderr
    assert _report(tmp_path / "a.json")["reference_cache"]["stored"]
    _apply_fault(copy, "reference.layer_norm.eps_1e-6")
    faulty = _verify(copy, cache, *CHEAP, "--report", tmp_path / "b.json", env=env)
    report = _report(tmp_path / "b.json")
    assert report["reference_cache"]["from_cache"] == [], "a changed reference must not be answered from the cache"
    assert report["reference_cache"]["key"] != _report(tmp_path / "a.json")["reference_cache"]["key"]
    assert faulty.returncode == 1, faulty.stdout[-3000:]  # the fault is caught: the reference ran afresh
    assert any(not c["passed"] for c in report["cases"])


def test_a_wrong_port_fails_and_a_faithful_one_passes_with_the_reference_from_the_cache(tmp_path, node, cache):
    fault = catalogue_fault("port.layer_norm.eps_1e-6")
    wrong = port_variants.build(ROOT, "reciprocal", tmp_path / "wrong",
                                [port_variants.Edit("layerNorm.ts", "", fault["find"], fault["replace"])])
    failed = _verify(ROOT, cache, *CHEAP, "--port-cmd", f"{node} {wrong} run", "--report", tmp_path / "w.json")
    report = _report(tmp_path / "w.json")
    assert report["reference_cache"]["from_cache"], "the reference should have come from the cache"
    assert failed.returncode == 1, failed.stdout[-3000:] + failed.stderr
    faithful = port_variants.build(ROOT, "reciprocal", tmp_path / "faithful")
    passed = _verify(ROOT, cache, *CHEAP, "--port-cmd", f"{node} {faithful} run", "--report", tmp_path / "f.json")
    assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr
    assert _report(tmp_path / "f.json")["reference_cache"]["from_cache"]


def test_a_damaged_entry_is_run_afresh_and_reported(tmp_path, cache):
    case_id = "layer_norm.random_affine"
    golden, = cache.glob(f"*/*/out/{case_id}.json")
    data = golden.read_bytes()
    golden.write_bytes(data.replace(b'"data"', b'"data" ', 1))  # one byte more: still JSON, not the kept bytes
    proc = _verify(ROOT, cache, *CHEAP, "--report", tmp_path / "r.json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    report = _report(tmp_path / "r.json")["reference_cache"]
    assert report["damaged"] == [case_id] and case_id not in report["from_cache"] and report["stored"] == [case_id]
    assert f"not trusted, run afresh and replaced ({case_id}.json does not match its manifest): {case_id}" in proc.stdout
    proc = _verify(ROOT, cache, *CHEAP, "--report", tmp_path / "s.json")
    assert case_id in _report(tmp_path / "s.json")["reference_cache"]["from_cache"]  # replaced by the fresh run


@pytest.mark.parametrize("how", ["--fresh", "VERIFY_FRESH", "--reference-cmd"])
def test_fresh_and_another_reference_command_neither_read_nor_fill_the_cache(tmp_path, how, cache):
    env_dir, = cache.iterdir()
    shutil.rmtree(env_dir / next(p.name for p in env_dir.iterdir() if p.is_dir()))
    before = sorted(p.relative_to(cache) for p in cache.rglob("*"))  # one case missing: a run could fill it
    args, env = ["--case", "layer_norm.*", "--report", tmp_path / "r.json"], _env(cache)
    if how == "--fresh":
        args.append("--fresh")
    elif how == "VERIFY_FRESH":
        env[rc.FRESH_ENV] = "1"
    else:
        args += ["--reference-cmd", f"{sys.executable} -m reference run"]
    proc = _verify(ROOT, cache, *args, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert "reference_cache" not in _report(tmp_path / "r.json") and "from cache" not in proc.stdout
    assert sorted(p.relative_to(cache) for p in cache.rglob("*")) == before


def _tamper(cache, case_id):
    """Change one output value of the case's cached reference document and its manifest with it,
    and authenticate the manifest with the user's own key (the documented recipe: HMAC-SHA256 of
    MAC_CONTEXT and manifest.json's bytes), as an entry its owner rewrote: one `verify attention`
    takes, but that does not hold what the reference computes."""
    entry = next(p.parent.parent for p in cache.glob(f"*/*/out/{case_id}.json"))
    doc_path = entry / "out" / f"{case_id}.json"
    doc = json.loads(doc_path.read_text(encoding="utf-8"))
    tensor = next(iter(doc["outputs"].values()))
    tensor["data"][0] = tensor["data"][0] + 1.0
    doc_path.write_text(json.dumps(doc), encoding="utf-8")
    manifest = json.loads((entry / "manifest.json").read_text(encoding="utf-8"))
    manifest["files"][f"{case_id}.json"] = [doc_path.stat().st_size, hashlib.sha256(doc_path.read_bytes()).hexdigest()]
    manifest_bytes = json.dumps(manifest).encode("utf-8")
    (entry / "manifest.json").write_bytes(manifest_bytes)
    key = (CONFIG["dir"] / rc.KEY_DIR / rc.KEY_FILE).read_bytes()
    (entry / "manifest.hmac").write_text(hmac.new(key, rc.MAC_CONTEXT + manifest_bytes, hashlib.sha256).hexdigest())


def test_regen_never_uses_the_cache(tmp_path, cache):
    _tamper(cache, "layer_norm.random_affine")
    used = _verify(ROOT, cache, *CHEAP)  # verify attention reads the tampered entry: its case fails
    assert used.returncode == 1 and "FAIL" in used.stdout and "1 failing case(s) had the reference from the cache" in used.stdout, used.stdout[-2000:]
    shutil.copytree(ROOT / "golden" / "attention", tmp_path / "golden")
    proc = subprocess.run([sys.executable, "-m", "verify", "regen", "attention", *CHEAP, "--golden-dir",
                           tmp_path / "golden"], cwd=ROOT, env=_env(cache), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no change in" in proc.stdout, proc.stdout  # the goldens come from fresh runs, not from the entry


def test_verify_cache_shows_prunes_and_clears(tmp_path, cache):
    stale = cache / ("0" * 64)
    stale.mkdir()
    (stale / "environment.json").write_text("{}")
    (stale / ("1" * 64)).mkdir()
    (stale / ("1" * 64) / "manifest.json").write_text("{}")

    def cmd(*args):
        return subprocess.run([sys.executable, "-m", "verify", "cache", *args], cwd=ROOT, env=_env(cache),
                              capture_output=True, text=True, timeout=120)

    old_memo = cache / "documents" / ("1" * 64)  # decoded documents an earlier version kept
    old_memo.mkdir(parents=True)
    shown = cmd()
    assert shown.returncode == 0 and str(cache) in shown.stdout and "(the reference as it is now)" in shown.stdout
    assert f"{len(CHEAP_IDS)} case(s)" in shown.stdout and "0000000000000000" in shown.stdout
    assert "documents/: decoded documents of an earlier version" in shown.stdout, shown.stdout
    current = next(p.name for p in cache.iterdir() if p.name not in (stale.name, "documents"))
    pruned = cmd("--prune")
    assert "removed 1 " in pruned.stdout and not stale.exists() and not old_memo.parent.exists()
    assert [p.name for p in cache.iterdir()] == [current]
    cleared = cmd("--clear")
    assert "removed 1 " in cleared.stdout and "empty" in cleared.stdout and list(cache.iterdir()) == []


def _spec(case_id):
    """The case as the catalogue writes it (what the runner hands the cache)."""
    return catalogue_case(case_id)


def test_a_hit_is_written_as_the_bytes_read_and_checked_not_a_link_to_the_cache(tmp_path, cache):
    """The run's copy of a cached case is its own file: what the cache holds afterwards, rewritten
    or removed, cannot change what this run judges."""
    out = tmp_path / "out"
    answered = rc.ReferenceCache(ROOT, cache, _env(cache)).fetch([_spec(i) for i in CHEAP_IDS], None, out)
    assert sorted(answered) == sorted(CHEAP_IDS) and all(s["ok"] and s["from_cache"] for s in answered.values())
    for case_id in CHEAP_IDS:
        kept, = cache.glob(f"*/*/out/{case_id}.json")
        placed = out / f"{case_id}.json"
        assert placed.read_bytes() == kept.read_bytes() and not os.path.samefile(placed, kept)
