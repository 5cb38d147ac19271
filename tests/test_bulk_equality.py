"""The bulk path (for big inputs: the C reader, or the Python one where C was not built) must produce
the same evidence as the reference block scanner that reads line by line (issue 8: findings
identical; evidence asserted equal here), for a plain file, a gzip file and stdin. Every test runs
on both bulk paths (`bulk_engine`)."""
from __future__ import annotations

import gzip
import importlib
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, engine_env, evidence_summary, wrapped_dump_log, one

sys.path.insert(0, str(ROOT / "bench"))


summary = evidence_summary


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    gen = importlib.import_module("generate_log")
    p = tmp_path_factory.mktemp("bulk") / "busy.log"
    gen.generate(str(p), 3_000_000, seed=5)
    data = p.read_bytes().splitlines(keepends=True)
    data.insert(500, b"\xff\xfe not utf-8 at all \xc3\x28\n")       # an unreadable line
    data.insert(900, b"\n")                                          # a blank line
    data[1200] = data[1200].replace(b"\n", b"\r\n")                    # a Windows line end
    data[-1] = data[-1].rstrip(b"\n")                                   # no newline at the end
    p.write_bytes(b"".join(data))
    return p


def test_bulk_path_gives_the_same_evidence_and_findings(generated, monkeypatch, bulk_engine):
    from diagnose.pipeline import analyze
    from diagnose.sources import load, resolve
    from diagnose.sources.readers import bulk
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


def _load(path, monkeypatch, bulk_min):
    from diagnose.sources import load, resolve
    from diagnose.sources.readers import bulk
    monkeypatch.setattr(bulk, "FAST_MIN_BYTES", bulk_min)
    return summary(load(resolve([str(path)])))


def test_gzip_input_gives_the_same_evidence_block_by_block(generated, tmp_path, monkeypatch, bulk_engine):
    gz = tmp_path / "busy.log.gz"
    gz.write_bytes(gzip.compress(generated.read_bytes(), compresslevel=1))
    def unnamed(s):     # stats rows and events cite the file's name
        return {**s, "stats": [{k: v for k, v in r.items() if k != "source"} for r in s["stats"]]}
    ref = unnamed(_load(generated, monkeypatch, 10**15))   # the plain file, line by line
    slow = unnamed(_load(gz, monkeypatch, 10**15))         # the gzip file, line by line
    fast = unnamed(_load(gz, monkeypatch, 0))              # the gzip file, bulk blocks
    assert ref["lines"] > 3000
    for k in ref:
        assert ref[k] == slow[k] == fast[k], k


