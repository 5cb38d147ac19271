"""TensorRT-LLM: trtllm-serve and trtllm-bench logs, Triton's TensorRT-LLM backend (glog lines,
`nv_trt_llm_` metrics), `trtllm_` metrics, trtllm-serve flags."""
from __future__ import annotations

from .. import Engine
from . import header

ENGINE = Engine(
    name="trtllm",
    header=header.match,
    formats=("trtllm", "triton"),
    keywords=("TensorRT-LLM", "TRT-LLM", "[TRT]", "Active Request Count", "iterLatencyMS", "Free KV cache"),  # (MODEL_DIR's lines hold "TRT-LLM")
    # extra_llm_api_options / SKU profiles, and /metrics IterationStats dumps
    file_markers=(b"TensorRT", b"kv_cache_config", b"iterLatencyMS", b"Active Request Count"),
    launch_hints=("LLM version",),
    process_start=r"TensorRT[- ]LLM version: \d",
    expects=("elapsed_time = ",),
    # (Triton's glog header is every glog user's — Mooncake's, NCCL plugins' —: not proof alone)
    shape=r"\[TensorRT-LLM\]\[[A-Z]+\]|\[TRT(?:-LLM(?: [A-Z][A-Z\-]*)?)?\] (?:\[(?:MPI_Rank|RANK) \d+\] )?\[[A-Z]\]|^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ (?:libtensorrtllm|model_lifecycle|python_be|tensorrt_llm)[\w.]*:\d+\] ",
    # NVIDIA Dynamo's TensorRT-LLM workers: `[TensorRTLLMWorker:1] Received signal 15, initiating graceful shutdown`
    # and tritonserver's own: `Signal (15) received.`, `Waiting for in-flight requests to complete.`
    stopping=r"initiating graceful shutdown|^Signal \((?:2|15)\) received\.|Waiting for in-flight requests to complete",
    stop_hints=("graceful", "Signal (", "in-flight requests"),
    metric_prefixes=("trtllm_", "nv_trt_llm_", "nv_inference_"),
    gauges={
        "trtllm_num_requests_running": ("running", 1, "sum"), "trtllm_num_requests_waiting": ("waiting", 1, "sum"),
        "trtllm_kv_cache_utilization": ("kv_usage", 100, "max"),
        "nv_trt_llm_request_metrics": (None, 1, "sum"),
    },
    # Triton's backend: one gauge, quantities told apart by a label (v0.18+ for waiting and fraction)
    labelled_gauges={
        ("nv_trt_llm_request_metrics", 'request_type="active"'): ("running", 1, "sum"),
        ("nv_trt_llm_request_metrics", 'request_type="waiting"'): ("waiting", 1, "sum"),
        ("nv_trt_llm_kv_cache_block_metrics", 'kv_cache_block_type="fraction"'): ("kv_usage", 100, "max"),
        ("nv_trt_llm_request_metrics", 'request_type="max"'): ("fact:max_num_seqs", 1, "max"),
        # before v0.18 no `fraction`: KV usage is used blocks over max blocks (prometheus.finish_row)
        ("nv_trt_llm_kv_cache_block_metrics", 'kv_cache_block_type="used"'): ("_kv_used", 1, "sum"),
        ("nv_trt_llm_kv_cache_block_metrics", 'kv_cache_block_type="max"'): ("_kv_max", 1, "sum"),
    },
    counters={"trtllm_generation_tokens_total": ("gen_tps", "rate"), "trtllm_prompt_tokens_total": ("prompt_tps", "rate")},
    ratios={("trtllm_prompt_cached_tokens_total", "trtllm_prompt_tokens_total"): ("prefix_hit", 100),
            ("trtllm_spec_decode_accepted_tokens_total", "trtllm_spec_decode_drafted_tokens_total"): ("spec_accept", 100)},
    window_counters={"trtllm_request_success_total": ("finished", "finished_reason")},
    histograms={"trtllm_time_to_first_token_seconds": "ttft", "trtllm_time_per_output_token_seconds": "itl"},
    stage_histograms={
        "trtllm_request_queue_time_seconds": "queue_time", "trtllm_e2e_request_latency_seconds": "e2e",
        "trtllm_request_prefill_time_seconds": "prefill_time", "trtllm_request_decode_time_seconds": "decode_time",
    },
    fact_gauges={"trtllm_max_num_active_requests": "max_num_seqs"},
    command="trtllm-serve",
    flag_sep="_",
    fact_flags={"max_num_seqs": "--max_batch_size", "max_num_batched_tokens": "--max_num_tokens",
                "max_model_len": "--max_seq_len"},
    flags_from_facts=(("tensor_parallel_size", "--tp_size", 1), ("pipeline_parallel_size", "--pp_size", 1),
                      ("max_num_seqs", "--max_batch_size", None), ("max_num_batched_tokens", "--max_num_tokens", None)),
)
