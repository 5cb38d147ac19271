"""Property-based fuzzing of every parser entry point (issue 9), in-process for speed.

Inputs are written to files and read exactly as the CLI reads them: `sources.load(sources.resolve(
[path]))` (sniffing → log scanner and engine parsers, GPU samples, Prometheus, JSON/YAML/TOML),
`sources.load_groups` for several files, and `pipeline.analyze` end to end.

Properties: no exception escapes other than `InputError` (the one-line, exit-2 error a user sees);
every line with NUL bytes or invalid UTF-8 is counted in `unreadable_lines`, exactly; damage
added to a clean file (unreadable lines, noise lines, a megabyte line) leaves the clean file's
findings as they were; no NaN/Infinity reaches a report.

The default profile keeps the file well under a minute; `HYPOTHESIS_PROFILE=long` runs ~25x the
examples (the standalone `bench/fuzz.py --inputs 100000` goes further).
"""
from __future__ import annotations

import gzip
import json
import math
import os
import random
import re
import tempfile
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from bench.hostile_lines import MEGABYTE_LINES
from conftest import FIXTURES, TEST_TMP

from diagnose.sources import InputError, load, load_groups, resolve

settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.filter_too_much])
settings.register_profile("long", deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.filter_too_much])
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)
SCALE = 25 if PROFILE == "long" else 1


def ex(n: int) -> int:
    """Examples per test: n in CI, 25n in the long run."""
    return n * SCALE


# -- seeds ----------------------------------------------------------------------------------------
HEAD = 16 * 1024     # big seeds are cut to their head (on a line end): inputs stay small and fast

# Inputs only: the real corpus's labels (fixtures/real/*.toml) describe logs, they are not one.
ALL_FILES = sorted(p for p in FIXTURES.rglob("*")
                   if p.is_file() and p.suffix != ".md" and not p.name.startswith(".")
                   and not (p.suffix == ".toml" and (FIXTURES / "real") in p.parents))


def head_of(p: Path) -> bytes:
    d = p.read_bytes()
    # Tests cut, shuffle and damage lines of bytes: a UTF-16 file (the corpus keeps one, as
    # PowerShell writes it) is given as its UTF-8 text; test_inputs reads the UTF-16 bytes whole.
    if d[:2] in (b"\xff\xfe", b"\xfe\xff"):
        d = d.decode("utf-16").encode("utf-8")
    if len(d) > HEAD:
        d = d[: d.rfind(b"\n", 0, HEAD) + 1] or d[:HEAD]     # a one-line JSON array is cut mid-line
    return d if d.endswith(b"\n") else d + b"\n"


@lru_cache(maxsize=None)
def seed_kind(p: Path):
    """(kind, engine, lines) of a seed's clean head; None when even that is refused or when no
    line of it is understood (nothing for the properties below to hold on to)."""
    ev = load_bytes(head_of(p), "clean-" + p.name)
    if ev is None or not ev.inputs[0].recognised_lines:
        return None
    # a head that is a job's shell trace (`+ …` lines read as a Markdown list) is no log alone
    if _clean_analysis(p) is None:
        return None
    return ev.inputs[0].kind, ev.inputs[0].engine, ev.inputs[0].lines


@lru_cache(maxsize=None)
def _clean_analysis(p: Path):
    return analyze_bytes(head_of(p), "clean-" + p.name)


def clean_findings(p: Path) -> frozenset:
    return findings(_clean_analysis(p))


# The properties that need a seed's clean reading draw from a share of the fixtures: each seed is
# read and diagnosed once first (~0.2 s), and the rule cases' and real logs' heads are alike
# enough that every third of them gives the same shapes (all of them
# are read whole by test_rule_cases, test_readers_agree, test_prefilter and the corpus tests).
def _stride(p: Path) -> int:
    return 3 if p.parent == FIXTURES / "real" or FIXTURES / "rules" in p.parents else 1


SEED_FILES = [p for i, p in enumerate(ALL_FILES) if i % _stride(p) == 0]


def seeds_of(kind_prefix: str | tuple) -> list[Path]:
    return [p for p in SEED_FILES if (i := seed_kind(p)) is not None and i[0].startswith(kind_prefix)]


_TMP = Path(tempfile.mkdtemp(prefix="fuzz-", dir=TEST_TMP))
_counter = iter(range(10**9))


