"""Runtime signals: what the server did, from its stats samples (log stats lines, metric samples).

They come from the steady-state window only: warm-up, the first busy sample after idle (a partial
interval) and idle stretches say nothing about steady state. `runtime()` runs the producers in
order; each declares what it makes.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from datetime import timedelta
from itertools import compress
from operator import add, itemgetter

from ..evidence.model import Evidence
from .expert import expert
from .producers import produces
from .stats import known, longest_run, quantile, ranked, share, summary, trend, version_at_least

MIN_STEADY = 3   # fewer busy samples than this say nothing about a steady state
# DP engines' rows merged into one per stats tick: loads add up, percentages and latencies average.
_DP_SUM = ("prompt_tps", "gen_tps", "running", "waiting", "preemptions", "swapped", "kv_tokens_used",
           "ctx_tokens", "paused")
_DP_MEAN = ("prefix_hit", "spec_accept", "prompt_len", "ttft_p50", "ttft_p95", "ttft_p99", "itl_p50", "itl_p95",
            "itl_p99")
_SECOND = timedelta(seconds=1)
LEVEL_COLUMNS = ("running", "waiting", "kv_usage", "gen_tps", "prompt_tps", "prefix_hit")
LATENCY_COLUMNS = ("ttft_p50", "ttft_p95", "ttft_p99", "itl_p50", "itl_p95", "itl_p99")
STAGES = ("queue_time", "prefill_time", "decode_time", "e2e", "ttft", "itl")
QUANTILES = ("mean", "p50", "p95", "p99")


@dataclass
class Rows:
    """Every stats sample as columns (DP engines' ticks merged), and which were busy."""
    df: dict
    flags: list
    busy_idx: list


@dataclass
class Window:
    """The steady window's samples as columns."""
    st: dict
    height: int
    timed: bool
    # A column's known values, and sorted, made once: the producers read the same columns again
    # and again (a day's window is tens of thousands of samples).
    _known: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _ordered: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def known(self, col: str) -> list:
        """The column's values without the unknowns (the caller must not change the list)."""
        if col not in self._known:
            self._known[col] = known(self.st[col])
        return self._known[col]

    def ordered(self, col: str) -> list:
        """known(col) sorted: one sort serves every quantile of a column."""
        if col not in self._ordered:
            self._ordered[col] = sorted(self.known(col))
        return self._ordered[col]


def runtime(ev: Evidence, s) -> None:
    counts(ev, s)
    lifetime(ev, s)
    expert(ev, s)
    rows = busy(ev, s)
    if rows is None:
        return
    preemptions(ev, s, rows)
    for col in ("running", "waiting", "kv_usage", "gen_tps"):
        if any(x is not None for x in rows.df[col]):    # a series the input lacks is not drawn as zeros
            s.timeline[col] = [0.0 if x is None else x for x in rows.df[col]]
    if not rows.busy_idx:
        idle(ev, s, rows)
        return
    s.values["all_idle"] = False
    bursts(ev, s, rows)
    w = steady(ev, s, rows)
    if w is None:
        return
    levels(ev, s, w)
    latency(ev, s, w)
    window_totals(ev, s, w)
    _comparable(s, w)
    load_shape(ev, s, w)
    scaling(ev, s, w)
    queue_trend(ev, s, w)
    _provenance(ev, s, w)


@produces("stats_samples", "preemptions_total", "paused_samples", "paused_peak", "requests_in_window",
          flags=("single_scrape",), texts=("sample_clock",))
def counts(ev: Evidence, s) -> None:
    """What the input counted, whatever its samples say."""
    v = s.values
    v["stats_samples"] = len(ev.stats_rows)
    v["sample_clock"] = ev.clock_zone          # "UTC": sample times from Unix times (metrics), shown by diagnose.clock
    # vLLM V0 preemption warnings, SGLang retractions, TRT-LLM paused requests: one count.
    logged_events = (ev.counters.get("preemptions_total", 0) + ev.counters.get("retracted_total", 0))
    v["preemptions_total"] = logged_events or None
    v["paused_samples"] = ev.counters.get("paused_samples", 0)
    # one scrape is all there is of the run only when nothing else (a log's stats) gives samples
    v["single_scrape"] = bool(ev.counters.get("single_scrape")) and len(ev.stats_rows) <= 1
    v["paused_peak"] = ev.counters.get("paused_peak", 0)
    # Requests that finished in the window (a histogram's count grew): work, whatever the gauges
    # said at the moments they were scraped.
    w = ev.values.get("window_requests")
    if w:
        v["requests_in_window"] = round(w[0])


@produces("lifetime_requests", "lifetime_prompt_len", "lifetime_prefix_hit",
          *[f"lifetime_{k}_{q}_s" for k in ("ttft", "itl", "queue_time", "prefill_time", "decode_time", "e2e")
            for q in QUANTILES])
def lifetime(ev: Evidence, s) -> None:
    """One scrape: its counters and histograms hold everything since the server started — said
    as such (JSON `lifetime`), never as this window's figures."""
    vals = {k[len("lifetime_"):]: x[0] for k, x in ev.values.items() if k.startswith("lifetime_") and x}
    if not vals:
        return
    v = s.values
    if vals.get("requests") is not None:
        v["lifetime_requests"] = round(vals["requests"])
    for kind in ("ttft", "itl", "queue_time", "prefill_time", "decode_time", "e2e"):
        for qn in QUANTILES:
            if vals.get(f"{kind}_{qn}") is None:
                continue
            v[f"lifetime_{kind}_{qn}_s"] = round(vals[f"{kind}_{qn}"], 4)
            e = s.key_stats[f"{kind}_{qn}_lifetime"] = {"value": round(vals[f"{kind}_{qn}"], 4),
                                                        "over": "since the server started (one scrape)"}
            if vals.get(f"{kind}_{qn}_above"):
                e["above_top_bucket"] = True
            if vals.get(f"{kind}_{qn}_at_most"):
                e["at_most"] = True
    for col, name in (("prompt_len", "prompt_tokens_per_request"), ("prefix_hit", "prefix_cache_hit")):
        if vals.get(col) is not None:
            v[f"lifetime_{col}"] = round(vals[col], 1)
            s.key_stats[f"{name}_lifetime"] = {"value": round(vals[col], 1), "over": "since the server started (one scrape)"}


@produces("steady_samples", "dp_engines_logged", "idle_samples", "busy_samples", "busy_running_max",
          "busy_waiting_max", flags=("activity_unknown",))
def busy(ev: Evidence, s) -> Rows | None:
    """Which samples were busy: work in the queues or tokens flowing, or requests finishing (a
    latency quantile exists only where requests completed: a frontend that exports latencies but
    no queue gauges serves). None when there is nothing to judge."""
    v = s.values
    if not ev.stats_rows:
        v["steady_samples"] = 0
        return None
    df = ev.stats_columns()
    engines = len(set(df["engine_idx"]))
    v["dp_engines_logged"] = engines
    if engines > 1 and None not in df["time"]:
        df = _merge_dp_ticks(df)
    else:
        df["rank_running_max"] = df["rank_running_mean"] = df["running"]
    activity = [df[k] for k in ("running", "waiting", "gen_tps", "prompt_tps", "ttft_p50", "itl_p50")]
    # A probe's one-token prefill every few seconds (0.2 tokens/s, nothing running) is not work.
    # (Written out rather than three any() of generators: one sample each of 50,000; zip's tuples
    # unpacked as they come, not kept.)
    flags = [(r is not None and r > 0) or (q is not None and q > 0) or (g is not None and g >= 1) or (p is not None and p >= 1)
             or (t is not None and t > 0) or (i is not None and i > 0) for r, q, g, p, t, i in zip(*activity)]
    busy_idx = list(compress(range(len(flags)), flags))
    if not busy_idx and all(x is None for col in activity for x in col):
        # Nothing says whether it worked: unknown, never "idle".
        v["steady_samples"] = 0
        v["activity_unknown"] = True
        return None
    v["idle_samples"] = len(flags) - len(busy_idx)
    v["busy_samples"] = len(busy_idx)
    # What the busy samples held at most: a test request or two finishing inside one interval
    # (running 0 or 1, nothing waiting) is an idle server, not an unjudgeable one.
    v["busy_running_max"] = max([df["running"][i] or 0.0 for i in busy_idx], default=None)
    v["busy_waiting_max"] = max([df["waiting"][i] or 0.0 for i in busy_idx], default=None)
    return Rows(df, flags, busy_idx)


@produces("preemptions_total")
def preemptions(ev: Evidence, s, rows: Rows) -> None:
    """A missing count is unknown, not zero: V0 logs every 50th preemption as a warning, V1 from
    v0.11.2 adds `Preemptions: N` to the stats line when N > 0; older V1 logs say nothing."""
    v = s.values
    logged = int(sum(known(rows.df["preemptions"])))
    says_preemptions = (v.get("v1_engine") is False or logged > 0 or v.get("engine") == "sglang"
                        or (v.get("engine") == "vllm" and version_at_least(v.get("engine_version"), (0, 11, 2))))
    if logged or v["preemptions_total"]:
        v["preemptions_total"] = (v["preemptions_total"] or 0) + logged
    elif says_preemptions:
        v["preemptions_total"] = 0


@produces("steady_samples", flags=("all_idle", "running_known", "waiting_known", "gen_tps_known"))
def idle(ev: Evidence, s, rows: Rows) -> None:
    """Idle is a state too: recorded so a later run can be compared with this one (what was
    measured, never zeros in its place: 0.4 tokens/s of a probe stays 0.4)."""
    v = s.values
    v["steady_samples"] = 0
    v["all_idle"] = True
    for name, col in (("running", "running"), ("waiting", "waiting"), ("generation_throughput", "gen_tps")):
        x = known(rows.df[col])
        v[f"{col}_known"] = bool(x)
        if x:
            s.key_stats[name] = summary(x)


@produces("capped_waiting_samples", "capped_waiting_peak", flags=("capped_waiting_burst",))
def bursts(ev: Evidence, s, rows: Rows) -> None:
    """Bursts at the cap, over every busy sample: running and waiting are gauges, true at the
    moment of the line (unlike the rates of a first sample after idle, which it dilutes), and a
    burst that the next interval drains shows only there. Two or more samples with the batch at
    its cap and a queue of at least 5 % of the cap (not one or two arrivals' jitter)."""
    v = s.values
    cap = v.get("max_num_seqs_per_engine") or v.get("max_num_seqs")
    if not cap:
        return
    df = rows.df
    floor = cap_floor(cap)
    at_cap = [(df["waiting"][i] or 0.0) for i in rows.busy_idx
              if df["rank_running_max"][i] is not None and df["rank_running_max"][i] >= floor
              and (df["waiting"][i] or 0) >= 1]
    v["capped_waiting_samples"] = len(at_cap)
    v["capped_waiting_burst"] = len(at_cap) >= 2 and statistics.fmean(at_cap) >= max(2.0, 0.05 * float(cap))
    if at_cap:
        v["capped_waiting_peak"] = max(at_cap)


@produces("steady_samples", "window_seconds", flags=("too_few_samples",))
def steady(ev: Evidence, s, rows: Rows) -> Window | None:
    """The steady window: busy samples, minus the first sample after each idle stretch (the
    interval it averages was partly idle) when enough samples remain."""
    v = s.values
    flags = rows.flags
    keep = [i for i in rows.busy_idx if i and flags[i - 1]] if len(rows.busy_idx) >= 4 else list(rows.busy_idx)
    if len(keep) < 2:
        keep = rows.busy_idx
    height = len(keep)
    pick = itemgetter(*keep) if len(keep) > 1 else None     # C picks the kept samples of each column
    # A column no sample has (most of them, for one engine's lines) is made, not picked.
    st = {k: [None] * height if col and col[0] is None and col.count(None) == len(col)
          else list(pick(col)) if pick is not None else [col[i] for i in keep] for k, col in rows.df.items()}
    v["steady_samples"] = height
    if height < MIN_STEADY:
        v["too_few_samples"] = True
        return None
    s.samples = st
    t = st["time"]
    timed = None not in t
    if timed:
        t0, t1 = min(t), max(t)
        v["window_seconds"] = (t1 - t0).total_seconds()
        s.steady_range = (t0, t1)
        if ev.clock_zone == "UTC":      # a metric's time: shown in the local zone (or UTC, --utc), named
            from ..clock import span
            s.window = f"steady window {span(t0, t1)} ({height} samples, idle and warm-up excluded)"
        else:                           # a log's time is its host's, zone unknown: as written
            s.window = f"steady window {t0:%m-%d %H:%M:%S}–{t1:%H:%M:%S} ({height} samples, idle and warm-up excluded)"
    else:
        s.window = f"steady window: {height} busy samples (idle and warm-up excluded)"
    return Window(st, height, timed)


@produces(*[f"{c}_{q}" for c in LEVEL_COLUMNS for q in ("mean", "max", "p50", "p95")],
          "prefix_hit_last", "batch_p50", "batch_max")
def levels(ev: Evidence, s, w: Window) -> None:
    """Each gauge's mean, p50, p95 and max over the steady window."""
    v, st = s.values, w.st

    def stat(col, fn):
        x = w.known(col)
        return round(float(fn(x)), 3) if x else None

    for col in LEVEL_COLUMNS:
        x, ordered = w.known(col), w.ordered(col)
        v[f"{col}_mean"] = round(float(statistics.fmean(x)), 3) if x else None
        v[f"{col}_max"] = round(float(max(x)), 3) if x else None
        v[f"{col}_p50"] = round(float(ranked(ordered, 0.5)), 3) if x else None
        v[f"{col}_p95"] = round(float(ranked(ordered, 0.95)), 3) if x else None
    v["prefix_hit_last"] = stat("prefix_hit", lambda x: x[-1])
    # The batch one engine runs (= running with one engine): what caps, kernels and drafts see.
    v["batch_p50"] = stat("rank_running_mean", lambda x: quantile(x, 0.5))
    v["batch_max"] = stat("rank_running_max", max)


@produces(*[f"{c}_s" for c in LATENCY_COLUMNS], *[f"{c}_max_s" for c in LATENCY_COLUMNS], "itl_running_corr",
          texts=("latency_quantiles_over",))
def latency(ev: Evidence, s, w: Window) -> None:
    """Latency quantiles (Prometheus histograms): the window's typical value, and how ITL follows load."""
    v, st = s.values, w.st
    for col in LATENCY_COLUMNS:
        x = w.known(col)
        if x:
            v[f"{col}_s"] = round(statistics.fmean(x), 4)
            v[f"{col}_max_s"] = round(max(x), 4)
        # A live Prometheus gives the window's own quantile (its histogram's increase over the
        # whole window): that, not a mean of rolling 5-minute quantiles, is "p95 of this window".
        got = ev.values.get(f"window_{col}")
        if got:
            v[f"{col}_s"] = round(got[0], 4)
            v["latency_quantiles_over"] = "the whole window (histogram increase)"
            s.key_stats[f"{col}_window"] = {"value": round(got[0], 4), "over": "the whole window (histogram increase)"}
            if ev.values.get(f"window_{col}_at_most"):
                s.key_stats[f"{col}_window"]["at_most"] = True
            if ev.values.get(f"window_{col}_above"):      # in the +Inf bucket: the top bound is a floor
                s.key_stats[f"{col}_window"]["above_top_bucket"] = True
    both = [(i, r) for i, r in zip(st["itl_p50"], st["running"]) if i is not None and r is not None]
    if len(both) >= 6:
        itl, running = [b[0] for b in both], [b[1] for b in both]
        if len(set(running)) > 1 and len(set(itl)) > 1:     # no correlation with a constant
            v["itl_running_corr"] = round(statistics.correlation(itl, running), 3)


@produces(*[f"{k}_{q}_s" for k in STAGES for q in QUANTILES], "prompt_tokens_per_request", "prefix_hit_window",
          "kv_spread_max", "kv_spread_mean")
def window_totals(ev: Evidence, s, w: Window) -> None:
    """Where a request's time goes (Prometheus stage histograms), prompt length and prefix-cache
    hit rate: over the whole window, the totals divided; and how unevenly DP engines' caches fill."""
    v = s.values
    for kind in STAGES:
        for qn in QUANTILES:
            got = ev.values.get(f"window_{kind}_{qn}")
            if got and kind not in ("ttft", "itl") or got and qn == "mean":
                v[f"{kind}_{qn}_s"] = round(got[0], 4)
                s.key_stats[f"{kind}_{qn}_window"] = {"value": round(got[0], 4), "over": "the whole window (histogram increase)"}
            if got and ev.values.get(f"window_{kind}_{qn}_at_most"):     # within the lowest bucket: a bound
                s.key_stats[f"{kind}_{qn}_window"]["at_most"] = True
            if got and ev.values.get(f"window_{kind}_{qn}_above"):       # in the +Inf bucket: a floor
                s.key_stats[f"{kind}_{qn}_window"]["above_top_bucket"] = True
    got = ev.values.get("window_prompt_len")
    if got:
        v["prompt_tokens_per_request"] = round(got[0])
        s.key_stats["prompt_tokens_per_request_window"] = {"value": round(got[0], 1), "over": "the whole window (counter increase)"}
    got = ev.values.get("window_prefix_hit")
    if got:
        v["prefix_hit_window"] = round(got[0], 1)
        s.key_stats["prefix_cache_hit_window"] = {"value": round(got[0], 1), "over": "the whole window (counter increase)"}
    spread = w.known("kv_spread")
    if spread:
        v["kv_spread_max"] = round(max(spread), 1)
        v["kv_spread_mean"] = round(statistics.fmean(spread), 1)


def _comparable(s, w: Window) -> None:
    """Per-signal statistics kept in the JSON report so a later run can be compared with this one."""
    for name, col in (("generation_throughput", "gen_tps"), ("prompt_throughput", "prompt_tps"),
                      ("running", "running"), ("waiting", "waiting"), ("swapped", "swapped"), ("kv_cache_usage", "kv_usage"),
                      ("kv_cache_usage_spread", "kv_spread"), ("prefix_cache_hit", "prefix_hit"),
                      ("prompt_tokens_per_request", "prompt_len"),
                      ("ttft_p50", "ttft_p50"), ("ttft_p99", "ttft_p99"), ("itl_p50", "itl_p50")):
        x = w.known(col)
        if x:
            s.key_stats[name] = summary(x, w.ordered(col))


@produces("context_tokens_per_request", "context_tokens_per_request_p95", "sequences_fit_p95",
          "prompt_tokens_per_request", "decode_graph_off_share", "running_over_graph_share",
          "offered_concurrency_max", "prompt_share", "waiting_nonzero_share", "waiting_run_max", "seq_cap_floor",
          "gen_tps_per_request")
def load_shape(ev: Evidence, s, w: Window) -> None:
    """What the running requests held and asked: context per request (SGLang `#token` /
    `#running-req`, or KV usage × cache size), prompt length, how often decode ran outside CUDA
    graphs, the concurrency offered, how often anything waited."""
    v, st = s.values, w.st
    per_req = [k / r for k, r in zip(st["kv_tokens_used"], st["running"]) if k is not None and r is not None and r > 0]
    if per_req:
        v["context_tokens_per_request"] = round(statistics.fmean(per_req))
    # The KV a running request holds at the busier moments (p95 over samples), from the tokens
    # used or from KV usage × cache size: what the cache must fit per request when load rises.
    # The cache size logged is one engine's; with DP every engine has its own.
    kvt = v.get("kv_cache_tokens") and v["kv_cache_tokens"] * max(1, v.get("dp_engines_logged") or 1)
    usage = st.get("kv_usage_dp_mean") or st["kv_usage"]     # all engines' caches together
    held = per_req or ([u / 100 * kvt / r for u, r in zip(usage, st["running"])
                        if u is not None and r and r > 0] if kvt else [])
    if held and kvt:
        v["context_tokens_per_request_p95"] = round(quantile(held, 0.95))
        if v["context_tokens_per_request_p95"] > 0:
            v["sequences_fit_p95"] = round(kvt / v["context_tokens_per_request_p95"], 1)
    prompt_len = w.known("prompt_len")
    if prompt_len and v.get("prompt_tokens_per_request") is None:     # the window's own total wins
        v["prompt_tokens_per_request"] = round(statistics.fmean(prompt_len))
    graph = w.known("graph")
    if graph:
        v["decode_graph_off_share"] = round(1 - share(graph), 3)
    cgm = v.get("cuda_graph_max_size")
    rank_run = w.known("rank_running_max")     # caps and graph sizes are per engine
    if cgm and rank_run:
        v["running_over_graph_share"] = round(share([x > cgm for x in rank_run]), 3)
    if w.known("running"):
        v["offered_concurrency_max"] = round(max([(r or 0.0) + (q or 0.0) for r, q in zip(st["running"], st["waiting"])]), 1)
    if w.known("prompt_tps") and w.known("gen_tps"):
        # the samples with both, as two lists: the sums in C, over the same values in the same order
        both = [p is not None and g is not None for p, g in zip(st["prompt_tps"], st["gen_tps"])]
        prompt, gen = list(compress(st["prompt_tps"], both)), list(compress(st["gen_tps"], both))
        tot = sum(map(add, prompt, gen))
        v["prompt_share"] = round(sum(prompt) / tot, 3) if tot else None
    waiting = w.known("waiting")
    if waiting:
        v["waiting_nonzero_share"] = round(share([x > 0 for x in waiting]), 3)
        v["waiting_run_max"] = longest_run([x is not None and x >= 1 for x in st["waiting"]])
    # Episodes (at the cap, or the KV cache full, with requests waiting, for consecutive samples:
    # what window means dilute) are judged sample by sample by the rules' [sustained] tables over
    # the steady window's samples; "at the cap" is at or above this floor.
    cap = v.get("max_num_seqs_per_engine") or v.get("max_num_seqs")
    if cap:
        v["seq_cap_floor"] = cap_floor(cap)
    if v["running_mean"] and v["gen_tps_mean"] is not None:
        v["gen_tps_per_request"] = round(v["gen_tps_mean"] / v["running_mean"], 2)


@produces("gen_tps_gain_per_load", "decode_tps_per_sequence", "running_plateau_share", "running_at_cap_share",
          "kv_headroom_x")
def scaling(ev: Evidence, s, w: Window) -> None:
    """Does throughput follow load, how fast one sequence decodes, how often the batch sat at its
    top or its cap, and how much KV room is left."""
    v, st = s.values, w.st
    # Samples near the window's top load against those near half of it (a benchmark sweep, a
    # day's curve): 1 is linear scaling; under 0.6, doubling the requests bought less than 20 %
    # more tokens/s and the server, not the client, is the limit.
    # (the samples' two columns side by side, filtered by masks in C: no tuple a sample)
    both = [r is not None and r > 0 and g is not None for r, g in zip(st["running"], st["gen_tps"])]
    rs, gs = list(compress(st["running"], both)), list(compress(st["gen_tps"], both))
    if len(rs) >= 6:
        top = max(rs)
        hi_from, lo_from, lo_to = 0.8 * top, 0.35 * top, 0.65 * top
        hi = [r >= hi_from for r in rs]
        lo = [lo_from <= r <= lo_to for r in rs]
        n_hi, n_lo = sum(hi), sum(lo)
        lo_tokens = statistics.fmean(list(compress(gs, lo))) if n_hi >= 3 and n_lo >= 3 else 0
        if lo_tokens > 0:
            load = statistics.fmean(list(compress(rs, hi))) / statistics.fmean(list(compress(rs, lo)))
            tokens = statistics.fmean(list(compress(gs, hi))) / lo_tokens
            v["gen_tps_gain_per_load"] = round(tokens / load, 2)
    # A sequence's decode speed when the GPU is not also prefilling: the samples without prompt
    # tokens (else all samples, which understates it) — the yardstick for how long prefill takes.
    per_seq = [g / r for g, r, p in zip(st["gen_tps"], st["running"], st["prompt_tps"])
               if g and r and r > 0 and p == 0]
    if not per_seq:
        per_seq = [g / r for g, r in zip(st["gen_tps"], st["running"]) if g and r and r > 0]
    if per_seq:
        v["decode_tps_per_sequence"] = round(quantile(per_seq, 0.9), 2)
    run = w.known("running")
    rmax = v["running_max"] or 0
    v["running_plateau_share"] = round(share([x >= rmax * 0.95 for x in run]), 3) if rmax else None
    cap = v.get("max_num_seqs_per_engine") or v.get("max_num_seqs")
    rank_run = w.known("rank_running_max")
    floor = cap_floor(cap) if cap and rank_run else None
    v["running_at_cap_share"] = round(share([x >= floor for x in rank_run]), 3) if cap and rank_run else None
    km = v["kv_usage_mean"]
    if km is not None and km > 0:
        v["kv_headroom_x"] = round(min(90.0 / km, 1000.0), 1)
    elif km == 0 and (v["running_mean"] or 0) > 0:
        v["kv_headroom_x"] = 100.0   # "0.0 %" with requests running means < 0.05 %


@produces("waiting_slope_per_min", "waiting_trend_r2", "waiting_early_mean", "waiting_late_mean",
          "ttft_late_over_early")
def queue_trend(ev: Evidence, s, w: Window) -> None:
    """Trend of the queue: slope per minute and how well a line explains it (whole seconds); and,
    as a queue can grow in steps that a line fits badly (a burst: waiting rises as KV fills and
    running falls), the window's first and last thirds, and TTFT's where the input has it."""
    v, st, height = s.values, w.st, w.height
    waiting = w.known("waiting")
    if height < 6 or len(waiting) != height:
        return
    t = st["time"]
    if w.timed:
        t_min = min(t)
        sec = [(x - t_min) // _SECOND for x in t]
        if len(set(sec)) > 1:       # a variance not 0 (whole seconds: exact), without Fractions
            slope, r = trend(sec, st["waiting"])
            v["waiting_slope_per_min"] = round(slope * 60, 3)
            if r is None:                           # a flat queue: no line explains anything
                r = 0.0
            v["waiting_trend_r2"] = round(r * r, 3)
    third = height // 3
    v["waiting_early_mean"] = round(statistics.fmean(st["waiting"][:third]), 2)
    v["waiting_late_mean"] = round(statistics.fmean(st["waiting"][-third:]), 2)
    ttft = st.get("ttft_p50") or []
    early, late = known(ttft[:third]), known(ttft[-third:])
    if early and late and statistics.fmean(early) > 0:
        v["ttft_late_over_early"] = round(statistics.fmean(late) / statistics.fmean(early), 2)


def _provenance(ev: Evidence, s, w: Window) -> None:
    """Where each runtime figure came from, for the findings' evidence."""
    v, st = s.values, w.st
    lines = w.known("line")
    first_line, last_line = (min(lines), max(lines)) if lines else (None, None)
    src = st["source"][0]

    def prov(metric, value):
        return {"metric": metric, "window": s.window, "value": value, "source": src,
                "lines": f"{first_line}–{last_line}"}

    s.provenance.update({
        "running": prov("running requests", _fmt_mm(v, "running")),
        "waiting": prov("waiting requests", _fmt_mm(v, "waiting")),
        "kv_usage": prov("GPU KV cache usage %", _fmt_mm(v, "kv_usage")),
        "gen_tps": prov("generation throughput tokens/s", _fmt_mm(v, "gen_tps")),
        "prompt_tps": prov("prompt throughput tokens/s", _fmt_mm(v, "prompt_tps")),
        "prefix_hit": prov("prefix cache hit rate %", f"last {v['prefix_hit_last']}"),
        "waiting_trend": prov("waiting requests trend", f"slope {v.get('waiting_slope_per_min')}/min, r² {v.get('waiting_trend_r2')}"),
        "preemptions": prov("preemptions", str(v.get("preemptions_total"))),
    })
    # Prometheus' window totals (counters and histograms divided over the whole window).
    whole = {"window": "the whole window (counter and histogram increase)", "source": src, "lines": None}
    if v.get("prefix_hit_window") is not None:
        s.provenance["prefix_hit"] = {**whole, "metric": "prefix cache hit rate %", "value": f"{v['prefix_hit_window']:.3g}"}
    if ev.values.get("window_prompt_len"):
        s.provenance["prompt_len"] = {**whole, "metric": "prompt tokens per request", "value": f"mean {v['prompt_tokens_per_request']:g}"}
    elif v.get("prompt_tokens_per_request") is not None:
        s.provenance["prompt_len"] = prov("prompt tokens per request", f"mean {v['prompt_tokens_per_request']:g}")
    stages = [f"{label} mean {v[k]:.3g} s" for k, label in (("queue_time_mean_s", "queue"), ("prefill_time_mean_s", "prefill"),
                                                         ("decode_time_mean_s", "decode")) if v.get(k) is not None]
    if stages:
        s.provenance["stage_time"] = {**whole, "metric": "time per request by stage", "value": " · ".join(stages)}


def _merge_dp_ticks(cols: dict) -> dict:
    """One row per tick across DP engines. They log the same tick a second or two apart: rows are
    bucketed by the 10 s stats interval. Within a bucket each rank's own rows are averaged first
    (SGLang logs a decode line every few iterations, several per bucket), then ranks are added
    (totals) or averaged (shares). A total or mean is unknown (not 0) when no engine gave it.
    `rank_running_max` / `rank_running_mean` keep the batch one rank runs: caps are per rank."""
    buckets: dict = {}
    for i, t in enumerate(cols["time"]):
        buckets.setdefault(t.replace(second=t.second - t.second % 10, microsecond=0), []).append(i)
    out: dict = {k: [] for k in cols}
    out["rank_running_max"], out["rank_running_mean"] = [], []
    out["kv_usage_dp_mean"] = []
    for tick, idx in buckets.items():
        out["time"].append(tick)
        for k in ("source", "kind"):
            out[k].append(cols[k][idx[0]])
        ranks: dict = {}
        for i in idx:
            ranks.setdefault(cols["engine_idx"][i], []).append(i)
        spread = None
        for k in cols:
            if k in ("time", "source", "kind"):
                continue
            if k in _DP_SUM or k in _DP_MEAN or k == "kv_usage":
                spread = _merge_rank_column(cols, k, ranks, out, spread)
                continue
            xs = [cols[k][i] for i in idx if cols[k][i] is not None]
            if not xs:
                out[k].append(None)
            elif k == "graph":
                out[k].append(all(xs))
            else:                       # line, engine_idx: the first
                out[k].append(min(xs))
        if spread is not None:
            out["kv_spread"][-1] = spread
    return out


def _merge_rank_column(cols: dict, k: str, ranks: dict, out: dict, spread):
    """One tick's value of a load or share column across ranks; returns the KV spread so far."""
    per_rank = []
    for rows in ranks.values():
        xs = [cols[k][i] for i in rows if cols[k][i] is not None]
        if xs:
            per_rank.append(statistics.fmean(xs))
    if k == "kv_usage":
        # Each engine has its own cache: the fullest one evicts first, as vLLM's dashboards show
        # it; the spread says how unevenly the router fills them.
        out[k].append(max(per_rank) if per_rank else None)
        out["kv_usage_dp_mean"].append(statistics.fmean(per_rank) if per_rank else None)
        spread = max(per_rank) - min(per_rank) if len(per_rank) > 1 else None
    elif not per_rank:
        out[k].append(None)
    else:
        out[k].append(math.fsum(per_rank) if k in _DP_SUM else statistics.fmean(per_rank))
    if k == "running":
        out["rank_running_max"].append(max(per_rank) if per_rank else None)
        out["rank_running_mean"].append(statistics.fmean(per_rank) if per_rank else None)
    return spread


def cap_floor(cap) -> float:
    """Running at or above this is "at the cap": within 5 %, or one below it (SGLang holds a slot
    for an in-flight chunked prefill and plateaus at cap − 1), never below 1 for tiny caps."""
    cap = float(cap)
    return cap if cap < 4 else min(cap * 0.95, cap - 1)


def _fmt_mm(v, col):
    return f"mean {v.get(col + '_mean')}, p95 {v.get(col + '_p95')}, max {v.get(col + '_max')}"
