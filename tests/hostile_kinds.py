"""The hostile inputs and conditions the suite tries, one row per kind (their table:
docs/reference/hostile-conditions.md). Every row is a parameter of the test that consumes its area
(CONSUMERS), which builds the input from the row's `data`, runs `verify` on it and asserts the row's
exit code and message fragment; tests/test_hostile_table.py checks that every area has its consumer,
and tests/test_docs_generated.py that the page holds exactly the table markdown() makes
(`python scripts/generate_docs.py` writes it; `python tests/hostile_kinds.py` prints it).

Areas: the catalogue (`verify attention --list --cases-dir DIR`), a golden file (`verify diff`), the
engine process (a scripted port through the whole `verify attention`), the documents an engine
writes, the command line, the engines' config rule (both real engines), and the conditions of a
run (signals, SIGKILL, concurrent and symlinked regenerations: tests/test_lifecycle.py,
tests/test_regen_lock.py)."""

import json
import os
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Kind:
    area: str
    name: str  # unique within its area: the pytest id
    what: str  # what is tried (the table's first column)
    exit: int  # the exit code it gets
    says: str  # a fragment of the one line (exit 2) or of the case's message (exit 1) it gets
    data: object = None  # what the consuming test builds the input from


ROWS = []

# area -> the test that tries every row of it (module, function)
CONSUMERS = {
    "catalogue": ("test_hostile_table", "test_a_hostile_catalogue"),
    "golden file": ("test_hostile_table", "test_a_hostile_golden"),
    "engine process": ("test_hostile_table", "test_a_hostile_engine_process"),
    "engine document": ("test_hostile_table", "test_a_hostile_engine_document"),
    "command line": ("test_hostile_table", "test_a_hostile_command_line"),
    "engine config": ("test_hostile_table", "test_a_config_both_engines_refuse"),
    "signal": ("test_lifecycle", "test_a_signal_to_the_runner_stops_both_engines_and_removes_its_directory"),
    "sigkill": ("test_lifecycle", "test_after_a_sigkill_of_the_runner_the_engines_exit_and_the_next_run_cleans"),
    "hostile port": ("test_lifecycle", "test_after_a_hostile_port_nothing_of_the_run_is_left"),
    "concurrent runs": ("test_lifecycle", "test_the_next_run_never_touches_a_live_runs_directory"),
    "regeneration": ("test_regen_lock", "test_a_regeneration_condition"),
    "port daemon": ("test_trust_processes", "test_nothing_a_port_started_outlives_the_run_however_it_detached"),
    "browser temporary files": ("test_trust_processes", "test_a_browser_run_leaves_nothing_in_the_temporary_directory"),
}

AREA_TITLES = {
    "catalogue": "A catalogue file (`verify attention --cases-dir DIR`); exit 2 before any engine runs",
    "golden file": "A golden file (`verify diff FILE GOOD`; the same reader as the committed goldens)",
    "engine process": "The port's process (`verify attention --port-cmd CMD`, a scripted engine)",
    "engine document": "What the port writes (`verify attention --port-cmd CMD`); the case fails, exit 1",
    "command line": "The command line",
    "engine config": "A config both engines refuse, with the same message (both real engines)",
    "signal": "A signal to the runner, both real engines running (nothing left: tests/processes.py)",
    "sigkill": "SIGKILL of the runner, both real engines running",
    "hostile port": "A hostile port, then the process-level check (no process or directory of the run left)",
    "concurrent runs": "Concurrent runs",
    "regeneration": "Regenerations",
    "port daemon": ("A port that leaves a daemon behind (fork, setsid, fork, descriptors closed, `env -i`: no token), "
                    "then the check that no process of it is left and the run's TMPDIR is empty"),
    "browser temporary files": "A run in Chromium with TMPDIR a fresh directory, which must be left empty",
}


def kind(area, name, what, exit, says, data=None):
    assert area in CONSUMERS, area
    assert not any(r.area == area and r.name == name for r in ROWS), (area, name)
    ROWS.append(Kind(area, name, what, exit, says, data))


def params(area):
    """The rows of an area as pytest parameters (id: the row's name)."""
    rows = [r for r in ROWS if r.area == area]
    assert rows, f"no row in area {area!r}"
    return [pytest.param(r, id=r.name) for r in rows]


