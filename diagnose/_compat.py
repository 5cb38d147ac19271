"""What differs between the Python versions diagnose supports (3.10 →): one place, so the rest of the
code is written for the newest."""
from __future__ import annotations

import sys

__all__ = ["fromisoformat", "tomllib"]


def __getattr__(name: str):
    # `_compat.tomllib`, imported when first used (PEP 562): a run whose TOML files are all in the
    # cache (tomlcache.py) parses none, and the parser costs ~4 ms to import.
    if name == "tomllib":
        if sys.version_info >= (3, 11):
            import tomllib
        else:                           # Python 3.10: the same module, from PyPI (a declared dependency)
            import tomli as tomllib
        globals()["tomllib"] = tomllib
        return tomllib
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def fromisoformat(text: str):
    """`datetime.fromisoformat` as Python 3.11 reads it, on 3.10 too: 3.10 refuses a `Z` suffix
    (`2026-11-24T05:18:21Z`, what users and Prometheus write) and fractions that are not 3 or 6
    digits."""
    from datetime import datetime
    if sys.version_info >= (3, 11):
        return datetime.fromisoformat(text)
    import re
    s = text.strip()
    if s[-1:] in ("Z", "z"):
        s = s[:-1] + "+00:00"
    # a fraction of any length → 6 digits
    s = re.sub(r"([T ]\d{2}:\d{2}:\d{2})[.,](\d+)", lambda m: f"{m.group(1)}.{(m.group(2) + '000000')[:6]}", s)
    return datetime.fromisoformat(s)
