"""OpenBLAS on one thread where nothing calls BLAS (verify/__init__.py, verify/engines.py blas_env;
docs/performance.md): the runner imports NumPy with OPENBLAS_NUM_THREADS=1 and hands its engines
the environment as it was; the checkout's own reference runs with it (it sums every product in
its own order and calls no BLAS), a --reference-cmd does not, and a user's own setting is kept
everywhere. The reference writes the same bytes either way."""

import os
import subprocess
import sys

from verify import engines

SPECS = [{"id": "t.softmax", "kind": "forward", "op": "masked_softmax", "seed": 101,
          "config": {"shape": [3, 2, 5], "valid_lens": [0, 2, 5]}}]

THREADS = ("import os, sys; sys.path.insert(0, os.getcwd()); import verify; "
           "print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'))")


def test_only_the_checkouts_own_reference_asks_for_one_thread(repo_root):
    assert engines.blas_env({}) == {"OPENBLAS_NUM_THREADS": "1"}
    assert engines.blas_env({"OPENBLAS_NUM_THREADS": "4"}) == {}
    assert engines.reference_engine(repo_root).one_blas_thread
    assert not engines.reference_engine(repo_root, "python -m reference run").one_blas_thread
    assert not engines.port_engine(repo_root).one_blas_thread


def test_the_runner_imports_numpy_with_one_blas_thread_and_leaves_the_environment_as_it_was(repo_root):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    threads, seen = subprocess.run([sys.executable, "-c", THREADS], cwd=repo_root, env=env, capture_output=True,
                                   text=True, check=True).stdout.split()
    assert (threads, seen) == ("1", "None")  # OpenBLAS's pool would add a thread per further core
    env["OPENBLAS_NUM_THREADS"] = "2"
    threads, seen = subprocess.run([sys.executable, "-c", THREADS], cwd=repo_root, env=env, capture_output=True,
                                   text=True, check=True).stdout.split()
    assert seen == "2" and (int(threads) == 2 or os.cpu_count() == 1)  # the user's own setting, kept


def _reference(repo_root, out, monkeypatch, environ, reference_cmd=None):
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    engine = engines.reference_engine(repo_root, reference_cmd)
    run = engines.run(engine, SPECS, out, 120)
    assert run.statuses["t.softmax"]["ok"], run.statuses
    return (out / "t.softmax.json").read_bytes()


def test_the_reference_writes_the_same_bytes_with_one_blas_thread_or_many(repo_root, tmp_path, monkeypatch):
    one = _reference(repo_root, tmp_path / "one", monkeypatch, {})
    many = _reference(repo_root, tmp_path / "many", monkeypatch, {"OPENBLAS_NUM_THREADS": "2"})
    other = _reference(repo_root, tmp_path / "cmd", monkeypatch, {}, reference_cmd=f"{sys.executable} -m reference run")
    assert one == many == other


def test_the_reference_process_sees_the_one_thread(repo_root, tmp_path, monkeypatch):
    """An engine marked one_blas_thread gets OPENBLAS_NUM_THREADS=1 in its environment; a user's
    value is passed on as it is."""
    script = tmp_path / "show_env.py"
    script.write_text("import json, os, sys\n"
                      "request = json.loads(sys.stdin.read())\n"
                      "for spec in request['cases']:\n"
                      "    print(json.dumps({'id': spec['id'], 'ok': False, "
                      "'error': 'blas=' + str(os.environ.get('OPENBLAS_NUM_THREADS'))}), flush=True)\n")
    engine = engines.Engine("reference", [sys.executable, str(script)], repo_root, one_blas_thread=True)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert engines.run(engine, SPECS, tmp_path / "a", 60).statuses["t.softmax"]["error"] == "blas=1"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    assert engines.run(engine, SPECS, tmp_path / "b", 60).statuses["t.softmax"]["error"] == "blas=3"
    unmarked = engines.Engine("reference", [sys.executable, str(script)], repo_root)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert engines.run(unmarked, SPECS, tmp_path / "c", 60).statuses["t.softmax"]["error"] == "blas=None"
