"""Board limits of common GPUs (diagnose/data/gpus.toml), used when samples do not carry them."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from ..tomlcache import read_toml

TABLE = Path(__file__).resolve().parent.parent / "data" / "gpus.toml"


@lru_cache(maxsize=1)
def boards() -> list[dict]:
    if not TABLE.exists():
        return []
    return read_toml(TABLE).get("gpu", [])


def lookup(name: str | None) -> dict | None:
    """The first board whose `match` regex matches the name NVML / nvidia-smi / DCGM printed."""
    if not name:
        return None
    for b in boards():
        try:
            if re.search(b.get("match", "^$"), name, re.I):
                return b
        except re.error:
            continue
    return None
