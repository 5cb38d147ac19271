"""Per-line fast paths give what their plain form gives: a line's kind by shape (one search of every
shape at once, as coverage.classify did before it searched the floating shapes one by one, gated by
their literals) and a config dump split at its top-level commas (a character at a time)."""
from __future__ import annotations

import random

from conftest import FIXTURES

from diagnose.sources import coverage
from diagnose.sources.engines.kv import split_top


def _every_line():
    for path in sorted((FIXTURES / "real").glob("*.log")) + sorted((FIXTURES / "rules").glob("*/*.log")):
        yield from path.read_text(encoding="utf-8", errors="replace").split("\n")


def _classify_plain(text: str):
    if "\x1b" in text:
        text = coverage._ANSI.sub("", text)
    head = text[:240]
    p = coverage._PREFIX.match(head)
    rest = head[p.end():] if p else head
    m = coverage._CLASSIFY.search(rest)
    if m is None:
        return coverage.SHARED if p and p.group("proc") and rest.strip() else None
    return m.lastgroup


def test_a_lines_kind_is_what_one_search_of_every_shape_gives():
    lines = list(_every_line())
    assert len(lines) > 100_000
    kinds = {}
    for text in lines:
        got, want = coverage.classify(text), _classify_plain(text)
        assert got == want, (text, got, want)
        kinds[got] = kinds.get(got, 0) + 1
    # the corpus holds every kind: the comparison covered each shape
    assert {"vllm", "sglang", "trtllm", "traceback", "progress", "shared", None} <= set(kinds), kinds


def test_made_up_lines_with_shapes_late_in_the_line_keep_their_kind():
    cases = {"some text 45%|█████     | 9/20 [00:03<00:04]": "progress",
             "model.py:12: UserWarning: something": "shared",
             "prefix NCCL INFO Channel 00": "shared",
             "xx [TensorRT-LLM][INFO] Engine version": "trtllm",
             "Loading safetensors: 100% Completed | 4/4": "progress",
             "nothing known here at all": None}
    for text, kind in cases.items():
        assert coverage.classify(text) == kind == _classify_plain(text), text


