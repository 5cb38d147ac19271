"""The evidence every source hands on, made safe and complete before signals read it: run on
every source's Evidence (files in sources.load, a live Prometheus in the pipeline).

- numbers: a stats value, sample or fact that is not a finite, plausible number becomes unknown;
- text: every kept line, fact text and setting goes through redaction, control characters
  become U+FFFD;
- time: GPU samples and engine stats on one axis (timeline.align_gpu);
- facts that follow from other facts (KV tokens from blocks, GPU count from the parallel sizes,
  nodes from NCCL and Ray hosts, …).
"""
from __future__ import annotations

import math
import re
from itertools import repeat

from .. import redact
from .model import Evidence
from .timeline import align_gpu

# C0, DEL, C1 and XML non-characters left after ANSI colour is removed (a cut `\x1b[`, a flipped
# byte, a terminal title sequence): they made the JUnit report invalid XML and would reach the
# user's terminal as escapes. Replaced here, in what evidence keeps, not per line while scanning;
# tabs stay.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ufffe\uffff]")


def finish(ev: Evidence, gpu_start=None, gpu_interval: float = 1.0) -> Evidence:
    _thinned_note(ev)
    _finite_rows(ev)
    _redact_evidence(ev)
    align_gpu(ev, gpu_start, gpu_interval)
    derive_facts(ev)
    return ev


def _thinned_note(ev: Evidence) -> None:
    """Said where samples were thinned to stay within memory (evidence.model.Rows)."""
    for rows, what in ((ev.stats_rows, "engine stats"), (ev.gpu_rows, "GPU")):
        if getattr(rows, "dropped", 0) and ev.inputs:
            note = (f"{rows.dropped + len(rows):,} {what} samples: one in {rows.stride} kept, evenly over the "
                    f"whole input (memory bound)")
            if note not in ev.inputs[0].errors:
                ev.inputs[0].errors.append(note)


# Facts that are numbers. A damaged or hostile input can give them `inf`, `nan`, `1e309`, `'x'`,
# a list, or True (`tensor_parallel_size=inf` in a dump, `"maxNumBlocks": 1e309` in JSON); such a
# value is dropped — unknown — so nothing downstream computes with it (int(inf) raised here, in
# the signals and in rules). Numeric strings (`"8192"`, `"16,384"`) become numbers.
from .facts import FLOAT_FACTS, INT_FACTS  # noqa: E402  (the fact catalogue's types)


HUGE = 1e15      # beyond any real count, rate, size or percentage in these inputs


def _number(v, integral: bool):
    if isinstance(v, str):
        try:
            v = float(v.strip().replace(",", ""))
        except ValueError:
            return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not -HUGE < v < HUGE:
        return None     # also a 400-digit int: float() of it raised OverflowError in the rules
    if isinstance(v, float) and integral and v.is_integer():
        return int(v)
    return v


def _sane_facts(ev: Evidence) -> None:
    for name in INT_FACTS | FLOAT_FACTS:
        f = ev.facts.get(name)
        if f is None:
            continue
        v = _number(f.value, name in INT_FACTS)
        if v is None:
            del ev.facts[name]
        elif v is not f.value:
            f.value = v


_NUMBERS = {float, int, bool, type(None)}


def _plausible(rows: list) -> dict | None:
    """Each key's values over the rows (None where a row lacks it), or None when some int or
    float is beyond ±HUGE or NaN. A column at a time, by min, max and sum (NaN makes the sum NaN),
    in C: `map(dict.get)` takes a key's values without a Python step per row, and a column of
    numbers alone (the usual case) is judged by its non-zero values (0 is within bounds, and
    False/True too). The columns serve Evidence.stats_columns afterwards (a day of stats: the
    rows' values are read once, not twice).

    A --follow pass finishes a copy of its reading's rows (Rows._copy): what the last pass found
    of the first of them is kept on the rows copied (Rows.memo) and holds while no row but the
    newest moved there (Rows.token); only the rows after those are read, the newest included
    (a parser may have amended it since)."""
    cols: dict = {}
    m = 0
    src = getattr(rows, "copied_from", None)
    memo = None
    if src is not None:
        orig, token, copied = src
        memo = orig.memo
        if memo is not None and memo["token"] is token and rows.token is token:
            m = max(0, min(memo["rows"], copied) - 1)
            if m:
                cols = {k: v[:m] for k, v in memo["raw"].items()}
        else:
            memo = None
    new = rows[m:] if m else rows
    for k in (set().union(*new) if new else set()) | cols.keys():
        col = list(map(dict.get, new, repeat(k)))
        kinds = set(map(type, col))
        if kinds <= _NUMBERS:
            nums = list(filter(None, col))
        elif float in kinds or int in kinds:
            nums = [v for v in col if v.__class__ is float or v.__class__ is int]
        else:
            nums = None
        if nums and not (-HUGE < min(nums) and max(nums) < HUGE and (t := sum(nums)) == t):
            return None
        cols[k] = cols[k] + col if k in cols else [None] * m + col if m else col
    if src is not None and rows.token is token:
        orig.memo = {"token": token, "rows": copied, "raw": {k: v[:copied] for k, v in cols.items()},
                     "made": memo["made"] if memo else None}     # stats_columns' own, kept for it
    return cols


