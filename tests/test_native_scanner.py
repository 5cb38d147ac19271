"""The C scanner (diagnose/sources/readers/native): lines at the edges of what it decides itself, and what
it takes to be used (built from this scan.c, its structures as Python mirrors them). How it is
built at install, and an install without a compiler: tests/test_packaging.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, wrapped_dump_log, report

ACCESS = '(APIServer pid=7) INFO:     {host} - "{method} {path} HTTP/1.1" {status} OK\n'
REQ = ("(APIServer pid=7) INFO 11-20 09:03:{s:02d} [logger.py:40] {verb} request cmpl-{i}: "
       "prompt: 'tell me {i}', params: SamplingParams(n=1)\n")

EDGE_LINES = [line.encode() for line in [
    ACCESS.format(host="10.0.0.1:5000", method="POST", path="/v1/completions", status=200),
    ACCESS.format(host="[::1]:8000", method="GET", path="/health?full=1", status=200),       # IPv6, probe with query
    ACCESS.format(host="10.0.0.2:5000", method="POST", path="/v1/chat/completions", status=503),
    ACCESS.format(host="10.0.0.2:5000", method="POST", path="/v1/chat/completions", status=429),
    ACCESS.format(host="10.0.0.3:1", method="GET", path="/metrics", status=500),             # probe and 5xx
    ACCESS.format(host="10.0.0.4:5000", method="GET", path="/caf\u00e9", status=404),      # non-ASCII path: left to Python
    ACCESS.format(host="h\u00f6st:5000", method="GET", path="/x", status=200),             # non-ASCII host
    '(APIServer pid=7) INFO:     10.0.0.6:http - "GET /x HTTP/1.1" 200 OK\n',               # port not a number
    '(APIServer pid=7) INFO:     10.0.0.7:5000 - "get /x HTTP/1.1" 200 OK\n',               # lower-case method
    '(APIServer pid=7) INFO:     10.0.0.8:5000 - "GET /x HTTP/1.1" 2000 OK\n',              # four digits: 200
    REQ.format(s=1, verb="Received", i=1),
    REQ.format(s=2, verb="Added", i=1),
    REQ.format(s=3, verb="Finished", i=1),
    REQ.format(s=4, verb="Aborted", i=2),
    REQ.format(s=5, verb="Received", i=3).replace("tell me", 'quoting INFO:     1.2.3.4:5 - "GET /health HTTP/1.1" 500 OK'),
    "(APIServer pid=7) INFO 11-20 09:03:06 [logger.py:40] Received request cmpl-9: prompt: '\u00e9t\u00e9 \u2603', params: x\n",
    "INFO 11-20 09:03:08 [engine.py:1] a unit separator \x1f then an Error\n",
    "INFO 11-20 09:03:09 [engine.py:1] Windows line end, an Error\r\n",
    "\n",
    "nothing to see here\n",
]] + [
    b"INFO 11-20 09:03:07 [engine.py:1] overlong \xc0\xaf, an Error\n",
    b"INFO 11-20 09:03:07 [engine.py:1] surrogate \xed\xa0\x80, an Error\n",
    b"INFO 11-20 09:03:07 [engine.py:1] past U+10FFFF \xf4\x90\x80\x80, an Error\n",
    b"INFO 11-20 09:03:07 [engine.py:1] an Error cut short at the end \xe2\x82\n",
    b"INFO 11-20 09:03:07 [engine.py:1] a NUL \x00, an Error\n",
]
# The literals C looks for, after near misses, and later in a line than another match. The bulk
# paths find access and request patterns anywhere in a line, the line path at a message's start
# (README, known differences): C must read these as the Python reader's patterns do.
ANYWHERE_LINES = [line.encode() for line in [
    "(APIServer pid=7) INFO 11-20 09:03:06 [a.py:1]x] Added request q-1 then [b.py:2] Received request q-2: promptx: "
    "prompt 'a' prompt: 'the head', params: x\n",
    "(APIServer pid=7) INFO 11-20 09:03:06 [a.py:1]] Received request q-3: prompt: 'cut at the end\n",
    '(APIServer pid=7) INFOx INFO INFO:     10.0.0.9:5000 - "GET /health HTTP/1.1" 200 OK\n',
    "(APIServer pid=7) an Error, and INFO: at the very end INFO:\n",
]]
# Bytes a regex over text classifies otherwise than one over bytes: both readers leave these
# lines to the parsers, which read them as the line-by-line path does.
UNSURE_LINES = [
    "INFO 11-20 09:03:07 [engine.py:1] a real \ufffd replacement character, with an Error\n".encode(),
    ACCESS.format(host="10.0.0.5:5000", method="GET", path="/x\x1cy", status=200).encode(),   # Python's \s has 0x1C
]

# A NUL in a file's first 64 KB sends it to the line path (binary input): files of edge lines
# start with plain ones, so that the bulk paths read them.
PREAMBLE = b"(APIServer pid=7) INFO 11-20 09:02:00 [x.py:1] warming up\n" * 1300


def _file(tmp_path, lines, name):
    body = b"".join(lines)
    long_line = b"INFO 11-20 09:04:00 [x.py:1] a long Error line " + b"y" * (9 << 20) + b"\n"   # > two blocks
    p = tmp_path / name
    p.write_bytes(PREAMBLE + body * 40 + long_line + body * 3 + b"INFO 11-20 09:05:00 [x.py:1] last Error, no newline")
    return p


def _summary(path, monkeypatch, bulk_min, native):
    """What a report is made of; "reader": which read the file (line: the small-log path, native or
    python: the readers of big logs)."""
    from diagnose.sources import load, loading, resolve
    from diagnose.sources.readers import bulk
    from diagnose.sources.readers.native import stream
    monkeypatch.setattr(bulk, "FAST_MIN_BYTES", bulk_min)
    monkeypatch.setattr(bulk, "USE_NATIVE", native)
    used = []
    producer, segments = stream.Producer, loading.segments
    monkeypatch.setattr(stream, "Producer", lambda *a, **k: (used.append("native"), producer(*a, **k))[1])
    monkeypatch.setattr(loading, "segments", lambda *a, **k: (used.append("python" if k.get("tally", True) else "line"),
                                                              segments(*a, **k))[1])
    ev = load(resolve([str(path)]))
    info = ev.inputs[0]
    # (not the lines understood: the big-log readers estimate it from samples, coverage.py)
    return {"reader": used[0], "lines": info.lines, "unreadable": info.unreadable_lines,
            "counters": ev.counters, "event_counts": ev.event_counts,
            "events": {k: [(e.line, e.text) for e in v] for k, v in ev.events.items()},
            "prefixes": ev.prompt_prefixes}


def _native_or_skip():
    from diagnose.sources.readers import native
    if native.load() is None:
        pytest.skip(f"C scanner not available here: {native.why_not}")


def test_edge_lines_are_read_as_the_line_by_line_path_reads_them(tmp_path, monkeypatch):
    _native_or_skip()
    f = _file(tmp_path, EDGE_LINES + UNSURE_LINES, "edges.log")
    ref = _summary(f, monkeypatch, 10**15, True)
    for native in (True, False):
        fast = _summary(f, monkeypatch, 0, native)
        assert (ref["reader"], fast.pop("reader")) == ("line", "native" if native else "python")
        for k in fast:
            assert ref[k] == fast[k], k
    # what a user reads off the report: unreadable lines, error statuses, probes, prompts
    assert fast["unreadable"] == 5 * 43
    assert fast["counters"]["status_503"] == fast["counters"]["status_429"] == 43
    assert fast["counters"]["access_probe_lines"] == 2 * 43
    assert len(fast["events"]["http_500"]) == 20 and fast["event_counts"]["http_500"] == 43
    assert len(fast["prefixes"]) == 3 and sum(fast["prefixes"].values()) == 3 * 43


def test_the_c_and_python_readers_agree_on_the_edge_lines(tmp_path, monkeypatch):
    _native_or_skip()
    f = _file(tmp_path, EDGE_LINES + ANYWHERE_LINES + UNSURE_LINES, "edges.log")
    a = _summary(f, monkeypatch, 0, True)
    b = _summary(f, monkeypatch, 0, False)
    assert (a.pop("reader"), b.pop("reader")) == ("native", "python")
    for k in a:
        assert a[k] == b[k], k


@pytest.mark.parametrize("end", [b"no newline at the end", b""])
@pytest.mark.parametrize("cuts", [[1], [7, 8, 9], [4096], [50, 51, 5000], [3, 100_000]])
def test_blocks_cut_anywhere_become_whole_lines(cuts, end):
    """Empty blocks included (a UTF-16 decoder's last block is empty): no line is made of them."""
    from diagnose.sources.readers.scanner import line_runs
    data = b"".join(b"line %d " % i + b"x" * (i % 300) + b"\n" for i in range(2000)) + end
    blocks, at = [b""], 0
    for c in cuts + [len(data)]:
        blocks += [data[at:c], b""]
        at = c
    segs = list(line_runs(iter(blocks)))
    joined = b"".join(buf[s:e] for buf, s, e, _ in segs)
    assert joined == (data + b"\n" if end else data)
    assert all(buf[e - 1:e] == b"\n" for buf, s, e, _ in segs)
    assert not any(cut for *_, cut in segs)


def _run(args, env, cwd=ROOT):
    return subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True, timeout=300)


