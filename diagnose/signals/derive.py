"""Signals: named numbers and booleans derived from the evidence, the only thing rules read.

A signal that cannot be derived is None (unknown), never 0: rules that need it are then
*not applicable*. Runtime signals come from the steady-state window only: warm-up, the first
busy sample after idle (a partial interval) and idle stretches say nothing about steady state.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from datetime import timedelta

from ..values import model_id
from ..evidence.facts import SIGNAL_FACTS
from ..evidence.model import Evidence, FACT_NAMES, EXTRA_FACTS
from .expert import expert

# Bytes per parameter by quantization / dtype, for weight-size estimates from a parameter count.
BYTES_PER_PARAM = {"fp8": 1.0, "int8": 1.0, "awq": 0.55, "gptq": 0.55, "awq_marlin": 0.55,
                   "gptq_marlin": 0.55, "bitsandbytes": 0.55, "float32": 4.0,
                   "mxfp4": 0.55, "nvfp4": 0.55, "fp4": 0.55}
# Starts only at the first digit of a number: tried at every digit, a long run of them was quadratic.
PARAMS_RX = re.compile(r"(?<![\d.])(?:(?P<experts>\d+)x)?(?P<b>\d+(?:\.\d+)?)[Bb](?![a-zA-Z])")
GIB_PER_GB = 1e9 / 2**30


@dataclass
class Signals:
    values: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)   # signal → evidence dict(s) to cite
    window: str | None = None                        # human description of the steady window
    timeline: dict = field(default_factory=dict)     # name → list of floats (for sparklines)
    steady_range: tuple | None = None                # (first, last) time of the steady window
    samples: dict | None = None                      # the steady window's stats, column -> list (rules' [sustained])
    key_stats: dict = field(default_factory=dict)    # signal name → {mean, std, n, p50, p95} for comparisons
    sweep: dict | None = None                        # a load sweep's curve, knee and advice (sweep.py)

    def get(self, name, default=None):
        v = self.values.get(name)
        return default if v is None else v


# GPUs with FP8 tensor cores (Ada, Hopper, Blackwell and their embedded parts) — by name.
# Bounded gaps: two `\s*` around an optional `\d*` backtracked quadratically on a long run of spaces.
FP8_YES = re.compile(r"H100|H200|H20\b|H800|GH200|L40|L4\b|L20|RTX\s{0,3}(?:PRO\s{0,3})?\d{0,5}\s{0,3}Ada|RTX\s{0,3}40\d0|RTX\s{0,3}50\d0|RTX 6000 Ada|B100|B200|B300|GB200|GB300|GB10|Thor|DGX Spark|RTX 4000 Ada|RTX 2000 Ada", re.I)
FP8_NO = re.compile(r"A100|A800|A10\b|A10G|A30|A40|A6000|V100|T4\b|P100|RTX\s{0,3}30\d0|RTX\s{0,3}20\d0|GTX|Orin", re.I)
WIDE_KV = {"auto", "fp16", "bf16", "float16", "bfloat16", "fp32", "float32", "half", "float"}


def derive(ev: Evidence) -> Signals:
    s = Signals()
    v = s.values
    for name in FACT_NAMES + EXTRA_FACTS + SIGNAL_FACTS:     # the fact catalogue's facts rules read
        v[name] = ev.fact(name)
    _model_size(ev, v)
    _parallelism(ev, v)
    _events(ev, v)
    _runtime(ev, s)
    from .gpu import gpu_signals
    basis = gpu_signals(ev, v, s.steady_range)
    if basis and v.get("gpu_util_mean") is not None:
        g = ev.gpu_series["util"].drop_nulls()
        s.key_stats["gpu_util"] = {"mean": v["gpu_util_mean"], "std": round(float(g.std() or 0.0), 3),
                                   "n": v.get("gpu_samples_used") or int(g.len()), "p50": v.get("gpu_util_p50"),
                                   "p95": None}
    if basis:
        s.provenance["gpu"] = {"metric": "GPU utilisation / power", "window": basis,
                               "value": f"util mean {v.get('gpu_util_mean')} %"
                                        + (f", power mean {v['gpu_power_mean']} W" if v.get("gpu_power_mean") is not None else "")
                                        + (f" of {v.get('gpu_power_limit_w')} W ({v.get('gpu_power_limit_source')})" if v.get('gpu_power_limit_w') else "")
                                        + (f", memory controller {v['gpu_mem_util_mean']} %" if v.get("gpu_mem_util_mean") is not None else "")}
    if v.get("topo_tp_pcie"):
        v["tp_over_pcie"] = True if v.get("tensor_parallel_size") and v["tensor_parallel_size"] > 1 else v.get("tp_over_pcie")
    _capacity(ev, v)
    _roofline(v)
    _prefill_time(v)
    _context_asked(ev, v)
    _run_kind(ev, v)
    if v.get("preemptions_total") is not None and v.get("window_seconds"):
        s.key_stats["preemption_rate"] = {"mean": round(v["preemptions_total"] / (v["window_seconds"] / 60), 3),
                                          "std": None, "n": v.get("steady_samples"), "p50": None, "p95": None,
                                          "unit": "per minute"}
    return s


def _capacity(ev: Evidence, v: dict) -> None:
    """Per-request KV footprint and what the KV cache can hold, from what the log states."""
    v["replicas"] = int(v.get("data_parallel_size") or 1)
    ver = re.findall(r"\d+", str(v.get("engine_version") or ""))[:3]
    v["version_num"] = int(ver[0]) * 10000 + int(ver[1]) * 100 + (int(ver[2]) if len(ver) > 2 else 0) if len(ver) >= 2 else None
    dt = str(v.get("kv_cache_dtype") or "").lower()
    eff = str(v.get("kv_cache_dtype_effective") or "").lower()
    if dt:
        v["kv_dtype_wide"] = (dt in WIDE_KV and not eff.startswith("float8")) if dt != "auto" or not eff else eff in WIDE_KV
    name = " ".join(str(x) for x in (v.get("gpu_name"), v.get("platform_gpu")) if x)
    v["fp8_capable"] = True if FP8_YES.search(name) else False if FP8_NO.search(name) else None
    kvt, mem = v.get("kv_cache_tokens"), v.get("kv_cache_memory_gib")
    if kvt and mem:
        v["kv_bytes_per_token"] = round(mem * 2**30 / kvt, 1)
    ctx = v.get("context_tokens_per_request")
    if ctx is None and kvt and v.get("kv_usage_mean") is not None and v.get("running_mean"):
        ctx = v["kv_usage_mean"] / 100 * kvt / v["running_mean"]
    if ctx:
        v["context_tokens_per_request"] = round(ctx)
        if kvt:
            v["max_sequences_by_memory"] = round(kvt / ctx, 1)
        if v.get("kv_bytes_per_token"):
            v["kv_gib_per_sequence"] = round(v["kv_bytes_per_token"] * ctx / 2**30, 2)
    longest = max([x for x in (v.get("context_tokens_per_request"), v.get("prompt_tokens_per_request")) if x] or [0])
    v["long_context"] = (longest >= 16000) if longest else None
    v["rejections_total"] = ev.counters.get("requests_refused", 0)
    v["kv_binding"] = _kv_binding(v)
    # A running-sequence cap the KV cache can hold: ~85 % KV usage at today's footprint, and no
    # more than the requests seen at their busier moments (p95 KV per request) would fit.
    # Per engine: the cap is each DP engine's own.
    rmax, kmax = v.get("batch_max") or v.get("running_max"), v.get("kv_usage_max")
    if rmax and kmax is not None:
        room = rmax * 85 / max(kmax, 1)
        if v.get("sequences_fit_p95"):
            room = min(room, 0.85 * v["sequences_fit_p95"] / max(1, v.get("dp_engines_logged") or 1))
        cap = int(min(max(room, rmax + 1), 1024))
        v["seq_cap_suggested"] = cap // 16 * 16 if cap >= 32 else cap
        # SGLang with DP attention splits --max-running-requests over the DP ranks (its scheduler
        # line shows one rank's share): the flag takes the total.
        dp = v.get("data_parallel_size") or 1
        if v.get("engine") == "sglang" and ev.settings.get("enable_dp_attention") and dp > 1:
            v["seq_cap_suggested"] *= dp
    # The maximum context that lets today's KV cache hold the concurrency seen (without runtime
    # stats: one full-length request when not even one fits, else two), in multiples of 1,024;
    # only when it is below today's.
    kvt, mml = v.get("kv_cache_tokens"), v.get("max_model_len")
    if kvt and mml:
        seen = v.get("offered_concurrency_max")
        want = max(1, math.ceil(seen)) if seen else 1 if kvt < mml else 2
        room = int(kvt // want // 1024 * 1024)
        # Never below what requests were seen to hold, nor below 2,048: shorter is no real fix.
        floor_len = max(2048, 2 * (v.get("context_tokens_per_request") or 0))
        v["kv_room_len"] = room if floor_len <= room < mml else None


def _roofline(v: dict) -> None:
    """Expected bounds from the capacity engine (model × GPU × layout), and a cross-check of the
    log's own KV capacity against the model's shape (the latter needs no GPU)."""
    if not v.get("model"):
        return
    try:
        from ..capacity.arithmetic import capacity, dtype_bytes, kv_bytes_per_token_per_layer, kv_dtype_for, kv_heads_per_gpu
        from ..capacity.models import from_partial
        from ..capacity.boards import lookup
        model = from_partial({k: v.get(k) for k in ("dtype", "quantization", "max_model_len")}, name=v["model"])
        if model is None:
            return
        v["model_max_context"] = model.max_position_embeddings
        kv = str(v.get("kv_cache_dtype") or "auto")
        tp = int(v.get("tensor_parallel_size") or 1)
        pp = int(v.get("pipeline_parallel_size") or 1)
        _kv_cross_check(v, model, kv_bytes_per_token_per_layer(model, dtype_bytes(kv_dtype_for(model, kv if kv != "auto" else None))),
                        kv_heads_per_gpu(model, tp) / max(model.num_kv_heads or 1, 1) if not model.is_mla else 1.0, pp)
        board = lookup(v.get("gpu_board") or v.get("gpu_name"))
        if board is None:
            return
        link = None
        if v.get("tp_spans_nodes"):
            link = "tcp" if v.get("nccl_socket") else "ib"
        elif v.get("topo_tp_nvlink"):
            link = "nvlink"
        elif v.get("tp_over_pcie"):
            link = "pcie"
        ctx = v.get("context_tokens_per_request") or min(int(v.get("max_model_len") or 4096), 4096)
        r = capacity(model, board, tp=tp, pp=pp, dp=int(v.get("data_parallel_size") or 1), context=int(ctx),
                     kv_dtype=kv if kv != "auto" else None,
                     gpu_memory_utilization=float(v.get("gpu_memory_utilization") or 0.9), link=link)
    except Exception:      # an estimate is a bonus: never let it break a diagnosis
        return
    v["decode_bound_tps"] = r.get("decode_tokens_per_s_per_sequence_bound")
    v["prefill_bound_tps"] = r.get("prefill_tokens_per_s_bound")
    v["est_max_sequences"] = r.get("max_sequences")
    v["est_context"] = ctx
    if v["decode_bound_tps"] and v.get("gen_tps_per_request") and (v.get("running_mean") or 0) > 0:
        v["decode_vs_bound"] = round(v["gen_tps_per_request"] / v["decode_bound_tps"], 3)


# Prefill is compute-bound and decode at a small batch is memory-bound, so a GPU prefills about
# (FLOP/s ÷ bytes/s) × MFU × bytes-per-parameter ÷ 2 tokens per single-sequence decode token. The
# ratio FLOP/s ÷ bytes/s is 150–400 on data-centre and workstation GPUs since Volta (A100 156,
# H100 295, L4 400, T4 203); 150 at 50 % MFU is the conservative end: prefill is never guessed
# faster than it is.
PREFILL_PER_DECODE_PER_BYTE = 150 * 0.5 / 2
# Up to this many sequences a decode step is about one read of the weights (the KV cache of a
# few thousand tokens each and B × 2P FLOPs stay well under it on any GPU).
SMALL_BATCH = 32


def _prefill_time(v: dict) -> None:
    """How much of the GPU's time goes to prefill: prompt tokens/s against what the GPU can
    prefill. Token counts mislead: chat, RAG and agent traffic is 80–95 % prompt tokens while the
    server spends most of its time decoding, because a prefill token costs a small fraction of a
    decode step."""
    prompt = v.get("prompt_tps_mean")
    if prompt is None:
        return
    capacity, basis = v.get("prefill_bound_tps"), "roofline"
    # A sequence's decode speed stands for the weight-read time only while the batch is small;
    # at a large batch each step also reads every sequence's KV cache and computes for all of
    # them, so the per-sequence speed says nothing about the single-stream speed: unknown then.
    if not capacity and v.get("decode_tps_per_sequence") and (v.get("running_mean") or 0) <= SMALL_BATCH:
        capacity = v["decode_tps_per_sequence"] * PREFILL_PER_DECODE_PER_BYTE * (v.get("bytes_per_param") or 2.0)
        basis = "decode speed"
    if not capacity:
        return
    v["prefill_capacity_tps"] = round(capacity, 1)
    v["prefill_capacity_basis"] = basis
    v["prefill_time_share"] = round(min(prompt / capacity, 1.0), 3)


def _run_kind(ev: Evidence, v: dict) -> None:
    """What kind of run this was, for rules whose advice only holds for some: one that failed or
    was stopped before serving anything (throughput advice is noise beside the failure), one on
    the CPU backend (no CUDA graphs, no GPU batching to scale into)."""
    failed = any(v.get(f"{k}_count", 0) > 0 for k in ("oom", "engine_dead", "kv_capacity_error", "kv_no_memory",
                                                        "uncaught_exception", "stop_requested"))
    served = bool(v.get("stats_samples")) or ev.event_counts.get("request", 0) > 0
    v["never_served"] = bool(failed and not served)
    platform = str(v.get("platform") or ev.fact("device") or "").lower()
    v["cpu_backend"] = platform == "cpu" or None


def _context_asked(ev: Evidence, v: dict) -> None:
    """Requests refused for their length: how long they were, and the maximum context that would
    have taken them — when the model itself allows it and the KV cache holds two such requests."""
    v["context_rejections"] = ev.event_counts.get("context_rejection", 0)
    asked = ev.values.get("context_asked") or []
    if not asked:
        return
    native = v.get("model_max_context")
    servable = [a for a in asked if not native or a <= native]
    v["context_asked_max"] = max(asked)
    v["context_asked_beyond_model"] = len(asked) - len(servable)
    if not servable:
        return
    p95 = _quantile(servable, 0.95)
    v["context_asked_p95"] = int(p95)
    want = int(math.ceil(p95 / 1024) * 1024)
    if native:
        want = min(want, native)
    kvt, mml = v.get("kv_cache_tokens"), v.get("max_model_len") or v.get("context_limit_seen")
    # Without the model's own maximum, a limit of 128 k or more is most likely it already.
    if not native and mml and mml >= 131072:
        return
    if mml and want > mml and (not kvt or kvt >= 2 * want):
        v["context_raise_len"] = want


def _kv_cross_check(v: dict, model, per_layer: float, head_share: float, pp: int) -> None:
    """The log's KV tokens against its KV memory ÷ the model's bytes per token per GPU."""
    if not (v.get("kv_cache_memory_gib") and v.get("kv_cache_tokens") and model.layers):
        return
    per_tok = per_layer * head_share * model.layers / pp
    est = v["kv_cache_memory_gib"] * 2**30 / per_tok
    v["kv_tokens_estimated"] = int(est)
    v["kv_tokens_log_vs_estimate"] = round(v["kv_cache_tokens"] / est, 3)
    off = abs(v["kv_tokens_log_vs_estimate"] - 1)
    v["kv_estimate_note"] = ("agrees within 10 %" if off <= 0.10 else
                             "differs: the engine sizes KV in blocks per layer group (hybrid / sliding-window layers "
                             "and MLA latents are stored differently) and reports memory after rounding; the estimate "
                             "uses the model table's shape")


def _kv_binding(v: dict):
    """Does the KV cache limit the run? True / False / None (cannot tell)."""
    hits = [v.get("kv_capacity_error_count", 0) > 0, v.get("kv_pool_exhausted_count", 0) > 0,
            v.get("kv_no_memory_count", 0) > 0,
            (v.get("preemptions_total") or 0) > 0,
            (v.get("paused_samples") or 0) > 0,
            v.get("max_concurrency") is not None and v["max_concurrency"] < 1,
            v.get("kv_usage_p95") is not None and v["kv_usage_p95"] >= 90 and (v.get("waiting_mean") or 0) >= 1]
    if any(hits):
        return True
    if v.get("kv_usage_p95") is None and v.get("max_concurrency") is None:
        return None
    return False


def _num(x) -> float | None:
    try:
        return float(x) if x is not None and not isinstance(x, bool) else None
    except (TypeError, ValueError):
        return None


def _model_size(ev: Evidence, v: dict) -> None:
    model = v.get("model") or ""
    params = None
    name = model_id(model).rsplit("/", 1)[-1]
    # `Qwen3-30B-A3B`: total 30 B, active 3 B; `Mixtral-8x7B`: 8 × 7 B (shared layers ignored).
    for m in PARAMS_RX.finditer(name):
        b = float(m.group("b"))
        if m.start() > 0 and name[m.start() - 1] in "Aa" and params is not None:
            v["model_active_params_b"] = b
            continue
        if params is None:
            params = b * int(m.group("experts") or 1)
    tp = int(v.get("tensor_parallel_size") or 1)
    pp = int(v.get("pipeline_parallel_size") or 1)
    w = v.get("weights_gib_per_gpu")
    q = str(v.get("quantization") or "").lower()
    if q not in BYTES_PER_PARAM:
        # Quantized checkpoints often say their precision only in their name, including those
        # whose method names a container, not a width (compressed-tensors, modelopt).
        low = name.lower()
        # (gpt-oss is published only with MXFP4 expert weights)
        q = ("awq" if re.search(r"awq|gptq|4bit|int4|w4a16|nf4", low) else "mxfp4" if re.search(r"fp4|gpt-oss", low)
             else "fp8" if re.search(r"fp8|int8|w8a8", low) else q)
    bpp = BYTES_PER_PARAM.get(q, 4.0 if v.get("dtype") == "float32" else 2.0)
    v["bytes_per_param"] = bpp
    # The model's size from the model (its name's parameter count × bytes per parameter) before
    # the memory lines: with --cpu-offload-gb the GPU holds only part of the weights.
    offload = _num(ev.settings.get("cpu_offload_gb")) or _num((ev.settings.get("launch_args") or {}).get("cpu_offload_gb")
                                                              if isinstance(ev.settings.get("launch_args"), dict) else None)
    v["cpu_offload_gb"] = offload or None
    by_name = params * bpp * GIB_PER_GB if params is not None else None
    measured = w * tp * pp if w is not None and not offload else None
    # Measured weights include what the name leaves out (vision towers, embeddings); far below
    # the name's count they are not the whole model (offloaded, or one rank's share misread).
    if measured is not None and (by_name is None or measured >= 0.5 * by_name):
        v["weights_gib_replica"] = round(measured, 2)
    elif by_name is not None:
        v["weights_gib_replica"] = round(by_name, 2)
    if params is None and w is not None and not offload:
        params = round(w * tp * pp / GIB_PER_GB / bpp, 1)
    v["model_params_b"] = params
    if params is not None:
        v["recommended_tp"] = 1 if params < 7 else 2 if params <= 20 else 4 if params <= 70 else 8
    gm = v.get("gpu_memory_gib")
    if v.get("weights_gib_replica") is not None and gm:
        v["weights_fraction_of_gpu"] = round(v["weights_gib_replica"] / gm, 3)


def _parallelism(ev: Evidence, v: dict) -> None:
    tp = v.get("tensor_parallel_size")
    pp = v.get("pipeline_parallel_size") or 1
    nodes = v.get("nodes")
    v["world_size"] = int(tp) * int(pp) if tp is not None else None
    net_between_ranks = ev.has_event("nccl_net_ib") or ev.has_event("nccl_socket") or ev.has_event("tp_across_nodes")
    if tp is not None and int(tp) > 1:
        per_node = ev.fact("gpus_per_node") or ((v["world_size"] / nodes) if nodes else None)
        v["tp_spans_nodes"] = bool((per_node is not None and int(tp) > per_node)
                                   or (int(pp) == 1 and (nodes or 0) > 1)
                                   or (int(pp) == 1 and net_between_ranks))
        # NCCL's own word on the tensor-parallel communicator (nRanks = TP) settles it — when no
        # other group (PP, DP) has the same size.
        tp_comm_nodes = ev.nccl_comms.get(int(tp))
        if tp_comm_nodes is not None and int(tp) not in (int(pp), int(v.get("data_parallel_size") or 1)):
            v["tp_spans_nodes"] = tp_comm_nodes > 1
            if tp_comm_nodes == 1 and per_node is not None and per_node < int(tp):
                per_node = int(tp)
        # Attention data-parallel with the experts spread over the same ranks (wide EP: TRT-LLM
        # enable_attention_dp, SGLang --enable-dp-attention, with EP = TP): the TP size names that
        # group, and no layer all-reduces across it; the network carries the MoE all-to-all.
        if ev.fact("enable_dp_attention") is True and ev.fact("expert_parallel_size") == int(tp):
            v["tp_spans_nodes"] = False
        v["gpus_per_node"] = int(per_node) if per_node else None
        v["tp_over_pcie"] = (ev.has_event("allreduce_pcie") or ev.has_event("allreduce_no_p2p")
                             or ev.has_event("nccl_shm"))
    elif tp is not None:
        v["tp_spans_nodes"] = False
        v["tp_over_pcie"] = False
    socket = (ev.has_event("nccl_socket") or ev.has_event("nccl_network_socket"))
    v["nccl_socket"] = socket
    v["nccl_ib_missing"] = ev.has_event("nccl_ib_missing")
    v["multi_node"] = bool((nodes or 0) > 1 or net_between_ranks)


def _events(ev: Evidence, v: dict) -> None:
    c = ev.event_counts
    for k in ("oom", "engine_dead", "nccl_error", "kv_capacity_error", "kv_no_memory", "kv_pool_exhausted", "preemption",
              "eager_mode", "allreduce_pcie", "allreduce_no_p2p", "traceback", "uncaught_exception",
              "stop_requested", "failure_after_stop", "kv_transfer_failure"):
        v[f"{k}_count"] = c.get(k, 0)
    failed = [e.data["requests"] for e in ev.events.get("kv_transfer_failure", ()) if e.data.get("requests")]
    v["kv_transfer_requests_failed"] = sum(failed) if failed else None
    first = ev.first_event("uncaught_exception")
    v["uncaught_exception_type"] = first.data.get("exception") if first else None
    _stop(ev, v)
    v["http_5xx_count"] = sum(n for k, n in ev.counters.items() if k.startswith("status_5"))
    v["http_429_count"] = ev.counters.get("status_429", 0)
    total = sum(i.lines for i in ev.inputs) or 0
    v["total_lines"] = total
    v["access_lines"] = ev.counters.get("access_lines", 0)
    v["access_probe_lines"] = ev.counters.get("access_probe_lines", 0)
    v["access_probe_share"] = round(v["access_probe_lines"] / total, 3) if total else None
    v["request_lines"] = ev.counters.get("request_lines", 0)
    overflow = ev.counters.get("prompt_prefixes_overflow", 0)
    n = sum(ev.prompt_prefixes.values()) + overflow
    v["requests_logged"] = n
    # Share of requests whose first 256 characters were seen before: repeated prefixes.
    distinct = len(ev.prompt_prefixes) + overflow
    v["repeated_prefix_share"] = round(1 - distinct / n, 3) if n >= 20 else None
    acc = [e.data.get("acceptance") for e in ev.events.get("spec_decode", []) if e.data.get("acceptance") is not None]
    v["spec_acceptance_mean"] = round(sum(acc) / len(acc), 1) if acc else None
    labels = [("load_seconds", "weights load"), ("compile_seconds", "torch.compile"),
              ("capture_seconds", "CUDA graph capture"), ("startup_seconds", "engine init (profile, KV cache, warm-up)")]
    parts = [f"{label} {v[k]:.3g} s" for k, label in labels if v.get(k) is not None]
    if parts:
        v["startup_breakdown"] = ", ".join(parts)
    v["warmup_logged"] = any(ev.has_event(k) for k in ("startup_init", "startup_compile", "startup_load", "cuda_graph_capture"))
    # Ready and stopped (or cut) without stats: how many requests the log shows it served.
    ready = ev.first_event("server_ready")
    v["server_ready"] = ready is not None
    v["requests_served"] = (v["access_lines"] - v["access_probe_lines"]) + v["request_lines"] if ready is not None else None
    # A long silence the stop ended, where the server never said it was ready: a stalled start-up.
    quiet = ev.first_event("quiet_before_stop")
    if quiet is not None and not ev.has_event("server_ready") and not ev.stats_rows:
        v["startup_silence_min"] = quiet.data.get("minutes")
        text = quiet.text if len(quiet.text) <= 160 else quiet.text[:159] + "…"
        v["startup_silence_after"] = f"line {quiet.line}: {text}"


def _stop(ev: Evidence, v: dict) -> None:
    """How the server's last launch ended, when it was stopped: where and when the stop began
    (the first stop line of that launch), and how many failures after it were the stop's."""
    last = {}
    for p in ev.parts:              # the last launch of each file: an earlier one's stop is history
        last[p["source"]] = p
    ends = [p for p in last.values() if p.get("ending")]
    if not ends or any(p["ending"] != "stopped" for p in ends):
        return
    stops = [e for e in ev.events.get("stop_requested", ())
             if any(e.source == p["source"] and p["first_line"] <= e.line <= p["last_line"] for p in ends)]
    if not stops:
        return
    e = min(stops, key=lambda x: (x.time is None, x.time or 0, x.line))
    v["stopped"] = True
    if e.time is not None:
        v["stopped_at"] = e.time.strftime("%m-%d %H:%M:%S" if e.source in ev.year_guessed or e.time.year == 1900
                                          else "%Y-%m-%d %H:%M:%S")
    v["stopped_where"] = f"{e.source}:{e.line}"
    text = " ".join((e.data.get("msg") or e.text).split())
    v["stopped_text"] = text if len(text) <= 120 else text[:119] + "…"
    v["stop_noise_count"] = ev.event_counts.get("failure_after_stop", 0)
    v["stop_noise"] = [f"{x.source}:{x.line}: {x.text}" for x in ev.events.get("failure_after_stop", ())[:10]]


