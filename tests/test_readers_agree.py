"""The small-log path (every keyword line parsed: the reference) and the readers of big logs — C,
and Python where C was not built — make the same evidence of every complete real log in the
corpus and of every vendored excerpt: the same line counts, facts, events, stats rows and prompt
heads. A line one
reader classifies differently (an HTTP/2 access line, a prompt quoting a traceback, a progress bar
redrawn with CRs before an access line, the empty last block of a UTF-16 file) shows here as the
file and the part of the evidence that differs; and the same launches (where each begins and ends)."""
from __future__ import annotations

import copy

import pytest

from conftest import FIXTURES, coverage_share, evidence_summary, small_path_reading

LOGS = sorted(p for d in ("real", "samples") for p in (FIXTURES / d).rglob("*")
              if p.is_file() and p.suffix not in (".toml", ".md", ".json") and "incoming" not in p.parts)


def test_the_corpus_is_there():
    assert sum(p.parent.name == "real" for p in LOGS) >= 50


def _read(path, monkeypatch, bulk_min):
    from diagnose.sources import InputError, load, resolve
    from diagnose.sources.loading import read_input
    from diagnose.sources.readers import bulk
    monkeypatch.setattr(bulk, "FAST_MIN_BYTES", bulk_min)
    try:
        inputs = resolve([str(path)])
        ev = load(inputs)
        # the line each launch begins at: a reader that counted a segment's access lines before
        # its launch lines were read split launches the others did not
        launches = [p.launch_line[0] if p.launch_line else None for inp in resolve([str(path)])
                    for p in read_input(inp).pieces]
        return {**evidence_summary(ev), "launches": launches, "share": coverage_share(ev)}
    except InputError as e:
        return str(e)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_reader_makes_the_same_evidence(path, monkeypatch, bulk_engine):
    # the small-log path never uses a bulk reader: read once a run, whichever reader is compared
    ref = copy.deepcopy(small_path_reading(path))
    got = _read(path, monkeypatch, 0)
    if isinstance(ref, str) or isinstance(got, str):
        assert ref == got
        return
    # The share of lines understood: exact on the small-log path, estimated from samples on the
    # others (lines they never hand on, without the context of the lines around them); within 15 points,
    # or 10 lines (a command's flags a parser reads as launch arguments are, to a shape, no engine line).
    gap = abs(ref.pop("share") - got.pop("share"))
    assert gap <= 0.15 or gap * ref["lines"] <= 10, (gap, ref["lines"])
    differ = [k for k in ref if ref[k] != got[k]]
    assert not differ, {k: (ref[k], got[k]) for k in differ if not isinstance(ref[k], (list, dict))} or differ