def _write(data: bytes, name: str = "input.log") -> str:
    path = _TMP / f"{next(_counter)}-{name}"
    path.write_bytes(data)
    return str(path)


def load_bytes(data: bytes, name: str = "input.log"):
    """Load as the CLI does; InputError is an allowed answer (returns None)."""
    path = _write(data, name)
    try:
        return load(resolve([path]))
    except InputError as e:
        assert str(e).strip() and "\n" not in str(e).strip(), f"InputError must be one line: {e!r}"
        return None
    finally:
        os.unlink(path)


def analyze_bytes(data: bytes, name: str = "input.log"):
    from diagnose.pipeline import analyze
    path = _write(data, name)
    try:
        return analyze([path])
    except InputError:
        return None
    finally:
        os.unlink(path)


def strict_json(doc) -> None:
    """The report as `--format json` writes it must parse back as strict JSON (no NaN/Infinity)."""
    from diagnose.reports.json_report import render

    def refuse(name):
        raise AssertionError(f"report holds {name}, which is not JSON")
    json.loads(render(doc), parse_constant=refuse)


def findings(a) -> frozenset:
    return frozenset(f.id for f in a.result.findings)


@pytest.fixture(scope="module")
def log_seeds():
    s = seeds_of("log")
    assert s, "no log fixtures"
    return s


# -- strategies -----------------------------------------------------------------------------------
BAD_BYTES = [b"\x00", b"\x00\x00\x00", b"\xff", b"\xfe\xfe", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
             b"\xc0\xaf", b"\x80", b"\xe2\x82"]
WEIRD_NUMBERS = ["nan", "NaN", "inf", "-inf", "Infinity", "1e309", "-1e309", "1e-400", "-5", "-5.0", "-100.0",
                 "-0.0", "1" + "0" * 400, "9" * 5000, "1..2", "4.2e+", "0x1F", "1_000", "٣"]
NOISE_ALPHABET = "0123456789 .,;!@#$%^&*()+=/|<>?XQZ\t"   # can spell no scanner keyword nor a metric name


@st.composite
def unreadable_line(draw) -> bytes:
    """One line (no newline) that is not readable text: a NUL byte or invalid UTF-8 inside,
    possibly around words a parser would otherwise act on."""
    words = draw(st.sampled_from([b"", b"INFO 01-02 03:04:05 [x.py:1] ", b"Avg prompt throughput: ",
                                  b"CUDA out of memory", b"Traceback (most recent call last)", b"vllm:num_requests_running 3",
                                  b"non-default args: {'tensor_parallel_size': 8}", b"0, 1, 2, 3"]))
    bad = draw(st.sampled_from(BAD_BYTES))
    # ASCII around the bad bytes: a random byte after `\xc3` could complete it into valid UTF-8
    tail = draw(st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40)).encode()
    line = words + bad + tail if draw(st.booleans()) else bad + words + tail
    assert b"\x00" in line or not _utf8(line)
    return line


def _utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


@st.composite
def noise_line(draw) -> bytes:
    return draw(st.text(NOISE_ALPHABET, min_size=1, max_size=120)).encode()


# -- 1. random input: only InputError may escape -----------------------------------------------------
@settings(max_examples=ex(80))
@given(st.binary(max_size=4096))
def test_random_bytes(data):
    load_bytes(data)


KEYWORD_SOUP = st.lists(st.sampled_from(
    ["Avg prompt throughput:", "tokens/s,", "Running:", "reqs,", "Waiting:", "GPU KV cache usage:", "%", "nan", "inf",
     "Decode batch.", "#running-req:", "#token:", "token usage:", "gen throughput (token/s):", "#queue-req:",
     "[TensorRT-LLM][INFO]", '{"iterLatencyMS":', '"kvCacheStats": {', "}", "non-default args: {", "'", ":",
     "with config:", "model=", "(", ")", "[", "]", "INFO 12-31 23:59:59 [x.py:1]", "[2025-01-01 00:00:00 TP0]",
     "vllm:num_requests_running", "# TYPE", "{le=\"+Inf\"}", "1e309", "-5", "0", "12.5", "\n", "\n", "\x00", "\ufffd"]),
    max_size=60)


@settings(max_examples=ex(80))
@given(KEYWORD_SOUP)
def test_keyword_soup(words):
    load_bytes(" ".join(words).encode())