def test_nothing_is_compiled_or_written_when_diagnose_runs(tmp_path):
    """The library is built at install: a run that reads a big log with it calls no compiler (CC
    is a script that would leave a mark) and writes nothing in the cache."""
    _native_or_skip()
    mark = tmp_path / "compiler-was-called"
    cc = tmp_path / "cc"
    cc.write_text(f"#!/bin/sh\ntouch {mark}\nexit 1\n")
    cc.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"), CC=str(cc),
               PATH=f"{tmp_path}:{os.environ.get('PATH', '')}", NO_COLOR="1")
    p = _run(["-m", "diagnose.sources.readers.native"], env)
    assert p.stdout.decode().startswith("C scanner: /"), p.stdout.decode() + p.stderr.decode()
    big = _file(tmp_path, EDGE_LINES, "edges.log")
    r = _run(["-m", "diagnose", "--format", "json", str(big)], dict(env, DIAGNOSE_BULK_MIN_BYTES="0"))
    assert r.returncode == 0 and r.stderr == b"", r.stderr.decode()
    assert not mark.exists()
    assert not [f for f in (tmp_path / "cache").rglob("*") if f.suffix == ".so"]


@pytest.fixture
def fresh_load(monkeypatch):
    """load() as a new run would do it, with this module's state restored afterwards."""
    from diagnose.sources.readers import native
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setattr(native, "why_not", None)
    return native


