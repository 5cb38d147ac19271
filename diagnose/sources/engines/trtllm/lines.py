"""TensorRT-LLM (C++ runtime, trtllm-serve / LLM API, Triton backend) → evidence.
Formats: docs/reference/tensorrt-llm.md.

Three shapes of input: log lines; a `/metrics` JSON array of IterationStats (a whole file);
a YAML/JSON `extra_llm_api_options` or SKU profile (a whole file, see structured.py).
"""
from __future__ import annotations

import json
import re
from datetime import datetime

from ....evidence.model import Evidence
from ....lazyre import lazy
from ..common import dispatch, note_failure, note_launch
from .. import kv
from ...readers.lineprefix import Line

ENGINE = "trtllm"

ENGINE_VERSION = lazy(r"Engine version (?P<v>[\w.\-+]+) found in the config file")
MPI = lazy(r"MPI size: (?P<n>\d+)")
MODEL_PARAM = lazy(r"TRTGptModel (?P<k>\w+): (?P<v>.+)$")
CAPACITY = lazy(r"Capacity Scheduler Policy: (?P<p>\w+)")
CHUNKING = lazy(r"Context Chunking Scheduler Policy: (?P<p>\w+)")
ENGINE_SIZE = lazy(r"Loaded engine size: (?P<mib>[\d.]+) MiB")
MEM_CALC = lazy(r"Memory usage when calculating max tokens in paged kv cache: total: (?P<t>[\d.]+) GiB, available: (?P<a>[\d.]+) GiB")
BLOCKS = lazy(r"Number of blocks in KV cache primary pool: (?P<n>\d+)")
TPB = lazy(r"(?:Number of tokens per block: |tokens per block=)(?P<n>\d+)")
PRIMARY = lazy(r"primary blocks=(?P<n>\d+)")
KV_ALLOC = lazy(r"Allocated (?P<g>[\d.]+) (?P<u>GiB|MiB|GB) for max tokens in paged KV cache \((?P<n>\d+)\)")
PAGED_TOKENS = lazy(r"Using (?P<n>\d+) tokens in paged KV cache")
PYT_LIMITS = lazy(r"max_seq_len=(?P<seq>\d+), max_num_requests=(?P<req>\d+), max_num_tokens=(?P<tok>\d+)(?:, max_batch_size=(?P<bs>\d+))?")
PYT_PEAK = lazy(r"fraction is set (?P<f>[\d.]+), kv size is (?P<b>\d+)\.? device total memory (?P<t>[\d.]+) GiB")
KV_DTYPE = lazy(r"(?:kv[_ ]cache[_ ]dtype|kv_cache_type|KV cache dtype)[\"']?\s*[:=]\s*[\"']?(?:torch\.)?(?P<d>fp8|float16|fp16|bfloat16|bf16|float32|fp32|int8|auto|nvfp4)", re.I)
ITER_LOG = lazy(r"^iter = (?P<iter>\d+),.*?elapsed_time = (?P<el>[\d.]+)s.*?timestamp = (?P<ts>[\d\- :]+)(?P<rest>.*)$")
TP_INTRA = lazy(r"TP group is intra-node for rank")
MEM_CHANGE = lazy(r"\[MemUsageChange\] (?P<what>.*)")
NOT_SPECIFIED = lazy(r"^(?P<k>\w+) (?:is not specified|not set), (?:will use default value(?: of (?P<v>[\w.]+))?|defaulting to (?P<v2>[\w.]+)|will be (?:set to |automatically set)(?P<v3>[\w.]*))")
EVICT = lazy(r"(?:pause|evict)\w* request", re.I)
VERSION_BANNER = lazy(r"TensorRT[- ]LLM version: (?P<v>\d[\w.\-+]*)")
QUANT_ALGO = lazy(r"Setting (?P<k>quant_algo|kv_cache_quant_algo)=(?P<v>\w+) from")
# The LLM API's arguments, as trtllm-serve prints them after "LLM Args:" (`key=value …`, one long
# line) or as Dynamo's worker logs them ("TRTLLM engine args: {'key': value, …}"; "TensorRT-LLM
# engine args:" since Dynamo logs them at INFO).
ENGINE_ARGS = lazy(r"(?:TRTLLM|TensorRT-LLM) engine args:")
ARG = lazy(r"""['"]?\b(?P<k>tensor_parallel_size|pipeline_parallel_size|moe_expert_parallel_size|max_batch_size|max_num_tokens|max_seq_len"""
           r"""|gpus_per_node|enable_attention_dp|use_cuda_graph|cuda_graph_config|enable_chunked_prefill)['"]?\s*[:=]\s*(?P<v>[\w.]+|\{)""")