# -- 2. real files, truncated and spliced ---------------------------------------------------------------
@settings(max_examples=ex(120))
@given(st.sampled_from(ALL_FILES), st.floats(0, 1), st.floats(0, 1), st.binary(max_size=64), st.booleans())
def test_truncated_and_spliced(path, cut, at, junk, gz):
    data = head_of(path)
    data = data[: int(len(data) * cut)]
    i = int(len(data) * at)
    data = data[:i] + junk + data[i:]
    load_bytes(gzip.compress(data) if gz else data, path.name)


def _smallest(pattern: str):
    c = sorted((p for p in ALL_FILES if pattern in p.name and p.stat().st_size <= 2000), key=lambda p: p.stat().st_size)
    return c[-1:] if c else []      # the largest of the small ones: more lines, still quick


SMALL = [p for pat in ("vllm-issue", "sglang-issue", "tensorrtllm", "dmon-", "query-gpu", ".prom", ".yaml", ".toml")
         for p in _smallest(pat)]


@pytest.mark.parametrize("path", SMALL, ids=[p.name for p in SMALL])
def test_truncated_at_every_offset(path):
    """A crashed server's log ends anywhere: every prefix of a small real file is read or refused."""
    data = path.read_bytes()
    for n in range(len(data) + 1):
        load_bytes(data[:n], path.name)


@settings(max_examples=ex(10))
@given(st.sampled_from(ALL_FILES), st.floats(0, 1))
def test_truncated_gzip(path, cut):
    z = gzip.compress(head_of(path))
    load_bytes(z[: int(len(z) * cut)], path.name + ".gz")


# -- 3. unreadable lines: counted exactly, and the rest read as if they were not there -----------------
@settings(max_examples=ex(40))
@given(st.data())
def test_unreadable_lines_are_counted_and_skipped(log_seeds, data):
    path = data.draw(st.sampled_from(log_seeds))
    clean_lines = seed_kind(path)[2]
    lines = head_of(path).splitlines(keepends=True)
    bad = data.draw(st.lists(unreadable_line(), min_size=1, max_size=8))
    for b in bad:
        lines.insert(data.draw(st.integers(0, len(lines))), b + b"\n")
    damaged = b"".join(lines)
    if data.draw(st.booleans()):
        damaged = gzip.compress(damaged)
    a = analyze_bytes(damaged, path.name)
    assert a is not None, "a log with readable lines left must not be refused"
    info = a.evidence.inputs[0]
    assert info.unreadable_lines == len(bad)
    assert info.lines == clean_lines + len(bad)
    assert info.recognised_lines + info.unrecognised_lines + info.unreadable_lines == info.lines
    assert findings(a) == clean_findings(path)


@settings(max_examples=ex(20))
@given(st.data())
def test_unreadable_lines_in_scrapes_and_gpu_samples_are_counted(data):
    """Whole-file formats (Prometheus scrapes, nvidia-smi / DCGM samples) count them too."""
    path = data.draw(st.sampled_from(seeds_of(("prometheus", "gpu"))))
    lines = head_of(path).splitlines(keepends=True)
    bad = data.draw(st.lists(unreadable_line(), min_size=1, max_size=5))
    # after the first line: a damaged first line may change what the file is sniffed as
    for b in bad:
        lines.insert(data.draw(st.integers(1, len(lines))), b + b"\n")
    a = analyze_bytes(b"".join(lines), path.name)
    assert a is not None
    assert a.evidence.inputs[0].unreadable_lines == len(bad)
    assert findings(a) == clean_findings(path)


@settings(max_examples=ex(30))
@given(st.data())
def test_appended_garbage_keeps_findings(data):
    """Findings on the clean part of a damaged file match the clean file's: garbage appended to
    any text input (a crashed writer, a binary tail) changes nothing the clean part says."""
    path = data.draw(st.sampled_from(seeds_of(("log", "prometheus-scrape", "gpu"))))
    kind = seed_kind(path)[0]
    # noise lines only after logs: in a dmon or CSV capture a line of digits is a sample
    gen = st.one_of(unreadable_line(), noise_line()) if kind == "log" else unreadable_line()
    tail = data.draw(st.lists(gen, min_size=1, max_size=20))
    a = analyze_bytes(head_of(path) + b"\n".join(tail) + b"\n", path.name)
    assert a is not None
    assert findings(a) == clean_findings(path)


