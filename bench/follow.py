#!/usr/bin/env python3
"""What `diagnose --follow` costs while a log grows: CPU share of one core and resident memory.

    python bench/follow.py [--rate 10000] [--seconds 60] [--interval 5s]

Starts `diagnose --follow LOG --format json` on a vLLM log that a writer thread grows by `--rate`
lines per second (access and request lines, with a stats line every 10 s, as a busy server
writes), and samples the follower's CPU time and RSS from /proc every second. Prints, per 10 s of
run time: the log's size, the follower's CPU % of one core over that stretch, its RSS. Goals:
CPU < 10 % of one core at 10,000 lines/s, also on a log already big (`--start-mb`: as after hours), RSS flat. Standard library only; Linux.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "fixtures" / "seed003" / "realtime.log"
ACCESS = 'INFO:     10.0.0.{h}:5{p:04d} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
STATS = ("INFO {t} [loggers.py:127] Engine 000: Avg prompt throughput: 812.0 tokens/s, Avg generation "
         "throughput: 1404.2 tokens/s, Running: 48 reqs, Waiting: 3 reqs, GPU KV cache usage: 61.0%, "
         "Prefix cache hit rate: 12.0%\n")


def _proc(pid: int) -> tuple[float, int]:
    """(CPU seconds, RSS bytes) of a process."""
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    cpu = (int(f[11]) + int(f[12])) / tick
    with open(f"/proc/{pid}/statm") as fh:
        rss = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return cpu, rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=int, default=10_000, help="lines per second appended")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--interval", default="5s")
    ap.add_argument("--start-mb", type=int, default=0,
                    help="grow the log to this size before following starts (as after hours at this rate)")
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="diagnose-follow-"))
    log = d / "server.log"
    log.write_bytes(SEED.read_bytes())
    if a.start_mb:
        block = "".join(ACCESS.format(h=i % 250, p=i % 10_000) for i in range(10_000)).encode()
        with log.open("ab") as fh:
            for _ in range(a.start_mb * 1_000_000 // len(block) + 1):
                fh.write(block)
    stop = threading.Event()

    def writer():
        n, t0 = 0, time.monotonic()
        with log.open("a") as fh:
            while not stop.is_set():
                due = int((time.monotonic() - t0) * a.rate)
                lines = [ACCESS.format(h=i % 250, p=i % 10_000) for i in range(n, due)]
                if n // (a.rate * 10) != due // (a.rate * 10):
                    lines.append(STATS.format(t=time.strftime("%m-%d %H:%M:%S")))
                fh.write("".join(lines))
                fh.flush()
                n = due
                time.sleep(0.05)

    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-m", "diagnose", "--follow", str(log), "--format", "json",
                          "--interval", a.interval], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO)
    time.sleep(2 + a.start_mb / 100)     # start-up: interpreter, imports, the first pass
    w = threading.Thread(target=writer, daemon=True)
    w.start()
    print(f"rate {a.rate} lines/s for {a.seconds} s, --interval {a.interval}")
    print(f"{'t s':>5} {'log MB':>8} {'CPU % of a core':>16} {'RSS MB':>8}")
    base_cpu, _ = _proc(p.pid)
    t0 = time.monotonic()
    last_cpu, last_t = base_cpu, t0
    peak = 0
    try:
        while time.monotonic() - t0 < a.seconds:
            time.sleep(10)
            cpu, rss = _proc(p.pid)
            now = time.monotonic()
            peak = max(peak, rss)
            print(f"{now - t0:5.0f} {log.stat().st_size / 1e6:8.1f} {100 * (cpu - last_cpu) / (now - last_t):16.1f} {rss / 1e6:8.1f}")
            last_cpu, last_t = cpu, now
        cpu, _ = _proc(p.pid)
        print(f"whole run: CPU {100 * (cpu - base_cpu) / (time.monotonic() - t0):.1f} % of a core, peak RSS {peak / 1e6:.0f} MB")
    finally:
        stop.set()
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
        for f in d.iterdir():
            f.unlink()
        d.rmdir()


if __name__ == "__main__":
    main()
