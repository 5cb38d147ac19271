"""Benchmark results printed to a terminal, as a job's output holds them after the server's log:

- `vllm bench serve` / `benchmark_serving.py` and SGLang `bench_serving`: a block between
  `============ Serving Benchmark Result ============` and a line of `=`, `Key: value` lines with
  `----Title----` rules between; SGLang's says `Backend:`, vLLM's does not;
- `trtllm-bench`: `= ENGINE DETAILS`, `= WORLD + RUNTIME INFORMATION`, `= PERFORMANCE OVERVIEW`,
  … sections between rules of `=`, `Key:<tabs or spaces>value` lines, and `[TTFT] P50 : x` breakdowns.

Each block becomes one point of a load sweep (ev.bench_points, the fields of bench_files.py);
trtllm-bench's engine details are the run's deployment facts (it runs the engine in-process)."""
from __future__ import annotations

import re

from .base import FormatReader, LineFormat
from .bench_files import POINT_FIELDS
from ...lazyre import lazy

KV = lazy(r"^(?P<k>[A-Za-z][^:]{1,80}?)\s*:\s*(?P<v>\S.*?)\s*$")
BREAKDOWN = lazy(r"^\[(?P<m>TTFT|TPOT|ITL|GEN|E2E|Latency)\]\s+(?P<q>MINIMUM|MAXIMUM|AVERAGE|P\d+)\s*:\s*(?P<v>[\d.eE+-]+)")
RULE = lazy(r"^(?:=+|-+|-+[^-]+-+|=+[^=]+=+)$")
SECTION = lazy(r"^= (?P<t>[A-Z][A-Z +/&()-]+?)\s*$")

# `Key:` of vLLM and SGLang's block → point field, and a scale to ms where the key says seconds.
SERVE_KEYS = {
    "successful requests": "completed", "failed requests": "failed", "benchmark duration (s)": "duration_s",
    "request throughput (req/s)": "request_tps", "output token throughput (tok/s)": "output_tps",
    "mean ttft (ms)": "ttft_mean_ms", "median ttft (ms)": "ttft_p50_ms", "p99 ttft (ms)": "ttft_p99_ms",
    "mean tpot (ms)": "tpot_mean_ms", "median tpot (ms)": "tpot_p50_ms", "p99 tpot (ms)": "tpot_p99_ms",
    "mean itl (ms)": "itl_mean_ms", "median itl (ms)": "itl_p50_ms", "p99 itl (ms)": "itl_p99_ms",
    "median e2e latency (ms)": "e2e_p50_ms", "median e2el (ms)": "e2e_p50_ms",
    "maximum request concurrency": "concurrency", "max request concurrency": "concurrency",
    "traffic request rate": "request_rate", "request rate configured (rps)": "request_rate",
}
TRT_KEYS = {
    "number of requests": "completed", "request throughput (req/sec)": "request_tps",
    "total output throughput (tokens/sec)": "output_tps", "token throughput (tokens/sec)": "output_tps",
    "average time-to-first-token [ttft] (ms)": "ttft_mean_ms", "average time-per-output-token [tpot] (ms)": "tpot_mean_ms",
    "number of concurrent requests": "concurrency", "average input length (tokens)": "input_len_mean",
    "average output length (tokens)": "output_len_mean", "total latency (ms)": "_latency_ms",
}
# trtllm-bench's engine details → deployment facts
TRT_FACTS = {"model": "model", "tp size": "tensor_parallel_size", "pp size": "pipeline_parallel_size",
             "ep size": "expert_parallel_size", "max runtime batch size": "max_num_seqs",
             "max runtime tokens": "max_num_batched_tokens", "max sequence length": "max_model_len",
             "kv cache dtype": "kv_cache_dtype", "quantization": "quantization", "dtype": "dtype",
             "tensorrt-llm version": "engine_version"}


def _number(v: str):
    v = v.strip().rstrip("%").strip()
    try:
        x = float(v)
    except ValueError:
        return None
    return x if x == x and abs(x) < 1e15 else None


class BenchBlocks(LineFormat):
    kind = "bench-result"
    keywords = ("Serving Benchmark Result", "= ENGINE DETAILS", "= PERFORMANCE OVERVIEW", "= WORLD + RUNTIME",
                "= REQUEST DETAILS", "= DATASET DETAILS", "= STREAMING STATISTICS", "= PYTORCH BACKEND")

    def reader(self, src, info):
        return _Reader(src)


