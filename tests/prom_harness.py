"""Test harness for `diagnose --prometheus`: synthetic vLLM V1 metrics in a real Prometheus.

Pieces (no product code here):

* ``write_openmetrics`` / ``write_openmetrics_all``: OpenMetrics text for one or several scenarios,
  in the form ``promtool tsdb create-blocks-from openmetrics`` accepts: ``# HELP``/``# TYPE`` once
  per family, each family's samples contiguous, each series' samples in time order with unix-second
  timestamps, counters exposed as ``<family>_total``, histograms as ``_bucket{le=…}``/``_sum``/
  ``_count``, and ``# EOF`` as the last line.
* ``backfill``: runs promtool on such a file (raises ``HarnessError`` with promtool's output).
* ``PromServer``: a real ``prometheus`` on 127.0.0.1:<free port> over a backfilled TSDB.
* ``BadServer``: an ``http.server`` that misbehaves the ways a broken Prometheus endpoint does.

Families written per instance (vLLM V1 names, reference vllm.md §10): gauges
``vllm:num_requests_running``, ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc`` (0-1),
``vllm:cache_config_info`` (value 1, CacheConfig fields as labels, no model_name — as vLLM exports it);
counters ``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total``, ``vllm:num_preemptions_total``,
``vllm:request_success_total``; histograms ``vllm:time_to_first_token_seconds``,
``vllm:inter_token_latency_seconds``, ``vllm:e2e_request_latency_seconds``,
``vllm:request_queue_time_seconds``, ``vllm:request_prefill_time_seconds``,
``vllm:request_decode_time_seconds``, ``vllm:request_prompt_tokens``, ``vllm:request_generation_tokens``;
counters ``vllm:prefix_cache_queries_total`` / ``vllm:prefix_cache_hits_total`` (tokens); and ``up`` (1 while the target is alive, 0 after it went away — what Prometheus itself records).

Every series carries the labels a scrape would add (``instance``, ``job="vllm"``) plus
``namespace="<scenario>"`` so that one TSDB can hold every scenario and a test selects one with
``--match '{namespace="<scenario>"}'``.

Time: Prometheus's default lookback is 5 minutes, so data meant for "now" queries must end less
than 5 minutes before the query. The fixtures end the data ``END_LAG_S`` (60 s) before the moment
they generate it. Backfilled blocks can lie anywhere in the past (no out-of-order window applies to
blocks; only the head has one), but retention deletes blocks older than the retention time, so the
server runs with ``--storage.tsdb.retention.time=100y``. Within one backfill input, a series'
samples must be in time order or promtool fails with "out of order sample".
"""
from __future__ import annotations

import atexit
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

END_LAG_S = 60                      # data ends this long before "now" (well inside the 5 m lookback)
DEFAULT_MINUTES = 35                # every scenario: at least 30 minutes of samples
READY_TIMEOUT_S = 30.0
STOP_GRACE_S = 10.0
HANG_CAP_S = 30.0                   # BadServer("hang") never holds a request longer than this

# Histogram buckets as vLLM >= 0.8.4 exports them (reference vllm.md §10.2).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0)
MAX_MODEL_LEN = 32768
# vLLM's build_1_2_5_buckets(max_model_len): 1, 2, 5, 10, 20, 50, … up to max_model_len
TOKEN_BUCKETS = tuple(float(m * 10 ** e) for e in range(6) for m in (1, 2, 5) if m * 10 ** e <= MAX_MODEL_LEN)
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                   120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)


class HarnessError(RuntimeError):
    """The harness itself could not do its job (promtool failed, Prometheus did not start…)."""


def missing_tools() -> list[str]:
    """The Prometheus binaries this harness needs that are not on PATH."""
    return [t for t in ("promtool", "prometheus") if shutil.which(t) is None]


# ---------------------------------------------------------------------------------------------
# Scenarios
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    name: str
    index: int                      # picks the default instance addresses 10.0.<index>.<n>:8000
    model_name: str
    instances: int = 1
    max_num_seqs: int = 256
    num_gpu_blocks: int = 30000
    description: str = ""
    engines: int = 1                # data-parallel engines per instance (engine="0", "1", …)

    def default_instances(self) -> list[str]:
        return [f"10.0.{self.index}.{n}:8000" for n in range(1, self.instances + 1)]


LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("underloaded", 1, "Qwen/Qwen3-VL-2B-Instruct", num_gpu_blocks=180000,
             description="seed 003: running 8, waiting 0, KV 1.6 %, gen ~412 tok/s, prompt ~78 tok/s, TTFT p50 0.1 s"),
    Scenario("kv_saturated", 2, LLAMA, num_gpu_blocks=8000,
             description="KV 95-100 %, waiting 20-60, preemptions +5/min"),
    Scenario("queue_buildup", 3, LLAMA,
             description="running pinned at 256 (= max_num_seqs), waiting 0 -> 300 linearly, KV 40-60 %"),
    Scenario("prefill_bound", 4, LLAMA, num_gpu_blocks=60000,
             description="seed 001: 20k-token prompts, TTFT 20-85 s, waiting ~0, running 15-20"),
    Scenario("decode_bound", 5, LLAMA,
             description="TTFT ~0.3 s, ITL 0.05 -> 0.15 s while running 100 -> 250, KV 50-80 %"),
    Scenario("healthy", 6, LLAMA,
             description="running 60±10, waiting 0, KV 40-70 %, TTFT p50 0.2 s / p99 0.8 s, ITL 0.03 s"),
    Scenario("idle", 7, LLAMA, description="all gauges 0, counters and histograms flat"),
    Scenario("fleet_one_hot", 8, LLAMA, instances=2,
             description="A: running 200, waiting 50, KV 97 %; B: running 20, waiting 0, KV 15 %"),
    Scenario("replica_down", 9, LLAMA, instances=2,
             description="A and B healthy; B's series stop after 10 minutes (up=0 from then on)"),
    Scenario("replacement", 10, LLAMA,
             description="a new replica that starts 30 s after replica_down's B stops (a rolling restart)"),
    Scenario("restart_in_place", 12, LLAMA,
             description="healthy; the server restarts at 15 min (90 s without samples, up=0), then serves again "
                         "with its counters from zero and a new process_start_time_seconds"),
    Scenario("dp_skewed", 11, LLAMA, engines=2,
             description="one server, two data-parallel engines: engine 0's KV 96-99 %, engine 1's 55-65 %"),
)}
REPLICA_DOWN_AFTER_S = 600
RESTART_AT_S = 900
PROCESS_START_AGO_S = 6 * 3600          # how long before the data each server's process started


