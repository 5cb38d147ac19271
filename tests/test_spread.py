"""A folder of small logs is read by worker processes (sources/loading.read_inputs): the report is
the one a single process gives, skipped inputs included, and what comes back from a worker keeps
behaving as what was read in place (bounded samples go on being thinned evenly)."""
from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import report
from diagnose.evidence.model import Rows, _stats_series
from diagnose.sources import loading
from diagnose.sources.readers.files import resolve

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "real"


def _folder(tmp_path: Path) -> Path:
    d = tmp_path / "logs"
    d.mkdir()
    logs = sorted(REAL.glob("*.log"), key=lambda p: p.name)[:24]
    for p in logs:
        shutil.copy(p, d / p.name)
    (d / "empty.log").write_bytes(b"")
    (d / "core.bin").write_bytes(b"\x7fELF\x00\x00" + bytes(range(256)) * 40)
    assert sum(p.stat().st_size for p in d.iterdir()) >= loading.SPREAD_MIN_BYTES
    return d


def _run(folder: Path, jobs: str) -> dict:
    env = dict(os.environ, DIAGNOSE_JOBS=jobs, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "diagnose", "--format", "json", str(folder)], capture_output=True,
                       env=env, cwd=ROOT, timeout=300)
    assert p.returncode in (0, 1), p.stderr.decode()
    return report(p.stdout)


def test_a_folder_read_by_two_processes_gives_the_report_one_process_gives(tmp_path):
    d = _folder(tmp_path)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert loading._workers(resolve([str(d)])) == min(2, cores)
    one, two = _run(d, "1"), _run(d, "2")
    assert two == one
    skipped = {s["path"].rsplit("/", 1)[-1] for s in one["skipped"]}
    assert {"empty.log", "core.bin"} <= skipped, skipped


def test_what_a_worker_read_is_what_was_read_in_place(tmp_path):
    d = _folder(tmp_path)
    inputs = resolve([str(d)])
    here = [loading._read_or_error(i, None) for i in inputs]
    for a, b in zip(here, [pickle.loads(pickle.dumps(r)) for r in here]):
        if isinstance(a, Exception):
            assert type(b) is type(a) and str(b) == str(a)
            continue
        assert b.info.to_json() == a.info.to_json()
        for p, q in zip(a.pieces, b.pieces):
            assert (q.first, q.last, q.launched) == (p.first, p.last, p.launched)
            assert list(q.ev.stats_rows) == list(p.ev.stats_rows)
            assert {k: f.value for k, f in q.ev.facts.items()} == {k: f.value for k, f in p.ev.facts.items()}


def test_thinned_rows_go_on_thinning_evenly_after_a_round_trip():
    def rows(n):
        r = Rows(8, _stats_series)
        for i in range(n):
            r.append({"source": "a", "i": i})
        return r

    kept = rows(40)
    back = pickle.loads(pickle.dumps(rows(20)))
    for i in range(20, 40):
        back.append({"source": "a", "i": i})
    assert [x["i"] for x in back] == [x["i"] for x in kept]
    assert back.dropped == kept.dropped and back.stride == kept.stride


# -- the Python reader's blocks classified by worker processes (readers/spread.py) ----------------

def _blocks(path: Path, size: int):
    with open(path, "rb") as f:
        while b := f.read(size):
            yield b


def _segment_fields(seg) -> dict:
    return {k: getattr(seg, k) for k in type(seg).__slots__ if k not in ("fd",)}


def test_the_python_readers_runs_classified_by_workers_are_the_segments_it_makes_alone(monkeypatch):
    """Every real log, cut into small blocks so that most runs go to the two workers: the same
    segments, field by field and in order, as scanner.segments makes in this process; and the
    workers are gone afterwards."""
    from diagnose.sources.readers import scanner, spread
    monkeypatch.setattr(spread, "RUN_MIN_BYTES", 1)
    sent = 0
    for path in sorted(REAL.glob("*.log")):
        if path.stat().st_size < 200_000:
            continue
        want = [_segment_fields(s) for s in scanner.segments(_blocks(path, 64 << 10))]
        pool = spread.Workers(str(path), 2)
        got = [_segment_fields(s) for s in spread.segments(_blocks(path, 64 << 10), pool)]
        assert got == want, path
        assert not any(p.is_alive() for p in pool.procs)
        sent += len(want)
    assert sent >= 100


