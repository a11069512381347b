"""`verify bisect GOOD [BAD]`: the first commit at which the failing cases of BAD start to fail.

1. The failing cases. With BAD, `verify attention` runs at BAD (every case, or those of --case) and
   its failing cases are the ones searched for. Without BAD, they come from the working tree's last
   report (reports/verify-attention.json or the subset one, whichever was written last) and the
   bad end is HEAD; when HEAD passes them, the failure is in the uncommitted changes.
2. GOOD must pass them (else exit 2: GOOD is not good).
3. A binary search over `git rev-list --first-parent --reverse GOOD..BAD`.

Each tested commit is checked out in ONE temporary linked worktree (`git worktree add --detach`,
in a lifecycle.temp_dir), removed at the end however the command ends. The commit's own verify
runs there (`python -m verify attention`, cwd and PYTHONPATH at the worktree) on the failing cases,
with its own catalogue, goldens and engines, VERIFY_FRESH=1 (a commit before --fresh existed takes
the variable too, and ignores it when it has no reference cache), a reference cache and the
report in the temporary directory. Nothing of the user's checkout is written: not the working
tree, the index, HEAD, a ref, the goldens, the reports or the reference cache.

A commit is good when every searched case passes, bad when one of them fails, and skipped (as
`git bisect skip`) when its verify exits 2, a searched case is NOT RUN or missing there.

Why a plain binary search rather than `git bisect run` in the worktree: the search needs, per
commit, the report of that commit's run (which case failed, and how), which a `git bisect run`
script would have to hand back through files; git's bisect also walks every parent of a merge,
while the commits of this history that the catalogue describes are the first-parent ones (a
side branch's commits may predate the layout of its merge). The search below is a dozen lines;
git is used only to list the commits and to check them out.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from .. import catalogue, cli, lifecycle
from ..documents import DocumentError, read
from ..errors import EXIT_INPUT, EXIT_MISMATCH, EXIT_PASS, InputError
from ..records import NOT_RUN

SUITE = "attention"
STOP_GRACE = 10.0  # seconds a commit's verify has to stop its engines after SIGTERM, before SIGKILL
OPS_DIRS = ("ops/attention", "cases/attention")  # where a commit's op bundles (older: case files) live
SOURCE_DIRS = ("reference/", "port_ts/src/")


class GitError(Exception):
    pass


def git(where, *args):
    """git ARGS run in `where` -> its stdout (text, stripped); GitError with git's last line when it fails.
    --no-optional-locks: a read (`git diff`) never refreshes the user's index."""
    try:
        done = subprocess.run(["git", "--no-optional-locks", *args], cwd=where, capture_output=True, text=True)
    except OSError as exc:
        raise InputError(f"cannot run git ({exc.strerror}); verify bisect needs git on PATH") from None
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        raise GitError(said[-1] if said else f"git {args[0]} exited {done.returncode}")
    return done.stdout.strip()


def commit_of(root, rev):
    """The full hash of the commit REV names; InputError when it names none."""
    try:
        return git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    except GitError:
        raise InputError(f"{rev!r} names no commit of this repository (expected a revision git rev-parse takes: "
                         "a hash, a branch, a tag, HEAD~3); see `git log --oneline --first-parent`") from None


def describe(root, commit):
    """'<short hash> (<subject>)'."""
    return git(root, "log", "-1", "--format=%h (%s)", commit)


# --- one commit, in the temporary worktree ----------------------------------------------------

class Worktree:
    """The one linked worktree the commits are checked out in, inside the temporary directory
    `work`; remove() takes it out of git's list and the disk."""

    def __init__(self, root, work, commit):
        self.root = root
        self.path = Path(work) / "tree"
        self.prefix = git(root, "rev-parse", "--show-prefix")  # the project's place in the repository
        git(root, "worktree", "add", "--detach", "--quiet", str(self.path), commit)
        self.project = self.path / self.prefix

    def checkout(self, commit):
        git(self.path, "checkout", "--detach", "--force", "--quiet", commit)
        git(self.path, "clean", "-ffdxq")  # what the previous commit's run left (reports, __pycache__)
        modules = self.root / "port_ts" / "node_modules"
        if modules.is_dir() and (self.project / "port_ts").is_dir():
            (self.project / "port_ts" / "node_modules").symlink_to(modules.resolve())

    def remove(self):
        try:
            git(self.root, "worktree", "remove", "--force", "--force", str(self.path))
        except GitError as exc:
            print(f"verify: note: the temporary worktree {self.path} could not be removed ({exc}); "
                  "`git worktree prune` forgets it once its directory is gone", file=sys.stderr)


