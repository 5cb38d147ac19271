"""CLI options checked the way a user checks them (a subprocess each): --targets (TOML and YAML),
config-file errors and effects (--config, ./.diagnose.toml), --baseline in the terminal and
markdown formats, --version, and the --start/--end window of --prometheus under several time
zones (issue 25, item 4)."""
from __future__ import annotations

import importlib.metadata
import json
import re
import socket
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

import diagnose
from conftest import FIXTURES, ROOT, run_cli, run_json, run_one, report
from diagnose._compat import tomllib

METRICS = FIXTURES / "rules" / "slo-ttft" / "fires" / "metrics.prom"   # TTFT p50 1.75 s, p99 2.485 s, ITL p50 38 ms
SEED = FIXTURES / "seed003" / "realtime.log"       # TP 4 over PCIe, eager, small batch budget: 407 tokens/s
AFTER = FIXTURES / "seed003" / "after.log"         # the same model fixed: TP 1 × DP 4, graphs: 1473 tokens/s
MODEL = "meta-llama/Llama-3.1-8B-Instruct"         # the model METRICS names


def one_line_error(p, *must: str) -> str:
    """Exit 2, one line on stderr starting `diagnose: `, holding every string of `must`, no traceback."""
    err = p.stderr.decode()
    assert p.returncode == 2, (p.returncode, err)
    assert "Traceback" not in err and "internal error" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("diagnose: "), err
    for s in must:
        assert s in lines[0], (s, lines[0])
    return lines[0]


def by_id(doc: dict) -> dict:
    return {f["id"]: f for f in doc["findings"]}


# --- 1. --targets FILE, TOML and YAML ----------------------------------------------------------

TARGETS = {   # name → (TOML, YAML): the same targets written both ways
    "violated": ("[default]\nttft_p50_ms = 500\nttft_p99_ms = 2000\ntpot_ms = 20\n",
                 "default:\n  ttft_p50_ms: 500\n  ttft_p99_ms: 2000\n  tpot_ms: 20\n"),
    "met": ("[default]\nttft_p50_ms = 2000\nttft_p99_ms = 3000\ntpot_ms = 50\n",
            "default:\n  ttft_p50_ms: 2000\n  ttft_p99_ms: 3000\n  tpot_ms: 50\n"),
    # the deployment's own profile wins over the default; a profile for another model does not apply
    "deployment": ('[default]\nttft_p50_ms = 2000\n\n[deployments."Llama-3.1-8B"]\nttft_p50_ms = 300\n\n'
                   '[deployments."Qwen3-VL-2B"]\nttft_p50_ms = 100000\n',
                   "default:\n  ttft_p50_ms: 2000\ndeployments:\n  Llama-3.1-8B:\n    ttft_p50_ms: 300\n"
                   "  Qwen3-VL-2B:\n    ttft_p50_ms: 100000\n"),
    "other-deployment": ('[default]\nttft_p50_ms = 2000\n\n[deployments."Qwen3-VL-2B"]\nttft_p50_ms = 300\n',
                         "default:\n  ttft_p50_ms: 2000\ndeployments:\n  Qwen3-VL-2B:\n    ttft_p50_ms: 300\n"),
}


def write_targets(tmp_path, name: str, kind: str):
    toml, yaml = TARGETS[name]
    p = tmp_path / f"{name}.{kind}"
    p.write_text(toml if kind == "toml" else yaml, encoding="utf-8")
    return p


def test_without_targets_the_slo_rules_are_not_applicable():
    d = run_one(METRICS)
    na = {x["id"]: x["reason"] for x in d["not_applicable"]}
    assert "targets_given" in na["slo-ttft"] and "targets_given" in na["slo-tpot"]
    assert "slo-ttft" not in by_id(d)


