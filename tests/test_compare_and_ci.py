"""Post-deploy check: before/after comparison, CI gates, suppressions, SARIF and JUnit."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from conftest import FIXTURES, ROOT, one, run_cli, report
from diagnose.ruleset.rules import load_rules

BEFORE = FIXTURES / "seed003" / "realtime.log"
AFTER = FIXTURES / "seed003" / "after.log"
HEALTHY = FIXTURES / "scenarios" / "healthy.log"
HEALTHY2 = FIXTURES / "scenarios" / "healthy-rerun.log"


def test_seed003_before_after_reports_config_diff_fixed_findings_and_better_throughput():
    p = run_cli("--format", "json", AFTER, "--baseline", BEFORE)
    assert p.returncode == 0, p.stderr.decode()
    c = report(p.stdout)["comparison"]
    changes = {x["key"]: (x["before"], x["after"]) for x in c["config_changes"]}
    assert changes["tensor_parallel_size"] == (4, 1) and changes["data_parallel_size"] == (1, 4)
    assert changes["enforce_eager"] == (True, False) and changes["max_num_batched_tokens"] == (2048, 8192)
    assert {"tp-for-small-model", "cuda-graphs-disabled"} <= set(c["fixed"])
    g = c["signals"]["generation_throughput"]
    assert g["verdict"] == "better" and g["after"] > 3 * g["before"]
    assert set(c) >= {"config_changes", "new", "fixed", "unchanged", "signals"}
    for name in ("generation_throughput", "prompt_throughput", "kv_cache_usage", "waiting", "running"):
        assert set(c["signals"][name]) >= {"before", "after", "change", "verdict"}
        assert c["signals"][name]["verdict"] in ("better", "worse", "unchanged", "inconclusive")


def test_a_saved_json_report_works_as_baseline(tmp_path):
    saved = tmp_path / "before.json"
    assert run_cli("--format", "json", "--output", saved, BEFORE).returncode == 0
    c = report(run_cli("--format", "json", AFTER, "--baseline", saved).stdout)["comparison"]
    assert c["signals"]["generation_throughput"]["verdict"] == "better"
    assert "tp-for-small-model" in c["fixed"]


def test_two_runs_of_the_same_healthy_scenario_are_never_worse():
    for a, b in ((HEALTHY, HEALTHY2), (HEALTHY2, HEALTHY)):
        p = run_cli("--format", "json", "--fail-on-regression", a, "--baseline", b)
        c = report(p.stdout)["comparison"]
        verdicts = {k: v["verdict"] for k, v in c["signals"].items()}
        assert all(v in ("unchanged", "inconclusive") for v in verdicts.values()), verdicts
        assert p.returncode == 0


def test_fail_on_regression_exits_1_when_throughput_drops():
    p = run_cli("--format", "json", "--fail-on-regression", BEFORE, "--baseline", AFTER)
    assert p.returncode == 1
    assert report(p.stdout)["comparison"]["signals"]["generation_throughput"]["verdict"] == "worse"


def test_sarif_validates_against_the_2_1_0_schema():
    schema = json.loads((ROOT / "tests" / "schemas" / "sarif-2.1.0.json").read_text())
    for target in ([BEFORE], [FIXTURES / "mixed"]):
        doc = json.loads(run_cli("--format", "sarif", *target).stdout)
        jsonschema.Draft4Validator(schema).validate(doc)
    doc = json.loads(run_cli("--format", "sarif", BEFORE).stdout)
    results = doc["runs"][0]["results"]
    r = next(x for x in results if x["ruleId"] == "cuda-graphs-disabled")
    loc = r["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"].endswith("realtime.log") and loc["region"]["startLine"] >= 1
    assert r["level"] == "error"


def test_junit_has_one_case_per_rule_with_pass_fail_skip():
    xml = run_cli("--format", "junit", BEFORE).stdout.decode()
    root = ET.fromstring(xml)
    cases = root.findall(".//testcase")
    ids = [c.get("name") for c in cases]
    assert sorted(ids) == sorted(r.id for r in load_rules())
    by = {c.get("name"): c for c in cases}
    assert by["tp-for-small-model"].find("failure") is not None
    # KV usage peaks at 1.7 %: the rule ran and passed
    assert by["kv-cache-pressure"].find("failure") is None and by["kv-cache-pressure"].find("skipped") is None
    # no request log, so nothing says whether prompts share prefixes: not applicable, shown as skipped
    skipped = by["prefix-caching-off"].find("skipped")
    assert skipped is not None and skipped.get("message") == "not applicable: missing input: repeated_prefix_share"
    assert by["queue-buildup"].find("failure") is None and by["queue-buildup"].find("skipped") is None  # passed
    assert int(root.get("tests")) == len(cases)


def test_expired_suppression_stops_suppressing_and_says_so(tmp_path):
    cfg = tmp_path / "diagnose.toml"
    cfg.write_text('[[ignore]]\nid = "cuda-graphs-disabled"\nreason = "eager on purpose"\nexpires = 2020-01-01\n\n'
                   '[[ignore]]\nid = "tp-over-pcie"\nreason = "one box"\nexpires = 2999-01-01\n')
    doc = report(run_cli("--format", "json", "--config", cfg, BEFORE).stdout)
    d = doc["analyses"][0]
    ids = {f["id"] for f in d["findings"]}
    assert "cuda-graphs-disabled" in ids and "tp-over-pcie" not in ids
    status = {s["id"]: s["status"] for s in doc["suppressions"]}
    assert status == {"cuda-graphs-disabled": "expired", "tp-over-pcie": "active"}
    term = run_cli("--config", cfg, BEFORE).stdout.decode()
    assert "suppression of cuda-graphs-disabled expired on 2020-01-01" in term


def test_project_config_in_the_working_directory_and_threshold_override(tmp_path):
    (tmp_path / ".diagnose.toml").write_text('[rules.client-bound]\nparams = { kv_low_pct = 1.0 }\n'
                                             '[rules.tp-over-pcie]\nseverity = "low"\n')
    d = one(run_cli("--format", "json", BEFORE.resolve(), cwd=tmp_path).stdout)
    by = {f["id"]: f for f in d["findings"]}
    assert "client-bound" not in by and "client-bound" in d["passed"]     # KV 1.56 % is not below 1 %
    assert by["tp-over-pcie"]["severity"] == "low"
    bad = tmp_path / "bad.toml"
    bad.write_text("[[ignore]]\nreason = 'no id'\n")
    p = run_cli("--config", bad, BEFORE)
    assert p.returncode == 2 and "bad.toml" in p.stderr.decode()


def test_rules_docs_show_thresholds():
    out = run_cli("rules", "client-bound").stdout.decode()
    assert "kv_low_pct = 20" in out


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "jira", "json", "sarif", "junit"])
def test_a_fleet_renders_in_every_format(fmt):
    p = run_cli("--format", fmt, FIXTURES / "rules" / "replica-imbalance" / "fires.prom")
    assert p.returncode == 0, p.stderr.decode()
    assert "replica-imbalance" in p.stdout.decode()
