"""No function of verify/ is longer than 80 lines or takes more than 8 parameters (issue 31)."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "core_size", Path(__file__).resolve().parent.parent / "bench" / "core_size.py")
core_size = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(core_size)


def test_every_function_of_verify_is_short_and_narrow():
    too_big = [f for f in core_size.functions()
               if f[1] > core_size.MAX_LINES or f[2] > core_size.MAX_PARAMS]
    assert not too_big, f"functions over {core_size.MAX_LINES} lines or {core_size.MAX_PARAMS} parameters: {too_big}"


def test_the_walk_measures_lines_and_parameters(tmp_path):
    (tmp_path / "verify").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(85))
    (tmp_path / "verify" / "m.py").write_text(
        f"def long(a, b, *c, d, **e):\n{body}\n\nclass K:\n    def m(self, a):\n        return a\n")
    found = {where.split()[-1]: (lines, params) for where, lines, params in core_size.functions(tmp_path)}
    assert found == {"long": (86, 5), "m": (2, 1)}
