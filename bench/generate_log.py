#!/usr/bin/env python3
"""Generate a large, realistic vLLM v0.11.0 (V1 engine) server log for benchmarks.

    python bench/generate_log.py OUT_PATH --size-gb 1.0 [--seed 1] [--gzip] [--ansi]

The log looks like the stdout of `vllm serve meta-llama/Llama-3.1-8B-Instruct
--enable-log-requests` on one GPU that has been busy for hours: a start-up block
(~70 lines), then a body in which almost every line is a request line
(`Received request ...`, `Added request ...`, uvicorn access lines), one V1
stats line (`Engine 000: Avg prompt throughput: ...`) every 10 simulated
seconds, Prometheus scrapes and health probes, and a few WARNING/ERROR lines.
Line formats follow shared/reference/vllm.md (sections 1, 3.3, 4, 9) and real
v0.11.0 logs.

Output is streamed in ~4 MiB chunks (constant memory) and is deterministic for
a given (size, seed): the `.gz` variant holds exactly the same text. The size
is that of the uncompressed text; the file is at least `size_bytes` long and
overshoots by less than one request (a few KB).

Also importable:  `from bench.generate_log import generate`
    generate(path, size_bytes, seed=1, gzip=False) -> dict(bytes=, lines=, ...)
Standard library only.
"""
from __future__ import annotations

import argparse
import calendar
import gzip as _gzip
import math
import os
import random
import sys
import time
from collections import deque

__all__ = ["generate"]

GENERATOR_VERSION = 1  # bump when the output for a given (size, seed) changes

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
API_PID = 7
ENGINE_PID = 212
MAX_MODEL_LEN = 131072
MAX_NUM_SEQS = 256
KV_TOKENS = 426752
# Simulated wall clock starts here (local time of the container, no year in the log).
START = (2025, 11, 20, 9, 0, 0)

CHUNK_CHARS = 4 << 20  # flush the line buffer every ~4 MiB