@pytest.mark.parametrize("kind", ["toml", "yaml", "yml"])
def test_violated_targets_give_the_slo_findings_the_readme_promises(tmp_path, kind):
    t = write_targets(tmp_path, "violated", "toml" if kind == "toml" else "yaml")
    if kind == "yml":
        t = t.rename(t.with_suffix(".yml"))
    d = run_one(METRICS, "--targets", t)
    f = by_id(d)
    assert f["slo-ttft"]["severity"] == "high"
    assert f["slo-ttft"]["title"] == ("Time to first token misses its target: p50 1750 ms (target 500 ms), "
                                      "p99 2485 ms (target 2000 ms)")
    assert f["slo-tpot"]["title"] == "Time per output token misses its target: 38 ms per token (target 20 ms)"
    term = run_cli(METRICS, "--targets", t)
    assert term.returncode == 0, term.stderr.decode()
    out = term.stdout.decode()
    assert "HIGH slo-ttft" in out and "p50 1750 ms (target 500 ms)" in out
    assert "Users wait 3.5× the target for the first token." in out
    assert run_cli(METRICS, "--targets", t, "--fail-on", "high").returncode == 1


@pytest.mark.parametrize("kind", ["toml", "yaml"])
def test_met_targets_give_no_slo_finding(tmp_path, kind):
    d = run_one(METRICS, "--targets", write_targets(tmp_path, "met", kind))
    assert not {"slo-ttft", "slo-tpot"} & set(by_id(d)), [f["title"] for f in d["findings"]]
    assert {"slo-ttft", "slo-tpot"} <= set(d["passed"])
    out = run_cli(METRICS, "--targets", write_targets(tmp_path, "met", kind)).stdout.decode()
    assert "misses its target" not in out and " slo-ttft (" not in out and " slo-tpot (" not in out


@pytest.mark.parametrize("kind", ["toml", "yaml"])
def test_a_deployment_profile_matched_by_model_name_overrides_the_default(tmp_path, kind):
    f = by_id(run_one(METRICS, "--targets", write_targets(tmp_path, "deployment", kind)))
    assert "p50 1750 ms (target 300 ms)" in f["slo-ttft"]["title"]
    d = run_one(METRICS, "--targets", write_targets(tmp_path, "other-deployment", kind))
    assert "slo-ttft" not in by_id(d) and "slo-ttft" in d["passed"]     # default 2000 ms applies


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_the_same_targets_in_toml_and_yaml_give_the_same_report(tmp_path, name):
    a = run_one(METRICS, "--targets", write_targets(tmp_path, name, "toml"))
    b = run_one(METRICS, "--targets", write_targets(tmp_path, name, "yaml"))
    summary = lambda d: ([(f["id"], f["severity"], f["title"]) for f in d["findings"]], sorted(d["passed"]),
                         d["verdict"]["bottleneck"])
    assert summary(a) == summary(b)


BAD_TARGETS = [   # (file name, content, what the error line must say besides the file name)
    ("syntax.toml", "[default\nttft_p50_ms = 500\n", "syntax.toml:1: not valid targets"),
    ("syntax.yaml", "default:\n  ttft_p50_ms: [1, 2\n", "not valid targets"),
    ("tabs.yaml", "default:\n\tttft_p50_ms: 500\n", "not valid targets"),
    ("list.yaml", "- ttft_p50_ms: 500\n", "expected a table of targets"),
    ("scalar.toml", "default = 5\n", "[default] must be a table of targets"),
    ("string.toml", '[default]\nttft_p50_ms = "fast"\n', "`ttft_p50_ms` must be a number"),
    ("bool.yaml", "default:\n  tpot_ms: yes\n", "`tpot_ms` must be a number"),
    ("negative.toml", "[default]\nmax_sessions = -3\n", "`max_sessions` must be a number"),
    ("typo.toml", "[default]\nttfp_p50_ms = 500\n", "unknown target `ttfp_p50_ms`"),
    ("toplevel.yaml", "defaults:\n  ttft_p50_ms: 500\n", "unknown key `defaults`"),
    ("profile.toml", '[deployments]\n"Llama" = 300\n', '[deployments."Llama"] must be a table of targets'),
    ("binary.toml", b"\xff\xfe[\x00d\x00", "not valid targets"),
]


@pytest.mark.parametrize("name,content,says", BAD_TARGETS, ids=[b[0] for b in BAD_TARGETS])
def test_a_malformed_targets_file_is_a_one_line_usage_error_naming_it(tmp_path, name, content, says):
    t = tmp_path / name
    t.write_bytes(content if isinstance(content, bytes) else content.encode())
    one_line_error(run_cli(METRICS, "--targets", t), name, says)