MIN_STEADY = 3   # fewer busy samples than this say nothing about a steady state
# DP engines' rows merged into one per stats tick: loads add up, percentages and latencies average.
_DP_SUM = ("prompt_tps", "gen_tps", "running", "waiting", "preemptions", "swapped", "kv_tokens_used",
           "ctx_tokens", "paused")
_DP_MEAN = ("prefix_hit", "spec_accept", "prompt_len", "ttft_p50", "ttft_p95", "ttft_p99", "itl_p50", "itl_p95",
            "itl_p99")
_SECOND = timedelta(seconds=1)


def _known(xs) -> list:
    return [x for x in xs if x is not None]


def _quantile(xs: list, q: float) -> float:
    """The sorted value at rank (n-1)·q, the rank rounded half up ("nearest", as polars does):
    a p95 is a value that was logged, never one interpolated between two."""
    xs = sorted(xs)
    pos = (len(xs) - 1) * q
    i = math.floor(pos)
    if pos - i >= 0.5:
        i += 1
    return xs[min(i, len(xs) - 1)]


def _stdev(xs: list) -> float | None:
    return statistics.stdev(xs) if len(xs) > 1 else None


def _share(flags: list) -> float:
    return sum(flags) / len(flags)


def _merge_dp_ticks(cols: dict) -> dict:
    """One row per tick across DP engines. They log the same tick a second or two apart: rows are
    bucketed by the 10 s stats interval. Within a bucket each rank's own rows are averaged first
    (SGLang logs a decode line every few iterations, several per bucket), then ranks are added
    (totals) or averaged (shares). A total or mean is unknown (not 0) when no engine gave it.
    `rank_running_max` / `rank_running_mean` keep the batch one rank runs: caps are per rank."""
    buckets: dict = {}
    for i, t in enumerate(cols["time"]):
        buckets.setdefault(t.replace(second=t.second - t.second % 10, microsecond=0), []).append(i)
    out: dict = {k: [] for k in cols}
    out["rank_running_max"], out["rank_running_mean"] = [], []
    out["kv_usage_dp_mean"] = []
    for tick, idx in buckets.items():
        out["time"].append(tick)
        for k in ("source", "kind"):
            out[k].append(cols[k][idx[0]])
        ranks: dict = {}
        for i in idx:
            ranks.setdefault(cols["engine_idx"][i], []).append(i)
        spread = None
        for k in cols:
            if k in ("time", "source", "kind"):
                continue
            if k in _DP_SUM or k in _DP_MEAN or k == "kv_usage":
                per_rank = []
                for rows in ranks.values():
                    xs = [cols[k][i] for i in rows if cols[k][i] is not None]
                    if xs:
                        per_rank.append(statistics.fmean(xs))
                if k == "kv_usage":
                    # Each engine has its own cache: the fullest one evicts first, as vLLM's
                    # dashboards show it; the spread says how unevenly the router fills them.
                    out[k].append(max(per_rank) if per_rank else None)
                    out["kv_usage_dp_mean"].append(statistics.fmean(per_rank) if per_rank else None)
                    spread = max(per_rank) - min(per_rank) if len(per_rank) > 1 else None
                elif not per_rank:
                    out[k].append(None)
                else:
                    out[k].append(math.fsum(per_rank) if k in _DP_SUM else statistics.fmean(per_rank))
                if k == "running":
                    out["rank_running_max"].append(max(per_rank) if per_rank else None)
                    out["rank_running_mean"].append(statistics.fmean(per_rank) if per_rank else None)
                continue
            xs = [cols[k][i] for i in idx if cols[k][i] is not None]
            if not xs:
                out[k].append(None)
            elif k == "graph":
                out[k].append(all(xs))
            else:                       # line, engine_idx: the first
                out[k].append(min(xs))
        if spread is not None:
            out["kv_spread"][-1] = spread
    return out


