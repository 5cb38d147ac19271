"""Sources: turn inputs into Evidence. A new log format gets recognised in a module here.

load() streams each input through the scanner (which lines matter), peels the prefixes,
and offers each line to the shared-line parser and then to the engine parsers.
"""
from __future__ import annotations

from ..evidence.model import Evidence, InputInfo
from .common_lines import feed_common
from .lineprefix import Clock, peel
from .reader import Input, InputError, resolve
from .scanner import ScanCounts, scan
from .vllm import VllmParser

__all__ = ["load", "InputError", "resolve"]


def load(inputs: list[Input], year: int | None = None) -> Evidence:
    ev = Evidence()
    for inp in inputs:
        ev.inputs.append(_load_one(inp, ev, year))
    _derive_facts(ev)
    return ev


def _load_one(inp: Input, ev: Evidence, year: int | None) -> InputInfo:
    info = InputInfo(path=inp.display)
    counts = ScanCounts()
    clock = Clock(year)
    parsers = [VllmParser()]
    engine_lines: dict[str, int] = {}
    recognised = 0
    for lineno, text in scan(inp.blocks(), counts):
        line = peel(inp.display, lineno, text)
        when = clock.at(line)
        if feed_common(line, ev, when):
            recognised += 1
            continue
        for p in parsers:
            if p.feed(line, ev, when):
                recognised += 1
                engine_lines[p.engine] = engine_lines.get(p.engine, 0) + 1
                break
    info.lines = counts.lines
    info.unreadable_lines = counts.unreadable
    info.recognised_lines = recognised
    info.unrecognised_lines = counts.lines - recognised - counts.unreadable
    if counts.lines == 0:
        raise InputError(f"{inp.display}: empty file (nothing to diagnose)")
    if recognised == 0 and counts.binary_head:
        raise InputError(f"{inp.display}: binary file, not a text log")
    if recognised == 0 and counts.unreadable * 2 >= counts.lines:
        raise InputError(f"{inp.display}: not UTF-8 text ({counts.unreadable} of {counts.lines} lines unreadable)")
    if counts.unreadable:
        info.errors.append(f"{counts.unreadable} unreadable line(s) (invalid UTF-8 or NUL bytes) skipped")
    if engine_lines:
        info.engine = max(engine_lines, key=engine_lines.get)
        ev.set_fact("engine", info.engine, override=False)
        for p in parsers:
            if p.engine == info.engine:
                info.engine_version = getattr(p, "version", None)
    return info


def _derive_facts(ev: Evidence) -> None:
    """Facts that follow from other facts (kept here so every source benefits)."""
    f = ev.fact
    if f("kv_cache_tokens") is None and f("num_gpu_blocks") is not None:
        ev.set_fact("kv_cache_tokens", f("num_gpu_blocks") * (f("block_size") or 16),
                    text="(# GPU blocks × block size)")
    tp, pp, dp = f("tensor_parallel_size"), f("pipeline_parallel_size"), f("data_parallel_size")
    if tp is not None:
        ev.set_fact("gpu_count", int(tp) * int(pp or 1) * int(dp or 1),
                    text="(tensor × pipeline × data parallel size)", override=False)
    if f("gpu_memory_gib") is None and f("kv_cache_memory_gib") is not None and f("weights_gib_per_gpu") is not None:
        # Lower bound: weights + KV fit inside gpu_memory_utilization of the card.
        est = (f("weights_gib_per_gpu") + f("kv_cache_memory_gib")) / float(f("gpu_memory_utilization") or 0.9)
        ev.set_fact("gpu_memory_gib", round(est, 1), text="(estimated: (weights + KV cache) / gpu_memory_utilization)")
    # Ray tags only workers on other nodes with `ip=`; NCCL names every host.
    nodes = max(len(ev.hosts), len(ev.ray_ips) + 1 if ev.ray_ips else 0)
    if nodes > 1:
        seen = sorted(ev.hosts) or sorted(ev.ray_ips)
        ev.set_fact("nodes", nodes, text="(distinct hosts in NCCL / Ray lines: " + ", ".join(seen[:8]) + ")")
    if ev.has_event("eager_mode") and f("cuda_graphs") is None:
        ev.set_fact("cuda_graphs", False)
