"""`--follow`: a growing log is diagnosed again as lines arrive; conditions that appear only in
appended lines are reported as new; SIGINT ends with the final report and exit 0; a rotated or
truncated file is followed by name, as `tail -F` does."""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time

import pytest

from conftest import FIXTURES, ROOT, report

SEED = (FIXTURES / "seed003" / "realtime.log").read_text()
# The server's first lines, before its engine starts: nothing to find yet.
HEAD = "".join(SEED.splitlines(keepends=True)[:3])
REST = "".join(SEED.splitlines(keepends=True)[3:])


def _follow(path, *extra) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    return subprocess.Popen([sys.executable, "-m", "diagnose", "--follow", str(path), "--interval", "0.3s",
                             "--format", "json", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)


def _lines_until(p: subprocess.Popen, want, timeout: float = 60) -> list[dict]:
    """JSON lines from the running process until `want(line)` holds."""
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    got, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        if not sel.select(timeout=max(0.0, end - time.monotonic())):
            break
        line = p.stdout.readline()
        if not line:
            break
        doc = json.loads(line)
        got.append(report(line) if "schema_version" in doc else doc)     # a report, or a note
        if want(got[-1]):
            return got
    p.kill()
    raise AssertionError(f"not seen within {timeout}s: {got}\n{p.stderr.read().decode()[-2000:]}")


def _ids(doc) -> set:
    return {f["id"] for a in doc.get("analyses", []) for f in a["findings"]}


def test_appended_eager_mode_start_up_is_reported_as_new_and_sigint_gives_the_final_report(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(HEAD)
    p = _follow(log)
    first = _lines_until(p, lambda d: "changes" in d)[-1]
    assert "cuda-graphs-disabled" not in _ids(first)
    assert first["interval_s"] >= 0.3     # the interval asked for, or more when a pass is dear: never less
    with log.open("a") as fh:                       # the engine starts in eager mode, stats follow
        fh.write(REST)
    seen = _lines_until(p, lambda d: "cuda-graphs-disabled" in (d.get("changes") or {}).get("new", []))[-1]
    assert "cuda-graphs-disabled" in _ids(seen)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    final = report(out.decode().strip().splitlines()[-1])
    assert p.returncode == 0, err.decode()[-2000:]
    assert final.get("final") is True and "cuda-graphs-disabled" in _ids(final)
    assert "Traceback" not in err.decode()


def test_a_truncated_and_rotated_log_is_followed_by_name(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(SEED)
    p = _follow(log, "--fail-on", "high")
    _lines_until(p, lambda d: "cuda-graphs-disabled" in _ids(d))
    os.rename(log, tmp_path / "server.log.1")      # rotation: a new, short file under the same name
    log.write_text(HEAD)
    cleared = _lines_until(p, lambda d: "cuda-graphs-disabled" in (d.get("changes") or {}).get("cleared", []))[-1]
    assert not _ids(cleared) & {"cuda-graphs-disabled", "tp-for-small-model"}
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=60)
    assert p.returncode == 0                       # nothing at or above high in the final report


def test_follow_refuses_what_it_cannot_follow(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    for args, msg in ((["--follow", "-"], "not stdin"), (["--follow", str(FIXTURES / "seed003" / "realtime.log"), "--format", "markdown"], "not --format markdown"),
                      (["--follow", str(FIXTURES / "seed003" / "realtime.log"), "--interval", "0s"], "more than 0s")):
        r = subprocess.run([sys.executable, "-m", "diagnose", *args], capture_output=True, env=env, cwd=ROOT, timeout=60,
                           input=b"")
        assert r.returncode == 2 and msg in r.stderr.decode(), (args, r.stderr.decode())


def test_the_refresh_slows_when_a_pass_costs_more_than_its_share_of_a_core():
    """A log followed for hours: each pass reads more. The wait after a pass keeps the average
    CPU of following at CPU_SHARE of a core or less, and is the interval when passes are cheap."""
    from diagnose.live import CPU_SHARE, pace
    assert pace(5, 0.05, 0.05) == 5
    for cpu, wall in [(1.2, 0.8), (4.0, 2.5), (0.5, 0.5)]:
        wait = pace(5, cpu, wall)
        assert wait >= 5 and cpu / (wall + wait) <= CPU_SHARE + 1e-9
    assert pace(5, 1.2, 0.8) > 5



# -- a followed file read in parts is the file read whole --------------------------------------

REAL = sorted((FIXTURES / "real").glob("*.log"))


def _analysis(path) -> list:
    from diagnose.pipeline import analyze_all
    docs = [a.to_json() for a in analyze_all([str(path)])]
    for d in docs:
        d.pop("elapsed_s", None)
    return docs


def _cuts(data: bytes, parts: int, seed: int) -> list[int]:
    """Where the file is when each pass reads it: some at a line's end, one in the middle of a line."""
    import random
    rnd = random.Random(seed)
    ends = sorted(rnd.sample(range(1, len(data)), min(parts, len(data) - 1)))
    return ends + [len(data)]


@pytest.mark.parametrize("path,reader", [(p, "small") for p in REAL[::2]] + [(p, "big") for p in REAL[1::4]],
                         ids=lambda x: getattr(x, "name", x))
def test_a_log_followed_as_it_grows_gives_the_report_of_the_whole_log(path, reader, tmp_path, monkeypatch):
    """Each pass reads only what was appended (sources/following.py): after the last one the
    report is what diagnosing the whole file gives, wherever the passes fell (in the middle of a
    line, of a config dump, of a traceback). Every other real log on the small-log path; every
    fourth of the rest with the big logs' reader (C where built) for the whole file and each part."""
    from diagnose.sources import following, loading
    from diagnose.sources.readers import bulk
    if reader == "big":
        monkeypatch.setattr(bulk, "FAST_MIN_BYTES", 0)
    data = path.read_bytes()
    whole = _analysis(path)
    log = tmp_path / path.name
    log.write_bytes(b"")
    monkeypatch.setattr(loading, "FOLLOWING", following.Following())
    for end in _cuts(data, 3, seed=len(data)):
        with log.open("ab") as fh:
            fh.write(data[log.stat().st_size:end])
        try:
            got = _analysis(log)
        except Exception as e:          # the first lines may not be a log yet: said, as without --follow
            from diagnose.sources import InputError
            assert isinstance(e, InputError), e
    got = json.loads(json.dumps(got).replace(str(log), str(path)))
    whole = json.loads(json.dumps(whole))
    if reader == "big":
        # the big logs' readers estimate what they never hand on from samples of each part: the
        # share understood within the tolerance tests/test_readers_agree.py allows, the rest equal
        for g, w in zip(got, whole):
            for a, b in zip(g["inputs"], w["inputs"]):
                gap = abs((a["coverage"]["share"] or 0) - (b["coverage"]["share"] or 0))
                assert gap <= 0.15 or gap * b["lines"] <= 10, (path.name, gap)
                for k in ("coverage", "recognised_lines", "unrecognised_lines"):
                    a.pop(k), b.pop(k)
    assert got == whole, path.name


def test_what_a_pass_worked_out_of_the_rows_read_before_is_used_again_and_gives_the_whole_logs_report(tmp_path, monkeypatch):
    """A --follow pass checks and converts only the stats rows read since the last pass (Rows.memo,
    finish._plausible, Evidence.stats_columns), the newest row again (a parser may amend it); rows
    thinned in between (Rows.token) are read anew. Over many passes, across a new launch appended
    and the rows' bound crossed, the last pass's report is the whole log's, and the memo was used."""
    from diagnose.evidence import finish as fin
    from diagnose.evidence import model
    from diagnose.sources import following, loading
    path = max(REAL, key=lambda p: p.read_bytes().count(b"throughput: "))
    data = path.read_bytes()
    data = data + data          # a second launch of it, appended while followed
    monkeypatch.setattr(model, "MAX_STATS_ROWS", max(40, data.count(b"throughput: ") // 3))
    whole_log = tmp_path / "whole.log"
    whole_log.write_bytes(data)
    whole = _analysis(whole_log)
    reused = []
    plausible = fin._plausible

    def counted(rows):
        src = getattr(rows, "copied_from", None)
        reused.append(src is not None and src[0].memo is not None and src[0].memo["token"] is src[1]
                      and rows.token is src[1])
        return plausible(rows)

    monkeypatch.setattr(fin, "_plausible", counted)
    log = tmp_path / "whole.log.followed"
    log.write_bytes(b"")
    monkeypatch.setattr(loading, "FOLLOWING", following.Following())
    for end in _cuts(data, 12, seed=7):
        with log.open("ab") as fh:
            fh.write(data[log.stat().st_size:end])
        try:
            got = _analysis(log)
        except Exception as e:
            from diagnose.sources import InputError
            assert isinstance(e, InputError), e
    got = json.loads(json.dumps(got).replace(str(log), str(whole_log)))
    assert got == json.loads(json.dumps(whole))
    assert sum(reused) >= 3, reused
