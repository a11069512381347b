"""The hostile inputs and conditions the suite tries, one row per kind (docs/runner.md, "Hostile
inputs and conditions"). Every row is a parameter of the test that consumes its area (CONSUMERS),
which builds the input from the row's `data`, runs `verify` on it and asserts the row's exit code
and message fragment; tests/test_hostile_table.py checks that every area has its consumer and
that docs/runner.md holds exactly the table markdown() makes (`python tests/hostile_kinds.py`
prints it).

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
    """The table for docs/runner.md, one section per area."""
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
# data: config changes to masked_softmax.x; both real engines refuse the case (exit 1), each
# with exactly this message.

F = "engine config"
kind(F, "std-nan-string", '`"std": "NaN"`', 1, "config 'std' must be a finite number, got \"NaN\"", {"std": "NaN"})
kind(F, "std-true", '`"std": true`', 1, "config 'std' must be a finite number, got true", {"std": True})
kind(F, "std-null", '`"std": null`', 1, "config 'std' must be a finite number, got null", {"std": None})
kind(F, "mean-string", '`"mean": "0"`', 1, "config 'mean' must be a finite number, got \"0\"", {"mean": "0"})


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
R = "regeneration"
kind(R, "concurrent", "two `verify regen` at once with different --case (4 rounds)", 0, "wrote", "concurrent")
kind(R, "lock-held", "a regen while another holds the lock: says who, waits, then writes", 0, "is being regenerated by pid", "lock-held")
kind(R, "lock-timeout", "a lock held past --timeout", 2, "gave up after 3 s", "lock-timeout")
kind(R, "staging-live", "a live regeneration's staging directory beside the goldens (never \"left over\")", 0, "", "staging-live")
kind(R, "staging-dead", "a dead regeneration's staging directory", 0, "is left over from an interrupted regeneration", "staging-dead")
kind(R, "symlinked-golden", "a symlinked golden directory (refused up front)", 2, "is a symbolic link", "symlinked-golden")
kind(R, "symlinked-engine", "a symlinked engine directory in it", 2, "port is a symbolic link", "symlinked-engine")
kind(R, "after-swap", "a failure after the swap (said truthfully)", 2, "the new goldens are in", "after-swap")


if __name__ == "__main__":
    print(markdown(), end="")