# ---------------------------------------------------------------------------------------
# Start-up block (v0.11.0, one GPU, Llama-3.1-8B, prefix caching, request logging on).
# Each entry: (seconds after START, process prefix key, level, "file:line" or None, message).
# Process keys: "api" -> (APIServer pid=7), "core" -> (EngineCore_DP0 pid=212), "" -> none.
# file None means a raw line (uvicorn / tqdm / transformers) written after the prefix.
# ---------------------------------------------------------------------------------------
_CAPTURE_SIZES = ",".join(str(x) for x in list(range(512, 0, -8)) + [4, 2, 1])
_COMPILATION_CONFIG = (
    '{"level":3,"debug_dump_path":"","cache_dir":"","backend":"","custom_ops":[],'
    '"splitting_ops":["vllm.unified_attention","vllm.unified_attention_with_output",'
    '"vllm.mamba_mixer2","vllm.mamba_mixer","vllm.short_conv","vllm.linear_attention",'
    '"vllm.plamo2_mamba_mixer","vllm.gdn_attention","vllm.sparse_attn_indexer"],'
    '"use_inductor":true,"compile_sizes":[],"inductor_compile_config":'
    '{"enable_auto_functionalized_v2":false},"inductor_passes":{},"cudagraph_mode":[2,1],'
    '"use_cudagraph":true,"cudagraph_num_of_warmups":1,"cudagraph_capture_sizes":['
    + _CAPTURE_SIZES
    + '],"cudagraph_copy_inputs":false,"full_cuda_graph":false,'
    '"use_inductor_graph_partition":false,"pass_config":{},"max_capture_size":512,'
    '"local_cache_dir":null}'
)
_ENGINE_CONFIG = (
    f"Initializing a V1 LLM engine (v0.11.0) with config: model='{MODEL}', "
    f"speculative_config=None, tokenizer='{MODEL}', skip_tokenizer_init=False, "
    "tokenizer_mode=auto, revision=None, tokenizer_revision=None, trust_remote_code=False, "
    f"dtype=torch.bfloat16, max_seq_len={MAX_MODEL_LEN}, download_dir=None, load_format=auto, "
    "tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=1, "
    "disable_custom_all_reduce=False, quantization=None, enforce_eager=False, "
    "kv_cache_dtype=auto, device_config=cuda, "
    "structured_outputs_config=StructuredOutputsConfig(backend='auto', disable_fallback=False, "
    "disable_any_whitespace=False, disable_additional_properties=False, reasoning_parser=''), "
    "observability_config=ObservabilityConfig(show_hidden_metrics_for_version=None, "
    "otlp_traces_endpoint=None, collect_detailed_traces=None), seed=0, "
    f"served_model_name={MODEL}, enable_prefix_caching=True, chunked_prefill_enabled=True, "
    f"pooler_config=None, compilation_config={_COMPILATION_CONFIG}"
)
_NON_DEFAULT_ARGS = (
    "non-default args: {'model_tag': '%s', 'enable_log_requests': True, 'host': '0.0.0.0', "
    "'model': '%s', 'max_model_len': %d, 'gpu_memory_utilization': 0.9, "
    "'enable_prefix_caching': True, 'max_num_seqs': %d}" % (MODEL, MODEL, MAX_MODEL_LEN, MAX_NUM_SEQS)
)
_ROUTES = [
    ("/openapi.json", "GET, HEAD"), ("/docs", "GET, HEAD"),
    ("/docs/oauth2-redirect", "GET, HEAD"), ("/redoc", "GET, HEAD"), ("/health", "GET"),
    ("/load", "GET"), ("/ping", "POST"), ("/ping", "GET"), ("/tokenize", "POST"),
    ("/detokenize", "POST"), ("/v1/models", "GET"), ("/version", "GET"),
    ("/v1/responses", "POST"), ("/v1/responses/{response_id}", "GET"),
    ("/v1/chat/completions", "POST"), ("/v1/completions", "POST"),
    ("/v1/embeddings", "POST"), ("/pooling", "POST"), ("/classify", "POST"),
    ("/score", "POST"), ("/v1/score", "POST"), ("/rerank", "POST"), ("/v1/rerank", "POST"),
    ("/invocations", "POST"), ("/metrics", "GET"),
]
_SHARDS = "Loading safetensors checkpoint shards: %3d%% Completed | %d/4 [%s<%s, %s]"
_STARTUP = [
    (0, "", "INFO", "__init__.py:216", "Automatically detected platform cuda."),
    (3, "api", "INFO", "api_server.py:1839", "vLLM API server version 0.11.0"),
    (3, "api", "INFO", "utils.py:233", _NON_DEFAULT_ARGS),
    (9, "api", "INFO", "model.py:547", "Resolved architecture: LlamaForCausalLM"),
    (9, "api", None, None, "`torch_dtype` is deprecated! Use `dtype` instead!"),
    (9, "api", "INFO", "model.py:1510", f"Using max model len {MAX_MODEL_LEN}"),
    (10, "api", "INFO", "scheduler.py:205",
     "Chunked prefill is enabled with max_num_batched_tokens=8192."),
    (16, "", "INFO", "__init__.py:216", "Automatically detected platform cuda."),
    (18, "core", "INFO", "core.py:644", "Waiting for init message from front-end."),
    (18, "core", "INFO", "core.py:77", _ENGINE_CONFIG),
    (20, "core", "INFO", "parallel_state.py:1208",
     "rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0"),
    (20, "core", "INFO", "topk_topp_sampler.py:55", "Using FlashInfer for top-p & top-k sampling."),
    (20, "core", "INFO", "gpu_model_runner.py:2602", f"Starting to load model {MODEL}..."),
    (21, "core", "INFO", "gpu_model_runner.py:2634", "Loading model from scratch..."),
    (21, "core", "INFO", "cuda.py:366", "Using Flash Attention backend on V1 engine."),
    (21, "core", "INFO", "weight_utils.py:392", "Using model weights format ['*.safetensors']"),
    (21, "core", None, None, _SHARDS % (0, 0, "00:00", "?", "?it/s")),
    (27, "core", None, None, _SHARDS % (25, 1, "00:05", "00:17", " 5.81s/it")),
    (32, "core", None, None, _SHARDS % (50, 2, "00:10", "00:10", " 5.24s/it")),
    (37, "core", None, None, _SHARDS % (75, 3, "00:15", "00:05", " 5.02s/it")),
    (41, "core", None, None, _SHARDS % (100, 4, "00:19", "00:00", " 4.75s/it")),
    (41, "core", None, None, _SHARDS % (100, 4, "00:19", "00:00", " 4.96s/it")),
    (41, "core", None, None, ""),
    (41, "core", "INFO", "default_loader.py:267", "Loading weights took 19.85 seconds"),
    (42, "core", "INFO", "gpu_model_runner.py:2653",
     "Model loading took 14.9889 GiB and 21.302345 seconds"),
    (49, "core", "INFO", "backends.py:548",
     "Using cache directory: /root/.cache/vllm/torch_compile_cache/3f1c2a9b7e/rank_0_0/backbone "
     "for vLLM's torch.compile"),
    (49, "core", "INFO", "backends.py:559", "Dynamo bytecode transform time: 6.71 s"),
    (54, "core", "INFO", "backends.py:197", "Cache the graph for dynamic shape for later use"),
    (75, "core", "INFO", "backends.py:218", "Compiling a graph for dynamic shape takes 25.12 s"),
    (80, "core", "INFO", "monitor.py:34", "torch.compile takes 31.83 s in total"),
    (82, "core", "INFO", "gpu_worker.py:298", "Available KV cache memory: 52.10 GiB"),
    (82, "core", "INFO", "kv_cache_utils.py:1087", f"GPU KV cache size: {KV_TOKENS:,} tokens"),
    (82, "core", "INFO", "kv_cache_utils.py:1091",
     f"Maximum concurrency for {MAX_MODEL_LEN:,} tokens per request: "
     f"{KV_TOKENS / MAX_MODEL_LEN:.2f}x"),
    (89, "core", None, None,
     "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|\u2588\u2588\u2588\u2588\u2588"
     "\u2588\u2588\u2588\u2588\u2588| 67/67 [00:06<00:00, 10.53it/s]"),
    (94, "core", None, None,
     "Capturing CUDA graphs (decode, FULL): 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588"
     "\u2588\u2588\u2588| 35/35 [00:04<00:00,  8.11it/s]"),
    (94, "core", "INFO", "gpu_model_runner.py:3480",
     "Graph capturing finished in 12 secs, took 0.52 GiB"),
    (94, "core", "INFO", "core.py:210",
     "init engine (profile, create kv cache, warmup model) took 61.20 seconds"),
    (95, "api", "INFO", "loggers.py:147",
     "Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: %d"
     % (KV_TOKENS // 16)),
    (95, "api", "INFO", "api_server.py:1634", "Supported_tasks: ['generate']"),
    (95, "api", "WARNING", "model.py:1389",
     "Default sampling parameters have been overridden by the model's Hugging Face generation "
     "config recommended from the model creator. If this is not intended, please relaunch vLLM "
     "instance with `--generation-config vllm`."),
    (95, "api", "INFO", "serving_responses.py:137",
     "Using default chat sampling params from model: {'temperature': 0.6, 'top_p': 0.9}"),
    (95, "api", "INFO", "serving_chat.py:139",
     "Using default chat sampling params from model: {'temperature': 0.6, 'top_p': 0.9}"),
    (95, "api", "INFO", "serving_completion.py:76",
     "Using default completion sampling params from model: {'temperature': 0.6, 'top_p': 0.9}"),
    (95, "api", "INFO", "api_server.py:1912", "Starting vLLM API server 0 on http://0.0.0.0:8000"),
    (95, "api", "INFO", "launcher.py:34", "Available routes are:"),
] + [
    (95, "api", "INFO", "launcher.py:42", f"Route: {p}, Methods: {m}") for p, m in _ROUTES
] + [
    (95, "api", None, None, "INFO:     Started server process [7]"),
    (95, "api", None, None, "INFO:     Waiting for application startup."),
    (95, "api", None, None, "INFO:     Application startup complete."),
]
BODY_START = 97  # seconds after START when traffic begins

# ---------------------------------------------------------------------------------------
# Prompt material. Fragments are built once from word lists with the seeded PRNG; each
# request joins a system prompt and 1-6 user fragments (so prompts vary in length and
# content but cost only a join), with matching Llama-3 token ids.
# ---------------------------------------------------------------------------------------
_WORDS = (
    "the a an of to in for on with and or but not is are was be can will should would "
    "please explain summarize write translate list compare describe review fix refactor "
    "function class module server cluster request latency throughput memory cache token "
    "tokens model prompt context window batch queue scheduler kernel GPU CPU network disk "
    "customer order invoice refund shipping account password email report meeting agenda "
    "python rust javascript sql query table index database error exception stack trace "
    "performance benchmark regression test unit integration deploy kubernetes docker pod "
    "paragraph sentence bullet points short detailed formal friendly tone style summary "
    "history science physics chemistry biology economics market price inflation policy "
    "recipe ingredients oven minutes travel itinerary hotel flight budget weather city "
    "contract clause liability warranty section paragraph document page chapter author "
    "this that these those what why how when where which who each every all some many "
    "first second third next last final new old large small fast slow simple complex"
).split()
_OPENERS = [
    "Can you", "Please", "I need you to", "Help me", "Could you please", "Quickly",
    "In two sentences,", "Step by step,", "As a senior engineer,", "Without using jargon,",
]
_TAILS = ["?", ".", "!", ":", " thanks.", " in JSON.", " as a table.", " briefly."]
_UNICODE = [
    "\u00bfC\u00f3mo est\u00e1s hoy?",  # Spanish
    "R\u00e9sum\u00e9 du caf\u00e9 et de la cr\u00e8me br\u00fbl\u00e9e.",  # French
    "\u8bf7\u603b\u7ed3\u4ee5\u4e0b\u5185\u5bb9\u3002",  # Chinese
    "\u3053\u306e\u6587\u7ae0\u3092\u82f1\u8a9e\u306b\u7ffb\u8a33\u3057\u3066\u304f\u3060\u3055\u3044\u3002",
    "Stra\u00dfe, M\u00fcnchen, \u00e4\u00f6\u00fc \u2013 \u201cquoted\u201d \u2192 done",
]
_SYSTEMS = [
    "You are a helpful assistant.",
    "You are a concise assistant. Answer in at most three sentences.",
    "You are a customer support agent for an online store. Be polite and precise, and never "
    "promise refunds without checking the order status first.",
    "You are an expert Python developer. Reply with code blocks and short explanations.",
    "You are a retrieval-augmented assistant. Use only the context below to answer. If the "
    "answer is not in the context, say you do not know.\\n\\nContext:\\n",
    "Cutting Knowledge Date: December 2023\\nToday Date: 26 Jul 2024\\n\\nYou are a helpful "
    "assistant.",
]


def _token_ids(rng: random.Random, n: int) -> str:
    # Llama-3 ids: mostly common BPE ids, some rare ones.
    out = []
    for _ in range(n):
        if rng.random() < 0.8:
            out.append(str(rng.randint(220, 30000)))
        else:
            out.append(str(rng.randint(30000, 127999)))
    return ", ".join(out)


def _build_material(rng: random.Random):
    frags = []  # (text, ids, ntok, has_apostrophe)
    for i in range(600):
        n = rng.randint(4, 40)
        words = [rng.choice(_WORDS) for _ in range(n)]
        text = rng.choice(_OPENERS) + " " + " ".join(words) + rng.choice(_TAILS)
        if i % 17 == 0:
            text = text.replace(" the ", " the customer's ", 1)
        if i % 41 == 0:
            text = text + " " + rng.choice(_UNICODE)
        if i % 9 == 0:
            text = text + "\\n\\n"  # already-escaped newline, as repr() shows it
        ntok = max(1, int(len(text) / 4.2 + rng.random() * 3))
        frags.append((text, _token_ids(rng, ntok), ntok, "'" in text))
    systems = []
    for s in _SYSTEMS:
        ntok = max(1, int(len(s) / 4.3))
        systems.append((s, _token_ids(rng, ntok), ntok))
    return frags, systems


# Llama-3 chat template, as repr() prints it (\n escaped) and as token ids.
_P0 = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\\n\\n"
_P1 = "<|eot_id|><|start_header_id|>user<|end_header_id|>\\n\\n"
_P2 = "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\\n\\n"
_T0 = "128000, 128006, 9125, 128007, 271, "
_T1 = ", 128009, 128006, 882, 128007, 271, "
_T2 = ", 128009, 128006, 78191, 128007, 271"
_TEMPLATE_TOKENS = 15


def _sampling_params(rng: random.Random) -> list[str]:
    out = []
    for _ in range(96):
        temp = rng.choice(["0.6", "0.6", "0.6", "0.7", "0.0", "0.2", "1.0", "0.8"])
        top_p = rng.choice(["0.9", "0.9", "1.0", "0.95"])
        max_tokens = rng.choice([256, 512, 512, 1024, 1024, 2048, 4096, 128, 64, 8192])
        stop = rng.choice(["[]", "[]", "[]", "['</s>']", "['\\n\\n']", "['Observation:']"])
        pres = rng.choice(["0.0", "0.0", "0.0", "0.5", "1.0"])
        seed = rng.choice(["None", "None", "None", "42", "1234"])
        logprobs = rng.choice(["None", "None", "None", "None", "5"])
        out.append(
            "SamplingParams(n=1, presence_penalty=%s, frequency_penalty=0.0, "
            "repetition_penalty=1.0, temperature=%s, top_p=%s, top_k=0, min_p=0.0, seed=%s, "
            "stop=%s, stop_token_ids=[], bad_words=[], include_stop_str_in_output=False, "
            "ignore_eos=False, max_tokens=%d, min_tokens=0, logprobs=%s, prompt_logprobs=None, "
            "skip_special_tokens=True, spaces_between_special_tokens=True, "
            "truncate_prompt_tokens=None, structured_outputs=None, extra_args=None)"
            % (pres, temp, top_p, seed, stop, max_tokens, logprobs)
        )
    return out


_TRACEBACK = [
    "Error in preprocessing prompt inputs",
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/serving_chat.py", '
    "line 222, in create_chat_completion",
    "    ) = await self._preprocess_chat(",
    "        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/serving_engine.py", '
    "line 1128, in _preprocess_chat",
    "    prompt_inputs = await self._tokenize_prompt_input_async(",
    "                    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/serving_engine.py", '
    "line 970, in _tokenize_prompt_input_async",
    "    async for result in self._tokenize_prompt_inputs_async(",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/serving_engine.py", '
    "line 991, in _tokenize_prompt_inputs_async",
    "    yield await self._normalize_prompt_text_to_input(",
    "          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/serving_engine.py", '
    "line 881, in _normalize_prompt_text_to_input",
    "    return self._validate_input(request, input_ids, input_text)",
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/serving_engine.py", '
    "line 963, in _validate_input",
    "    raise ValueError(",
    "ValueError: This model's maximum context length is 131072 tokens. However, your request "
    "has %d input tokens. Please reduce the length of the input messages.",
]
_IGNORED_FIELDS = ["{'chat_template_kwargs'}", "{'stream_options'}", "{'metadata'}",
                   "{'store'}", "{'parallel_tool_calls'}", "{'reasoning_effort'}"]


def _open_out(path: str, use_gzip: bool):
    if use_gzip:
        # mtime=0 keeps the .gz byte-identical across runs; level 6 = gzip's default.
        raw = open(path, "wb")
        return raw, _gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0)
    f = open(path, "wb", buffering=0)
    return None, f


def generate(path, size_bytes: int, seed: int = 1, gzip: bool = False, ansi: bool = False,
             rate_scale: float = 1.0) -> dict:
    """Write a vLLM log of at least `size_bytes` (uncompressed) bytes to `path`.

    `rate_scale` multiplies the request rate: 0.05 writes a quiet server's log, where an engine
    stats line comes every ~8 requests (~7 % of lines, ~80,000 stats lines per GB) instead of
    every ~80 (the stats-heavy mix, whose cost is the per-stats-line work).

    Returns a dict with bytes (uncompressed), lines, request count, simulated seconds and
    generation wall time. Deterministic for a given (size_bytes, seed, ansi).
    """
    path = os.fspath(path)
    size_bytes = int(size_bytes)
    t_start = time.perf_counter()
    rng = random.Random(seed)
    rnd = rng.random
    getrandbits = rng.getrandbits
    log = math.log

    frags, systems = _build_material(random.Random(seed * 7919 + 17))
    nfrag = len(frags)
    nsys = len(systems)
    sparams = _sampling_params(random.Random(seed * 104729 + 3))
    nsp = len(sparams)
    client_ips = ["10.1.%d.%d" % (rng.randint(0, 7), rng.randint(2, 250)) for _ in range(24)]
    ncip = len(client_ips)
    probe_ip = "10.1.0.1"
    prom_ip = "10.1.9.14"

    if ansi:
        api_pfx = "\x1b[1;36m(APIServer pid=%d)\x1b[0;0m " % API_PID
        core_pfx = "\x1b[1;36m(EngineCore_DP0 pid=%d)\x1b[0;0m " % ENGINE_PID
    else:
        api_pfx = "(APIServer pid=%d) " % API_PID
        core_pfx = "(EngineCore_DP0 pid=%d) " % ENGINE_PID
    pfx = {"api": api_pfx, "core": core_pfx, "": ""}

    # UTC arithmetic so the output does not depend on the machine's time zone / DST.
    base_epoch = calendar.timegm(START + (0, 0, 0))
    gmtime = time.gmtime
    strftime = time.strftime

    def ts(sec: int) -> str:
        return strftime("%m-%d %H:%M:%S", gmtime(base_epoch + sec))

    raw, out = _open_out(path, gzip)
    written = 0
    lines = 0
    buf: list[str] = []
    pending = 0  # chars in buf (<= bytes, so the size test never stops short)

    def flush():
        nonlocal written, pending, buf
        if buf:
            data = "".join(buf).encode("utf-8")
            out.write(data)
            written += len(data)
            buf = []
            pending = 0

    try:
        # ---- start-up block --------------------------------------------------------------
        for sec, proc, level, fileinfo, msg in _STARTUP:
            if fileinfo is None:
                line = "%s%s\n" % (pfx[proc], msg)
            else:
                line = "%s%s %s [%s] %s\n" % (pfx[proc], level, ts(sec), fileinfo, msg)
            buf.append(line)
            pending += len(line)
            lines += 1

        # ---- body --------------------------------------------------------------------------
        t = float(BODY_START)
        cur_sec = -1
        h_recv = h_added = h_warn = h_err = h_abort = ""
        next_stats = BODY_START + 10.0
        next_metrics = BODY_START + 5.0 + rnd() * 15
        next_health = BODY_START + rnd() * 10
        base_rate = 8.0  # steady-state requests / simulated second
        rate = 0.3 * rate_scale  # current arrival rate (ramps up from start-up)
        overload = 0  # stats ticks left in an overload episode
        prefix_hit = 35.0
        window_prompt_tokens = 0
        window_reqs = 0
        running = 60
        waiting = 0
        delayed: deque[str] = deque()
        requests = 0
        two_pi_day = 2.0 * math.pi / 86400.0

        access_200 = '%sINFO:     %s:%d - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
        access_cmpl = '%sINFO:     %s:%d - "POST /v1/completions HTTP/1.1" 200 OK\n'
        recv_tpl = ("%s Received request %s-%032x: prompt: %s, params: %s, prompt_token_ids: "
                    "[%s], prompt_embeds shape: None, lora_request: None.\n"
                    "%s Added request %s-%032x.\n")
        stats_tpl = ("%sINFO %s [loggers.py:123] Engine 000: Avg prompt throughput: %.1f tokens/s, "
                     "Avg generation throughput: %.1f tokens/s, Running: %d reqs, Waiting: %d reqs, "
                     "GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%\n")

        while written + pending < size_bytes:
            # advance the simulated clock: Poisson arrivals at the current rate
            t += -log(1.0 - rnd()) / rate
            sec = int(t)
            if sec != cur_sec:
                cur_sec = sec
                stamp = ts(sec)
                h_recv = "%sINFO %s [logger.py:40]" % (api_pfx, stamp)
                h_added = "%sINFO %s [async_llm.py:320]" % (api_pfx, stamp)
                h_abort = "%sINFO %s [async_llm.py:388] Aborted request(s) " % (api_pfx, stamp)
                h_warn = "%sWARNING %s [protocol.py:93] " % (api_pfx, stamp)
                h_err = "%sERROR %s [serving_chat.py:257] " % (api_pfx, stamp)

            # periodic lines that are due
            if t >= next_stats:
                while t >= next_stats:
                    elapsed = 10.0
                    # traffic level: daily cycle + AR(1) noise in log space + rare overloads
                    target = 8.0 + 4.5 * math.sin(next_stats * two_pi_day)
                    if overload:
                        overload -= 1
                        target *= 1.8
                    elif rnd() < 0.004:
                        overload = 20 + int(rnd() * 150)
                    base_rate = math.exp(0.85 * log(base_rate) + 0.15 * log(target)
                                         + (rnd() - 0.5) * 0.25)
                    base_rate = min(max(base_rate, 1.0), 40.0)
                    # after start-up the load balancer ramps traffic up over ~15 minutes
                    ramp = (next_stats - BODY_START) / 900.0
                    rate = base_rate * (ramp if ramp < 1.0 else 1.0) * rate_scale
                    if rate < 0.3 * rate_scale:
                        rate = 0.3 * rate_scale
                    if overload:
                        running = min(MAX_NUM_SEQS, int(running * 0.6 + 0.4 * MAX_NUM_SEQS
                                                        * (0.7 + 0.3 * rnd())))
                        waiting = max(0, int(waiting * 0.7 + rate * (2 + 6 * rnd())))
                        kv = min(99.9, 88.0 + 11.9 * rnd())
                    else:
                        running = int(rate * (10.0 + 6.0 * rnd()))
                        running = max(0 if window_reqs == 0 else 1, min(MAX_NUM_SEQS, running))
                        waiting = int(waiting * 0.3) if waiting > 3 else (1 if rnd() < 0.05 else 0)
                        kv = min(99.0, running * (700 + 600 * rnd()) * 100.0 / KV_TOKENS)
                    prefix_hit += 0.03 * (42.0 - prefix_hit) + (rnd() - 0.5) * 6.0
                    prefix_hit = min(90.0, max(3.0, prefix_hit))
                    prompt_tps = window_prompt_tokens / elapsed
                    gen_tps = running * max(8.0, 48.0 - 0.11 * running) * (0.85 + 0.3 * rnd())
                    if window_reqs == 0 and running == 0:
                        gen_tps = 0.0
                    stamp_s = ts(int(next_stats))
                    line = stats_tpl % (api_pfx, stamp_s, prompt_tps, gen_tps, running, waiting,
                                        kv, prefix_hit)
                    buf.append(line)
                    pending += len(line)
                    lines += 1
                    window_prompt_tokens = 0
                    window_reqs = 0
                    next_stats += 10.0
            if t >= next_health:
                # kubelet liveness + readiness probes every 10 s
                line = '%sINFO:     %s:%d - "GET /health HTTP/1.1" 200 OK\n' % (
                    api_pfx, probe_ip, 40000 + (getrandbits(14)))
                buf.append(line)
                buf.append(line)
                pending += 2 * len(line)
                lines += 2
                next_health += 10.0
            if t >= next_metrics:
                line = '%sINFO:     %s:%d - "GET /metrics HTTP/1.1" 200 OK\n' % (
                    api_pfx, prom_ip, 33000 + (getrandbits(15)))
                buf.append(line)
                pending += len(line)
                lines += 1
                next_metrics += 15.0

            requests += 1
            ip = client_ips[int(rnd() * ncip)]
            port = 32768 + getrandbits(14) + getrandbits(13)
            u = rnd()
            if u < 0.9965:
                # a normal request: Received + Added (+ access line, possibly a bit later)
                sys_text, sys_ids, sys_n = systems[int(rnd() * nsys)]
                k = 1 + int(rnd() * rnd() * 5)
                if rnd() < 0.015:
                    k += 10 + int(rnd() * 20)  # RAG-style long prompt
                texts = []
                ids = []
                ntok = _TEMPLATE_TOKENS + sys_n
                quote = "'"
                for _ in range(k):
                    ftext, fids, fn, fq = frags[int(rnd() * nfrag)]
                    texts.append(ftext)
                    ids.append(fids)
                    ntok += fn
                    if fq:
                        quote = '"'
                prompt = "%s%s%s%s%s%s%s" % (quote, _P0, sys_text, _P1, " ".join(texts), _P2, quote)
                tok = "%s%s%s%s%s" % (_T0, sys_ids, _T1, ", ".join(ids), _T2)
                kind = "chatcmpl" if u < 0.93 else "cmpl"
                rid = getrandbits(128)
                line = recv_tpl % (h_recv, kind, rid, prompt, sparams[int(rnd() * nsp)], tok,
                                   h_added, kind, rid)
                buf.append(line)
                pending += len(line)
                lines += 2
                window_prompt_tokens += ntok
                window_reqs += 1
                acc = (access_200 if kind == "chatcmpl" else access_cmpl) % (api_pfx, ip, port)
                delayed.append(acc)
                v = rnd()
                if v < 0.004:
                    line = "%s%s-%032x.\n" % (h_abort, kind, rid)  # client went away
                    buf.append(line)
                    pending += len(line)
                    lines += 1
                elif v < 0.007:
                    line = ("%sThe following fields were present in the request but ignored: %s\n"
                            % (h_warn, _IGNORED_FIELDS[int(rnd() * len(_IGNORED_FIELDS))]))
                    buf.append(line)
                    pending += len(line)
                    lines += 1
                # streaming responses are logged when they start, others when they finish
                while len(delayed) > 3 or (delayed and rnd() < 0.55):
                    line = delayed.popleft()
                    buf.append(line)
                    pending += len(line)
                    lines += 1
            elif u < 0.9985:
                line = '%sINFO:     %s:%d - "POST /v1/chat/completions HTTP/1.1" 404 Not Found\n' % (
                    api_pfx, ip, port)
                buf.append(line)
                pending += len(line)
                lines += 1
            elif u < 0.9993:
                line = ('%sINFO:     %s:%d - "POST /v1/chat/completions HTTP/1.1" 422 '
                        'Unprocessable Entity\n' % (api_pfx, ip, port))
                buf.append(line)
                pending += len(line)
                lines += 1
            elif u < 0.9997:
                line = '%sINFO:     %s:%d - "GET /v1/models HTTP/1.1" 200 OK\n' % (api_pfx, ip, port)
                buf.append(line)
                pending += len(line)
                lines += 1
            else:
                # prompt longer than max_model_len: logger.exception + HTTP 400
                n_in = MAX_MODEL_LEN + 1 + int(rnd() * 60000)
                tb = "".join(
                    "%s%s\n" % (h_err, (x % n_in) if x.startswith("ValueError") else x)
                    for x in _TRACEBACK
                )
                tb += '%sINFO:     %s:%d - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request\n' % (
                    api_pfx, ip, port)
                buf.append(tb)
                pending += len(tb)
                lines += len(_TRACEBACK) + 1

            if pending >= CHUNK_CHARS:
                flush()
        # requests still "in flight" get their access lines too
        while delayed:
            line = delayed.popleft()
            buf.append(line)
            pending += len(line)
            lines += 1
        flush()
    finally:
        out.close()
        if raw is not None:
            raw.close()
    return {
        "path": path,
        "bytes": written,
        "lines": lines,
        "requests": requests,
        "simulated_seconds": round(t, 1),
        "seconds": round(time.perf_counter() - t_start, 3),
        "seed": seed,
        "gzip": bool(gzip),
        "generator_version": GENERATOR_VERSION,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_path")
    ap.add_argument("--size-gb", type=float, default=1.0,
                    help="uncompressed size in GB (10^9 bytes); default 1.0")
    ap.add_argument("--size-bytes", type=int, default=None,
                    help="exact size in bytes (overrides --size-gb)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gzip", action="store_true", help="write gzip-compressed output")
    ap.add_argument("--ansi", action="store_true",
                    help="wrap process prefixes in ANSI cyan, as real v0.11 logs do")
    ap.add_argument("--rate-scale", type=float, default=1.0,
                    help="multiply the request rate: 0.05 gives a quiet server, stats-heavy log")
    args = ap.parse_args(argv)
    size = args.size_bytes if args.size_bytes is not None else int(args.size_gb * 1e9)
    info = generate(args.out_path, size, seed=args.seed, gzip=args.gzip, ansi=args.ansi,
                    rate_scale=args.rate_scale)
    mb = info["bytes"] / 1e6
    print("wrote %s: %.1f MB uncompressed, %d lines, %d requests, %.1f h simulated, "
          "%.1f s (%.1f MB/s)" % (info["path"], mb, info["lines"], info["requests"],
                                  info["simulated_seconds"] / 3600, info["seconds"],
                                  mb / max(info["seconds"], 1e-9)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
