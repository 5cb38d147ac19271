"""Input formats: what a region of a text input, or a whole file, is. One module per kind.

Line formats (read region by region inside any text input, whatever surrounds them; each
declares its `keywords` and how a region opens, goes on and ends, base.py):
  gpu_dmon.py       `nvidia-smi dmon`
  gpu_query.py      `nvidia-smi --query-gpu` CSV
  gpu_table.py      the `nvidia-smi` table
  gpu_topo.py       `nvidia-smi topo -m`
  gpu_nvlink.py     `nvidia-smi nvlink --status`, `nvidia-smi -L`
  metrics_text.py   Prometheus exposition text, DCGM exporter scrapes included
  bench_blocks.py   benchmark results printed to a terminal (vLLM, SGLang, trtllm-bench)
  json_lines.py     JSON records: log lines inside them (docker json-file, structured loggers),
                    benchmark records
Whole-file formats (recognised from the head, read whole; `whole_kind`, `load_whole`):
  query_range.py    a saved Prometheus query_range answer
  gpu_nvml.py       a `diagnose gpu --live --save` file
  bench_files.py    benchmark result files (vLLM, SGLang, GuideLLM, GenAI-Perf, AIPerf)
  structured.py     JSON / YAML / TOML documents (TensorRT-LLM options, iteration stats, targets)
Engine log lines are not formats here: each engine's folder reads its own (engines/).
"""
from __future__ import annotations

import re

from ..readers.files import InputError
from . import bench_blocks, gpu_dmon, gpu_nvlink, gpu_query, gpu_table, gpu_topo, metrics_text

LINE_FORMATS = (metrics_text.FORMAT, gpu_dmon.FORMAT, gpu_query.FORMAT, gpu_table.FORMAT, gpu_topo.FORMAT,
                gpu_nvlink.FORMAT, bench_blocks.FORMAT)
KEYWORDS = tuple(dict.fromkeys(k for f in LINE_FORMATS for k in f.keywords))
KEYWORDS_RE = re.compile("|".join(re.escape(k) for k in KEYWORDS))

# The most a whole-file input may hold: it is parsed in memory, where a JSON document takes ~7
# times its size (a 16 MB iteration-stats array peaks at ~130 MB).
MAX_WHOLE = 16 * 1024 * 1024
# Whole-file kinds that may turn out to be text after all: a job's output whose first lines are
# `key: value` or `key = value` is no YAML or TOML once a log line follows.
MAYBE_TEXT = ("yaml", "toml")


def whole_kind(head: bytes) -> str | None:
    """The whole-file format an input's head says it is ('query_range', 'nvml', 'bench:json',
    'bench:jsonl', 'bench:csv', 'bench:csv-run', 'json', 'yaml', 'toml'), or None: text."""
    from . import bench_files, gpu_nvml, query_range, structured
    if not head:
        return None
    if query_range.sniff(head):
        return "query_range"
    if gpu_nvml.sniff(head):
        return "nvml"
    b = bench_files.sniff_bench(head)
    if b:
        return f"bench:{b}"
    s = structured.sniff(head)
    if s == "json" and _json_lines(head):
        return None         # one record per line: text, read line by line (json_lines.py)
    return s


def _json_lines(head: bytes) -> bool:
    import json
    lines = [ln for ln in head.lstrip().split(b"\n", 3)[:3] if ln.strip()]
    if len(lines) < 2 or not lines[1].lstrip().startswith(b"{"):
        return False
    try:
        return isinstance(json.loads(lines[0]), dict)
    except ValueError:
        return False


def hold(first: bytes, blocks, limit: int = MAX_WHOLE):
    """(the input's blocks, None) when it holds at most `limit` bytes; else (None, all its blocks)."""
    import itertools
    held, size = [first], len(first)
    for b in blocks:
        held.append(b)
        size += len(b)
        if size > limit:
            return None, itertools.chain(held, blocks)
    return held, None


def load_whole(kind: str, inp, held: list[bytes], ev):
    """Read a whole-file input (`held`: its blocks) into `ev`; its InputInfo, or None when it is not
    that format after all (MAYBE_TEXT kinds that do not parse: read as text)."""
    data = b"".join(held)
    from ..readers.unreadable import blank_unreadable
    if kind == "query_range":
        from . import query_range
        info = query_range.load(blank_unreadable(data)[0].decode("utf-8", "replace"), inp.display, ev)
    elif kind == "nvml":
        from . import gpu_nvml
        info = gpu_nvml.load(blank_unreadable(data)[0].decode("utf-8", "replace"), inp.display, ev)
    elif kind.startswith("bench:"):
        from .bench_files import load_bench
        info = load_bench(kind.split(":", 1)[1], _replay(inp, data), ev)
    else:
        from .structured import load_structured, parses
        if kind in MAYBE_TEXT and not parses(kind, data):
            return None
        info = load_structured(kind, _replay(inp, data), ev)
        if info.engine:
            ev.set_fact("engine", info.engine, override=False)
    from ..coverage import whole_file
    whole_file(info)
    return info


def too_big(kind: str, display: str) -> InputError:
    return InputError(f"{display}: {kind.split(':')[-1].upper()} input larger than {MAX_WHOLE // 2**20} MiB")


def _replay(inp, data: bytes):
    from ..readers.files import Input
    replay = Input.__new__(Input)
    replay.path, replay.display = inp.path, inp.display
    replay.blocks = lambda: iter([data])
    return replay