ARG_FACTS = {"tensor_parallel_size": "tensor_parallel_size", "pipeline_parallel_size": "pipeline_parallel_size",
             "moe_expert_parallel_size": "expert_parallel_size", "max_batch_size": "max_num_seqs",
             "max_num_tokens": "max_num_batched_tokens", "max_seq_len": "max_model_len", "gpus_per_node": "gpus_per_node"}
# The checkpoint's folder, where no argument names the model: the PyTorch backend prefetching its
# shards, or failing to find a generation config beside them.
MODEL_DIR = lazy(r"Prefetching (?P<m>\S+?)/[^/\s]+\.safetensors to memory|Failed to load hf generation config from (?P<n>[^,\s]+),")
# The PyTorch backend's config and attention features, one line each (1.0+); AutoDeploy's sizes;
# the LLM API overriding a build config; the ranks' world size (AutoDeploy's init, the clock sync).
PYTORCH_CONFIG = lazy(r"^PyTorchConfig\(")
# AutoDeploy on a model with no attention KV of its own (SSM layers): the pool it sizes next is a
# stand-in, not a capacity.
FAKE_CACHE = lazy(r"Using fake cache manager")
WEIGHTS_USE = lazy(r"^Use (?P<g>[\d.]+) GB for model weights")     # bytes / 2**30, so GiB
ATTN_FEATURES = lazy(r"AttentionRuntimeFeatures\(chunked_prefill=(?P<v>True|False)")
SEQ_INFO = lazy(r"\[SequenceInfo:\] self\.max_seq_len=(?P<seq>\d+), self\.max_batch_size=(?P<req>\d+),.*?self\.max_num_tokens=(?P<tok>\d+)")
BUILD_OVERRIDE = lazy(r"Overriding (?P<k>max_batch_size|max_seq_len|max_num_tokens) from build_config to (?P<v>\d+)")
WORLD = lazy(r"\bworld_size=(?P<n>\d+)\b|global_steady_clock_offset at each rank: \[(?P<ranks>[^\]]*)\]")
ERROR = lazy(r"(?:Assertion failed|RuntimeError|CUDA runtime error|Executor worker returned error|Encountered an error in forward)")

# `TRTGptModel <key>` → normalized facts
MODEL_KEYS = {"maxNumSequences": "max_num_seqs", "maxSequenceLen": "max_model_len",
              "maxNumTokens": "max_num_batched_tokens", "maxBatchSize": "max_batch_size"}
# YAML / LLM API keys → normalized facts (dotted keys are nested sections).
CONFIG_KEYS = {
    "tensor_parallel_size": "tensor_parallel_size", "tp_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size", "pp_size": "pipeline_parallel_size",
    "max_batch_size": "max_num_seqs", "max_num_tokens": "max_num_batched_tokens",
    "max_seq_len": "max_model_len", "kv_cache_dtype": "kv_cache_dtype",
    "kv_cache_config.dtype": "kv_cache_dtype", "kv_cache_config.free_gpu_memory_fraction": "gpu_memory_utilization",
    "kv_cache_free_gpu_memory_fraction": "gpu_memory_utilization",
    "free_gpu_memory_fraction": "gpu_memory_utilization",
    "enable_chunked_prefill": "chunked_prefill", "enable_chunked_context": "chunked_prefill",
    "scheduler_config.capacity_scheduler_policy": "scheduler_policy", "scheduler_policy": "scheduler_policy",
    "capacity_scheduler_policy": "scheduler_policy", "batch_scheduler_policy": "scheduler_policy",
    "kv_cache_config.enable_block_reuse": "prefix_caching", "enable_kv_cache_reuse": "prefix_caching",
    "kv_cache_config.tokens_per_block": "tokens_per_block", "tokens_per_block": "tokens_per_block",
    "model": "model", "max_concurrent_sessions": "max_sessions", "max_queue_depth": "max_queue_depth",
    "max_queued_requests": "max_queue_depth",
}
STATS_KEYS = ("Active Request Count", "numActiveRequests", "iterLatencyMS")


def _braces_step(text: str, opened: int) -> tuple:
    """A wrapped stats JSON closes when as many braces have closed as opened."""
    opened += text.count("{") - text.count("}")
    return opened, opened <= 0


