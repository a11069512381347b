"""Node's module compile cache for the checkout's own port (verify/engines.py, compile_cache_env;
docs/performance.md): its processes keep their compiled modules under the cache root, a user's own
NODE_COMPILE_CACHE or NODE_DISABLE_COMPILE_CACHE is left as it is, a --port-cmd (or a copy of the
port with a planted fault) runs without it, VERIFY_PLAIN=1 turns it off, and the cache changes no
byte of what the port writes."""

import os

from verify import engines

SPECS = [{"id": "t.regression", "kind": "forward", "op": "nadaraya_watson", "seed": 101,  # drawn by the port itself
          "config": {"kernel": "gaussian", "n_train": 20, "n_val": 10}}]


def test_the_cache_sits_under_the_cache_root_unless_the_user_chose(monkeypatch):
    root = {"ATTENTION_PARITY_CACHE": "/somewhere/cache"}
    monkeypatch.delenv("VERIFY_PLAIN", raising=False)
    assert engines.compile_cache_env(root) == {"NODE_COMPILE_CACHE": "/somewhere/cache/node-compile-cache"}
    assert engines.compile_cache_env(dict(root, NODE_COMPILE_CACHE="/mine")) == {}
    assert engines.compile_cache_env(dict(root, NODE_DISABLE_COMPILE_CACHE="1")) == {}
    monkeypatch.setenv("VERIFY_PLAIN", "1")
    assert engines.compile_cache_env(root) == {}


def _run(repo_root, out, monkeypatch, environ, port_cmd=None):
    for name in ("NODE_COMPILE_CACHE", "NODE_DISABLE_COMPILE_CACHE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    run = engines.run(engines.port_engine(repo_root, port_cmd), SPECS, out, 120)
    assert run.statuses["t.regression"]["ok"], run.statuses
    return (out / "t.regression.json").read_bytes()


def test_the_port_keeps_its_compiled_modules_and_writes_the_same_bytes(repo_root, tmp_path, monkeypatch):
    cache = tmp_path / "cache" / "node-compile-cache"
    cold = _run(repo_root, tmp_path / "cold", monkeypatch, {"ATTENTION_PARITY_CACHE": str(tmp_path / "cache")})
    kept = [p for p in cache.rglob("*") if p.is_file()]
    assert kept, f"no compiled module kept under {cache}: the port's environment lost NODE_COMPILE_CACHE"
    warm = _run(repo_root, tmp_path / "warm", monkeypatch, {"ATTENTION_PARITY_CACHE": str(tmp_path / "cache")})
    assert warm == cold
    off = _run(repo_root, tmp_path / "off", monkeypatch,
               {"ATTENTION_PARITY_CACHE": str(tmp_path / "other"), "NODE_DISABLE_COMPILE_CACHE": "1"})
    assert off == cold
    assert not (tmp_path / "other" / "node-compile-cache").exists()


def test_another_port_command_runs_without_it(repo_root, node, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    out = _run(repo_root, tmp_path / "other", monkeypatch, {"ATTENTION_PARITY_CACHE": str(cache)},
               port_cmd=f"{node} port_ts/src/cli.ts run")
    assert out and not (cache / "node-compile-cache").exists()
