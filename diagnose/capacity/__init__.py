"""Capacity engine: model facts (config.json, built-in table, log) and the KV-cache / weights /
roofline arithmetic behind `diagnose capacity` ("is this the config, or the hardware's limit?")."""
from __future__ import annotations

import importlib

# Imported when first asked for (PEP 562): a log run reads the board table (boards.py) and does
# not pay for the model table and the arithmetic (~4 ms) unless a producer asks for them.
_NAMES = {".arithmetic": ("DTYPE_BYTES", "GIB", "LINKS", "CapacityError", "capacity", "dtype_bytes", "judge",
                          "kv_bytes_per_token_per_layer", "kv_heads_per_gpu"),
          ".models": ("ModelError", "ModelFacts", "from_config_dict", "from_config_json", "from_partial", "lookup",
                      "resolve", "table")}
_DOORS = {name: module for module, names in _NAMES.items() for name in names}

JSON_KEYS = (
    "weights_bytes_per_gpu", "kv_bytes_per_token_per_layer", "kv_bytes_per_token_per_gpu",
    "kv_bytes_per_sequence_per_gpu", "max_sequences", "optimal_concurrency",
    "decode_tokens_per_s_per_sequence_bound", "prefill_tokens_per_s_bound", "fits", "warnings", "assumptions",
)

__all__ = ["capacity", "dtype_bytes", "judge", "kv_bytes_per_token_per_layer", "kv_heads_per_gpu",
           "CapacityError", "ModelError", "ModelFacts", "from_config_dict", "from_config_json",
           "from_partial", "lookup", "resolve", "table", "DTYPE_BYTES", "GIB", "LINKS", "JSON_KEYS"]


def __getattr__(name: str):
    if name in _DOORS:
        return getattr(importlib.import_module(_DOORS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
