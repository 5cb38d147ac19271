"""The CLI contract: exit codes, --fail-on, --ignore, --rules, --output, formats."""
from __future__ import annotations

import json

from conftest import FIXTURES, run_cli, one, report

SEED = FIXTURES / "seed003" / "realtime.log"


def test_exit_codes_follow_fail_on():
    assert run_cli(SEED).returncode == 0
    assert run_cli("--fail-on", "high", SEED).returncode == 1
    assert run_cli("--fail-on", "critical", SEED).returncode == 0
    bad = run_cli("--fail-on", "bogus", SEED)
    assert bad.returncode == 2


def test_ignore_suppresses_a_rule():
    d = one(run_cli("--format", "json", "--ignore", "cuda-graphs-disabled,client-bound", SEED).stdout)
    ids = {f["id"] for f in d["findings"]}
    assert "cuda-graphs-disabled" not in ids and "client-bound" not in ids
    assert "tp-for-small-model" in ids


USER_RULE = '''id = "{rid}"
title = "TP is {{tensor_parallel_size}}"
fix_title = "Look at it"
severity = "low"
requires = ["tensor_parallel_size"]
condition = "{cond}"
[fix.any]
note = "n"
[docs]
what = "w"
'''


def test_user_rules_dir_adds_rules_and_a_crashing_rule_is_an_error_not_a_crash(tmp_path):
    (tmp_path / "mine.toml").write_text(USER_RULE.format(rid="team-tp-check", cond="tensor_parallel_size >= 2"))
    (tmp_path / "broken.toml").write_text(USER_RULE.format(rid="team-broken", cond="tensor_parallel_size ** 999999 > 1"))
    p = run_cli("--format", "json", "--rules", tmp_path, SEED)
    assert p.returncode == 0, p.stderr.decode()
    d = one(p.stdout)
    assert any(f["id"] == "team-tp-check" and f["title"] == "TP is 4" for f in d["findings"])
    assert any(e["id"] == "team-broken" and "exponent" in e["error"] for e in d["errors"])
    assert "tp-for-small-model" in {f["id"] for f in d["findings"]}


def test_a_malformed_user_rule_file_is_a_one_line_usage_error(tmp_path):
    (tmp_path / "bad.toml").write_text('id = "x"\ntitle = "t"\nfix_title = "f"\nseverity = "high"\ncondition = "a.b"\n')
    p = run_cli("--rules", tmp_path, SEED)
    assert p.returncode == 2
    assert f"{tmp_path / 'bad.toml'}:5:" in p.stderr.decode()


def test_not_applicable_rules_are_listed_in_json_and_verbose():
    f = FIXTURES / "rules" / "cuda-graphs-disabled" / "fires.log"
    d = one(run_cli("--format", "json", f).stdout)
    na = {x["id"]: x["reason"] for x in d["not_applicable"]}
    assert "client-bound" in na and "missing input" in na["client-bound"]
    out = run_cli("--verbose", f).stdout.decode()
    assert "not applicable: client-bound" in out


def test_output_writes_the_report_and_the_terminal_gets_one_summary_line(tmp_path):
    out = tmp_path / "report.json"
    p = run_cli("--format", "json", "--output", out, SEED)
    assert p.returncode == 0
    assert report(out.read_text())["schema_version"] == 2
    assert p.stdout.decode().count("\n") == 1 and b"verdict" in p.stdout
    assert not list(tmp_path.glob(".diagnose-*"))   # no temporary file left behind
