"""The GitHub Action (action.yml) as a runner runs it: its shell steps, read from action.yml, each
run with bash as GitHub runs `shell: bash` (`bash --noprofile --norc -eo pipefail`), with the
`${{ … }}` expressions the runner would fill in, GITHUB_OUTPUT / GITHUB_PATH / RUNNER_TEMP files,
and a step that fails stopping the ones after it. The install step installs this checkout into its
own virtual environment for real (pip, dependencies from the package index as any install). The
upload step (github/codeql-action/upload-sarif) cannot run here: what it is given is checked."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
STEPS = ACTION["runs"]["steps"]
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
LOG = ROOT / "fixtures" / "seed003" / "realtime.log"      # three HIGH findings, one MEDIUM, no CRITICAL


def _expand(text: str, inputs: dict, outputs: dict) -> str:
    """The expressions the runner fills in before a step runs; any other one fails the test (the
    action must not rely on what this harness does not model)."""
    def value(m: re.Match) -> str:
        e = m.group(1)
        if e.startswith("inputs."):
            return inputs[e.removeprefix("inputs.")]
        if e == "github.action_path":
            return str(ROOT)
        s = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", e)
        if s:
            return outputs.get(s.group(1), {}).get(s.group(2), "")
        raise AssertionError(f"action.yml: expression the test does not model: {e}")
    return EXPR.sub(value, text)


def run_action(given: dict, work: Path, temp: Path, start: int = 0) -> tuple[int, dict, list]:
    """Run the shell steps from `start` on: (the exit status of the job, each step's outputs by
    id, the `uses` steps with their `with` expanded)."""
    inputs = {k: str(v.get("default", "")) for k, v in ACTION["inputs"].items()} | given
    outputs: dict = {}
    used = []
    env0 = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env0.update(RUNNER_TEMP=str(temp), GITHUB_WORKSPACE=str(work), GITHUB_PATH=str(temp / "github_path"), NO_COLOR="1")
    for i, step in enumerate(STEPS[start:], start):
        if "uses" in step:
            used.append({**step, "with": {k: _expand(str(v), inputs, outputs) for k, v in step.get("with", {}).items()}})
            continue
        # Inputs reach a script through env only: pasted into the script they could inject commands.
        assert "${{" not in step["run"], f"step {step['name']!r}: an expression inside `run`"
        assert step["shell"] == "bash"
        out = temp / f"output-{i}"
        out.write_text("")
        script = temp / f"step-{i}.sh"
        script.write_text(step["run"])
        env = dict(env0, GITHUB_OUTPUT=str(out), **{k: _expand(str(v), inputs, outputs) for k, v in step.get("env", {}).items()})
        p = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=work, env=env,
                           capture_output=True, text=True, timeout=600)
        if "id" in step:
            outputs[step["id"]] = dict(ln.split("=", 1) for ln in out.read_text().splitlines() if "=" in ln)
        if p.returncode != 0:
            return p.returncode, outputs, used
    return 0, outputs, used


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """The install step, run once: (the workspace, RUNNER_TEMP holding the action's venv)."""
    work, temp = tmp_path_factory.mktemp("workspace"), tmp_path_factory.mktemp("runner_temp")
    assert "Install" in STEPS[0]["name"]
    code, _, _ = run_action({"files": str(LOG)}, work, temp, start=0)      # the whole action, first run
    # the job failed on the HIGH findings (fail-on's default), and the tool stayed in its venv
    assert code == 1
    assert (temp / "diagnose-venv" / "bin" / "diagnose").exists()
    assert (temp / "github_path").read_text().strip() == str(temp / "diagnose-venv" / "bin")
    return work, temp


def _sarif(path: Path) -> dict:
    doc = json.loads(path.read_text())
    assert doc["version"] == "2.1.0"
    return doc


def test_a_high_finding_fails_the_job_after_the_sarif_is_written_and_handed_to_upload(installed):
    work, temp = installed
    code, outputs, used = run_action({"files": str(LOG), "fail-on": "high", "sarif": "gate.sarif"}, work, temp, start=1)
    assert code == 1 and outputs["gate"]["exit-code"] == "1"
    results = _sarif(work / "gate.sarif")["runs"][0]["results"]
    assert {"tp-for-small-model", "cuda-graphs-disabled", "tp-over-pcie"} <= {r["ruleId"] for r in results}
    (upload,) = used
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@")
    assert upload["with"]["sarif_file"] == "gate.sarif"
    assert "always()" in upload["if"]          # uploaded although the gate step failed


def test_below_the_threshold_the_job_passes_with_the_sarif_written(installed):
    work, temp = installed
    code, outputs, _ = run_action({"files": str(LOG), "fail-on": "critical"}, work, temp, start=1)
    assert code == 0 and outputs["gate"]["exit-code"] == "0"
    assert _sarif(work / "diagnose.sarif")["runs"][0]["results"]        # the findings are still reported


def test_an_input_error_fails_at_the_diagnose_step(installed):
    work, temp = installed
    code, outputs, _ = run_action({"files": "no-such.log", "sarif": "missing.sarif"}, work, temp, start=1)
    assert code == 2 and outputs["gate"]["exit-code"] == "2"
    assert not (work / "missing.sarif").exists()