def test_a_missing_targets_file_is_a_one_line_usage_error(tmp_path):
    one_line_error(run_cli(METRICS, "--targets", tmp_path / "nope.toml"), "nope.toml: no such file")
    one_line_error(run_cli(METRICS, "--targets", tmp_path), str(tmp_path), "is a directory")


# --- 2. Config files: --config FILE and ./.diagnose.toml -------------------------------------

BAD_CONFIGS = [   # (content, what the error line must say after the file name)
    ('[rules.client-bound\nseverity = "low"\n', ":1: invalid TOML: Expected ']'"),
    ('[[ignore]]\nid = "client-bound"\nreason = "x\n', ":3: invalid TOML"),
    ('ignores = ["client-bound"]\n', ":1: unknown key `ignores`"),
    ('[[ignore]]\nid = "client-bound"\nexpiry = 2030-01-01\n', ":3: [[ignore]]: unknown key `expiry`"),
    ('[rules.client-bound]\nseverty = "low"\n', ":2: [rules.client-bound]: unknown key `severty`"),
    ('[rules.client-bound]\nparams = { kv_low_pcts = 30 }\n', ":2: [rules.client-bound]: unknown param `kv_low_pcts`"),
    ('[rules.client-bond]\nseverity = "low"\n', ":1: [rules.client-bond]: unknown rule id"),
    ('[[ignore]]\nid = "client-bond"\n', ":2: [[ignore]]: unknown rule id `client-bond`"),
    ("rules = 5\n", ":1: `rules` must be tables"),
    ('[rules.client-bound]\nseverity = 5\n', ":2: [rules.client-bound]: severity must be one of critical, high"),
    ('[rules.client-bound]\nseverity = "urgent"\n', ":2: [rules.client-bound]: severity must be one of"),
    ('[rules.client-bound]\nparams = "kv_low_pct=30"\n', ":2: [rules.client-bound]: params must be a table"),
    ('[rules.client-bound]\nparams = { kv_low_pct = "high" }\n', ":2: [rules.client-bound]: params.kv_low_pct must be a number"),
    ('[[ignore]]\nid = 5\n', ":2: [[ignore]]: `id` must be a string"),
    ('[[ignore]]\nid = "client-bound"\nexpires = 5\n', ":3: [[ignore]]: `expires` must be a date"),
    ('[[ignore]]\nid = "client-bound"\nexpires = "2026-13-01"\n', ": ignore `client-bound`: expires must be a date"),
    ('[[ignore]]\nreason = "no id"\n', ": each [[ignore]] needs an `id`"),
    ('ignore = "client-bound"\n', ":1: `ignore` must be a list"),
    ("targets = 5\n", ":1: `targets` must be a table"),
    ('[targets.default]\nttft_p50_ms = "fast"\n', ":2: targets: [default]: `ttft_p50_ms` must be a number"),
]


@pytest.mark.parametrize("content,says", BAD_CONFIGS, ids=[f"config{i}" for i in range(len(BAD_CONFIGS))])
def test_a_bad_config_file_is_a_one_line_usage_error_naming_file_and_line(tmp_path, content, says):
    cfg = tmp_path / "team.toml"
    cfg.write_text(content, encoding="utf-8")
    line = one_line_error(run_cli("--config", cfg, SEED), f"{cfg}{says}")
    assert line.startswith(f"diagnose: {cfg}")


def test_a_bad_project_config_in_the_working_directory_is_named(tmp_path):
    (tmp_path / ".diagnose.toml").write_text('[rules.client-bound]\nseverity = "urgent"\n')
    one_line_error(run_cli(SEED.resolve(), cwd=tmp_path), "diagnose: .diagnose.toml:2: [rules.client-bound]: severity")
    (tmp_path / ".diagnose.toml").write_bytes(b"\xff\xfe\x00")
    one_line_error(run_cli(SEED.resolve(), cwd=tmp_path), ".diagnose.toml: not UTF-8 text")


def test_a_missing_config_file_is_a_one_line_usage_error(tmp_path):
    one_line_error(run_cli("--config", tmp_path / "none.toml", SEED), "none.toml: no such file")


