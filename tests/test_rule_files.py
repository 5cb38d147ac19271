"""Rule files are the public API (ids) and the documentation (docs generated from them)."""
from __future__ import annotations

import json
import re

import pytest

from conftest import FIXTURES, run_cli
from diagnose.ruleset.rules import DOC_SECTIONS, load_rules

ISSUE2_IDS = {
    "cuda-graphs-disabled", "tp-over-pcie", "tp-for-small-model", "over-parallelized-replicas",
    "cross-node-tensor-parallel", "nccl-socket-fallback", "kv-capacity-low", "batched-tokens-small",
    "gpu-memory-headroom", "prefix-caching-off", "kv-cache-pressure", "concurrency-cap",
    "client-bound", "queue-buildup", "prefill-bound", "cuda-oom", "engine-crash",
    "access-log-noise",
}


def test_core_rules_exist_with_their_public_ids():
    ids = {r.id for r in load_rules()}
    assert ISSUE2_IDS <= ids


# Ids the issues asked for beyond the catalogue (the catalogue names the rest).
ISSUE_IDS = {"tp-rank-imbalance",   # issue 4: "uneven load across TP ranks"
             "replica-imbalance", "replica-down"}   # issue 5: fleet rules


def test_every_rule_id_is_in_the_catalogue():
    catalogue = (FIXTURES / "rule-catalogue.md").read_text()
    listed = set(re.findall(r"`([a-z][a-z0-9-]+)`", catalogue)) | ISSUE_IDS
    for r in load_rules():
        assert r.id in listed, f"{r.id} is not a catalogue id"


def test_every_rule_carries_its_docs_and_lives_in_a_domain_folder():
    for r in load_rules():
        missing = [s for s in DOC_SECTIONS if not r.docs.get(s)]
        assert not missing, f"{r.id}: docs sections missing: {missing}"
        assert r.path.name == f"{r.id}.toml"
        assert r.domain in {"config", "runtime", "failures", "hygiene", "fleet", "sweeps", "disaggregated"}
        assert r.fixes, f"{r.id}: no fix"


def test_rules_command_lists_and_documents_every_rule():
    out = run_cli("rules").stdout.decode()
    for rid in ISSUE2_IDS:
        assert rid in out
    doc = run_cli("rules", "tp-for-small-model").stdout.decode()
    for heading in ("## What it detects", "## Why it hurts", "## Evidence", "## Fix", "## Fix risk",
                    "## Known false positives", "## References"):
        assert heading in doc
    bad = run_cli("rules", "no-such-rule")
    assert bad.returncode == 2 and b"unknown rule id" in bad.stderr


def test_an_edited_rule_file_takes_effect_on_the_next_run(tmp_path):
    """Parsed rule files are cached between runs (in the user's cache directory, by a digest of
    their text): a user who edits a rule sees the edit at once, and a cache that cannot be used
    only costs time."""
    import os
    import subprocess
    import sys

    from conftest import ROOT
    src = (ROOT / "rules" / "config" / "batched-tokens-small.toml").read_text(encoding="utf-8")
    mine = tmp_path / "mine"
    mine.mkdir()
    rule = mine / "batched-tokens-small.toml"
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    log = ROOT / "fixtures" / "seed003" / "realtime.log"

    def fix_titles():
        p = subprocess.run([sys.executable, "-m", "diagnose", "--format", "json", "--rules", str(mine), str(log)],
                           capture_output=True, env=env, timeout=120)
        assert p.returncode == 0, p.stderr.decode()
        return {f["id"]: f.get("fix_title") for f in json.loads(p.stdout)["findings"]}

    rule.write_text(src.replace('condition = "', 'condition = "True or '), encoding="utf-8")
    first = fix_titles()
    assert first["batched-tokens-small"] == "Raise --max-num-batched-tokens to 8192"
    assert (tmp_path / "cache" / "diagnose" / "rules-parsed-v1.json").exists()
    rule.write_text(src.replace('condition = "', 'condition = "True or ')
                    .replace('fix_title = "Raise', 'fix_title = "Now raise'), encoding="utf-8")
    assert fix_titles()["batched-tokens-small"] == "Now raise --max-num-batched-tokens to 8192"
    (tmp_path / "cache" / "diagnose" / "rules-parsed-v1.json").write_text("{not json")   # damaged: ignored
    assert fix_titles() == {**first, "batched-tokens-small": "Now raise --max-num-batched-tokens to 8192"}


# -- rule files are checked when they load ----------------------------------------------------------
def _user_rule(tmp_path, old: str, new: str, base: str = "config/tp-for-small-model.toml"):
    from conftest import ROOT
    mine = tmp_path / "mine"
    mine.mkdir(exist_ok=True)
    src = (ROOT / "rules" / base).read_text(encoding="utf-8")
    assert old in src
    path = mine / base.split("/")[-1]
    path.write_text(src.replace(old, new, 1), encoding="utf-8")
    lineno = src[: src.index(old)].count("\n") + 1
    return mine, path, lineno


def _refused(p, path, lineno, want: str):
    err = p.stderr.decode()
    assert p.returncode == 2 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert f"{path}:{lineno}:" in err and want in err, err