class TrtllmParser:

    def __init__(self) -> None:
        self.version: str | None = None
        self._dump = kv.WrappedDump(_braces_step, 50, type(self)._json_line)   # a stats JSON line wrapped by the paste
        self._tpb: int | None = None
        self._blocks: int | None = None
        self._args_next = False          # the line after "LLM Args:" holds them
        self._fake_pool = False          # the next KV pool lines size a stand-in (FAKE_CACHE)

    def wants_more(self) -> bool:
        return self._dump.wants_more()

    def more(self, text: str, ev: Evidence) -> None:
        self._dump.more(self, text, ev)

    def finish(self, ev: Evidence) -> None:
        self._dump.finish(self, ev)

    def feed(self, line: Line, ev: Evidence, when) -> bool:
        msg = line.msg
        if self._args_next:
            self._args_next = False
            if msg.startswith("model=") and "tensor_parallel_size=" in msg:
                self._llm_args(msg, line, ev)
                return True
        if "engine args:" in msg:
            m = ENGINE_ARGS.search(msg)
            if m:
                self._llm_args(msg[m.start():], line, ev)
                return True
        if msg.startswith('"{') and msg.endswith('"'):
            # Newer Triton quotes and escapes the message: "{\"Active Request Count\":…}"
            try:
                msg = json.loads(msg)
            except ValueError:
                pass
        if msg.startswith("{") and any(k in msg for k in ("Active Request", "Free KV cache", "iterLatencyMS", "kvCacheStats")):
            if msg.count("{") > msg.count("}"):
                piece = line.raw[line.raw.find("{"):]
                self._dump.open(piece, line, piece.count("{") - piece.count("}"))
            else:
                self._json_line(msg, line, ev)
            return True
        if line.fmt not in ("trtllm", "triton") and "TRTGptModel" not in msg and "TensorRT-LLM" not in line.raw:
            return False
        m = ITER_LOG.match(msg)
        if m:
            self._iter_log(m, line, ev)
            return True
        m = MODEL_PARAM.search(msg)
        if m:
            k, v = m.group("k"), m.group("v").strip()
            name = MODEL_KEYS.get(k)
            n = re.match(r"\d+", v)
            if name and n:
                ev.set_fact(name, int(n.group()), line.source, line.lineno, line.raw)
            if k == "maxInputLen":
                ev.set_fact("chunked_prefill", "chunked context is enabled" in v, line.source, line.lineno, line.raw)
            ev.settings.setdefault("TRTGptModel", {})[k] = v
            return True
        return dispatch(self, self._simple, msg, line, ev, when)

    # -- per-iteration stats --------------------------------------------------------------
    def _json_line(self, text: str, line: Line, ev: Evidence) -> None:
        try:
            obj = json.loads(text, strict=False)
        except (ValueError, RecursionError):   # RecursionError: `{"a":{"a":…` nested 100 000 deep
            ev.count("trtllm_bad_json")
            return
        add_iteration(obj, ev, line.source, line.lineno)

    def _iter_log(self, m, line, ev):
        rest = m.group("rest")
        states = {}
        i = rest.find("states = ")
        if i >= 0:
            states = kv.parse_dict(rest[i + len("states = "):]) or {}
        sched = re.search(r"num_scheduled_requests[:=] (\d+)", rest)
        util = re.search(r"kv_cache_util = ([\d.]+)", rest)
        el = float(m.group("el"))
        ctx = float(states.get("num_ctx_tokens", 0) or 0)
        gen = float(states.get("num_generation_tokens", 0) or 0)
        try:
            when = datetime.fromisoformat(m.group("ts").strip())
        except ValueError:
            when = line.dt
        ev.add_stats({"time": when, "source": line.source, "line": line.lineno, "engine_idx": 0,
                      "running": float(sched.group(1)) if sched else None, "waiting": None,
                      "prompt_tps": ctx / el if el else None, "gen_tps": gen / el if el else None,
                      "kv_usage": float(util.group(1)) * 100 if util else None})

    # -- one-regex lines -----------------------------------------------------------------
    def _version(self, m, line, ev, when):
        note_launch(ev, line.source)
        self.version = m.group("v")
        ev.set_fact("engine_version", self.version, line.source, line.lineno, line.raw)

    def _mpi(self, m, line, ev, when):
        ev.set_fact("world_size_logged", int(m.group("n")), line.source, line.lineno, line.raw)

    def _capacity(self, m, line, ev, when):
        ev.set_fact("scheduler_policy", m.group("p"), line.source, line.lineno, line.raw)

    def _chunking(self, m, line, ev, when):
        ev.settings["context_chunking_policy"] = m.group("p")

    def _engine_size(self, m, line, ev, when):
        ev.set_fact("weights_gib_per_gpu", round(float(m.group("mib")) / 1024, 2), line.source, line.lineno, line.raw)

    def _mem_calc(self, m, line, ev, when):
        ev.set_fact("gpu_memory_gib", float(m.group("t")), line.source, line.lineno, line.raw)

    def _blocks_fn(self, m, line, ev, when):
        self._blocks = int(m.group("n"))
        self._kv_tokens(line, ev)

    def _tpb_fn(self, m, line, ev, when):
        self._tpb = int(m.group("n"))
        ev.set_fact("tokens_per_block", self._tpb, line.source, line.lineno, line.raw)
        p = PRIMARY.search(line.msg)
        if p:
            self._blocks = int(p.group("n"))
        self._kv_tokens(line, ev)

    def _kv_tokens(self, line, ev):
        if self._fake_pool:
            return
        if self._blocks and self._tpb and "kv_cache_tokens" not in ev.facts:
            ev.set_fact("kv_cache_tokens", self._blocks * self._tpb, line.source, line.lineno,
                        f"{line.raw}  (primary blocks {self._blocks} × {self._tpb} tokens per block)")

    def _kv_alloc(self, m, line, ev, when):
        if self._fake_pool:
            self._fake_pool = False      # the stand-in's last line
            return
        g = float(m.group("g")) / (1024 if m.group("u") == "MiB" else 1)
        n = int(m.group("n"))
        # The PyTorch backend first sizes a small probe pool (a dry run, e.g. 8,224 tokens), then
        # the real one: the real pool is the larger, whatever order the ranks print them in.
        known = ev.fact("kv_cache_tokens")
        if known is not None and isinstance(known, int) and known >= n:
            return
        ev.set_fact("kv_cache_memory_gib", round(g, 2), line.source, line.lineno, line.raw)
        ev.set_fact("kv_cache_tokens", n, line.source, line.lineno, line.raw)

    def _paged(self, m, line, ev, when):
        ev.set_fact("kv_cache_tokens", int(m.group("n")), line.source, line.lineno, line.raw)

    def _limits(self, m, line, ev, when):
        """The PyTorch backend's limits after KV sizing, or AutoDeploy's `[SequenceInfo:]`."""
        src, n, raw = line.source, line.lineno, line.raw
        ev.set_fact("max_model_len", int(m.group("seq")), src, n, raw)
        ev.set_fact("max_num_seqs", int(m.group("req")), src, n, raw)
        ev.set_fact("max_num_batched_tokens", int(m.group("tok")), src, n, raw)

    def _pyt_peak(self, m, line, ev, when):
        ev.set_fact("gpu_memory_utilization", float(m.group("f")), line.source, line.lineno, line.raw)
        ev.set_fact("gpu_memory_gib", float(m.group("t")), line.source, line.lineno, line.raw)

    def _kv_dtype(self, m, line, ev, when):
        d = _norm_dtype(m.group("d"))
        # "auto" is "as the checkpoint says": a kv_cache_quant_algo already read from it stands.
        ev.set_fact("kv_cache_dtype", d, line.source, line.lineno, line.raw, override=d != "auto")

    def _mem_change(self, m, line, ev, when):
        ev.count("trtllm_mem_usage_lines")

    def _not_specified(self, m, line, ev, when):
        k = m.group("k")
        v = m.group("v") or m.group("v2") or m.group("v3") or "default"
        ev.settings.setdefault("defaulted", {})[k] = v
        # Triton backend defaults that matter for the diagnosis.
        if k == "enable_chunked_context":
            ev.set_fact("chunked_prefill", False, line.source, line.lineno, line.raw, override=False)
        elif k == "kv_cache_free_gpu_mem_fraction":
            ev.set_fact("gpu_memory_utilization", 0.9, line.source, line.lineno, line.raw, override=False)
        elif k == "batch_scheduler_policy":
            ev.set_fact("scheduler_policy", "GUARANTEED_NO_EVICT", line.source, line.lineno, line.raw, override=False)
        elif k == "enable_kv_cache_reuse":
            ev.set_fact("prefix_caching", False, line.source, line.lineno, line.raw, override=False)

    def _llm_args(self, text: str, line: Line, ev: Evidence) -> None:
        seen: set = set()
        for m in ARG.finditer(text):
            k, v = m.group("k"), m.group("v")
            if k in seen:                 # nested configs repeat names (moe_config.max_num_tokens): the first is the LLM's
                continue
            seen.add(k)
            if k in ARG_FACTS and v.isdigit():
                # the first launch's arguments (a file may hold several servers or relaunches)
                ev.set_fact(ARG_FACTS[k], int(v), line.source, line.lineno, line.raw, override=False)
            elif k == "enable_attention_dp" and v in ("True", "False"):
                ev.set_fact("enable_dp_attention", v == "True", line.source, line.lineno, line.raw, override=False)
            elif k in ("use_cuda_graph", "cuda_graph_config"):
                graphs = v not in ("False", "None", "false")    # a CudaGraphConfig(...) or {…}: on
                ev.set_fact("cuda_graphs", graphs, line.source, line.lineno, line.raw)
                ev.set_fact("enforce_eager", not graphs, line.source, line.lineno, line.raw)
            elif k == "enable_chunked_prefill" and v in ("True", "False"):
                ev.set_fact("chunked_prefill", v == "True", line.source, line.lineno, line.raw)

    def _pytorch_config(self, m, line, ev, when):
        self._llm_args(line.msg, line, ev)      # use_cuda_graph=…, among the backend's settings

    def _attn_features(self, m, line, ev, when):
        ev.set_fact("chunked_prefill", m.group("v") == "True", line.source, line.lineno, line.raw)

    def _build_override(self, m, line, ev, when):
        # a later engine line (the PyTorch backend's limits, after KV sizing) has the last word
        ev.set_fact(ARG_FACTS[m.group("k")], int(m.group("v")), line.source, line.lineno, line.raw, override=False)

    def _world(self, m, line, ev, when):
        ranks = m.group("ranks")
        size = int(m.group("n")) if m.group("n") else len([r for r in ranks.split(",") if r.strip()])
        if size:
            ev.set_fact("world_size_logged", size, line.source, line.lineno, line.raw, override=False)

    def _args_marker(self, m, line, ev, when):
        self._args_next = True

    def _banner(self, m, line, ev, when):
        ev.set_fact("engine_version", m.group("v"), line.source, line.lineno, line.raw, override=False)

    def _quant_algo(self, m, line, ev, when):
        v = m.group("v").lower()
        if m.group("k") == "quant_algo":
            ev.set_fact("quantization", v, line.source, line.lineno, line.raw)
        elif v.startswith("fp8") or v in ("nvfp4", "int8"):
            ev.set_fact("kv_cache_dtype", "fp8" if v.startswith("fp8") else v, line.source, line.lineno, line.raw)

    def _intra(self, m, line, ev, when):
        ev.add_event("tp_intra_node", line.source, line.lineno, line.raw, when)

    def _error(self, m, line, ev, when):
        if line.level in ("ERROR", "E"):
            note_failure(ev, "engine_dead", line, when)

    def _model_dir(self, m, line, ev, when):
        ev.set_fact("model", (m.group("m") or m.group("n")).rstrip("/"), line.source, line.lineno, line.raw, override=False)

    def _fake_cache(self, m, line, ev, when):
        self._fake_pool = True

    def _weights_use(self, m, line, ev, when):
        ev.set_fact("weights_gib_per_gpu", float(m.group("g")), line.source, line.lineno, line.raw)

    _simple = [
        (PYTORCH_CONFIG, _pytorch_config),      # first: its kv_cache_dtype=… is not the line's point
        (WEIGHTS_USE, _weights_use), (FAKE_CACHE, _fake_cache),
        (ENGINE_VERSION, _version), (MPI, _mpi), (CAPACITY, _capacity), (CHUNKING, _chunking),
        (ENGINE_SIZE, _engine_size), (MEM_CALC, _mem_calc), (BLOCKS, _blocks_fn), (TPB, _tpb_fn),
        (KV_ALLOC, _kv_alloc), (PAGED_TOKENS, _paged), (PYT_LIMITS, _limits), (PYT_PEAK, _pyt_peak),
        (KV_DTYPE, _kv_dtype), (TP_INTRA, _intra), (NOT_SPECIFIED, _not_specified),
        (MEM_CHANGE, _mem_change), (VERSION_BANNER, _banner), (QUANT_ALGO, _quant_algo),
        (lazy(r"\bLLM Args:\s*$"), _args_marker), (MODEL_DIR, _model_dir),
        (ATTN_FEATURES, _attn_features), (SEQ_INFO, _limits),
        (BUILD_OVERRIDE, _build_override), (WORLD, _world), (ERROR, _error),
    ]


