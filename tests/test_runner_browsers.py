"""`verify attention --browser` and `--port-kernel` through the runner (verify/browsers.py,
docs/browsers.md): every browser judged against the same reference run with the case's verdict and
compared byte for byte with Node; a fault of the catalogue fails in Node and in every browser, the
same cases named; a browser that cannot run makes its cases "not run", never a pass; the JavaScript
fallback forced over cases whose products run in Wasm otherwise."""

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from helpers import main_in_process, project_copy, run_verify, user_attention
from test_browsers import BROWSERS, require
from verify import browsers, engines
from verify.tools import faults

ROOT = Path(__file__).resolve().parent.parent
CASES = ("layer_norm", "dot_product_attention.no_mask")  # cheap cases with products; the layer-norm fault breaks a few


def _args(*more):
    return ["attention", *(a for c in CASES for a in ("--case", c)), *more]


@pytest.fixture
def installed(node):
    for name in BROWSERS:
        require(node, name)
    return BROWSERS


def test_every_browser_is_judged_and_compared_with_node(repo_root, installed, tmp_path):
    report, junit = tmp_path / "r.json", tmp_path / "j.xml"
    proc = run_verify(repo_root, *_args("--browser", ",".join(installed), "--report", report, "--junit", junit),
                      timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    doc = json.loads(report.read_text())
    ids = [c["id"] for c in doc["cases"]]
    for name in installed:
        part = doc["browsers"][name]
        assert part["ran"] and part["passed"] and part["version"]["name"]
        assert part["summary"] == {"passed": len(ids), "failed": 0, "identical_to_node": len(ids)}
        assert sum(part["kernel"].values()) > 0, "the status lines say which kernel ran"
        assert f"PASS browser {name} " in proc.stdout and f"{len(ids)} of {len(ids)} case(s) byte-identical to node" in proc.stdout
    suite = ET.parse(junit).getroot().find("testsuite")
    browser_cases = [tc for tc in suite.findall("testcase") if ".browser." in tc.get("classname")]
    assert len(browser_cases) == len(ids) * len(installed)


def test_a_fault_fails_in_node_and_in_every_browser_naming_the_same_cases(repo_root, installed, node, tmp_path,
                                                                          capsys, monkeypatch):
    fault = {f.id: f for f in faults.load(None, repo_root, str)}["port.layer_norm.eps_1e-6"]
    faulty = tmp_path / "faulty"
    faults.apply(fault, repo_root, faulty)  # port_ts/src with the fault
    import shutil
    shutil.copytree(repo_root / "port_ts" / "browser", faulty / "port_ts" / "browser")
    (faulty / "port_ts" / "node_modules").symlink_to(repo_root / "port_ts" / "node_modules")
    monkeypatch.setattr(engines, "browser_engine", lambda root, name, kernel=None: engines.Engine(
        "port", [str(node), str(faulty / "port_ts" / "browser" / "engine.ts"), "--browser", name, "run"], root))
    report = tmp_path / "r.json"
    code, out, err = main_in_process(capsys, _args("--browser", ",".join(installed), "--report", report,
                                         "--port-cmd", f"{node} {faulty / 'port_ts' / 'src' / 'cli.ts'} run"))
    assert code == 1, out[-3000:] + err
    doc = json.loads(report.read_text())
    in_node = {c["id"] for c in doc["cases"] if not c["passed"]}
    assert in_node and all(i.startswith("layer_norm.") for i in in_node)
    for name in installed:
        part = doc["browsers"][name]
        assert {i for i, c in part["cases"].items() if not c["passed"]} == in_node, name
        assert f"FAIL browser {name} " in out
    assert out.strip().splitlines()[-1] == f"{len(doc['cases']) - len(in_node)} passed, {len(in_node)} failed"


def test_a_browser_that_cannot_run_makes_its_cases_not_run(repo_root, tmp_path, capsys, monkeypatch):
    """A browser that passed the check before the run (preflight) and fails in it."""
    monkeypatch.setattr(browsers, "preflight", lambda root, names: None)
    missing = tmp_path / "missing.py"
    missing.write_text("import sys\nsys.stdin.read()\nsys.stderr.write('port: chromium is not installed: "
                       "apt-get install -y chromium\\n')\nsys.exit(2)\n")
    monkeypatch.setattr(engines, "browser_engine", lambda root, name, kernel=None: engines.Engine(
        "port", [sys.executable, str(missing)], root))
    report = tmp_path / "r.json"
    code, out, err = main_in_process(capsys, _args("--browser", "chromium", "--report", report))
    assert code == 1, out + err
    part = json.loads(report.read_text())["browsers"]["chromium"]
    assert not part["ran"] and not part["passed"] and "apt-get install -y chromium" in part["error"]
    assert all(c["status"] == "not run" and not c["passed"] for c in part["cases"].values())
    assert "NOT RUN browser chromium: " in out
    n = len(part["cases"])
    assert out.strip().splitlines()[-1] == f"0 passed, {n} failed"


def test_drivers_not_installed_stop_the_run_at_once_naming_the_command(tmp_path):
    """A checkout after the README's main command alone (no port_ts/node_modules): exit 2 before any
    engine runs, one line with the command that installs the pinned drivers."""
    copy = project_copy(tmp_path)
    shutil.copytree(ROOT / "port_ts" / "browser", copy / "port_ts" / "browser")
    report = tmp_path / "r.json"
    proc, written = user_attention(copy, report, "--browser", "chromium", "--case", "masked_softmax.no_mask")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    [line] = proc.stderr.splitlines()
    assert "the browser drivers are not installed from port_ts/package-lock.json (@puppeteer/browsers" in line
    assert browsers.INSTALL_DRIVERS in line and written is None


def test_the_lab_and_the_engine_without_drivers_say_the_same_command(node, tmp_path):
    """port_ts/browser/ with no node_modules: the lab's check says in one line how to install the
    drivers (the command verify names: the same string in both), exit 2."""
    for part in ("browser", "src"):
        shutil.copytree(ROOT / "port_ts" / part, tmp_path / "port_ts" / part)
    shutil.copy(ROOT / "port_ts" / "package.json", tmp_path / "port_ts")
    (tmp_path / "exports").mkdir()
    (tmp_path / "exports" / "train.reversal.json").write_text("{}")
    env = dict(os.environ, BROWSER_CHROMIUM=sys.executable)  # "installed": the drivers are what is missing
    proc = subprocess.run([str(node), "port_ts/browser/lab.ts", "check", "--browser", "chromium", "--exports",
                           str(tmp_path / "exports")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc
    [line] = proc.stderr.splitlines()
    assert line.startswith("lab (chromium): the browser drivers are not installed in port_ts/node_modules (")
    assert f"install them with `{browsers.INSTALL_DRIVERS}`" in line


def test_a_driver_of_another_version_is_named(tmp_path):
    port = tmp_path / "port_ts"
    shutil.copytree(ROOT / "port_ts" / "node_modules" / "@puppeteer", port / "node_modules" / "@puppeteer")
    shutil.copy(ROOT / "port_ts" / "package.json", port)
    pinned = json.loads((port / "package.json").read_text())["devDependencies"]["puppeteer-core"]
    (port / "node_modules" / "puppeteer-core").mkdir()
    (port / "node_modules" / "puppeteer-core" / "package.json").write_text('{"version": "0.0.1"}')
    assert browsers.drivers_problem(tmp_path).startswith(
        f"the browser drivers are not installed from port_ts/package-lock.json (puppeteer-core {pinned}: version 0.0.1 found)")
    assert browsers.drivers_problem(ROOT) is None


def test_a_browser_not_installed_stops_the_run_at_once_naming_its_install_command(repo_root, tmp_path, monkeypatch):
    monkeypatch.setenv("BROWSER_FIREFOX", str(tmp_path / "no-firefox"))
    proc = run_verify(repo_root, "attention", "--browser", "firefox", "--case", "masked_softmax.no_mask",
                      "--report", tmp_path / "r.json")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.strip() == (f"verify: error: firefox is not installed (firefox-esr not found at BROWSER_FIREFOX="
                                   f"{tmp_path / 'no-firefox'}): install it with `apt-get install -y firefox-esr` "
                                   "(as root; docs/browsers.md)")


def test_an_unknown_browser_is_a_usage_error(repo_root):
    proc = run_verify(repo_root, "attention", "--browser", "netscape")
    assert proc.returncode == 2 and "expected browser names among chromium, firefox, webkit" in proc.stderr


def test_the_forced_javascript_kernel_runs_every_product_there_and_passes_bitwise(repo_root, tmp_path):
    """The pretrained case's products all run in Wasm by default; --port-kernel js moves every one
    to the JavaScript fallback, and the verdict (bit for bit) is the same."""
    report = tmp_path / "r.json"
    proc = run_verify(repo_root, "attention", "--case", "pretrained.minilm.lesson*", "--port-kernel", "js", "--bitwise",
                      "--report", report, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    case = next(c for c in json.loads(report.read_text())["cases"] if c["id"] == "pretrained.minilm.lesson")
    kernel = case["engine_info"]["port"]["kernel"]
    assert kernel["wasm"] == 0 and kernel["js"] > 0
    assert "port: 0 products in Wasm SIMD" in proc.stdout
