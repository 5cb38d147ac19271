"""Capacity and roofline arithmetic: KV cache per token / sequence / GPU, how many sequences fit,
weights per GPU, and upper bounds on decode and prefill speed (the standard KV and roofline
arithmetic, extended to MLA, sliding windows, MoE, tensor / pipeline parallelism and the link between GPUs)."""
from __future__ import annotations

import math as _m

from .models import ModelError, ModelFacts, canonical_dtype, resolve

GIB = 2 ** 30

DTYPE_BYTES = {
    "fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0,
    "fp4": 0.5, "int4": 0.5,
    "mxfp4": 4.25 / 8,     # 4-bit values + one 8-bit scale per 32
}

# All-reduce latency and per-direction bandwidth of the link between TP ranks.
LINKS = {
    "nvlink": {"latency_s": 10e-6, "bandwidth_Bps": None, "label": "NVLink"},   # bandwidth from the board
    "pcie": {"latency_s": 25e-6, "bandwidth_Bps": 25e9, "label": "PCIe (Gen4 x16, ~25 GB/s per direction)"},
    "ib": {"latency_s": 40e-6, "bandwidth_Bps": 25e9, "label": "InfiniBand / RoCE across nodes (200 Gb/s)"},
    "tcp": {"latency_s": 150e-6, "bandwidth_Bps": 3.1e9, "label": "TCP sockets (25 GbE)"},
}

BANDWIDTH_EFFICIENCY = 0.8   # share of peak memory bandwidth decode kernels reach
COMPUTE_EFFICIENCY = 0.6     # share of dense tensor-core peak a long prefill reaches (MFU)
RESERVE_FRACTION = 0.05      # activation / CUDA-graph reserve: 5 % of GPU memory …
RESERVE_MIN_GIB = 1.5        # … or 1.5 GiB, whichever is larger
LONG_CONTEXT = 8192          # from here on long prefills contend: 2 to 4 concurrent per replica is optimal
ACT_BYTES = 2                # activations exchanged between ranks: bf16 / fp16


class CapacityError(ValueError):
    """Inputs capacity() cannot work with (unknown GPU, bad parallelism, nothing to size KV from)."""


def dtype_bytes(name: str) -> float:
    dt = canonical_dtype(name)
    if dt is None or dt not in DTYPE_BYTES:
        raise CapacityError(f"unknown dtype {name!r} (use fp32, fp16, bf16, fp8, int8, fp4, int4 or mxfp4)")
    return DTYPE_BYTES[dt]


def kv_dtype_for(model: ModelFacts, kv_dtype: str | None) -> str:
    """`auto` / None: the activation dtype, i.e. the checkpoint dtype when it is 16/32-bit, else bf16."""
    if kv_dtype in (None, "", "auto"):
        return model.dtype if model.dtype in ("fp32", "fp16", "bf16") else "bf16"
    dt = canonical_dtype(kv_dtype)
    if dt is None or dt not in DTYPE_BYTES:
        raise CapacityError(f"unknown KV dtype {kv_dtype!r} (use auto, fp32, fp16, bf16, fp8, int8 or fp4)")
    return dt


def kv_bytes_per_token_per_layer(model: ModelFacts, kv_bytes: float) -> float:
    """Whole model, one layer: GQA/MQA 2 x kv_heads x head_dim x b (= 2 x (H x r) x b with r = kv_heads / heads
    when head_dim = H / heads); MLA one latent (kv_lora_rank + rope dims) x b, no factor 2."""
    if model.is_mla:
        return (model.mla_kv_lora_rank + (model.mla_rope_head_dim or 0)) * kv_bytes
    return 2 * model.num_kv_heads * model.head_dim * kv_bytes


def kv_heads_per_gpu(model: ModelFacts, tp: int) -> float:
    """KV heads one TP rank holds: split when kv_heads >= TP, else replicated (one head per rank)."""
    if tp <= 1:
        return model.num_kv_heads
    if model.num_kv_heads >= tp:
        return _m.ceil(model.num_kv_heads / tp)
    return 1


def _avg_attended(context: int, window: int | None) -> float:
    """Mean number of earlier tokens a prompt token attends to (causal): S/2, or about W past the window."""
    if not window or context <= window:
        return context / 2
    return (window * window / 2 + (context - window) * window) / context


