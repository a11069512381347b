"""What the runner reads is what it claims to read (issue 15, items 1, 8 and 13): ids whose files
would collide are refused up front; the echoed case of every file a case reads (its golden, the
pretrained `.full.json`, the training states) is checked against that case; a catalogue with a
non-finite number, beyond the size limits, or that is not a regular file (a link to /dev/zero)
is refused at once; `--case ''` is a usage error; `verify diff` of two identical non-goldens is
exit 2. Each with the faithful variant that passes. (More kinds of each: tests/hostile_kinds.py.)"""

import json
import time

import numpy as np
import pytest

from test_runner import cases_dir, goldens, run_verify, schemas, session_goldens  # noqa: F401 (fixtures)
from toolkit import catalogue_case
from verify import assets, catalogue, goldens as goldens_mod, replay
from verify.catalogue import Case
from verify.compare import Tensor
from verify.errors import InputError
from verify.verdict import Fresh


def _write(directory, *cases):
    directory.mkdir(exist_ok=True)
    (directory / "f.json").write_text(json.dumps({"cases": list(cases)}))
    return directory


def test_the_issues_collision_is_refused_naming_both_cases(repo_root, tmp_path, schemas):  # noqa: F811
    """A forward case named like the pretrained case's .full.json golden overwrote it on regen, and
    the pretrained case then passed without its hidden states being compared."""
    lesson = catalogue_case("pretrained.minilm.lesson")
    intruder = {"id": "pretrained.minilm.lesson.full", "kind": "forward", "op": "masked_softmax", "seed": 1,
                "config": {"shape": [1, 2, 3]}}
    with pytest.raises(InputError) as caught:
        catalogue.load(_write(tmp_path / "cases", lesson, intruder), schemas)
    message = str(caught.value)
    assert "'pretrained.minilm.lesson.full'" in message and "'pretrained.minilm.lesson'" in message
    assert "pretrained.minilm.lesson.full.json" in message and "\n" not in message
    assert len(catalogue.load(_write(tmp_path / "ok", lesson, dict(intruder, id="pretrained.minilm.lessons")), schemas)) == 2


def test_todays_catalogue_is_within_every_limit(repo_root, schemas):  # noqa: F811
    cases = catalogue.load(repo_root / "ops" / "attention", schemas)
    assert len(cases) >= 98 and not [c.id for c in cases if catalogue.size_problem(c.spec)]


def _full_doc(case_spec, data):
    return {"schema_version": 1, "engine": {"name": "reference", "version": "0"}, "generator": "g",
            "case": case_spec, "inputs": {}, "outputs": {"h": {"dtype": "float64", "shape": [2], "data": data}}}


def test_the_full_documents_echoed_case_is_checked(tmp_path, schemas):  # noqa: F811
    spec = {"id": "p", "kind": "pretrained", "op": "bert_encoder", "seed": 0, "config": {"model": "m"}}
    other = dict(spec, id="q")
    case = Case(spec=spec, file=tmp_path / "f.json")
    dirs = {n: tmp_path / n for n in ("reference", "port")}
    for name, echoed in (("reference", spec), ("port", other)):
        dirs[name].mkdir()
        (dirs[name] / "p.full.json").write_text(json.dumps(_full_doc(echoed, [1.0, 2.0])))
    tensors, errors = assets.compare_full(case, dirs, 1e-6, schemas)
    assert errors == ['port: p.full.json echoes a different case: case.id is "q", the catalogue says "p"'] and not tensors
    (dirs["port"] / "p.full.json").write_text(json.dumps(_full_doc(spec, [1.0, 2.0])))
    tensors, errors = assets.compare_full(case, dirs, 1e-6, schemas)
    assert not errors and [t.name for t in tensors] == ["full.h"] and tensors[0].passed


def test_a_training_states_echoed_case_is_checked(tmp_path):
    spec = {"id": "t", "kind": "training", "op": "train_alignment", "seed": 0, "config": {"steps": 1},
            "expect": {"replay_segments": [[0, 1]]}}
    case = Case(spec=spec, file=tmp_path / "f.json")
    (tmp_path / "ref" / "t.states").mkdir(parents=True)
    (tmp_path / "rep" / "t.replay").mkdir(parents=True)
    state = _full_doc(spec, [1.0, 2.0])
    (tmp_path / "ref" / "t.states" / "step_1.json").write_text(json.dumps(state))
    (tmp_path / "rep" / "t.replay" / "step_1.json").write_text(json.dumps(dict(state, case=dict(spec, seed=5))))

    class Run:
        statuses = {"t": {"id": "t", "ok": True}}
        out_dir = tmp_path / "rep"
    [entry] = replay.compare(case, None, tmp_path / "ref", Run(), 1e-6, None)["segments"]
    assert not entry["passed"] and "step_1.json echoes a different case: case.seed is 5" in entry["error"]
    (tmp_path / "rep" / "t.replay" / "step_1.json").write_text(json.dumps(state))
    [entry] = replay.compare(case, None, tmp_path / "ref", Run(), 1e-6, None)["segments"]
    assert entry["passed"] and entry["bit_identical"]


