"""The deploy-gate recipe (docs/deploy.md): the GitHub Actions workflow parses, and it and the
shell form run exactly the README's commands (its main command's install, its deploy gate), keep
the reports, cache pip's and npm's downloads and never the reference cache."""

import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
ACTIVATE = ". .venv/bin/activate && "


def readme_commands():
    """(the README's main command, its deploy gate), from its sh blocks."""
    blocks = re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    lines = [line.strip() for block in blocks for line in block.splitlines()]
    main = next(line for line in lines if line.endswith("&& verify attention"))
    gate = next(line for line in lines if line.startswith("verify attention --fresh"))
    return main, gate


def test_the_workflow_runs_the_readmes_commands_and_keeps_the_reports():
    main, gate = readme_commands()
    workflow = yaml.safe_load((ROOT / "docs" / "deploy" / "deploy-gate.yml").read_text(encoding="utf-8"))
    steps = workflow["jobs"]["gate"]["steps"]
    runs = [s["run"] for s in steps if "run" in s]
    assert runs == [main.removesuffix(" && verify attention"), ACTIVATE + gate], runs
    assert workflow["jobs"]["deploy"]["needs"] == "gate"
    keep = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert keep["if"] == "always()" and keep["with"]["path"] == "reports/"
    cached = [p for s in steps if s.get("uses", "").startswith("actions/cache") for p in s["with"]["path"].split()]
    assert cached == ["~/.cache/pip", "~/.npm"], cached


def test_the_shell_form_runs_the_same_commands_and_exits_with_the_gates_code(tmp_path):
    main, gate = readme_commands()
    script = ROOT / "docs" / "deploy" / "deploy-gate.sh"
    commands = [line for line in script.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    assert commands == [main.removesuffix(" && verify attention") + " || exit $?", ACTIVATE + gate], commands
    # an install that fails stops the script with its code, before the gate (python3 is not found)
    proc = subprocess.run(["/bin/sh", str(script)], cwd=tmp_path, env={"PATH": str(tmp_path)}, capture_output=True, text=True)
    assert proc.returncode == 127 and not (tmp_path / "reports").exists(), proc


def test_nothing_in_the_recipe_touches_the_reference_cache():
    for name in ("deploy-gate.yml", "deploy-gate.sh"):
        text = (ROOT / "docs" / "deploy" / name).read_text(encoding="utf-8")
        assert "attention-parity" not in text and "VERIFY_REFERENCE_CACHE" not in text, name
