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

from .grouping import load_groups
from .loading import load, read_input, start_scans
from .readers.files import Input, InputError, resolve

__all__ = ["load", "load_groups", "read_input", "start_scans", "Input", "InputError", "resolve"]
