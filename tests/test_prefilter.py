"""Every line a parser understands holds one of the prefilter's keywords (readers/scanner.py
SHARED_KEYWORDS, each engine's `keywords` and `stop_hints`, each format's): a line without one
never reaches the parsers on any path, so a pattern whose keyword is missing is silently never
read. Here every complete real log and every rule fixture is read twice on the small-log path:
as shipped, and with every line handed to the parsers. The evidence must be the same."""
from __future__ import annotations

import re

import pytest

from conftest import FIXTURES, evidence_summary, small_path_reading

LOGS = sorted(p for d in ("real", "rules", "samples") for p in (FIXTURES / d).rglob("*")
              if p.is_file() and p.suffix in (".log", ".txt", ".out", ".err") and "incoming" not in p.parts
              and p.stat().st_size < 4 << 20)


def _read(path, monkeypatch, everything: bool):
    from diagnose.sources import InputError, load, loading, resolve
    from diagnose.sources.readers import bulk, scanner
    if not everything:
        return _summary(small_path_reading(path))     # as shipped: the run's one reading of it
    monkeypatch.setattr(bulk, "FAST_MIN_BYTES", 10**15)     # the small-log path: every line looked at
    real = scanner.segments
    monkeypatch.setattr(loading, "segments", lambda blocks, *a, **kw: real(blocks, *a, **{**kw, "keywords": re.compile(b"")}))
    try:
        return _summary(evidence_summary(load(resolve([str(path)]))))
    except InputError as e:
        return str(e)


def _summary(s):
    if isinstance(s, str):
        return s
    from diagnose.evidence.facts import CATALOGUE
    # (and every fact a reader set is declared in the fact catalogue, data/facts.toml)
    undeclared = set(s["facts"]) - set(CATALOGUE)
    assert not undeclared, f"facts not in diagnose/data/facts.toml: {sorted(undeclared)}"
    return {"facts": s["facts"], "events": s["event_counts"], "stats": len(s["stats"])}


def test_there_are_logs():
    assert len(LOGS) >= 150


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_line_a_parser_reads_lacks_its_keyword(path, monkeypatch):
    shipped = _read(path, monkeypatch, everything=False)
    handed_all = _read(path, monkeypatch, everything=True)
    if isinstance(shipped, str) or isinstance(handed_all, str):
        assert shipped == handed_all
        return
    for part in ("facts", "events", "stats"):
        assert shipped[part] == handed_all[part], (
            f"{part}: lines a parser reads but the prefilter never hands on — add their keyword")
