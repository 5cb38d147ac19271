"""A folder of small logs is read by worker processes (sources/loading.read_inputs): the report is
the one a single process gives, skipped inputs included, and what comes back from a worker keeps
behaving as what was read in place (bounded samples go on being thinned evenly)."""
from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

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