# -- 4. lines of megabytes ------------------------------------------------------------------------------
@settings(max_examples=ex(4))
@given(st.data())
def test_megabyte_noise_line_keeps_findings(log_seeds, data):
    path = data.draw(st.sampled_from(log_seeds))
    size = data.draw(st.sampled_from([1 << 20, 3 << 20]))
    lines = head_of(path).splitlines(keepends=True)
    lines.insert(data.draw(st.integers(0, len(lines))), b"x" * size + b"\n")
    a = analyze_bytes(b"".join(lines), path.name)
    assert a is not None and findings(a) == clean_findings(path)


@pytest.mark.parametrize("line", list(MEGABYTE_LINES.values()), ids=list(MEGABYTE_LINES))
def test_megabyte_line_with_keywords(line):
    """A megabyte line a parser does act on is read (or refused with a one-line error), and the lines
    around it keep their meaning: every line is counted, the start-up facts before it survive. How
    long such a line takes is measured by bench/hostile_lines.py, not here."""
    head = (FIXTURES / "scenarios" / "healthy.log").read_bytes()[:4000]
    head = head[: head.rfind(b"\n") + 1]
    ev = load_bytes(head + line.encode() + b"\n" + line.encode())
    if ev is None:
        return                                          # refused as a one-line InputError (checked above)
    info = ev.inputs[0]
    assert info.lines == head.count(b"\n") + 2
    assert info.recognised_lines + info.unrecognised_lines + info.unreadable_lines == info.lines
    assert ev.facts["model"].value == "meta-llama/Llama-3.1-8B-Instruct"


# -- 5. several processes, several engines, one file ------------------------------------------------
@settings(max_examples=ex(30))
@given(st.sampled_from(ALL_FILES), st.sampled_from(ALL_FILES), st.randoms(use_true_random=False))
def test_interleaved_files(a, b, rnd):
    """Two writers on one file: lines of both, each in its own order (mixed engines included)."""
    la, lb = head_of(a).splitlines(keepends=True), head_of(b).splitlines(keepends=True)
    out = []
    while la or lb:
        src = la if la and (not lb or rnd.random() < 0.5) else lb
        out.append(src.pop(0))
    ev = load_bytes(b"".join(out))
    if ev is not None and ev.inputs[0].kind == "log":
        assert ev.inputs[0].engine in (None, "vllm", "sglang", "trtllm")
        assert ev.inputs[0].unreadable_lines == sum(b"\x00" in ln or not _utf8(ln) for ln in out)


@settings(max_examples=ex(10))
@given(st.lists(st.sampled_from(ALL_FILES), min_size=2, max_size=4, unique=True), st.floats(0, 1))
def test_several_damaged_files_at_once(paths, cut):
    files = []
    for p in paths:
        d = head_of(p)
        files.append(_write(d[: max(1, int(len(d) * cut))], p.name))
    try:
        load_groups(resolve(files))
    except InputError:
        pass


# -- 6. time: out of order, across a year boundary --------------------------------------------------
VLLM_STAMP = re.compile(rb"^((?:\(\w+ pid=\d+\) )?(?:INFO|WARNING|ERROR|DEBUG) )(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)", re.M)


def vllm_stats_seeds():
    out = []
    for p in seeds_of("log"):
        d = head_of(p)
        if seed_kind(p)[1] == "vllm" and len(VLLM_STAMP.findall(d)) > 3 and b"throughput:" in d:
            out.append(p)
    return out


@settings(max_examples=ex(15))
@given(st.data())
def test_year_boundary(data):
    """Stamps shifted so the log runs over New Year's Eve: times keep their spacing, in order."""
    seeds = vllm_stats_seeds()
    assume(seeds)
    path = data.draw(st.sampled_from(seeds))
    text = head_of(path)
    ev0 = load_bytes(text)
    times0 = [r["time"] for r in ev0.stats_rows if r.get("time")]
    assume(len(times0) >= 2 and times0 == sorted(times0) and times0[-1] - times0[0] < timedelta(days=20))
    first = times0[0]
    # put the first stats line somewhere in the last day of the year
    target = datetime(first.year, 12, 31, 0, 0, 0) + timedelta(seconds=data.draw(st.integers(0, 86399)))
    delta = target - first

    def shift(m):
        t = datetime(first.year, int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)), int(m.group(6))) + delta
        return m.group(1) + t.strftime("%m-%d %H:%M:%S").encode()
    ev1 = load_bytes(VLLM_STAMP.sub(shift, text))
    times1 = [r["time"] for r in ev1.stats_rows if r.get("time")]
    assert [t - times1[0] for t in times1] == [t - times0[0] for t in times0]


