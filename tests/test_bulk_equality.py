"""The bulk path (polars, for big files) must produce the same evidence as the reference block
scanner that reads line by line (issue 8: findings identical; evidence asserted equal here)."""
from __future__ import annotations

import importlib
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))


def summary(ev):
    info = ev.inputs[0]
    return {
        "lines": info.lines, "recognised": info.recognised_lines, "unrecognised": info.unrecognised_lines,
        "unreadable": info.unreadable_lines,
        "facts": {k: f.value for k, f in ev.facts.items()},
        "counters": dict(sorted(ev.counters.items())),
        "event_counts": dict(sorted(ev.event_counts.items())),
        "events": {k: [(e.line, e.text) for e in v] for k, v in sorted(ev.events.items())},
        "stats": [{k: v for k, v in r.items()} for r in ev.stats_rows],
        "prefixes": (len(ev.prompt_prefixes), sum(ev.prompt_prefixes.values())),
    }


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    gen = importlib.import_module("generate_log")
    p = tmp_path_factory.mktemp("bulk") / "busy.log"
    gen.generate(str(p), 3_000_000, seed=5)
    data = p.read_bytes().splitlines(keepends=True)
    data.insert(500, b"\xff\xfe not utf-8 at all \xc3\x28\n")       # an unreadable line
    data.insert(900, b"\n")                                          # a blank line
    p.write_bytes(b"".join(data))
    return p


def test_bulk_path_gives_the_same_evidence_and_findings(generated, monkeypatch):
    from diagnose.pipeline import analyze
    from diagnose.sources import bulk, load, resolve
    monkeypatch.setattr(bulk, "FAST_MIN_BYTES", 10**15)
    ref_ev = load(resolve([str(generated)]))
    ref = analyze([str(generated)]).to_json()
    monkeypatch.setattr(bulk, "FAST_MIN_BYTES", 0)
    fast_ev = load(resolve([str(generated)]))
    fast = analyze([str(generated)]).to_json()
    a, b = summary(ref_ev), summary(fast_ev)
    for k in a:
        assert a[k] == b[k], k
    assert [f["id"] for f in ref["findings"]] == [f["id"] for f in fast["findings"]]
    assert ref["verdict"] == fast["verdict"]
