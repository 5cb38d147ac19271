"""How long hostile input takes: `python bench/hostile_lines.py [--repeat N]`.

Prints one row per case with the wall time, so a regression to a hang or to quadratic work shows as a
number, not as a flaky timed test. Cases:
* megabyte lines that hold a keyword a parser acts on (the same lines tests/test_fuzz.py checks for
  correctness), each after the head of a healthy vLLM log;
* `diagnose --prometheus` against a server that accepts the connection and never answers, with
  `--timeout 5` (the CLI should give up in about the timeout, not hang).
Goal column: megabyte lines ≤ 20 s each, the hanging server ≤ 20 s.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MEGABYTE_LINES = {
    "dict": "INFO 01-02 03:04:05 [arg_utils.py:1] non-default args: {" + "'a': 1, " * 150_000,
    "parens": "INFO 01-02 03:04:05 [core.py:1] Initializing a V1 LLM engine (v0.10.2) with config: " + "x=(" * 200_000,
    "server-args": "[2025-01-02 03:04:05] server_args=ServerArgs(" + "tp_size=2, " * 100_000,
    "deep-json": '[TensorRT-LLM][INFO] {"iterLatencyMS": ' + '{"a":' * 200_000 + "1",
    "digits": "INFO 01-02 03:04:05 [loggers.py:1] Engine 000: Avg prompt throughput: " + "9" * 1_000_000 + " tokens/s",
    "repeated-keyword": "Avg prompt throughput: " * 60_000,
    "escapes": "\x1b[" * 500_000,
}
GOAL_S = 20.0


def _with_head(line: str) -> bytes:
    head = (ROOT / "fixtures" / "scenarios" / "healthy.log").read_bytes()[:4000]
    return head[: head.rfind(b"\n") + 1] + line.encode() + b"\n" + line.encode()


def time_lines(repeat: int) -> list[tuple[str, float]]:
    sys.path.insert(0, str(ROOT))
    from diagnose.sources import InputError, load, resolve
    rows = []
    with tempfile.TemporaryDirectory(prefix="diagnose-bench-") as d:
        for name, line in MEGABYTE_LINES.items():
            path = Path(d) / f"{name}.log"
            path.write_bytes(_with_head(line))
            best = float("inf")
            for _ in range(repeat):
                t = time.perf_counter()
                try:
                    load(resolve([str(path)]))
                except InputError:
                    pass
                best = min(best, time.perf_counter() - t)
            rows.append((f"megabyte line: {name}", best))
    return rows


def time_hanging_prometheus() -> tuple[str, float]:
    sys.path.insert(0, str(ROOT / "tests"))
    from prom_harness import BadServer
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    with BadServer("hang") as bad:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "diagnose", "--prometheus", bad.url, "--timeout", "5"],
                       capture_output=True, env=env, timeout=300)
        took = time.perf_counter() - t
    return ("--prometheus, server never answers, --timeout 5", took)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1, help="runs per megabyte line; the best is shown")
    args = ap.parse_args()
    rows = time_lines(args.repeat) + [time_hanging_prometheus()]
    width = max(len(n) for n, _ in rows)
    print(f"{'case':<{width}}  {'seconds':>8}  goal")
    for name, s in rows:
        print(f"{name:<{width}}  {s:>8.2f}  {'ok' if s <= GOAL_S else 'MISS'} (≤ {GOAL_S:.0f} s)")
    return 0 if all(s <= GOAL_S for _, s in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
