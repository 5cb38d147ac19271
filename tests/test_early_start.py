"""A big log named on the command line is started by the C reader before the program's imports
(diagnose/sources/readers/early.py): the run must read it exactly as a run that starts it itself,
and a guess the run does not use (an option's value, a file changed since) must change nothing."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading

import pytest

from conftest import ROOT, one

SEED = ROOT / "fixtures" / "seed003" / "realtime.log"
BIG = 1 << 16       # FAST_MIN_BYTES here: the seed log (~64 KB) repeated is a big log


@pytest.fixture
def native(monkeypatch):
    from diagnose.sources.readers import bulk, early, native
    if native.load() is None:
        pytest.skip(f"C scanner not available here: {native.why_not}")
    monkeypatch.setattr(bulk, "FAST_MIN_BYTES", BIG)
    yield
    early.drop()


def _big(tmp_path, name="big.log", times=6):
    p = tmp_path / name
    p.write_bytes(SEED.read_bytes() * times)
    return p


def _analysis(paths):
    from diagnose.pipeline import analyze_all
    return [json.dumps(a.to_json(), sort_keys=True, default=str) for a in analyze_all([str(p) for p in paths])]


def _readers_alive():
    return [t.name for t in threading.enumerate() if t.name.startswith("diagnose-")]


def _spy_take(monkeypatch):
    """What each early.take the run made returned."""
    from diagnose.sources.readers import early
    calls = []
    take = early.take

    def spy(path):
        calls.append(take(path))
        return calls[-1]
    monkeypatch.setattr(early, "take", spy)
    return calls


def test_a_log_started_before_the_imports_reads_as_one_the_run_starts(tmp_path, monkeypatch, native):
    from diagnose.sources.readers import early
    big = _big(tmp_path)
    ref = _analysis([big])
    assert early.start(["--format", "json", str(big)])
    taken = _spy_take(monkeypatch)
    assert _analysis([big]) == ref
    assert len(taken) == 1 and taken[0] is not None      # the run read through the early start
    assert not _readers_alive()


def test_a_guess_the_run_does_not_read_is_stopped(tmp_path, monkeypatch, native):
    """`--baseline old.log new.log`: the first big file named is the baseline, read later by a run
    of its own; the early start on it is stopped when the main inputs' reading begins."""
    from diagnose.sources.readers import early
    old, new = _big(tmp_path, "old.log"), _big(tmp_path, "new.log", 3)
    ref = _analysis([new])
    assert early.start(["--baseline", str(old), str(new)])
    taken = _spy_take(monkeypatch)
    assert _analysis([new]) == ref
    assert taken == [None]
    assert not _readers_alive()         # stopped and waited for: a folder after it may fork


def test_a_file_changed_after_the_start_is_read_again(tmp_path, monkeypatch, native):
    from diagnose.sources.readers import early
    big = _big(tmp_path)
    assert early.start([str(big)])
    with big.open("ab") as f:
        f.write(SEED.read_bytes())
    taken = _spy_take(monkeypatch)
    from diagnose.pipeline import analyze_all
    a = analyze_all([str(big)])[0]
    assert taken == [None]
    assert a.evidence.inputs[0].lines == big.read_bytes().count(b"\n")     # the whole file as it is now
    assert not _readers_alive()


def test_the_first_big_plain_file_among_the_arguments_is_started(tmp_path, native):
    from diagnose.sources.readers import early
    small = tmp_path / "small.log"
    small.write_bytes(SEED.read_bytes()[:1000])
    gz = tmp_path / "big.log.gz"
    gz.write_bytes(gzip.compress(SEED.read_bytes() * 6))
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x00\x01" * BIG)
    first, second = _big(tmp_path, "first.log"), _big(tmp_path, "second.log")
    assert early.start(["-f", "json", str(tmp_path / "missing.log"), str(small), str(gz), str(tmp_path),
                        str(binary), str(first), str(second)])
    assert early.take(str(binary)) is None
    assert early.take(str(second)) is None
    p = early.take(str(first))
    assert p is not None
    assert sum(s.lines for s in p) == first.read_bytes().count(b"\n")
    p.close()
    p.join()
    assert not early.start(["-f", "json", str(small), str(gz), "-"])
    assert not early.start(["--follow", str(first)])
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)             # never opened: a read would take the writer's lines or wait for one
    assert not early.start([str(fifo)])
    assert not _readers_alive()


def _run(args, tmp_path, **env):
    e = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", XDG_CACHE_HOME=str(tmp_path / "cache"), **env)
    return subprocess.run([sys.executable, "-m", "diagnose", *args], env=e, cwd=tmp_path, capture_output=True,
                          timeout=300)


def test_the_program_reports_a_big_log_alike_however_it_is_named(tmp_path, native):
    """As the program: the file named as it is (started early) and through a glob (not guessed),
    alone and as a baseline's file, give the same report."""
    big = _big(tmp_path)
    env = {"DIAGNOSE_BULK_MIN_BYTES": str(BIG)}
    named = _run(["--format", "json", "big.log"], tmp_path, **env)
    globbed = _run(["--format", "json", "big.lo?"], tmp_path, **env)
    assert named.returncode == globbed.returncode == 0, named.stderr.decode() + globbed.stderr.decode()
    assert named.stderr == globbed.stderr == b""
    assert named.stdout == globbed.stdout
    assert one(named.stdout)["inputs"][0]["lines"] == big.read_bytes().count(b"\n")
    both = _run(["--format", "json", "--baseline", "big.log", "big.lo?"], tmp_path, **env)
    assert both.returncode == 0, both.stderr.decode()
    assert one(both.stdout)["inputs"] == one(named.stdout)["inputs"]