QUIET = ('[[ignore]]\nid = "tp-for-small-model"\nreason = "benchmarking TP on purpose"\nexpires = 2999-12-31\n\n'
         '[[ignore]]\nid = "cuda-graphs-disabled"\n\n'
         '[rules.tp-over-pcie]\nseverity = "low"\n')


def test_a_valid_config_ignores_rules_and_changes_severities_so_fail_on_passes(tmp_path):
    assert run_cli("--fail-on", "high", SEED).returncode == 1     # three high findings without it
    cfg = tmp_path / "quiet.toml"
    cfg.write_text(QUIET)
    p = run_cli("--config", cfg, "--fail-on", "high", "--format", "json", SEED)
    assert p.returncode == 0, p.stderr.decode()
    doc = report(p.stdout)
    d = doc["analyses"][0]
    f = by_id(d)
    assert "tp-for-small-model" not in f and "cuda-graphs-disabled" not in f
    assert f["tp-over-pcie"]["severity"] == "low"
    assert {s["id"]: s["status"] for s in doc["suppressions"]} == {"tp-for-small-model": "active",
                                                                  "cuda-graphs-disabled": "active"}
    assert run_cli("--config", cfg, "--fail-on", "low", SEED).returncode == 1   # still reported, at low


def test_the_project_config_in_the_working_directory_applies_and_config_replaces_it(tmp_path):
    (tmp_path / ".diagnose.toml").write_text(QUIET)
    p = run_cli("--fail-on", "high", SEED.resolve(), cwd=tmp_path)
    assert p.returncode == 0, p.stderr.decode()
    assert "tp-for-small-model" not in p.stdout.decode() and "LOW tp-over-pcie" in p.stdout.decode()
    other = tmp_path / "other.toml"
    other.write_text('[rules.client-bound]\nseverity = "info"\n')
    p = run_cli("--config", other, "--fail-on", "high", SEED.resolve(), cwd=tmp_path)
    assert p.returncode == 1          # --config FILE is used instead of ./.diagnose.toml, not with it
    assert "HIGH tp-for-small-model" in p.stdout.decode() and "INFO client-bound" in p.stdout.decode()


def test_targets_in_the_config_file_feed_the_slo_rules(tmp_path):
    cfg = tmp_path / "slo.toml"
    cfg.write_text("[targets.default]\nttft_p50_ms = 500\n")
    f = by_id(run_one("--config", cfg, METRICS))
    assert f["slo-ttft"]["title"].startswith("Time to first token misses its target: p50 1750 ms (target 500 ms)")


# One schema for targets wherever they are given (a --targets file, --config / .diagnose.toml, a
# targets file among the inputs): bare ([default], [deployments."M"]) or under [targets].
TARGET_FORMS = {
    "bare.toml": TARGETS["deployment"][0],
    "wrapped.toml": TARGETS["deployment"][0].replace("[default]", "[targets.default]")
                                            .replace("[deployments.", "[targets.deployments."),
    "bare.yaml": TARGETS["deployment"][1],
    "wrapped.yaml": "targets:\n" + "".join(f"  {ln}\n" for ln in TARGETS["deployment"][1].splitlines()),
}
PLACES = [(place, name) for place in ("--targets", "--config", "input") for name in TARGET_FORMS
          if not (place == "--config" and name.endswith(".yaml"))]      # a config file is TOML


@pytest.mark.parametrize("place,name", PLACES, ids=[f"{p}-{n}" for p, n in PLACES])
def test_targets_are_read_in_either_form_wherever_they_are_given(tmp_path, place, name):
    t = tmp_path / name
    t.write_text(TARGET_FORMS[name], encoding="utf-8")
    args = [METRICS, t] if place == "input" else [METRICS, place, t]
    f = by_id(run_one(*args))
    assert "p50 1750 ms (target 300 ms)" in f["slo-ttft"]["title"]      # the deployment's profile, not the default


BOTH_FORMS = '[default]\nttft_p50_ms = 500\n\n[targets.default]\nttft_p50_ms = 300\n'


@pytest.mark.parametrize("place", ["--targets", "--config", "input"])
def test_targets_in_both_forms_at_once_are_refused_naming_the_file(tmp_path, place):
    t = tmp_path / "both.toml"
    t.write_text(BOTH_FORMS, encoding="utf-8")
    p = run_cli(t) if place == "input" else run_cli(METRICS, place, t)
    one_line_error(p, "both.toml", "targets given twice", "[targets.default] or [default]")