def _finite_rows(ev: Evidence) -> None:
    """`nan`, `inf`, a number too big for a float (400 digits, 1e309) or one no rate, count or
    percentage reaches (10^15 and up) in a stats line, a GPU sample or a scrape is damage, not a
    measurement: it becomes a gap. Left in, it broke int() in the signals, and a standard
    deviation of 1e307s overflowed: NaN and Infinity (not JSON) reached the report."""
    for rows, ident in ((ev.stats_rows, "engine_idx"), (ev.gpu_rows, "gpu")):
        cols = _plausible(rows)
        if cols is not None:
            if rows is ev.stats_rows:
                ev.keep_stats_columns(cols)
            continue            # the usual case, told column by column: no row to mend
        drop = set()
        for r in rows:
            for k, v in r.items():
                if (v.__class__ is float or v.__class__ is int) and not -HUGE < v < HUGE:
                    r[k] = None     # an int of 24 digits did not fit polars' Int64 either
                    if k == ident:
                        drop.add(id(r))
        if drop:    # a row whose GPU / engine index is damaged belongs to no GPU / engine
            rows[:] = [r for r in rows if id(r) not in drop]
    for bucket in ev.events.values():
        for e in bucket:
            for k, v in e.data.items():
                if (v.__class__ is float or v.__class__ is int) and not -HUGE < v < HUGE:
                    e.data[k] = None
    # Settings are shown verbatim: a non-finite value (`max_num_batched_tokens=1e309` in a dump,
    # `.inf` in YAML) is shown as its text, since NaN and Infinity are not JSON.
    ev.settings = _finite_settings(ev.settings)


def _redact_evidence(ev: Evidence) -> None:
    """Every kept event and fact text through redact(), whichever parser recorded it: several cite
    the raw line (an engine-crash line can carry request headers, an OOM line a client address,
    a config excerpt an `api_key=`), and only some parsers redacted. Credentials among the
    settings (`--api-key`, SGLang's `api_key=`) too: they reach the JSON and the fix command.
    Control characters become U+FFFD in what is kept, values included (a stray `\x1b[`, a
    flipped byte: JUnit XML was invalid with them, and a terminal would take them as escapes) —
    here, on the few kept texts, not per line while scanning."""
    for bucket in ev.events.values():
        for e in bucket:
            if isinstance(e.text, str):
                e.text = _printable(redact.redact(e.text))
            if isinstance(e.data.get("msg"), str):     # the message part, kept to quote (a stop's)
                e.data["msg"] = _printable(redact.redact(e.data["msg"]))
    for f in ev.facts.values():
        if isinstance(f.text, str):
            f.text = _printable(redact.redact(f.text))
        if isinstance(f.value, str):
            f.value = _printable(f.value)
    ev.settings = _printable_settings(redact.redact_setting(None, ev.settings))


def _printable_settings(x, depth: int = 0):
    if isinstance(x, str):
        return _printable(x)
    if depth > 64:
        return x
    if isinstance(x, dict):
        return {_printable(k) if isinstance(k, str) else k: _printable_settings(v, depth + 1) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_printable_settings(v, depth + 1) for v in x)
    return x


def _printable(text: str) -> str:
    return CONTROL.sub("\ufffd", text) if CONTROL.search(text) else text


def _finite_settings(x, depth: int = 0):
    if x.__class__ is float and not math.isfinite(x):
        return repr(x)
    if depth > 64 and isinstance(x, (dict, list, tuple)):
        return "…"      # nesting no engine writes (`{"a":{"a":…` from a damaged dump): not recursed into
    if isinstance(x, dict):
        return {k: _finite_settings(v, depth + 1) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_finite_settings(v, depth + 1) for v in x)
    return x


def derive_facts(ev: Evidence) -> None:
    """Facts that follow from other facts (kept here so every source benefits)."""
    _sane_facts(ev)
    f = ev.fact
    if f("kv_cache_tokens") is None and f("num_gpu_blocks") is not None:
        ev.set_fact("kv_cache_tokens", f("num_gpu_blocks") * (f("block_size") or 16),
                    text="(# GPU blocks × block size)")
    if f("max_concurrency") is None and f("kv_cache_tokens") and f("max_model_len"):
        ev.set_fact("max_concurrency", round(f("kv_cache_tokens") / f("max_model_len"), 2),
                    text="(KV cache tokens ÷ max model length)")
    snap = ev.events.get("hf_snapshot")
    if f("model") is None and snap:      # no argument named the model: the checkpoint's cache path does
        ev.set_fact("model", snap[0].data["model"], snap[0].source, snap[0].line, snap[0].text)
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
    # Ray tags only workers on other nodes with `ip=`; NCCL names every host. Interleaved output
    # cuts line starts: a host name that ends another one (`pseek-v2-5-0-1`) is that one.
    hosts = {h for h in ev.hosts if not any(o != h and o.endswith(h) for o in ev.hosts)}
    nodes = max(len(hosts), len(ev.ray_ips) + 1 if ev.ray_ips else 0)
    # NCCL says how many nodes each communicator spans: the largest is the deployment's.
    if ev.nccl_comms:
        nodes = max(nodes, max(ev.nccl_comms.values()))
    if nodes > 1:
        seen = sorted(hosts) or sorted(ev.ray_ips)
        ev.set_fact("nodes", nodes, text="(distinct hosts in NCCL / Ray lines: " + ", ".join(seen[:8]) + ")")
    if ev.has_event("eager_mode") and f("cuda_graphs") is None:
        ev.set_fact("cuda_graphs", False)
    if f("cuda_graphs") is None and f("engine") == "sglang":
        on, off = ev.counters.get("sglang_decode_graph_true", 0), ev.counters.get("sglang_decode_graph_false", 0)
        if on or off:
            ev.set_fact("cuda_graphs", on > 0, text=f"(Decode lines: cuda graph True {on}×, False {off}×)")
