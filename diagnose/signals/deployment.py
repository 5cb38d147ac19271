"""Deployment signals: what the launch and the model say the server can do — the model's size,
how it is split over GPUs and nodes, what its KV cache holds, the roofline's bounds — and what
kind of run it was. Each producer declares the signals it makes."""
from __future__ import annotations

import math
import re

from ..values import model_id
from ..evidence.model import Evidence
from .producers import produces
from .stats import quantile

# Bytes per parameter by quantization / dtype, for weight-size estimates from a parameter count.
BYTES_PER_PARAM = {"fp8": 1.0, "int8": 1.0, "awq": 0.55, "gptq": 0.55, "awq_marlin": 0.55,
                   "gptq_marlin": 0.55, "bitsandbytes": 0.55, "float32": 4.0,
                   "mxfp4": 0.55, "nvfp4": 0.55, "fp4": 0.55}
# Starts only at the first digit of a number: tried at every digit, a long run of them was quadratic.
PARAMS_RX = re.compile(r"(?<![\d.])(?:(?P<experts>\d+)x)?(?P<b>\d+(?:\.\d+)?)[Bb](?![a-zA-Z])")
GIB_PER_GB = 1e9 / 2**30
# GPUs with FP8 tensor cores (Ada, Hopper, Blackwell and their embedded parts) — by name.
# Bounded gaps: two `\s*` around an optional `\d*` backtracked quadratically on a long run of spaces.
FP8_YES = re.compile(r"H100|H200|H20\b|H800|GH200|L40|L4\b|L20|RTX\s{0,3}(?:PRO\s{0,3})?\d{0,5}\s{0,3}Ada|RTX\s{0,3}40\d0|RTX\s{0,3}50\d0|RTX 6000 Ada|B100|B200|B300|GB200|GB300|GB10|Thor|DGX Spark|RTX 4000 Ada|RTX 2000 Ada", re.I)
FP8_NO = re.compile(r"A100|A800|A10\b|A10G|A30|A40|A6000|V100|T4\b|P100|RTX\s{0,3}30\d0|RTX\s{0,3}20\d0|GTX|Orin", re.I)
WIDE_KV = {"auto", "fp16", "bf16", "float16", "bfloat16", "fp32", "float32", "half", "float"}


@produces("bytes_per_param", "cpu_offload_gb", "model_active_params_b", "model_params_b", "recommended_tp",
          "weights_fraction_of_gpu", "weights_gib_replica")
def model_size(ev: Evidence, s) -> None:
    """Parameters (from the model's name, else its weights), bytes per parameter, weights per replica."""
    v = s.values
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


@produces("gpus_per_node", "world_size", flags=("multi_node", "nccl_ib_missing", "nccl_socket",
          "tp_over_pcie", "tp_spans_nodes"))
def parallelism(ev: Evidence, s) -> None:
    v = s.values
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


@produces("context_tokens_per_request", "kv_bytes_per_token", "kv_gib_per_sequence", "kv_room_len",
          "max_sequences_by_memory", "rejections_total", "replicas", "seq_cap_suggested", "version_num",
          flags=("fp8_capable", "kv_binding", "kv_dtype_wide", "long_context"))
def capacity(ev: Evidence, s) -> None:
    """Per-request KV footprint and what the KV cache can hold, from what the log states."""
    v = s.values
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


@produces("decode_bound_tps", "decode_vs_bound", "est_context", "est_max_sequences", "kv_tokens_estimated",
          "kv_tokens_log_vs_estimate", "model_max_context", "prefill_bound_tps", texts=("kv_estimate_note",))
def roofline(ev: Evidence, s) -> None:
    """Expected bounds from the capacity engine (model × GPU × layout), and a cross-check of the
    log's own KV capacity against the model's shape (the latter needs no GPU)."""
    v = s.values
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


@produces("prefill_capacity_tps", "prefill_time_share", texts=("prefill_capacity_basis",))
def prefill_time(ev: Evidence, s) -> None:
    """How much of the GPU's time goes to prefill: prompt tokens/s against what the GPU can
    prefill. Token counts mislead: chat, RAG and agent traffic is 80–95 % prompt tokens while the
    server spends most of its time decoding, because a prefill token costs a small fraction of a
    decode step."""
    v = s.values
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


@produces(flags=("cpu_backend", "never_served"))
def run_kind(ev: Evidence, s) -> None:
    """What kind of run this was, for rules whose advice only holds for some: one that failed or
    was stopped before serving anything (throughput advice is noise beside the failure), one on
    the CPU backend (no CUDA graphs, no GPU batching to scale into)."""
    v = s.values
    failed = any(v.get(f"{k}_count", 0) > 0 for k in ("oom", "engine_dead", "kv_capacity_error", "kv_no_memory",
                                                        "uncaught_exception", "stop_requested"))
    served = bool(v.get("stats_samples")) or ev.event_counts.get("request", 0) > 0
    v["never_served"] = bool(failed and not served)
    platform = str(v.get("platform") or ev.fact("device") or "").lower()
    v["cpu_backend"] = platform == "cpu" or None


@produces("context_asked_beyond_model", "context_asked_max", "context_asked_p95", "context_raise_len",
          "context_rejections")
def context_asked(ev: Evidence, s) -> None:
    """Requests refused for their length: how long they were, and the maximum context that would
    have taken them — when the model itself allows it and the KV cache holds two such requests."""
    v = s.values
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
    p95 = quantile(servable, 0.95)
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
