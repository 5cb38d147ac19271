"""Writes the saved-scrape fixtures under fixtures/rules/ (Prometheus text format, several
scrapes with millisecond timestamps). Run from the repo root: python tests/tools/make_prom_fixtures.py"""
from __future__ import annotations

import random
from pathlib import Path

T0 = 1_763_100_000_000  # ms
TTFT_BUCKETS = [0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0]
ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0]


class Series:
    def __init__(self, inst, model="meta-llama/Llama-3.1-8B-Instruct"):
        self.labels = f'engine="0",instance="{inst}",job="vllm",model_name="{model}"'
        self.gen = self.prompt = self.pre = 0.0
        self.ttft = {b: 0.0 for b in TTFT_BUCKETS + [float("inf")]}
        self.itl = {b: 0.0 for b in ITL_BUCKETS + [float("inf")]}

    def scrape(self, ts, running, waiting, kv, gen_tps, prompt_tps, ttft, itl, n_req=20, n_tok=400, pre=0.0):
        self.gen += gen_tps * 15
        self.prompt += prompt_tps * 15
        self.pre += pre
        for b in self.ttft:
            self.ttft[b] += n_req if ttft <= b else 0
        for b in self.itl:
            self.itl[b] += n_tok if itl <= b else 0
        L = self.labels
        out = [f'vllm:num_requests_running{{{L}}} {running} {ts}', f'vllm:num_requests_waiting{{{L}}} {waiting} {ts}',
               f'vllm:kv_cache_usage_perc{{{L}}} {kv} {ts}', f'vllm:generation_tokens_total{{{L}}} {self.gen:.1f} {ts}',
               f'vllm:prompt_tokens_total{{{L}}} {self.prompt:.1f} {ts}', f'vllm:num_preemptions_total{{{L}}} {self.pre} {ts}']
        for name, hist in (("vllm:time_to_first_token_seconds", self.ttft), ("vllm:inter_token_latency_seconds", self.itl)):
            for b, c in hist.items():
                le = "+Inf" if b == float("inf") else repr(b)
                out.append(f'{name}_bucket{{{L},le="{le}"}} {c} {ts}')
        return out


HEAD = ["# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge", "# TYPE vllm:num_requests_waiting gauge",
        "# TYPE vllm:kv_cache_usage_perc gauge", "# TYPE vllm:generation_tokens_total counter",
        "# TYPE vllm:prompt_tokens_total counter", "# TYPE vllm:num_preemptions_total counter",
        "# TYPE vllm:time_to_first_token_seconds histogram", "# TYPE vllm:inter_token_latency_seconds histogram"]


def write(path, scrapes):
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("\n".join(HEAD + [l for s in scrapes for l in s]) + "\n")


def fleet(path, hot, n=24, stop_b_after=None):
    rnd = random.Random(1)
    a, b = Series("10.0.0.1:8000"), Series("10.0.0.2:8000")
    scrapes = []
    for i in range(n):
        ts = T0 + i * 15000
        ra = 200 + rnd.randint(-5, 5) if hot else 60 + rnd.randint(-5, 5)
        scrapes.append(a.scrape(ts, ra, 50 if hot else 0, 0.97 if hot else 0.5, 2500, 900, 0.3, 0.04))
        if stop_b_after is None or i < stop_b_after:
            scrapes.append(b.scrape(ts, 20 + rnd.randint(-3, 3) if hot else 58 + rnd.randint(-5, 5), 0,
                                    0.15 if hot else 0.48, 800 if hot else 2400, 200 if hot else 880, 0.2, 0.03))
    write(path, scrapes)


def single(path, n=30, **shape):
    rnd = random.Random(2)
    s = Series("10.0.0.9:8000")
    scrapes = []
    for i in range(n):
        ts = T0 + i * 15000
        running = shape["running"](i) + rnd.randint(-2, 2)
        scrapes.append(s.scrape(ts, running, shape.get("waiting", lambda i: 0)(i), shape.get("kv", lambda i: 0.5)(i),
                                shape.get("gen", lambda i: 2000)(i), shape.get("prompt", lambda i: 800)(i),
                                shape["ttft"](i), shape["itl"](i)))
    write(path, scrapes)


if __name__ == "__main__":
    R = Path("fixtures/rules")
    fleet(R / "replica-imbalance/fires.prom", hot=True)
    fleet(R / "replica-imbalance/quiet.prom", hot=False)
    fleet(R / "replica-down/fires.prom", hot=False, n=60, stop_b_after=20)
    fleet(R / "replica-down/quiet.prom", hot=False, n=60)
    # decode-bound: ITL follows the batch up, TTFT stays low
    single(R / "decode-bound/fires.prom", running=lambda i: 100 + 5 * i, itl=lambda i: 0.05 + 0.004 * i,
           ttft=lambda i: 0.3, kv=lambda i: 0.5 + 0.01 * i)
    single(R / "decode-bound/quiet.prom", running=lambda i: 60 + 10 * (i % 4), itl=lambda i: 0.02 + 0.004 * (i % 4), ttft=lambda i: 0.25)
    # SLO cases: one scrape file plus a targets file in a directory
    for name, ttft, itl, gen in (("slo-ttft/fires", 2.0, 0.03, 2000), ("slo-ttft/quiet", 0.2, 0.03, 2000),
                                 ("slo-tpot/fires", 0.2, 0.09, 2000), ("slo-tpot/quiet", 0.2, 0.03, 2000),
                                 ("slo-throughput/fires", 0.2, 0.03, 1200), ("slo-throughput/quiet", 0.2, 0.03, 4000)):
        single(R / name / "metrics.prom", running=lambda i: 60, ttft=lambda i, t=ttft: t, itl=lambda i, t=itl: t,
               gen=lambda i, g=gen: g)
        (R / name / "targets.toml").write_text("# SLO targets (seed 002 KPIs)\n[default]\nttft_p50_ms = 500\n"
                                               "ttft_p99_ms = 2000\ntpot_ms = 50\noutput_tps = 30\n")