def test_a_run_the_file_no_longer_holds_is_classified_here_and_a_stopped_reading_stops_the_workers(tmp_path, monkeypatch):
    """A worker that reads other bytes than this process has (the file rewritten meanwhile) sends
    nothing back and the run is classified here: the segments are still those of the bytes read.
    Reading stopped after the first segment stops the workers too."""
    from diagnose.sources.readers import scanner, spread
    monkeypatch.setattr(spread, "RUN_MIN_BYTES", 1)
    src = sorted(REAL.glob("*.log"), key=lambda p: -p.stat().st_size)[0]
    f = tmp_path / "moving.log"
    shutil.copy(src, f)
    blocks = list(_blocks(f, 64 << 10))
    want = [_segment_fields(s) for s in scanner.segments(iter(blocks))]
    f.write_bytes(bytes(reversed(f.read_bytes())))     # the same size, other bytes
    pool = spread.Workers(str(f), 2)
    assert [_segment_fields(s) for s in spread.segments(iter(blocks), pool)] == want

    pool = spread.Workers(str(f), 2)
    segs = spread.segments(iter(blocks), pool)
    next(segs)
    segs.close()
    assert not any(p.is_alive() for p in pool.procs)


def test_a_big_log_read_by_the_workers_gives_the_report_one_process_gives(tmp_path):
    """End to end without the C reader (DIAGNOSE_NATIVE=0): a log past the workers' threshold
    (lowered here) gives the same JSON report with the workers as with DIAGNOSE_JOBS=1."""
    log = tmp_path / "big.log"
    srcs = sorted(REAL.glob("*.log"), key=lambda p: -p.stat().st_size)[:3]
    log.write_bytes(b"".join(p.read_bytes() for p in srcs))
    code = ("import sys; from diagnose.sources.readers import bulk, spread; bulk.FAST_MIN_BYTES = 0; "
            "spread.SPREAD_MIN_BYTES = 0; spread.RUN_MIN_BYTES = 1; made = spread.Workers.__init__\n"
            "def counted(self, *a):\n    sys.stderr.write('workers\\n'); made(self, *a)\n"
            "spread.Workers.__init__ = counted\n"
            "from diagnose.cli import main; sys.argv = ['diagnose', '--format', 'json', sys.argv[1]]; main()")
    out = {}
    for jobs in ("1", "2"):
        env = dict(os.environ, PYTHONPATH=str(ROOT), DIAGNOSE_NATIVE="0", DIAGNOSE_JOBS=jobs)
        p = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, env=env,
                           cwd=str(ROOT), timeout=300)
        assert p.returncode in (0, 1), p.stderr
        assert ("workers" in p.stderr) == (jobs == "2"), p.stderr
        out[jobs] = json.loads(p.stdout)
    for doc in out.values():
        doc.pop("generated_at", None)
    assert out["1"] == out["2"]


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (/proc/PID/stat's fourth field: kernels without the
    `children` file too)."""
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        kids.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return kids


def _group_alive(pgid: int) -> list[int]:
    alive = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    alive.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return alive


@pytest.mark.parametrize("case", ["folder", "big log without C"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
def test_a_run_with_worker_processes_stopped_by_a_signal_ends_at_once_and_leaves_no_worker(tmp_path, case, sig):
    """Ctrl-C reaches the whole process group (the workers too), SIGTERM the command alone: either
    way the run ends promptly with its one line and 128 + the signal, no worker's traceback on the
    terminal, and no worker left behind. (Workers inherited the command's handlers: they printed
    tracebacks, then ignored every further signal, and the run waited for them forever.)"""
    if case == "folder":
        target, env = _folder(tmp_path), {}
        code = "import sys; from diagnose.cli import main; sys.argv = ['diagnose', '--format', 'json', sys.argv[1]]; main()"
    else:
        target = tmp_path / "big.log"
        srcs = sorted(REAL.glob("*.log"), key=lambda p: -p.stat().st_size)[:4]
        target.write_bytes(b"".join(p.read_bytes() for p in srcs) * 3)
        env = {"DIAGNOSE_NATIVE": "0"}
        code = ("import sys; from diagnose.sources.readers import bulk, spread; bulk.FAST_MIN_BYTES = 0; "
                "spread.SPREAD_MIN_BYTES = 0; spread.RUN_MIN_BYTES = 1\n"
                "from diagnose.cli import main; sys.argv = ['diagnose', '--format', 'json', sys.argv[1]]; main()")
    p = subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=dict(os.environ, PYTHONPATH=str(ROOT), DIAGNOSE_JOBS="2", **env), cwd=str(ROOT),
                         start_new_session=True)
    end = time.monotonic() + 60
    while not _children(p.pid) and p.poll() is None and time.monotonic() < end:
        time.sleep(0.01)
    assert p.poll() is None, "finished before its workers were seen: " + p.stderr.read().decode()[-300:]
    time.sleep(0.2)
    if sig == signal.SIGINT:
        os.killpg(p.pid, sig)
    else:
        p.send_signal(sig)
    t0 = time.monotonic()
    out, err = p.communicate(timeout=60)
    assert time.monotonic() - t0 < 15
    assert p.returncode == 128 + sig and err == b"diagnose: interrupted\n", err.decode()[-600:]
    end = time.monotonic() + 10
    while _group_alive(p.pid) and time.monotonic() < end:
        time.sleep(0.05)
    assert _group_alive(p.pid) == []