def run_verify(tree, work, commit, cases):
    """`verify attention --case ID ...` of the commit checked out in the worktree ->
    (exit code, its report or None, the last line it wrote to stderr)."""
    tree.checkout(commit)
    report = Path(work) / f"report-{commit[:12]}.json"
    errors = Path(work) / "stderr.txt"
    env, _ = lifecycle.engine_env()  # carries our token: a run outliving a killed bisect is reaped by the next verify
    env.update(PYTHONPATH=str(tree.project), VERIFY_FRESH="1", VERIFY_REFERENCE_CACHE=str(Path(work) / "cache"))
    command = [sys.executable, "-m", "verify", SUITE, *[a for c in cases for a in ("--case", c)], "--report", str(report)]
    with open(errors, "w") as err:
        proc = subprocess.Popen(command, cwd=tree.project, env=env, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)
        try:
            code = proc.wait()
        except BaseException:  # Ctrl-C, SIGTERM: the commit's verify stops its own engines first
            stop(proc)
            raise
    said = errors.read_text(errors="replace").strip().splitlines()
    said = said[-1].removeprefix("verify: error: ") if said else ""
    try:
        doc = read(report)
    except DocumentError:
        doc = None
    return code, doc if isinstance(doc, dict) else None, (said if len(said) <= 160 else said[:157] + "...")


