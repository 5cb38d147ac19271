#!/usr/bin/env python3
"""Many launches in one file: a restart loop costs per line, not per launch, and its memory stays flat.

    python bench/launches.py [--counts 20,200,2000] [--stats 0] [--workdir /tmp/diagnose-launches]

Each case writes one file of N launches of the same server, one after the other (the bundled
seed-003 log's start-up, with `--stats S` engine stats lines after each), runs
`python -m diagnose --format json` on it and prints wall time, peak RSS, and the time per launch
and per line. A run with N launches read as pieces of their own would grow in memory with N; past
`loading.FOLD_AFTER` each launch that ends joins the earlier one of its server as it is read.
Standard library only; the files are deleted afterwards unless --keep.
"""
from __future__ import annotations

import argparse
import datetime
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.run import run_timed  # noqa: E402

SEED = REPO / "fixtures" / "seed003" / "realtime.log"


def write_case(path: Path, launches: int, stats: int) -> int:
    """The seed's start-up (its stats lines dropped) `launches` times, each followed by `stats`
    stats lines ten seconds apart; returns the number of lines."""
    head = [x for x in SEED.read_text().splitlines(keepends=True)[:200] if "throughput" not in x]
    t = datetime.datetime(2025, 10, 28, 14, 0, 0)
    n = 0
    with path.open("w") as f:
        for _ in range(launches):
            f.writelines(head)
            n += len(head)
            for i in range(stats):
                t += datetime.timedelta(seconds=10)
                f.write(f"(APIServer pid=2183417) INFO {t:%m-%d %H:%M:%S} [loggers.py:127] Engine 000: Avg prompt "
                        f"throughput: {i % 50}.0 tokens/s, Avg generation throughput: {300 + i % 70}.0 tokens/s, "
                        f"Running: {i % 30} reqs, Waiting: {i % 3} reqs, GPU KV cache usage: {i % 90}.0%, "
                        "Prefix cache hit rate: 10.0%\n")
            n += stats
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default="20,200,2000", help="launches per file, comma-separated")
    ap.add_argument("--stats", type=int, default=0, help="engine stats lines after each launch")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    work = Path(a.workdir or tempfile.mkdtemp(prefix="diagnose-launches-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    print(f"{'launches':>9} {'MB':>8} {'lines':>9} {'wall s':>8} {'RSS MB':>7} {'ms/launch':>10} {'us/line':>8}")
    try:
        for count in (int(x) for x in a.counts.split(",")):
            f = work / f"launches-{count}-{a.stats}.log"
            lines = write_case(f, count, a.stats)
            r = run_timed([sys.executable, "-m", "diagnose", "--format", "json", str(f)], cwd=REPO, env=env)
            if r.rc not in (0, 1):
                print(f"diagnose exited {r.rc}: {r.err.decode()[-500:]}", file=sys.stderr)
                return 1
            print(f"{count:>9} {f.stat().st_size / 1e6:>8.1f} {lines:>9} {r.wall:>8.2f} {r.maxrss_mb:>7.0f} "
                  f"{1000 * r.wall / count:>10.2f} {1e6 * r.wall / lines:>8.1f}")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
