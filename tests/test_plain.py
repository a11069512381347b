"""VERIFY_PLAIN=1 turns every accelerator of the runner off (verify/plain.py): the same cached
`verify attention` run with and without it gives the same JSON report, timings and seconds apart.

The cases cover what the accelerators touch: a training case (its states, replay and curves), a
gradient check, a pretrained case (its .full.json), a greedy decode, and a case the port fails (a
planted fault: heatmaps of real differences, error lines). Both runs take the reference from the
reference cache, as a maintainer's run does."""

from pathlib import Path

from helpers import judged, project_copy, user_attention

CASES = ("train.alignment", "gradcheck.alignment.act4", "pretrained.minilm.lesson", "greedy_decode.untrained",
         "dot_product_attention.no_mask")
FAULT = ("nn/dotProductAttention.ts", "const S = scores.data, scale = Math.sqrt(D);",
         "const S = scores.data, scale = D;")  # scores divided by d instead of sqrt(d)


def _plant(project):
    name, find, replace = FAULT
    path = Path(project) / "port_ts" / "src" / name
    text = path.read_text(encoding="utf-8")
    assert text.count(find) == 1, f"expected {find!r} once in {path}: update FAULT to the port's source"
    path.write_text(text.replace(find, replace), encoding="utf-8")


def _env(plain):
    import os
    environ = {k: v for k, v in os.environ.items() if k != "VERIFY_PLAIN"}
    return dict(environ, VERIFY_PLAIN="1") if plain else environ


def test_a_cached_run_gives_the_same_report_with_and_without_verify_plain(tmp_path):
    project = project_copy(tmp_path)
    _plant(project)
    selection = [arg for case in CASES for arg in ("--case", case)]
    warm, _ = user_attention(project, tmp_path / "warm.json", *selection, env=_env(False))  # fills the cache
    assert warm.returncode == 1, warm.stdout + warm.stderr
    reports = {}
    for plain in (False, True):
        proc, reports[plain] = user_attention(project, tmp_path / f"plain-{plain}.json", *selection, env=_env(plain))
        assert proc.returncode == 1, proc.stdout + proc.stderr
        origin = reports[plain]["reference"]  # every case's reference from the cache
        assert origin["from_cache"] == origin["cases"] >= len(CASES), origin
    accelerated, plain = reports[False], reports[True]
    failing = [c["id"] for c in plain["cases"] if not c["passed"]]
    assert "dot_product_attention.no_mask" in failing and "train.alignment" not in failing, failing
    assert any(c["heatmaps"] for c in plain["cases"] if c["id"] in failing)
    assert any(c.get("replay") for c in plain["cases"])
    assert judged(accelerated) == judged(plain)
