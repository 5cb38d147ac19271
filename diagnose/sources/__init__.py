"""Sources: turn inputs into Evidence. Three rooms, and the rooms' doors:

- readers/: opening what the user named (files.py: paths, globs, `-`, `.gz`), cutting it into
  lines and classifying them (scanner.py in Python, native/ in C, segments.py their one
  consumer), peeling collector and process prefixes (lineprefix.py);
- formats/: input formats, one module each, with their registry: line formats found anywhere in a
  text input (`nvidia-smi` captures, scrapes, benchmark result blocks, JSON records) and
  whole-file formats (JSON/YAML/TOML documents, query_range answers, benchmark result files);
- engines/: one folder per engine (its logger header and line parser: **a line of a new log
  format gets recognised there**), and engines/common.py for the lines every engine writes.

loading.py reads one input, region by region, into the Evidence of each launch (launches.py) and
says what of it was understood (coverage.py); grouping.py makes deployments of the launches.
sniff.py tells whole-file inputs from text; prometheus.py and nvml_live.py read live sources.
"""
from __future__ import annotations

import importlib

# The rooms' doors, imported when first asked for (PEP 562): a run that only checks its options,
# or reads a scrape, does not pay for the line readers and every engine's patterns.
_DOORS = {"load_groups": ".grouping", "load": ".loading", "read_input": ".loading", "start_scans": ".loading",
          "Input": ".readers.files", "InputError": ".readers.files", "resolve": ".readers.files"}
__all__ = list(_DOORS)


def __getattr__(name: str):
    if name in _DOORS:
        return getattr(importlib.import_module(_DOORS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
