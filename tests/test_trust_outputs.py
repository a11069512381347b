"""Issue 30, items 10, 11 and 14: the runner never replaces what it was not asked to write, never
waits on (or reads without bound) the previous report, and says what went wrong in one line.

- 10: `--report` / `--html` / `--junit` (and `verify show`'s, inspect's `--html`, export's `--out`)
  are refused before anything runs when the path is not a regular file (a device, a pipe, a
  directory, or a symbolic link to one), lies in golden/ or ops/ (or the --golden-dir /
  --cases-dir in use), or is given for two outputs; writing stays atomic, nothing left behind.
- 11: a named pipe, /dev/zero, a 3 GB file or a report nested 100,000 deep at
  reports/verify-attention.json (or a pipe at the old seconds file beside it) is no estimate: the
  run goes on (or, for a full run, whose own report that path is, exit 2 at once).
- 14: `--jobs 100000` runs a thread per process that can run (at most MAX_JOBS, said);
  without a home directory the cache is not used (one note) and `--list` works; "not run:" once.

Every run is a subprocess in a scratch checkout (verify/, golden/ and ops/ copied; reports/ its
own), so nothing here writes into the checkout under test, with a timeout so that a hang fails
instead of blocking, and an address space limit so that a read without bound fails instead of
exhausting the machine. The hostile rows of the area "outputs" (tests/hostile_kinds.py) run here.
"""

import os
import pwd
import re
import resource
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import verify
from hostile_kinds import params
from verify import cli, engines

REPO = Path(verify.__file__).resolve().parent.parent  # the checkout under test
CASE = "masked_softmax.lens_1d"
LINKED = ("port_ts", "reference", "pyproject.toml")  # read only, by the engines and the runner
COPIED = ("verify", "golden", "ops")  # ops/: the catalogue (each op's bundle), where outputs are refused
LIMIT = 2 << 30  # the runner's address space (soft): enough for a run, far less than a read of /dev/zero takes
TIMEOUT = 60  # a run of one case takes about 1 s; a named pipe read without O_NONBLOCK waits for ever


@pytest.fixture
def checkout(tmp_path):
    """A scratch checkout of the code under test: verify/, golden/, ops/ copied, the engines'
    sources linked, reports/ empty."""
    return _make_checkout(tmp_path / "checkout")


def _make_checkout(root):
    root.mkdir()
    for name in COPIED:
        shutil.copytree(REPO / name, root / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    for name in LINKED:
        if (REPO / name).exists():
            (root / name).symlink_to(REPO / name)
    (root / "reports").mkdir()
    return root


def _limit_address_space():
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT if hard == resource.RLIM_INFINITY else min(LIMIT, hard), hard))


def _port_unlimited():
    """--port-cmd: the checkout's port, its soft address-space limit raised back (Node reserves far
    more address space than it uses)."""
    wrap = ["/bin/sh", "-c", 'ulimit -S -v unlimited && exec "$0" "$@"']
    return shlex.join(wrap + [str(engines.node_binary()), "port_ts/src/cli.ts", "run"])


def run(root, *argv, env=None, limited=False, timeout=TIMEOUT, python=None):
    """`verify ARGV` in the scratch checkout root (or `python -c PYTHON ARGV`): the completed process."""
    environ = dict(os.environ, PYTHONPATH=str(root), VERIFY_FRESH="1")
    environ.pop("PYTHONSAFEPATH", None)
    environ.update(env or {})
    command = [sys.executable, "-m", "verify"] if python is None else [sys.executable, "-c", python]
    argv = [str(a) for a in argv]
    if limited and argv[:1] == ["attention"] and "--port-cmd" not in argv:
        argv += ["--port-cmd", _port_unlimited()]
    return subprocess.run(command + argv, cwd=root, env=environ, capture_output=True, text=True, errors="replace",
                          timeout=timeout, preexec_fn=_limit_address_space if limited else None)


