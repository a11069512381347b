"""Attribution inside a failing case (verify/attribution.py, docs/runner.md "Attribution"): a
composition fault of a composed op is named at the sub-layer it sits in, from the terminal and
from the saved report; a faithful port passes and traces nothing."""

import json

import pytest

import port_variants
from helpers import run_verify
from verify import advice, attribution
from verify.report import attribution_lines
from verify.tools.faults import apply, load

# Each fault, the case that shows it and the sub-layer it sits in; cross_attention_reads_decoder and
# the last three were in the catalogue before attribution, the others were added for it.
FAULTS = {fault: (case, sublayer) for fault, case, sublayer in (row.split() for row in """
port.encoder.second_addnorm_adds_input           encoder_block.lens_full_and_short   addnorm2
port.decoder.ffn_reads_self_attention_norm       decoder_block.causal_cross_lens     ffn
port.decoder.cross_attention_reads_decoder       decoder_block.b1_tgt4_src6          cross_attention
port.transformer.block1_reads_block0_parameters  transformer.two_plus_two_head_dim2  enc.blk1.attention
port.vit.head_reads_first_patch                  vit.p2_d16_two_blocks               head
port.lesson_block.ffn_reads_block_input          lesson_block.d8_h2                  ffn
port.decoder_lm.head_reads_embedding             decoder_lm.two_blocks               head
port.vit.cls_appended                            vit.p2_d16_two_blocks               embedding
port.vit.norm_after_attention                    vit.p2_d16_two_blocks               blk0.attention
port.transformer.embedding_not_scaled            transformer.one_plus_one            enc.embedding
""".strip().splitlines())}


# Faults in a backward or a training step: the case that shows each, the unit it is attributed to
# and one tensor that unit gets wrong fed the reference's input (which gradient, which state).
# ffn_reads_block_gradient, attention_reads_block_gradient, embedding_reads_head_gradient and
# adam_takes_unclipped_gradients were added for attribution; kv_path_dropped is a wiring fault
# between two units, so it shows at the unit that reads the wrongly summed gradient: the encoder
# embedding's backward.
UNITS = {fault: (case, unit, tensor) for fault, case, unit, tensor in (row.split() for row in """
port.decoder_backward.ffn_reads_block_gradient             gradcheck.transformer.padded    dec.blk0.ffn.backward       grads.W1
port.layer_norm_backward.missing_term                      gradcheck.transformer.padded    dec.blk0.addnorm3.backward  dx
port.encoder_backward.kv_path_dropped                      gradcheck.transformer.padded    enc.embedding.backward      dE
port.vit_backward.pos_last_image_only                      gradcheck.vit.p2_d8             embedding.backward          dpos
port.lesson_block_backward.attention_reads_block_gradient  gradcheck.lesson_block.no_mask  attention.backward          grads.W_in
port.decoder_lm_backward.embedding_reads_head_gradient     gradcheck.decoder_lm.weighted   embedding.backward          dtok
port.train.adam_takes_unclipped_gradients                  train.alignment                 step1.adam                  params.W_q
port.adam.no_bias_correction                               train.alignment                 step1.adam                  params.w_v
port.clip.per_tensor                                       train.alignment                 step1.clipping              grads.W_q
port.clip.always_rescale                                   train.alignment                 step5.clipping              grads.W_q
""".strip().splitlines())}

# A traced gradient check's first unit: its model's first forward sub-layer.
FIRST_UNIT = {"transformer": "enc.embedding", "vit": "embedding", "lesson_block": "attention", "decoder_lm": "embedding"}


def _run(repo_root, node, cli, case, report):
    # --oracle none: what these tests look at is the attribution (the arbiter's own tests are
    # tests/test_oracle.py and the reference-side test below); it saves starting PyTorch each time
    return run_verify(repo_root, "attention", "--case", case, "--port-cmd", f"{node} {cli} run",
                      "--report", report, "--oracle", "none", timeout=300)


def _attributed(repo_root, node, tmp_path, fault_id, case):
    """The bundle's fault applied to a copy of the port, `case` run on it: (process, attribution)."""
    [fault] = [f for f in load(None, repo_root, str) if f.id == fault_id]
    apply(fault, repo_root, tmp_path)
    proc = _run(repo_root, node, tmp_path / "port_ts" / "src" / "cli.ts", case, tmp_path / "report.json")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    [entry] = [c for c in json.loads((tmp_path / "report.json").read_text())["cases"] if c["id"] == case]
    return proc, entry["attribution"]


@pytest.mark.parametrize("fault_id", sorted(FAULTS))
def test_a_composition_fault_is_attributed_to_its_sublayer(repo_root, node, tmp_path, fault_id):
    case, sublayer = FAULTS[fault_id]
    proc, found = _attributed(repo_root, node, tmp_path, fault_id, case)
    assert found["culprit"] == sublayer, found
    rows = {r["name"]: r for r in found["sublayers"]}
    before = [r for r in found["sublayers"]][: [r["name"] for r in found["sublayers"]].index(sublayer)]
    assert all(r["fed"] == 0.0 for r in before), before  # upstream of the fault, every sub-layer agrees
    assert rows[sublayer]["fed"] > found["tolerance"]
    assert f"attribution: {sublayer} introduces it" in proc.stdout
    shown = run_verify(repo_root, "show", tmp_path / "report.json", timeout=60)  # rendered from the saved report
    assert f"attribution: {sublayer} introduces it" in shown.stdout, shown.stdout[-2000:] + shown.stderr[-2000:]


