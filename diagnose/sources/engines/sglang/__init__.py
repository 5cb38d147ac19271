"""SGLang: `launch_server` logs, `sglang:` metrics and flags."""
from __future__ import annotations

from .. import Engine
from . import header

ENGINE = Engine(
    name="sglang",
    header=header.match,
    formats=("sglang",),
    keywords=("batch", "#running-req", "Receive: obj=", "ServerArgs", "server_args", "Load weight", "max_total_num_tokens",
              "Capture cuda graph", "fired up", "retract", "Not enough memory", "hit an exception", "sigquit", "SIGQUIT",
              "sglang", "Health check failed", "SGLang Version", "SGLang version"),
    launch_hints=("server_args",),
    launch=r"server_args(?:=|: )(?:ServerArgs\(|\{)",
    expects=("Decode batch", "Prefill batch", "server_args=ServerArgs(", "#running-req"),
    # (`[stamp] LMCache INFO:` and the like are another library's logger, not SGLang's)
    shape=r"\[(?:\d{4}-\d\d-\d\d |\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d+)?(?: [A-Z][A-Z_]*\d+)*\] (?![\w.]+ (?:DEBUG|INFO|WARNING|ERROR|CRITICAL):)",
    # its SIGTERM handler: `SIGTERM received. signum=None frame=None. Draining requests and shutting
    # down...`, then `Gracefully exiting... Remaining number of requests 0`
    stopping=r"^SIGTERM received\. |^Gracefully exiting\.\.\.",
    stop_hints=("Gracefully",),
    metric_prefixes=("sglang:", "sglang_"),
    gauges={
        "sglang:num_running_reqs": ("running", 1, "sum"), "sglang:num_queue_reqs": ("waiting", 1, "sum"),
        "sglang:token_usage": ("kv_usage", 100, "max"), "sglang:gen_throughput": ("gen_tps", 1, "sum"),
        "sglang:cache_hit_rate": ("prefix_hit", 100, "avg"),
        "sglang:spec_accept_rate": ("spec_accept", 100, "avg"),
    },
    counters={
        "sglang:generation_tokens_total": ("gen_tps", "rate"), "sglang:prompt_tokens_total": ("prompt_tps", "rate"),
        # the retraction counter (0.5.x); the gauge sglang:num_retracted_reqs holds one interval's
        # retractions and is not a counter
        "sglang:num_retracted_requests_total": ("preemptions", "increase"),
    },
    ratios={("sglang:prompt_tokens_histogram_sum", "sglang:prompt_tokens_histogram_count"): ("prompt_len", 1),
            # prefix-cache hit tokens over prompt tokens (0.4.9+); the cache_hit_rate gauge is the fallback
            ("sglang:cached_tokens_total", "sglang:prompt_tokens_total"): ("prefix_hit", 100)},
    # finished requests (0.4.3+) and aborted ones (0.4.9+)
    window_counters={"sglang:num_requests_total": ("finished", None), "sglang:num_aborted_requests_total": ("aborted", None)},
    histograms={
        "sglang:time_to_first_token_seconds": "ttft", "sglang:inter_token_latency_seconds": "itl",
        "sglang:time_per_output_token_seconds": "itl",
    },
    stage_histograms={"sglang:queue_time_seconds": "queue_time", "sglang:e2e_request_latency_seconds": "e2e"},
    fact_gauges={"sglang:max_total_num_tokens": "kv_cache_tokens", "sglang:max_running_requests": "max_num_seqs",
                 "sglang:context_len": "max_model_len"},
    command="python -m sglang.launch_server",
    model_flag="--model-path",
    aliases={"--tp": "--tp-size", "--dp": "--dp-size", "--pp": "--pp-size", "--model": "--model-path"},
    # (SGLang's chunked-prefill size is the per-step prefill token budget)
    fact_flags={"max_num_seqs": "--max-running-requests", "max_num_batched_tokens": "--chunked-prefill-size",
                "max_model_len": "--context-length", "enforce_eager": ("--disable-cuda-graph", True)},
    fact_values={"kv_cache_dtype": {"fp8": "fp8_e4m3"}},      # SGLang names the FP8 format
    flags_from_facts=(("tensor_parallel_size", "--tp-size", 1), ("pipeline_parallel_size", "--pp-size", 1),
                      ("data_parallel_size", "--dp-size", 1), ("enforce_eager", "--disable-cuda-graph", False),
                      ("kv_cache_dtype", "--kv-cache-dtype", "auto"), ("quantization", "--quantization", None),
                      ("gpu_memory_utilization", "--mem-fraction-static", None),
                      ("schedule_conservativeness", "--schedule-conservativeness", 1.0)),
)