def test_a_config_with_bare_targets_keeps_its_other_tables(tmp_path):
    cfg = tmp_path / "team.toml"
    cfg.write_text('[[ignore]]\nid = "prefill-bound"\n\n[default]\nttft_p50_ms = 500\n', encoding="utf-8")
    doc = run_json("--config", cfg, METRICS)
    d = doc["analyses"][0]
    assert "slo-ttft" in by_id(d) and "prefill-bound" not in by_id(d)
    assert [s["id"] for s in doc["suppressions"]] == ["prefill-bound"]


# --- 3. --baseline in the terminal and markdown formats --------------------------------------

def comparison(new, old) -> dict:
    p = run_cli("--format", "json", new, "--baseline", old)
    assert p.returncode == 0, p.stderr.decode()
    return report(p.stdout)["comparison"]


def test_terminal_baseline_shows_before_after_and_the_regression():
    g = comparison(SEED, AFTER)["signals"]["generation_throughput"]
    assert g["verdict"] == "worse" and g["before"] > 3 * g["after"]
    p = run_cli(SEED, "--baseline", AFTER)
    assert p.returncode == 0, p.stderr.decode()       # a regression alone does not fail the run
    out = p.stdout.decode()
    assert "Compared with the baseline" in out
    assert re.search(rf"generation_throughput\s+{re.escape(str(g['before']))}\s+→\s+{re.escape(str(g['after']))}"
                     rf"\s+{g['change'] * 100:+.0f} %\s+worse", out), out[out.find("Compared"):]
    assert "config tensor_parallel_size: 1 → 4" in out and "config enforce_eager: False → True" in out
    assert "new: cuda-graphs-disabled, tp-for-small-model, tp-over-pcie" in out
    assert run_cli(SEED, "--baseline", AFTER, "--fail-on-regression").returncode == 1


def test_terminal_baseline_after_a_fix_shows_better_and_passes_the_gate():
    g = comparison(AFTER, SEED)["signals"]["generation_throughput"]
    p = run_cli(AFTER, "--baseline", SEED, "--fail-on-regression")
    assert p.returncode == 0, p.stderr.decode()
    out = p.stdout.decode()
    assert re.search(rf"generation_throughput\s+{re.escape(str(g['before']))}\s+→\s+{re.escape(str(g['after']))}"
                     rf"\s+\+\d+ %\s+better", out)
    assert "fixed: cuda-graphs-disabled, tp-for-small-model, tp-over-pcie" in out
    assert not re.search(r"^\s+\w+\s+\S+\s+→\s+\S+.*\sworse$", out, re.M)


def test_markdown_baseline_has_config_and_signal_tables():
    c = comparison(SEED, AFTER)
    g = c["signals"]["generation_throughput"]
    p = run_cli("--format", "markdown", SEED, "--baseline", AFTER, "--fail-on-regression")
    assert p.returncode == 1, p.stderr.decode()
    md = p.stdout.decode()
    assert "## Compared with the baseline" in md
    assert "| setting | before | after |" in md and "| tensor_parallel_size | `1` | `4` |" in md
    assert "| signal | before | after | change | verdict |" in md
    assert f"| generation_throughput | {g['before']} | {g['after']} | {g['change'] * 100:+.0f} % | **worse** |" in md
    assert "new: `cuda-graphs-disabled`, `tp-for-small-model`, `tp-over-pcie`" in md
    ok = run_cli("--format", "markdown", AFTER, "--baseline", SEED, "--fail-on-regression")
    assert ok.returncode == 0, ok.stderr.decode()
    assert "| generation_throughput |" in ok.stdout.decode() and "**better**" in ok.stdout.decode()
    assert "**worse**" not in ok.stdout.decode()


def test_markdown_baseline_written_with_output_keeps_the_comparison(tmp_path):
    out = tmp_path / "ticket.md"
    p = run_cli("--format", "markdown", "-o", out, SEED, "--baseline", AFTER, "--fail-on-regression")
    assert p.returncode == 1
    assert "| generation_throughput |" in out.read_text() and "**worse**" in out.read_text()