@settings(max_examples=ex(30))
@given(st.integers(-120, 60), st.lists(st.integers(0, 5), min_size=20, max_size=120), st.integers(2023, 2030))
def test_two_processes_writing_over_new_year(start, delays, year):
    """APIServer and EngineCore write one file over midnight on New Year's Eve; a line may land a
    few seconds late. Every stats line keeps its own time: no year skipped, none repeated."""
    t0 = datetime(year, 12, 31, 23, 59, 0) + timedelta(seconds=start)
    lines, truth = [], []
    for i, late in enumerate(delays):
        t = t0 + timedelta(seconds=i)
        proc = "(EngineCore_DP0 pid=301)" if i % 2 else "(APIServer pid=1)"
        truth.append(t)
        # written at t, appears after lines written up to `late` seconds later
        lines.append((t + timedelta(seconds=late), f"{proc} INFO {t:%m-%d %H:%M:%S} [loggers.py:123] Engine 000: "
                      f"Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 20.0 tokens/s, "
                      f"Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%, Prefix cache hit rate: 0.0%\n"))
    order = sorted(range(len(lines)), key=lambda i: lines[i][0])
    text = "".join(lines[i][1] for i in order).encode()
    path = _write(text)
    ev = load(resolve([path]), year=t0.year if order and truth[order[0]].year == t0.year else t0.year + 1)
    got = [r["time"] for r in ev.stats_rows]
    assert got == [truth[i] for i in order]


@settings(max_examples=ex(20))
@given(st.sampled_from(ALL_FILES), st.randoms(use_true_random=False))
def test_lines_out_of_order(path, rnd):
    """Lines in any order (a merged, re-sorted or shuffled paste): read or refused, and a vLLM
    log keeps one stats row per stats line, wherever the line went."""
    lines = head_of(path).splitlines(keepends=True)
    rnd.shuffle(lines)
    ev = load_bytes(b"".join(lines), path.name)
    k = seed_kind(path)
    if k and k[:2] == ("log", "vllm"):
        assert ev is not None
        assert len(ev.stats_rows) == len(load_bytes(head_of(path), path.name).stats_rows)


# -- 7. numbers: nan, inf, 1e309, negative percentages -----------------------------------------------
NUMBER = re.compile(rb"(?<![\w.])-?\d{1,12}(?:\.\d{1,6})?(?=%|\b)")
STATS_HINT = (b"throughput", b"batch", b"iterLatencyMS", b"Active Request", b"KV cache", b"usage", b"vllm:",
              b"sglang:", b"trtllm", b"blocks", b"GiB", b"concurrency", b"took", b"DCGM_FI", b", ")


@settings(max_examples=ex(60))
@given(st.sampled_from(ALL_FILES), st.data())
def test_weird_numbers_in_stats_lines(path, data):
    lines = head_of(path).splitlines(keepends=True)
    idx = [i for i, ln in enumerate(lines) if any(h in ln for h in STATS_HINT) and NUMBER.search(ln)]
    assume(idx)
    for i in data.draw(st.lists(st.sampled_from(idx), min_size=1, max_size=6)):
        hits = list(NUMBER.finditer(lines[i]))
        if not hits:        # this line's numbers were all replaced already
            continue
        m = hits[data.draw(st.integers(0, len(hits) - 1))]
        w = data.draw(st.sampled_from(WEIRD_NUMBERS)).encode()
        lines[i] = lines[i][: m.start()] + w + lines[i][m.end():]
    a = analyze_bytes(b"".join(lines), path.name)
    if a is None:
        return
    for rows in (a.evidence.stats_rows, a.evidence.gpu_rows):
        for r in rows:
            for k, v in r.items():
                assert not (isinstance(v, float) and not math.isfinite(v)), (k, v)
    strict_json(a.to_json())