def test_a_misspelt_signal_name_is_refused_with_the_nearest_name(tmp_path):
    """`tensor_paralel_size` in a condition used to load, evaluate as unknown and leave the rule
    "not applicable" with exit 0: a rule that can never fire, and nothing said."""
    mine, path, lineno = _user_rule(tmp_path, "tensor_parallel_size > 1 and", "tensor_paralel_size > 1 and")
    p = run_cli("--rules", mine, FIXTURES / "seed003" / "realtime.log")
    _refused(p, path, lineno, "unknown signal `tensor_paralel_size` (did you mean `tensor_parallel_size`?)")


def test_a_misspelt_key_is_refused_with_the_nearest_key(tmp_path):
    mine, path, lineno = _user_rule(tmp_path, "\nconfidence = ", "\nconfidense = ")
    p = run_cli("--rules", mine, FIXTURES / "seed003" / "realtime.log")
    _refused(p, path, lineno + 1, "unknown key `confidense` (did you mean `confidence`?)")
    mine2, path2, lineno2 = _user_rule(tmp_path / "b" if (tmp_path / "b").mkdir() is None else tmp_path, "\nwhy = ", "\nwhy_it_hurts = ")
    p2 = run_cli("--rules", mine2, FIXTURES / "seed003" / "realtime.log")
    _refused(p2, path2, lineno2 + 1, "unknown key `why_it_hurts` in `docs`")


def test_a_misspelt_scope_is_refused_with_the_nearest_scope(tmp_path):
    mine, path, lineno = _user_rule(tmp_path, '\nscope = "fleet"', '\nscope = "fleets"', base="fleet/replica-down.toml")
    p = run_cli("--rules", mine, FIXTURES / "seed003" / "realtime.log")
    _refused(p, path, lineno + 1, "scope must be one of replica, fleet, disaggregated (did you mean `fleet`?)")


@pytest.mark.parametrize("scope", ["fleet", "replica"])
def test_the_scope_key_not_the_folder_says_whether_a_rule_reads_the_fleet(tmp_path, scope):
    """A user's copy of replica-imbalance, in a folder of any name: with `scope = "fleet"` it is
    judged on the replicas side by side and fires; as a per-replica rule its fleet signals are
    unknown on every replica, so it never fires."""
    from conftest import ROOT
    mine = tmp_path / "my-rules"
    mine.mkdir()
    src = (ROOT / "rules" / "fleet" / "replica-imbalance.toml").read_text(encoding="utf-8")
    assert '\nscope = "fleet"' in src
    src = src.replace('id = "replica-imbalance"', 'id = "my-imbalance"').replace('\nscope = "fleet"', f'\nscope = "{scope}"')
    (mine / "my-imbalance.toml").write_text(src, encoding="utf-8")
    p = run_cli("--rules", mine, "--format", "json", FIXTURES / "rules" / "replica-imbalance" / "fires.prom")
    assert p.returncode == 0, p.stderr.decode()
    out = json.loads(p.stdout)
    fired = {r["instance"]: [f["id"] for f in r["findings"]] for r in out["analyses"] + [out["fleet"]]}
    assert "replica-imbalance" in fired["fleet"]
    if scope == "fleet":
        assert "my-imbalance" in fired["fleet"]
    assert not any("my-imbalance" in ids for inst, ids in fired.items() if scope == "replica" or inst != "fleet")


def test_rules_signals_lists_every_name_the_rules_use_with_unit_and_source():
    import ast
    out = run_cli("rules", "--signals").stdout.decode()
    listed = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    used = set()
    for r in load_rules():
        trees = [r.condition, *r.templates.values(), *(t for t, _ in r.severity_if), *(t for t, _ in r.confidence_if)]
        used |= {n.id for t in trees for n in ast.walk(t) if isinstance(n, ast.Name)} | set(r.requires)
        used -= set(r.params)
    from diagnose.ruleset.expr import FUNCS, SPECIAL
    used -= set(FUNCS) | set(SPECIAL)
    assert used <= set(listed), sorted(used - set(listed))
    assert "s  ·  engine log / metrics" in listed["ttft_p95_s"] and "fact" in listed["tensor_parallel_size"]
    assert "GPU samples" in listed["gpu_util_spread"] and "--targets" in listed["target_tpot_s"]


def test_every_signal_the_signals_layer_gives_is_catalogued():
    """Diagnosing the fixtures (and the inputs only a live Prometheus or a targets file give)
    yields no signal missing from diagnose/data/signals.toml: a new signal is catalogued
    (scripts/signal-catalogue) before a rule can name it."""
    import runpy
    from conftest import ROOT
    from diagnose.ruleset.rules import signal_catalogue
    collect = runpy.run_path(str(ROOT / "scripts" / "signal-catalogue"))["collect"]
    names = {n for n in collect(skip=("real", "samples")) if re.fullmatch(r"[a-z_][a-z0-9_]*", n)}
    missing = sorted(names - set(signal_catalogue()))
    assert not missing, f"not in diagnose/data/signals.toml (run scripts/signal-catalogue): {missing}"