def test_a_library_built_from_another_scan_c_is_not_used(tmp_path, monkeypatch, fresh_load):
    """An edited scan.c in a checkout: the old library would scan with old code, so it is refused
    and the message says how to build it again."""
    _native_or_skip()
    fresh_load._state.clear()
    edited = tmp_path / "scan.c"
    edited.write_bytes(fresh_load.SOURCE.read_bytes() + b"/* an edit */\n")
    monkeypatch.setattr(fresh_load, "SOURCE", edited)
    assert fresh_load.load() is None
    assert "built from another scan.c" in fresh_load.why_not and "--build" in fresh_load.why_not


def test_a_library_whose_structures_differ_is_not_used(monkeypatch, fresh_load):
    _native_or_skip()
    fresh_load._state.clear()
    monkeypatch.setattr(fresh_load, "LAYOUT", (*fresh_load.LAYOUT[:2], fresh_load.LAYOUT[2] + 8, *fresh_load.LAYOUT[3:]))
    assert fresh_load.load() is None and "structures differ" in fresh_load.why_not


def test_an_install_without_the_library_says_why(tmp_path, monkeypatch, fresh_load):
    monkeypatch.setattr(fresh_load, "LIBRARY", tmp_path / "libscan.so")
    monkeypatch.delenv("DIAGNOSE_NATIVE", raising=False)
    assert fresh_load.load() is None
    assert "not built when diagnose was installed" in fresh_load.why_not and "reinstall" in fresh_load.why_not