def _split_plain(s: str) -> list[str]:
    out, depth, quote, start, i = [], 0, None, 0, 0
    while i < len(s):
        c = s[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(s[start:i])
            start = i + 1
        i += 1
    out.append(s[start:])
    return [p.strip() for p in out if p.strip()]


def test_a_dump_splits_at_its_top_level_commas_as_a_character_walk_does():
    rng = random.Random(7)
    alphabet = "ab,'\"()[]{}\\ =1"
    for _ in range(50_000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert split_top(s) == _split_plain(s), s
    dumps = [x for x in _every_line() if len(x) > 2000 and "=" in x]
    assert dumps
    for x in dumps:
        assert split_top(x) == _split_plain(x)
    assert split_top("a=1, b=[1, 2], c='x, y', d={'k': (1, 2)}") == ["a=1", "b=[1, 2]", "c='x, y'", "d={'k': (1, 2)}"]


def test_a_parsers_phrase_test_never_skips_a_line_its_pattern_matches():
    """dispatch() skips a pattern's search when the line lacks every literal the pattern needs
    (literals.needles): over every real line, no line a pattern matches is skipped."""
    import importlib

    from diagnose.sources.engines import NAMES
    from diagnose.sources.literals import needles
    lines = list(_every_line())[::3]        # every third line: the patterns' phrases are on many
    gated = 0
    for engine in NAMES:
        table = importlib.import_module(f"diagnose.sources.engines.{engine}.lines").Parser._simple
        for rx, _ in table:
            n = needles(rx)
            if n is None:
                continue
            gated += 1
            for text in lines:
                if not any(x in text for x in n):
                    assert rx.search(text) is None, (rx.pattern, n, text)
    assert gated >= 15


def test_needles_of_made_up_patterns():
    import re

    from diagnose.sources.literals import needles
    assert needles(re.compile(r"\bworld_size=(?P<n>\d+)")) == ("world_size=",)
    assert set(needles(re.compile(r"(?:GPU|CUDA) blocks: (?P<n>\d+)"))) == {" blocks: "}
    assert set(needles(re.compile(r"\w+ (?:Out of memory|KV cache is full)"))) == {"Out of memory", "KV cache is full"}
    assert needles(re.compile(r"Engine version (\d+)")) is None           # re scans a literal start itself
    assert needles(re.compile(r"\d+ (?:a|bc)")) is None                    # nothing long enough is required
    assert needles(re.compile(r"(?i)\bout of memory")) is None             # case-insensitive: no filter
    assert needles(re.compile(r"\d(?:abc)?xyz?")) is None                  # optional parts need nothing


# -- engine stats lines: loading._fast_stats against the plain path of loading._one --------------

def _stats_lines(literal: str):
    for path in sorted((FIXTURES / "real").glob("*.log")) + sorted((FIXTURES / "rules").glob("*/*.log")):
        for text in path.read_text(encoding="utf-8", errors="replace").split("\n"):
            if literal in text:
                yield text


def _parser(engine: str):
    import importlib
    return importlib.import_module(f"diagnose.sources.engines.{engine}.lines").Parser()


def _plain_stats(text: str, engine: str):
    """What the plain path makes of one line, from a fresh start: the Line, whether the shared
    lines' checks took it and what they left, the launch marker, the engine parser's rows, facts
    and events."""
    from diagnose.evidence.model import Evidence
    from diagnose.sources.engines.common import feed_common
    from diagnose.sources.launches import marker
    from diagnose.sources.readers.lineprefix import peel
    line = peel("s", 7, text)
    ev = Evidence()
    shared = feed_common(line, ev, None)
    took = _parser(engine).feed(line, ev, None)
    return line, shared, marker(line.msg), took, _made(ev)


def _made(ev):
    return (list(ev.stats_rows), {k: (f.value, f.text) for k, f in ev.facts.items()}, dict(ev.event_counts),
            {k: [(e.line, e.text, e.data) for e in v] for k, v in ev.events.items()}, dict(ev.counters), sorted(ev.ray_ips),
            sorted(ev.hosts))


def _fast_stats(text: str, engine: str = "vllm"):
    from diagnose.evidence.model import Evidence
    from diagnose.sources.loading import FAST_STATS
    reader = dict((r.__module__.split(".")[-2], r) for _, r in FAST_STATS)[engine]
    got = reader("s", 7, text)
    if got is None:
        return None
    line, m, items = got
    ev = Evidence()
    if line.ip:
        ev.ray_ips.add(line.ip)         # as _fast_stats does: all the shared lines' checks leave
    _parser(engine).feed_stats(m, items, line, ev, None)
    return line, _made(ev)


def _agree(text: str, engine: str = "vllm") -> bool:
    """True when the fast path took the line (and gave what the plain path gives)."""
    fast = _fast_stats(text, engine)
    if fast is None:
        return False
    line, shared, mark, took, made = _plain_stats(text, engine)
    assert (shared, mark, took) == (False, None, True), text
    assert fast == (line, made), text
    return True


def test_a_stats_line_read_whole_gives_what_the_peeler_and_the_parser_give():
    taken = [text for text in _stats_lines("throughput: ") if _agree(text)]
    # nearly every real stats line takes the fast path: V1 and V0 shapes, colours, no prefix
    assert len(taken) > 19_000
    assert any("\x1b[" in t for t in taken) and any("Swapped:" in t for t in taken) and any(t.startswith("INFO") for t in taken)


def test_a_batch_line_read_whole_gives_what_the_peeler_and_the_parser_give():
    taken = [text for text in _stats_lines("#running-req: ") if _agree(text, "sglang")]
    assert len(taken) > 8_000
    assert any("Prefill batch" in t for t in taken) and any("Decode batch" in t for t in taken) and any(" DP" in t[:40] for t in taken)


def test_made_up_stats_lines_take_the_fast_path_only_where_it_gives_the_same():
    head = "(EngineCore_DP0 pid=212, ip=10.0.0.5) INFO 11-20 09:04:07 [loggers.py:123] "
    body = ("Engine 001: Avg prompt throughput: 10.5 tokens/s, Avg generation throughput: 54.7 tokens/s, "
            "Running: 3 reqs, Waiting: 1 reqs")
    fast = [body + ", GPU KV cache usage: 0.2%, Prefix cache hit rate: 35.8%",
            body + ", Preemptions: 2, GPU KV cache usage: 99.5%",
            body + ", GPU KV cache usage: 0.0%, CPU KV cache usage: 0.0%.",
            body + ", Preemptions: 3.",
            body + ", Deferred: 0 reqs, GPU KV cache usage: 1%",
            "2 Engines Aggregated: " + body[len("Engine 001: "):]]
    plain = [body + ", Preemptions: 3.5.",          # float("3.5.") raises: malformed on the plain path
             body + ", GPU KV cache usage: 1..2%",
             body + ", Shutting down: 1",            # not an item the fast path knows
             body + ", GPU KV cache usage: 1%x",
             body + ", Engine died: 1%",
             body + " [repeated 3x across cluster]"]
    for text in fast:
        for h in (head, "INFO 11-20 09:04:07 [loggers.py:123] ", "\x1b[1;36m(APIServer pid=7)\x1b[0;0m WARNING 01-02 03:04:05.123 metrics.py:9] "):
            assert _agree(h + text), h + text
    for text in plain:
        assert _fast_stats(head + text) is None, text
    for h in ("vllm-1  | ", "2025-01-02T03:04:05Z ", "(A pid=1) (B pid=2) ", "> "):
        assert _fast_stats(h + head + fast[0]) is None, h


def test_made_up_batch_lines_take_the_fast_path_only_where_it_gives_the_same():
    body = "Decode batch, #running-req: 12, #token: 3456, token usage: 0.42, cuda graph: True, gen throughput (token/s): 812.33, #queue-req: 3"
    fast = [body, body + ", ", body + ", accept len: 2.31", "#running-req: 4, #queue-req: 0",
            "Prefill batch. #new-seq: 1, #new-token: 512, #cached-token: 0, token usage: 0.10, #running-req: 0, #queue-req: 0"]
    plain = [body + ", cuda graph: OutOfMemoryError",     # a value that is no number: the shared checks decide
             body + ", Traceback (most recent call last)",
             body + ", new thing: 3",
             "new fill batch. #seq: 1, #new_token: 5"]
    for text in fast:
        for h in ("[2025-01-06 02:58:44 TP5] ", "[2025-05-14 09:31:43.123 DP1 TP0 EP0] ", "[02-15 22:58:13] ", "[04:40:55] "):
            assert _agree(h + text, "sglang"), h + text
    for text in plain:
        assert _fast_stats("[2025-01-06 02:58:44 TP5] " + text, "sglang") is None, text
    for h in ("sglang-1  | ", "[2025-01-06 02:58:44] [x.y] [INFO] [worker_1] ", "2025-01-02T03:04:05Z "):
        assert _fast_stats(h + "[2025-01-06 02:58:44 TP5] " + body, "sglang") is None, h


def _fields(obj) -> dict:
    return {k: getattr(obj, k) for k in getattr(type(obj), "__slots__", ())} or dict(vars(obj))


def _read_whole(path):
    """What reading a log leaves: its launches, evidence, coverage and parsers' state."""
    from conftest import evidence_summary

    from diagnose.sources import resolve
    from diagnose.sources.loading import read_input
    r = read_input(resolve([str(path)])[0])
    out = []
    for p in r.pieces:
        p.ev.inputs = [r.info]
        out.append((p.describe(), evidence_summary(p.ev), sorted(p.ev.ray_ips), dict(p.engine_lines), p.first_engine,
                    [sorted(q.procs_seen) for q in p.parsers if hasattr(q, "procs_seen")],
                    {k: _fields(life) for k, life in p.ev.lifecycle.items()}))
    return out, r.info.to_json()


def test_a_log_read_with_and_without_the_fast_path_is_the_same():
    """Whole logs, the fast path on and off: the same launches, evidence, coverage, parsers' state."""
    from diagnose.sources import loading
    read = _read_whole

    texts = {p: p.read_text(errors="replace") for p in sorted((FIXTURES / "real").glob("*.log"))}
    vllm = [p for p, t in texts.items() if "throughput: " in t]
    sglang = [p for p, t in texts.items() if "#running-req: " in t]
    assert len(vllm) >= 40 and len(sglang) >= 10
    for path in vllm[::2] + sglang:         # every other vLLM one: suite time
        fast = read(path)
        saved, loading.FAST_STATS = loading.FAST_STATS, ()
        try:
            plain = read(path)
        finally:
            loading.FAST_STATS = saved
        assert fast == plain, path


def _without_access_path(monkeypatch):
    from diagnose.sources import loading
    monkeypatch.setattr(loading, "_fast_access", lambda *a: False)


def _read_alike(paths, monkeypatch, fast_path: str) -> None:
    """Each log read with the fast path `loading.<fast_path>` and without it: the same launches,
    evidence, coverage, parsers' state."""
    from diagnose.sources import loading
    for path in paths:
        fast = _read_whole(path)
        with monkeypatch.context() as m:
            m.setattr(loading, fast_path, lambda *a: False)
            plain = _read_whole(path)
        assert fast == plain, path


def _made_up_lines_read_alike(tmp_path, monkeypatch, fast_path: str, cases, head, tb, other, last) -> None:
    """Each made-up line (then `other(line)`, then `last`) in a log after `head`, and after it and
    the traceback `tb`: `loading.<fast_path>` (called with the line number fourth) takes the line
    where the case says, and the log reads alike with the fast path and without it."""
    from diagnose.sources import loading
    real = getattr(loading, fast_path)
    for text, fast in cases:
        for before in ([], tb):
            p = tmp_path / "a.log"
            p.write_text("\n".join(head + before + [text, other(text), last]) + "\n")
            took = {}       # line number -> whether the fast path took it
            with monkeypatch.context() as m:
                m.setattr(loading, fast_path, lambda *a: took.setdefault(a[3], real(*a)))
                got = _read_whole(p)
            assert took.get(len(head + before) + 1, False) == fast, (text, before)
            with monkeypatch.context() as m:
                m.setattr(loading, fast_path, lambda *a: False)
                assert got == _read_whole(p), (text, before)


def test_a_log_read_with_and_without_the_access_line_path_is_the_same(monkeypatch):
    """Whole logs with uvicorn access lines (process prefixes, colours, collectors, errors and
    probes among them), the access lines' fast path on and off: the same in every respect."""
    from diagnose.sources.engines.common import plain_access
    from diagnose.sources.formats import KEYWORDS_RE
    from diagnose.sources.engines.sglang.lines import access_line
    paths = [p for p in sorted((FIXTURES / "real").glob("*.log")) if 'INFO:  ' in p.read_text(errors="replace")]
    taken = sum(plain_access(t, KEYWORDS_RE) is not None for p in paths for t in p.read_text(errors="replace").split("\n"))
    assert len(paths) >= 25 and taken > 20_000
    # and under SGLang's logger header, in several of SGLang's logs
    sglang = [sum(access_line("s", 1, t, KEYWORDS_RE) is not None for t in p.read_text(errors="replace").split("\n")) for p in paths]
    assert sum(sglang) > 8_000 and sum(k > 0 for k in sglang) >= 10
    _read_alike(paths, monkeypatch, "_fast_access")


ACCESS_TAIL = '10.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
# (line, whether the fast path takes it): each read alike either way
MADE_UP_ACCESS = [
    (f"INFO:     {ACCESS_TAIL}", True),
    (f"(APIServer pid=7) INFO:     {ACCESS_TAIL}", True),
    (f"\x1b[36m(APIServer pid=7)\x1b[0m INFO:     {ACCESS_TAIL}", True),
    ('(APIServer pid=7) INFO:     10.0.0.1:5000 - "GET /health HTTP/1.1" 503 Service Unavailable', True),
    ('(APIServer pid=7) INFO:     10.0.0.1:5000 - "POST /v1/completions HTTP/1.1" 429 Too Many Requests', True),
    ('(APIServer pid=7) INFO:     10.0.0.1:5000 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error', True),
    ('(APIServer pid=7) INFO:     10.0.0.1:5000 - "GET /metrics?x=1 HTTP/1.1" 200 OK', True),
    (f"(APIServer pid=7) (Nested pid=8) INFO:     {ACCESS_TAIL}", False),     # two prefixes: peel's loop
    (f"(RayWorkerWrapper pid=9, ip=10.1.1.1) INFO:     {ACCESS_TAIL}", False),   # a Ray address
    (f"(APIServer pid=7) INFO:     {ACCESS_TAIL} ", False),                     # what visible() strips
    (f"(APIServer pid=7) INFO:     {ACCESS_TAIL}\r", False),
    (f"bar 10%|#  | 1/10 [00:01<00:09,  1.00it/s](APIServer pid=7) INFO:     {ACCESS_TAIL}", False),
    (f"(APIServer pid=7) INFO:     {ACCESS_TAIL} [repeated 3x across cluster]", False),
    ('(APIServer pid=7) INFO:     10.0.0.1:5000 - "POST /v1/requests HTTP/1.1" 200 OK', False),
    ('(APIServer pid=7) INFO:     10.0.0.1:5000 - "GET /models--a--b/snapshots/c HTTP/1.1" 200 OK', False),
    ('(APIServer pid=7) INFO:     10.0.0.1:5000 - "POST /kv_connector HTTP/1.1" 200 OK', False),
    ('(APIServer pid=7) INFO:     10.0.0.1:5000 - "POST /v1/x?pid=3 HTTP/1.1" 200 OK', False),
    (f"vllm-1  | INFO:     {ACCESS_TAIL}", False),                               # a compose stream
    (f"2025-11-20T09:00:03.1Z INFO:     {ACCESS_TAIL}", False),                  # a collector's time
    (f"[2025-11-20 09:00:03] INFO:     {ACCESS_TAIL}", False),                   # SGLang's header: below
    ("(APIServer pid=7) INFO:     Application startup complete.", False),
]


def test_made_up_access_lines_take_the_fast_path_only_where_it_gives_the_same(tmp_path, monkeypatch):
    """Each line in a log after a server's start-up, and after a traceback (whose reading an error
    word goes on): the fast path takes the lines it is meant to, and every line reads alike."""
    from diagnose.sources.engines.common import plain_access
    from diagnose.sources.formats import KEYWORDS_RE
    head = (FIXTURES / "seed003" / "realtime.log").read_text().split("\n")[:120]
    tb = ["(APIServer pid=7) ERROR 11-20 09:03:01 [core.py:1] Traceback (most recent call last):",
          '(APIServer pid=7)   File "x.py", line 1, in f']
    for text, fast in MADE_UP_ACCESS:
        assert (plain_access(text, KEYWORDS_RE) is not None) == fast, text
        for before in ([], tb):
            p = tmp_path / "a.log"
            p.write_text("\n".join(head + before + [text, text.replace(" 200 ", " 404 "), "(APIServer pid=7) INFO 11-20 09:04:00 [x.py:1] done"]) + "\n")
            got = _read_whole(p)
            with monkeypatch.context() as m:
                _without_access_path(m)
                assert got == _read_whole(p), (text, before)


# (line, whether the fast path takes it) under SGLang's logger header: each read alike either way
MADE_UP_SGLANG_ACCESS = [
    (f"[2025-11-20 09:00:03] INFO:     {ACCESS_TAIL}", True),
    (f"[2025-11-20 09:00:03 TP0] INFO:     {ACCESS_TAIL}", True),
    (f"[2025-11-20 09:00:03.123 DP1 TP0 EP0] INFO:     {ACCESS_TAIL}", True),
    (f"[11-20 09:00:03] INFO:     {ACCESS_TAIL}", True),                      # sglang-diffusion: no year
    (f"[09:00:03 TP0] INFO:     {ACCESS_TAIL}", True),                        # no date: no time
    (f"\x1b[32m[2025-11-20 09:00:03]\x1b[0m INFO:     {ACCESS_TAIL}", True),
    ('[2025-11-20 09:00:03] INFO:     10.0.0.1:5000 - "GET /health HTTP/1.1" 503 Service Unavailable', True),
    ('[2025-11-20 09:00:03] INFO:     10.0.0.1:5000 - "POST /generate HTTP/1.1" 500 Internal Server Error', True),
    ('[2025-11-20 09:00:03] INFO:     10.0.0.1:5000 - "POST /x?server_args={1} HTTP/1.1" 200 OK', False),   # a launch marker
    (f"[2025-11-20 09:00:03] (APIServer pid=7) INFO:     {ACCESS_TAIL}", False),  # a process prefix after the header
    (f"[2025-11-20 09:00:03] INFO:     {ACCESS_TAIL} ", False),
    ('[2025-11-20 09:00:03] INFO:     10.0.0.1:5000 - "POST /v1/requests HTTP/1.1" 200 OK', False),
    (f"[2025-11-20 09:00:03] [x.y] [INFO] [worker_1] [2025-11-20 09:00:03] INFO:     {ACCESS_TAIL}", False),  # a relay
    (f"[2025-11-20 09:00:03,123] LMCache INFO:     {ACCESS_TAIL}", False),     # another library's logger
    (f"sglang-1  | [2025-11-20 09:00:03] INFO:     {ACCESS_TAIL}", False),
    ("[2025-11-20 09:00:03] INFO:     Application startup complete.", False),
]


def test_made_up_sglang_access_lines_take_the_fast_path_only_where_it_gives_the_same(tmp_path, monkeypatch):
    """Each line in an SGLang log after its start-up, and after a traceback: the fast path takes
    the lines it is meant to, and every line reads alike with it and without."""
    logs = sorted((FIXTURES / "real").glob("sglang-*.log"))
    head = next(p for p in logs if "server_args=ServerArgs(" in p.read_text(errors="replace")).read_text(errors="replace").split("\n")[:60]
    tb = ["[2025-11-20 09:03:01] ERROR: Traceback (most recent call last):", '  File "x.py", line 1, in f']
    _made_up_lines_read_alike(tmp_path, monkeypatch, "_fast_access", MADE_UP_SGLANG_ACCESS, head, tb,
                              lambda t: t.replace(" 200 ", " 404 "), "[2025-11-20 09:04:00] done")


def test_no_engine_header_or_exception_opens_an_access_lines_message():
    """The access lines' fast path does not look for an engine's logger header in the message
    (peel does), nor for the exception a traceback ends with (feed_common does, in a traceback):
    neither opens with uvicorn's `INFO:`."""
    from diagnose.sources.engines.common import EXC_LINE
    from diagnose.sources.readers.lineprefix import HEADERS
    for msg in (f"INFO:     {ACCESS_TAIL}", f"INFO: {ACCESS_TAIL}", "INFO:  [::1]:80 - \"GET / HTTP/1.1\" 200",
                'INFO:     1.2.3.4:5 - "GET /ValueError: HTTP/1.1" 500 Internal Server Error'):
        assert [h(msg) for h in HEADERS] == [None] * len(HEADERS), msg
        assert EXC_LINE.match(msg) is None, msg


# -- vLLM request lines: loading._fast_request against the plain path of loading._one ------------

def _request_lines():
    from diagnose.sources.engines.common import REQUEST_LINE
    return [t for t in _stats_lines("request") if REQUEST_LINE.search(t)]


def test_a_request_line_read_whole_gives_what_the_peeler_and_the_parser_give():
    """Each real request line the fast path takes: the Line peel() makes, no launch marker, the
    shared lines' checks leave it, and the vLLM parser's reading of it gives the same (its process
    noted before, as the fast path requires)."""
    from diagnose.evidence.model import Evidence
    from diagnose.sources.engines.common import feed_common
    from diagnose.sources.engines.vllm.lines import request_line
    from diagnose.sources.launches import marker
    from diagnose.sources.readers.lineprefix import peel
    taken = []
    for text in _request_lines():
        line = request_line("s", 7, text)
        if line is None:
            continue
        assert line == peel("s", 7, text), text
        ev, plain = Evidence(), _parser("vllm")
        plain.procs_seen.add(line.proc)
        assert (feed_common(line, ev, None), marker(line.msg), plain.feed(line, ev, None)) == (False, None, True), text
        ev2, fast = Evidence(), _parser("vllm")
        fast.request(line, ev2, None)
        assert _made(ev2) == _made(ev), text
        taken.append(text)
    # every real one (V0's shape: the made-up lines below add V1's process prefixes), received and added
    assert len(taken) > 2_500 and len(taken) == len(_request_lines())
    assert any("] Added request" in t for t in taken) and any("] Received request" in t for t in taken)


def test_a_log_read_with_and_without_the_request_line_path_is_the_same(monkeypatch):
    """Whole logs that log their requests, the request lines' fast path on and off: the same
    launches, evidence, coverage, parsers' state."""
    paths = [p for p in sorted((FIXTURES / "real").glob("*.log"))
             if "] Received request" in p.read_text(errors="replace") or "] Added request" in p.read_text(errors="replace")]
    assert len(paths) >= 6
    _read_alike(paths, monkeypatch, "_fast_request")


REQUEST_TAIL = "Received request chatcmpl-1a2b: prompt: 'Hello there', params: SamplingParams(n=1), prompt_token_ids: [1, 2]"
V1_HEAD = "(APIServer pid=7) INFO 11-20 09:03:02 [logger.py:40] "
# (line, whether the fast path takes it): each read alike either way
MADE_UP_REQUESTS = [
    (V1_HEAD + REQUEST_TAIL, True),
    (V1_HEAD + "Added request chatcmpl-1a2b.", True),
    (V1_HEAD + "Finished request chatcmpl-1a2b.", True),
    (V1_HEAD + "Aborted request chatcmpl-1a2b.", True),
    ("INFO 11-20 09:03:02 logger.py:39] " + REQUEST_TAIL, True),               # V0: no brackets, no prefix
    ("\x1b[1;36m(APIServer pid=7)\x1b[0;0m INFO 11-20 09:03:02 [logger.py:40] " + REQUEST_TAIL, True),
    (V1_HEAD + REQUEST_TAIL + "   ", True),                                     # visible() strips it, as peel does
    (V1_HEAD + REQUEST_TAIL.replace("Hello there", "INFO: 10.0.0.1:5 - \"GET / HTTP/1.1\" 200 OK"), True),
    (V1_HEAD + REQUEST_TAIL.replace("Hello there", "Traceback (most recent call last): ValueError: x"), True),
    ("(RayWorkerWrapper pid=9, ip=10.1.1.1) INFO 11-20 09:03:02 [logger.py:40] " + REQUEST_TAIL, False),  # a process not seen
    ("(VllmWorkerProcess pid=9) INFO 11-20 09:03:02 [logger.py:40] " + REQUEST_TAIL, False),
    ("(APIServer pid=7) (Nested pid=8) INFO 11-20 09:03:02 [logger.py:40] " + REQUEST_TAIL, False),  # peel's loop
    (V1_HEAD + REQUEST_TAIL + " [repeated 3x across cluster]", False),
    (V1_HEAD.replace("[logger.py:40] ", "[logger.py:40] ") + "Received request x: prompt: 'server_args=ServerArgs(a=1)'", False),
    ("vllm-1  | " + V1_HEAD + REQUEST_TAIL, False),                             # a compose stream
    ("2025-11-20T09:00:03.1Z " + V1_HEAD + REQUEST_TAIL, False),                # a collector's time
    ("bar 10%|#  | 1/10 [00:01<00:09,  1.00it/s]" + V1_HEAD + REQUEST_TAIL, False),
    (V1_HEAD + "Received a request", False),
    ("[2025-11-20 09:00:03] Received request x", False),                       # SGLang's header
]


def test_made_up_request_lines_take_the_fast_path_only_where_it_gives_the_same(tmp_path, monkeypatch):
    """Each line in a log after a server's start-up (its API server's process seen), and after a
    traceback: the fast path takes the lines it is meant to, and every line reads alike."""
    head = (FIXTURES / "seed003" / "realtime.log").read_text().split("\n")[:120]
    assert any(t.startswith("(APIServer pid=") for t in head)
    tb = ["(APIServer pid=7) ERROR 11-20 09:03:01 [core.py:1] Traceback (most recent call last):",
          '(APIServer pid=7)   File "x.py", line 1, in f']
    _made_up_lines_read_alike(tmp_path, monkeypatch, "_fast_request", MADE_UP_REQUESTS, head, tb,
                              lambda t: t.replace("1a2b", "3c4d"), V1_HEAD + "done")


def test_damaged_stats_lines_are_read_alike_with_and_without_the_fast_path(tmp_path):
    """Values float() refuses: the fast path leaves the line to the plain one, or fails where it
    fails (after the same steps): the same malformed count, rows, launches and coverage."""
    from conftest import evidence_summary

    from diagnose.sources import loading, resolve
    from diagnose.sources.loading import read_input
    head = "(APIServer pid=7) INFO 11-20 09:0{}:07 [loggers.py:123] "
    body = ("Engine 000: Avg prompt throughput: {} tokens/s, Avg generation throughput: 54.7 tokens/s, "
            "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: {}%, Prefix cache hit rate: 35.8%")
    sg = "[2025-01-06 02:5{}:44 TP0] Decode batch, #running-req: 1, #token: 10, token usage: {}, cuda graph: True, gen throughput (token/s): 5.0, #queue-req: 0"
    lines = ["(APIServer pid=7) INFO 11-20 09:00:00 [api_server.py:1] vLLM API server version 0.11.0"]
    for i, (a, b) in enumerate([("1.0", "0.2"), ("1..2", "0.2"), ("1.0", "1..2"), ("9" * 400, "0.5"), ("2.0", "3.")]):
        lines.append(head.format(i) + body.format(a, b))
        lines.append(sg.format(i, b))
    path = tmp_path / "damaged.log"
    path.write_text("\n".join(lines) + "\n")

    def read():
        r = read_input(resolve([str(path)])[0])
        for p in r.pieces:
            p.ev.inputs = [r.info]
        return [(p.describe(), evidence_summary(p.ev), dict(p.engine_lines)) for p in r.pieces], r.info.to_json()

    fast = read()
    saved, loading.FAST_STATS = loading.FAST_STATS, ()
    try:
        plain = read()
    finally:
        loading.FAST_STATS = saved
    assert fast == plain
    assert "malformed" in str(fast[1]["errors"]) and sum(len(p[1]["stats"]) for p in fast[0]) >= 6


def test_stdev_from_integer_sums_is_the_librarys_float():
    """signals.stats.stdev (exact sums over the distinct values) gives statistics.stdev's float,
    bit for bit, on gauges (few values), rates (one decimal), wide ranges, signs, zeros, tiny and
    huge magnitudes (scaled to integers in C, or past that the ratios' way) and ints."""
    import statistics

    from diagnose.signals.stats import quantile, ranked, stdev
    rng = random.Random(11)
    for trial in range(4000):
        n = rng.randint(2, 300)
        kind = trial % 8
        if kind == 0:
            xs = [round(rng.uniform(0, 100), 1) for _ in range(n)]
        elif kind == 1:
            xs = [float(rng.randint(0, 300)) for _ in range(n)]
        elif kind == 2:
            xs = [rng.random() * 10 ** rng.randint(-5, 12) for _ in range(n)]
        elif kind == 3:
            xs = [rng.choice([0.0, 1.5, 1e-300, 1e300, 3.25]) for _ in range(n)]
        elif kind == 4:
            xs = [rng.randint(-5, 5) for _ in range(n)]
        elif kind == 5:         # signs, zeros of both signs, values of the same magnitude repeated
            xs = [rng.choice([0.0, -0.0, -2.5, rng.uniform(-1e3, 1e3), round(rng.uniform(-50, 50), 2)]) for _ in range(n)]
        elif kind == 6:         # magnitudes near the ends: subnormals, 2**53 and past, 1e280 (overflows scaled)
            pool = rng.sample([5e-324, 2.5e-310, 1e-200, 2.0 ** 53, 2.0 ** 53 + 2, 3e17, 1e280, -7.0, 0.1], 3)
            xs = [rng.choice(pool) * rng.choice([1, 3, -1]) for _ in range(n)]
        else:                   # one value, or zeros only
            xs = [rng.choice([0.0, -0.0])] * n if trial % 16 == 7 else [rng.uniform(-1, 1)] * n
        assert stdev(xs) == statistics.stdev(xs), xs
        ordered = sorted(xs)
        for q in (0.5, 0.9, 0.95):
            assert ranked(ordered, q) == quantile(xs, q)
    assert stdev([1.0]) is None


def test_trend_is_the_librarys_slope_and_correlation():
    """signals.stats.trend (on Python 3.11 one set of sums, made in C) gives
    statistics.linear_regression's slope and statistics.correlation, bit for bit: whole seconds
    against queue lengths (steps, bursts, a flat queue), floats against floats, ints against ints."""
    import statistics

    from diagnose.signals.stats import trend
    rng = random.Random(13)
    for trial in range(2000):
        n = rng.randint(2, 400)
        kind = trial % 4
        top = 10 ** rng.randint(1, 7)
        x = sorted(rng.randrange(top) for _ in range(n)) if kind != 2 else [rng.uniform(-1e3, 1e3) for _ in range(n)]
        if kind == 0:
            y = [float(rng.choice([0, 0, 1, 2, 5, 30, 200])) for _ in range(n)]
        elif kind == 1:
            y = [float(rng.choice([0, 7])) if trial % 8 else 3.0 for _ in range(n)]       # flat, now and then
        elif kind == 2:
            y = [rng.uniform(-1e6, 1e6) * 10 ** rng.randint(-8, 8) for _ in range(n)]
        else:
            y = [rng.randint(-5, 500) for _ in range(n)]
        if len(set(x)) < 2:
            continue
        try:
            r = statistics.correlation(x, y)
        except statistics.StatisticsError:
            r = None
        assert trend(x, y) == (statistics.linear_regression(x, y).slope, r), (x, y)


def test_stats_columns_kept_whole_only_where_testing_each_value_gives_the_same():
    """Evidence.stats_columns keeps a column of None and finite floats as it is (checked in C, each
    float copied): the same as testing each value, whatever else a column holds (NaN, infinities, a
    sum that overflows, ints, bools, text, a float subclass), -0.0 kept."""
    import math

    from diagnose.evidence.model import Evidence, _finite

    class F(float):
        pass

    def one_by_one(xs):
        return [x if x is None or (x.__class__ is float and math.isfinite(x)) else _finite(x) for x in xs]

    odd = [float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 3, True, "2.5", "x", F(1.5), 0.0, -0.0]
    rng = random.Random(5)
    for trial in range(500):
        xs = [rng.choice([None, 0.0, -0.0, 1.5, rng.uniform(-1e6, 1e6)]) for _ in range(rng.randint(1, 30))]
        if trial % 2:
            xs[rng.randrange(len(xs))] = rng.choice(odd)
        ev = Evidence()
        for x in xs:
            ev.add_stats({"running": x})
        got = ev.stats_columns()["running"]
        want = one_by_one(xs)
        assert [(type(x), repr(x)) for x in got] == [(type(x), repr(x)) for x in want], xs     # -0.0 too


def test_stats_columns_from_finishs_columns_are_those_made_from_the_rows():
    """finish() reads the stats rows' values column by column to check them, and stats_columns()
    starts from those columns: over every real log, the same columns (types and reprs, -0.0 too)
    as made from the rows afresh. Rows changed after finish (a row added, the list replaced) are
    read again, never served from the columns of the rows before; times are always read afresh."""
    from diagnose.evidence.model import Evidence
    from diagnose.sources.loading import load
    from diagnose.sources.readers.files import resolve

    def shape(cols):
        return {k: [(type(x), repr(x)) for x in v] for k, v in cols.items()}

    seen = 0
    for path in sorted((FIXTURES / "real").glob("*.log")):
        ev = load(resolve([str(path)]))
        if not ev.stats_rows:
            continue
        seen += 1
        fresh = Evidence()
        fresh.stats_rows = ev.stats_rows
        want = shape(fresh.stats_columns())         # no kept columns: made from the rows
        assert ev._stats_kept is not None, path
        assert shape(ev.stats_columns()) == want, path
    assert seen >= 10

    ev = Evidence()
    for i in range(3):
        ev.add_stats({"running": float(i)})
    from diagnose.evidence.finish import finish
    finish(ev)
    ev.add_stats({"running": 9.0})
    assert ev.stats_columns()["running"] == [0.0, 1.0, 2.0, 9.0]
    finish(ev)
    ev.stats_rows[-1] = {"running": 7.0}
    assert ev.stats_columns()["running"] == [0.0, 1.0, 2.0, 7.0]
    # times moved in place after the check (finish re-years a log's times by its GPU samples' dates)
    from datetime import datetime
    finish(ev)
    for r in ev.stats_rows:
        r["time"] = datetime(2026, 1, 1)
    assert ev.stats_columns()["time"] == [datetime(2026, 1, 1)] * 4


def test_longest_run_and_the_median_step_are_the_plain_loops_figures():
    """signals.stats.longest_run, the sustained tables' longest run (its place: the first longest,
    found by a regex over the flags as bytes) and one-sample span (sorted in C) give what a loop
    over the samples gives, times missing and clocks stepping back included."""
    from datetime import datetime, timedelta

    from diagnose.ruleset.sustained import _interval, _longest

    def first_longest(flags):
        best, start = (0, 0), None
        for i, f in enumerate(flags + [False]):
            if f and start is None:
                start = i
            elif not f and start is not None:
                if i - start > best[1] - best[0]:
                    best = (start, i)
                start = None
        return best
    from diagnose.signals.stats import longest_run

    def longest(flags):
        best = cur = 0
        for f in flags:
            cur = cur + 1 if f else 0
            best = max(best, cur)
        return best

    def median_step(times):
        steps = sorted((b - a).total_seconds() for a, b in zip(times, times[1:])
                       if a is not None and b is not None and b > a)
        return steps[len(steps) // 2] if steps else 0.0

    rng = random.Random(9)
    t0 = datetime(2026, 1, 1)
    assert longest_run([]) == 0 and _interval([]) == 0.0 and _interval([t0]) == 0.0
    for trial in range(1000):
        n = rng.randint(1, 40)
        flags = [rng.choice([True, False, 0, 1, 2, None]) for _ in range(n)]
        assert longest_run(flags) == longest(flags), flags
        judged = [bool(f) for f in flags]           # the sustained table's flags are bools
        assert _longest(judged) == first_longest(judged), judged
        times, t = [], t0
        for _ in range(n):
            t += timedelta(microseconds=rng.choice([0, 1, 10**6, 10**7, 1234567, -10**7]))
            times.append(None if trial % 3 == 0 and rng.random() < 0.2 else t)
        assert _interval(times) == median_step(times), times


def _c_values(text: str):
    """What scan.c's dg_stats_line reads of a line (None: it leaves the line to Python)."""
    import ctypes

    from diagnose.sources.readers import native
    from diagnose.sources.readers.segments import STATS_WIDTH
    lib = native.load()
    assert lib is not None, native.why_not       # built at install: its absence is a failed build
    raw = text.encode("utf-8", "surrogatepass")
    buf = ctypes.create_string_buffer(raw, len(raw))
    out = (ctypes.c_double * STATS_WIDTH)()
    end = ctypes.cast(ctypes.addressof(buf) + len(raw), ctypes.c_char_p)
    return list(out) if lib.dg_stats_line(ctypes.cast(buf, ctypes.c_char_p), end, out) else None


def _c_agree(text: str) -> bool:
    """True when C read the line (and its Line and evidence are what the Python fast path makes)."""
    from diagnose.evidence.model import Evidence
    from diagnose.sources.loading import c_stats_line
    v = _c_values(text)
    if v is None:
        return False
    line = c_stats_line("s", 7, text, v)
    assert v[15:18] == [float(x) for x in line.stamp[2].split(":")], text     # the time as numbers (Clock.at_hms)
    ev = Evidence()
    _parser("vllm").feed_values(v, line, ev, None)
    assert _fast_stats(text) == (line, _made(ev)), text
    return True


def test_a_stats_line_c_reads_gives_what_the_python_fast_path_gives():
    taken = [text for text in _stats_lines("throughput: ") if _c_agree(text)]
    # most real V1 stats lines are read in C (colours, `ip=`, V0's swap queue are left to Python)
    assert len(taken) > 10_000
    assert any(t.startswith("INFO") for t in taken) and any(t.startswith("(") for t in taken)


def test_made_up_stats_lines_are_read_in_c_only_where_python_reads_them_alike():
    head = "(EngineCore_DP0 pid=212) INFO 11-20 09:04:07 [loggers.py:123] "
    body = ("Engine 001: Avg prompt throughput: 10.5 tokens/s, Avg generation throughput: 54.7 tokens/s, "
            "Running: 3 reqs, Waiting: 1 reqs")
    c = [body + ", GPU KV cache usage: 0.2%, Prefix cache hit rate: 35.8%", body,
         body.replace("3 reqs", "1 req").replace("Engine 001: ", ""),
         body.replace("10.5", "0.30000000000000004441").replace("54.7", "1" * 40),
         body + ", GPU KV cache usage: 100.0%, Prefix cache hit rate: 0%"]
    python = [body + ", Preemptions: 2, GPU KV cache usage: 99.5%",             # another item: Python's walk
              body.replace("10.5", "1..2"), body.replace("10.5", "3."), body.replace("10.5", ".5"),
              body.replace("10.5", "9" * 70),                                   # longer than C reads
              body.replace("Running: 3", "Running: " + "7" * 16),
              body.replace("Running: 3", "Running: \u0663"),                    # a digit Python's \d knows
              body + " ", body + "\t", body + "\r", body.replace(", Waiting: 1", ", Swapped: 0 reqs, Pending: 1"),
              "2 Engines Aggregated: " + body[len("Engine 001: "):], body + ", GPU KV cache usage: 1%x"]
    heads = [head, "INFO 11-20 09:04:07 [loggers.py:123] ", "WARNING 01-02 03:04:05.123 metrics.py:9] ",
             "(Worker_TP3 pid=1) DEBUG 12-31 23:59:59 [v1/metrics/loggers.py:1] ", "(x.y-z pid=1) INFO 01-01 00:00:00 [<frozen>:1] "]
    for text in c:
        for h in heads:
            assert _c_agree(h + text), h + text
    for text in python:
        assert _c_values(head + text) is None, text
    for h in ("(A pid=1, ip=10.0.0.5) ", "\x1b[1;36m(APIServer pid=7)\x1b[0;0m ", "vllm-1  | ", "(A pid=1) (B pid=2) ",
              "(1A pid=1) ", "INFO 1-20 09:04:07 [a.py:1] ", "INFO 11-20 09:04:07 [a.py:] ", "INFO 11-20 09:04:07. [a.py:1] "):
        assert _c_values(h + head.split(") ", 1)[1] + c[0] if not h.endswith("] ") else h + c[0]) is None, h


def _read_c(path, monkeypatch, run_min: int):
    """A log read by the C reader (as a big log), stats lines in a row read as runs or one by one."""
    from conftest import evidence_summary

    from diagnose.sources import resolve
    from diagnose.sources.loading import read_input
    from diagnose.sources.readers import bulk, segments
    monkeypatch.setattr(bulk, "FAST_MIN_BYTES", 0)
    monkeypatch.setattr(segments, "RUN_MIN", run_min)
    r = read_input(resolve([str(path)])[0])
    out = []
    for p in r.pieces:
        p.ev.inputs = [r.info]
        out.append((p.describe(), evidence_summary(p.ev), dict(p.engine_lines), p.first_engine, p.last, p.last_t,
                    p.quiet, [sorted(q.procs_seen) for q in p.parsers if hasattr(q, "procs_seen")]))
    return out, r.info.to_json()


def test_stats_lines_in_a_row_read_as_a_run_give_what_one_by_one_gives(tmp_path, monkeypatch):
    """Runs of stats lines C read (loading._c_stats_run) and the same lines handed on one by one:
    the same rows, times, launches, coverage and parsers' state, where a run meets what it checks
    once (a new process name, the engine's kind not yet known, a wrapped dump open, a relaunch, a
    new year, a quiet hour, lines of one second) and in real logs."""
    from diagnose.sources.readers import native
    assert native.load() is not None, native.why_not
    stats = ("({proc} pid=7) INFO {md} {hms} [loggers.py:123] Engine 000: Avg prompt throughput: {p} tokens/s, "
             "Avg generation throughput: 54.7 tokens/s, Running: 3 reqs, Waiting: 1 reqs, "
             "GPU KV cache usage: {kv}%, Prefix cache hit rate: 35.8%")
    lines = []
    for i in range(6):          # before anything says which engine kind: the first goes the long way
        lines.append(stats.format(proc="APIServer", md="12-31", hms="23:5%d:00" % i, p=i, kv=i / 10))
    lines.append("(APIServer pid=7) INFO 12-31 23:59:01 [api_server.py:1] vLLM API server version 0.11.0")
    lines.append("(APIServer pid=7) INFO 12-31 23:59:01 [api_server.py:1] non-default args: {'model': 'm',")
    lines.append("'tensor_parallel_size': 2}")          # a dump a paste wrapped: the next lines follow it
    for i in range(4):
        lines.append(stats.format(proc="EngineCore_DP0" if i == 2 else "APIServer", md="12-31", hms="23:59:3%d" % i,
                                  p=i + 0.5, kv=90 + i))
    for i in range(5):          # a new year, two lines a second, then an hour of silence
        lines.append(stats.format(proc="Worker_TP1", md="01-01", hms="00:00:0%d" % (i // 2), p=i, kv=50))
    lines.append(stats.format(proc="Worker_TP1", md="01-01", hms="01:30:00", p=1, kv=1))
    lines.append("(APIServer pid=9) INFO 01-01 02:00:00 [api_server.py:1] vLLM API server version 0.11.0")
    for i in range(3):
        lines.append(stats.format(proc="VllmWorkerProcess", md="01-01", hms="02:00:1%d" % i, p=i, kv=5))
    lines.append('{"message": "not a stats line"}')
    for i in range(3):
        lines.append(stats.format(proc="APIServer", md="01-01", hms="02:01:1%d" % i, p=i, kv=5))
    path = tmp_path / "runs.log"
    path.write_text("\n".join(lines) + "\n")
    from diagnose.sources import loading
    taken = []
    real = loading._c_stats_run

    def counted(st, cov, clock, run, big, fmt_kw):
        got = real(st, cov, clock, run, big, fmt_kw)
        taken.append(run.done)
        return got
    monkeypatch.setattr(loading, "_c_stats_run", counted)
    run, single = _read_c(path, monkeypatch, 2), _read_c(path, monkeypatch, 10 ** 9)
    assert run == single
    assert sum(len(p[1]["stats"]) for p in run[0]) == 22
    # read as three runs (before the launch line, across the new process, year and silence, after
    # the relaunch across the JSON record the reader counts), each whole
    assert taken == [6, 10, 6]
    for path in sorted((FIXTURES / "real").glob("*.log"))[::7]:
        assert _read_c(path, monkeypatch, 2) == _read_c(path, monkeypatch, 10 ** 9), path


def test_no_launch_hint_fits_the_wording_of_a_stats_line_c_reads():
    """loading._c_stats_run takes a stats line C read for no launch marker without asking
    launches.marker: its message is scan.c's fixed words with numbers between them, and every
    hint holds a word (letters) none of those words holds."""
    import re

    from diagnose.sources.launches import HINTS, marker
    wording = ("Engine : Avg prompt throughput:  tokens/s, Avg generation throughput:  tokens/s, Running:  reqs, "
               "Waiting:  reqs, GPU KV cache usage: %, Prefix cache hit rate: %")
    for hint in HINTS:
        assert any(w not in wording for w in re.findall(r"[A-Za-z_]+", hint)), hint
    body = ("Engine 001: Avg prompt throughput: 10.5 tokens/s, Avg generation throughput: 54.7 tokens/s, "
            "Running: 3 reqs, Waiting: 1 reqs, GPU KV cache usage: 0.2%, Prefix cache hit rate: 35.8%")
    assert _c_values("INFO 11-20 09:04:07 [loggers.py:123] " + body) is not None and marker(body) is None