def capacity(model, gpu, tp: int = 1, pp: int = 1, dp: int = 1, context: int = 4096,
             kv_dtype: str | None = "auto", weight_dtype: str | None = None,
             gpu_memory_utilization: float = 0.9, kv_memory_gib: float | None = None,
             link: str | None = None, bandwidth_efficiency: float = BANDWIDTH_EFFICIENCY,
             compute_efficiency: float = COMPUTE_EFFICIENCY) -> dict:
    """Capacity of one deployment: `model` is ModelFacts or a name, `gpu` a gpus.toml row or a name.

    Returns weights_bytes_per_gpu, kv_bytes_per_token_per_layer, kv_bytes_per_token_per_gpu,
    kv_bytes_per_sequence_per_gpu, max_sequences, optimal_concurrency [stable, exploratory],
    decode_tokens_per_s_per_sequence_bound, prefill_tokens_per_s_bound, fits, warnings, assumptions."""
    if isinstance(model, str):
        model = resolve(name=model)
    no_board = gpu is None and kv_memory_gib is not None
    if no_board:            # the KV arithmetic needs no board; the speed bounds and the fit do
        gpu = {}
    elif isinstance(gpu, str) or gpu is None:
        from diagnose.capacity.boards import lookup as board_lookup
        name = gpu
        gpu = board_lookup(gpu)
        if gpu is None:
            raise CapacityError(f"unknown GPU {name!r}: not in diagnose/data/gpus.toml "
                                "(try a name like H100, A100 80GB, L40S, GB10)")
    for label, v in (("--tp", tp), ("--pp", pp), ("--dp", dp), ("--context", context)):
        if not isinstance(v, int) or v < 1:
            raise CapacityError(f"{label} must be a positive integer, got {v!r}")
    if not 0 < gpu_memory_utilization <= 1:
        raise CapacityError(f"--gpu-memory-utilization must be in (0, 1], got {gpu_memory_utilization}")
    if kv_memory_gib is not None and kv_memory_gib <= 0:
        raise CapacityError(f"--kv-memory must be positive, got {kv_memory_gib}")

    warnings: list[str] = []
    assumptions: list[str] = []
    L = model.layers

    # ---- KV cache
    kv_dt = kv_dtype_for(model, kv_dtype)
    b_kv = DTYPE_BYTES[kv_dt]
    per_layer = kv_bytes_per_token_per_layer(model, b_kv)
    if model.is_mla:
        per_layer_gpu = per_layer
        assumptions.append(f"MLA: one latent of {model.mla_kv_lora_rank} + {model.mla_rope_head_dim or 0} values "
                           f"per token per layer ({per_layer:g} B at {kv_dt}), kept whole on every TP rank "
                           "(vLLM / SGLang replicate the latent across TP)")
    else:
        heads_gpu = kv_heads_per_gpu(model, tp)
        per_layer_gpu = 2 * heads_gpu * model.head_dim * b_kv
        assumptions.append(f"KV per token per layer = 2 x {model.num_kv_heads} KV heads x {model.head_dim} "
                           f"head_dim x {b_kv:g} B ({kv_dt}) = {per_layer:g} B for the whole model")
        if tp > 1 and model.num_kv_heads >= tp:
            assumptions.append(f"TP={tp} splits the KV heads: {heads_gpu:g} per GPU")
            if model.num_kv_heads % tp:
                warnings.append(f"{model.num_kv_heads} KV heads do not divide by TP={tp}; counted "
                                f"{heads_gpu} per GPU (engines usually refuse this)")
        elif tp > 1:
            warnings.append(f"only {model.num_kv_heads} KV heads for TP={tp}: each GPU keeps a full copy of one "
                            f"KV head, so {tp // model.num_kv_heads}x the KV memory of a split")
    layers_gpu = _m.ceil(L / pp)
    if L % pp:
        assumptions.append(f"{L} layers over PP={pp} stages: the busiest stage holds {layers_gpu}")
    sliding_gpu = model.sliding_window_layers * layers_gpu / L if model.sliding_window else 0.0
    full_gpu = layers_gpu - sliding_gpu
    kv_token_gpu = per_layer_gpu * layers_gpu
    win = min(context, model.sliding_window) if model.sliding_window else context
    kv_seq_gpu = per_layer_gpu * (full_gpu * context + sliding_gpu * win)
    if model.sliding_window_layers:
        assumptions.append(f"{model.sliding_window_layers} of {L} layers use a {model.sliding_window}-token "
                           f"sliding window and hold min(context, window) = {win} tokens (vLLM hybrid KV manager, "
                           "SGLang SWA pool; an engine without it keeps the full context on every layer)")
    if model.max_position_embeddings and context > model.max_position_embeddings:
        warnings.append(f"context {context:,} is longer than the model's max_position_embeddings "
                        f"{model.max_position_embeddings:,}")

    # ---- weights
    w_dt = canonical_dtype(weight_dtype) if weight_dtype else model.dtype
    if w_dt is None or w_dt not in DTYPE_BYTES:
        raise CapacityError(f"unknown weight dtype {weight_dtype!r} (use fp32, fp16, bf16, fp8, int8, fp4, int4 or mxfp4)")
    b_w = DTYPE_BYTES[w_dt]
    weights_total = active_total = None
    if model.params_b:
        if model.checkpoint_gb and w_dt == model.dtype:
            weights_total = model.checkpoint_gb * 1e9
            assumptions.append(f"weights: the {model.checkpoint_gb:g} GB checkpoint (mixed precision, {w_dt})")
        else:
            weights_total = model.params_b * 1e9 * b_w
            assumptions.append(f"weights: {model.params_b:g}B params x {b_w:g} B ({w_dt})"
                               + (" — quantisation scales add a few %" if b_w < 1 else ""))
        active_total = weights_total * (model.active_params_b or model.params_b) / model.params_b
    weights_gpu = weights_total / (tp * pp) if weights_total is not None else None
    active_gpu = active_total / (tp * pp) if active_total is not None else None

    # ---- memory budget
    mem = float(gpu.get("memory_gib", 0)) * GIB
    reserve = max(RESERVE_FRACTION * mem, RESERVE_MIN_GIB * GIB)
    if kv_memory_gib is not None:
        budget = kv_memory_gib * GIB
        assumptions.append(f"KV budget per GPU: {kv_memory_gib:g} GiB (--kv-memory)")
        if weights_gpu is not None and weights_gpu + budget > mem and not no_board:
            warnings.append(f"weights ({weights_gpu / GIB:.1f} GiB per GPU) plus the --kv-memory budget "
                            f"({kv_memory_gib:g} GiB) exceed the GPU's {mem / GIB:g} GiB")
    elif weights_gpu is None:
        raise CapacityError(f"the parameter count of {model.name} is unknown (config.json without "
                            "intermediate_size?), so the KV budget cannot be derived: pass --kv-memory GIB")
    else:
        budget = mem * gpu_memory_utilization - weights_gpu - reserve
        assumptions.append(f"KV budget per GPU = {mem / GIB:g} GiB x {gpu_memory_utilization:g} - weights "
                           f"{weights_gpu / GIB:.2f} GiB - activation / CUDA-graph reserve {reserve / GIB:.2f} GiB "
                           f"(max of {RESERVE_FRACTION:.0%} of GPU memory and {RESERVE_MIN_GIB:g} GiB) "
                           f"= {budget / GIB:.2f} GiB")
    if gpu.get("unified_memory"):
        assumptions.append(f"{gpu.get('name')}: unified memory shared with the CPU and OS; the GPU usually sees "
                           "a few GiB less than the nominal size")
    max_seq = max(0.0, budget / kv_seq_gpu) if kv_seq_gpu else 0.0
    weights_fit = weights_gpu is None or no_board or (
        weights_gpu <= mem if kv_memory_gib is not None else weights_gpu + reserve <= mem * gpu_memory_utilization)
    if no_board:
        assumptions.append("no --gpu: the KV arithmetic only; whether the weights fit and the decode / prefill "
                           "speed bounds need the board (--gpu NAME adds them)")
    if not weights_fit:
        warnings.append(f"the model does not fit: weights need {weights_gpu / GIB:.1f} GiB per GPU "
                        f"(TP={tp} x PP={pp}), the GPU has {mem / GIB:g} GiB"
                        + ("" if kv_memory_gib is not None else
                           f" ({mem * gpu_memory_utilization / GIB:.1f} GiB at --gpu-memory-utilization "
                           f"{gpu_memory_utilization:g}, less {reserve / GIB:.1f} GiB reserve)")
                        + "; raise TP / PP or quantise the weights")
    elif max_seq < 1:
        warnings.append(f"one {context:,}-token sequence needs {kv_seq_gpu / GIB:.2f} GiB of KV per GPU, the KV "
                        f"budget is {max(budget, 0) / GIB:.2f} GiB: not even one full-length sequence fits "
                        "(shorten the context, use fp8 KV, or add GPUs)")
    fits = weights_fit and max_seq >= 1
    if weights_gpu is None:
        warnings.append(f"weights per GPU unknown (no parameter count for {model.name}): `fits` only checks "
                        "the KV budget, and the decode / prefill bounds are not computed")
    assumptions.append(f"max sequences = KV budget / KV per sequence, per replica ({dp} replica(s): "
                       f"{_m.floor(max_seq) * dp} sequences in all); block rounding and prefix sharing ignored")

    # ---- roofline: decode
    bw = float(gpu.get("bandwidth_gbs", 0)) * 1e9
    link_name, link_lat, link_bw = _link(gpu, tp, pp, link, warnings)
    decode = None
    if not weights_fit:
        assumptions.append("decode / prefill bounds not computed: the weights do not fit")
    if active_gpu is not None and bw > 0 and weights_fit:
        t_mem = pp * (active_gpu + kv_seq_gpu) / (bw * bandwidth_efficiency)
        t_tp = 0.0
        if tp > 1:
            per_ar = link_lat + 2 * (tp - 1) / tp * model.hidden_size * ACT_BYTES / link_bw
            t_tp = 2 * L * per_ar
        t_pp = (pp - 1) * (link_lat + model.hidden_size * ACT_BYTES / link_bw) if pp > 1 else 0.0
        decode = 1.0 / (t_mem + t_tp + t_pp)
        assumptions.append(
            f"decode bound (one sequence at {context:,} tokens): reads the "
            + ("active " if model.is_moe else "") + f"weights ({active_gpu / GIB:.2f} GiB) and its KV "
            f"({kv_seq_gpu / GIB:.2f} GiB) per GPU each step at {bandwidth_efficiency:.0%} of "
            f"{bw / 1e9:g} GB/s = {t_mem * 1e3:.1f} ms"
            + (f" (x{pp}: pipeline stages run one after another for a single sequence)" if pp > 1 else "")
            + (f", + 2 all-reduces x {L} layers x ({link_lat * 1e6:g} µs + {model.hidden_size}x{ACT_BYTES} B ring "
               f"over {link_bw / 1e9:g} GB/s) = {t_tp * 1e3:.2f} ms on {link_name}" if tp > 1 else "")
            + (f", + {pp - 1} stage hand-offs = {t_pp * 1e3:.2f} ms" if pp > 1 else "")
            + f"; peak (100 %) bandwidth would give "
              f"{1.0 / (t_mem * bandwidth_efficiency + t_tp + t_pp):.2f} tok/s")

    # ---- roofline: prefill
    prefill = None
    flops, flops_label = _flops(gpu, w_dt)
    if model.active_params_b and flops > 0 and weights_fit:
        if model.is_mla:
            qk = (model.mla_qk_nope_head_dim or model.head_dim) + (model.mla_rope_head_dim or 0)
            v = model.mla_v_head_dim or model.head_dim
        else:
            qk = v = model.head_dim
        attn_width = model.num_attention_heads * (qk + v)           # = 2 x hidden for standard attention
        attended = (model.full_attention_layers * context / 2
                    + model.sliding_window_layers * _avg_attended(context, model.sliding_window))
        attn_flops = 2 * attn_width * attended                      # = 4 x L x hidden x S/2 when standard
        linear_flops = 2 * model.active_params_b * 1e9
        per_token = linear_flops + attn_flops
        prefill = tp * pp * flops * compute_efficiency / per_token
        assumptions.append(
            f"prefill bound: {tp * pp} GPU(s) x {flops / 1e12:g} TFLOP/s dense {flops_label} x "
            f"{compute_efficiency:.0%} / ({linear_flops / 1e9:.1f} GFLOP linear + {attn_flops / 1e9:.1f} GFLOP "
            f"attention per token at {context:,} tokens); communication and pipeline bubbles not counted")

    # ---- recommended concurrency
    mem_total = _m.floor(max_seq) * dp
    if context >= LONG_CONTEXT:
        stable, explore = min(2 * dp, mem_total), min(4 * dp, mem_total)
        assumptions.append(f"optimal concurrency for long contexts (>= {LONG_CONTEXT:,} tokens): 2 x replicas "
                           f"(stable) to 4 x replicas (exploratory), capped by the memory bound {mem_total} "
                           "(each long prefill holds the GPU for its whole length: beyond 4 x replicas they only slow each other down)")
    else:
        ridge = None
        if bw > 0 and flops > 0:
            ridge = max(1, _m.floor(flops * b_w / (2 * bw)))
        stable = min(mem_total, ridge * dp) if ridge else mem_total
        explore = mem_total
        assumptions.append(
            f"optimal concurrency for short contexts: decode stays memory-bound up to about "
            f"{ridge if ridge else '?'} sequences per replica (peak FLOP/s x weight bytes / (2 x bandwidth)); "
            f"stable = min(that, memory bound {mem_total}), exploratory = memory bound")

    return {
        "weights_bytes_per_gpu": int(round(weights_gpu)) if weights_gpu is not None else None,
        "kv_bytes_per_token_per_layer": _num(per_layer),
        "kv_bytes_per_token_per_gpu": _num(kv_token_gpu),
        "kv_bytes_per_sequence_per_gpu": _num(kv_seq_gpu),
        "max_sequences": round(max_seq, 2),
        "optimal_concurrency": [int(stable), int(explore)],
        "decode_tokens_per_s_per_sequence_bound": round(decode, 3) if decode is not None else None,
        "prefill_tokens_per_s_bound": round(prefill, 1) if prefill is not None else None,
        "fits": None if no_board else bool(fits),        # unknown without the board
        "warnings": warnings,
        "assumptions": assumptions,
    }


