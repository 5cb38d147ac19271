"""vLLM: V0 (0.4–0.7) and V1 (0.8 on) logs, `vllm:` metrics, `vllm serve` flags."""
from __future__ import annotations

from .. import Engine
from . import header

ENGINE = Engine(
    name="vllm",
    header=header.match,
    formats=("vllm",),
    keywords=("vllm serve", "vllm.entrypoints", "non-default args", "args: Namespace", "with config:",
              "Maximum concurrency", "Cudagraph", "SpecDecoding", "Prefix cache hit rate", "Graph capturing",
              "VllmWorkerProcess", "failed execution"),
    launch_hints=("server version", "non-default args", "args: Namespace", "LLM engine (v"),
    launch=r"vLLM (?:API )?server version \S|^non-default args: |^args: Namespace\(",
    process_start=r"Initializing (?:a V[01] |an )LLM engine \(v",
    expects=("Avg prompt throughput", "non-default args:", "Maximum concurrency for", "GPU KV cache size",
             "API server version", "Initializing a V1 LLM engine (v", "Initializing an LLM engine (v"),
    shape=r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./<>-]+:\d+\] ",
    # V1 from ~0.2x tags every line of its stop `[shutdown]` (`EngineCore: trigger received
    # signal=SIGTERM`, `API server: shutdown triggered`, an offline LLM's `Executor: …` at exit),
    # then an EngineDeadError from the output handler. (A failure before it stays a crash.)
    # V0's multiprocessing executor on its way out: `Terminating local vLLM worker processes`.
    stopping=r"\[shutdown\] \w|Terminating local vLLM worker processes",
    stop_hints=("[shutdown]", "Terminating local vLLM"),
    metric_prefixes=("vllm:",),
    gauges={
        "vllm:num_requests_running": ("running", 1, "sum"), "vllm:num_requests_waiting": ("waiting", 1, "sum"),
        # KV usage: the fullest engine of an instance (data-parallel engines each have their own
        # cache; an average hides the one at 98 %), as vLLM's dashboards show it.
        "vllm:kv_cache_usage_perc": ("kv_usage", 100, "max"), "vllm:gpu_cache_usage_perc": ("kv_usage", 100, "max"),
        "vllm:num_requests_swapped": ("swapped", 1, "sum"),
        "vllm:gpu_prefix_cache_hit_rate": ("prefix_hit", 100, "avg"),
        # V0 (to 0.6.6): the logged averages; the token counters' rates win where both are read
        "vllm:avg_generation_throughput_toks_per_s": ("gen_tps", 1, "sum"),
        "vllm:avg_prompt_throughput_toks_per_s": ("prompt_tps", 1, "sum"),
        # V0 (0.5.3–0.9): the draft acceptance rate as a fraction; the token counters win
        "vllm:spec_decode_draft_acceptance_rate": ("spec_accept", 100, "avg"),
    },
    counters={
        "vllm:generation_tokens_total": ("gen_tps", "rate"), "vllm:prompt_tokens_total": ("prompt_tps", "rate"),
        "vllm:num_preemptions_total": ("preemptions", "increase"),
    },
    # hit tokens / queried tokens (V1 names, and the gpu_ ones of 0.7.3–0.11); prompt length
    ratios={
        ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"): ("prefix_hit", 100),
        ("vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total"): ("prefix_hit", 100),
        ("vllm:request_prompt_tokens_sum", "vllm:request_prompt_tokens_count"): ("prompt_len", 1),
        # accepted / drafted tokens (V0 0.5.3+, V1 0.8.4+): the draft acceptance rate
        ("vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_draft_tokens_total"): ("spec_accept", 100),
    },
    histograms={
        "vllm:time_to_first_token_seconds": "ttft", "vllm:inter_token_latency_seconds": "itl",
        "vllm:time_per_output_token_seconds": "itl",
    },
    stage_histograms={
        "vllm:request_queue_time_seconds": "queue_time", "vllm:e2e_request_latency_seconds": "e2e",
        "vllm:request_prefill_time_seconds": "prefill_time", "vllm:request_decode_time_seconds": "decode_time",
        # tokens per engine step (a histogram despite its `_total`)
        "vllm:iteration_tokens_total": "iteration_tokens",
    },
    window_counters={"vllm:request_success_total": ("finished", "finished_reason")},
    command="vllm serve",
    aliases={"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size", "-dp": "--data-parallel-size",
             "--tensor_parallel_size": "--tensor-parallel-size"},
    fact_flags={"max_num_seqs": "--max-num-seqs", "max_num_batched_tokens": "--max-num-batched-tokens",
                "max_model_len": "--max-model-len", "gpu_memory_utilization": "--gpu-memory-utilization",
                "enforce_eager": ("--enforce-eager", True)},
    flags_from_facts=(("tensor_parallel_size", "--tensor-parallel-size", 1), ("pipeline_parallel_size", "--pipeline-parallel-size", 1),
                      ("data_parallel_size", "--data-parallel-size", 1), ("enforce_eager", "--enforce-eager", False),
                      ("kv_cache_dtype", "--kv-cache-dtype", "auto"), ("quantization", "--quantization", None)),
)
