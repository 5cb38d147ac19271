"""Model facts for capacity arithmetic: from a Hugging Face config.json, the built-in table
(diagnose/data/models.toml) by name, or partial facts a log gave (merged over the table)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from pathlib import Path

from ..tomlcache import read_toml

TABLE = Path(__file__).resolve().parent.parent / "data" / "models.toml"


class ModelError(ValueError):
    """A model that cannot be resolved (unknown name, unreadable or unusable config.json)."""


@dataclass
class ModelFacts:
    name: str
    layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    params_b: float | None = None            # total, billions
    active_params_b: float | None = None     # per token (MoE); = params_b for dense
    intermediate_size: int | None = None
    moe_intermediate_size: int | None = None
    vocab_size: int | None = None
    max_position_embeddings: int | None = None
    mla_kv_lora_rank: int | None = None      # MLA (DeepSeek): cached latent = kv_lora_rank + rope dims
    mla_rope_head_dim: int | None = None
    mla_qk_nope_head_dim: int | None = None
    mla_v_head_dim: int | None = None
    sliding_window: int | None = None
    sliding_window_layers: int = 0           # how many of `layers` use the window
    num_experts: int | None = None
    experts_per_token: int | None = None
    dtype: str = "bf16"                      # weight dtype of the checkpoint (bf16, fp8, mxfp4, int4 ...)
    checkpoint_gb: float | None = None       # measured checkpoint size where precisions are mixed
    source: str = ""                         # where the facts came from
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def is_mla(self) -> bool:
        return bool(self.mla_kv_lora_rank)

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts and self.experts_per_token)

    @property
    def full_attention_layers(self) -> int:
        return self.layers - self.sliding_window_layers


# ---------------------------------------------------------------- dtype names

_DTYPE_ALIASES = {
    "float32": "fp32", "fp32": "fp32", "f32": "fp32",
    "float16": "fp16", "fp16": "fp16", "half": "fp16", "f16": "fp16",
    "bfloat16": "bf16", "bf16": "bf16",
    "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "fp8_e4m3fn": "fp8", "float8": "fp8", "float8_e4m3fn": "fp8",
    "int8": "int8", "w8a8": "int8",
    "fp4": "fp4", "nvfp4": "fp4", "mxfp4": "mxfp4", "int4": "int4", "awq": "int4", "gptq": "int4", "w4a16": "int4",
}


def canonical_dtype(name: str | None) -> str | None:
    if name is None:
        return None
    key = str(name).strip().lower().replace("torch.", "").replace("-", "_")
    return _DTYPE_ALIASES.get(key, _DTYPE_ALIASES.get(key.replace("_", "")))


_NAME_HINTS = [  # quantisation spelled in a checkpoint / served name
    (r"nvfp4|(?<![a-z])fp4", "fp4"), (r"mxfp4", "mxfp4"),
    (r"(?<![a-z])fp8|w8a8[-_]?fp8", "fp8"),
    (r"(?<![a-z])awq|gptq|(?<![a-z])int4|w4a16|(?<![a-z])4[-_]?bit|bnb[-_]?4", "int4"),
    (r"(?<![a-z])int8|w8a8|8[-_]?bit", "int8"),
]


def dtype_hint(name: str) -> str | None:
    """The weight dtype a name spells ("...-FP8", "...-AWQ", "...-GPTQ-Int4"), if any."""
    low = name.lower()
    for pat, dt in _NAME_HINTS:
        if re.search(pat, low):
            return dt
    return None


# ---------------------------------------------------------------- sliding-window layer counts

def sliding_count(spec, layers: int) -> int:
    """Layers using the window, from a count or a pattern: "all", "alternate", "L:G" (L local then G global)."""
    if spec is None or spec is False:
        return 0
    if isinstance(spec, bool):
        return layers
    if isinstance(spec, int):
        return max(0, min(spec, layers))
    s = str(spec).strip().lower()
    if s in ("all", "every"):
        return layers
    if s in ("alternate", "alternating", "even"):
        return (layers + 1) // 2
    m = re.fullmatch(r"(\d+)\s*:\s*(\d+)", s)
    if m:
        local, glob = int(m.group(1)), int(m.group(2))
        period = local + glob
        full, rest = divmod(layers, period)
        return full * local + min(rest, local)
    if s.isdigit():
        return max(0, min(int(s), layers))
    raise ModelError(f"sliding_window_layers: not a count or pattern: {spec!r}")


# ---------------------------------------------------------------- the table

@lru_cache(maxsize=1)
def table() -> list[dict]:
    if not TABLE.exists():
        return []
    return read_toml(TABLE).get("model", [])


def _from_row(row: dict, name: str | None = None) -> ModelFacts:
    layers = int(row["layers"])
    notes = [row["notes"]] if row.get("notes") else []
    dtype = canonical_dtype(row.get("dtype")) or "bf16"
    return ModelFacts(
        name=row["name"], layers=layers, hidden_size=int(row["hidden_size"]),
        num_attention_heads=int(row["num_attention_heads"]), num_kv_heads=int(row["num_kv_heads"]),
        head_dim=int(row["head_dim"]), params_b=row.get("params_b"),
        active_params_b=row.get("active_params_b", row.get("params_b")),
        intermediate_size=row.get("intermediate_size"), moe_intermediate_size=row.get("moe_intermediate_size"),
        vocab_size=row.get("vocab_size"), max_position_embeddings=row.get("max_position_embeddings"),
        mla_kv_lora_rank=row.get("mla_kv_lora_rank"), mla_rope_head_dim=row.get("mla_rope_head_dim"),
        mla_qk_nope_head_dim=row.get("mla_qk_nope_head_dim"), mla_v_head_dim=row.get("mla_v_head_dim"),
        sliding_window=row.get("sliding_window"),
        sliding_window_layers=sliding_count(row.get("sliding_window_layers"), layers) if row.get("sliding_window") else 0,
        num_experts=row.get("num_experts"), experts_per_token=row.get("experts_per_token"),
        dtype=dtype, checkpoint_gb=row.get("checkpoint_gb"),
        source=f"built-in table ({row['name']})" + (f" for {name!r}" if name and name != row["name"] else ""),
        sources=list(row.get("sources", [])), notes=notes)


def lookup(name: str | None) -> ModelFacts | None:
    """The first table entry whose `match` regex matches a HF id or served name; None if none.

    A quantisation spelled in the name (-FP8, -AWQ, -GPTQ-Int4, -NVFP4) sets the weight dtype."""
    if not name:
        return None
    for row in table():
        try:
            if re.search(row.get("match", "^$"), name, re.I):
                facts = _from_row(row, name)
                hint = dtype_hint(name)
                if hint and hint != facts.dtype:
                    facts.notes.append(f"weight dtype {hint} taken from the name {name!r}")
                    facts = replace(facts, dtype=hint, checkpoint_gb=None)
                return facts
        except re.error:
            continue
    return None


# ---------------------------------------------------------------- config.json

def _first(cfg: dict, *keys, default=None):
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


def _config_dtype(cfg: dict, top: dict) -> tuple[str, list[str]]:
    notes: list[str] = []
    q = top.get("quantization_config") or cfg.get("quantization_config") or {}
    if isinstance(q, dict) and q:
        method = str(q.get("quant_method", "")).lower()
        bits = q.get("bits") or q.get("w_bit")
        if method in ("fp8", "fbgemm_fp8"):
            return "fp8", notes
        if method == "mxfp4":
            return "mxfp4", notes
        if method in ("awq", "gptq", "autoround", "auto-round") or bits in (4, "4"):
            return ("int8" if bits in (8, "8") else "int4"), notes
        if method == "bitsandbytes":
            return ("int4" if q.get("load_in_4bit") else "int8"), notes
        if method in ("compressed-tensors", "modelopt"):
            text = json.dumps(q).lower()
            if "nvfp4" in text or '"num_bits": 4' in text and '"type": "float"' in text:
                return "fp4", notes
            if '"num_bits": 4' in text:
                return "int4", notes
            if "fp8" in text or '"type": "float"' in text:
                return "fp8", notes
            if '"num_bits": 8' in text:
                return "int8", notes
        notes.append(f"quantization_config {method or '?'} not recognised; weights counted at the config dtype")
    dt = canonical_dtype(_first(cfg, "torch_dtype", "dtype") or _first(top, "torch_dtype", "dtype"))
    return dt or "bf16", notes


def _sliding_from_config(cfg: dict, layers: int) -> tuple[int | None, int]:
    window = cfg.get("sliding_window")
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        n = sum(1 for t in types if "sliding" in str(t).lower())
        return (window if n else None), n
    if not window:
        return None, 0
    mt = str(cfg.get("model_type", "")).lower()
    if cfg.get("use_sliding_window") is False:       # Qwen2 / Qwen2.5 carry an unused window
        return None, 0
    if cfg.get("use_sliding_window") is True:        # Qwen2: layers from max_window_layers on slide
        return window, max(0, layers - int(cfg.get("max_window_layers", layers)))
    pattern = cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern")
    if pattern:
        p = int(pattern)
        return window, layers - layers // p            # layer i global when (i+1) % p == 0
    if mt.startswith("gemma3"):
        return window, layers - layers // 6
    if mt.startswith("gemma2") or mt == "gpt_oss":
        return window, (layers + 1) // 2
    return window, layers                               # Mistral v0.1 style: every layer


def estimate_params(f: ModelFacts, tied: bool | None = None, shared_experts: int = 0,
                    shared_intermediate: int | None = None, dense_layers: int = 0,
                    q_lora_rank: int | None = None) -> tuple[float | None, float | None]:
    """Total and active parameters (billions) from the shape; (None, None) without intermediate_size.

    Counts embeddings (x2 when untied), attention projections, gated (3-matrix) MLPs / experts
    and routers; ignores biases and norms (< 0.1 %) and any vision encoder."""
    h, L = f.hidden_size, f.layers
    inter = f.intermediate_size
    moe_inter = f.moe_intermediate_size or (inter if f.is_moe else None)
    if (inter is None and not f.is_moe) or (f.is_moe and moe_inter is None):
        return None, None
    emb = (f.vocab_size or 0) * h * (1 if tied else 2)
    if f.is_mla:
        nope, rope = f.mla_qk_nope_head_dim or f.head_dim, f.mla_rope_head_dim or 0
        v = f.mla_v_head_dim or f.head_dim
        nh = f.num_attention_heads
        q = (h * q_lora_rank + q_lora_rank * nh * (nope + rope)) if q_lora_rank else h * nh * (nope + rope)
        attn = q + h * (f.mla_kv_lora_rank + rope) + f.mla_kv_lora_rank * nh * (nope + v) + nh * v * h
    else:
        qd = f.num_attention_heads * f.head_dim
        kvd = f.num_kv_heads * f.head_dim
        attn = 2 * h * qd + 2 * h * kvd
    total = active = emb + L * attn
    if f.is_moe:
        moe_layers = L - dense_layers
        expert = 3 * h * moe_inter
        shared = 3 * h * (shared_intermediate or moe_inter) * shared_experts if shared_experts else 0
        dense = 3 * h * (inter or 0) * dense_layers
        total += moe_layers * (f.num_experts * expert + shared + h * f.num_experts) + dense
        active += moe_layers * (f.experts_per_token * expert + shared + h * f.num_experts) + dense
    else:
        total += L * 3 * h * inter
        active = total
    return round(total / 1e9, 3), round(active / 1e9, 3)


def _vision_params(vc, text_hidden: int) -> float:
    """Rough size of a ViT encoder from vision_config: blocks (4 h^2 attention + MLP) and the projector."""
    if not isinstance(vc, dict):
        return 0.0
    depth = _first(vc, "depth", "num_hidden_layers")
    h = _first(vc, "hidden_size", "embed_dim")
    inter = _first(vc, "intermediate_size")
    if not (depth and h and inter):
        return 0.0
    mats = 2 if "gelu" in str(vc.get("hidden_act", "gelu")).lower() else 3
    blocks = int(depth) * (4 * h * h + mats * h * inter)
    m = int(vc.get("spatial_merge_size", 0) or 0)
    out = int(vc.get("out_hidden_size", text_hidden) or text_hidden)
    proj = ((m * m * h) ** 2 + m * m * h * out) if m else h * text_hidden
    return float(blocks + proj)


def from_config_dict(top: dict, label: str = "config.json") -> ModelFacts:
    if not isinstance(top, dict):
        raise ModelError(f"{label}: not a JSON object")
    cfg = top.get("text_config") if isinstance(top.get("text_config"), dict) else top
    # Qwen2.5-VL-style flat configs and VL configs both end up here; text_config wins when present.
    layers = _first(cfg, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _first(cfg, "hidden_size", "n_embd", "d_model")
    heads = _first(cfg, "num_attention_heads", "n_head")
    missing = [k for k, v in (("num_hidden_layers", layers), ("hidden_size", hidden),
                              ("num_attention_heads", heads)) if v is None]
    if missing:
        raise ModelError(f"{label}: missing {', '.join(missing)} (is this a Hugging Face config.json?)")
    try:
        layers, hidden, heads = int(layers), int(hidden), int(heads)
    except (TypeError, ValueError):
        raise ModelError(f"{label}: num_hidden_layers / hidden_size / num_attention_heads must be integers")
    if layers <= 0 or hidden <= 0 or heads <= 0:
        raise ModelError(f"{label}: num_hidden_layers, hidden_size and num_attention_heads must be positive")
    kv = int(_first(cfg, "num_key_value_heads", "num_kv_heads", "multi_query_group_num", default=heads))
    head_dim = int(_first(cfg, "head_dim", default=hidden // heads) or hidden // heads)
    notes: list[str] = []
    dtype, dnotes = _config_dtype(cfg, top)
    notes += dnotes
    n_exp = _first(cfg, "num_local_experts", "num_experts", "n_routed_experts")
    k_exp = _first(cfg, "num_experts_per_tok", "experts_per_token", "moe_topk")
    window, n_sliding = _sliding_from_config(cfg, layers)
    name = str(_first(top, "_name_or_path", default="") or "") or label
    f = ModelFacts(
        name=name, layers=layers, hidden_size=hidden, num_attention_heads=heads, num_kv_heads=kv,
        head_dim=head_dim, intermediate_size=cfg.get("intermediate_size"),
        moe_intermediate_size=cfg.get("moe_intermediate_size"), vocab_size=cfg.get("vocab_size"),
        max_position_embeddings=cfg.get("max_position_embeddings"),
        mla_kv_lora_rank=cfg.get("kv_lora_rank"),
        mla_rope_head_dim=cfg.get("qk_rope_head_dim") if cfg.get("kv_lora_rank") else None,
        mla_qk_nope_head_dim=cfg.get("qk_nope_head_dim") if cfg.get("kv_lora_rank") else None,
        mla_v_head_dim=cfg.get("v_head_dim") if cfg.get("kv_lora_rank") else None,
        sliding_window=window, sliding_window_layers=n_sliding,
        num_experts=int(n_exp) if n_exp and k_exp else None,
        experts_per_token=int(k_exp) if n_exp and k_exp else None,
        dtype=dtype, source=label, notes=notes)
    tied = _first(cfg, "tie_word_embeddings", default=top.get("tie_word_embeddings"))
    if tied is None:
        tied = True                    # transformers' PretrainedConfig default when config.json omits it
    if f.vocab_size is None:
        notes.append("config.json has no vocab_size: embeddings not counted in the parameter estimate")
    total, active = estimate_params(
        f, tied=bool(tied), shared_experts=int(_first(cfg, "n_shared_experts", default=0) or 0)
        or (1 if cfg.get("shared_expert_intermediate_size") else 0),
        shared_intermediate=cfg.get("shared_expert_intermediate_size"),
        dense_layers=int(cfg.get("first_k_dense_replace", 0) or 0), q_lora_rank=cfg.get("q_lora_rank"))
    vision = _vision_params(top.get("vision_config"), hidden) if total is not None else 0.0
    if total is None:
        notes.append("config.json has no intermediate_size: parameter count unknown, so weights per GPU, "
                     "the derived KV budget and the decode / prefill bounds cannot be computed")
    else:
        text_total = total
        total = round(total + vision / 1e9, 3)
        notes.append(f"parameters estimated from the shape: {text_total:g}B language model"
                     + (f" + {vision / 1e9:.2f}B vision encoder (in the weights, not in per-token reads)"
                        if vision else "")
                     + (f", {active:g}B active per token" if f.is_moe or vision else "")
                     + " (embeddings, attention, gated MLP / experts, routers; biases and norms left out)")
    f.params_b, f.active_params_b = total, active
    if total is not None and dtype == "mxfp4" and f.is_moe:
        # gpt-oss: only the expert MLPs are MXFP4 (4.25 bits); attention, router, embeddings stay BF16.
        moe_inter = f.moe_intermediate_size or f.intermediate_size
        experts = (layers - int(cfg.get("first_k_dense_replace", 0) or 0)) * f.num_experts * 3 * hidden * moe_inter
        f.checkpoint_gb = round((experts * 4.25 / 8 + (total * 1e9 - experts) * 2) / 1e9, 2)
        notes.append(f"MXFP4 experts + BF16 rest: about {f.checkpoint_gb:g} GB of weights")
    return f


def from_config_json(path: str | Path) -> ModelFacts:
    """Facts from a Hugging Face config.json (standard, MLA, sliding window, MoE, VL text_config)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ModelError(f"{path}: cannot read ({e.strerror or e})")
    try:
        top = json.loads(text)
    except json.JSONDecodeError as e:
        raise ModelError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})")
    return from_config_dict(top, label=str(path))


