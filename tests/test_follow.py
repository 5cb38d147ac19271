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