def test_fail_on_regression_needs_a_baseline():
    one_line_error(run_cli("--fail-on-regression", SEED), "--fail-on-regression needs --baseline")


# --- 4. --version ----------------------------------------------------------------------------

@pytest.mark.parametrize("args", [["--version"], ["--format", "json", "--version"], [SEED, "--version"]])
def test_version_prints_the_package_version_and_exits_0(args):
    p = run_cli(*args)
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout.decode() == f"diagnose {diagnose.__version__}\n" and p.stderr == b""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert diagnose.__version__ == project["version"]
    try:
        installed = importlib.metadata.version(project["name"])      # diagnose-llm-serving
    except importlib.metadata.PackageNotFoundError:
        installed = project["version"]      # not installed: the tree is all there is
    assert installed == project["version"]


# --- 5. --start / --end / --since for --prometheus, under several time zones ------------------

ZONES = ["UTC", "Europe/Berlin", "America/New_York"]


@pytest.fixture(params=ZONES)
def tz(request, monkeypatch):
    """Run the CLI subprocess in this local time zone (run_cli passes os.environ on)."""
    monkeypatch.setenv("TZ", request.param)
    if request.param != "UTC":
        p = run_cli_py("import time; print(time.strftime('%z', time.localtime(1795497501)))")
        if p == "+0000":
            pytest.skip(f"no time zone data for {request.param} here")
    return request.param


def run_cli_py(code: str) -> str:
    import os
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-c", code], capture_output=True, env=dict(os.environ),
                          text=True, timeout=30).stdout.strip()


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def utc(*a) -> float:
    return datetime(*a, tzinfo=timezone.utc).timestamp()


BAD_WINDOWS = [   # (arguments, what the error line must say)
    (["--start", "garbage", "--end", "2026-11-24T06:18:21Z"], "--start: not an ISO time: 'garbage'"),
    (["--start", "2026-11-24T05:18:21Z", "--end", "yesterday"], "--end: not an ISO time: 'yesterday'"),
    (["--start", "2026-13-24T05:18:21Z", "--end", "2026-11-24T06:18:21Z"], "--start: not an ISO time"),
    (["--start", "2026-11-24T25:18:21", "--end", "2026-11-24T06:18:21Z"], "--start: not an ISO time"),
    (["--start", "2026-11-24T05:18:21+25:00", "--end", "2026-11-24T06:18:21Z"], "--start: not an ISO time"),
    (["--start", "", "--end", "2026-11-24T06:18:21Z"], "--start: not an ISO time: ''"),
    (["--start", "2026-11-24T07:00:00Z", "--end", "2026-11-24T06:00:00Z"],
     "--start (2026-11-24T07:00:00Z) must be before --end (2026-11-24T06:00:00Z)"),
    (["--start", "2026-11-24T06:00:00", "--end", "2026-11-24T06:00:00Z"], "must be before --end"),
    # 08:00+02:00 is 06:00Z: after 05:30Z, though 08:00 > 05:30 on the face of it
    (["--start", "2026-11-24T08:00:00+02:00", "--end", "2026-11-24T05:30:00Z"],
     "--start (2026-11-24T06:00:00Z) must be before --end (2026-11-24T05:30:00Z)"),
    (["--start", "2999-01-01T00:00:00Z"], "--start (2999-01-01T00:00:00Z) must be before --end ("),
    (["--since", "soon"], "--since: not a duration: 'soon'"),
    (["--since", "99999999999d"], "--since: too long"),
]


@pytest.mark.parametrize("args,says", BAD_WINDOWS, ids=[f"window{i}" for i in range(len(BAD_WINDOWS))])
def test_a_bad_prometheus_window_is_a_one_line_usage_error(tz, args, says):
    # the URL is never reached: the window is checked first
    one_line_error(run_cli("--prometheus", f"http://127.0.0.1:{unused_port()}", "--timeout", "3", *args), says)