@dataclass
class State:
    """One instance at one instant. Rates are per second; latencies are (median, p99) seconds."""
    running: float
    waiting: float
    kv: float
    gen_tps: float
    prompt_tps: float
    req_rate: float
    preempt_rate: float = 0.0
    ttft: tuple = (0.1, 0.3)
    itl: tuple = (0.03, 0.05)
    e2e: tuple = (10.0, 20.0)
    queue: tuple = (0.005, 0.02)
    prefix_hit: float = 0.3                 # share of prompt tokens found in the prefix cache
    kv_engines: tuple | None = None         # KV usage per data-parallel engine (kv = their max)

    @property
    def prefill(self) -> tuple:             # scheduled → first token: TTFT less the queue
        return (max(self.ttft[0] - self.queue[0], 0.001), max(self.ttft[1] - self.queue[1], 0.002))

    @property
    def decode(self) -> tuple:              # first token → last: the rest of the request
        return (max(self.e2e[0] - self.ttft[0], 0.001), max(self.e2e[1] - self.ttft[1], 0.002))

    @property
    def prompt_len(self) -> tuple:          # tokens per request, (median, p99)
        m = self.prompt_tps / self.req_rate if self.req_rate else 1000.0
        return (m, 1.5 * m)

    @property
    def gen_len(self) -> tuple:
        m = self.gen_tps / self.req_rate if self.req_rate else 400.0
        return (m, 1.5 * m)


def _clamp(x, lo, hi):
    return max(lo, min(hi, x))


def _state(scn: str, inst: int, t_rel: float, f: float, rng: random.Random) -> State | None:
    """The scenario's profile. ``f`` is the fraction of the run elapsed (0..1); None = no sample."""
    g = rng.gauss
    wave = math.sin(2 * math.pi * f * 1.5)
    if scn == "underloaded":
        gen = 412 * (1 + 0.03 * g(0, 1))
        itl = 8 / gen
        return State(running=8, waiting=0, kv=_clamp(0.016 + 0.0008 * g(0, 1), 0.013, 0.019),
                     gen_tps=gen, prompt_tps=78 * (1 + 0.05 * g(0, 1)), req_rate=gen / 500,
                     ttft=(0.1, 0.3), itl=(itl, itl * 1.6), e2e=(0.1 + 500 * itl, 2 * (0.1 + 500 * itl)),
                     queue=(0.002, 0.01), prefix_hit=0.72)
    if scn == "kv_saturated":
        waiting = round(_clamp(40 + 15 * wave + 3 * g(0, 1), 20, 60))
        req = 6.25 * (1 + 0.03 * g(0, 1))
        q = waiting / req
        return State(running=round(_clamp(100 + 5 * g(0, 1), 90, 110)), waiting=waiting,
                     kv=_clamp(0.975 + 0.012 * g(0, 1), 0.95, 1.0), gen_tps=req * 400, prompt_tps=req * 300,
                     req_rate=req, preempt_rate=5 / 60, ttft=(q + 0.4, 2.5 * q + 2), itl=(0.04, 0.12),
                     e2e=(q + 0.4 + 16, 2 * (q + 16)), queue=(q, 2.5 * q))
    if scn == "queue_buildup":
        waiting = round(max(0.0, 300 * f + 3 * g(0, 1))) if f > 0 else 0
        req = 12 * (1 + 0.02 * g(0, 1))
        q = waiting / req + 0.01
        return State(running=256, waiting=waiting, kv=_clamp(0.5 + 0.07 * wave + 0.01 * g(0, 1), 0.4, 0.6),
                     gen_tps=req * 500, prompt_tps=req * 1000, req_rate=req,
                     ttft=(q + 0.3, 1.5 * q + 0.8), itl=(256 / (req * 500), 1.8 * 256 / (req * 500)),
                     e2e=(q + 0.3 + 21, 1.5 * q + 40), queue=(q, 1.5 * q + 0.05))
    if scn == "prefill_bound":
        running = round(_clamp(17.5 + 2.5 * wave + 0.8 * g(0, 1), 15, 20))
        ttft_med = 42 + 18 * math.sin(2 * math.pi * f)           # 24..60 s, p99 up to ~84 s
        sigma = math.log(1.4) / 2.326
        ttft_mean = ttft_med * math.exp(sigma ** 2 / 2)
        req = running / (ttft_mean + 200 * 0.05)                 # Little's law over TTFT + decode
        return State(running=running, waiting=1 if rng.random() < 0.03 else 0,
                     kv=_clamp(0.65 + 0.08 * wave + 0.01 * g(0, 1), 0.55, 0.75),
                     gen_tps=req * 200, prompt_tps=req * 20000, req_rate=req,
                     ttft=(ttft_med, ttft_med * 1.4), itl=(0.05, 0.09),
                     e2e=(ttft_med + 10, ttft_med * 1.4 + 14), queue=(0.01, 0.05))
    if scn == "decode_bound":
        running = round(100 + 150 * f + 2 * g(0, 1))
        itl = 0.05 + 0.10 * f
        gen = running / itl
        req = gen / 800
        return State(running=running, waiting=0, kv=_clamp(0.5 + 0.3 * f + 0.01 * g(0, 1), 0.5, 0.8),
                     gen_tps=gen, prompt_tps=req * 1000, req_rate=req, ttft=(0.3, 0.9), itl=(itl, 1.6 * itl),
                     e2e=(0.3 + 800 * itl, 1.5 * (0.3 + 800 * itl)), queue=(0.005, 0.03))
    if scn == "healthy":
        running = round(_clamp(60 + 4 * g(0, 1), 50, 70))
        gen = running / 0.03
        req = gen / 400
        return State(running=running, waiting=0, kv=_clamp(0.55 + 0.1 * wave + 0.02 * g(0, 1), 0.4, 0.7),
                     gen_tps=gen, prompt_tps=req * 800, req_rate=req, ttft=(0.2, 0.8), itl=(0.03, 0.05),
                     e2e=(12.2, 20.0), queue=(0.005, 0.05))
    if scn == "idle":
        return State(running=0, waiting=0, kv=0.0, gen_tps=0, prompt_tps=0, req_rate=0)
    if scn == "fleet_one_hot":
        if inst == 0:                                                   # the hot replica
            waiting = round(_clamp(50 + 4 * g(0, 1), 40, 60))
            req = 200 / (0.06 * 400 + 6.5)
            q = waiting / req
            return State(running=round(_clamp(200 + 2 * g(0, 1), 195, 205)), waiting=waiting,
                         kv=_clamp(0.97 + 0.008 * g(0, 1), 0.95, 0.995), gen_tps=req * 400, prompt_tps=req * 800,
                         req_rate=req, ttft=(q + 0.5, 2 * q + 2), itl=(0.06, 0.1), e2e=(q + 24.5, 2 * q + 40),
                         queue=(q, 2 * q))
        running = round(_clamp(20 + 1.5 * g(0, 1), 17, 23))
        gen = running / 0.025
        req = gen / 400
        return State(running=running, waiting=0, kv=_clamp(0.15 + 0.008 * g(0, 1), 0.13, 0.17), gen_tps=gen,
                     prompt_tps=req * 800, req_rate=req, ttft=(0.15, 0.5), itl=(0.025, 0.04), e2e=(10.2, 16.0),
                     queue=(0.003, 0.02))
    if scn == "replica_down":
        if inst == 1 and t_rel > REPLICA_DOWN_AFTER_S:
            return None
        running = (40 if t_rel <= REPLICA_DOWN_AFTER_S else 70) + 3 * g(0, 1)
        running = round(_clamp(running, 30, 80))
        gen = running / 0.03
        req = gen / 400
        return State(running=running, waiting=0, kv=_clamp(0.45 * running / 40 + 0.02 * g(0, 1), 0.3, 0.85),
                     gen_tps=gen, prompt_tps=req * 800, req_rate=req, ttft=(0.2, 0.7), itl=(0.03, 0.05),
                     e2e=(12.2, 20.0), queue=(0.005, 0.05))
    if scn == "replacement":
        if t_rel <= REPLICA_DOWN_AFTER_S + 30:
            return None
        return _state("replica_down", 0, t_rel, f, rng)
    if scn == "restart_in_place":
        if RESTART_AT_S < t_rel <= RESTART_AT_S + 90:
            return None
        return _state("healthy", 0, t_rel, f, rng)
    if scn == "dp_skewed":
        # A router that keeps sending one engine the long conversations: it runs full, the other
        # half full. Averaged, the server reads 79 %; the fullest engine is what evicts.
        hot = _clamp(0.975 + 0.008 * g(0, 1), 0.96, 0.99)
        cold = _clamp(0.60 + 0.03 * g(0, 1), 0.55, 0.65)
        running = round(_clamp(120 + 4 * g(0, 1), 110, 130))
        gen = running / 0.035
        req = gen / 400
        return State(running=running, waiting=0, kv=max(hot, cold), gen_tps=gen, prompt_tps=req * 1500,
                     req_rate=req, ttft=(0.3, 1.0), itl=(0.035, 0.06), e2e=(14.3, 24.0), queue=(0.01, 0.05),
                     kv_engines=(hot, cold))
    raise KeyError(f"unknown scenario {scn!r}; known: {', '.join(SCENARIOS)}")