def markdown():
    """The table of docs/reference/hostile-conditions.md, one section per area."""
    out = [f"{len(ROWS)} kinds, each tried by a test (tests/hostile_kinds.py; the consuming test per area below).", ""]
    for area, (module, function) in CONSUMERS.items():
        rows = [r for r in ROWS if r.area == area]
        out += [f"**{AREA_TITLES[area]}** ({len(rows)}; `tests/{module}.py::{function}`)", "",
                "| kind | exit | says |", "|---|---|---|"]
        for r in rows:
            says = r.says.replace("|", "\\|").replace("`", "'")
            what = r.what.replace("|", "\\|")
            out.append(f"| {what} | {r.exit} | `{says}` |" if says else f"| {what} | {r.exit} | |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# --- the catalogue ----------------------------------------------------------------------------

CASE = {"id": "masked_softmax.x", "kind": "forward", "op": "masked_softmax", "seed": 1, "config": {"shape": [2, 3, 4]}}


def _cat(*cases, **top):
    return json.dumps({"cases": list(cases), **top})


def _case(**changes):
    case = dict(CASE, **{k: v for k, v in changes.items() if v is not _DROP})
    for k, v in changes.items():
        if v is _DROP:
            case.pop(k)
    return case


_DROP = object()


def _config(**changes):
    return _case(config=dict(CASE["config"], **changes))


def _special(make):
    """A catalogue 'file' the test makes itself: make(path) creates cases/f0.json."""
    return make


def _fifo(path):
    os.mkfifo(path)


def _dev_zero(path):
    path.symlink_to("/dev/zero")


def _directory(path):
    path.mkdir()


def _broken_link(path):
    path.symlink_to(path.parent / "no-such-target.json")


def _huge(path):
    path.write_text(_cat(_case(description="x" * (1 << 20))))


C = "catalogue"
kind(C, "truncated", "truncated JSON", 2, "not valid JSON", '{"cases": [ {"id": ')
kind(C, "empty-file", "an empty file", 2, "not valid JSON", "")
kind(C, "whitespace", "only whitespace", 2, "not valid JSON", " \n\t ")
kind(C, "bom", "a UTF-8 byte order mark before the JSON", 2, "not valid JSON", "\ufeff" + _cat(CASE))
kind(C, "not-utf8", "bytes that are not UTF-8", 2, "cannot read it", b'{"cases": [\xff\xfe]}')
kind(C, "utf16", "the JSON in UTF-16", 2, "cannot read it", _cat(CASE).encode("utf-16"))
kind(C, "nul-in-string", "a NUL inside a string", 2, "not valid JSON", _cat(CASE).replace("masked_softmax.x", "a\x00b"))
kind(C, "bare-nan", "a bare NaN (seed)", 2, "bare NaN is not JSON", _cat(CASE).replace('"seed": 1', '"seed": NaN'))
kind(C, "bare-infinity", "a bare Infinity in the config", 2, "bare Infinity is not JSON",
     _cat(CASE).replace('"config": {', '"config": {"std": Infinity, '))
kind(C, "bare-minus-infinity", "a bare -Infinity in the config", 2, "bare -Infinity is not JSON",
     _cat(CASE).replace('"config": {', '"config": {"mean": -Infinity, '))
kind(C, "std-1e400", '`"std": 1e400` (Infinity once parsed)', 2, "at cases[0].config.std: a number beyond the float64 range",
     _cat(CASE).replace('"config": {', '"config": {"std": 1e400, '))
kind(C, "mean-minus-1e400", '`"mean": -1e400`', 2, "at cases[0].config.mean: a number beyond the float64 range",
     _cat(CASE).replace('"config": {', '"config": {"mean": -1e400, '))
kind(C, "nested-1e400", "1e400 inside a nested config list", 2, "at cases[0].config.q[0][1]",
     _cat(CASE).replace('"config": {', '"config": {"q": [[1, 1e400]], '))
kind(C, "expect-1e400", "1e400 as a quality bar (expect.at_least)", 2, "at cases[0].expect.at_least.out",
     _cat(CASE).replace('"config": {', '"expect": {"at_least": {"out": 1e400}}, "config": {'))
kind(C, "seed-1e400", "1e400 as the seed", 2, "cases[0].seed", _cat(CASE).replace('"seed": 1', '"seed": 1e400'))
kind(C, "deep-nesting", "arrays nested 100,000 deep", 2, "nested too deeply", '{"cases": ' + "[" * 100000 + "]" * 100000 + "}")
kind(C, "top-array", "a JSON array at the top", 2, "at the top level", json.dumps([CASE]))
kind(C, "top-string", "a JSON string at the top", 2, "at the top level", '"cases"')
kind(C, "no-cases", "no `cases` key", 2, "'cases' is a required property", json.dumps({"description": "x"}))
kind(C, "cases-empty", "an empty case list", 2, "at cases", _cat())
kind(C, "cases-object", "`cases` an object", 2, "at cases", json.dumps({"cases": CASE}))
kind(C, "extra-top", "an unknown top-level key", 2, "Additional properties", _cat(CASE, extra=1))
kind(C, "case-number", "a case that is a number", 2, "at cases[0]", json.dumps({"cases": [7]}))
for _key in ("id", "kind", "op", "seed", "config"):
    kind(C, f"no-{_key}", f"a case without `{_key}`", 2, f"'{_key}' is a required property", _cat(_case(**{_key: _DROP})))
kind(C, "extra-case-key", "an unknown key in a case", 2, "Additional properties", _cat(_case(colour="red")))
kind(C, "id-empty", "an empty id", 2, "at cases[0].id", _cat(_case(id="")))
kind(C, "id-slash", "an id with a path (`../escape`)", 2, "at cases[0].id", _cat(_case(id="../escape")))
kind(C, "id-space", "an id with a space", 2, "at cases[0].id", _cat(_case(id="a b")))
kind(C, "id-dot", "an id starting with a dot", 2, "at cases[0].id", _cat(_case(id=".hidden")))
kind(C, "id-unicode", "an id with a non-ASCII letter", 2, "at cases[0].id", _cat(_case(id="caf\u00e9")))
kind(C, "id-ansi", "an id with an ANSI escape (shown escaped)", 2, "at cases[0].id", _cat(_case(id="\x1b[31mred")))
kind(C, "id-newline", "an id with a newline", 2, "at cases[0].id", _cat(_case(id="a\nb")))
kind(C, "id-long", "an id of 201 characters", 2, "at cases[0].id", _cat(_case(id="a" * 201)))
kind(C, "id-number", "an id that is a number", 2, "at cases[0].id", _cat(_case(id=7)))
kind(C, "kind-unknown", "kind `backward`", 2, "at cases[0].kind", _cat(_case(kind="backward")))
kind(C, "kind-null", "kind null", 2, "at cases[0].kind", _cat(_case(kind=None)))
kind(C, "op-upper", "an op with capitals", 2, "at cases[0].op", _cat(_case(op="Masked_Softmax")))
kind(C, "op-empty", "an empty op", 2, "at cases[0].op", _cat(_case(op="")))
kind(C, "seed-negative", "a negative seed", 2, "at cases[0].seed", _cat(_case(seed=-1)))
kind(C, "seed-float", "seed 1.5", 2, "at cases[0].seed", _cat(_case(seed=1.5)))
kind(C, "seed-string", 'seed "seven"', 2, "at cases[0].seed", _cat(_case(seed="seven")))
kind(C, "seed-bool", "seed true", 2, "at cases[0].seed", _cat(_case(seed=True)))
kind(C, "seed-huge", "seed 2**53", 2, "at cases[0].seed", _cat(_case(seed=2 ** 53)))
kind(C, "seed-null", "seed null", 2, "at cases[0].seed", _cat(_case(seed=None)))
kind(C, "config-list", "config a list", 2, "at cases[0].config", _cat(_case(config=[1, 2])))
kind(C, "config-string", "config a string", 2, "at cases[0].config", _cat(_case(config="shape")))
kind(C, "config-null", "config null", 2, "at cases[0].config", _cat(_case(config=None)))
kind(C, "description-number", "a description that is a number", 2, "at cases[0].description", _cat(_case(description=3)))
kind(C, "expect-unknown", "an unknown expect key", 2, "at cases[0].expect", _cat(_case(expect={"colour": 1})))
kind(C, "bitwise-digests-string", "expect.bitwise_digests a string", 2, "at cases[0].expect.bitwise_digests", _cat(_case(expect={"bitwise_digests": "state"})))
kind(C, "at-least-string", "a quality bar that is a string", 2, "at cases[0].expect.at_least.out",
     _cat(_case(expect={"at_least": {"out": "high"}})))
kind(C, "segments-triple", "a replay segment of three steps", 2, "at cases[0].expect.replay_segments[0]",
     _cat(_case(expect={"replay_segments": [[0, 1, 2]]})))
kind(C, "digests-repeated", "the same digest named twice", 2, "at cases[0].expect.equal_digests",
     _cat(_case(expect={"equal_digests": ["a", "a"]})))
kind(C, "duplicate-id", "a duplicate id in one file", 2, "duplicate case id 'masked_softmax.x'", _cat(CASE, CASE))
kind(C, "duplicate-id-files", "a duplicate id in two files", 2, "duplicate case id 'masked_softmax.x'", [_cat(CASE), _cat(CASE)])
kind(C, "case-fold", "two ids that differ only in case", 2, "differ only in case", _cat(CASE, _case(id="Masked_softmax.x")))
for _suffix, _file in ((".full", ".full.json"), (".states", ".states/"), (".replay", ".replay/")):
    kind(C, f"collides{_suffix}", f"an id that is another id plus `{_suffix}` (their files collide)", 2,
         f"plus '{_suffix}': an engine writes masked_softmax.x{_file} for 'masked_softmax.x'",
         _cat(CASE, _case(id="masked_softmax.x" + _suffix)))
kind(C, "shape-1e9", "shape [1000, 1000, 1000]", 2, "config.shape [1000, 1000, 1000] has 1000000000 elements, more than the limit of 65536",
     _cat(_config(shape=[1000, 1000, 1000])))
kind(C, "x-shape-big", "an x_shape of 2**17 elements", 2, "config.x_shape [512, 256] has 131072 elements",
     _cat(_case(op="linear", config={"x_shape": [512, 256], "out": 4})))
kind(C, "tokens-shape-big", "a tokens_shape beyond the limit", 2, "config.tokens_shape", _cat(_case(op="embedding", config={"tokens_shape": [300, 300]})))
kind(C, "lead-big", "a lead shape beyond the limit", 2, "config.lead", _cat(_case(op="dot_product_attention", config={"lead": [70000]})))
kind(C, "shapes-item-big", "one of `shapes` beyond the limit", 2, "config.shapes[1]", _cat(_case(op="x", config={"shapes": [[2], [400, 400]]})))
kind(C, "integer-big", "a count of 1,000,000", 2, "config.B is 1000000, beyond the limit of 100000", _cat(_config(B=1000000)))
kind(C, "integer-huge-nested", "an integer of 10**30 in a nested list", 2, "config.valid_lens[1] is 1000000000000000000000000000000",
     _cat(_config(valid_lens=[1, 10 ** 30])))
kind(C, "file-huge", "a catalogue file over 1 MiB", 2, "more than the 1048576 allowed", _special(_huge))
kind(C, "dev-zero", "a link to /dev/zero (refused unread)", 2, "it is a character device, not a regular file", _special(_dev_zero))
kind(C, "fifo", "a named pipe (never opened for a blocking read)", 2, "it is a named pipe, not a regular file", _special(_fifo))
kind(C, "directory", "a directory named f0.json", 2, "it is a directory, not a regular file", _special(_directory))
kind(C, "broken-link", "a link to nothing", 2, "cannot read it", _special(_broken_link))
kind(C, "no-files", "a directory without *.json", 2, "no catalogue files (*.json)", [])


# --- a golden file ----------------------------------------------------------------------------
# data: a function of the golden's text (masked_softmax.lens_1d, reference) -> damaged text or
# bytes; or of its path, for a file the test makes itself.

def _doc(change):
    def damage(text):
        doc = json.loads(text)
        change(doc)
        return json.dumps(doc)
    return damage


def _set_data(part, name, i, value):
    return _doc(lambda d: d[part][name]["data"].__setitem__(i, value))


G = "golden file"
kind(G, "truncated", "truncated", 2, "not valid JSON", lambda t: t[: len(t) // 2])
kind(G, "empty", "empty", 2, "not valid JSON", lambda t: "")
kind(G, "text", "plain text (/etc/passwd-like)", 2, "not valid JSON", lambda t: "root:x:0:0:root:/root:/bin/bash\n")
kind(G, "bare-nan", "a bare NaN in data", 2, "bare NaN is not JSON", lambda t: t.replace('"data": [1.', '"data": [NaN, 1.', 1))
kind(G, "bare-infinity", "a bare Infinity in data", 2, "bare Infinity is not JSON", lambda t: t.replace('"data": [1.', '"data": [Infinity, 1.', 1))
def _raw_value(part, name, i, raw):
    """The JSON text with data[i] of a tensor written as `raw` (a number text json.dumps cannot make)."""
    def damage(text):
        doc = json.loads(text)
        doc[part][name]["data"][i] = "@raw@"
        return json.dumps(doc).replace('"@raw@"', raw)
    return damage


kind(G, "float-1e400", "1e400 in float64 data", 2, "data[0] is inf, beyond the range of float64", _raw_value("inputs", "x", 0, "1e400"))
kind(G, "float-minus-1e400", "-1e400 in float64 data", 2, "data[3] is -inf, beyond the range of float64",
     _raw_value("outputs", "out", 3, "-1e400"))
kind(G, "int-2e70", "2**70 in int64 data", 2, "beyond the range of int64", _set_data("inputs", "valid_lens", 0, 2 ** 70))
kind(G, "nan-lowercase", 'the string "nan" in data', 2, "inputs.x", _set_data("inputs", "x", 0, "nan"))
kind(G, "bool-in-data", "true in data", 2, "inputs.x", _set_data("inputs", "x", 0, True))
kind(G, "null-in-data", "null in data", 2, "inputs.x", _set_data("inputs", "x", 0, None))
kind(G, "list-in-data", "a nested list in data", 2, "inputs.x", _set_data("inputs", "x", 0, [1.0]))
kind(G, "fraction-int64", "1.5 in int64 data", 2, "inputs.valid_lens", _set_data("inputs", "valid_lens", 0, 1.5))
kind(G, "data-long", "one value more than the shape holds", 2, "needs 30 values, data has 31",
     _doc(lambda d: d["outputs"]["out"]["data"].append(0.5)))
kind(G, "data-short", "one value fewer", 2, "needs 30 values, data has 29", _doc(lambda d: d["outputs"]["out"]["data"].pop()))
kind(G, "shape-negative", "a negative dimension", 2, "outputs.out.shape", _doc(lambda d: d["outputs"]["out"].__setitem__("shape", [-30])))
kind(G, "shape-float", "a dimension 2.5", 2, "outputs.out.shape", _doc(lambda d: d["outputs"]["out"].__setitem__("shape", [2.5])))
kind(G, "shape-infinity", 'a dimension "Infinity"', 2, "outputs.out.shape", _doc(lambda d: d["outputs"]["out"].__setitem__("shape", ["Infinity"])))
kind(G, "shape-huge", "shape [2**40, 2**40] with the data of 30", 2, "shape [1099511627776, 1099511627776] needs",
     _doc(lambda d: d["outputs"]["out"].__setitem__("shape", [2 ** 40, 2 ** 40])))
kind(G, "dtype-float16", "dtype float16", 2, "outputs.out.dtype", _doc(lambda d: d["outputs"]["out"].__setitem__("dtype", "float16")))
for _key in ("schema_version", "engine", "generator", "case", "inputs", "outputs"):
    kind(G, f"no-{_key}", f"no `{_key}`", 2, f"'{_key}' is a required property", _doc(lambda d, k=_key: d.pop(k)))
kind(G, "version-string", 'schema_version "one"', 2, "at schema_version", _doc(lambda d: d.__setitem__("schema_version", "one")))
kind(G, "extra-key", "an unknown top-level key", 2, "Additional properties", _doc(lambda d: d.__setitem__("colour", 1)))
kind(G, "tensor-name", "a tensor named `bad name!`", 2, "outputs", _doc(lambda d: d["outputs"].__setitem__("bad name!", d["outputs"]["out"])))
kind(G, "tensor-extra-key", "an unknown key in a tensor", 2, "outputs.out", _doc(lambda d: d["outputs"]["out"].__setitem__("unit", "m")))
kind(G, "digest-not-hex", "a digest that is not 64 hex digits", 2, "digests", _doc(lambda d: d.__setitem__("digests", {"init": "xyz"})))
kind(G, "top-list", "a list at the top", 2, "at the top level", lambda t: "[" + t + "]")
kind(G, "not-utf8", "bytes that are not UTF-8", 2, "cannot read it", lambda t: t.encode() + b"\xff")
kind(G, "deep", "nested 100,000 deep", 2, "nested too deeply", lambda t: "[" * 100000 + "]" * 100000)
kind(G, "dev-zero", "a link to /dev/zero", 2, "it is a character device", ("make", lambda path: path.symlink_to("/dev/zero")))
kind(G, "fifo", "a named pipe", 2, "it is a named pipe", ("make", os.mkfifo))
kind(G, "sparse-huge", "a (sparse) file of 65 MiB", 2, "more than the 67108864 allowed",
     ("make", lambda path: os.truncate(path, 65 << 20) if path.write_bytes(b"") == 0 else None))


# --- the engine process -----------------------------------------------------------------------
# data: the scripted port's body (tests/test_hostile_table.py ENGINE: request, ids, status(),
# copy_all() ...) and optional extra arguments of `verify attention`.

E = "engine process"


def _e(name, what, exit, says, body, *args):
    kind(E, name, what, exit, says, (body, list(args)))


_e("text-line", "a line of text on stdout", 2, "printed something that is not a status line on stdout line 1", "out('hello')")
_e("empty-line", "an empty line", 2, "printed an empty line on stdout line 1", "out('')")
_e("blank-line", "a line of spaces", 2, "printed an empty line", "out('   ')")
_e("json-array", "a JSON array", 2, "not a status line", "out('[1, 2]')")
_e("no-id", "a status without id", 2, "not a status line", "out(json.dumps({'ok': True}))")
_e("id-number", "an id that is a number", 2, "not a status line", "out(json.dumps({'id': 7, 'ok': True}))")
_e("ok-string", 'ok "true"', 2, "not a status line", "out(json.dumps({'id': ids[0], 'ok': 'true'}))")
_e("no-ok", "a status without ok", 2, "not a status line", "out(json.dumps({'id': ids[0]}))")
_e("bare-nan", "a bare NaN in a status", 2, "not a status line", "out('{\"id\": \"%s\", \"ok\": true, \"seconds\": NaN}' % ids[0])")
_e("ok-twice", 'ok named twice in a status ("ok": false, "ok": true)', 2, "not a status line",
   "copy_all(); out('{\"id\": \"%s\", \"ok\": false, \"ok\": true}' % ids[0])")
_e("not-utf8", "a line that is not UTF-8", 2, "printed a line that is not UTF-8", "raw(b'\\xff\\xfe\\n')")
_e("long-line", "a 2 MiB line", 2, "a line longer than 1048576 bytes", "raw(b'x' * (2 << 20)); hang()")
_e("many-bytes", "status lines beyond 16 MiB in all", 2, "more than 16777216 bytes on stdout",
   "[out(json.dumps({'id': ids[0], 'ok': False, 'error': 'x' * 60000})) for _ in range(300)]")
_e("blank-flood", "16 MiB of blank lines (refused at the first)", 2, "printed an empty line on stdout line 1",
   "[raw(b'\\n' * (1 << 20)) for _ in range(16)]")
_e("stranger", "a status for a case it was not sent", 2, "reported case 'nobody.asked', which it was not sent",
   "status('nobody.asked')")
_e("stranger-ansi", "a stranger id with an ANSI escape (shown escaped)", 2, "reported case '\\x1b[31mred', which it was not sent",
   "status('\\x1b[31mred')")
_e("traceback", "a Python crash", 2, "exited with code 1", "raise ValueError('the kernel table is empty')")
_e("traceback-line", "a Python crash: the line that names the error is kept", 2, "ValueError: the kernel table is empty",
   "copy_all(); raise ValueError('the kernel table is empty')")
_e("exit-3", "exit code 3", 2, "exited with code 3", "sys.exit(3)")
_e("exit-255", "exit code 255", 2, "exited with code 255", "copy_all(); sys.exit(255)")
_e("sigkill-self", "killed by SIGKILL", 2, "was killed by signal 9", "os.kill(os.getpid(), 9)")
_e("sigsegv-self", "killed by SIGSEGV", 2, "was killed by signal 11", "os.kill(os.getpid(), 11)")
_e("node-crash-text", "Node's crash text on stderr: the `Error:` line is kept", 2, "Error: out of cheese | at deep (",
   "err('file:///port.ts:3\\n  throw new Error(x);\\n  ^\\n\\nError: out of cheese\\n    at deep (file:///port.ts:3:9)\\n"
   "    at main (file:///port.ts:9:1)\\n    at run (file:///port.ts:12:1)\\n\\nNode.js v24.19.0\\n'); sys.exit(1)")
_e("stderr-ansi", "an ANSI escape on stderr (shown escaped)", 2, "\\x1b[31mError: \\x01boom\\x1b[0m",
   "err('\\x1b[31mError: \\x01boom\\x1b[0m\\n'); sys.exit(4)")
_e("hang", "a hang", 2, "did not finish within 2 s", "hang()", "--timeout", "2")
_e("hang-after", "a hang after every status line", 2, "did not finish within 2 s", "copy_all(); hang()", "--timeout", "2")
_e("close-then-hang", "stdout closed, then a hang", 2, "did not finish within 2 s", "copy_all(); os.close(1); hang()", "--timeout", "2")
_e("detached-exit-0", "a child in its own session holding stdout, the port exits 0", 2, "but something it started still held its stdout",
   "detach(); copy_all()")
_e("detached-hang", "a child in its own session holding stdout, the port hangs", 2, "did not finish within 2 s",
   "detach(); hang()", "--timeout", "2")
_e("child-exit-0", "a child in the port's group holding stdout, the port exits 0", 2, "but something it started still held its stdout",
   "child(); copy_all()")
_e("stderr-flood", "64 MiB on stderr, then a good answer", 0, "passed, 0 failed",
   "[err('noise ' * 65536 + '\\n') for _ in range(170)]; copy_all()")
_e("no-stdin-no-output", "exits 0 at once, reading nothing, printing nothing", 1, "port: gave no status line for this case",
   "#nostdin")
_e("silent", "reads the request, prints nothing, exits 0", 1, "port: gave no status line for this case", "pass")
_e("duplicate-status", "the same status line twice", 0, "passed, 0 failed", "copy_all(); [status(i) for i in ids]")
_e("status-changed", "a second, different status line for a case (ok, then failed): a case is judged once", 2,
   "printed a second, different status line for case", "copy_all(); [status(i, ok=False, error='late') for i in ids]")
_e("status-changed-seconds", "the same case's status line again with other seconds", 2,
   "printed a second, different status line for case", "copy_all(); [status(i, seconds=1) for i in ids]")
_e("ok-false-bare", "ok false without an error", 1, "port: failed without a message", "[status(i, ok=False) for i in ids]")
_e("error-number", "an error that is a number", 1, "port: 42", "[status(i, ok=False, error=42) for i in ids]")
_e("error-control", "an error with control characters (shown escaped)", 1, "port: bad\\x00\\x07\\x1b[2Jtext",
   "[status(i, ok=False, error='bad\\x00\\x07\\x1b[2Jtext') for i in ids]")
_e("seconds-negative", "seconds -1", 0, "passed, 0 failed", "copy_all(seconds=-1)")
_e("seconds-string", 'seconds "fast"', 0, "passed, 0 failed", "copy_all(seconds='fast')")
_e("seconds-1e400", "seconds 1e400 (the report still follows its schema)", 0, "passed, 0 failed",
   "[write(i, text(i)) or out('{\"id\": \"%s\", \"ok\": true, \"seconds\": 1e400}' % i) for i in ids]")
_e("no-command", "a command that does not exist", 2, "cannot start the port engine", "@/no/such/port")
_e("a-directory", "a command that is a directory", 2, "cannot start the port engine", "@/tmp")
_e("not-executable", "a file without the execute bit", 2, "cannot start the port engine", "@/etc/hostname")
_e("empty-command", "`--port-cmd ''` (never the built-in port)", 2, "--port-cmd is empty", "@")
_e("blank-command", "`--port-cmd '   '`", 2, "--port-cmd is empty", "@   ")
_e("bad-quoting", "a command with an unclosed quote", 2, "cannot be split into words", "@node 'port.ts")
_e("html-unwritable", "--html where no file can be written", 2, "cannot write the HTML report", "copy_all()", "--html", "/proc/verify.html")
_e("junit-unwritable", "--junit where no file can be written", 2, "cannot write the JUnit XML", "copy_all()", "--junit", "/proc/verify.xml")
_e("report-unwritable", "--report where no file can be written", 2, "cannot write the JSON report", "copy_all()",
   "--report", "/proc/verify.json")


# --- what the engine writes -------------------------------------------------------------------
# data: the scripted port's body; the reference answers with its goldens. Exit 1: the case fails.

D = "engine document"


def _d(name, what, exit, says, body, reference="copy_all()"):
    kind(D, name, what, exit, says, (body, reference))


_d("truncated", "a truncated document", 1, "port: wrote an invalid golden document: not valid JSON",
   "[write(i, text(i)[:100]) or status(i) for i in ids]")
_d("bare-nan", "a bare NaN", 1, "bare NaN is not JSON", "[write(i, text(i).replace('\"data\": [', '\"data\": [NaN, ', 1)) or status(i) for i in ids]")
_d("count", "a data list one too long", 1, "needs 30 values, data has 31",
   "[dump(i, edit(i, lambda d: d['outputs']['out']['data'].append(0.5))) or status(i) for i in ids]")
_d("schema", "no generator", 1, "port: wrote an invalid golden document", "[dump(i, edit(i, lambda d: d.pop('generator'))) or status(i) for i in ids]")
_d("seed", "an echoed case with another seed", 1, "port: echoed a different case: case.seed",
   "[dump(i, edit(i, lambda d: d['case'].__setitem__('seed', 99))) or status(i) for i in ids]")
_d("extra-config", "an echoed config key the catalogue lacks", 1, "case.config.extra is not in the catalogue",
   "[dump(i, edit(i, lambda d: d['case']['config'].__setitem__('extra', 1))) or status(i) for i in ids]")
_d("missing-config", "an echoed config without a key", 1, "case.config.valid_lens is missing",
   "[dump(i, edit(i, lambda d: d['case']['config'].pop('valid_lens'))) or status(i) for i in ids]")
_d("bool-for-number", "an echoed true where the catalogue has 1", 1, "case.config.shape[0] is true",
   "[dump(i, edit(i, lambda d: d['case']['config']['shape'].__setitem__(0, True))) or status(i) for i in ids]")
_d("other-case", "another case's document", 1, "port: echoed a different case: case.id",
   "[dump(i, edit(i, lambda d: d['case'].__setitem__('id', 'masked_softmax.other'))) or status(i) for i in ids]")
_d("float-for-int", "an echoed 3.0 where the catalogue has 3 (numbers by value: passes)", 0, "passed, 0 failed",
   "[dump(i, edit(i, lambda d: d['case']['config']['shape'].__setitem__(0, float(d['case']['config']['shape'][0])))) or status(i) for i in ids]")
_d("dev-zero", "a link to /dev/zero (refused unread)", 1, "it is a character device",
   "[os.symlink('/dev/zero', path(i)) or status(i) for i in ids]")
_d("fifo", "a named pipe (never opened for a blocking read)", 1, "it is a named pipe", "[os.mkfifo(path(i)) or status(i) for i in ids]")
_d("directory", "a directory in the document's place", 1, "it is a directory", "[os.mkdir(path(i)) or status(i) for i in ids]")
_d("sparse-huge", "a (sparse) document of 65 MiB", 1, "more than the 67108864 allowed",
   "[os.truncate(path(i), 65 << 20) if write(i, '') is None else None for i in ids]; [status(i) for i in ids]")
_d("no-file", "a status ok and no file", 1, "port: reported ok but wrote no", "[status(i) for i in ids]")
_d("float-1e400", "1e400 in data", 1, "is inf, beyond the range of float64",
   "[write(i, json.dumps(edit(i, lambda d: d['outputs']['out']['data'].__setitem__(0, '@'))).replace('\"@\"', '1e400')) or status(i) for i in ids]")
_d("extra-tensor", "a tensor the reference does not write", 1, "output 'bonus' is written by port only",
   "[dump(i, edit(i, lambda d: d['outputs'].__setitem__('bonus', {'dtype': 'float64', 'shape': [1], 'data': [1.0]}))) or status(i) for i in ids]")
_d("missing-tensor", "no output tensor", 1, "output 'out' is written by reference only",
   "[dump(i, edit(i, lambda d: d.__setitem__('outputs', {}))) or status(i) for i in ids]")
_d("shape", "a flattened output", 1, "shape differs",
   "[dump(i, edit(i, lambda d: d['outputs']['out'].__setitem__('shape', [30]))) or status(i) for i in ids]")
_d("dtype", "an int64 output", 1, "dtype differs",
   "[dump(i, edit(i, lambda d: d['outputs']['out'].update(dtype='int64', data=[0] * 30))) or status(i) for i in ids]")
_d("nan", "a NaN where the reference has a number", 1, "NaN: reference 0, port 1",
   "[dump(i, edit(i, lambda d: d['outputs']['out']['data'].__setitem__(1, 'NaN'))) or status(i) for i in ids]")
_d("nan-both", "NaN in both engines", 1, "NaN in both engines",
   "[dump(i, edit(i, lambda d: d['outputs']['out']['data'].__setitem__(1, 'NaN'))) or status(i) for i in ids]",
   reference="[dump(i, edit(i, lambda d: d['outputs']['out']['data'].__setitem__(1, 'NaN'))) or status(i) for i in ids]")
_d("infinity-vs-nan", "Infinity against NaN", 1, "Inf: reference 1, port 0",
   "[dump(i, edit(i, lambda d: d['outputs']['out']['data'].__setitem__(1, 'NaN'))) or status(i) for i in ids]",
   reference="[dump(i, edit(i, lambda d: d['outputs']['out']['data'].__setitem__(1, 'Infinity'))) or status(i) for i in ids]")


# --- the command line -------------------------------------------------------------------------
# data: the arguments after `verify` ({cases}, {golden}, {tmp} filled in by the test).

L = "command line"
for _value in ("-1", "0", "nan", "inf", "abc"):
    kind(L, f"tol-{_value}", f"--tol {_value}", 2, "expected a positive number", ["attention", "--tol", _value])
for _value in ("0", "-2", "1.5", "x"):
    kind(L, f"jobs-{_value}", f"--jobs {_value}", 2, "expected a whole number of processes", ["attention", "--jobs", _value])
for _value in ("0", "nan", "-5"):
    kind(L, f"timeout-{_value}", f"--timeout {_value}", 2, "expected a positive number", ["attention", "--timeout", _value])
kind(L, "case-empty", "`--case ''` (an unset shell variable)", 2, "an empty pattern", ["attention", "--cases-dir", "{cases}", "--case", ""])
kind(L, "case-no-match", "--case matching nothing", 2, "no case id matches 'no_such_case'", ["attention", "--cases-dir", "{cases}", "--case", "no_such_case"])
kind(L, "regen-case-empty", "`verify regen attention --case ''`", 2, "an empty pattern", ["regen", "attention", "--cases-dir", "{cases}", "--case", ""])
kind(L, "export-case-empty", "`verify export attention --case ''`", 2, "an empty pattern", ["export", "attention", "--case", ""])
kind(L, "faults-empty", "`verify faults attention --fault ''`", 2, "an empty pattern", ["faults", "attention", "--fault", ""])
kind(L, "show-case-empty", "`verify show REPORT --case ''`", 2, "an empty pattern", ["show", "{report}", "--case", ""])
kind(L, "unknown-command", "an unknown command", 2, "invalid choice", ["frobnicate"])
kind(L, "unknown-option", "an unknown option", 2, "unrecognized arguments", ["attention", "--colour"])
kind(L, "regen-no-suite", "regen without a suite", 2, "required", ["regen"])
kind(L, "regen-bad-suite", "regen of an unknown suite", 2, "invalid choice", ["regen", "nope"])
kind(L, "cases-dir-missing", "--cases-dir that does not exist", 2, "does not exist or is not a directory", ["attention", "--cases-dir", "{tmp}/none"])
kind(L, "cases-dir-file", "--cases-dir that is a file", 2, "does not exist or is not a directory", ["attention", "--cases-dir", "/etc/hostname"])
kind(L, "show-missing", "show of a missing file", 2, "cannot read it", ["show", "{tmp}/none.json"])
kind(L, "show-passwd", "show /etc/passwd", 2, "is not a report written by `verify`: not valid JSON", ["show", "/etc/passwd"])
kind(L, "show-dev-zero", "show /dev/zero", 2, "it is a character device", ["show", "/dev/zero"])
kind(L, "show-directory", "show of a directory", 2, "it is a directory", ["show", "{tmp}"])
kind(L, "show-golden", "show of a golden (JSON, not a report)", 2, "is not a report written by `verify`", ["show", "{golden}/reference/{first}.json"])
kind(L, "show-bare-nan", "show of a report with a bare NaN", 2, "bare NaN is not JSON", ["show", "{nan_report}"])
kind(L, "diff-passwd", "`verify diff /etc/passwd /etc/passwd` (identical, not goldens)", 2, "/etc/passwd is not a valid golden",
     ["diff", "/etc/passwd", "/etc/passwd"])
kind(L, "diff-missing", "diff of a missing file", 2, "does not exist", ["diff", "{tmp}/none.json", "/etc/passwd"])
kind(L, "diff-file-dir", "diff of a file and a directory", 2, "must both be files or both be directories", ["diff", "/etc/passwd", "{tmp}"])
kind(L, "diff-dev-zero", "diff /dev/zero /dev/zero", 2, "it is a character device", ["diff", "/dev/zero", "/dev/zero"])
kind(L, "diff-empty-dirs", "diff of two directories without goldens", 2, "holds a golden", ["diff", "{tmp}/e1", "{tmp}/e2"])
kind(L, "diff-dir-bad-file", "diff of directories, one file not a golden", 2, "is not a valid golden", ["diff", "{golden}", "{bad_golden_dir}"])
kind(L, "inspect-long", "inspect of a sentence of more than 512 tokens", 2, "reads at most 512", ["inspect", "word " * 600, "--token", "word"])
kind(L, "inspect-token", "inspect --token not in the sentence", 2, "is not a token of the sentence", ["inspect", "the cat sat", "--token", "dog"])
kind(L, "inspect-layer-alone", "inspect --layer without --head", 2, "give --layer and --head together", ["inspect", "the cat", "--layer", "0"])
kind(L, "inspect-layer-range", "inspect --layer 99", 2, "--layer must be in [0, 6)", ["inspect", "the cat", "--token", "cat", "--layer", "99", "--head", "0"])


# --- the engines' config rule -----------------------------------------------------------------
# data: config changes to ENGINE_CASE, an op both engines draw (an op whose inputs are handed has
# its config read by the reference alone, which refuses it first); both real engines refuse the
# case (exit 1), each with exactly this message.

ENGINE_CASE = {"id": "nadaraya_watson.x", "kind": "forward", "op": "nadaraya_watson", "seed": 1,
               "config": {"kernel": "gaussian", "n_train": 5, "n_val": 4}}
F = "engine config"
kind(F, "sigma-nan-string", '`"sigma": "NaN"`', 1, "config 'sigma' must be a finite number, got \"NaN\"", {"sigma": "NaN"})
kind(F, "sigma-true", '`"sigma": true`', 1, "config 'sigma' must be a finite number, got true", {"sigma": True})
kind(F, "sigma-null", '`"sigma": null`', 1, "config 'sigma' must be a finite number, got null", {"sigma": None})
kind(F, "sigma-string", '`"sigma": "1"`', 1, "config 'sigma' must be a finite number, got \"1\"", {"sigma": "1"})


# --- conditions -------------------------------------------------------------------------------

for _cmd in ("attention", "regen"):
    for _sig, _code in (("SIGTERM", 143), ("SIGHUP", 129), ("SIGINT", 130)):
        kind("signal", f"{_cmd}-{_sig}", f"{_sig} to `verify {_cmd}`", _code, f"verify: interrupted ({_sig})", (_cmd, _sig))
    kind("sigkill", _cmd, f"SIGKILL of `verify {_cmd}`; the engines exit by themselves, the next run removes the directory",
         -9, "", _cmd)
for _mode, _says in (("hang", "did not finish within 3 s"), ("detached", "something it started still held its stdout"),
                     ("detached-hang", "did not finish within 3 s"), ("flood", "printed an empty line on stdout line 1"),
                     ("crash", "RuntimeError: the port fell over")):
    kind("hostile port", _mode, {"hang": "a hanging port", "detached": "a detached child holding stdout, the port exits 0",
                                 "detached-hang": "a detached child holding stdout, the port hangs",
                                 "flood": "a port flooding stdout with blank lines",
                                 "crash": "a crashing port"}[_mode], 2, _says, _mode)
kind("concurrent runs", "live-directory", "a run while another runs (and a dead run's directory is there)", 0,
     "", None)
D = "port daemon"
for _name, _what, _exit, _says, _data in (
        ("env-i", "a daemon that double-forks, setsid's, closes its descriptors, clears its environment and sleeps; the run "
         "passes", 0, "1 passed, 0 failed", ("env-i", None)),
        ("ignores-signals", "the daemon ignores SIGTERM, SIGHUP, SIGINT, SIGQUIT", 0, "1 passed, 0 failed",
         ("ignores-signals", None)),
        ("forks-every-10ms", "the daemon forks a sleeping child every 10 ms (150 of them)", 0, "1 passed, 0 failed",
         ("forks-every-10ms", None)),
        ("own-group", "a child that leaves the port's process group (setpgid, same session) with an empty environment",
         0, "1 passed, 0 failed", ("own-group", None)),
        ("renames-itself", "the daemon renames itself (/proc/self/comm: kworker/0:1)", 0, "1 passed, 0 failed",
         ("renames-itself", None)),
        ("cwd-in-run-dir", "the daemon's working directory is the run's output directory, a file there held open", 0,
         "1 passed, 0 failed", ("cwd-in-run-dir", None)),
        ("stopped", "the daemon stops itself (SIGSTOP)", 0, "1 passed, 0 failed", ("stopped", None)),
        ("late-write", "the daemon writes (to a file standing for the terminal) 1.5 s after it starts", 0,
         "1 passed, 0 failed", ("late-write", None)),
        ("subreaper-port", "the port makes itself a subreaper first (its orphans come to it, then to the runner)", 0,
         "1 passed, 0 failed", ("subreaper-port", None)),
        ("born-late", "the daemon is born 1 s after the port exited (its parent, in a session of its own, waits)", 0,
         "1 passed, 0 failed", ("born-late", None)),
        ("two-daemons", "two daemons", 0, "1 passed, 0 failed", ("two-daemons", None)),
        ("crash", "the port crashes after starting its daemon", 2,
         "RuntimeError: the port fell over after starting its daemon", ("env-i+crash", None)),
        ("hang", "the port hangs after starting its daemon (--timeout 10)", 2, "did not finish within 10 s",
         ("env-i+hang", None)),
        ("sigint", "SIGINT to the runner while the port hangs with its daemon", 130, "verify: interrupted (SIGINT)",
         ("env-i+hang", "SIGINT")),
        ("sigterm", "SIGTERM to the runner while the port hangs with its daemon", 143, "verify: interrupted (SIGTERM)",
         ("env-i+hang", "SIGTERM")),
        ("sighup", "SIGHUP to the runner while the port hangs with its ignoring daemon", 129, "verify: interrupted (SIGHUP)",
         ("ignores-signals+hang", "SIGHUP"))):
    kind(D, _name, _what, _exit, _says, _data)
kind("browser temporary files", "passing", "a passing run (Chromium's org.chromium.Chromium.* and its profile)", 0,
     "1 passed, 0 failed", (None, "short"))
kind("browser temporary files", "sigint", "SIGINT to the runner while Chromium runs (no handler of the engine runs)", 130,
     "verify: interrupted (SIGINT)", ("SIGINT", "short"))
kind("browser temporary files", "sigterm", "SIGTERM to the runner while Chromium runs", 143,
     "verify: interrupted (SIGTERM)", ("SIGTERM", "short"))
kind("browser temporary files", "long-tmpdir", "a TMPDIR over 100 bytes long, too long for Chromium's singleton socket under "
     "it: Chromium still starts, and leaves nothing", 0, "1 passed, 0 failed", (None, "long"))
R = "regeneration"
kind(R, "concurrent", "two `verify regen` at once with different --case (4 rounds)", 0, "wrote", "concurrent")
kind(R, "lock-held", "a regen while another holds the lock: says who, waits, then writes", 0, "is being regenerated by pid", "lock-held")
kind(R, "lock-timeout", "a lock held past --timeout", 2, "gave up after 3 s", "lock-timeout")
kind(R, "staging-live", "a live regeneration's staging directory beside the goldens (never \"left over\")", 0, "", "staging-live")
kind(R, "staging-dead", "a dead regeneration's staging directory", 0, "is left over from an interrupted regeneration", "staging-dead")
kind(R, "symlinked-golden", "a symlinked golden directory (refused up front)", 2, "is a symbolic link", "symlinked-golden")
kind(R, "symlinked-engine", "a symlinked engine directory in it", 2, "port is a symbolic link", "symlinked-engine")
kind(R, "after-swap", "a failure after the swap (said truthfully)", 2, "the new goldens are in", "after-swap")


# --- a saved report and the tolerances (tests/test_trust_verdict.py) -------------------------------
# saved report: data (edit, extra arguments of `verify show`); edit(passing, failing) returns the
# report to show, from a real passing report of masked_softmax.lens_1d and a real failing one (a
# port that doubles every output). tolerance: data (the case's expect.tolerance or None, argv).

CONSUMERS["saved report"] = ("test_trust_verdict", "test_a_hostile_saved_report")
CONSUMERS["tolerance"] = ("test_trust_verdict", "test_a_tolerance_condition")
AREA_TITLES["saved report"] = ("A saved report edited or damaged (`verify show REPORT`): decided again from its "
                               "evidence, never from what it says of itself")
AREA_TITLES["tolerance"] = "A case's own tolerance (`verify attention --list --cases-dir DIR`) and `--tol`"


def _edited(change):
    def edit(passing, failing):
        change(passing)
        return passing
    return edit


def _claim_pass(doc):
    """The failing report edited to say pass everywhere, its figures left as they are."""
    doc.update(passed=True, summary={"passed": len(doc["cases"]), "failed": 0})
    for c in doc["cases"]:
        c.update(passed=True, status="bit-identical", failures=[], errors=[])
        for d in c["golden_details"].values():
            d.update(status="fresh", label="fresh", detail="")
        c["goldens"] = {r: "fresh" for r in c["goldens"]}
        for t in c["tensors"]:
            t.update(passed=True, status="bit-identical")
    return doc


def _browser(ran=True, passed=True, cases="same", status="bit-identical", failures=()):
    def change(doc):
        ids = [c["id"] for c in doc["cases"]]
        part = {"ran": ran, "error": None if ran else "chromium is not installed", "version": None,
                "kernel": {"wasm": 0, "js": 0}, "passed": passed,
                "summary": {"passed": len(ids), "failed": 0, "identical_to_node": len(ids)},
                "cases": {i: {"passed": True, "status": status, "identical_to_node": True, "failures": list(failures),
                              "seconds": 0.1} for i in ids}}
        if cases == "none":
            part["cases"] = {}
        elif cases == "missing":
            del part["cases"]
        elif cases == "extra":
            part["cases"]["no_such.case"] = dict(part["cases"][ids[0]])
        doc["passed"] = doc["passed"] and passed
        doc["browsers"] = {"chromium": part}
    return _edited(change)


def _first_tensor(**fields):
    def change(doc):
        doc["cases"][0]["tensors"][-1].update(fields)
    return _edited(change)


S = "saved report"
for _name, _what, _exit, _says, _data in (
        ("browser-not-run", "a browser that did not run (`passed: false`, its cases not run)", 1,
         "NOT RUN browser chromium", (_browser(ran=False, passed=False), [])),
        ("browser-case-failed", "a browser case stored as passed with status failed", 1,
         "recorded as passed, but status failed", (_browser(status="failed"), [])),
        ("browser-no-verdict", "a browser entry holding no verdict for the report's case", 1,
         "holds no verdict for this case", (_browser(cases="none"), [])),
        ("browser-no-cases", "a browser entry missing its `cases`", 2, "'cases' is a required property",
         (_browser(cases="missing"), [])),
        ("browser-extra-case", "a browser entry with a verdict for a case the report does not hold", 1,
         "FAIL browser chromium", (_browser(cases="extra"), [])),
        ("browser-within-bitwise", "a browser case within the tolerance, shown with --bitwise", 1,
         "recorded as passed, but status within the tolerance (--bitwise)",
         (_browser(status="within the tolerance"), ["--bitwise"])),
        ("cases-emptied", "its `cases` list emptied (a failing run's)", 2, "holds no case",
         (lambda passing, failing: dict(failing, cases=[], summary={"passed": 0, "failed": 0}), [])),
        ("tensors-claim-pass", "a failing run's tensors, case and report edited to `passed: true` (figures kept)", 1,
         "recorded as passed, but mismatched", (lambda passing, failing: _claim_pass(failing), [])),
        ("stored-case-fail", "a passing case stored as `passed: false`", 1, "stored as failed in the report",
         (_edited(lambda d: d["cases"][0].update(passed=False)), [])),
        ("stored-report-fail", "a passing report stored as `passed: false`", 1,
         "not a pass: the report's stored verdict is FAIL", (_edited(lambda d: d.update(passed=False)), [])),
        ("unused-golden", "an unused golden in a passing report", 1, "unused golden golden/attention/port/gone.json",
         (_edited(lambda d: d.update(unused_goldens=["golden/attention/port/gone.json"])), [])),
        ("passed-missing", "the report's `passed` removed", 2, "'passed' is a required property",
         (_edited(lambda d: d.pop("passed")), [])),
        ("case-passed-missing", "a case's `passed` removed", 2, "'passed' is a required property",
         (_edited(lambda d: d["cases"][0].pop("passed")), [])),
        ("tolerance-5", "a case's `tolerance` edited to 5", 2, "is not a report written by `verify`",
         (_edited(lambda d: d["cases"][0].update(tolerance=5)), [])),
        ("report-tolerance-1", "the report's `tolerance` edited to 1", 2, "is not a report written by `verify`",
         (_edited(lambda d: d.update(tolerance=1)), [])),
        ("nan-claims-pass", "a tensor stored as passed with a NaN counted on the port's side", 1,
         "recorded as passed, but NaN port 1", (_first_tensor(nan={"reference": 0, "port": 1}), [])),
        ("inf-claims-pass", "a tensor stored as passed with more infinities on one side", 1,
         "recorded as passed, but Inf", (_first_tensor(inf={"reference": 0, "port": 2}), [])),
        ("max-abs-beyond", "a tensor stored as passed whose max|diff| is beyond what is allowed there", 1,
         "recorded as passed, but max|diff| 0.5 against", (_first_tensor(max_abs=0.5), [])),
        ("samples-claim-pass", "a tensor stored as passed with mismatches sampled", 1, "1 mismatch(es) sampled",
         (_first_tensor(samples=[{"index": [0, 0, 0], "expected": 0.5, "actual": 1.0}]), [])),
        ("bitwise-ulp-lie", "a report run with --bitwise whose tensor says 0 ULP but 1e-9 apart", 1,
         "not bit-identical (--bitwise)", (_edited(lambda d: (d.update(bitwise=True), d["cases"][0]["tensors"][-1].update(
             max_abs=1e-9, max_rel=1e-9))), [])),
        ("stale-golden-no-error", "a golden status `stale` with the error naming it removed", 1, "stale",
         (_edited(lambda d: d["cases"][0]["golden_details"]["port"].update(status="stale")), [])),
        ("tensors-emptied", "a case's tensors removed", 1, "no tensor was compared",
         (_edited(lambda d: d["cases"][0].update(tensors=[])), [])),
        ("reference-field-lie", "`reference` says fresh while reference_cache lists the case as from the cache", 0,
         "does not follow from its reference_cache",
         (_edited(lambda d: d.update(reference_cache={"directory": "/c", "key": "k", "from_cache": [d["cases"][0]["id"]],
                                                      "stored": [], "damaged": []})), [])),
        ("no-reference-field", "a report from before the `reference` field (read as its reference_cache gives)", 0,
         "reference: run afresh on every case", (_edited(lambda d: d.pop("reference")), []))):
    kind(S, _name, _what, _exit, _says, _data)

T = "tolerance"
_LIST = ["attention", "--list", "--cases-dir", "{cases}"]
for _name, _what, _exit, _says, _data in (
        ("case-1", "a case tolerance of 1 (it passed a port doubling every output)", 2,
         "1 is greater than the maximum of 0.001", ({"value": 1, "reason": "close enough"}, _LIST)),
        ("case-beyond-bound", "a case tolerance just beyond the bound, 0.0011", 2, "greater than the maximum of 0.001",
         ({"value": 0.0011, "reason": "close enough"}, _LIST)),
        ("case-at-bound", "a case tolerance exactly at the bound, 1e-3, with a reason", 0, "",
         ({"value": 1e-3, "reason": "at the bound"}, _LIST)),
        ("case-no-reason", "a case tolerance without a reason", 2, "'reason' is a required property", ({"value": 1e-4}, _LIST)),
        ("case-blank-reason", "a case tolerance whose reason is blank", 2, "does not match",
         ({"value": 1e-4, "reason": " \t "}, _LIST)),
        ("case-string", "a case tolerance given as a string, \"1e-4\"", 2, "is not of type 'number'",
         ({"value": "1e-4", "reason": "a string"}, _LIST)),
        ("case-zero", "a case tolerance of 0", 2, "less than or equal to the minimum of 0",
         ({"value": 0, "reason": "exact"}, _LIST)),
        ("case-negative", "a case tolerance of -1e-6", 2, "less than or equal to the minimum of 0",
         ({"value": -1e-6, "reason": "negative"}, _LIST)),
        ("tol-underscore", "`--tol 1_0` (Python reads 10)", 2, "expected a positive number written in decimal",
         (None, _LIST + ["--tol", "1_0"])),
        ("tol-space", "`--tol ' 1'`", 2, "expected a positive number written in decimal", (None, _LIST + ["--tol", " 1"])),
        ("tol-hex", "`--tol 0x1p-3`", 2, "expected a positive number written in decimal", (None, _LIST + ["--tol", "0x1p-3"])),
        ("tol-infinity", "`--tol infinity`", 2, "expected a positive number written in decimal",
         (None, _LIST + ["--tol", "infinity"])),
        ("tol-1", "`--tol 1`", 2, "expected a positive number below 1", (None, _LIST + ["--tol", "1"])),
        ("tol-1e6", "`--tol 1e6`", 2, "expected a positive number below 1", (None, _LIST + ["--tol", "1e6"])),
        ("tol-1e308", "`--tol 1e308` (leaked a NumPy RuntimeWarning)", 2, "expected a positive number below 1",
         (None, _LIST + ["--tol", "1e308"])),
        ("tol-1e-400", "`--tol 1e-400` (reads as 0)", 2, "expected a positive number", (None, _LIST + ["--tol", "1e-400"])),
        ("tol-twice", "`--tol` given twice", 2, "--tol given twice", (None, _LIST + ["--tol", "1e-6", "--tol", "1e-7"])),
        ("tol-looser", "`--tol 1e-5`: one warning line naming it", 0, "--tol 1e-05 is looser than the default 1e-06",
         (None, _LIST + ["--tol", "1e-5"])),
        ("tol-just-below-1", "`--tol 0.999`: accepted, with its warning", 0, "--tol 0.999 is looser than the default",
         (None, _LIST + ["--tol", "0.999"])),
        ("tol-tighter", "`--tol 1e-9`: nothing said", 0, "", (None, _LIST + ["--tol", "1e-9"])),
        ("timeout-underscore", "`--timeout 1_0`", 2, "expected a positive number written in decimal",
         (None, _LIST + ["--timeout", "1_0"])),
        ("regen-tol", "`verify regen attention --tol 1_0`", 2, "expected a positive number", (None, ["regen", "attention", "--tol", "1_0"])),
        ("diff-tol", "`verify diff --tol 1e308 A B`", 2, "expected a positive number below 1",
         (None, ["diff", "--tol", "1e308", "{tmp}/a.json", "{tmp}/b.json"])),
        ("faults-tol", "`verify faults attention --tol nan`", 2, "expected a positive number", (None, ["faults", "attention", "--tol", "nan"])),
        ("inspect-tol", "`verify inspect SENTENCE --tol 1`", 2, "expected a positive number below 1",
         (None, ["inspect", "the cat", "--tol", "1"]))):
    kind(T, _name, _what, _exit, _says, _data)


# --- bit identity and the goldens (tests/test_trust_goldens.py) ---------------------------------
# data: the name of the scenario (tests/test_trust_goldens.py SCENARIOS) that builds the condition
# on masked_softmax.lens_1d (scripted engines answering from the committed goldens, a private
# golden directory) and runs `verify`; exit 2 rows say it in one line.

B = "bit identity and goldens"
CONSUMERS[B] = ("test_trust_goldens", "test_a_bit_identity_or_golden_condition")
AREA_TITLES[B] = ("Bit identity, the goldens that vouch for it, keys named twice, regenerations over another "
                  "catalogue, the regeneration lock")
for _name, _what, _exit, _says in (
        ("minus-zero-bitwise", "the port writes -0.0 where the reference has +0.0, --bitwise", 1,
         "max 1 ULP, not bit-identical (--bitwise)"),
        ("minus-zero-default", "the same without --bitwise (equal numbers: within the tolerance, 1 ULP)", 0,
         "1 passed, 0 failed"),
        ("int64-minus-zero-bitwise", "-0.0 for the integer 0 of an int64 tensor, --bitwise (the same integer; the "
         "golden's text differs)", 1, "same values, the text alone differs, not byte-identical (--bitwise)"),
        ("int64-minus-zero-default", "the same without --bitwise", 0, "1 passed, 0 failed"),
        ("golden-minus-zero-bitwise", "a golden holding -0.0 where its engine writes +0.0, --bitwise", 1,
         "fresh, last-bit drift (max 1 ULP), not byte-identical (--bitwise)"),
        ("golden-text-bitwise", "a golden whose text alone differs (re-indented, keys unsorted), --bitwise", 1,
         "same values, the text alone differs, not byte-identical (--bitwise)"),
        ("golden-text-default", "the same without --bitwise (named, passes)", 0, "same values, the text alone differs"),
        ("digests-removed", "a golden with its digests removed (an init* digest is required)", 1,
         "its digest init_w is missing (the fresh output writes it)"),
        ("digest-required-zeroed", "a golden with its init* digest zeroed", 1, "its digest init_w differs from the fresh output's"),
        ("digest-computed-removed-bitwise", "a golden without a digest of computed values, --bitwise", 1,
         "same values, digests differ: state.0, not byte-identical (--bitwise)"),
        ("digest-computed-zeroed-bitwise", "a golden with a digest of computed values zeroed, --bitwise", 1,
         "same values, digests differ: state.0, not byte-identical (--bitwise)"),
        ("digest-computed-zeroed-default", "the same without --bitwise (named, passes)", 0, "same values, digests differ: state.0"),
        ("golden-duplicate-outputs", "a golden naming \"outputs\" twice, the first hiding a tensor the schema refuses", 2,
         "the key \"outputs\" appears twice in one object"),
        ("golden-duplicate-data", "a golden naming \"data\" twice inside a tensor", 2, "the key \"data\" appears twice"),
        ("golden-duplicate-case-key", "a golden naming \"seed\" twice in its echoed case", 2, "the key \"seed\" appears twice"),
        ("golden-duplicate-escaped", "a golden naming \"outputs\" twice, once spelt with a \\u escape", 2,
         "the key \"outputs\" appears twice"),
        ("golden-bom", "a golden that is valid JSON after a UTF-8 byte order mark", 2, "starts with a byte order mark"),
        ("golden-nfc-nfd", "tensor names differing only in Unicode normalisation (two keys, not one; refused by the "
         "name pattern)", 2, "does not match '^[A-Za-z_][A-Za-z0-9_.]*$'"),
        ("diff-duplicate-outputs", "`verify diff` of a golden naming \"outputs\" twice (never \"text only\")", 2,
         "is not a valid golden: the key \"outputs\" appears twice"),
        ("port-duplicate-outputs", "the port writes \"outputs\" twice (the first a bare number)", 1,
         "port: wrote an invalid golden document: the key \"outputs\" appears twice"),
        ("catalogue-duplicate", "a catalogue case naming \"seed\" twice", 2, "the key \"seed\" appears twice"),
        ("report-duplicate", "`verify show` of a report naming \"passed\" twice", 2,
         "is not a report written by `verify`: the key \"passed\" appears twice"),
        ("regen-other-catalogue", "`verify regen --cases-dir DIR` over a copy of every committed golden: none removed", 0,
         "golden(s) of cases not in"),  # "note: kept N ...", N every committed golden but the regenerated case's
        ("regen-own-catalogue", "`verify regen --case ID` of the project's own catalogue: the golden of a removed case "
         "is removed (the faithful variant)", 0, "removed gone.case"),
        ("regen-cases-dir-is-golden-dir", "`verify regen --cases-dir` naming the golden directory itself", 2,
         "no catalogue files"),
        ("lock-symlink", "the regeneration lock a symbolic link to a file of the user's (left as it was)", 2,
         "is a symbolic link (to "),
        ("lock-dangling", "the lock a dangling symbolic link (nothing created where it points)", 2, "is a symbolic link"),
        ("lock-fifo", "the lock a named pipe (never waits)", 2, "is a named pipe, not a regular file"),
        ("lock-directory", "the lock a directory", 2, "is a directory, not a regular file"),
        ("lock-hard-link", "the lock a hard link to a file of the user's", 2, "a hard link: another file shares its data"),
        ("lock-raced-link", "the lock made a link after the up-front check (regen_lock opens it with O_NOFOLLOW)", 2,
         "is a symbolic link")):
    kind(B, _name, _what, _exit, _says, _name)


# --- the reference cache: what it trusts (tests/test_trust_cache.py) ------------------------------
# data: the name of the setup in tests/test_trust_cache.py (_set_<name>), which changes a copy of a
# warm cache of the layer_norm cases (or the key, the checkout, the command) before the run.

C = "reference cache"
CONSUMERS[C] = ("test_trust_cache", "test_a_hostile_reference_cache")
AREA_TITLES[C] = ("The reference cache (`verify attention`, `verify cache`): an entry is used only when its "
                  "manifest's HMAC verifies with the user's own key; the cache only when it and its key are private")
for _name, _what, _exit, _says, _data in (
    ("other-user", "the cache directory owned by another user, mode 0777", 0,
     "is owned by another user (uid 65534)", "other_user"),
    ("group-writable", "the cache directory yours but writable by its group (0770)", 0,
     "is writable by its group (mode 0770)", "group_writable"),
    ("parent-world-writable", "a parent of the cache directory writable by all, not sticky", 0,
     "is writable by others (mode 0777)", "parent_world_writable"),
    ("parent-other-user", "a parent of the cache directory owned by another user", 0,
     "is owned by another user (uid 65534)", "parent_other_user"),
    ("link-of-other-user", "the cache path through a symbolic link owned by another user", 0,
     "is a symbolic link owned by another user", "link_of_other_user"),
    ("rewritten-entry", "an entry's document rewritten with its manifest's SHA-256s (run afresh, replaced)", 0,
     "not authenticated by your cache key", "rewritten"),
    ("restored-cache", "a cache restored for a user with another key: every entry planted", 0,
     "not authenticated by your cache key", "restored"),
    ("symlinked-entry", "an entry directory that is a symbolic link", 0, "the entry is a symbolic link", "symlinked_entry"),
    ("symlinked-manifest", "an entry's manifest.json a symbolic link", 0, "manifest.json: it is a symbolic link",
     "symlinked_manifest"),
    ("swapped-entries", "two genuine entries swapped between their case keys", 0,
     "is not the entry its manifest describes", "swapped_entries"),
    ("dotdot", "a manifest naming a file outside its entry through '..'", 0, "not authenticated by your cache key",
     "dotdot"),
    ("empty-states", "an empty <id>.states directory added to a forward case's entry", 0,
     "its files are not the ones its manifest names", "empty_states"),
    ("lying-environment", "an environment.json that lies about what its key was made from (never read for a key)", 0,
     "4 of 4 case(s) from cache", "lying_environment"),
    ("key-symlink", "the cache key a symbolic link (to a 0600 file of the same bytes)", 0, "is a symbolic link",
     "key_symlink"),
    ("key-mode", "the cache key with mode 0644", 0, "has mode 0644, not 0600", "key_mode"),
    ("key-empty", "the cache key 0 bytes long", 0, "holds 0 bytes, not 32", "key_empty"),
    ("key-other-user", "the cache key owned by another user", 0, "is owned by uid 65534", "key_other_user"),
    ("key-fifo", "the cache key a FIFO (never waited on)", 0, "is not a regular file", "key_fifo"),
    ("cache-in-key-dir", "VERIFY_REFERENCE_CACHE inside the cache key's directory", 0,
     "is inside the cache key's directory", "cache_in_key_dir"),
    ("key-dir-in-cache", "the cache key's directory (XDG_CONFIG_HOME) inside the cache directory", 0,
     "is inside the cache directory", "key_dir_in_cache"),
    ("cache-a-file", "the cache path a plain file: one note, never \"2 damaged entries\"", 0,
     "is a file, not a directory", "cache_a_file"),
    ("clear-a-file", "`verify cache --clear` with the cache path a plain file", 2,
     "which is a file, not a cache directory", "clear_a_file"),
    ("clear-general-folder", "`verify cache --clear` on a folder holding pip/, notes/ and a 64-hex folder not verify's", 0,
     "removed 1 environment(s)", "clear_general_folder"),
    ("clear-checkout", "`verify cache --clear` with the cache path the checkout", 2, "is the checkout", "clear_checkout"),
    ("prune-parent", "`verify cache --prune` with the cache path a parent of the checkout", 2,
     "is a parent of the checkout", "clear_parent"),
    ("clear-inside", "`verify cache --clear` with the cache path inside the checkout (golden/)", 2,
     "is inside the checkout", "clear_inside"),
    ("clear-home", "`verify cache --clear` with the cache path $HOME", 2, "is the home directory", "clear_home"),
    ("clear-root", "`verify cache --clear` with the cache path /", 2, "is the root directory", "clear_root"),
    ("source-link", "a folder under reference/ that is a symbolic link (the key would not cover it)", 0,
     "reference/nn is a symbolic link", "source_link"),
    ("source-fifo", "a FIFO under reference/ (never read)", 0, "reference/notes.fifo is not a regular file",
     "source_fifo"),
    ("old-memo", "an earlier version's document memo with a planted entry, then `verify cache --clear`", 0,
     "removed 1 environment(s)", "old_memo"),
    ("two-at-once", "two runs filling the same cache at once", 0, "4 passed", "two_at_once"),
):
    kind(C, _name, _what, _exit, _says, _data)


# --- the reference cache's key: each input changed (tests/test_cache_keying.py) ---------------------
# data: (how, what). "python": a statement the runner's interpreter runs before verify is imported,
# changing what the key reads; "environment": a variable set for the run; "bump": a constant of the
# runner's raised by one in a copy of the checkout. Each run starts from a warm cache of two cases.

K = "reference cache key"
CONSUMERS[K] = ("test_cache_keying", "test_a_changed_key_input_misses_every_case")
AREA_TITLES[K] = ("The reference cache's key (`verify attention`): a run whose interpreter, NumPy, platform, protocol "
                  "or cache format differs from the one that filled the cache answers no case from it")
_MISS = "reference: run afresh on every case (nothing in the cache for it"
for _name, _what, _data in (
    ("python-version", "another Python version (sys.version)", ("python", "sys.version = '0.0.0 (another build) ' + sys.version")),
    ("python-implementation", "another Python implementation (sys.implementation.cache_tag)",
     ("python", "sys.implementation.cache_tag = 'another-00'")),
    ("numpy-version", "another NumPy version (numpy.__version__)", ("python", "import numpy\nnumpy.__version__ = '0.0.0'")),
    ("platform", "another platform (platform.platform())",
     ("python", "import platform\nplatform.platform = lambda *args, **kwargs: 'Another-OS-0.0'")),
    ("machine", "another machine (platform.machine())", ("python", "import platform\nplatform.machine = lambda: 'another-machine'")),
    ("byte-order", "the other byte order (sys.byteorder)",
     ("python", "sys.byteorder = {'little': 'big', 'big': 'little'}[sys.byteorder]")),
    ("cpu-feature-off", "a CPU feature NumPy dispatches to switched off (NPY_DISABLE_CPU_FEATURES)",
     ("environment", "NPY_DISABLE_CPU_FEATURES")),
    ("protocol", "the engines' protocol version raised (PROTOCOL)", ("bump", "PROTOCOL")),
    ("cache-format", "the cache's format raised (FORMAT: its layout and key recipe)", ("bump", "FORMAT")),
):
    kind(K, _name, _what, 0, _MISS, _data)


# --- where the outputs go, and the previous report (tests/test_trust_outputs.py) ------------------
# data: (argv, setup, env). argv: `verify`'s arguments, with {root} (a scratch checkout: verify/,
# golden/ and cases/ copied, reports/ its own), {tmp} (a scratch directory) and {case} filled in;
# setup: [(action, path, argument)] done first: "fifo", "link" (to argument), "sparse" (argument
# bytes), "write" (argument text), "mkdir", "remove"; env: more environment. Every run has its
# address space limited (2 GB, the engines excepted): a regression that reads /dev/zero fails
# instead of exhausting the machine.

_OUT = "outputs"
CONSUMERS[_OUT] = ("test_trust_outputs", "test_an_output_path_or_a_previous_report")
AREA_TITLES[_OUT] = ("Where `--report`, `--html`, `--junit` (and inspect's `--html`, export's `--out`) write, "
                     "the previous report the schedule reads, and other paths given: refused with exit 2 and one "
                     "line before anything runs, or no estimate and the run goes on")
_RUN = ["attention", "--case", "{case}"]
_PREV = "{root}/reports/verify-attention.json"
_INSPECT = ["inspect", "the cat", "--token", "cat", "--layer", "0", "--head", "0"]
for _name, _what, _exit, _says, _data in (
        ("html-null-link", "`--html LINK`, LINK a symbolic link to /dev/null (as root, `--html /dev/null` replaced "
                           "the null device)", 2, "it is a character device, not a regular file",
         (_RUN + ["--html", "{tmp}/null"], [("link", "{tmp}/null", "/dev/null")])),
        ("junit-fifo", "`--junit FIFO`", 2, "it is a named pipe, not a regular file",
         (_RUN + ["--junit", "{tmp}/fifo"], [("fifo", "{tmp}/fifo", None)])),
        ("report-directory", "`--report DIR`, an existing directory", 2, "it is a directory, not a regular file",
         (_RUN + ["--report", "{tmp}"], [])),
        ("report-link-loop", "`--report LOOP`, a symbolic link to itself", 2, "cannot be looked at",
         (_RUN + ["--report", "{tmp}/loop"], [("link", "{tmp}/loop", "{tmp}/loop")])),
        ("report-golden", "`--report golden/attention/reference/<id>.json` (a committed golden)", 2,
         "lies in the goldens", (_RUN + ["--report", "{root}/golden/attention/reference/{case}.json"], [])),
        ("html-catalogue", "`--html ops/attention/zz.json` (the next run would read it as a catalogue file)", 2,
         "lies in the catalogue", (_RUN + ["--html", "{root}/ops/attention/zz.json"], [])),
        ("report-catalogue-file", "`--report ops/attention/masked_softmax.json`, a catalogue file (an op's bundle)", 2,
         "lies in the catalogue", (_RUN + ["--report", "{root}/ops/attention/masked_softmax.json"], [])),
        ("junit-link-into-golden", "`--junit LINK/x.xml`, LINK a symbolic link to golden/attention/port", 2,
         "lies in the goldens", (_RUN + ["--junit", "{tmp}/g/x.xml"], [("link", "{tmp}/g", "{root}/golden/attention/port")])),
        ("golden-dir-in-use", "`--golden-dir G --html G/x.html`", 2, "lies in the goldens in use (--golden-dir)",
         (_RUN + ["--golden-dir", "{tmp}/g", "--html", "{tmp}/g/x.html"], [("mkdir", "{tmp}/g", None)])),
        ("cases-dir-in-use", "`--cases-dir C --report C/r.json`", 2, "lies in the catalogue in use (--cases-dir)",
         (_RUN + ["--cases-dir", "{tmp}/c", "--report", "{tmp}/c/r.json"], [("mkdir", "{tmp}/c", None)])),
        ("reports-link-into-golden", "reports/ a symbolic link to golden/attention/reference, a full run", 2,
         "lies in the goldens", (["attention"], [("remove", "{root}/reports", None),
                                                 ("link", "{root}/reports", "{root}/golden/attention/reference")])),
        ("report-and-html-same", "`--report X --html X`", 2, "--report and --html name the same file",
         (_RUN + ["--report", "{tmp}/x", "--html", "{tmp}/x"], [])),
        ("html-and-junit-via-link", "`--html X --junit LINK`, LINK a symbolic link to X", 2,
         "--html and --junit name the same file",
         (_RUN + ["--html", "{tmp}/x", "--junit", "{tmp}/l"], [("write", "{tmp}/x", ""), ("link", "{tmp}/l", "{tmp}/x")])),
        ("junit-default-report", "`--case ... --junit reports/verify-attention.json` (the full run's report)", 2,
         "the JSON report the runner writes", (_RUN + ["--junit", _PREV], [])),
        ("report-is-the-runners", "`--case ... --report reports/verify-attention.subset.json` (the run's own report, "
                                  "given again): written once", 0, "1 passed, 0 failed",
         (_RUN + ["--report", "{root}/reports/verify-attention.subset.json"], [])),
        ("report-parent-file", "`--report FILE/x.json`, FILE a regular file", 2, "is not a directory",
         (_RUN + ["--report", "{tmp}/file/x.json"], [("write", "{tmp}/file", "")])),
        ("report-under-dev-null", "`--report /dev/null/a/b.json` (a directory that cannot be made)", 2,
         "/dev/null is not a directory", (_RUN + ["--report", "/dev/null/a/b.json"], [])),
        ("report-newline", "`--report` a name with a newline in it", 2, "a file name with control characters",
         (_RUN + ["--report", "{tmp}/a\nb.json"], [])),
        ("show-html-over-report", "`verify show R --html R`", 2, "is the report being shown",
         (["show", "{tmp}/r.json", "--html", "{tmp}/r.json"], [("write", "{tmp}/r.json", "{}")])),
        ("show-junit-default-report", "`verify show R --junit reports/verify-attention.json`", 2,
         "the JSON report the runner writes", (["show", "{tmp}/r.json", "--junit", _PREV], [("write", "{tmp}/r.json", "{}")])),
        ("inspect-html-fifo", "`verify inspect ... --html FIFO`", 2, "it is a named pipe",
         (_INSPECT + ["--html", "{tmp}/fifo"], [("fifo", "{tmp}/fifo", None)])),
        ("export-out-golden", "`verify export attention --out golden/attention/reference` (exports are <id>.json, "
                              "as goldens are)", 2, "lies in the goldens",
         (["export", "attention", "--out", "{root}/golden/attention/reference"], [])),
        ("full-run-fifo-report", "a named pipe at reports/verify-attention.json, a full run (the run's own report)", 2,
         "it is a named pipe", (["attention"], [("fifo", _PREV, None)])),
        ("full-run-dev-zero-report", "reports/verify-attention.json a symbolic link to /dev/zero, a full run", 2,
         "it is a character device", (["attention"], [("link", _PREV, "/dev/zero")])),
        ("previous-fifo", "a named pipe at reports/verify-attention.json (the previous report), a `--case` run", 0,
         "1 passed, 0 failed", (_RUN, [("fifo", _PREV, None)])),
        ("seconds-fifo", "a named pipe at reports/.verify-attention.json.seconds (the seconds file, removed: never "
                         "read)", 0, "1 passed, 0 failed",
         (_RUN, [("fifo", "{root}/reports/.verify-attention.json.seconds", None)])),
        ("previous-dev-zero", "the previous report a symbolic link to /dev/zero, a `--case` run", 0, "1 passed, 0 failed",
         (_RUN, [("link", _PREV, "/dev/zero")])),
        ("previous-3gb", "the previous report a 3 GB (sparse) file", 0, "1 passed, 0 failed",
         (_RUN, [("sparse", _PREV, 3 << 30)])),
        ("previous-nested", "the previous report nested 100,000 deep", 0, "1 passed, 0 failed",
         (_RUN, [("write", _PREV, "[" * 100_000 + "]" * 100_000)])),
        ("previous-directory", "a directory at the previous report's path, a `--case` run", 0, "1 passed, 0 failed",
         (_RUN, [("mkdir", _PREV, None)])),
        ("previous-not-a-report", "the previous report `{\"cases\": 7}`", 0, "1 passed, 0 failed",
         (_RUN, [("write", _PREV, '{"cases": 7}')])),
        ("jobs-100000", "`--jobs 100000` (a thread per job)", 0, "--jobs 100000 is more than the 64",
         (_RUN + ["--jobs", "100000"], [])),
        ("tmpdir-missing", "TMPDIR a directory that does not exist", 0, "1 passed, 0 failed",
         (_RUN, [], {"TMPDIR": "{tmp}/no/such/dir"})),
        ("home-relative", "HOME a relative path (the cache would be under the working directory), `--list`", 0,
         "no cache is used in this run", (_RUN + ["--list"], [], {"HOME": "relative-home", "VERIFY_FRESH": ""})),
        ("fetch-cache-unknown-user", "`verify fetch-model --cache ~nosuchuser/x`", 2,
         "no home directory to expand ~ into", (["fetch-model", "--cache", "~no-such-user-of-verify/x"], [])),
        ("faults-catalogue-dev-zero", "`verify faults attention --catalogue /dev/zero`", 2,
         "it is a character device", (["faults", "attention", "--catalogue", "/dev/zero"], [])),
        ("cases-dir-link-loop", "`--cases-dir LOOP`, a symbolic link to itself", 2, "cannot be resolved",
         (["attention", "--list", "--cases-dir", "{tmp}/loop"], [("link", "{tmp}/loop", "{tmp}/loop")])),
        ("golden-dir-link-loop", "`--golden-dir LOOP`, a symbolic link to itself", 2, "cannot be resolved",
         (_RUN + ["--golden-dir", "{tmp}/loop"], [("link", "{tmp}/loop", "{tmp}/loop")]))):
    kind(_OUT, _name, _what, _exit, _says, _data)


if __name__ == "__main__":
    print(markdown(), end="")
