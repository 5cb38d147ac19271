"""Every real sample from public bug reports (fixtures/samples, a copy of ../shared/samples) goes
through diagnose without a traceback, and the facts a vLLM log holds reach the JSON deployment."""
from __future__ import annotations

import json
import re

import pytest

from conftest import SAMPLES_DIR, run_cli, one, report

SAMPLES = sorted(p for p in SAMPLES_DIR.rglob("*") if p.is_file() and p.suffix != ".md")
VLLM = [p for p in SAMPLES if p.parent.name == "vllm"]



@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_sample_runs_without_traceback(path):
    p = run_cli("--format", "json", path)
    err = p.stderr.decode()
    assert "Traceback" not in err, err
    # Every sample is a real log a user would paste: diagnosed, never refused.
    assert p.returncode == 0, err
    report(p.stdout)


@pytest.mark.parametrize("path", VLLM, ids=[p.name for p in VLLM])
def test_vllm_sample_facts_reach_the_deployment(path):
    text = path.read_text(errors="replace")
    p = run_cli("--format", "json", path)
    assert p.returncode == 0, p.stderr.decode()
    d = one(p.stdout)["deployment"]
    m = re.search(r"\(v(\d+\.\d+\.\d+[\w.+-]*)\) with config|server version (\d+\.\d+\.\d+)", text)
    if m:
        assert d["engine_version"] == (m.group(1) or m.group(2))
    m = re.search(r"tensor[_-]parallel[_-]size[= ](\d+)", text)
    if m:
        assert d["tensor_parallel_size"] == int(m.group(1))
    m = re.search(r", enforce_eager=(True|False)", text)
    if m:
        assert d["enforce_eager"] == (m.group(1) == "True")
    m = re.search(r"# GPU blocks: (\d+)|GPU KV cache size: ([\d,]+) tokens", text)
    if m:
        assert d["kv_cache_tokens"] and d["kv_cache_tokens"] > 0
    found = re.findall(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)", text)
    if found:   # the last start-up in the file is the one that counts
        assert d["max_concurrency"] == float(found[-1])


KNOWN = {
    # what a careful reader of each excerpt would say, and what diagnose must say too
    "vllm-issue-10517.log": {"kv-capacity-low"},
    "vllm-issue-19186.log": {"cuda-oom"},
    "vllm-issue-43295.log": {"kv-cache-pressure"},
    "vllm-issue-9342.log": {"kv-cache-pressure"},
}


@pytest.mark.parametrize("name,expected", sorted(KNOWN.items()))
def test_rules_say_something_true_about_samples(name, expected):
    d = one(run_cli("--format", "json", SAMPLES_DIR / "vllm" / name).stdout)
    assert expected <= {f["id"] for f in d["findings"]}


def test_idle_sample_is_idle_with_no_findings_above_info():
    d = one(run_cli("--format", "json", SAMPLES_DIR / "vllm" / "vllm-issue-6689.log").stdout)
    assert d["verdict"]["bottleneck"] == "idle"
    assert all(f["severity"] == "info" for f in d["findings"])