def _lifetime(ev: Evidence, s: Signals) -> None:
    """One scrape: its counters and histograms hold everything since the server started — said
    as such (JSON `lifetime`), never as this window's figures."""
    vals = {k[len("lifetime_"):]: x[0] for k, x in ev.values.items() if k.startswith("lifetime_") and x}
    if not vals:
        return
    v = s.values
    if vals.get("requests") is not None:
        v["lifetime_requests"] = round(vals["requests"])
    for kind in ("ttft", "itl", "queue_time", "prefill_time", "decode_time", "e2e"):
        for qn in ("mean", "p50", "p95", "p99"):
            if vals.get(f"{kind}_{qn}") is None:
                continue
            v[f"lifetime_{kind}_{qn}_s"] = round(vals[f"{kind}_{qn}"], 4)
            e = s.key_stats[f"{kind}_{qn}_lifetime"] = {"value": round(vals[f"{kind}_{qn}"], 4),
                                                        "over": "since the server started (one scrape)"}
            if vals.get(f"{kind}_{qn}_above"):
                e["above_top_bucket"] = True
            if vals.get(f"{kind}_{qn}_at_most"):
                e["at_most"] = True
    for col, name in (("prompt_len", "prompt_tokens_per_request"), ("prefix_hit", "prefix_cache_hit")):
        if vals.get(col) is not None:
            v[f"lifetime_{col}"] = round(vals[col], 1)
            s.key_stats[f"{name}_lifetime"] = {"value": round(vals[col], 1), "over": "since the server started (one scrape)"}


