"""Sources: turn inputs into Evidence. A new log format gets recognised in a module here.

load() streams each input through the scanner (which lines matter), peels the prefixes, and
offers each line to the shared-line parser and then to the engine parsers (vllm.py, sglang.py,
trtllm.py). Whole-file formats (JSON, YAML) go through structured.py. Several inputs from
different engines are different deployments: group_inputs() splits them.
"""
from __future__ import annotations

from ..evidence.model import Evidence, InputInfo
from .common_lines import feed_common
from .gpu import load_gpu, sniff_gpu
from .prometheus import load_exposition, load_query_range, sniff_prometheus
from .lineprefix import Clock, peel
from .reader import Input, InputError, resolve
from .scanner import ScanCounts, scan
from .sglang import SglangParser
from .structured import load_structured, sniff
from .trtllm import TrtllmParser
from .vllm import VllmParser

__all__ = ["load", "load_groups", "InputError", "resolve"]

# Which parser to offer a line first, by the header shape it carries.
FIRST_BY_FMT = {"vllm": 0, "sglang": 1, "trtllm": 2, "triton": 2}
SNIFF_BYTES = 512 * 1024


def load(inputs: list[Input], year: int | None = None, gpu_start=None, gpu_interval: float = 1.0) -> Evidence:
    ev = Evidence()
    for inp in inputs:
        ev.inputs.append(_load_one(inp, ev, year))
    from ..evidence.timeline import align_gpu
    align_gpu(ev, gpu_start, gpu_interval)
    _derive_facts(ev)
    return ev


def load_groups(inputs: list[Input], year: int | None = None, **kw) -> list[Evidence]:
    """One Evidence per deployment: inputs are grouped by the engine that wrote them.

    Inputs of no engine (NCCL-only excerpts, configs without engine keys) join the only engine
    group when there is one."""
    if len(inputs) <= 1:
        return [load(inputs, year, **kw)]
    by_engine: dict[str | None, list[Input]] = {}
    for inp in inputs:
        by_engine.setdefault(_sniff_engine(inp, year), []).append(inp)
    engines = [e for e in by_engine if e is not None]
    if len(engines) <= 1:
        return [load(inputs, year, **kw)]
    groups = [by_engine[e] for e in engines]
    if None in by_engine:
        groups.append(by_engine[None])
    return [load(g, year, **kw) for g in groups]


def _sniff_engine(inp: Input, year) -> str | None:
    if inp.path == "-":
        return None
    try:
        probe = Evidence()
        head = next(iter(inp.blocks()), b"")[:SNIFF_BYTES]
        if sniff_gpu(head):
            return None
        pk = sniff_prometheus(head)
        if pk:
            for prefix, eng in (("vllm:", "vllm"), ("sglang", "sglang"), ("trtllm", "trtllm"), ("nv_trt_llm", "trtllm")):
                if prefix.encode() in head:
                    return eng
            return None
        kind = sniff(head)
        if kind:
            return "trtllm" if b"TensorRT" in head or b"kv_cache_config" in head or b"iterLatencyMS" in head or b"Active Request Count" in head else None
        cut = Input.__new__(Input)
        cut.path, cut.display = inp.path, inp.display
        cut.blocks = lambda: iter([head[: head.rfind(b"\n") + 1] or head])
        return _load_one(cut, probe, year, sniffing=True).engine
    except InputError:
        return None