GOOD_WINDOWS = [
    ["--start", "2026-11-24T05:18:21Z"],                  # no --end: up to now (the bug: an internal error)
    ["--start", "2026-11-24T05:18:21"],
    ["--start", "2026-11-24T05:18:21+02:00", "--end", "2026-11-24T06:18:21-05:00"],
    ["--start", "2026-11-24T05:18:21", "--end", "2026-11-24T06:18:21Z"],     # naive and aware together
    ["--start", "2026-11-24 05:18:21.5", "--end", "2026-11-24T06:18Z"],
    ["--end", "2026-11-24T06:18:21+00:00", "--since", "2h"],
    ["--since", "45m"],
]


@pytest.mark.parametrize("args", GOOD_WINDOWS, ids=[" ".join(a) for a in GOOD_WINDOWS])
def test_a_valid_window_reaches_the_connection_error_not_a_time_error(tz, args):
    port = unused_port()
    one_line_error(run_cli("--prometheus", f"http://127.0.0.1:{port}", "--timeout", "3", *args),
                   f"http://127.0.0.1:{port}: cannot connect")


class FakePrometheus(BaseHTTPRequestHandler):
    """Lists one vLLM metric and answers every range query with no series: the run ends with
    `no series in the window` (exit 2), and the server keeps the window it was asked for."""
    windows: list = []

    def do_GET(self):
        u = urlparse(self.path)
        q = parse_qs(u.query)
        if u.path.endswith("/label/__name__/values"):
            body = {"status": "success", "data": ["vllm:num_requests_running"]}
        elif u.path.endswith("/query_range"):
            FakePrometheus.windows.append((float(q["start"][0]), float(q["end"][0])))
            body = {"status": "success", "data": {"resultType": "matrix", "result": []}}
        else:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


@pytest.fixture(scope="module")
def fake_prom():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FakePrometheus)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


NOW = None     # the end of a window without --end: checked against the test's own clock
WINDOWS = [   # (arguments, the window Prometheus must be asked for, in UTC epoch seconds)
    (["--start", "2026-11-24T05:18:21Z", "--end", "2026-11-24T06:18:21Z"],
     (utc(2026, 11, 24, 5, 18, 21), utc(2026, 11, 24, 6, 18, 21))),
    (["--start", "2026-11-24T05:18:21", "--end", "2026-11-24T06:18:21"],           # naive is UTC
     (utc(2026, 11, 24, 5, 18, 21), utc(2026, 11, 24, 6, 18, 21))),
    (["--start", "2026-11-24T05:18:21+02:00", "--end", "2026-11-24T06:18:21-05:00"],
     (utc(2026, 11, 24, 3, 18, 21), utc(2026, 11, 24, 11, 18, 21))),
    (["--start", "2026-11-24T08:00:00+02:00", "--end", "2026-11-24T06:30:00Z"],
     (utc(2026, 11, 24, 6, 0, 0), utc(2026, 11, 24, 6, 30, 0))),
    (["--start", "2026-07-01T12:00:00", "--end", "2026-07-01T13:00:00Z"],            # summer time elsewhere
     (utc(2026, 7, 1, 12), utc(2026, 7, 1, 13))),
    (["--end", "2026-11-24T06:18:21-05:00", "--since", "90m"],
     (utc(2026, 11, 24, 9, 48, 21), utc(2026, 11, 24, 11, 18, 21))),
    (["--start", "2020-01-01T00:00:00Z"], (utc(2020, 1, 1), NOW)),
    (["--since", "45m"], ("45m", NOW)),
]


@pytest.mark.parametrize("args,window", WINDOWS, ids=[" ".join(w[0]) for w in WINDOWS])
def test_prometheus_is_asked_for_the_window_in_utc_whatever_the_local_zone(tz, fake_prom, args, window):
    FakePrometheus.windows.clear()
    before = time.time()
    p = run_cli("--prometheus", fake_prom, "--timeout", "10", *args)
    after = time.time()
    one_line_error(p, f"{fake_prom}: no series in the window")
    assert FakePrometheus.windows, "no range query reached the server"
    start, end = FakePrometheus.windows[0]
    assert all(w == (start, end) for w in FakePrometheus.windows)     # every query, the same window
    want_start, want_end = window
    if want_end is NOW:
        assert before - 2 <= end <= after + 2, (end, before, after)
    else:
        assert end == want_end
    if want_start == "45m":
        assert start == end - 45 * 60
    else:
        assert start == want_start
