"""The labelled corpus of complete real logs (fixtures/real/corpus.toml): what an operator reading
each log expects the tool to say (`must`), what would be wrong (`must_not`), the acceptable
verdicts and the deployment facts. Labels come from reading the logs; bench/score_corpus.py
prints the same figures per rule and per engine."""
from __future__ import annotations

import re
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import score_corpus as sc  # noqa: E402

# Kept for an independent evaluation: no log may come from these repositories (a copy of the
# team's list, ../shared/corpus/reserved-repos.txt; `owner/*` is every repository of that owner).
RESERVED = [ln.strip().lower() for ln in (ROOT / "fixtures" / "real" / "reserved-repos.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]


def reserved(repo: str) -> bool:
    repo = repo.lower()
    return any(repo == r or (r.endswith("/*") and repo.startswith(r[:-1])) for r in RESERVED)


CASES = sc.load_cases()


@pytest.fixture(scope="module")
def results():
    return sc.run_all()


def test_corpus_is_large_and_varied():
    engines = [c["engine"] for c in CASES]
    assert len(CASES) >= 95
    assert len({c["source"].split()[0].lower() for c in CASES}) >= 70      # repositories
    assert engines.count("vllm") >= 30
    assert engines.count("sglang") >= 15
    # logs inside something else: a job's output, a script's banner, a container's, a paste
    assert sum(not str(c.get("wrapper", "none")).startswith("none") for c in CASES if "wrapper" in c) >= 15


def test_the_reserved_list_is_read():
    assert reserved("dennislee22/anything") and reserved("vllm-project/production-stack")
    assert not reserved("vllm-project/vllm")


def test_corpus_has_six_tensorrt_llm_logs():
    assert [c["engine"] for c in CASES].count("tensorrt-llm") >= 6


def test_every_case_is_complete_and_from_an_allowed_repository():
    from diagnose.ruleset.rules import RETIRED_IDS, load_rules
    ids = {r.id for r in load_rules()} | set(RETIRED_IDS)
    for c in CASES:
        for p in sc.case_paths(c):
            assert p.is_file(), f"missing {p}"
        repo = c["source"].split()[0]
        assert not reserved(repo), f"{c.get('file')}: {repo} is kept for independent evaluation"
        assert re.search(r"\([0-9a-f]{40}\)$", c["source"]), f"{c.get('file')}: source needs the commit"
        # a whole file; its first 2 MiB; or a server's output as its author published it in a
        # document's code block (whole, or with the author's own elision said in `content`)
        assert c["content"] in ("complete file", "complete log block") or c["content"].startswith(("first 2 MiB", "log block")), c["content"]
        for rid in c.get("must", []) + c.get("must_not", []):
            assert rid in ids, f"{c.get('file')}: unknown rule id {rid}"
        assert not set(c.get("must", [])) & set(c.get("must_not", [])), c.get("file")


def test_every_real_log_is_diagnosed(results):
    failed = [f"{r.file}: {r.error}" for r in results if r.error]
    assert not failed, failed


def test_recall_over_must_labels(results):
    t = sc.totals(results)
    missed = [f"{r.file}: {', '.join(r.missed)}" for r in results if r.missed]
    assert t["recall"] >= 0.90, f"recall {t['recall']:.3f}; missed: {missed}"


def test_no_must_not_fires(results):
    wrong = [f"{r.file}: {', '.join(r.false_alarms)}" for r in results if r.false_alarms]
    assert not wrong, wrong


def test_listed_verdicts_are_met(results):
    wrong = [f"{r.file}: {r.verdict} not in {r.verdicts_ok}" for r in results if not r.verdict_ok]
    assert not wrong, wrong


def test_a_stop_is_never_a_crash_nor_a_crash_a_stop(results):
    """Each labelled ending (read from the log: `stopped` by a signal, Ctrl-C, Slurm or a wrapper;
    `crashed`; `running` or `cut` when the file just ends) is what the report says: no critical
    engine-crash on a server that was simply stopped, in any engine's or vLLM generation's words."""
    labelled = [r for r in results if r.ending]
    assert sum(r.ending == "stopped" for r in labelled) >= 20 and sum(r.ending == "crashed" for r in labelled) >= 10
    wrong = [f"{r.file}: said {r.ended}, label {r.ending}" for r in labelled if not r.ending_ok]
    assert not wrong, wrong
    stopped_engines = {r.engine for r in labelled if r.ending == "stopped"}
    assert stopped_engines >= {"vllm", "sglang", "tensorrt-llm"}


def test_facts_are_right(results):
    t = sc.totals(results)
    wrong = [f"{r.file}: {k}={g!r} (label {v!r})" for r in results for k, v, g in r.facts_wrong]
    assert t["facts_share"] >= 0.95, wrong


def test_scorer_counts_a_miss_and_a_false_alarm():
    """The scorer itself: a case whose labels contradict the tool is reported, not passed."""
    case = next(c for c in CASES if "client-bound" in c.get("must", []))
    flipped = dict(case, must=["engine-crash"], must_not=["client-bound"], verdict=["idle"])
    r = sc.run_case(flipped)
    assert r.missed == ["engine-crash"] and r.false_alarms == ["client-bound"] and not r.verdict_ok


def test_readme_shows_the_current_score(results):
    """The README's accuracy tables are the scorer's output for this corpus, not a stale copy."""
    readme = (sc.ROOT / "README.md").read_text()
    block = readme.split(sc.README_START, 1)[1].split(sc.README_END, 1)[0].strip()
    assert block == sc.readme_block(results), "README accuracy tables are stale: python bench/score_corpus.py --update-readme"