# ---------------------------------------------------------------------------------------------
# OpenMetrics generation
# ---------------------------------------------------------------------------------------------
GAUGES = {
    "vllm:num_requests_running": "Number of requests in model execution batches.",
    "vllm:num_requests_waiting": "Number of requests waiting to be processed.",
    "vllm:kv_cache_usage_perc": "KV-cache usage. 1 means 100 percent usage.",
}
COUNTERS = {   # family name -> help; exposed as <family>_total
    "vllm:prompt_tokens": "Number of prefill tokens processed.",
    "vllm:generation_tokens": "Number of generation tokens processed.",
    "vllm:num_preemptions": "Cumulative number of preemption from the engine.",
    "vllm:request_success": "Count of successfully processed requests.",
    "vllm:prefix_cache_queries": "Prefix cache queries, in terms of number of queried tokens.",
    "vllm:prefix_cache_hits": "Prefix cache hits, in terms of number of cached tokens.",
}
HISTOGRAMS = {  # family -> (help, buckets, State field, what one observation is)
    "vllm:time_to_first_token_seconds": ("Histogram of time to first token in seconds.", TTFT_BUCKETS, "ttft", "request"),
    "vllm:inter_token_latency_seconds": ("Histogram of inter-token latency in seconds.", ITL_BUCKETS, "itl", "token"),
    "vllm:e2e_request_latency_seconds": ("Histogram of e2e request latency in seconds.", REQUEST_BUCKETS, "e2e", "request"),
    "vllm:request_queue_time_seconds": ("Histogram of time spent in WAITING phase for request.", REQUEST_BUCKETS, "queue", "request"),
    "vllm:request_prefill_time_seconds": ("Histogram of time spent in PREFILL phase for request.", REQUEST_BUCKETS, "prefill", "request"),
    "vllm:request_decode_time_seconds": ("Histogram of time spent in DECODE phase for request.", REQUEST_BUCKETS, "decode", "request"),
    "vllm:request_prompt_tokens": ("Number of prefill tokens processed.", TOKEN_BUCKETS, "prompt_len", "request"),
    "vllm:request_generation_tokens": ("Number of generation tokens processed.", TOKEN_BUCKETS, "gen_len", "request"),
}
INFO_FAMILY = "vllm:cache_config_info"
START_FAMILY = "process_start_time_seconds"     # prometheus_client's process collector
UP_FAMILY = "up"


def _lognormal_cdf(x: float, median: float, p99: float) -> float:
    median = max(median, 1e-6)
    sigma = max(math.log(max(p99, median * 1.0001) / median) / 2.326, 1e-3)
    return 0.5 * (1 + math.erf(math.log(x / median) / (sigma * math.sqrt(2))))


def _lognormal_mean(median: float, p99: float) -> float:
    sigma = max(math.log(max(p99, median * 1.0001) / max(median, 1e-6)) / 2.326, 1e-3)
    return median * math.exp(sigma ** 2 / 2)


def _fmt(v: float) -> str:
    v = float(v)
    if v.is_integer():
        return str(int(v))
    return f"{v:.6f}".rstrip("0")


def _le(b: float) -> str:
    return "+Inf" if math.isinf(b) else repr(float(b))


def _labels(d: dict) -> str:
    def esc(s):
        return str(s).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in d.items()) + "}"