_LOG_KEYS = {  # names a log (or a caller) may use -> ModelFacts field
    "num_hidden_layers": "layers", "layers": "layers", "num_layers": "layers",
    "hidden_size": "hidden_size", "num_attention_heads": "num_attention_heads",
    "num_key_value_heads": "num_kv_heads", "num_kv_heads": "num_kv_heads", "head_dim": "head_dim",
    "dtype": "dtype", "torch_dtype": "dtype", "quantization": "dtype",
    "max_model_len": None, "params_b": "params_b", "active_params_b": "active_params_b",
    "kv_lora_rank": "mla_kv_lora_rank", "qk_rope_head_dim": "mla_rope_head_dim",
    "sliding_window": "sliding_window",
}


def from_partial(facts: dict, name: str | None = None) -> ModelFacts | None:
    """Facts a log gave (model name, dtype, quantization, layer count …) merged over the table entry
    for `name`; None when neither the table nor the partial facts give a full shape."""
    base = lookup(name) if name else None
    updates: dict = {}
    for k, v in facts.items():
        fld = _LOG_KEYS.get(k, k if k in {f.name for f in fields(ModelFacts)} else None)
        if fld is None or v is None:
            continue
        if fld == "dtype":
            v = canonical_dtype(v) or (base.dtype if base else "bf16")
        updates[fld] = v
    if base is None:
        need = ("layers", "hidden_size", "num_attention_heads")
        if not all(k in updates for k in need):
            return None
        heads = int(updates["num_attention_heads"])
        updates.setdefault("num_kv_heads", heads)
        updates.setdefault("head_dim", int(updates["hidden_size"]) // heads)
        return ModelFacts(name=name or "model from log", source="log", **updates)
    changed = {k: v for k, v in updates.items() if getattr(base, k) != v}
    if not changed:
        return base
    if "dtype" in changed:
        changed["checkpoint_gb"] = None
    out = replace(base, **changed)
    out.notes = base.notes + [f"from the log: {', '.join(f'{k}={v}' for k, v in changed.items())}"]
    out.source = base.source + " + log"
    return out


def resolve(name: str | None = None, config: str | Path | None = None) -> ModelFacts:
    """--model-config wins over --model; an unknown name is an error."""
    if config:
        return from_config_json(config)
    if not name:
        raise ModelError("give --model NAME or --model-config config.json")
    f = lookup(name)
    if f is None:
        raise ModelError(f"unknown model {name!r}: not in the built-in table (diagnose/data/models.toml); "
                         "pass its config.json with --model-config")
    return f