def one_line(proc, says):
    """Exit 2 with one line on stderr holding `says`, no traceback, nothing on stdout."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == "", proc.stdout + proc.stderr


def leftovers(directory):
    """Temporary files of an atomic write left in directory."""
    return [p.name for p in Path(directory).iterdir() if re.match(r"^\..+\.[A-Za-z0-9_]{8}$", p.name)]


# --- 10: what is at the path is never replaced unless it is a regular file ----------------------

@pytest.mark.parametrize("make, says", [
    (lambda p: p.symlink_to("/dev/null"), "it is a character device, not a regular file"),
    (lambda p: os.mkfifo(p), "it is a named pipe, not a regular file"),
], ids=["link-to-dev-null", "fifo"])
@pytest.mark.parametrize("option", ["--html", "--junit", "--report"])
def test_an_output_onto_a_device_or_a_pipe_is_refused_and_left_as_it_is(checkout, tmp_path, make, says, option):
    target = tmp_path / "target"
    make(target)
    before = os.lstat(target)
    proc = run(checkout, "attention", "--case", CASE, option, target)
    one_line(proc, says)
    after = os.lstat(target)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)  # not replaced by a regular file
    assert list((checkout / "reports").iterdir()) == []  # refused before anything ran


def test_a_report_onto_a_committed_golden_is_refused_and_the_golden_kept(checkout):
    golden = checkout / "golden" / "attention" / "reference" / f"{CASE}.json"
    before = golden.read_bytes()
    proc = run(checkout, "attention", "--case", CASE, "--report", golden)
    one_line(proc, "lies in the goldens")
    assert golden.read_bytes() == before


def test_an_html_report_into_the_catalogue_is_refused_and_the_next_run_reads_it_as_before(checkout):
    target = checkout / "ops" / "attention" / "zz.json"
    one_line(run(checkout, "attention", "--case", CASE, "--html", target), "lies in the catalogue")
    assert not target.exists()
    listed = run(checkout, "attention", "--list", "--case", CASE)
    assert listed.returncode == 0 and CASE in listed.stdout, listed.stderr


def test_the_golden_and_cases_directories_in_use_are_protected_through_links(checkout, tmp_path):
    goldens = tmp_path / "goldens"
    shutil.copytree(checkout / "golden" / "attention", goldens)
    (tmp_path / "link").symlink_to(goldens / "port")
    proc = run(checkout, "attention", "--case", CASE, "--golden-dir", goldens, "--junit", tmp_path / "link" / f"{CASE}.json")
    one_line(proc, "lies in the goldens in use (--golden-dir)")
    assert not (goldens / "port" / f"{CASE}.json").read_text().startswith("<?xml")


def test_one_path_for_two_outputs_is_refused(checkout, tmp_path):
    one_line(run(checkout, "attention", "--case", CASE, "--report", tmp_path / "x", "--html", tmp_path / "x"),
             "--report and --html name the same file")
    one_line(run(checkout, "attention", "--case", CASE, "--junit", checkout / "reports" / "verify-attention.json"),
             "the JSON report the runner writes")
    assert list((checkout / "reports").iterdir()) == [] and not (tmp_path / "x").exists()


def test_show_never_writes_over_the_report_it_shows(checkout, tmp_path):
    report = tmp_path / "r.json"
    passed = run(checkout, "attention", "--case", CASE, "--report", report)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    before = report.read_bytes()
    one_line(run(checkout, "show", report, "--html", report), "is the report being shown")
    assert report.read_bytes() == before
    shown = run(checkout, "show", report, "--html", tmp_path / "r.html", "--junit", tmp_path / "r.xml")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert (tmp_path / "r.html").stat().st_size and (tmp_path / "r.xml").stat().st_size
    assert leftovers(tmp_path) == [] and leftovers(checkout / "reports") == []  # atomic, nothing left behind


# --- 11: the previous report is a hint, read bounded and without waiting --------------------------

@pytest.mark.parametrize("make", [
    lambda r: os.mkfifo(r / "verify-attention.json"),
    lambda r: os.mkfifo(r / ".verify-attention.json.seconds"),
    lambda r: (r / "verify-attention.json").symlink_to("/dev/zero"),
    lambda r: _setup("sparse", r / "verify-attention.json", 3 << 30),
    lambda r: (r / "verify-attention.json").write_text("[" * 100_000 + "]" * 100_000),
], ids=["fifo", "fifo-seconds-file", "dev-zero", "3-gb", "nested-100000"])
def test_a_hostile_previous_report_is_no_estimate_and_the_run_goes_on(checkout, make):
    make(checkout / "reports")
    proc = run(checkout, "attention", "--case", CASE, limited=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 0 failed" in proc.stdout and "Traceback" not in proc.stderr
    assert (checkout / "reports" / "verify-attention.subset.json").is_file()


@pytest.mark.parametrize("make, says", [
    (lambda p: os.mkfifo(p), "it is a named pipe"),
    (lambda p: p.symlink_to("/dev/zero"), "it is a character device"),
], ids=["fifo", "dev-zero"])
def test_a_full_run_whose_own_report_is_a_pipe_or_a_device_says_so_at_once(checkout, make, says):
    make(checkout / "reports" / "verify-attention.json")
    one_line(run(checkout, "attention", limited=True, timeout=30), says)


# --- 14: one line and exit 2, never a traceback ---------------------------------------------------

COUNT_THREADS = """
import sys, threading
from verify import cli
started = [0]
start = threading.Thread.start
def counted(self):
    started[0] += 1
    start(self)