@dataclass
class ScenarioData:
    """What was written for one scenario: enough for tests to build selectors and time ranges."""
    name: str
    namespace: str
    instances: list
    model_name: str
    start: datetime
    end: datetime
    step_s: int
    job: str = "vllm"
    counters: dict = field(default_factory=dict)   # {instance: {"vllm:..._total": [(ts, value)]}}
    hists: dict = field(default_factory=dict)      # {instance: {family: (buckets, {"b": [[(ts, v)]], "inf": [...]})}}

    def window_quantile(self, family: str, q: float, start_ts: float, end_ts: float) -> float:
        """The ground truth of "p{q} over the window": the quantile of what the histogram counted
        between two times (summed over instances), interpolated inside a bucket as Prometheus'
        histogram_quantile does."""
        bounds, counts = None, None
        for per in self.hists.values():
            buckets, o = per[family]
            inc = [(_value_at(b, end_ts) or 0.0) - (_value_at(b, start_ts) or 0.0) for b in o["b"] + [o["inf"]]]
            bounds = list(buckets) + [math.inf]
            counts = inc if counts is None else [a + b for a, b in zip(counts, inc)]
        rank = q * counts[-1]
        prev_bound, prev_count = 0.0, 0.0
        for bound, count in zip(bounds, counts):
            if count >= rank:
                if math.isinf(bound):
                    return prev_bound
                return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
            prev_bound, prev_count = bound, count
        return prev_bound

    def window_mean(self, family: str, start_ts: float, end_ts: float) -> float:
        """The ground truth of a histogram's mean over the window: its sum's increase over its
        count's (summed over instances)."""
        total = count = 0.0
        for per in self.hists.values():
            o = per[family][1]
            total += (_value_at(o["sum"], end_ts) or 0.0) - (_value_at(o["sum"], start_ts) or 0.0)
            count += (_value_at(o["count"], end_ts) or 0.0) - (_value_at(o["count"], start_ts) or 0.0)
        return total / count

    def counter_increase(self, name: str, start_ts: float, end_ts: float) -> float:
        """What the counter really grew by between two times (the last samples at or before each),
        summed over instances: the ground truth a diagnosis must match."""
        total = 0.0
        for per in self.counters.values():
            inside = [v for ts, v in per.get(name, []) if start_ts <= ts <= end_ts]
            a = _value_at(per.get(name, []), start_ts)
            prev = a if a is not None else (inside[0] if inside else None)
            for v in inside:
                total += v - prev if v >= prev else v      # a drop is a restart: counting began again at 0
                prev = v
        return total

    @property
    def match(self) -> str:
        return '{namespace="%s"}' % self.namespace

    def selector(self, metric: str, **extra) -> str:
        lab = {"namespace": self.namespace, **extra}
        return metric + _labels(lab)


@dataclass
class _Family:
    name: str
    type: str
    help: str
    series: list = field(default_factory=list)   # [(sample name, labels dict, [(ts, value)])]


def _value_at(samples: list, t: float):
    """A counter's value at time t: its last sample at or before t (None before the first)."""
    return max((v for ts, v in samples if ts <= t), default=None)


def _families() -> dict:
    fams = {}
    for n, h in GAUGES.items():
        fams[n] = _Family(n, "gauge", h)
    for n, h in COUNTERS.items():
        fams[n] = _Family(n, "counter", h)
    for n, (h, *_rest) in HISTOGRAMS.items():
        fams[n] = _Family(n, "histogram", h)
    fams[INFO_FAMILY] = _Family(INFO_FAMILY, "gauge", "Information of the LLMEngine CacheConfig")
    fams[UP_FAMILY] = _Family(UP_FAMILY, "gauge", "1 if the last scrape of the target succeeded, 0 otherwise.")
    fams[START_FAMILY] = _Family(START_FAMILY, "gauge", "Start time of the process since unix epoch in seconds.")
    return fams


def _utc(dt: datetime) -> datetime:
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)