def _norm_dtype(d: str) -> str:
    d = d.lower()
    return {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}.get(d, d)


def _clean(d: dict) -> dict:
    """Untrusted JSON keeps its plausible numbers, nested objects and time stamps only: `NaN`,
    `1e309` (inf), strings, lists or `true` where a count belongs made int() and the arithmetic
    below raise (OverflowError, TypeError), and a non-object `kvCacheStats` broke `.get`."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out[k] = _clean(v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            if -1e15 < v < 1e15:    # not NaN, not inf, not a 400-digit int (float() of it raises)
                out[k] = v
        elif isinstance(v, str) and k in ("timestamp", "Timestamp"):
            out[k] = v
    return out


def add_iteration(obj: dict, ev: Evidence, source: str, line: int) -> None:
    """One IterationStats object (trtllm-serve /metrics) or Triton stats line → a stats row."""
    if not isinstance(obj, dict):   # a stats line whose JSON is a list or a number
        return
    obj = _clean(obj)
    g = obj.get
    kvs = g("kvCacheStats") or obj      # salvaged (flattened) objects carry the keys at top level
    ifb = g("inflightBatchingStats") or obj
    if not isinstance(kvs, dict):       # `"kvCacheStats": 3` in a damaged object: no .get
        kvs = obj
    if not isinstance(ifb, dict):
        ifb = obj
    if "Active Request Count" in obj:   # Triton backend's flat form
        maxb, used = g("Max KV cache blocks"), g("Used KV cache blocks")
        if used is None and maxb is not None and g("Free KV cache blocks") is not None:
            used = maxb - g("Free KV cache blocks")
        row = {"running": g("Active Request Count"), "waiting": g("Waiting Requests", g("Queued Requests")),
               "kv_usage": 100.0 * used / maxb if maxb and used is not None else None, "ctx_tokens": g("Total Context Tokens"),
               "paused": g("Paused Requests")}
        ts = g("Timestamp")
        cap = g("Max Request Count")
        tpb = g("Tokens per KV cache block")
    else:
        maxb, used = kvs.get("maxNumBlocks"), kvs.get("usedNumBlocks")
        row = {"running": g("numActiveRequests"), "waiting": g("numQueuedRequests"),
               "kv_usage": 100.0 * used / maxb if maxb and used is not None else None, "ctx_tokens": ifb.get("numCtxTokens"),
               "paused": ifb.get("numPausedRequests"), "prefix_hit": 100.0 * kvs["cacheHitRate"] if kvs.get("cacheHitRate") is not None else None}
        lat = g("iterLatencyMS")
        if lat:
            row["prompt_tps"] = (ifb.get("numCtxTokens") or 0) / lat * 1000
            row["gen_tps"] = (ifb.get("numGenRequests") or 0) / lat * 1000
        ts = g("timestamp")
        cap = g("maxNumActiveRequests")
        tpb = kvs.get("tokensPerBlock")
    when = None
    if isinstance(ts, str):
        for fmt in ("%m-%d-%Y %H:%M:%S.%f", "%m-%d-%Y %H:%M:%S"):
            try:
                when = datetime.strptime(ts, fmt)
                break
            except ValueError:
                pass
    row.update({"time": when, "source": source, "line": line, "engine_idx": 0})
    for k in ("running", "waiting", "ctx_tokens", "paused"):
        if row.get(k) is not None:
            row[k] = float(row[k])
    if cap:
        ev.set_fact("max_num_seqs", int(cap), source, line, f"(IterationStats: maxNumActiveRequests / Max Request Count = {cap})", override=False)
    if maxb and tpb:
        ev.set_fact("kv_cache_tokens", int(maxb) * int(tpb), source, line, f"(IterationStats: {maxb} KV blocks × {tpb} tokens)", override=False)
    if row.get("paused"):
        # A request paused across several samples shows in each: count samples and the peak.
        ev.add_event("paused_requests", source, line, f"numPausedRequests={int(row['paused'])}", when, n=row["paused"])
        ev.counters["paused_samples"] = ev.counters.get("paused_samples", 0) + 1
        ev.counters["paused_peak"] = max(ev.counters.get("paused_peak", 0), int(row["paused"]))
    ev.set_fact("engine", ENGINE, override=False)
    ev.add_stats(row)


Parser = TrtllmParser
