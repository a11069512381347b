"""bench/scale.py on a tiny configuration (about 15 s): the structure of its tables and JSON, the
engines' agreement on the width workload (a port on other inputs, or a torch block 1e-6 off, is
stopped with exit 1 before anything is timed), and exit 2 on bad arguments.

    python -m pytest bench/test_scale.py -p no:cacheprovider
"""

import json
import subprocess
import sys

import pytest

import scale
import torch_ops

TINY_WIDTH = ["--widths", "16,32", "--heads", "2,4", "--batch", "2", "--tokens", "4", "--rounds", "2", "--budget-s", "0",
              "--warmup-s", "0"]


def test_a_tiny_run_gives_both_tables_and_the_json(repo_root, tmp_path):
    out = tmp_path / "scale.json"
    done = subprocess.run([sys.executable, "bench/scale.py", "--groups", "forward", "--sizes", "forward=1,3",
                           *TINY_WIDTH, "--json", str(out)], cwd=repo_root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(out.read_text())
    assert set(doc["load"]) == {"start", "end"} and doc["command"].startswith("python bench/scale.py")

    rows = doc["cases"]["rows"]
    assert [(r["group"], r["n"]) for r in rows] == [("forward", 1), ("forward", 3)]
    for r in rows:
        assert r["exit"] == 0 and r["passed"] == r["n"] == r["cases"] == len(set(r["ids"]))
        assert r["wall"] > 0 and r["own"] is not None and 0 < r["own"] <= r["report_total"] <= r["wall"]
        assert r["engine_cases"]["reference"] is not None and r["engine_cases"]["port"] is not None
    assert set(rows[0]["ids"]) < set(rows[1]["ids"])  # evenly spaced: the first case, then every third of the list
    fit = doc["cases"]["fits"]["forward"]
    assert set(fit["wall"]) == {"fixed", "per_case"} and set(fit["own"]) == {"fixed", "per_case"}
    # the fit passes through both points of two sizes
    for key, field in (("wall", "wall"), ("own", "own")):
        for r in rows:
            assert abs(fit[key]["fixed"] + fit[key]["per_case"] * r["n"] - r[field]) < 1e-3

    width = doc["width"]["rows"]
    assert [(r["d"], r["heads"], r["F"], r["part"]) for r in width] == [
        (16, 2, 64, "forward"), (16, 2, 64, "backward"), (32, 4, 128, "forward"), (32, 4, 128, "backward")]
    for r in width:
        assert set(r["median_ms"]) == {"reference", "port", "torch"} and all(v > 0 for v in r["median_ms"].values())
        assert all(len(t) == 2 for t in r["times_ms"].values())  # --rounds 2, --budget-s 0: exactly 2 in each engine
        assert r["agreement"]["port"] <= scale.PORT_TOL and r["agreement"]["torch"] <= scale.TORCH_TOL
        # B T (4 d^2 + 2 d F) + 2 B T^2 d, the backward twice the forward
        fwd = 2 * 4 * (4 * r["d"] ** 2 + 2 * r["d"] * r["F"]) + 2 * 2 * 16 * r["d"]
        assert r["multiply_adds"] == (fwd if r["part"] == "forward" else 2 * fwd)
    assert "| forward | 3 |" in done.stdout and "| 32 | 4 | 128 | backward |" in done.stdout


def _broken_torch_block(s, a, cache):
    """The torch block with its output 1e-6 off (relative): a small bug, far above 1e-9."""
    case = torch_ops.encoder_block(s, a, cache)
    inner = case.forward
    return torch_ops.TorchCase(lambda: {"out": inner()["out"] * (1 + 1e-6)}, case.leaves)


def test_an_engine_that_disagrees_stops_the_width_part(monkeypatch, capsys):
    argv = ["--part", "width", "--widths", "16", "--heads", "2", "--batch", "2", "--tokens", "4", "--rounds", "1",
            "--budget-s", "0", "--warmup-s", "0"]
    # (the faithful engines pass: the first test, exit 0 with the agreement in its JSON)
    monkeypatch.setitem(torch_ops.TORCH, "encoder_block", _broken_torch_block)
    assert scale.main(argv) == 1
    err = capsys.readouterr().err
    assert "encoder_block.forward[d16]: the torch's outputs differ from the reference's" in err
    monkeypatch.undo()

    request = scale.port_request
    monkeypatch.setattr(scale, "port_request", lambda w, *rest: {**request(w, *rest), "seed": w.seed + 1})  # other draws
    assert scale.main(argv) == 1
    assert "encoder_block.forward[d16]: the port's outputs differ from the reference's" in capsys.readouterr().err


def test_the_rounds_fill_the_budget_within_the_bounds():
    timing = {"rounds": 3, "budget_s": 1.0, "warmup_s": 0.5}
    assert scale.rounds_for(0.010, timing) == 100  # 1 s of 10 ms calls
    assert scale.rounds_for(2.0, timing) == 3  # the minimum for calls longer than the budget
    assert scale.rounds_for(1e-6, timing) == scale.MAX_ROUNDS
    assert scale.rounds_for(0.010, {**timing, "budget_s": 0}) == 3  # --budget-s 0: exactly --rounds


@pytest.mark.parametrize("args, says", [
    (["--widths", "64,x"], "--widths: expected comma-separated integers"),
    (["--widths", "64", "--heads", "3"], "3 heads do not divide d = 64"),
    (["--widths", "64,128", "--heads", "4"], "--heads: one per width"),
    (["--sizes", "forward=0"], "each size is a positive number, all or each"),
    (["--sizes", "nokind=3"], "KIND one of --groups"),
    (["--rounds", "0"], "--rounds: expected a positive number"),
    (["--budget-s", "-1"], "--budget-s: expected seconds >= 0"),
    (["--json", "/nonexistent-dir/x.json"], "does not exist"),
])
def test_bad_arguments_exit_2_saying_what_is_wrong(args, says, capsys):
    with pytest.raises(SystemExit) as e:
        scale.parse(args)
    assert e.value.code == 2
    assert says in capsys.readouterr().err