def test_a_golden_echoing_true_for_1_is_stale(tmp_path, schemas):  # noqa: F811
    spec = {"id": "g", "kind": "forward", "op": "x", "seed": 0, "config": {"flag": 1}}
    fresh = _full_doc(spec, [1.0, 2.0])
    tensors = {"inputs": {}, "outputs": {"h": Tensor("float64", np.array([1.0, 2.0]))}}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(_full_doc(dict(spec, config={"flag": True}), [1.0, 2.0])))
    check = goldens_mod.check(path, "g.json", Fresh(b"fresh", fresh, tensors), 1e-6, schemas)
    assert check.status == "stale" and "case differs" in check.detail  # Python's 1 == True is no excuse
    path.write_text(json.dumps(_full_doc(dict(spec, config={"flag": 1.0}), [1.0, 2.0])))
    assert goldens_mod.check(path, "g.json", Fresh(b"fresh", fresh, tensors), 1e-6, schemas).status == "drift"  # 1.0 is 1


def test_a_catalogue_linked_to_dev_zero_is_refused_at_once(repo_root, tmp_path):
    directory = tmp_path / "cases"
    directory.mkdir()
    (directory / "zero.json").symlink_to("/dev/zero")
    started = time.monotonic()
    proc = run_verify(repo_root, "attention", "--cases-dir", directory, timeout=60)
    assert proc.returncode == 2 and "zero.json is malformed: it is a character device" in proc.stderr, proc.stderr
    assert time.monotonic() - started < 30


def test_a_case_beyond_the_size_limit_is_refused_before_any_engine_runs(repo_root, tmp_path):
    case = {"id": "masked_softmax.huge", "kind": "forward", "op": "masked_softmax", "seed": 1,
            "config": {"shape": [1000, 1000, 1000]}}
    proc = run_verify(repo_root, "attention", "--cases-dir", _write(tmp_path / "cases", case), "--golden-dir",
                      tmp_path / "g", timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "config.shape [1000, 1000, 1000] has 1000000000 elements, more than the limit of 65536" in proc.stderr
    ok = dict(case, config={"shape": [16, 64, 64]})  # 65536: at the limit, accepted
    assert run_verify(repo_root, "attention", "--cases-dir", _write(tmp_path / "ok", ok), "--list").returncode == 0


def test_a_non_finite_catalogue_number_is_refused(repo_root, tmp_path):
    directory = tmp_path / "cases"
    directory.mkdir()
    (directory / "f.json").write_text('{"cases": [{"id": "masked_softmax.x", "kind": "forward", "op": "masked_softmax", '
                                      '"seed": 1, "config": {"shape": [1, 2, 3], "std": 1e400}}]}')
    proc = run_verify(repo_root, "attention", "--cases-dir", directory, "--list")
    assert proc.returncode == 2 and "at cases[0].config.std: a number beyond the float64 range" in proc.stderr


def test_an_empty_case_pattern_is_a_usage_error(repo_root, cases_dir):  # noqa: F811
    proc = run_verify(repo_root, "attention", "--cases-dir", cases_dir, "--case", "", "--list")
    assert proc.returncode == 2 and "an empty pattern" in proc.stderr and proc.stdout == ""


def test_diff_of_two_identical_files_that_are_not_goldens_is_exit_2(repo_root, session_goldens):  # noqa: F811
    proc = run_verify(repo_root, "diff", "/etc/passwd", "/etc/passwd")
    assert proc.returncode == 2 and "/etc/passwd is not a valid golden" in proc.stderr
    good = session_goldens / "reference" / "masked_softmax.lens_1d.json"
    same = run_verify(repo_root, "diff", good, good)
    assert same.returncode == 0 and "identical" in same.stdout


def test_inspect_of_more_tokens_than_the_model_reads_is_one_line(repo_root):
    proc = run_verify(repo_root, "inspect", "word " * 600, "--token", "word")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == ("verify: error: the sentence is 602 tokens long ([CLS] and [SEP] included); "
                                   "all-MiniLM-L6-v2 reads at most 512 (max_position_embeddings in its config.json); "
                                   "shorten it")
    short = run_verify(repo_root, "inspect", "The animal was too tired", "--token", "tired")
    assert short.returncode == 0 and "'tired' (token" in short.stdout, short.stderr


def test_deeply_nested_values_are_walked_without_a_recursion_error(tmp_path, schemas):  # noqa: F811
    from verify.documents import case_difference
    deep = []
    for _ in range(5000):
        deep = [deep]
    assert catalogue.non_finite({"q": deep}) is None and catalogue.size_problem({"config": {"q": deep}}) is None
    assert "nested too deeply" in case_difference({"q": deep}, {"q": [deep]})  # an echo, as deep as it likes
    case = dict(_CASE, config={"q": json.loads("[" * 900 + "]" * 900)})  # as deep as the parser reads: loads
    assert len(catalogue.load(_write(tmp_path / "deep", case), schemas)) == 1


_CASE = {"id": "masked_softmax.x", "kind": "forward", "op": "masked_softmax", "seed": 1, "config": {}}
