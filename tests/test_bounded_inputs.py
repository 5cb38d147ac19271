"""Bounded on any input (issue 34): binary data and decompression bombs refused from their first
blocks, over-long lines cut the same way by every reader, inputs without line ends refused, YAML
alias bombs refused, samples thinned past a bound, a Prometheus answer bounded in size and time,
a file truncated while read noted. Each test checks what a user sees: the exit code, the one-line
error, the note, the figures — never a timing (bench/hostile.py measures time and memory)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, run_cli, one, report
from test_hostile_inputs import one_line_error

LOG = FIXTURES / "scenarios" / "healthy.log"


def env(**extra):
    return dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", COLUMNS="120",
                NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", **extra)


def gz_member(data: bytes, times: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join(c.compress(data) for _ in range(times)) + c.flush()


# -- binary data, bombs, endless lines ---------------------------------------------------------------

def test_a_gzip_bomb_of_zeros_is_refused_from_its_first_block(tmp_path):
    """10 GB of NUL bytes in a .gz made the kernel kill the run at 24 GB: now refused at once."""
    bomb = tmp_path / "bomb.gz"
    bomb.write_bytes(gz_member(b"\0" * (1 << 24), 16) * 4)       # 1 GB of zeros in 4 members
    one_line_error(run_cli(bomb), "bomb.gz", "binary")


def test_a_file_of_nul_bytes_is_refused(tmp_path):
    f = tmp_path / "nul.log"
    with open(f, "wb") as fh:
        fh.truncate(300 << 20)          # sparse: 300 MB of NUL bytes, big enough for the bulk reader
    one_line_error(run_cli(f), "nul.log", "binary")


def test_a_log_with_a_damaged_line_is_still_read(tmp_path):
    """A text log with NUL bytes in one line is no binary file."""
    f = tmp_path / "damaged.log"
    text = LOG.read_bytes()
    f.write_bytes(text[:2000] + b"\0" * 200 + text[2000:])
    p = run_cli("--format", "json", f)
    assert p.returncode in (0, 1), p.stderr.decode()
    assert report(p.stdout)["inputs"][0]["unreadable_lines"] >= 1


def test_a_gzip_that_keeps_expanding_is_refused(tmp_path):
    """Text, not binary, but a thousand times its compressed size: a decompression bomb."""
    bomb = tmp_path / "text-bomb.log.gz"
    bomb.write_bytes(gz_member((b"x" * 127 + b"\n") * (1 << 17), 8))     # 128 MB of one short line
    one_line_error(run_cli(bomb), "text-bomb.log.gz", "expands more than")


def test_a_stream_without_line_ends_is_refused(tmp_path):
    """`yes A | tr -d '\\n' | diagnose -` grew without end: refused once 64 MiB hold no line end."""
    data = b"A" * (70 << 20)
    p = subprocess.run([sys.executable, "-m", "diagnose", "-"], input=data, capture_output=True, env=env(),
                       cwd=ROOT, timeout=300)
    one_line_error(p, "<stdin>", "no line end")


READERS = {"small": {"DIAGNOSE_BULK_MIN_BYTES": str(64 << 20)},
           "C": {"DIAGNOSE_BULK_MIN_BYTES": str(1 << 20)},
           "python": {"DIAGNOSE_BULK_MIN_BYTES": str(1 << 20), "DIAGNOSE_NATIVE": "0"}}


@pytest.fixture(scope="module")
def long_line_log(tmp_path_factory):
    """A real log with a 5 MiB line (holding a keyword) in the middle."""
    f = tmp_path_factory.mktemp("long") / "long-line.log"
    text = LOG.read_bytes()
    half = text.index(b"\n", len(text) // 2) + 1
    f.write_bytes(text[:half] + b"INFO 01-02 03:04:05 [x.py:1] Error " + b"x" * (5 << 20) + b"\n" + text[half:])
    return f


@pytest.mark.parametrize("reader", list(READERS))
def test_an_overlong_line_is_cut_counted_and_said_by_every_reader(long_line_log, reader):
    p = subprocess.run([sys.executable, "-m", "diagnose", "--format", "json", str(long_line_log)],
                       capture_output=True, env=env(**READERS[reader]), cwd=ROOT, timeout=300)
    assert p.returncode in (0, 1), p.stderr.decode()
    doc = one(p.stdout)
    inp = doc["inputs"][0]
    assert inp["lines"] == LOG.read_bytes().count(b"\n") + 1
    assert any("1 line(s) longer than 4 MiB cut" in e for e in inp["errors"]), inp["errors"]
    # the log around the long line is read as without it
    plain = one(run_cli("--format", "json", LOG).stdout)
    assert doc["deployment"]["tensor_parallel_size"] == plain["deployment"]["tensor_parallel_size"]
    assert doc["verdict"] == plain["verdict"]


def test_a_file_that_is_one_giant_line_is_refused(tmp_path):
    f = tmp_path / "one-line.log"
    with open(f, "wb") as fh:
        fh.write(b"A" * (70 << 20))
    one_line_error(run_cli(f), "one-line.log", "no line end")


# -- whole documents -----------------------------------------------------------------------------------

def test_a_yaml_alias_bomb_is_refused(tmp_path):
    """Nine levels of nine aliases: 500 bytes that were 9**9 values to every walk (5 GB, a minute)."""
    lines = ["model: x", "backend: pytorch", 'a0: &a0 ["lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    f = tmp_path / "bomb.yaml"
    f.write_text("\n".join(lines) + "\n")
    one_line_error(run_cli(f), "bomb.yaml", "aliases")


def test_a_yaml_with_a_few_aliases_is_read(tmp_path):
    f = tmp_path / "options.yaml"
    f.write_text("defaults: &d\n  free_gpu_memory_fraction: 0.85\nkv_cache_config: *d\nbackend: pytorch\n"
                 "max_batch_size: 64\n")
    p = run_cli("--format", "json", f)
    assert p.returncode in (0, 1), p.stderr.decode()


def test_a_whole_json_document_over_the_bound_is_refused(tmp_path):
    f = tmp_path / "iterations.json"
    item = json.dumps({"iter": 1, "iterLatencyMS": 12.5, "numActiveRequests": 8, "numQueuedRequests": 0})
    f.write_text("[" + ",".join([item] * ((17 << 20) // len(item))) + "]")
    one_line_error(run_cli(f), "iterations.json", "larger than 16 MiB")


# -- samples thinned past a bound ---------------------------------------------------------------------

def test_rows_past_the_bound_are_thinned_evenly_per_series():
    from diagnose.evidence.model import Rows
    rows = Rows(1000, lambda r: r["gpu"])
    for t in range(20_000):
        for g in range(4):
            rows.append({"time": t, "gpu": g})
            assert rows[-1] == {"time": t, "gpu": g}        # the newest is last (parsers amend it)
    assert len(rows) <= 1000
    for g in range(4):
        times = [r["time"] for r in rows if r["gpu"] == g]
        assert times[0] == 0 and times[-1] >= 20_000 - 2 * rows.stride
        gaps = {b - a for a, b in zip(times, times[1:-1])}
        assert gaps == {rows.stride}                        # evenly spread over the whole input
    assert rows.dropped + len(rows) == 80_000


def test_rows_extended_at_once_are_what_one_append_each_gives():
    """Rows.extend puts rows that fit under the cap in at once: the same rows, thinning and state
    as appending them one by one, whatever the launches sharing the cap already hold."""
    import random

    from diagnose.evidence.model import Rows
    rng = random.Random(3)
    for _ in range(300):
        cap = rng.randint(1, 40)
        fast, plain = Rows(cap, lambda r: r["gpu"]), Rows(cap, lambda r: r["gpu"])
        other_f, other_p = Rows(cap, lambda r: r["gpu"]), Rows(cap, lambda r: r["gpu"])
        fast.share(other_f)
        plain.share(other_p)
        for t in range(rng.randint(0, 30)):
            row = {"time": t, "gpu": rng.randint(0, 2)}
            other_f.append(row)
            other_p.append(row)
        for _step in range(rng.randint(1, 6)):
            batch = [{"time": 100 + i, "gpu": rng.randint(0, 2)} for i in range(rng.randint(0, 25))]
            fast.extend(batch)
            for r in batch:
                plain.append(r)
            for a, b in ((fast, plain), (other_f, other_p)):
                assert list(a) == list(b) and a.stride == b.stride and a.dropped == b.dropped
                assert a._pending == b._pending and a.seen == b.seen
                assert sorted(a.order.values()) == sorted(b.order.values())


def test_rows_copied_for_a_follow_pass_are_what_a_pickled_copy_is():
    """rows_copied (a --follow pass's copy of its reading) copies Rows outside pickle: the same
    rows and state as pickle's copy, the caps shared as in the original, and appending to the
    copies gives what appending to pickle's copies gives while the originals stay as they were."""
    import pickle
    import random

    from diagnose.evidence.model import Rows, _gpu_series, rows_copied
    rng = random.Random(5)
    for _ in range(100):
        cap = rng.randint(1, 30)
        a, b, lone = Rows(cap, _gpu_series), Rows(cap, _gpu_series), Rows(cap, _gpu_series)
        a.share(b)
        for t in range(rng.randint(0, 80)):
            rng.choice((a, b, lone)).append({"time": t, "gpu": rng.randint(0, 2), "source": "x"})
        state = {"launches": [a, lone], "held": b}      # `b` only through a's shared cap, as a folded launch's
        before = pickle.dumps(state)
        with rows_copied():
            fast = pickle.loads(pickle.dumps(state))
        plain = pickle.loads(pickle.dumps(state))
        assert pickle.dumps(state) == before
        fa, fl, fb = *fast["launches"], fast["held"]
        assert fa.shared == [fa, fb] and fa.shared is fb.shared and fl.shared is None
        assert all(r is not s for r, s in zip(fa, a))
        for t in range(100, 100 + rng.randint(0, 60)):
            g = rng.randint(0, 2)
            for rows in (fast, plain):
                target = rows["launches"][t % 2] if t % 3 else rows["held"]
                target.append({"time": t, "gpu": g, "source": "x"})
        pa, pl, pb = *plain["launches"], plain["held"]
        for x, y in ((fa, pa), (fl, pl), (fb, pb)):
            assert list(x) == list(y) and x.stride == y.stride and x.dropped == y.dropped
            assert x._pending == y._pending and x.seen == y.seen
            assert sorted(x.order.values()) == sorted(y.order.values())
        assert pickle.dumps(state) == before


def test_stats_rows_past_the_bound_are_the_same_whichever_reader_read_them(monkeypatch, bulk_engine):
    """Past the bound, the C reader's run of stats lines counts a row the next one would take out
    again rather than making it (Rows.drops): over every real log with stats, with a bound small
    enough that each is thinned, the same rows, stride, dropped count and rows per series as the
    small-log path, which appends every row."""
    from diagnose.evidence import model
    from diagnose.sources import load, resolve
    from diagnose.sources.readers import bulk

    def reading(path, bulk_min):
        monkeypatch.setattr(bulk, "FAST_MIN_BYTES", bulk_min)
        r = load(resolve([str(path)])).stats_rows
        return list(r), r.stride, r.dropped, r.seen

    seen = 0
    for path in sorted((FIXTURES / "real").glob("*.log")):
        if path.stat().st_size > 3_000_000:
            continue
        monkeypatch.setattr(model, "MAX_STATS_ROWS", 10 ** 9)
        whole = reading(path, 1 << 40)[0]
        if len(whole) < 64:
            continue
        monkeypatch.setattr(model, "MAX_STATS_ROWS", len(whole) // 5)
        ref = reading(path, 1 << 40)            # the small-log path: every row appended
        assert ref[1] >= 4, path
        assert reading(path, 0) == ref, path    # the big-log reader, C or Python
        seen += 1
    assert seen >= 5


def test_a_long_stats_log_is_thinned_with_a_note(tmp_path, monkeypatch):
    """In-process with a small bound: the note says how many samples and which were kept."""
    from diagnose.evidence import model
    from diagnose.sources import load, resolve
    monkeypatch.setattr(model, "MAX_STATS_ROWS", 40)
    text = LOG.read_text()
    stats = [ln for ln in text.splitlines(keepends=True) if "Avg prompt throughput" in ln]
    assert stats
    f = tmp_path / "long.log"
    f.write_text(text + "".join(stats * (200 // len(stats) + 1)))
    ev = load(resolve([str(f)]))
    assert len(ev.stats_rows) <= 40
    assert any("engine stats samples: one in" in e for e in ev.inputs[0].errors), ev.inputs[0].errors


def test_a_scrape_of_too_many_series_is_read_in_part_with_a_note(tmp_path, monkeypatch):
    from diagnose.sources import load, resolve
    from diagnose.sources.formats import metrics_text
    monkeypatch.setattr(metrics_text, "MAX_SERIES", 10)
    f = tmp_path / "scrape.txt"
    f.write_text("# TYPE vllm:num_requests_running gauge\n" +
                 "".join(f'vllm:num_requests_running{{model_name="m",engine="{i}"}} 1\n' for i in range(50)))
    ev = load(resolve([str(f)]))
    assert any("40 samples of series past the first 10" in e for e in ev.inputs[0].errors), ev.inputs[0].errors


# -- a file cut while read ---------------------------------------------------------------------------

def test_a_file_truncated_while_read_is_noted(tmp_path):
    from diagnose.sources.readers.files import BLOCK, Input
    f = tmp_path / "shrinks.log"
    f.write_bytes(b"x" * (BLOCK * 3))
    inp = Input(str(f), str(f))
    blocks = inp.blocks()
    next(blocks)
    os.truncate(f, BLOCK + 10)
    rest = sum(len(b) for b in blocks)
    assert rest == 10
    assert inp.shrank == (BLOCK * 3, BLOCK + 10)


# -- Prometheus: answers bounded in size and time -------------------------------------------------------

def _prom(url, *args):
    return subprocess.run([sys.executable, "-m", "diagnose", "--prometheus", url, *args], capture_output=True,
                          env=env(), cwd=ROOT, timeout=120)


def test_a_prometheus_answer_too_big_is_refused():
    from prom_harness import BadServer
    with BadServer("huge", huge_mb=40) as s:
        one_line_error(_prom(s.url), "larger than 16 MiB", "--since")


def test_a_prometheus_that_drips_bytes_is_given_up_on_after_timeout():
    """One byte every 0.5 s never trips a socket read timeout; --timeout bounds the whole request."""
    from prom_harness import BadServer
    with BadServer("drip", drip_s=0.5) as s:
        one_line_error(_prom(s.url, "--timeout", "2"), "no complete answer within 2 s")


def test_slow_queries_end_at_the_deadline():
    """Each answer within --timeout, all of them not: --deadline ends the run, and says so.
    --timeout is well above --deadline so that a loaded machine (a late answer) still ends at the
    deadline, never at the per-request limit."""
    from prom_harness import BadServer
    with BadServer("slow", delay_s=0.5) as s:
        one_line_error(_prom(s.url, "--timeout", "10", "--deadline", "1.2"), "took more than 1.2 s in all",
                       "--deadline")
        assert len(s.requests) <= 3


def test_the_deadline_is_checked():
    p = _prom("http://127.0.0.1:9", "--deadline", "0")
    one_line_error(p, "--deadline")


def test_rows_are_plausible_exactly_where_every_number_of_every_row_is_within_bounds():
    """finish._plausible (told column by column, by min, max and sum) says what checking each int
    and float of each row says: NaN, infinities, ±1e15 and beyond are damage; text, times, flags
    and float subclasses are left alone. Where they are plausible it gives each key's values row
    by row (None where a row lacks the key): the columns Evidence.stats_columns starts from."""
    import random
    from datetime import datetime

    from diagnose.evidence.finish import HUGE, _plausible

    class F(float):
        pass

    def each(rows):
        return all(-HUGE < v < HUGE for r in rows for v in r.values() if v.__class__ in (float, int))

    rng = random.Random(11)
    odd = [float("nan"), float("inf"), -float("inf"), 1e15, -1e15, 10 ** 400, 1e308, -1e308, 0.0, -0.0, 0, 7,
           True, "1e309", None, datetime(2026, 1, 1), F("inf"), 2.5]
    for _ in range(2000):
        rows = [{k: rng.choice(odd if rng.random() < 0.2 else [None, 0.0, 1.5, 3, -2.0])
                 for k in rng.sample("abcd", rng.randint(0, 4))} for _ in range(rng.randint(0, 6))]
        cols = _plausible(rows)
        assert (cols is not None) == each(rows), rows
        if cols is not None:
            assert cols == {k: [r.get(k) for r in rows] for k in set().union(*rows)} or not rows, rows


def test_the_rows_token_changes_whenever_rows_other_than_the_newest_may_move():
    """Rows.token (what a --follow pass worked out of earlier rows holds while it is the same):
    appending keeps it, also past the bound where each append replaces the pending newest row;
    thinning and every list operation that can move or drop other rows replace it."""
    from diagnose.evidence.model import Rows, _stats_series

    rows = Rows(8, _stats_series)
    t = rows.token
    for i in range(8):
        rows.append({"source": "a", "line": i})
    assert rows.token is t
    rows.append({"source": "a", "line": 8})             # past the bound: thinned
    assert rows.token is not t
    t = rows.token
    for i in range(9, 13):                               # the pending newest replaced, nothing else moves
        rows.append({"source": "a", "line": i})
    assert rows.token is t
    for op in (lambda r: r.sort(key=lambda x: -x["line"]), lambda r: r.reverse(), lambda r: r.insert(0, {}),
               lambda r: r.remove(r[0]), lambda r: r.pop(), lambda r: r.__setitem__(slice(None), list(r)),
               lambda r: r.__delitem__(0), lambda r: r.clear()):
        before = rows.token
        op(rows)
        assert rows.token is not before