def _load_one(inp: Input, ev: Evidence, year: int | None, sniffing: bool = False) -> InputInfo:
    blocks = inp.blocks()
    first = next(blocks, b"")
    prom_kind = sniff_prometheus(first[:SNIFF_BYTES]) if first else None
    if prom_kind:
        text = (first + b"".join(blocks)).decode("utf-8", "replace")
        info = (load_query_range if prom_kind == "query_range" else load_exposition)(text, inp.display, ev)
        if "DCGM_FI_" in text:     # node and engine metrics scraped together
            from .gpu import _dcgm
            _dcgm(text.splitlines(), inp.display, ev, info)
        return info
    gpu_kind = sniff_gpu(first[:SNIFF_BYTES]) if first else None
    if gpu_kind:
        replay = Input.__new__(Input)
        replay.path, replay.display = inp.path, inp.display
        replay.blocks = lambda: _chain(first, blocks)
        return load_gpu(gpu_kind, replay, ev)
    kind = sniff(first[:SNIFF_BYTES]) if first else None
    if kind:
        replay = Input.__new__(Input)
        replay.path, replay.display = inp.path, inp.display
        replay.blocks = lambda: _chain(first, blocks)
        info = load_structured(kind, replay, ev)
        if info.engine:
            ev.set_fact("engine", info.engine, override=False)
        return info
    info = InputInfo(path=inp.display)
    counts = ScanCounts()
    clock = Clock(year)
    parsers = [VllmParser(), SglangParser(), TrtllmParser()]
    engine_lines: dict[str, int] = {}
    recognised = 0

    def pending():
        return any(p.wants_more() for p in parsers[1:])

    from . import bulk
    bar = _progress_bar(inp) if not sniffing else None
    if inp.path != "-" and bulk.usable(inp.path, first):
        del blocks      # the bulk path reads the file itself, in Rust
        lines_iter = bulk.scan_bulk(inp.path, inp.display, ev, counts, lambda *a: None,
                                    progress=bar.advance if bar else None)
    else:
        src = _chain(first, blocks)
        if bar:
            src = _counted(src, bar.advance)
        lines_iter = scan(src, counts, follow=pending)
    for lineno, text in lines_iter:
        if pending():
            for p in parsers[1:]:
                if p.wants_more():
                    p.more(text, ev)
            recognised += 1
            continue
        line = peel(inp.display, lineno, text)
        when = clock.at(line)
        if feed_common(line, ev, when):
            recognised += 1
            continue
        first_idx = FIRST_BY_FMT.get(line.fmt)
        order = parsers if first_idx is None else [parsers[first_idx]] + [p for i, p in enumerate(parsers) if i != first_idx]
        for p in order:
            if p.feed(line, ev, when):
                recognised += 1
                engine_lines[p.engine] = engine_lines.get(p.engine, 0) + 1
                break
    if bar:
        bar.close()
    for p in parsers[1:]:
        p.finish(ev)
    if clock.guessed and ev.stats_rows:
        ev.year_guessed[inp.display] = clock.base_year
    recognised += getattr(counts, "bulk_recognised", 0)
    info.lines = counts.lines
    info.unreadable_lines = counts.unreadable
    info.recognised_lines = recognised
    info.unrecognised_lines = counts.lines - recognised - counts.unreadable
    if not sniffing:
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
                info.engine_version = p.version
    return info


PROGRESS_MIN_BYTES = 100 * 1024 * 1024


class _Bar:
    """A progress bar on stderr for big inputs, only when stderr is a terminal."""

    def __init__(self, name: str, total: int) -> None:
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
        from rich.console import Console
        self.p = Progress("[dim]{task.description}", BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                          console=Console(stderr=True), transient=True)
        self.p.start()
        self.task = self.p.add_task(name, total=total)

    def advance(self, n: int) -> None:
        self.p.advance(self.task, n)

    def close(self) -> None:
        self.p.stop()


def _progress_bar(inp: Input):
    import os
    import sys
    if inp.path == "-" or not sys.stderr.isatty():
        return None
    try:
        size = os.path.getsize(inp.path)
    except OSError:
        return None
    return _Bar(inp.display, size) if size >= PROGRESS_MIN_BYTES else None


def _counted(blocks, advance):
    for b in blocks:
        advance(len(b))
        yield b


def _chain(first: bytes, rest):
    if first:
        yield first
    yield from rest


def _derive_facts(ev: Evidence) -> None:
    """Facts that follow from other facts (kept here so every source benefits)."""
    f = ev.fact
    if f("kv_cache_tokens") is None and f("num_gpu_blocks") is not None:
        ev.set_fact("kv_cache_tokens", f("num_gpu_blocks") * (f("block_size") or 16),
                    text="(# GPU blocks × block size)")
    if f("max_concurrency") is None and f("kv_cache_tokens") and f("max_model_len"):
        ev.set_fact("max_concurrency", round(f("kv_cache_tokens") / f("max_model_len"), 2),
                    text="(KV cache tokens ÷ max model length)")
    tp, pp, dp = f("tensor_parallel_size"), f("pipeline_parallel_size"), f("data_parallel_size")
    if tp is None and f("world_size_logged"):
        ev.set_fact("tensor_parallel_size", f("world_size_logged"), text="(MPI size: TP × PP ranks; TP assumed)")
        tp = f("world_size_logged")
    if tp is not None:
        ev.set_fact("gpu_count", int(tp) * int(pp or 1) * int(dp or 1),
                    text="(tensor × pipeline × data parallel size)", override=False)
    if f("gpu_memory_gib") is None and f("gpu_avail_at_start_gib") is not None:
        ev.set_fact("gpu_memory_gib", f("gpu_avail_at_start_gib"), text="(free memory before loading weights)")
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
    if f("cuda_graphs") is None and f("engine") == "sglang":
        on, off = ev.counters.get("sglang_decode_graph_true", 0), ev.counters.get("sglang_decode_graph_false", 0)
        if on or off:
            ev.set_fact("cuda_graphs", on > 0, text=f"(Decode lines: cuda graph True {on}×, False {off}×)")