def _add_scenario(fams: dict, scenario: str, start: datetime, minutes: int, step_s: int,
                  instances: list | None, namespace: str | None = None) -> ScenarioData:
    if scenario not in SCENARIOS:
        raise KeyError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    spec = SCENARIOS[scenario]
    insts = list(instances) if instances else spec.default_instances()
    if len(insts) != spec.instances:
        raise ValueError(f"scenario {scenario} needs {spec.instances} instance(s), got {insts}")
    step_s = int(step_s)
    t0 = int(_utc(start).timestamp()) // step_s * step_s
    n = int(minutes * 60 // step_s) + 1
    times = [t0 + i * step_s for i in range(n)]
    counters: dict = {}                          # ground truth for tests: {instance: {counter: samples}}
    hists: dict = {}
    for k, inst in enumerate(insts):
        rng = random.Random(f"{scenario}/{k}")
        base = {"instance": inst, "job": "vllm", "namespace": namespace or scenario}
        common = {"engine": "0", "model_name": spec.model_name, **base}
        engines = [str(e) for e in range(spec.engines)]
        g = {(name, e): [] for name in GAUGES for e in engines}
        c = {name: [] for name in COUNTERS}
        acc_c = {"vllm:prompt_tokens": 4.2e6 * (k + 1), "vllm:generation_tokens": 2.9e6 * (k + 1),
                 "vllm:num_preemptions": 120.0 if scenario == "kv_saturated" else 0.0,
                 "vllm:request_success": 7300.0 * (k + 1),
                 "vllm:prefix_cache_queries": 4.2e6 * (k + 1), "vllm:prefix_cache_hits": 1.2e6 * (k + 1)}
        first = _state(scenario, k, 0.0, 0.0, random.Random(0)) or State(0, 0, 0, 0, 0, 0)
        h_acc = {}
        for hname, (_h, buckets, fld, _unit) in HISTOGRAMS.items():
            med, p99 = getattr(first, fld)
            prior = 7300.0 * (k + 1) * (1 if _unit == "request" else 400)
            h_acc[hname] = {"b": [prior * _lognormal_cdf(b, med, p99) for b in buckets],
                            "count": prior, "sum": prior * _lognormal_mean(med, p99)}
        h_out = {hname: {"b": [[] for _ in HISTOGRAMS[hname][1]], "inf": [], "sum": [], "count": []}
                 for hname in HISTOGRAMS}
        up, info, started = [], [], []
        proc_start, gone = t0 - PROCESS_START_AGO_S, False
        for i, ts in enumerate(times):
            t_rel = ts - t0
            st = _state(scenario, k, t_rel, t_rel / max(times[-1] - t0, 1), rng)
            if st is None:                       # target gone: no vllm series, Prometheus records up=0
                up.append((ts, 0))
                gone = True
                continue
            if gone:
                # A process that (re)starts: a new start time, and every counter from zero.
                proc_start = ts - 20
                if scenario == "restart_in_place":
                    acc_c = {n: 0.0 for n in acc_c}
                    for a in h_acc.values():
                        a["b"], a["count"], a["sum"] = [0.0] * len(a["b"]), 0.0, 0.0
            gone = False
            up.append((ts, 1))
            info.append((ts, 1))
            started.append((ts, proc_start))
            for j, e in enumerate(engines):      # DP engines: the load split, each its own KV cache
                share = lambda x: x // len(engines) + (1 if j < x % len(engines) else 0)  # noqa: E731
                g[("vllm:num_requests_running", e)].append((ts, share(int(st.running))))
                g[("vllm:num_requests_waiting", e)].append((ts, share(int(st.waiting))))
                kv = st.kv_engines[j] if st.kv_engines else st.kv
                g[("vllm:kv_cache_usage_perc", e)].append((ts, round(kv, 5)))
            if i > 0:                            # counters advance over the step that ends at ts
                acc_c["vllm:prompt_tokens"] += st.prompt_tps * step_s
                acc_c["vllm:generation_tokens"] += st.gen_tps * step_s
                acc_c["vllm:num_preemptions"] += st.preempt_rate * step_s
                acc_c["vllm:request_success"] += st.req_rate * step_s
                acc_c["vllm:prefix_cache_queries"] += st.prompt_tps * step_s
                acc_c["vllm:prefix_cache_hits"] += st.prompt_tps * st.prefix_hit * step_s
                for hname, (_h, buckets, fld, unit) in HISTOGRAMS.items():
                    obs = (st.req_rate if unit == "request" else st.gen_tps) * step_s
                    med, p99 = getattr(st, fld)
                    a = h_acc[hname]
                    for j, b in enumerate(buckets):
                        a["b"][j] += obs * _lognormal_cdf(b, med, p99)
                    a["count"] += obs
                    a["sum"] += obs * _lognormal_mean(med, p99)
            for name in COUNTERS:
                v = acc_c[name]
                # token / request / preemption counts are integers in vLLM
                c[name].append((ts, math.floor(v)))
            for hname in HISTOGRAMS:
                a, o = h_acc[hname], h_out[hname]
                cnt = round(a["count"])
                for j, bv in enumerate(a["b"]):
                    o["b"][j].append((ts, min(round(bv), cnt)))
                o["inf"].append((ts, cnt))
                o["count"].append((ts, cnt))
                o["sum"].append((ts, round(a["sum"], 4)))
        for (name, e), samples in g.items():
            fams[name].series.append((name, {**common, "engine": e}, samples))
        for name, samples in c.items():
            fams[name].series.append((name + "_total", common, samples))
            counters.setdefault(inst, {})[name + "_total"] = samples
        for hname, (_h, buckets, _f, _u) in HISTOGRAMS.items():
            o = h_out[hname]
            hists.setdefault(inst, {})[hname] = (buckets, o)
            for j, b in enumerate(buckets):
                fams[hname].series.append((hname + "_bucket", {**common, "le": _le(b)}, o["b"][j]))
            fams[hname].series.append((hname + "_bucket", {**common, "le": "+Inf"}, o["inf"]))
            fams[hname].series.append((hname + "_sum", common, o["sum"]))
            fams[hname].series.append((hname + "_count", common, o["count"]))
        cache_labels = {"block_size": "16", "cache_dtype": "auto", "calculate_kv_scales": "False",
                        "cpu_offload_gb": "0", "enable_prefix_caching": "True", "engine": "0",
                        "gpu_memory_utilization": "0.9", "is_attention_free": "False",
                        "num_cpu_blocks": "None", "num_gpu_blocks": str(spec.num_gpu_blocks),
                        "num_gpu_blocks_override": "None", "prefix_caching_hash_algo": "builtin",
                        "sliding_window": "None", "swap_space": "4", "swap_space_bytes": str(4 << 30), **base}
        fams[INFO_FAMILY].series.append((INFO_FAMILY, cache_labels, info))
        fams[UP_FAMILY].series.append((UP_FAMILY, base, up))
        fams[START_FAMILY].series.append((START_FAMILY, base, started))
    return ScenarioData(name=scenario, namespace=namespace or scenario, instances=insts, model_name=spec.model_name,
                        start=datetime.fromtimestamp(t0, timezone.utc),
                        end=datetime.fromtimestamp(times[-1], timezone.utc), step_s=step_s,
                        counters=counters, hists=hists)


def _write(path, fams: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for fam in fams.values():
            if not fam.series:
                continue
            fh.write(f"# HELP {fam.name} {fam.help}\n# TYPE {fam.name} {fam.type}\n")
            for sample_name, labels, samples in fam.series:
                head = sample_name + _labels(labels)
                fh.writelines(f"{head} {_fmt(v)} {ts}\n" for ts, v in samples)
        fh.write("# EOF\n")


def write_openmetrics(path, scenario: str, start: datetime, minutes: int = DEFAULT_MINUTES, step_s: int = 15,
                      instances: list | None = None) -> ScenarioData:
    """Write one scenario as OpenMetrics text; returns what was written (times, instances)."""
    fams = _families()
    data = _add_scenario(fams, scenario, start, minutes, step_s, instances)
    _write(path, fams)
    return data


def write_openmetrics_all(path, scenarios=None, start: datetime | None = None, minutes: int = DEFAULT_MINUTES,
                          step_s: int = 15, slow_scrape: dict | None = None, mixes: dict | None = None) -> dict:
    """Several scenarios in one file (one backfill, no overlapping blocks). -> {name: ScenarioData}.
    ``slow_scrape`` {scenario: seconds} adds copies scraped that rarely, as namespace
    "<scenario>-<seconds>s" (keyed so in the result)."""
    scenarios = list(scenarios or SCENARIOS)
    if start is None:
        start = default_start(minutes)
    fams = _families()
    out = {s: _add_scenario(fams, s, start, minutes, step_s, None) for s in scenarios}
    for s, every in (slow_scrape or {}).items():
        ns = f"{s}-{int(every)}s"
        out[ns] = _add_scenario(fams, s, start, minutes, every, None, namespace=ns)
    # ``mixes`` {namespace: [scenario, ...]}: several scenarios' instances under one namespace, as
    # one Prometheus job scraping different deployments. -> out[namespace] = [ScenarioData, ...]
    for ns, members in (mixes or {}).items():
        out[ns] = [_add_scenario(fams, s, start, minutes, step_s, None, namespace=ns) for s in members]
    _write(path, fams)
    return out


def write_openmetrics_sglang(path, start: datetime, minutes: int = DEFAULT_MINUTES, step_s: int = 15,
                             namespace: str = "sglang_retracting") -> ScenarioData:
    """An SGLang server whose KV pool runs dry: token usage 0.97-1.0, a queue, and retractions in
    bursts. It exports both retraction metrics of SGLang 0.5.x: the counter
    ``sglang:num_retracted_requests_total`` and the gauge ``sglang:num_retracted_reqs`` (the last
    interval's retractions, which must not be read as a counter)."""
    t0 = int(_utc(start).timestamp()) // step_s * step_s
    times = [t0 + i * step_s for i in range(int(minutes * 60 // step_s) + 1)]
    inst, model = "sglang-0:30000", "Qwen/Qwen2.5-32B-Instruct"
    lab = {"instance": inst, "job": "sglang", "namespace": namespace, "model_name": model}
    rng = random.Random("sglang-retract")
    fams = {n: [] for n in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                            "sglang:gen_throughput", "sglang:num_retracted_reqs", "sglang:max_total_num_tokens")}
    cnt = {"sglang:num_retracted_requests_total": 40.0, "sglang:generation_tokens_total": 9.1e6,
           "sglang:prompt_tokens_total": 3.3e7}
    counters = {n: [] for n in cnt}
    for i, ts in enumerate(times):
        burst = rng.choice([0, 0, 0, 1, 2, 5]) if i else 0
        cnt["sglang:num_retracted_requests_total"] += burst
        cnt["sglang:generation_tokens_total"] += 1450 * step_s if i else 0
        cnt["sglang:prompt_tokens_total"] += 5200 * step_s if i else 0
        for n, v in (("sglang:num_running_reqs", 58 + rng.randint(-4, 4)), ("sglang:num_queue_reqs", 24 + rng.randint(0, 20)),
                     ("sglang:token_usage", round(0.97 + 0.03 * rng.random(), 4)), ("sglang:gen_throughput", 1450),
                     ("sglang:num_retracted_reqs", burst), ("sglang:max_total_num_tokens", 180000)):
            fams[n].append((ts, v))
        for n in cnt:
            counters[n].append((ts, math.floor(cnt[n])))
    out = {n: _Family(n, "gauge", n, [(n, lab, samples)]) for n, samples in fams.items()}
    out.update({n[: -len("_total")]: _Family(n[: -len("_total")], "counter", n[: -len("_total")], [(n, lab, samples)])
                for n, samples in counters.items()})
    _write(path, out)
    return ScenarioData(name=namespace, namespace=namespace, instances=[inst], model_name=model,
                        start=datetime.fromtimestamp(t0, timezone.utc), end=datetime.fromtimestamp(times[-1], timezone.utc),
                        step_s=step_s, job="sglang", counters={inst: counters})


def write_openmetrics_nvidia(path, start: datetime, minutes: int = DEFAULT_MINUTES, step_s: int = 15) -> dict:
    """Two saturated deployments served by NVIDIA's stacks, in their own metric names:
    * "dynamo_trtllm": a Dynamo frontend in front of TensorRT-LLM workers: 64 in flight (the
      workers' max_num_seqs), ~60 queued, TTFT median 8 s and p99 24 s (dynamo_frontend_*).
    * "triton_trtllm": Triton's TensorRT-LLM backend: 64 active of 64, ~40 waiting, KV blocks 97 %
      used (nv_trt_llm_request_metrics / nv_trt_llm_kv_cache_block_metrics, v0.18+ labels).
    -> {namespace: ScenarioData}"""
    t0 = int(_utc(start).timestamp()) // step_s * step_s
    times = [t0 + i * step_s for i in range(int(minutes * 60 // step_s) + 1)]
    rng = random.Random("nvidia")
    fams: dict[str, _Family] = {}
    samples: dict = {}                               # (sample name, labels) -> [(ts, value)]

    def put(fam, typ, name, labels, ts, v):
        key = (name, tuple(labels.items()))
        if key not in samples:
            samples[key] = []
            fams.setdefault(fam, _Family(fam, typ, fam)).series.append((name, labels, samples[key]))
        samples[key].append((ts, v))

    out = {}
    # Dynamo frontend
    ns, inst, model = "dynamo_trtllm", "dynamo-frontend:8000", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B"
    lab = {"instance": inst, "job": "dynamo", "namespace": ns, "model": model}
    out_tokens, ttft = 5.0e6, {"b": [0.0] * len(TTFT_BUCKETS), "count": 0.0, "sum": 0.0}
    itl = {"b": [0.0] * len(ITL_BUCKETS), "count": 0.0, "sum": 0.0}
    for i, ts in enumerate(times):
        put("dynamo_frontend_inflight_requests", "gauge", "dynamo_frontend_inflight_requests", lab, ts, 64)
        put("dynamo_frontend_queued_requests", "gauge", "dynamo_frontend_queued_requests", lab, ts, 55 + rng.randint(0, 10))
        put("dynamo_frontend_model_max_num_seqs", "gauge", "dynamo_frontend_model_max_num_seqs", lab, ts, 64)
        if i:
            out_tokens += 1900 * step_s
            reqs = 2.5 * step_s
            for h, buckets, med, p99, n in ((ttft, TTFT_BUCKETS, 8.0, 24.0, reqs), (itl, ITL_BUCKETS, 0.033, 0.09, 1900 * step_s)):
                for j, b in enumerate(buckets):
                    h["b"][j] += n * _lognormal_cdf(b, med, p99)
                h["count"] += n
                h["sum"] += n * _lognormal_mean(med, p99)
        put("dynamo_frontend_output_tokens", "counter", "dynamo_frontend_output_tokens_total", lab, ts, math.floor(out_tokens))
        for fam, h, buckets in (("dynamo_frontend_time_to_first_token_seconds", ttft, TTFT_BUCKETS),
                                ("dynamo_frontend_inter_token_latency_seconds", itl, ITL_BUCKETS)):
            cnt = round(h["count"])
            for j, b in enumerate(buckets):
                put(fam, "histogram", fam + "_bucket", {**lab, "le": _le(b)}, ts, min(round(h["b"][j]), cnt))
            put(fam, "histogram", fam + "_bucket", {**lab, "le": "+Inf"}, ts, cnt)
            put(fam, "histogram", fam + "_sum", lab, ts, round(h["sum"], 4))
            put(fam, "histogram", fam + "_count", lab, ts, cnt)
    out[ns] = ScenarioData(name=ns, namespace=ns, instances=[inst], model_name=model,
                           start=datetime.fromtimestamp(t0, timezone.utc),
                           end=datetime.fromtimestamp(times[-1], timezone.utc), step_s=step_s, job="dynamo")
    # Triton + TensorRT-LLM backend
    ns, inst = "triton_trtllm", "triton-0:8002"
    lab = {"instance": inst, "job": "triton", "namespace": ns, "model": "tensorrt_llm", "version": "1"}
    for ts in times:
        for rt, v in (("active", 64), ("max", 64), ("scheduled", 64), ("context", 3), ("waiting", 35 + rng.randint(0, 10))):
            put("nv_trt_llm_request_metrics", "gauge", "nv_trt_llm_request_metrics", {**lab, "request_type": rt}, ts, v)
        used = 6050 + rng.randint(0, 150)
        for bt, v in (("max", 6239), ("used", used), ("free", 6239 - used), ("tokens_per", 64), ("fraction", round(used / 6239, 4))):
            put("nv_trt_llm_kv_cache_block_metrics", "gauge", "nv_trt_llm_kv_cache_block_metrics",
                {**lab, "kv_cache_block_type": bt}, ts, v)
    out[ns] = ScenarioData(name=ns, namespace=ns, instances=[inst], model_name="tensorrt_llm",
                           start=datetime.fromtimestamp(t0, timezone.utc),
                           end=datetime.fromtimestamp(times[-1], timezone.utc), step_s=step_s, job="triton")
    _write(path, fams)
    return out


def default_start(minutes: int = DEFAULT_MINUTES, lag_s: int = END_LAG_S) -> datetime:
    """Start so that the data ends ``lag_s`` before now (inside Prometheus's 5-minute lookback)."""
    return datetime.now(timezone.utc) - timedelta(minutes=minutes, seconds=lag_s)


# ---------------------------------------------------------------------------------------------
# promtool
# ---------------------------------------------------------------------------------------------
def backfill(openmetrics_path, tsdb_dir, timeout: float = 120) -> str:
    """``promtool tsdb create-blocks-from openmetrics FILE DIR``; returns promtool's stdout."""
    tsdb_dir = Path(tsdb_dir)
    tsdb_dir.mkdir(parents=True, exist_ok=True)
    promtool = shutil.which("promtool")
    if promtool is None:
        raise HarnessError("promtool is not on PATH")
    p = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics_path), str(tsdb_dir)],
                       capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise HarnessError(f"promtool backfill of {openmetrics_path} failed (exit {p.returncode}):\n"
                           f"{p.stderr.strip() or p.stdout.strip()}")
    return p.stdout


# ---------------------------------------------------------------------------------------------
# Processes and ports
# ---------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """GET without any proxy from the environment; (status, body); raises on connection errors."""
    try:
        with _NO_PROXY_OPENER.open(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _pdeathsig():   # Linux: the child gets SIGTERM if the test process dies without cleaning up
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
    except Exception:
        pass


_LIVE: set = set()


@atexit.register
def _stop_all():
    for srv in list(_LIVE):
        try:
            srv.stop()
        except Exception:
            pass


MINIMAL_CONFIG = """\
# diagnose test harness: no scrape targets; all data comes from backfilled blocks.
global:
  scrape_interval: 15s
  evaluation_interval: 15s
scrape_configs: []
"""


class PromServer:
    """A real Prometheus over ``tsdb_dir`` on 127.0.0.1:<free port>.

    with PromServer(tsdb) as prom:
        requests.get(prom.url + "/api/v1/query", params={"query": "up"})
        prom.stop()          # may be called mid-test; exit stops it again harmlessly
    """

    def __init__(self, tsdb_dir, workdir=None, ready_timeout: float = READY_TIMEOUT_S, extra_args=()):
        self.tsdb_dir = Path(tsdb_dir)
        self.workdir = Path(workdir) if workdir else self.tsdb_dir.parent / f"prom-{os.getpid()}-{id(self):x}"
        self.ready_timeout = ready_timeout
        self.extra_args = list(extra_args)
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.log_path = self.workdir / "prometheus.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def start(self) -> "PromServer":
        exe = shutil.which("prometheus")
        if exe is None:
            raise HarnessError("prometheus is not on PATH")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.tsdb_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "prometheus.yml"
        cfg.write_text(MINIMAL_CONFIG)
        for attempt in range(3):           # a free port can be taken between probe and bind: retry
            self.port = free_port()
            args = [exe, f"--config.file={cfg}", f"--storage.tsdb.path={self.tsdb_dir}",
                    f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=100y",
                    "--log.level=info", *self.extra_args]
            log = self.log_path.open("ab")
            try:
                self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             cwd=self.workdir,
                                             preexec_fn=_pdeathsig if sys.platform.startswith("linux") else None)
            finally:
                log.close()
            _LIVE.add(self)
            try:
                self._wait_ready()
                return self
            except HarnessError:
                exited = self.proc.poll() is not None
                self.stop()
                if not (exited and "address already in use" in self.log_tail().lower()) or attempt == 2:
                    raise
        return self

    def _wait_ready(self):
        deadline = time.monotonic() + self.ready_timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise HarnessError(f"prometheus exited with {self.proc.returncode} before it was ready:\n"
                                   f"{self.log_tail()}")
            try:
                status, _ = http_get(self.url + "/-/ready", timeout=1.0)
                if status == 200:
                    return
                last = f"HTTP {status}"
            except OSError as e:
                last = repr(e)
            time.sleep(0.1)
        raise HarnessError(f"prometheus on {self.url} not ready after {self.ready_timeout:.0f} s ({last}):\n"
                           f"{self.log_tail()}")

    def stop(self) -> None:
        """Terminate by PID, kill after STOP_GRACE_S; idempotent."""
        p = self.proc
        if p is None:
            _LIVE.discard(self)
            return
        try:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=STOP_GRACE_S)
        finally:
            _LIVE.discard(self)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> "PromServer":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()


# ---------------------------------------------------------------------------------------------
# A misbehaving endpoint
# ---------------------------------------------------------------------------------------------
HTML_PAGE = b"""<!DOCTYPE html>
<html><head><title>Sign in - Corporate SSO</title></head>
<body><h1>Session expired</h1><p>Please <a href="/login">sign in</a> to continue.</p></body></html>
"""
GARBAGE_JSON = b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"vllm:num_req'
SERVER_ERROR_BODY = b'{"status":"error","errorType":"internal","error":"query processing would load too many samples into memory"}'


class _QuietThreadingHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def handle_error(self, request, client_address):   # a client that hung up is not our problem
        pass


SLOW_METRICS = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:gpu_cache_usage_perc",
                "vllm:prompt_tokens_total", "vllm:generation_tokens_total")


class BadServer:
    """An HTTP endpoint on 127.0.0.1:<free port> that fails the way a bad Prometheus URL does.

    modes:
      unauthorized  401 + ``WWW-Authenticate: Bearer realm="prometheus"`` (records Authorization headers)
      hang          reads the request, then holds it without answering (at most ``hang_s`` ≤ 30 s;
                    released at once when the server stops), then closes without a response
      html          200 ``text/html`` login page
      garbage       200 ``application/json`` with truncated, invalid JSON
      server_error  500 with a Prometheus-style JSON error body
      dies_midway   forwards the first ``die_after`` requests to ``upstream`` (a real Prometheus),
                    then closes every later connection without a response (a server that died)
      proxy         forwards every request to ``upstream`` (records the headers the client sent)
      drip          200 with a Content-Length, then the body one byte every ``drip_s`` seconds (a server
                    that never trips a socket read timeout)
      huge          200 ``application/json``: a well-formed answer of ``huge_mb`` MiB (metric names, or a
                    query's result), streamed
      slow          answers every request correctly after ``delay_s``: a few vLLM metric names, an empty
                    query result (each answer within a per-request timeout, all of them not)

    ``tls=(certfile, keyfile)`` serves any mode over HTTPS with that certificate (``url`` says https).
    """

    MODES = ("unauthorized", "hang", "html", "garbage", "server_error", "dies_midway", "proxy", "drip", "huge", "slow")

    def __init__(self, mode: str, *, hang_s: float = HANG_CAP_S, upstream: str | None = None, die_after: int = 3,
                 tls: tuple | None = None, drip_s: float = 2.0, huge_mb: int = 200, delay_s: float = 4.0):
        self.drip_s, self.huge_mb, self.delay_s = drip_s, huge_mb, delay_s
        if mode not in self.MODES:
            raise ValueError(f"unknown mode {mode!r}; one of {self.MODES}")
        if mode in ("dies_midway", "proxy") and not upstream:
            raise ValueError(f"{mode} needs upstream=<prometheus url>")
        self.tls = tls
        self.mode = mode
        self.hang_s = min(float(hang_s), HANG_CAP_S)
        self.upstream = upstream.rstrip("/") if upstream else None
        self.die_after = die_after
        self.requests: list = []          # [(method, path, {header: value})]
        self.forwarded = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.released = 0                   # hanging handlers that have returned
        self._httpd = None
        self._thread = None
        self._port: int | None = None

    @property
    def port(self) -> int:          # still known after stop(), for messages and "is it closed" checks
        return self._port

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def _handler(self):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "BadServer/1.0"

            def log_message(self, *a):
                pass

            def _send(self, code, body: bytes, ctype: str, headers=()):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with outer._lock:
                    outer.requests.append((self.command, self.path, dict(self.headers.items())))
                m = outer.mode
                try:
                    if m == "unauthorized":
                        self._send(401, b"Unauthorized\n", "text/plain; charset=utf-8",
                                   [("WWW-Authenticate", 'Bearer realm="prometheus"')])
                    elif m == "hang":
                        outer._stop.wait(outer.hang_s)
                        with outer._lock:
                            outer.released += 1
                        self.close_connection = True          # no response at all
                    elif m == "html":
                        self._send(200, HTML_PAGE, "text/html; charset=utf-8")
                    elif m == "garbage":
                        self._send(200, GARBAGE_JSON, "application/json")
                    elif m == "server_error":
                        self._send(500, SERVER_ERROR_BODY, "application/json")
                    elif m == "dies_midway":
                        with outer._lock:
                            alive = outer.forwarded < outer.die_after
                            if alive:
                                outer.forwarded += 1
                        if not alive:
                            self.close_connection = True      # dead: hang up without a response
                            return
                        self._proxy(body)
                    elif m == "proxy":
                        self._proxy(body)
                    elif m == "drip":
                        data = json.dumps({"status": "success", "data": ["vllm:num_requests_running"]}).encode()
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        for i in range(len(data)):
                            if outer._stop.wait(outer.drip_s):
                                break
                            self.wfile.write(data[i:i + 1])
                            self.wfile.flush()
                        self.close_connection = True
                    elif m == "huge":
                        self._huge()
                    elif m == "slow":
                        if outer._stop.wait(outer.delay_s):
                            return
                        if "/label/__name__/values" in self.path:
                            data = {"status": "success", "data": sorted(SLOW_METRICS)}
                        else:
                            data = {"status": "success", "data": {"resultType": "matrix", "result": []}}
                        self._send(200, json.dumps(data).encode(), "application/json")
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _huge(self):
                """A valid JSON answer of huge_mb MiB, written in pieces (never held whole here)."""
                size = outer.huge_mb << 20
                name = b'"vllm:num_requests_running_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",'
                n = size // len(name)
                head, tail = b'{"status":"success","data":[', b'"vllm:num_requests_running"]}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(head) + n * len(name) + len(tail)))
                self.end_headers()
                self.wfile.write(head)
                chunk = name * 4096
                left = n
                while left > 0 and not outer._stop.is_set():
                    k = min(left, 4096)
                    self.wfile.write(chunk if k == 4096 else name * k)
                    left -= k
                self.wfile.write(tail)

            def _proxy(self, body: bytes):
                req = urllib.request.Request(outer.upstream + self.path, data=body or None, method=self.command)
                for h in ("Content-Type", "Accept", "Authorization"):
                    if self.headers.get(h):
                        req.add_header(h, self.headers[h])
                try:
                    with _NO_PROXY_OPENER.open(req, timeout=30) as r:
                        code, data, ctype = r.status, r.read(), r.headers.get("Content-Type", "application/json")
                except urllib.error.HTTPError as e:
                    code, data, ctype = e.code, e.read(), e.headers.get("Content-Type", "application/json")
                self._send(code, data, ctype)

            do_GET = do_POST = do_HEAD = _handle

        return Handler

    def start(self) -> "BadServer":
        self._httpd = _QuietThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._port = self._httpd.server_address[1]
        if self.tls:         # the handshake happens in the handler's thread: a client that gives up stalls nothing
            import ssl
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*self.tls)
            self._httpd.socket = ctx.wrap_socket(self._httpd.socket, server_side=True, do_handshake_on_connect=False)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"BadServer-{self.mode}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()                   # releases hanging handlers at once
        deadline = time.monotonic() + 5    # and lets them return before the port closes
        while self.mode == "hang" and self.released < len(self.requests) and time.monotonic() < deadline:
            time.sleep(0.01)
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
            self._httpd = None

    def __enter__(self) -> "BadServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def prom_query(url: str, query: str, at: datetime | float | None = None, timeout: float = 10.0) -> list:
    """Instant query through the HTTP API (no proxies); returns data.result, raises on error."""
    from urllib.parse import urlencode
    params = {"query": query}
    if at is not None:
        params["time"] = str(at.timestamp() if isinstance(at, datetime) else at)
    status, body = http_get(f"{url}/api/v1/query?{urlencode(params)}", timeout=timeout)
    doc = json.loads(body)
    if status != 200 or doc.get("status") != "success":
        raise HarnessError(f"query {query!r} failed: HTTP {status} {body[:300]!r}")
    return doc["data"]["result"]