class _Reader(FormatReader):
    kind = BenchBlocks.kind

    def __init__(self, src: str) -> None:
        self.src = src
        self.ev = None
        self.tool = None
        self.point: dict | None = None
        self.first = 0
        self.facts: dict = {}

    def open(self, n, text, ev, before=False):
        s = text.strip()
        if "Serving Benchmark Result" in s and s.startswith("="):
            self.tool = "vllm-bench-serve"
        elif SECTION.match(s) and any(k in s for k in self.keywords_trt()):
            self.tool = "trtllm-bench"
        else:
            return False
        self.ev, self.first = ev, n
        self.point = {"tool": self.tool, "source": self.src, "line": n}
        self.facts = {}
        return True

    @staticmethod
    def keywords_trt():
        return ("ENGINE DETAILS", "PERFORMANCE OVERVIEW", "WORLD + RUNTIME", "REQUEST DETAILS", "DATASET DETAILS",
                "STREAMING STATISTICS", "PYTORCH BACKEND")

    def more(self, n, text):
        s = text.strip()
        if not s:
            return self.tool == "trtllm-bench"     # its sections are apart by blank lines
        if RULE.match(s):
            if self.tool != "trtllm-bench" and set(s) == {"="}:
                self._close()           # vLLM/SGLang: the closing rule
                return True
            return True
        if SECTION.match(s):
            return self.tool == "trtllm-bench"
        m = BREAKDOWN.match(s)
        if m and self.tool == "trtllm-bench":
            metric, q = m.group("m").lower(), m.group("q")
            key = {"AVERAGE": "mean", "P50": "p50", "P99": "p99"}.get(q)
            if key and metric in ("ttft", "tpot", "itl"):
                self.point[f"{metric}_{key}_ms"] = _number(m.group("v"))
            return True
        m = KV.match(s)
        if not m or self.point is None:
            return False
        k, v = m.group("k").strip().lower(), m.group("v")
        # trtllm-bench pads its values (`Model:\t\t\t…`, `Request Throughput (req/sec):      43.2`): a
        # log line after the report (`Loading: 100%`) is not the report's.
        if self.tool == "trtllm-bench" and k not in TRT_KEYS and k not in TRT_FACTS and not re.search(r":(?:\t|  )", s):
            return False
        if self.tool != "trtllm-bench":
            if k == "backend":
                self.point["tool"] = "sglang-bench-serving" if v.lower().startswith("sglang") else self.point["tool"]
                self.point["backend"] = v.strip()
                return True
            f = SERVE_KEYS.get(k)
            if f:
                self.point[f] = _number(v)
            elif k.startswith("total input tokens"):
                self.point["_input"] = _number(v)
            elif k.startswith("total generated tokens") and "retokenized" not in k:
                self.point["_output"] = _number(v)
            return True
        f = TRT_KEYS.get(k)
        if f:
            self.point[f] = _number(v)
        fact = TRT_FACTS.get(k)
        if fact:
            val = v.strip()
            self.facts[fact] = (_number(val) if fact.endswith(("_size", "_seqs", "_tokens", "_len")) else val, n, s)
        return True

    def end(self) -> None:
        if self.tool == "trtllm-bench":
            self._close()

    def _close(self) -> None:
        p, self.point = self.point, None
        if p is None or self.ev is None:
            return
        ev = self.ev
        for fact, (val, n, line) in self.facts.items():
            if val not in (None, "None", "N/A"):
                ev.set_fact(fact, val, self.src, n, line, override=False)
        if self.tool == "trtllm-bench":
            ev.set_fact("engine", "trtllm", self.src, self.first, "trtllm-bench report", override=False)
            if p.get("concurrency") is None and p.get("completed"):
                p["concurrency"], p["burst"] = p["completed"], True
        done = p.get("completed")
        if done:
            if p.get("_input") is not None:
                p["input_len_mean"] = round(p["_input"] / done, 1)
            if p.get("_output") is not None:
                p["output_len_mean"] = round(p["_output"] / done, 1)
        if p.get("concurrency") is None and p.get("request_rate") is None and done:
            p["concurrency"], p["burst"] = done + (p.get("failed") or 0), True
        if not any(p.get(k) is not None for k in ("output_tps", "request_tps", "ttft_mean_ms", "ttft_p50_ms")):
            return
        ev.bench_points.append({k: p.get(k) for k in POINT_FIELDS})
        ev.add_event("bench_block", self.src, self.first,
                     f"{p['tool']} result: {p.get('completed')} requests, {p.get('output_tps')} output tokens/s")

    def finish(self) -> None:
        if self.point is not None:
            self._close()


FORMAT = BenchBlocks()