def _cli_json(args, bulk_min, stdin=None, data=None, engine="native"):
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", DIAGNOSE_BULK_MIN_BYTES=str(bulk_min),
               **engine_env(engine))
    p = subprocess.run([sys.executable, "-m", "diagnose", "--format", "json", *args], env=env, cwd=ROOT,
                       stdin=stdin, input=data, capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    return one(p.stdout)


@pytest.mark.parametrize("engine", ["native", "python"])
@pytest.mark.parametrize("how", ["pipe", "redirect"])
def test_stdin_gives_the_same_report_as_the_file(generated, how, engine):
    """`kubectl logs … | diagnose -` (a pipe: bulk blocks) and `diagnose - < big.log` (stdin is
    the file: read by the streaming query, as the file is)."""
    ref = _cli_json([str(generated)], 10**15)
    if how == "pipe":
        piped = _cli_json(["-"], 4096, data=generated.read_bytes(), engine=engine)
    else:
        with open(generated, "rb") as fh:
            piped = _cli_json(["-"], 4096, stdin=fh, engine=engine)
    text = json.dumps(piped).replace("<stdin>", str(generated))
    ref.pop("generated", None)
    out = json.loads(text)
    out.pop("generated", None)
    assert [f["id"] for f in out["findings"]] == [f["id"] for f in ref["findings"]]
    assert [[e.get("line") for e in f.get("evidence", [])] for f in out["findings"]] == \
        [[e.get("line") for e in f.get("evidence", [])] for f in ref["findings"]]
    assert out["verdict"] == ref["verdict"]


@pytest.mark.parametrize("engine", ["native", "python"])
def test_stdin_left_part_read_by_the_shell_is_read_from_where_it_stands(generated, tmp_path, engine):
    """`{ read -r first; diagnose -; } < big.log`: only the lines after the first are diagnosed,
    big or small (the file behind stdin is not re-read from its start)."""
    data = generated.read_bytes()
    cut = data.index(b"\n", len(data) // 2) + 1
    rest = tmp_path / "rest.log"
    rest.write_bytes(data[cut:])
    ref = _cli_json([str(rest)], 10**15)
    for bulk_min in (4096, 10**15):
        with open(generated, "rb") as fh:
            fh.seek(cut)
            out = _cli_json(["-"], bulk_min, stdin=fh, engine=engine)
        assert out["inputs"][0]["lines"] == ref["inputs"][0]["lines"] == len(data[cut:].splitlines())
        assert [f["id"] for f in out["findings"]] == [f["id"] for f in ref["findings"]]


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_damaged_big_gzip_is_one_line_and_exit_2(generated, tmp_path, engine):
    gz = tmp_path / "cut.log.gz"
    gz.write_bytes(gzip.compress(generated.read_bytes(), compresslevel=1)[:-4000])
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", DIAGNOSE_BULK_MIN_BYTES="4096", **engine_env(engine))
    p = subprocess.run([sys.executable, "-m", "diagnose", str(gz)], env=env, cwd=ROOT, capture_output=True,
                       timeout=300)
    err = p.stderr.decode().strip()
    assert p.returncode == 2
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert "cut.log.gz" in err and "gzip" in err


PROMPTS = [
    # (prompt repr as vLLM logs it, closing text)
    "'short one', params: SamplingParams(n=1)",
    "'short one', params: SamplingParams(n=2)",                         # same head as above
    "'" + "x" * 300 + "', params: SamplingParams(n=1)",                 # no closer within 256
    "'" + "x" * 250 + "', params: SamplingParams(n=1)",                 # closer at 250
    "'" + "x" * 255 + "y', params: S",                                  # closer at 256: cut at 256
    "'v0 style', sampling_params: SamplingParams(n=1)",                 # V0
    "\"it's double-quoted\", params: SamplingParams(n=1)",
    "'é ünïcode ☃ " + "ü" * 200 + "', params: SamplingParams(n=1)",    # bytes, not characters
    "None, params: SamplingParams(n=1), prompt_token_ids: [1, 2]",       # no text prompt
    "'",                                                                # the quote ends the line
    "'unterminated " + "z" * 400,
]


@pytest.mark.parametrize("prefix", ["", "2026-11-20T09:03:00.123456789Z (APIServer pid=7) "])
@pytest.mark.parametrize("rid", ["cmpl-", "cmpl-ñü☃-"])        # bytes before the prompt differ from characters
def test_prompt_heads_are_cut_the_same_way(tmp_path, monkeypatch, prefix, rid, bulk_engine):
    lines = [f"{prefix}INFO 11-20 09:03:{i % 60:02d} [logger.py:40] Received request {rid}{i}: prompt: {p}\n"
             for i, p in enumerate(PROMPTS * 3)]
    f = tmp_path / "heads.log"
    f.write_text("".join(lines), encoding="utf-8")
    ref, fast = _load(f, monkeypatch, 10**15), _load(f, monkeypatch, 0)
    assert ref["prefixes"] == fast["prefixes"]
    assert sum(ref["prefixes"].values()) == 3 * (len(PROMPTS) - 1)       # all but the `None` prompt
    assert len(ref["prefixes"]) == len(PROMPTS) - 2                      # the two `short one` agree


def test_a_wrapped_dump_is_followed_on_the_bulk_path_too(tmp_path, monkeypatch, bulk_engine):
    """A paste that wrapped SGLang's `ServerArgs(...)` over many lines: the continuation lines hold
    no keyword, and both paths must still hand them to the parser that asked for them."""
    f, out = wrapped_dump_log(tmp_path)
    ref, fast = _load(f, monkeypatch, 10**15), _load(f, monkeypatch, 0)
    from diagnose.sources.readers.scanner import GREP_KEYWORDS
    assert sum(1 for line in out if not any(k in line for k in GREP_KEYWORDS)) > 5   # lines only `follow` reaches
    assert len(ref["facts"]) >= 5          # the dump was read: model, parallelism, memory settings …
    for k in ref:
        assert ref[k] == fast[k], k


def test_a_full_prompt_table_keeps_the_same_heads(generated, monkeypatch, bulk_engine):
    """Past MAX_PREFIXES distinct heads, further ones are only counted: both paths must keep the
    same heads (first seen first) and count the same overflow."""
    from diagnose.sources.readers import bulk, segments
    from diagnose.sources.engines import common as common_lines
    monkeypatch.setattr(common_lines, "MAX_PREFIXES", 40)
    monkeypatch.setattr(segments, "MAX_PREFIXES", 40)
    from diagnose.sources import load, resolve
    monkeypatch.setattr(bulk, "FAST_MIN_BYTES", 10**15)
    ref = load(resolve([str(generated)]))
    monkeypatch.setattr(bulk, "FAST_MIN_BYTES", 0)
    fast = load(resolve([str(generated)]))
    assert len(ref.prompt_prefixes) == 40 and ref.counters.get("prompt_prefixes_overflow", 0) > 0
    assert fast.prompt_prefixes == ref.prompt_prefixes
    assert fast.counters.get("prompt_prefixes_overflow") == ref.counters.get("prompt_prefixes_overflow")


def test_lines_holding_the_separator_byte(generated, tmp_path, monkeypatch, bulk_engine):
    """A log line that holds the unit-separator byte 0x1F (first in the file, and further on; a
    CSV-based reader would split there) must neither crash a bulk path nor shift any count."""
    lines = generated.read_bytes().splitlines(keepends=True)
    lines.insert(0, b"INFO 11-20 09:00:00 [x.py:1] unit\x1fseparator in the first line\n")
    lines.insert(2000, b"INFO 11-20 09:05:00 [x.py:1] another \x1f one, with an Error after it\n")
    f = tmp_path / "sep.log"
    f.write_bytes(b"".join(lines))
    gz = tmp_path / "sep.log.gz"
    gz.write_bytes(gzip.compress(f.read_bytes(), compresslevel=1))
    ref = _load(f, monkeypatch, 10**15)
    for fast in (_load(f, monkeypatch, 0), _load(gz, monkeypatch, 0)):
        for k in ("lines", "unreadable", "counters", "event_counts", "prefixes"):
            assert ref[k] == fast[k], k
