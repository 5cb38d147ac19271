"""The Python reader of big logs tallies a block a kind of line at a time (scanner._tally_block);
its segments are those of reading the block a line at a time (scanner._segment_lines), field for
field, on blocks that mix every kind of line in any order, with more of each kept kind than are
kept; and where C is built, both readers make the same evidence of such a log."""
from __future__ import annotations

import random

import pytest

from test_native_scanner import ACCESS, ANYWHERE_LINES, EDGE_LINES, REQ, _file, _native_or_skip, _summary

PROMPT = "(APIServer pid=7) INFO 11-20 09:03:0{s} [logger.py:40] Received request c-{i}: prompt: {q}{text}{end}\n"
def _readable(line: bytes) -> bool:
    try:
        return b"\x00" not in line and bool(line.decode("utf-8"))
    except UnicodeDecodeError:
        return False


# the edge lines but those the block tally leaves to the line reader (below)
MIXED = [line for line in EDGE_LINES + ANYWHERE_LINES if _readable(line) and b"caf\xc3\xa9" not in line] + [line.encode() for line in [
    # prompt heads: either quote, either end, an end past 256 bytes, none, a head cut by the line end
    PROMPT.format(s=1, i=1, q="'", text="short", end="', params: SamplingParams(n=1)"),
    PROMPT.format(s=1, i=2, q='"', text="it's quoted", end='", sampling_params: x'),
    PROMPT.format(s=2, i=3, q="'", text="x" * 300, end="', params: y"),
    PROMPT.format(s=2, i=4, q="'", text="y" * 250, end="', sampling_params: y, then ', params: z"),
    PROMPT.format(s=3, i=5, q="'", text="cut at the line end", end=""),
    PROMPT.format(s=3, i=6, q="", text="no quote", end=", params: x"),
    PROMPT.format(s=4, i=7, q="'", text="\u65e5\u672c\u8a9e \u00e9t\u00e9", end="', params: x"),
    "(APIServer pid=7) INFO 11-20 09:03:05 [a.py:1] prompt: 'before the marker', params: x ] Received request c-8\n",
    "(APIServer pid=7) INFO 11-20 09:03:05 [a.py:1] Received request c-9 and ] Received request c-10: prompt: 'two', params: x\n",
    # access lines: error statuses, refusals, probes answered 503 and 429, one after a near miss
    ACCESS.format(host="10.0.0.9:5000", method="POST", path="/v1/completions", status=502),
    ACCESS.format(host="10.0.0.9:5000", method="GET", path="/health", status=503),
    ACCESS.format(host="10.0.0.9:5000", method="GET", path="/v1/models", status=429),
    ACCESS.format(host="10.0.0.9:5000", method="GET", path="/ping", status=200),
    '(APIServer pid=7) INFO: x INFO:     10.0.0.9:1 - "POST /v1/chat/completions HTTP/1.1" 503 OK\n',
    '(APIServer pid=7) INFO:     10.0.0.9:1 - "GET /load HTTP/1.1" 500 OK and INFO:     10.0.0.9:1 - "GET /x HTTP/1.1" 200 OK\n',
    # keyword lines, one in another script, and lines with none
    "(APIServer pid=7) INFO 11-20 09:03:09 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s\n",
    "(EngineCore_DP0 pid=212) ERROR 11-20 09:03:09 [core.py:1] NCCL error: unhandled system error\n",
    "Loading safetensors checkpoint shards: 100% Completed | \u2588  model 2/2\n",
    "(APIServer pid=7) INFO 11-20 09:03:09 [x.py:1] \u00e9t\u00e9, nothing more\n",
    "plain words\n",
]]

BUSY = [ACCESS.format(host="10.0.0.1:5000", method="POST", path="/v1/completions", status=200).encode(),
        ACCESS.format(host="10.0.0.1:5000", method="GET", path="/metrics", status=200).encode(),
        REQ.format(s=1, verb="Added", i=1).encode(), REQ.format(s=1, verb="Received", i=1).encode()]


def _fields(seg):
    return {k: getattr(seg, k) for k in ("lines", "bad", "bad_lines", "acc", "req", "rcv", "probe", "refused",
                                         "status", "heads", "head_counts", "start", "end")} | {"rows": list(seg.rows)}


@pytest.mark.parametrize("keep", [1, 3, 20])
@pytest.mark.parametrize("seed", range(6))
def test_a_block_tallied_a_kind_at_a_time_is_the_block_read_a_line_at_a_time(seed, keep):
    from diagnose.sources.readers import scanner
    rng = random.Random(seed)
    lines = rng.choices(MIXED, k=rng.choice([1, 5, 400]))
    if seed % 2:
        # a busy server's: a few other lines among hundreds of counted ones
        lines = rng.choices(BUSY, k=600) + lines[:8]
        rng.shuffle(lines)
    block = b"".join(lines) + rng.choice([b"", b"\n", b"an Error\n"])
    assert scanner._bad_lines(block, 0) is None
    fast = scanner._tally_block(block, keep)
    assert fast is not None     # no line here needs the line-by-line reader
    slow = scanner._segment_lines(block, keep, True, scanner._KW, None)
    assert _fields(fast) == _fields(slow)
    assert _fields(scanner._segment(block, keep, True, scanner._KW)) == _fields(slow)


def test_what_the_block_tally_leaves_to_the_line_reader_is_read_the_same():
    """An unreadable line, or an access path with a non-ASCII or control byte: the block is read
    a line at a time."""
    from diagnose.sources.readers import scanner
    odd = [ACCESS.format(host="10.0.0.4:5000", method="GET", path=p, status=503).encode() for p in ("/caf\u00e9", "/x\x1cy")]
    for extra in [*odd, b"an Error \xc0\xaf\n", b"a NUL \x00 Error\n"]:
        block = b"".join(MIXED * 3) + extra + b"".join(MIXED)
        if scanner._bad_lines(block, 0) is None:
            assert scanner._tally_block(block, 5) is None
        slow = scanner._segment_lines(block, 5, True, scanner._KW, scanner._bad_lines(block, 0))
        assert _fields(scanner._segment(block, 5, True, scanner._KW)) == _fields(slow)


def test_the_c_and_python_readers_agree_on_a_log_of_every_kind_of_line(tmp_path, monkeypatch):
    """No unreadable line: the Python reader tallies its blocks a kind at a time."""
    _native_or_skip()
    lines = list(MIXED)
    random.Random(1).shuffle(lines)
    f = _file(tmp_path, lines, "mixed.log")
    a = _summary(f, monkeypatch, 0, True)
    b = _summary(f, monkeypatch, 0, False)
    assert (a.pop("reader"), b.pop("reader")) == ("native", "python")
    for k in a:
        assert a[k] == b[k], k
    # what a user reads off the report: error statuses, refusals, probes, prompts
    assert b["counters"]["status_503"] and b["counters"]["status_429"] and b["counters"]["requests_refused"]
    assert len(b["events"]["http_503"]) == 20 < b["event_counts"]["http_503"]
    assert b["counters"]["access_probe_lines"] > 20 and len(b["prefixes"]) > 5
