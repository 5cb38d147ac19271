"""Fleet diagnosis speed: N replicas × a window of 15 s steps, diagnosed replica by replica plus the
fleet rules (goal: 100 instances over 24 h in under 10 s). The Prometheus query time is not
included: this measures what diagnose does with the series once fetched.

    python bench/fleet.py [--instances 100] [--hours 24] [--step 15]
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from diagnose.ruleset.rules import load_rules  # noqa: E402
from diagnose.evidence.model import Evidence, InputInfo  # noqa: E402
from diagnose.pipeline import analyze_fleet  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=100)
    ap.add_argument("--hours", type=float, default=24)
    ap.add_argument("--step", type=int, default=15)
    a = ap.parse_args()
    steps = int(a.hours * 3600 / a.step)
    rnd = random.Random(1)
    t0 = datetime(2026, 1, 1)
    t = time.perf_counter()
    replicas = {}
    for i in range(a.instances):
        ev = Evidence()
        ev.inputs.append(InputInfo(path=f"bench instance={i}", kind="prometheus"))
        ev.set_fact("engine", "vllm")
        ev.set_fact("model", "meta-llama/Llama-3.1-8B-Instruct")
        base = rnd.uniform(20, 200)
        for k in range(steps):
            run = base + rnd.gauss(0, 5)
            ev.add_stats({"time": t0 + timedelta(seconds=k * a.step), "source": "bench", "line": None, "engine_idx": 0,
                          "running": max(run, 0), "waiting": max(rnd.gauss(0, 1), 0), "kv_usage": min(run / 3, 99),
                          "gen_tps": run * 30, "prompt_tps": run * 10, "ttft_p50": 0.2, "itl_p50": 0.03})
        replicas[f"10.0.{i // 250}.{i % 250}:8000"] = ev
    built = time.perf_counter() - t
    rules = load_rules()
    t = time.perf_counter()
    out = analyze_fleet(replicas, rules)
    took = time.perf_counter() - t
    print(f"{a.instances} instances × {steps} steps ({a.hours:g} h at {a.step} s): building series {built:.1f} s, "
          f"diagnosing {took:.1f} s ({took / a.instances * 1000:.0f} ms per replica); "
          f"fleet findings: {[f.id for f in out[0].result.findings]}")


if __name__ == "__main__":
    main()