@pytest.mark.parametrize("fault_id", sorted(UNITS))
def test_a_backward_or_training_fault_is_attributed_to_its_unit(repo_root, node, tmp_path, fault_id):
    case, unit, tensor = UNITS[fault_id]
    proc, found = _attributed(repo_root, node, tmp_path, fault_id, case)
    assert found["culprit"] == unit, found
    names = [r["name"] for r in found["sublayers"]]
    row = found["sublayers"][names.index(unit)]
    assert tensor in row["beyond"] and row["fed"] > found["tolerance"], row
    assert all(r["fed"] == 0.0 for r in found["sublayers"][:names.index(unit)])  # upstream, every unit agrees
    if case.startswith("gradcheck."):  # the forward's sub-layers, then their backwards in reverse order
        forward = names[:len(names) // 2]
        assert names[0] == FIRST_UNIT[case.split(".")[1]] and not any(n.endswith(".backward") for n in forward), names
        assert names == forward + [f"{n}.backward" for n in reversed(forward)], names
    else:  # the culprit's step of the first failing segment, stage by stage
        step = unit.split(".")[0]
        assert names == [f"{step}.{stage}" for stage in ("forward", "backward", "clipping", "adam")]
        assert found["segment"] == [0, 25] and found["steps_before"] == int(step[len("step"):]) - 1
    assert f"attribution: {unit} introduces it" in proc.stdout
    shown = run_verify(repo_root, "show", tmp_path / "report.json", timeout=60)
    assert f"attribution: {unit} introduces it" in shown.stdout, shown.stdout[-2000:] + shown.stderr[-2000:]


def test_no_attribution_turns_it_off_on_a_failing_run(repo_root, node, tmp_path):
    [fault] = [f for f in load(None, repo_root, str) if f.id == "port.clip.per_tensor"]
    apply(fault, repo_root, tmp_path)
    proc = run_verify(repo_root, "attention", "--case", "train.alignment", "--no-attribution", "--timings", "--port-cmd",
                      f"{node} {tmp_path / 'port_ts' / 'src' / 'cli.ts'} run", "--report", tmp_path / "report.json", timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert "attribution" not in report["cases"][0] and "attribution:" not in proc.stdout
    assert not any(name.startswith("attribution") for name in report["timings"]["sections"])


def test_a_reference_side_composition_fault_is_attributed_and_arbitrated(repo_root, tmp_path):
    """The reference's decoder block computes cross-attention from the block's input: no leaf case
    sees it; the decoder block's case is attributed to its cross-attention, and PyTorch sides with
    the port: the reference changed."""
    import shlex
    import sys

    [fault] = [f for f in load(None, repo_root, str) if f.id == "reference.decoder.cross_attention_queries_from_block_input"]
    apply(fault, repo_root, tmp_path)
    reference = "sh -c " + shlex.quote(f"cd {shlex.quote(str(tmp_path))} && exec {shlex.quote(sys.executable)} -m reference run")
    proc = run_verify(repo_root, "attention", "--case", "decoder_block.b1_tgt4_src6", "--reference-cmd", reference,
                      "--fresh", "--report", tmp_path / "report.json", timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    [entry] = json.loads((tmp_path / "report.json").read_text())["cases"]
    assert entry["attribution"]["culprit"] == "cross_attention", entry["attribution"]
    assert entry["arbitration"]["outcome"] == "port", entry["arbitration"]
    assert "attribution: cross_attention introduces it" in proc.stdout
    assert "PyTorch agrees with the port" in proc.stdout and "the reference changed (git log reference/)" in proc.stdout


def test_a_pretrained_encoder_fault_is_attributed_to_its_layer(repo_root, node, tmp_path):
    """The port's MiniLM layers add each layer's input in their second add-and-norm: no leaf case
    sees it; the pretrained case, rerun from its token ids and the model (no handed inputs), is
    attributed to the first layer's second add-and-norm, every sub-layer before it fed-identical."""
    from verify import assets

    # a test dependency (pyproject's test extra): missing, it is an install error, never a skip
    assert assets.model_dir() is not None, f"the model is not available: {assets.models.missing_reason()}"
    case, unit = "pretrained.minilm.lesson", "layer0.addnorm2"  # the --case pattern also selects lesson_wide
    proc, found = _attributed(repo_root, node, tmp_path, "port.bert.second_addnorm_adds_layer_input", case)
    assert found["culprit"] == unit, found
    names = [r["name"] for r in found["sublayers"]]
    assert names[:5] == ["embedding", "layer0.attention", "layer0.addnorm1", "layer0.ffn", unit], names
    assert names[-1] == "layer5.addnorm2" and len(names) == 1 + 6 * 4, names
    assert all(r["fed"] == 0.0 for r in found["sublayers"][:names.index(unit)])  # upstream, every sub-layer agrees
    assert found["sublayers"][names.index(unit)]["fed"] > found["tolerance"]
    assert f"attribution: {unit} introduces it" in proc.stdout


def test_a_faithful_port_passes_and_traces_nothing(repo_root, node, tmp_path):
    """reversed_k sums every product in reverse order: not bit-identical, within the tolerance; a
    passing run attributes nothing (no attribution, no attribution section in the timings)."""
    cli = port_variants.build(repo_root, "reversed_k", tmp_path)
    proc = run_verify(repo_root, "attention", "--case", "transformer.two_plus_two_head_dim2", "--case", "vit.*",
                      "--case", "gradcheck.transformer.padded", "--case", "train.alignment",
                      "--port-cmd", f"{node} {cli} run", "--report", tmp_path / "report.json", "--timings", timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    cases = json.loads((tmp_path / "report.json").read_text())["cases"]
    assert any(c["status"] == "within the tolerance" for c in cases)  # faithful, not a copy
    assert not any("attribution" in c for c in cases)
    assert "attribution" not in proc.stdout


def test_only_failing_traceable_cases_where_the_engines_disagree_are_wanted(monkeypatch):
    class Case:
        def __init__(self, id, kind, op):
            self.id, self.kind, self.spec = id, kind, {"op": op}

    cases = [Case("a", "forward", "vit"), Case("b", "forward", "vit"), Case("c", "gradcheck", "vit"),
             Case("d", "forward", "layer_norm"), Case("e", "forward", "vit"), Case("f", "gradcheck", "gradcheck_transformer"),
             Case("g", "training", "train_sort"), Case("h", "training", "train_sort"), Case("i", "gradcheck", "gradcheck_rope")]
    entries = {i: {"id": i, "passed": i == "a", "replay": []} for i in "abcdefghi"}
    entries["g"]["replay"] = [{"segment": [0, 50], "passed": True}, {"segment": [50, 100], "passed": False}]
    entries["h"]["replay"] = [{"segment": [0, 50], "passed": True}]  # failing elsewhere (its evaluation): no segment
    monkeypatch.setattr(advice, "engines_disagree", lambda entry: not entry["passed"] and entry["id"] != "e")  # e: stale
    assert [c.id for c in attribution.wanted(cases, entries)] == ["b", "f", "g"]
    assert attribution.first_failing_segment(entries["g"]) == [50, 100]


def test_figures_name_the_first_sublayer_beyond_the_tolerance():
    def doc(*values):
        names = ["embedding", "blk0.attention", "head"]
        return {"units": [{"name": n, "tensors": [f"{n}.out"]} for n in names],
                "tensors": {f"{n}.out": {"dtype": "float64", "shape": [1], "data": [v]} for n, v in zip(names, values)}}

    traces = {"reference": doc(1.0, 2.0, 3.0), "port": doc(1.0, 2.5, 5.0), "fed": doc(1.0, 2.5, 3.0)}
    found = attribution.figures(traces, 1e-6)
    assert found["culprit"] == "blk0.attention" and found["sublayers"][1]["beyond"] == ["out"]
    assert [r["own"] for r in found["sublayers"]] == [0.0, 0.5, 2.0]
    assert found["amplification"] == 4.0
    assert "blk0.attention introduces it" in attribution_lines(found)[0]
    assert "x4" in attribution_lines(found)[0]


def test_a_fed_trace_without_a_sublayer_fails_the_case_saying_which(repo_root, node, tmp_path):
    """Both engines: a trace that lacks a sub-layer's output fails that case (ok: false), naming it."""
    import subprocess
    import sys

    from toolkit import catalogue_case

    case = catalogue_case("encoder_block.lens_full_and_short")
    first = {"protocol": 1, "out_dir": str(tmp_path / "ref"), "cases": [case]}
    subprocess.run([sys.executable, "-m", "reference", "run"], input=json.dumps(first), cwd=repo_root,
                   capture_output=True, text=True, check=True)
    (tmp_path / "empty.trace.json").write_text(json.dumps({"units": [], "tensors": {}}))
    request = {"protocol": 1, "cases": [case], "trace": {case["id"]: {"fed": str(tmp_path / "empty.trace.json")}},
               "inputs_from": {case["id"]: str(tmp_path / "ref" / f"{case['id']}.handed.json")}}
    for name, argv in (("reference", [sys.executable, "-m", "reference", "run"]), ("port", [str(node), "port_ts/src/cli.ts", "run"])):
        done = subprocess.run(argv, input=json.dumps({**request, "out_dir": str(tmp_path / name)}), cwd=repo_root,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        status = json.loads(done.stdout)
        assert status["ok"] is False and "lacks 'attention.out'" in status["error"], (name, status)