@settings(max_examples=ex(20))
@given(st.sampled_from(ALL_FILES), st.data())
def test_negative_percentages(path, data):
    text = head_of(path)
    assume(re.search(rb"\d%", text))
    neg = re.sub(rb"(?<![\d.-])(\d+(?:\.\d+)?)%", lambda m: b"-" + m.group(0) if data.draw(st.booleans()) else m.group(0), text)
    a = analyze_bytes(neg, path.name)
    if a is not None:
        strict_json(a.to_json())


# -- 8. end to end on mutated real files --------------------------------------------------------------
@st.composite
def mutated(draw):
    path = draw(st.sampled_from(ALL_FILES))
    data = head_of(path)
    rnd = draw(st.randoms(use_true_random=False))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["cut", "splice", "flip", "nul", "utf8", "dup", "number", "crlf"]))
        i = rnd.randrange(len(data) + 1)
        if op == "cut":
            data = data[:i]
        elif op == "splice":
            data = data[:i] + rnd.randbytes(rnd.choice([1, 8, 64])) + data[i:]
        elif op == "flip" and data:
            b = bytearray(data)
            b[min(i, len(b) - 1)] ^= 1 << rnd.randrange(8)
            data = bytes(b)
        elif op == "nul":
            data = data[:i] + b"\x00" + data[i:]
        elif op == "utf8":
            data = data[:i] + rnd.choice(BAD_BYTES) + data[i:]
        elif op == "dup":
            ls = data.splitlines(keepends=True)
            if ls:
                j = rnd.randrange(len(ls))
                ls.insert(rnd.randrange(len(ls) + 1), ls[j])
            data = b"".join(ls)
        elif op == "number":
            hits = list(NUMBER.finditer(data))
            if hits:
                m = rnd.choice(hits)
                data = data[: m.start()] + rnd.choice(WEIRD_NUMBERS).encode() + data[m.end():]
        elif op == "crlf":
            data = data.replace(b"\n", b"\r\n")
    return path.name, data


@settings(max_examples=ex(40))
@given(mutated())
def test_pipeline_on_mutated_files(case):
    name, data = case
    a = analyze_bytes(data, name)
    if a is not None:
        strict_json(a.to_json())


# -- 9. the bulk scanner (big files) counts what the block scanner counts --------------------------
@pytest.mark.parametrize("engine", ["native", "python"])
@settings(max_examples=ex(15))
@given(data=st.data())
def test_bulk_path_counts_unreadable_lines_like_the_scanner(log_seeds, monkeypatch_module, data, engine):
    from diagnose.sources.readers import bulk, native
    if engine == "native" and native.load() is None:
        pytest.skip(f"C scanner not available here: {native.why_not}")
    monkeypatch_module.setattr(bulk, "USE_NATIVE", engine == "native")
    path = data.draw(st.sampled_from(log_seeds))
    lines = head_of(path).splitlines(keepends=True)
    bad = data.draw(st.lists(st.sampled_from([b for b in BAD_BYTES if b"\x00" not in b]), min_size=1, max_size=5))
    for b in bad:
        lines.insert(data.draw(st.integers(0, len(lines))), b"INFO 01-02 03:04:05 [x.py:1] Running: " + b + b"\n")
    damaged = b"".join(lines)
    monkeypatch_module.setattr(bulk, "FAST_MIN_BYTES", 10**12)
    block = load_bytes(damaged)
    monkeypatch_module.setattr(bulk, "FAST_MIN_BYTES", 0)
    fast = load_bytes(damaged)
    assert block is not None and fast is not None
    for k in ("lines", "unreadable_lines"):
        assert getattr(fast.inputs[0], k) == getattr(block.inputs[0], k), k


def test_bulk_path_and_a_real_replacement_character(monkeypatch, bulk_engine):
    from diagnose.sources.readers import bulk
    data = head_of(FIXTURES / "scenarios" / "healthy.log") + "INFO 01-02 03:04:05 [x.py:1] a real \ufffd\n".encode()
    monkeypatch.setattr(bulk, "FAST_MIN_BYTES", 10**12)
    block = load_bytes(data)
    monkeypatch.setattr(bulk, "FAST_MIN_BYTES", 0)
    fast = load_bytes(data)
    assert fast.inputs[0].unreadable_lines == block.inputs[0].unreadable_lines == 0


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_seed_corpus_is_there():
    """The properties above draw from these: make sure they are not silently empty."""
    assert len(ALL_FILES) >= 20
    assert seeds_of("log") and seeds_of(("prometheus", "gpu")) and SMALL
