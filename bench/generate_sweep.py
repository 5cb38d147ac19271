#!/usr/bin/env python3
"""Write a load sweep with a known knee, as `vllm bench serve --save-result` writes one run per file.

    python bench/generate_sweep.py OUTDIR [--knee 32] [--loads 1,2,4,...] [--fail-from 64] [--rate]

The model of the server: each running request decodes at 1000 / TPOT tokens/s; up to the knee
every request runs at once at the base TPOT, so throughput grows in proportion to the load; past
it the GPU is saturated: throughput stays flat, TPOT grows with the load, and the requests beyond
the knee wait, so TTFT grows too. Doubling the load at the knee therefore adds nothing and
doubles TPOT: by the knee rule (signals/sweep.py) the knee is exactly `--knee`. `--fail-from`
makes every run from that load on lose 10 % of its requests. Standard library only: tests import
`sweep_runs` / `write_sweep`.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

BASE_TPOT_MS = 20.0
BASE_TTFT_MS = 80.0
OUTPUT_LEN = 256
INPUT_LEN = 512


def sweep_runs(loads, knee: float | None, fail_from: float | None = None, rate: bool = False,
               model: str = "example/generated-8b") -> list[dict]:
    from datetime import datetime, timedelta
    runs = []
    at = datetime(2026, 11, 25, 12, 0, 0)        # runs one after another, 10 s apart
    for c in loads:
        eff = c if knee is None else min(c, knee)
        over = 1.0 if knee is None or c <= knee else c / knee
        tpot = BASE_TPOT_MS * over
        ttft = BASE_TTFT_MS * (1 + 0.02 * eff) * (over ** 2)       # queueing past the knee
        out_tps = eff * 1000.0 / BASE_TPOT_MS
        n = max(64, int(4 * c))
        failed = n // 10 if fail_from is not None and c >= fail_from else 0
        done = n - failed
        runs.append({
            "date": at.strftime("%Y%m%d-%H%M%S"), "backend": "vllm", "model_id": model, "tokenizer_id": model,
            "num_prompts": n, "request_rate": float(c) if rate else "inf", "burstiness": 1.0,
            "max_concurrency": None if rate else c, "duration": done * OUTPUT_LEN / out_tps,
            "completed": done, "failed": failed, "total_input_tokens": done * INPUT_LEN,
            "total_output_tokens": done * OUTPUT_LEN, "request_throughput": out_tps / OUTPUT_LEN,
            "request_goodput": None, "output_throughput": out_tps,
            "total_token_throughput": out_tps * (1 + INPUT_LEN / OUTPUT_LEN),
            "mean_ttft_ms": ttft * 1.05, "median_ttft_ms": ttft, "std_ttft_ms": ttft * 0.1, "p99_ttft_ms": ttft * 1.6,
            "mean_tpot_ms": tpot * 1.02, "median_tpot_ms": tpot, "std_tpot_ms": tpot * 0.05, "p99_tpot_ms": tpot * 1.3,
            "mean_itl_ms": tpot * 1.02, "median_itl_ms": tpot * 0.98, "std_itl_ms": tpot * 0.2, "p99_itl_ms": tpot * 2.5,
            "mean_e2el_ms": ttft + tpot * OUTPUT_LEN, "median_e2el_ms": ttft + tpot * OUTPUT_LEN,
            "std_e2el_ms": 10.0, "p99_e2el_ms": (ttft + tpot * OUTPUT_LEN) * 1.3,
        })
        at += timedelta(seconds=int(runs[-1]["duration"]) + 10)
    return runs


def write_sweep(out: Path, loads, knee: float | None, **kw) -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in sweep_runs(loads, knee, **kw):
        load = r["max_concurrency"] if r["max_concurrency"] is not None else r["request_rate"]
        name = f"vllm-{'rate' if r['max_concurrency'] is None else 'concurrency'}{load:g}.json"
        (out / name).write_text(json.dumps(r))
        paths.append(out / name)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--knee", type=float, default=32, help="0: none (throughput still grows at the last load)")
    ap.add_argument("--loads", default="1,2,4,8,16,32,64,128")
    ap.add_argument("--fail-from", type=float)
    ap.add_argument("--rate", action="store_true", help="request-rate axis instead of max concurrency")
    a = ap.parse_args()
    loads = [float(x) if "." in x else int(x) for x in a.loads.split(",")]
    for p in write_sweep(Path(a.outdir), loads, a.knee or None, fail_from=a.fail_from, rate=a.rate):
        print(p)


if __name__ == "__main__":
    main()