threading.Thread.start = counted
code = cli.main(sys.argv[1:])
print(f"threads started: {started[0]}", file=sys.stderr)
sys.exit(code)
"""


def test_jobs_100000_starts_no_more_threads_than_there_is_work_and_says_it_is_capped(checkout):
    proc = run(checkout, "attention", "--case", CASE, "--jobs", "100000", python=COUNT_THREADS, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    started = int(re.search(r"threads started: (\d+)", proc.stderr).group(1))
    assert started < 20, started  # one case: a reference process and a port process, and the runner's own
    assert "--jobs 100000 is more than the 64 processes the runner starts at once" in proc.stderr


@pytest.fixture
def no_home(monkeypatch):
    """HOME unset, no cache variable, and the user not in the password database."""
    for name in ("HOME", "ATTENTION_PARITY_CACHE", "XDG_CACHE_HOME", "VERIFY_REFERENCE_CACHE", "VERIFY_FRESH"):
        monkeypatch.delenv(name, raising=False)

    def no_entry(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)


def test_without_a_home_directory_list_works_with_one_note(no_home, capsys):
    code = cli.main(["attention", "--list", "--case", CASE])
    out, err = capsys.readouterr()
    assert code == 0 and CASE in out, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "no cache is used in this run" in lines[0] and "ATTENTION_PARITY_CACHE" in lines[0], err


def test_without_a_home_directory_fetch_model_says_what_to_set(no_home, capsys):
    code = cli.main(["fetch-model"])
    _, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1 and "set ATTENTION_PARITY_CACHE=DIR" in err, err


@pytest.fixture
def readable_checkout():
    """A scratch checkout that another user can read (pytest's temporary directories are private)."""
    parent = Path(tempfile.mkdtemp(prefix="verify-trust-outputs-"))
    try:
        os.chmod(parent, 0o755)
        root = _make_checkout(parent / "checkout")
        subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)
        yield root
    finally:
        shutil.rmtree(parent)