def _wrapped_dump_log(tmp_path):
    return wrapped_dump_log(tmp_path)[0]


STATS_LINE = ("(APIServer pid=7) INFO 11-20 09:04:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: {p}.5 "
              "tokens/s, Avg generation throughput: 20.0 tokens/s, Running: {r} reqs, Waiting: 0 reqs, GPU KV cache "
              "usage: 5.0%, Prefix cache hit rate: 0.0%\n")


def _small_edges(tmp_path):
    long_line = b"INFO 11-20 09:04:00 [x.py:1] a long Error line " + b"y" * 5000 + b"\n"
    p = tmp_path / "small-edges.log"
    # stats lines C reads among them, alone and in a row (their copies: native.TEXT_BYTES)
    stats = [STATS_LINE.format(s=i, p=i, r=i % 4).encode() for i in range(6)]
    body = b"".join(EDGE_LINES[:4] + stats[:1] + EDGE_LINES[4:] + stats[1:] + UNSURE_LINES)
    p.write_bytes(PREAMBLE + body * 3 + long_line + body + b"INFO 11-20 09:05:00 [x.py:1] last Error, no newline")
    return p


# text_bytes: C's copies of the rows' lines per segment (none, some, all of them; the rest read again)
@pytest.mark.parametrize("range_bytes,read_bytes,text_bytes", [(1000, 300, 0), (4099, 64, 700), (7, 4096, 1 << 20)])
@pytest.mark.parametrize("make", [_small_edges, _wrapped_dump_log])
def test_a_plain_file_cut_into_ranges_reads_as_one_file(tmp_path, monkeypatch, make, range_bytes, read_bytes,
                                                        text_bytes):
    """Big plain files are read by C itself, in byte ranges on every core, through a small buffer:
    lines cut by a range's end or longer than the buffer, and a dump a parser follows across
    ranges, must come out as the line-by-line path reads them, whether C kept a copy of a line
    or the parsers read it again from the file."""
    _native_or_skip()
    from diagnose.sources.readers import native
    from diagnose.sources.readers.native import stream
    f = make(tmp_path)
    ref = _summary(f, monkeypatch, 10**15, True)
    monkeypatch.setattr(stream, "RANGE_BYTES", range_bytes)
    monkeypatch.setattr(native, "READ_BYTES", read_bytes)
    monkeypatch.setattr(native, "TEXT_BYTES", text_bytes)
    native._buffers.__dict__.pop("read", None)      # this thread's buffer, from an earlier test
    fast = _summary(f, monkeypatch, 0, True)
    assert f.stat().st_size > 3 * range_bytes       # several ranges, and lines longer than the buffer
    assert (ref.pop("reader"), fast.pop("reader")) == ("line", "native")
    for k in ref:
        assert ref[k] == fast[k], k
    assert fast["lines"] > 40


