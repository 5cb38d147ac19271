"""Capacity engine: model facts (config.json, built-in table, log) and the KV-cache / weights /
roofline arithmetic behind `diagnose capacity` ("is this the config, or the hardware's limit?")."""
from __future__ import annotations

from .arithmetic import (DTYPE_BYTES, GIB, LINKS, CapacityError, capacity, dtype_bytes, judge,
                   kv_bytes_per_token_per_layer, kv_heads_per_gpu)
from .models import (ModelError, ModelFacts, from_config_dict, from_config_json, from_partial, lookup,
                     resolve, table)

JSON_KEYS = (
    "weights_bytes_per_gpu", "kv_bytes_per_token_per_layer", "kv_bytes_per_token_per_gpu",
    "kv_bytes_per_sequence_per_gpu", "max_sequences", "optimal_concurrency",
    "decode_tokens_per_s_per_sequence_bound", "prefill_tokens_per_s_bound", "fits", "warnings", "assumptions",
)

__all__ = ["capacity", "dtype_bytes", "judge", "kv_bytes_per_token_per_layer", "kv_heads_per_gpu",
           "CapacityError", "ModelError", "ModelFacts", "from_config_dict", "from_config_json",
           "from_partial", "lookup", "resolve", "table", "DTYPE_BYTES", "GIB", "LINKS", "JSON_KEYS"]