def _num(x: float):
    return int(x) if float(x).is_integer() else round(x, 1)


def _link(gpu: dict, tp: int, pp: int, link: str | None, warnings: list[str]) -> tuple[str, float, float]:
    nvlink = float(gpu.get("nvlink_gbs", 0) or 0)
    if link is None:
        link = "nvlink" if nvlink > 0 else "pcie"
    link = link.lower()
    if link not in LINKS:
        raise CapacityError(f"unknown link {link!r} (use nvlink, pcie, ib or tcp)")
    spec = LINKS[link]
    if link == "nvlink":
        if nvlink <= 0:
            if tp > 1 or pp > 1:
                warnings.append(f"{gpu.get('name')} has no NVLink; counted the link as PCIe")
            spec = LINKS["pcie"]
            return spec["label"], spec["latency_s"], spec["bandwidth_Bps"]
        return f"NVLink ({nvlink / 2:g} GB/s per direction)", spec["latency_s"], nvlink / 2 * 1e9
    return spec["label"], spec["latency_s"], spec["bandwidth_Bps"]


def _flops(gpu: dict, weight_dtype: str) -> tuple[float, str]:
    bf16 = float(gpu.get("bf16_tflops", 0) or 0)
    fp16 = float(gpu.get("fp16_tflops", 0) or 0)
    fp8 = float(gpu.get("fp8_tflops", 0) or 0)
    if weight_dtype in ("fp8",) and fp8 > 0:
        return fp8 * 1e12, "FP8"
    if bf16 > 0:
        return bf16 * 1e12, "BF16"
    return fp16 * 1e12, "FP16"


def link_latencies() -> dict[str, float]:
    return {k: v["latency_s"] for k, v in LINKS.items()}


def judge(measured_tokens_per_s: float, bound_tokens_per_s: float) -> tuple[float, str]:
    """Measured / estimated: >= 0.7 'at the hardware's limit', 0.3-0.7 'below', < 0.3 'far below'."""
    if not bound_tokens_per_s:
        raise CapacityError("no bound to compare with")
    r = measured_tokens_per_s / bound_tokens_per_s
    if r >= 0.7:
        return r, "at the hardware's limit"
    if r >= 0.3:
        return r, "below the hardware's limit"
    return r, "far below the hardware's limit"


__all__ = ["capacity", "dtype_bytes", "kv_bytes_per_token_per_layer", "kv_heads_per_gpu", "judge",
           "CapacityError", "ModelError", "DTYPE_BYTES", "LINKS", "GIB"]