def test_cpus_without_avx2_get_the_same_counts_and_prompt_keys(tmp_path):
    """The scanner takes AVX2 and carry-less multiplication where the CPU has them; the portable
    code must find the same lines and key prompts alike (DIAGNOSE_NO_AVX2 forces it)."""
    _native_or_skip()
    f = tmp_path / "prompts.log"
    lines = [f"INFO 11-20 09:03:{i % 60:02d} [logger.py:40] Received request cmpl-{i}: prompt: "
             f"'{'p' * (i % 300)}{i % 7}', params: SamplingParams(n=1)\n" for i in range(2000)]
    f.write_text("".join(lines + [ACCESS.format(host="1.2.3.4:5", method="GET", path="/health", status=200)] * 50))
    code = ("import json, sys; from diagnose.sources import load, resolve; from diagnose.sources.readers import bulk; bulk.FAST_MIN_BYTES = 0; "
            "ev = load(resolve([sys.argv[1]])); "
            "print(json.dumps([ev.inputs[0].lines, ev.counters, sorted(ev.prompt_prefixes.items())]))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    runs = [_run(["-c", code, str(f)], {**env, **extra}) for extra in ({}, {"DIAGNOSE_NO_AVX2": "1"})]
    outs = [json.loads(r.stdout) for r in runs]
    assert outs[0] == outs[1]
    # heads up to 256 bytes: distinct below that, one past it
    assert outs[0][0] == 2050 and len(outs[0][2]) > 1500 and outs[0][1]["access_probe_lines"] == 50


def test_several_big_logs_are_each_read_whole(tmp_path):
    """The first big log is started ahead of the set-up; the others when their turn comes: every
    one must be read whole, from a directory as from a list."""
    _native_or_skip()
    d = tmp_path / "logs"
    d.mkdir()
    for i in range(3):
        (d / f"replica-{i}.log").write_bytes(_small_edges(tmp_path).read_bytes() * (i + 1))
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    outs = []
    for bulk_min in ("0", str(10**15)):
        p = _run(["-m", "diagnose", "--format", "json", str(d)], dict(env, DIAGNOSE_BULK_MIN_BYTES=bulk_min))
        assert p.returncode == 0, p.stderr.decode()
        outs.append(sorted((i["path"], i["lines"], i["unreadable_lines"]) for a in [report(p.stdout)]
                           for i in a["inputs"]))
    assert outs[0] == outs[1]
    # the files end without a newline: each holds as many lines as newlines plus one
    assert [n for _, n, _ in outs[0]] == [f.read_bytes().count(b"\n") + 1 for f in sorted(d.iterdir())]


def test_the_small_input_path_flags_the_lines_the_keyword_regex_finds():
    """A small input is read whole, every line, the keyword lines to the parsers: C flags them
    (dg_keyword_flags) where it is built; the rows are the ones the regex gives, on every real log,
    every sample, and the edge lines (unreadable, NUL, long, non-ASCII)."""
    _native_or_skip()
    from diagnose.sources.readers import bulk, scanner
    from conftest import SAMPLES_DIR
    files = sorted((ROOT / "fixtures" / "real").glob("*.log")) + sorted(p for p in SAMPLES_DIR.rglob("*") if p.is_file())
    blocks = [p.read_bytes() for p in files] + [b"\n".join(EDGE_LINES + UNSURE_LINES)]
    flagged = 0
    for data in blocks:
        data = data if data.endswith(b"\n") else data + b"\n"
        c = scanner._segment(data, 10, False, scanner._KW)
        bulk.USE_NATIVE = False
        try:
            py = scanner._segment(data, 10, False, scanner._KW)
        finally:
            bulk.USE_NATIVE = True
        assert c.rows == py.rows
        flagged += len(c.rows)
    assert len(blocks) > 100 and flagged > 10_000


def test_a_stats_line_c_copied_is_the_files_line(tmp_path, monkeypatch):
    """C copies the stats lines it reads in a file range (up to native.TEXT_BYTES a segment) for
    the parsers' thread, which reads other lines again from the file: each copy is the file's
    line; past the cap a line has none and is read from the file."""
    _native_or_skip()
    import os

    from diagnose.sources.readers import native
    from diagnose.sources.readers.segments import ROW_KEYWORD, STATS_TEXT, STATS_WIDTH
    lines = [STATS_LINE.format(s=i % 60, p=i, r=i % 4).encode() for i in range(400)]
    f = tmp_path / "stats.log"
    f.write_bytes(PREAMBLE + b"".join(x + EDGE_LINES[i % 4] for i, x in enumerate(lines)))
    monkeypatch.setattr(native, "TEXT_BYTES", 20_000)      # room for ~90 of them
    fd = os.open(f, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        segs = native.scan_range(native.load(), fd, 0, size, size, 20, fd)
        copied = read_again = 0
        for seg in segs:
            assert len(seg.blob) <= 20_000
            for row in seg.rows:
                if row[0] != ROW_KEYWORD or not row[4]:
                    continue            # not a stats line C read (row[4] of an access line: its status)
                k = (row[4] - 1) * STATS_WIDTH
                at = int(seg.rows.stats[k + STATS_TEXT])
                assert seg.text(row[2], row[3], at) == os.pread(fd, row[3] - row[2], row[2])
                copied += at >= 0
                read_again += at < 0
    finally:
        os.close(fd)
    assert copied + read_again == len(lines) and copied > 50 and read_again > 50