def _runtime(ev: Evidence, s: Signals) -> None:
    v = s.values
    v["stats_samples"] = len(ev.stats_rows)
    v["sample_clock"] = ev.clock_zone          # "UTC": sample times from Unix times (metrics), shown by diagnose.clock
    # vLLM V0 preemption warnings, SGLang retractions, TRT-LLM paused requests: one count.
    logged_events = (ev.counters.get("preemptions_total", 0) + ev.counters.get("retracted_total", 0))
    v["preemptions_total"] = logged_events or None
    v["paused_samples"] = ev.counters.get("paused_samples", 0)
    # one scrape is all there is of the run only when nothing else (a log's stats) gives samples
    v["single_scrape"] = bool(ev.counters.get("single_scrape")) and len(ev.stats_rows) <= 1
    v["paused_peak"] = ev.counters.get("paused_peak", 0)
    # Requests that finished in the window (a histogram's count grew): work, whatever the gauges
    # said at the moments they were scraped.
    w = ev.values.get("window_requests")
    if w:
        v["requests_in_window"] = round(w[0])
    _lifetime(ev, s)
    expert(ev, s)
    if not ev.stats_rows:
        v["steady_samples"] = 0
        return
    df = ev.stats_columns()
    engines = len(set(df["engine_idx"]))
    v["dp_engines_logged"] = engines
    if engines > 1 and None not in df["time"]:
        df = _merge_dp_ticks(df)
    else:
        df["rank_running_max"] = df["rank_running_mean"] = df["running"]
    # Busy: work in the queues or tokens flowing, or requests finishing (a latency quantile exists
    # only where requests completed: a frontend that exports latencies but no queue gauges serves).
    activity = list(zip(df["running"], df["waiting"], df["gen_tps"], df["prompt_tps"], df["ttft_p50"], df["itl_p50"]))
    # A probe's one-token prefill every few seconds (0.2 tokens/s, nothing running) is not work.
    flags = [any(x is not None and x > 0 for x in row[:2]) or any(x is not None and x >= 1 for x in row[2:4])
             or any(x is not None and x > 0 for x in row[4:]) for row in activity]
    busy_idx = [i for i, b in enumerate(flags) if b]
    if not busy_idx and all(x is None for row in activity for x in row):
        # Nothing says whether it worked: unknown, never "idle".
        v["steady_samples"] = 0
        v["activity_unknown"] = True
        return
    v["idle_samples"] = len(flags) - len(busy_idx)
    v["busy_samples"] = len(busy_idx)
    # What the busy samples held at most: a test request or two finishing inside one interval
    # (running 0 or 1, nothing waiting) is an idle server, not an unjudgeable one.
    v["busy_running_max"] = max((df["running"][i] or 0.0 for i in busy_idx), default=None)
    v["busy_waiting_max"] = max((df["waiting"][i] or 0.0 for i in busy_idx), default=None)
    # A missing count is unknown, not zero: V0 logs every 50th preemption as a warning, V1 from
    # v0.11.2 adds `Preemptions: N` to the stats line when N > 0; older V1 logs say nothing.
    logged = int(sum(_known(df["preemptions"])))
    says_preemptions = (v.get("v1_engine") is False or logged > 0 or v.get("engine") == "sglang"
                        or (v.get("engine") == "vllm" and _version_at_least(v.get("engine_version"), (0, 11, 2))))
    if logged or v["preemptions_total"]:
        v["preemptions_total"] = (v["preemptions_total"] or 0) + logged
    elif says_preemptions:
        v["preemptions_total"] = 0
    for col in ("running", "waiting", "kv_usage", "gen_tps"):
        if any(x is not None for x in df[col]):    # a series the input lacks is not drawn as zeros
            s.timeline[col] = [0.0 if x is None else x for x in df[col]]
    if not busy_idx:
        v["steady_samples"] = 0
        v["all_idle"] = True
        # Idle is a state too: record it so a later run can be compared with this one.
        # (What was measured, never zeros in its place: 0.4 tokens/s of a probe stays 0.4.)
        for name, col in (("running", "running"), ("waiting", "waiting"), ("generation_throughput", "gen_tps")):
            x = _known(df[col])
            v[f"{col}_known"] = bool(x)
            if x:
                s.key_stats[name] = {"mean": round(statistics.fmean(x), 3), "std": round(_stdev(x) or 0.0, 3),
                                     "n": len(x), "p50": round(_quantile(x, 0.5), 3), "p95": round(_quantile(x, 0.95), 3)}
        return
    v["all_idle"] = False
    # Bursts at the cap, over every busy sample: running and waiting are gauges, true at the moment
    # of the line (unlike the rates of a first sample after idle, which it dilutes), and a burst
    # that the next interval drains shows only there. Two or more samples with the batch at its
    # cap and a queue of at least 5 % of the cap (not one or two arrivals' jitter): a burst-capped server.
    cap = v.get("max_num_seqs_per_engine") or v.get("max_num_seqs")
    if cap:
        at_cap = [(df["waiting"][i] or 0.0) for i in busy_idx
                  if df["rank_running_max"][i] is not None and df["rank_running_max"][i] >= _cap_floor(cap)
                  and (df["waiting"][i] or 0) >= 1]
        v["capped_waiting_samples"] = len(at_cap)
        v["capped_waiting_burst"] = len(at_cap) >= 2 and statistics.fmean(at_cap) >= max(2.0, 0.05 * float(cap))
        if at_cap:
            v["capped_waiting_peak"] = max(at_cap)
    # Steady window: busy samples, minus the first sample after each idle stretch (the interval
    # it averages was partly idle) when enough samples remain.
    keep = []
    prev_busy = False
    for i, b in enumerate(flags):
        if b and (prev_busy or len(busy_idx) < 4):
            keep.append(i)
        prev_busy = b
    if len(keep) < 2:
        keep = busy_idx
    st = {k: [col[i] for i in keep] for k, col in df.items()}
    height = len(keep)
    v["steady_samples"] = height
    if height < MIN_STEADY:
        v["too_few_samples"] = True
        return
    s.samples = st
    t = st["time"]
    timed = None not in t
    if timed:
        t0, t1 = min(t), max(t)
        v["window_seconds"] = (t1 - t0).total_seconds()
        s.steady_range = (t0, t1)
        if ev.clock_zone == "UTC":      # a metric's time: shown in the local zone (or UTC, --utc), named
            from ..clock import span
            s.window = f"steady window {span(t0, t1)} ({height} samples, idle and warm-up excluded)"
        else:                           # a log's time is its host's, zone unknown: as written
            s.window = f"steady window {t0:%m-%d %H:%M:%S}–{t1:%H:%M:%S} ({height} samples, idle and warm-up excluded)"
    else:
        s.window = f"steady window: {height} busy samples (idle and warm-up excluded)"

    def stat(col, fn):
        x = _known(st[col])
        return round(float(fn(x)), 3) if x else None

    for col in ("running", "waiting", "kv_usage", "gen_tps", "prompt_tps", "prefix_hit"):
        v[f"{col}_mean"] = stat(col, statistics.fmean)
        v[f"{col}_max"] = stat(col, max)
        v[f"{col}_p50"] = stat(col, lambda x: _quantile(x, 0.5))
        v[f"{col}_p95"] = stat(col, lambda x: _quantile(x, 0.95))
    v["prefix_hit_last"] = stat("prefix_hit", lambda x: x[-1])
    # The batch one engine runs (= running with one engine): what caps, kernels and drafts see.
    v["batch_p50"] = stat("rank_running_mean", lambda x: _quantile(x, 0.5))
    v["batch_max"] = stat("rank_running_max", max)
    # Latency quantiles (Prometheus histograms): the window's typical value, and how ITL follows load.
    for col in ("ttft_p50", "ttft_p95", "ttft_p99", "itl_p50", "itl_p95", "itl_p99"):
        x = _known(st[col])
        if x:
            v[f"{col}_s"] = round(statistics.fmean(x), 4)
            v[f"{col}_max_s"] = round(max(x), 4)
        # A live Prometheus gives the window's own quantile (its histogram's increase over the
        # whole window): that, not a mean of rolling 5-minute quantiles, is "p95 of this window".
        w = ev.values.get(f"window_{col}")
        if w:
            v[f"{col}_s"] = round(w[0], 4)
            v["latency_quantiles_over"] = "the whole window (histogram increase)"
            s.key_stats[f"{col}_window"] = {"value": round(w[0], 4), "over": "the whole window (histogram increase)"}
            if ev.values.get(f"window_{col}_at_most"):
                s.key_stats[f"{col}_window"]["at_most"] = True
            if ev.values.get(f"window_{col}_above"):      # in the +Inf bucket: the top bound is a floor
                s.key_stats[f"{col}_window"]["above_top_bucket"] = True
    both = [(i, r) for i, r in zip(st["itl_p50"], st["running"]) if i is not None and r is not None]
    if len(both) >= 6:
        itl, running = [b[0] for b in both], [b[1] for b in both]
        if len(set(running)) > 1 and len(set(itl)) > 1:     # no correlation with a constant
            v["itl_running_corr"] = round(statistics.correlation(itl, running), 3)
    # Where a request's time goes (Prometheus stage histograms), over the whole window.
    for kind in ("queue_time", "prefill_time", "decode_time", "e2e", "ttft", "itl"):
        for qn in ("mean", "p50", "p95", "p99"):
            w = ev.values.get(f"window_{kind}_{qn}")
            if w and kind not in ("ttft", "itl") or w and qn == "mean":
                v[f"{kind}_{qn}_s"] = round(w[0], 4)
                s.key_stats[f"{kind}_{qn}_window"] = {"value": round(w[0], 4), "over": "the whole window (histogram increase)"}
            if w and ev.values.get(f"window_{kind}_{qn}_at_most"):     # within the lowest bucket: a bound
                s.key_stats[f"{kind}_{qn}_window"]["at_most"] = True
            if w and ev.values.get(f"window_{kind}_{qn}_above"):       # in the +Inf bucket: a floor
                s.key_stats[f"{kind}_{qn}_window"]["above_top_bucket"] = True
    # Prompt length and prefix-cache hit rate over the window: the totals divided.
    w = ev.values.get("window_prompt_len")
    if w:
        v["prompt_tokens_per_request"] = round(w[0])
        s.key_stats["prompt_tokens_per_request_window"] = {"value": round(w[0], 1), "over": "the whole window (counter increase)"}
    w = ev.values.get("window_prefix_hit")
    if w:
        v["prefix_hit_window"] = round(w[0], 1)
        s.key_stats["prefix_cache_hit_window"] = {"value": round(w[0], 1), "over": "the whole window (counter increase)"}
    spread = _known(st["kv_spread"])
    if spread:
        v["kv_spread_max"] = round(max(spread), 1)
        v["kv_spread_mean"] = round(statistics.fmean(spread), 1)
    # Per-signal statistics kept in the JSON report so a later run can be compared with this one.
    for name, col in (("generation_throughput", "gen_tps"), ("prompt_throughput", "prompt_tps"),
                      ("running", "running"), ("waiting", "waiting"), ("swapped", "swapped"), ("kv_cache_usage", "kv_usage"),
                      ("kv_cache_usage_spread", "kv_spread"), ("prefix_cache_hit", "prefix_hit"),
                      ("prompt_tokens_per_request", "prompt_len"),
                      ("ttft_p50", "ttft_p50"), ("ttft_p99", "ttft_p99"), ("itl_p50", "itl_p50")):
        x = _known(st[col])
        if x:
            s.key_stats[name] = {"mean": round(statistics.fmean(x), 3), "std": round(_stdev(x) or 0.0, 3),
                                 "n": len(x), "p50": round(_quantile(x, 0.5), 3), "p95": round(_quantile(x, 0.95), 3)}
    # Context held per running request (SGLang `#token` / `#running-req`), prompt length per
    # admitted request (SGLang prefill lines), and how often decode ran outside CUDA graphs.
    per_req = [k / r for k, r in zip(st["kv_tokens_used"], st["running"]) if k is not None and r is not None and r > 0]
    if per_req:
        v["context_tokens_per_request"] = round(statistics.fmean(per_req))
    # The KV a running request holds at the busier moments (p95 over samples), from the tokens
    # used or from KV usage × cache size: what the cache must fit per request when load rises.
    # The cache size logged is one engine's; with DP every engine has its own.
    kvt = v.get("kv_cache_tokens") and v["kv_cache_tokens"] * max(1, v.get("dp_engines_logged") or 1)
    usage = st.get("kv_usage_dp_mean") or st["kv_usage"]     # all engines' caches together
    held = per_req or ([u / 100 * kvt / r for u, r in zip(usage, st["running"])
                        if u is not None and r and r > 0] if kvt else [])
    if held and kvt:
        v["context_tokens_per_request_p95"] = round(_quantile(held, 0.95))
        if v["context_tokens_per_request_p95"] > 0:
            v["sequences_fit_p95"] = round(kvt / v["context_tokens_per_request_p95"], 1)
    prompt_len = _known(st["prompt_len"])
    if prompt_len and v.get("prompt_tokens_per_request") is None:     # the window's own total wins
        v["prompt_tokens_per_request"] = round(statistics.fmean(prompt_len))
    graph = _known(st["graph"])
    if graph:
        v["decode_graph_off_share"] = round(1 - _share(graph), 3)
    run = _known(st["running"])
    cgm = v.get("cuda_graph_max_size")
    rank_run = _known(st["rank_running_max"])     # caps and graph sizes are per engine
    if cgm and rank_run:
        v["running_over_graph_share"] = round(_share([x > cgm for x in rank_run]), 3)
    if run:
        v["offered_concurrency_max"] = round(max((r or 0.0) + (w or 0.0) for r, w in zip(st["running"], st["waiting"])), 1)
    if _known(st["prompt_tps"]) and _known(st["gen_tps"]):
        both = [(p, g) for p, g in zip(st["prompt_tps"], st["gen_tps"]) if p is not None and g is not None]
        tot = sum(p + g for p, g in both)
        v["prompt_share"] = round(sum(p for p, _ in both) / tot, 3) if tot else None
    waiting = _known(st["waiting"])
    if waiting:
        v["waiting_nonzero_share"] = round(_share([x > 0 for x in waiting]), 3)
        v["waiting_run_max"] = _longest_run([x is not None and x >= 1 for x in st["waiting"]])
    # Episodes (at the cap, or the KV cache full, with requests waiting, for consecutive samples:
    # what window means dilute) are judged sample by sample by the rules' [sustained] tables over
    # the steady window's samples; "at the cap" is at or above this floor.
    cap = v.get("max_num_seqs_per_engine") or v.get("max_num_seqs")
    if cap:
        v["seq_cap_floor"] = _cap_floor(cap)
    if v["running_mean"] and v["gen_tps_mean"] is not None:
        v["gen_tps_per_request"] = round(v["gen_tps_mean"] / v["running_mean"], 2)
    # Does throughput follow load? Samples near the window's top load against those near half of
    # it (a benchmark sweep, a day's curve): 1 is linear scaling; under 0.6, doubling the requests
    # bought less than 20 % more tokens/s and the server, not the client, is the limit.
    pairs = [(r, g) for r, g in zip(st["running"], st["gen_tps"]) if r and g is not None and r > 0]
    if len(pairs) >= 6:
        top = max(r for r, _ in pairs)
        hi = [(r, g) for r, g in pairs if r >= 0.8 * top]
        lo = [(r, g) for r, g in pairs if 0.35 * top <= r <= 0.65 * top]
        if len(hi) >= 3 and len(lo) >= 3 and statistics.fmean(g for _, g in lo) > 0:
            load = statistics.fmean(r for r, _ in hi) / statistics.fmean(r for r, _ in lo)
            tokens = statistics.fmean(g for _, g in hi) / statistics.fmean(g for _, g in lo)
            v["gen_tps_gain_per_load"] = round(tokens / load, 2)
    # A sequence's decode speed when the GPU is not also prefilling: the samples without prompt
    # tokens (else all samples, which understates it) — the yardstick for how long prefill takes.
    pure = [g / r for g, r, p in zip(st["gen_tps"], st["running"], st["prompt_tps"])
            if g and r and r > 0 and p == 0]
    mixed = [g / r for g, r in zip(st["gen_tps"], st["running"]) if g and r and r > 0]
    if pure or mixed:
        v["decode_tps_per_sequence"] = round(_quantile(pure or mixed, 0.9), 2)
    rmax = v["running_max"] or 0
    v["running_plateau_share"] = round(_share([x >= rmax * 0.95 for x in run]), 3) if rmax else None
    cap = v.get("max_num_seqs_per_engine") or v.get("max_num_seqs")
    v["running_at_cap_share"] = round(_share([x >= _cap_floor(cap) for x in rank_run]), 3) if cap and rank_run else None
    km = v["kv_usage_mean"]
    if km is not None and km > 0:
        v["kv_headroom_x"] = round(min(90.0 / km, 1000.0), 1)
    elif km == 0 and (v["running_mean"] or 0) > 0:
        v["kv_headroom_x"] = 100.0   # "0.0 %" with requests running means < 0.05 %
    # Trend of the queue: slope per minute and how well a line explains it (whole seconds).
    if height >= 6 and timed and len(waiting) == height:
        t_min = min(t)
        sec = [(x - t_min) // _SECOND for x in t]
        if statistics.variance(sec):
            v["waiting_slope_per_min"] = round(statistics.linear_regression(sec, st["waiting"]).slope * 60, 3)
            try:
                r = statistics.correlation(sec, st["waiting"])
            except statistics.StatisticsError:      # a flat queue: no line explains anything
                r = 0.0
            v["waiting_trend_r2"] = round(r * r, 3)
    # A queue can grow in steps (a burst: waiting rises as KV fills and running falls) that a line
    # fits badly: compare the window's first and last thirds, and TTFT's where the input has it.
    if height >= 6 and len(waiting) == height:
        third = height // 3
        v["waiting_early_mean"] = round(statistics.fmean(st["waiting"][:third]), 2)
        v["waiting_late_mean"] = round(statistics.fmean(st["waiting"][-third:]), 2)
        ttft = st.get("ttft_p50") or []
        early, late = _known(ttft[:third]), _known(ttft[-third:])
        if early and late and statistics.fmean(early) > 0:
            v["ttft_late_over_early"] = round(statistics.fmean(late) / statistics.fmean(early), 2)
    lines = _known(st["line"])
    first_line, last_line = (min(lines), max(lines)) if lines else (None, None)
    src = st["source"][0]

    def prov(metric, value):
        return {"metric": metric, "window": s.window, "value": value, "source": src,
                "lines": f"{first_line}–{last_line}"}

    s.provenance.update({
        "running": prov("running requests", _fmt_mm(v, "running")),
        "waiting": prov("waiting requests", _fmt_mm(v, "waiting")),
        "kv_usage": prov("GPU KV cache usage %", _fmt_mm(v, "kv_usage")),
        "gen_tps": prov("generation throughput tokens/s", _fmt_mm(v, "gen_tps")),
        "prompt_tps": prov("prompt throughput tokens/s", _fmt_mm(v, "prompt_tps")),
        "prefix_hit": prov("prefix cache hit rate %", f"last {v['prefix_hit_last']}"),
        "waiting_trend": prov("waiting requests trend", f"slope {v.get('waiting_slope_per_min')}/min, r² {v.get('waiting_trend_r2')}"),
        "preemptions": prov("preemptions", str(v.get("preemptions_total"))),
    })
    # Prometheus' window totals (counters and histograms divided over the whole window).
    whole = {"window": "the whole window (counter and histogram increase)", "source": src, "lines": None}
    if v.get("prefix_hit_window") is not None:
        s.provenance["prefix_hit"] = {**whole, "metric": "prefix cache hit rate %", "value": f"{v['prefix_hit_window']:.3g}"}
    if ev.values.get("window_prompt_len"):
        s.provenance["prompt_len"] = {**whole, "metric": "prompt tokens per request", "value": f"mean {v['prompt_tokens_per_request']:g}"}
    elif v.get("prompt_tokens_per_request") is not None:
        s.provenance["prompt_len"] = prov("prompt tokens per request", f"mean {v['prompt_tokens_per_request']:g}")
    stages = [f"{label} mean {v[k]:.3g} s" for k, label in (("queue_time_mean_s", "queue"), ("prefill_time_mean_s", "prefill"),
                                                         ("decode_time_mean_s", "decode")) if v.get(k) is not None]
    if stages:
        s.provenance["stage_time"] = {**whole, "metric": "time per request by stage", "value": " · ".join(stages)}


def _cap_floor(cap) -> float:
    """Running at or above this is "at the cap": within 5 %, or one below it (SGLang holds a slot
    for an in-flight chunked prefill and plateaus at cap − 1), never below 1 for tiny caps."""
    cap = float(cap)
    return cap if cap < 4 else min(cap * 0.95, cap - 1)




def _longest_run(flags: list) -> int:
    best = cur = 0
    for f in flags:
        cur = cur + 1 if f else 0
        best = max(best, cur)
    return best


def _version_at_least(ver, want: tuple) -> bool:
    if not ver:
        return False
    nums = [int(x) for x in re.findall(r"\d+", str(ver))[:3]]
    return tuple(nums + [0] * (3 - len(nums))) >= want


def _fmt_mm(v, col):
    return f"mean {v.get(col + '_mean')}, p95 {v.get(col + '_p95')}, max {v.get(col + '_max')}"