def stop(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(STOP_GRACE)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        lifecycle.kill_group(proc.pid)


def fails(case):
    """Whether a report's case failed (a case not run did not: it says nothing of the commit)."""
    return not case.get("passed") and case.get("status") != NOT_RUN


def judge(code, report, cases):
    """('good' | 'bad' | 'skip', why, the first failing searched case or None) of one run."""
    if code == EXIT_INPUT or report is None:
        return "skip", f"verify exited {code} without a report", None
    found = {c.get("id"): c for c in report.get("cases", []) if isinstance(c, dict)}
    failing = [found[i] for i in cases if i in found and fails(found[i])]
    if failing:
        return "bad", f"{len(failing)} of {len(cases)} case(s) failing", failing[0]
    missing = [i for i in cases if i not in found]
    not_run = [i for i in cases if i in found and found[i].get("status") == NOT_RUN]
    if missing or not_run:
        return "skip", f"{len(missing)} case(s) missing, {len(not_run)} not run", None
    return "good", "", None


class Tester:
    """Runs commits one at a time and prints a line per commit as it goes."""

    def __init__(self, root, tree, work, out):
        self.root, self.tree, self.work, self.out = root, tree, work, out

    def test(self, commit, cases, what=""):
        start = time.monotonic()
        code, report, said = run_verify(self.tree, self.work, commit, cases)
        verdict, why, failing = judge(code, report, cases)
        if verdict == "skip" and said:
            why += f": {said}"
        seconds = time.monotonic() - start
        print(f"  {commit[:10]} {verdict:<4} {seconds:6.1f} s  {what}{why}".rstrip(), file=self.out, flush=True)
        return verdict, why, failing


# --- the failing cases ----------------------------------------------------------------------

def failing_ids(report):
    return [c["id"] for c in report.get("cases", []) if fails(c)]


def from_working_tree(root, patterns, out):
    """The failing case ids of the working tree's last report (the newer of the full and the subset one)."""
    paths = [root / name.format(suite=SUITE) for name in (cli.DEFAULT_REPORT, cli.SUBSET_REPORT)]
    paths = [p for p in paths if p.is_file()]
    if not paths:
        raise InputError(f"without BAD, verify bisect reads the working tree's last report, but neither "
                         f"{cli.DEFAULT_REPORT.format(suite=SUITE)} nor {cli.SUBSET_REPORT.format(suite=SUITE)} "
                         "exists; run `verify attention` first, or give BAD")
    path = max(paths, key=lambda p: p.stat().st_mtime)
    shown = path.relative_to(root).as_posix()
    try:
        doc = read(path)
        cli.load_schemas(root).check("report", doc)
    except DocumentError as exc:
        raise InputError(f"{shown} is not a report written by `verify`: {exc}; run `verify attention` again, "
                         "or give BAD") from None
    ids = [i for i in failing_ids(doc) if not patterns or any(catalogue.matches(i, p) for p in patterns)]
    if not ids:
        raise InputError(f"no case fails in {shown}{' among --case ' + ', '.join(patterns) if patterns else ''}; "
                         "there is nothing to search for (run `verify attention`, or give BAD)")
    print(f"failing cases: {len(ids)} from {shown} (the last report written): {', '.join(ids[:5])}"
          f"{' …' if len(ids) > 5 else ''}", file=out, flush=True)
    return ids


def at_bad(tester, bad, patterns, out):
    """The failing case ids of a run at BAD (every case, or those --case selects), and its report."""
    start = time.monotonic()
    code, report, said = run_verify(tester.tree, tester.work, bad, patterns)
    if code == EXIT_INPUT or report is None:
        raise InputError(f"verify did not run at BAD {describe(tester.root, bad)} (exit {code}: {said}); "
                         "give a BAD where `verify attention` runs")
    ids = failing_ids(report)
    if not ids:
        raise InputError(f"no case{' selected by --case' if patterns else ''} fails at BAD "
                         f"{describe(tester.root, bad)}; there is nothing to search for: give a BAD where one fails")
    print(f"  {bad[:10]} bad  {time.monotonic() - start:6.1f} s  BAD: {len(ids)} case(s) failing: "
          f"{', '.join(ids[:5])}{' …' if len(ids) > 5 else ''}", file=out, flush=True)
    return ids, report


# --- the search -------------------------------------------------------------------------------

def search(tester, commits, cases):
    """Binary search over `commits` (oldest first; the last is known bad, the one before the first
    known good) -> (the first bad index, the candidate indices when skips leave it open, the failing
    case of each commit found bad {index: case})."""
    good, bad = -1, len(commits) - 1
    skipped, failing = set(), {}
    while True:
        untested = [i for i in range(good + 1, bad) if i not in skipped]
        if not untested:
            break
        middle = (good + bad) // 2  # the untested commit nearest the middle, as git picks one next to a skip
        i = min(untested, key=lambda n: (abs(n - middle), n))
        verdict, _, case = tester.test(commits[i], cases)
        if verdict == "good":
            good = i
        elif verdict == "bad":
            bad, failing[i] = i, case
        else:
            skipped.add(i)
    between = sorted(i for i in skipped if good < i < bad)
    return bad, between + [bad] if between else [], failing


# --- what the first bad commit touched ------------------------------------------------------

def snake(name):
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def touched_ops(root, prefix, commit, files):
    """The ops a commit touched. Rule: the ops are the stems of the bundles ops/attention/<op>.json
    (older: cases/attention/<op>.json) at that commit; a changed file names an op when it is its
    bundle, or a .py or .ts file under reference/ or port_ts/src/ whose stem, camelCase turned to
    snake_case, is that op (reference/nn/layer_norm.py, port_ts/src/nn/layerNorm.ts: layer_norm)."""
    known = set()
    for folder in OPS_DIRS:
        listing = git(root, "ls-tree", "--name-only", "--full-tree", commit, f"{prefix}{folder}/")
        known |= {Path(name).stem for name in listing.splitlines() if name.endswith(".json")}
    found = []
    for name in files:
        path = Path(name[len(prefix):] if name.startswith(prefix) else name)
        is_bundle = path.parent.as_posix() in OPS_DIRS and path.suffix == ".json"
        is_source = path.as_posix().startswith(SOURCE_DIRS) and path.suffix in (".py", ".ts")
        op = snake(path.stem)
        if (is_bundle or is_source) and op in known and op not in found:
            found.append(op)
    return found


def case_lines(case):
    """The case that decided it: its first reason, and its worst failing tensor when the report has one."""
    reason = (case.get("failures") or case.get("errors") or ["failed"])[0]
    lines = [f"decided by: {case['id']}: {reason}"]
    tensors = [t for t in case.get("tensors") or [] if isinstance(t, dict) and not t.get("passed", True)
               and isinstance(t.get("max_abs"), (int, float))]
    if tensors:
        worst = max(tensors, key=lambda t: t["max_abs"])
        sides, ulp = " vs ".join(worst.get("sides") or []), worst.get("max_ulp")
        ulp = f"{ulp:.2e}" if isinstance(ulp, int) and ulp > 99999 else ulp  # as the run's own lines show it
        lines.append(f"  worst tensor: {worst.get('role', '')} {worst.get('name')} ({sides}) "
                     f"max|diff| {worst['max_abs']:.3g}, {ulp} ULP")
    return lines


def verdict_lines(root, prefix, commit, case):
    files = git(root, "diff", "--name-only", f"{commit}^1", commit).splitlines()  # as `git show --name-only`, a merge too
    ops = touched_ops(root, prefix, commit, files)
    lines = [f"first failing commit: {git(root, 'log', '-1', '--format=%H %s', commit)}", "files:"]
    lines += [f"  {f}" for f in files] or ["  (none)"]
    lines.append(f"ops touched: {', '.join(ops) if ops else '(none: no bundle or op module changed)'}")
    return lines + case_lines(case)


# --- the command ----------------------------------------------------------------------------

def parser():
    p = argparse.ArgumentParser(
        prog="verify bisect",
        description="Find the first commit at which the failing cases of BAD start to fail: each commit runs its own "
                    "`verify attention` on those cases in one temporary linked worktree (your working tree, index, "
                    "HEAD, refs, goldens, reports and reference cache are never touched), by a binary search over the "
                    "first-parent commits GOOD..BAD. Without BAD, the failing cases are those of the working tree's "
                    "last report and the bad end is HEAD. A commit where verify exits 2, or a case is not run or "
                    "missing, is skipped. Prints a line per tested commit, then the first failing commit, its files, "
                    "the ops it touched and the case that decided it. Exit 0 when it names the commit (or the "
                    "uncommitted changes), 1 when skipped commits leave it open, 2 on a usage or input error (not a "
                    "git checkout, an unknown revision, GOOD not an ancestor of BAD, GOOD failing too).")
    p.add_argument("good", metavar="GOOD", help="a commit where the cases pass")
    p.add_argument("bad", metavar="BAD", nargs="?",
                   help="a commit where they fail (default: HEAD, the cases from the working tree's last report)")
    p.add_argument("--case", metavar="PATTERN", action="append", default=[],
                   help="search only these cases (as `verify attention --case`: a glob on the whole id, or a "
                        "substring); repeatable")
    return p


def run(args, out):
    try:
        return bisect_command(args, out)
    except GitError as exc:  # git refused something no check above foresaw: its own words, no traceback
        raise InputError(f"git failed: {exc}; check the repository (`git status`, `git worktree list`)") from None


def bisect_command(args, out):
    root = cli.repo_root()
    for pattern in args.case:
        catalogue.matches("", pattern)  # an empty pattern is refused here, not at the first commit
    try:
        git(root, "rev-parse", "--show-toplevel")
    except GitError as exc:
        raise InputError(f"{root} is not a git checkout ({exc}); verify bisect searches the history of one: run it "
                         "from a clone of the project") from None
    good = commit_of(root, args.good)
    bad = commit_of(root, args.bad or "HEAD")
    try:
        git(root, "merge-base", "--is-ancestor", good, bad)
        ancestor = good != bad
    except GitError:
        ancestor = False
    if not ancestor:
        raise InputError(f"GOOD {args.good} is not an ancestor of BAD {args.bad or 'HEAD'} (expected an older commit "
                         "of the same history); check the order: verify bisect GOOD BAD")
    commits = git(root, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}").splitlines()
    cases = from_working_tree(root, args.case, out) if args.bad is None else None
    with lifecycle.temp_dir("verify-bisect-") as work:
        tree = Worktree(root, work, good)
        try:
            return bisect(Tester(root, tree, work, out), good, bad, commits, cases, args.case, out)
        finally:
            tree.remove()


def bisect(tester, good, bad, commits, cases, patterns, out):
    """The steps after the arguments are checked: the failing cases, BAD and GOOD, the search, the verdict."""
    root, prefix = tester.root, tester.tree.prefix
    if cases is None:  # BAD given: its failing cases
        cases, report = at_bad(tester, bad, patterns, out)
        bad_case = next(c for c in report["cases"] if c["id"] == cases[0])
    else:  # HEAD, checked on the cases of the working tree's report
        verdict, why, bad_case = tester.test(bad, cases, "HEAD ")
        if verdict == "good":
            print("HEAD passes these cases: the failure is in the uncommitted changes (`git diff HEAD`):", file=out)
            print("\n".join(f"  {f}" for f in git(root, "diff", "--name-only", "HEAD").splitlines()) or "  (none)",
                  file=out)
            return EXIT_PASS
        if verdict == "skip":
            print(f"cannot decide: verify does not run these cases at HEAD ({why})", file=out)
            return EXIT_MISMATCH
    verdict, why, _ = tester.test(good, cases, "GOOD ")
    if verdict != "good":
        raise InputError(f"GOOD {describe(root, good)} is not good: " +
                         (f"it fails the cases too ({why})" if verdict == "bad" else f"verify does not run the cases "
                          f"there ({why})") + "; give an older GOOD where they pass")
    print(f"bisecting: {len(commits) - 1} commit(s) between GOOD and BAD", file=out, flush=True)
    first, candidates, failing = search(tester, commits, cases)
    failing[len(commits) - 1] = bad_case
    if candidates:
        print("cannot decide: only skipped commits lie between; the first failing commit could be any of:", file=out)
        for i in candidates:
            print(f"  {describe(root, commits[i])}", file=out)
        return EXIT_MISMATCH
    for line in verdict_lines(root, prefix, commits[first], failing[first]):
        print(line, file=out)
    return EXIT_PASS