@pytest.fixture
def reachable_python():
    """The Python environment's directories made searchable by other users for the test's span: a
    clone made in a `mktemp -d` directory (mode 0700) holds its virtual environment where the
    test's other user could not import NumPy. Only the search bit is added, and each mode is put
    back afterwards."""
    private = [p for p in Path(sys.prefix).resolve().parents if not os.stat(p).st_mode & stat.S_IXOTH]
    modes = {p: os.stat(p).st_mode for p in private}
    try:
        for p, mode in modes.items():
            os.chmod(p, stat.S_IMODE(mode) | stat.S_IXOTH)
        yield
    finally:
        for p, mode in modes.items():
            os.chmod(p, stat.S_IMODE(mode))


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to run as a user without a passwd entry")
def test_a_user_without_a_passwd_entry_and_no_home_lists_the_cases(readable_checkout, reachable_python):
    checkout = readable_checkout
    env = {k: v for k, v in os.environ.items()
           if k not in ("HOME", "ATTENTION_PARITY_CACHE", "XDG_CACHE_HOME", "VERIFY_REFERENCE_CACHE", "VERIFY_FRESH")}
    env.update(PYTHONPATH=str(checkout))
    uid = next(u for u in range(12345, 13345) if not _has_entry(u))
    as_user = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", sys.executable]
    which = subprocess.run(as_user + ["-c", "import verify; print(verify.__file__)"], cwd=checkout, env=env,
                           capture_output=True, text=True, timeout=TIMEOUT)
    assert which.stdout.strip() == str(checkout / "verify" / "__init__.py"), which.stdout + which.stderr
    proc = subprocess.run(as_user + ["-m", "verify", "attention", "--list", "--case", CASE], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0 and CASE in proc.stdout, proc.stderr
    assert "no cache is used in this run" in proc.stderr and "Traceback" not in proc.stderr


def _has_entry(uid):
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


def test_a_previous_report_nested_100000_deep_is_no_traceback(checkout):
    (checkout / "reports" / "verify-attention.json").write_text("[" * 100_000 + "]" * 100_000)
    proc = run(checkout, "attention", "--case", CASE)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


MODEL_MISSING = """
import sys
from dataclasses import replace
from verify import cli, models
models.SOURCES[models.MODEL] = replace(models.SOURCES[models.MODEL], module="attention_parity_no_such_module")
sys.exit(cli.main(sys.argv[1:]))
"""


def test_a_case_not_run_says_not_run_once(checkout, tmp_path):
    proc = run(checkout, "attention", "--case", "pretrained.*", python=MODEL_MISSING,
               env={"ATTENTION_PARITY_CACHE": str(tmp_path / "empty-cache")})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "not run: the model all-MiniLM-L6-v2 is not available" in proc.stdout
    assert "not run: not run" not in proc.stdout


def test_an_unexpected_os_error_on_a_path_is_one_line(checkout, tmp_path):
    """A fault catalogue that is /dev/zero (read without bound before), a catalogue or golden
    directory that is a loop of symbolic links (pathlib's RuntimeError before): one line each."""
    one_line(run(checkout, "faults", "attention", "--catalogue", "/dev/zero", limited=True, timeout=60),
             "it is a character device")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    one_line(run(checkout, "attention", "--list", "--cases-dir", tmp_path / "loop"), "--cases-dir")
    one_line(run(checkout, "attention", "--case", CASE, "--golden-dir", tmp_path / "loop"), "--golden-dir")


# --- the hostile rows -------------------------------------------------------------------------------

def _setup(action, path, argument):
    path = Path(path)
    if action == "fifo":
        os.mkfifo(path)
    elif action == "link":
        path.symlink_to(argument)
    elif action == "sparse":
        with open(path, "wb") as fh:
            fh.truncate(argument)
    elif action == "write":
        path.write_text(argument)
    elif action == "mkdir":
        path.mkdir(parents=True)
    elif action == "remove":
        shutil.rmtree(path)
    else:
        raise AssertionError(action)


@pytest.mark.parametrize("kind", params("outputs"))
def test_an_output_path_or_a_previous_report(kind, checkout, tmp_path):
    argv, setup, *env = kind.data
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    fill = {"root": checkout, "tmp": scratch, "case": CASE}
    for action, path, argument in setup:
        _setup(action, path.format(**fill), argument.format(**fill) if action == "link" else argument)
    environ = {k: v.format(**fill) for k, v in (env[0] if env else {}).items()}
    if "HOME" in environ:
        environ.update(ATTENTION_PARITY_CACHE="", XDG_CACHE_HOME="")
    before = sorted(p.name for p in scratch.iterdir())
    proc = run(checkout, *[a.format(**fill) for a in argv], env=environ, limited=True)
    assert "Traceback" not in proc.stderr, proc.stderr
    if kind.exit == 2:
        one_line(proc, kind.says)
        assert sorted(p.name for p in scratch.iterdir()) == before  # nothing written, nothing left
    else:
        assert proc.returncode == kind.exit, proc.stdout + proc.stderr
        assert kind.says in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    if (checkout / "reports").is_dir() and not (checkout / "reports").is_symlink():
        assert leftovers(checkout / "reports") == []
