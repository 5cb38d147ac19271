"""Prometheus → evidence: the series arithmetic for saved `/metrics` scrapes (formats/metrics_text.py),
saved `query_range` JSON (formats/query_range.py), and a live server through prometheus-api-client.

Every engine's metric families map onto the same stats columns the log parsers fill; each
`instance` (or `pod`) becomes its own deployment, so a fleet is diagnosed replica by replica.
"""
from __future__ import annotations

import json
import math
import re
from datetime import datetime, timedelta, timezone

from ..clock import at as clock_at
from ..evidence.facts import INT_FACTS      # a `fact:` metric of an integer fact is read as one
from ..evidence.model import Evidence, InputInfo, _finite
from .engines import ENGINES, merged
from .readers.files import InputError
from ..lazyre import lazy

# Each engine's metric names are declared in its folder (engines/<name>/__init__.py); what no one
# engine writes (NVIDIA Dynamo's frontend, in front of vLLM, SGLang or TensorRT-LLM workers; the
# forge gateway) is here. The tables, by kind:
# gauges: metric → (stats column, scale, how instances' engines combine)
SHARED_GAUGES = {
    "forge_active_sessions": ("running", 1, "sum"), "forge_queue_depth": ("waiting", 1, "sum"),
    "dynamo_frontend_inflight_requests": ("running", 1, "sum"), "dynamo_frontend_queued_requests": ("waiting", 1, "sum"),
}
# counters → per-second rates (or per-step increases)
SHARED_COUNTERS = {"dynamo_frontend_output_tokens_total": ("gen_tps", "rate")}
# histograms → quantiles
SHARED_HISTOGRAMS = {
    "forge_ttft_seconds": "ttft",
    "dynamo_frontend_time_to_first_token_seconds": "ttft", "dynamo_frontend_inter_token_latency_seconds": "itl",
}
# stage histograms: where a request's time goes, as the dashboards show it; judged over the whole
# window only (each family → its window quantiles and mean), not as a series
SHARED_STAGE_HISTOGRAMS = {"dynamo_frontend_request_duration_seconds": "e2e"}
# single values that are configuration facts
SHARED_FACT_GAUGES = {"forge_max_sessions": "max_sessions", "forge_max_queue_depth": "max_queue_depth",
                      "dynamo_frontend_model_max_num_seqs": "max_num_seqs", "dynamo_frontend_model_context_length": "max_model_len",
                      "dynamo_frontend_model_max_num_batched_tokens": "max_num_batched_tokens"}

GAUGES = {**merged("gauges"), **SHARED_GAUGES}
# gauges that hold several quantities told apart by a label:
# (metric, label matcher) → (stats column or "fact:NAME", scale, how instances' series combine)
LABELLED_GAUGES = merged("labelled_gauges")
COUNTERS = {**merged("counters"), **SHARED_COUNTERS}
# two counters' rates over the same window, divided: (numerator, denominator) → (stats column, scale)
RATIOS = merged("ratios")
RATIO_PARTS = {n: (col, part) for pair, (col, _) in RATIOS.items() for n, part in zip(pair, ("num", "den"))}
RATIO_SCALE = {col: scale for col, scale in RATIOS.values()}
HISTOGRAMS = {**merged("histograms"), **SHARED_HISTOGRAMS}
STAGE_HISTOGRAMS = {**merged("stage_histograms"), **SHARED_STAGE_HISTOGRAMS}
FACT_GAUGES = {**merged("fact_gauges"), **SHARED_FACT_GAUGES}
# counters read over the whole window only: metric → (key, label that splits it or None); their
# increase becomes `window_<key>` and `window_<key>:<label value>` (finished requests by reason)
WINDOW_COUNTERS = merged("window_counters")
# A column whose family exists only where speculative decoding is configured
SPEC_COL = "spec_accept"
ENGINE_OF = tuple((prefix, e.name) for e in ENGINES.values() for prefix in e.metric_prefixes)
# Families no one engine writes (the tables above): a scrape of them is read too.
SHARED_PREFIXES = ("forge_", "dynamo_frontend_")
METRIC_LINE = lazy(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+(?P<ts>-?\d+(?:\.\d+)?))?\s*$")
MAX_TS = 32503680000.0     # year 3000, in seconds: later sample times are damage, not dates


def instance_of(labels: dict) -> str:
    return labels.get("instance") or labels.get("pod") or labels.get("hostname") or labels.get("Hostname") or ""


def _role(labels: dict, inst: str, ev: Evidence, source, line, name: str) -> None:
    """SGLang labels each series with its node's half of the work (`engine_type`: prefill, decode or
    unified): a disaggregated node's role, per instance."""
    role = labels.get("engine_type")
    if role in ("prefill", "decode"):
        if inst:
            ev.instance_roles.setdefault(inst, role)
        ev.set_fact("node_role", role, source, line, f"engine_type label on {name}", override=False)


# Labelled gauges by name: [(label, value, stats column or "fact:NAME", scale, how)]
LABELLED = {}
for (_m, _lab), _spec in LABELLED_GAUGES.items():
    _k, _, _v = _lab.partition("=")
    LABELLED.setdefault(_m, []).append((_k, _v.strip('"'), *_spec))
# Columns a counter (or a pair of counters) measures: where the input has the counter, a gauge of
# the same column (SGLang's gen_throughput, vLLM V0's avg_generation_throughput_toks_per_s and
# gpu_prefix_cache_hit_rate) is only the fallback — added on top, it counted the tokens twice.
RATE_COLS = {col for col, how in COUNTERS.values() if how == "rate"} | {col for col, _ in RATIOS.values()}
QUANTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))


def model_of(name: str, labels: dict) -> str | None:
    """The served model a series names: `model_name` (vLLM, SGLang 0.3.6+, trtllm-serve); SGLang's
    first metrics said `name` (which `func_latency_seconds` uses for a function's name); Dynamo's
    frontend and Triton say `model`."""
    if labels.get("model_name"):
        return labels["model_name"]
    if name.startswith("sglang") and "func_latency" not in name:
        return labels.get("name") or None
    if name.startswith(("nv_", "trtllm", "dynamo_")):
        return labels.get("model") or None
    return None


def engine_of(name: str) -> str | None:
    return next((e for p, e in ENGINE_OF if name.startswith(p)), None)


def _put(row: dict, col: str, value: float, how: str) -> None:
    if how == "sum":
        row[col] = (row.get(col) or 0) + value
    elif how == "max" and row.get(col) is not None:
        row[col] = max(row[col], value)
    else:
        row[col] = value


def finish_row(row: dict) -> None:
    """What every path does to a row last: Triton's KV usage before v0.18 (no `fraction`) is its
    used blocks over its max blocks; the helper columns go."""
    used, most = row.pop("_kv_used", None), row.pop("_kv_max", None)
    if row.get("kv_usage") is None and used is not None and most:
        row["kv_usage"] = used / most * 100


def quantiles(buckets: list[tuple[float, float]]) -> dict[str, tuple[float, str | None]]:
    """p50/p95/p99 of cumulative (le, count) buckets → {qn: (value, bound)}: bound "at_most" when
    the rank falls in the lowest bucket (the estimate there is a guess between 0 and its bound),
    "above" when it falls in the +Inf bucket (the value is the top bucket's bound, a floor)."""
    out = {}
    buckets = sorted(buckets)
    if not buckets or buckets[-1][1] <= 0:
        return out
    first = buckets[0][0]
    finite = [c for le, c in buckets if le != math.inf]
    for qn, qv in QUANTILES:
        val = histogram_quantile(qv, buckets)
        if val is None:
            continue
        bound = None
        if finite and qv * buckets[-1][1] > finite[-1] and buckets[-1][0] == math.inf:
            bound = "above"
        elif first != math.inf and val <= first:
            val, bound = first, "at_most"
        out[qn] = (val, bound)
    return out


def put_window(values: dict, prefix: str, kind: str, qs: dict) -> None:
    for qn, (val, bound) in qs.items():
        values[f"{prefix}_{kind}_{qn}"] = [val]
        if bound:
            values[f"{prefix}_{kind}_{qn}_{bound}"] = [1.0]


def put_count(values: dict, prefix: str, key: str, reason: str | None, n: float) -> None:
    """A window counter's increase, added to its total (`window_finished`) and, split by a label,
    to that label value's (`window_finished:length`)."""
    values[f"{prefix}_{key}"] = [(values.get(f"{prefix}_{key}") or [0.0])[0] + n]
    if reason:
        k = f"{prefix}_{key}:{reason}"
        values[k] = [(values.get(k) or [0.0])[0] + n]


def _increase(points: list[float]) -> float:
    """A counter's growth over its samples in order; a drop is a restart (counting from zero)."""
    return math.fsum((b - a) if b >= a else b for a, b in zip(points, points[1:]))


# -- samples, from a file (formats/metrics_text.py, formats/query_range.py) or a sampled endpoint --
def from_samples(samples: list, source: str, ev: Evidence, info: InputInfo) -> None:
    """Raw samples of one input → stats rows (one per scrape/time), facts, and the figures of the
    whole window (or, for one scrape, of the server's lifetime) — what a live Prometheus gives."""
    rows: dict = {}
    counters: dict = {}
    buckets: dict = {}           # (family, instance) -> {(scrape, time): {le: [count, row key]}}
    sums: dict = {}              # (family, instance, "sum"|"count") -> {(scrape, time): value}
    engines = set()
    for scrape, ts, name, labels, value, line in samples:
        # A damaged scrape can say `NaN`, `+Inf`, `1e309` or 400 digits for a value, or carry a timestamp no
        # clock reaches (fromtimestamp() raised): no measurement, and no time, respectively.
        if not -1e300 < value < 1e300:     # NaN and ±Inf compare false; math.isfinite(10**400) raised
            continue
        if ts is not None and not (0 < ts < MAX_TS):
            ts = None
        fam = _family(name)
        eng = engine_of(name)
        if eng:
            engines.add(eng)
        when = datetime.fromtimestamp(ts, tz=timezone.utc).replace(tzinfo=None) if ts else None
        if when is not None:
            ev.clock_zone = "UTC"
        inst = instance_of(labels)
        if inst:
            ev.instances.add(inst)
        mine = ev.instance_facts.setdefault(inst, {})
        if eng:
            mine.setdefault("engine", eng)
        key = (scrape, when, inst)
        row = rows.setdefault(key, {"time": when, "source": source, "line": line, "engine_idx": 0, "instance": inst})
        model = model_of(name, labels)
        if model:
            ev.set_fact("model", model, source, line, f"model label on {name}", override=False)
            mine.setdefault("model", model)
        _role(labels, inst, ev, source, line, name)
        if SPEC_COL in ((GAUGES.get(name) or ("",))[0], (RATIO_PARTS.get(name) or ("",))[0]):
            ev.set_fact("speculative", True, source, line, f"{name}: speculative-decoding metrics", override=False)
        if name.endswith("cache_config_info"):
            _cache_config(labels, source, line, ev)
            continue
        if name in GAUGES and GAUGES[name][0]:
            col, scale, how = GAUGES[name]
            if value >= 0:       # -1 is "no data yet" (vLLM V0's hit rate), not a measurement
                _put(row.setdefault("_gauge", {}) if col in RATE_COLS else row, col, value * scale, how)
        elif name in FACT_GAUGES:
            ev.set_fact(FACT_GAUGES[name], value if FACT_GAUGES[name] != "max_num_seqs" else int(value), source, line,
                        f"{name} = {value:g}")
        elif name in COUNTERS or name in RATIO_PARTS or name in WINDOW_COUNTERS:
            counters.setdefault((name, tuple(sorted(labels.items()))), []).append((when, scrape, value, key))
        elif fam in HISTOGRAMS or fam in STAGE_HISTOGRAMS:
            if name.endswith("_bucket") and "le" in labels:
                try:
                    le = float(labels["le"])   # "+Inf" included; a damaged label (`+Inv`) drops the bucket
                except ValueError:
                    continue
                if le != le:
                    continue
                cell = buckets.setdefault((fam, inst), {}).setdefault((scrape, when), {}).setdefault(le, [0.0, key])
                cell[0] += value
            elif name.endswith(("_sum", "_count")):
                per = sums.setdefault((fam, inst, name.rpartition("_")[2]), {})
                per[(scrape, when)] = per.get((scrape, when), 0.0) + value
        for k, v, col, scale, how in LABELLED.get(name, ()):
            if labels.get(k) != v or value < 0:
                continue
            if col.startswith("fact:"):
                f = col[5:]
                ev.set_fact(f, int(value) if f in INT_FACTS else value, source, line, f'{name}{{{k}="{v}"}} = {value:g}')
            else:
                _put(row, col, value * scale, how)
    _counter_rows(rows, counters)
    _histogram_rows(rows, buckets)
    _finish_rows(ev, rows)
    scrapes = {(k[0], k[1]) for k in rows}
    _whole(ev, buckets, sums, counters, lifetime=len(scrapes) <= 1)
    if len(scrapes) <= 1:
        info.errors.append("a single scrape: configuration and current state only, no trends or rates")
        ev.counters["single_scrape"] = 1
    if engines:
        info.engine = sorted(engines)[0] if len(engines) == 1 else sorted(engines)[0]
        ev.set_fact("engine", info.engine, override=False)


def _counter_rows(rows: dict, counters: dict) -> None:
    """Counters → rates between consecutive scrapes that carry times (a count's increase; one
    side of a ratio's increase, divided in _finish_rows)."""
    for (name, _), pts in counters.items():
        pts.sort(key=lambda p: (p[1], p[0] or datetime.min))
        # A counter can be both a rate and one side of a ratio (trtllm_prompt_tokens_total).
        for col, how in [r for r in (COUNTERS.get(name), RATIO_PARTS.get(name)) if r]:  # (not WINDOW_COUNTERS)
            for (t0, _, v0, _), (t1, _, v1, key1) in zip(pts, pts[1:]):
                if v1 < v0:      # counter reset
                    continue
                if how in ("num", "den"):      # one side of a ratio: the interval's increase
                    part = rows[key1].setdefault("_ratio", {}).setdefault(col, [0.0, 0.0])
                    part[0 if how == "num" else 1] += v1 - v0
                elif how == "increase":
                    rows[key1][col] = (rows[key1].get(col) or 0) + (v1 - v0)
                elif t0 and t1 and t1 > t0:
                    rows[key1][col] = (rows[key1].get(col) or 0) + (v1 - v0) / (t1 - t0).total_seconds()


def _histogram_rows(rows: dict, buckets: dict) -> None:
    """Histogram buckets → quantiles of what happened between consecutive scrapes."""
    for (fam, inst), per_scrape in buckets.items():
        kind = HISTOGRAMS.get(fam)
        if kind is None:
            continue
        ordered = sorted(per_scrape.items(), key=lambda kv: (kv[0][0], kv[0][1] or datetime.min))
        for (_, prev), (_, cur) in zip(ordered, ordered[1:]):
            deltas = [(le, c - prev.get(le, (0, None))[0]) for le, (c, _) in cur.items()]
            key1 = next(iter(cur.values()))[1]
            for qn, (x, _) in quantiles(deltas).items():
                rows[key1][f"{kind}_{qn}"] = x


def _finish_rows(ev: Evidence, rows: dict) -> None:
    """Ratios divided, gauges of counted columns kept only as the fallback, rows with an activity
    column into the evidence."""
    for key in sorted(rows, key=lambda k: (k[2], k[0], k[1] or datetime.min)):
        r = rows[key]
        for col, (num, den) in (r.pop("_ratio", None) or {}).items():
            if den > 0:          # nothing asked in the interval: unknown, not 0 %
                r[col] = num / den * RATIO_SCALE[col]
    # A gauge of a counter's column only where the counter gave no rate for that instance.
    measured = {(k[2], c) for k, r in rows.items() for c in RATE_COLS if r.get(c) is not None}
    for key in sorted(rows, key=lambda k: (k[2], k[0], k[1] or datetime.min)):
        r = rows[key]
        for col, x in (r.pop("_gauge", None) or {}).items():
            if (key[2], col) not in measured:
                r[col] = x
        finish_row(r)
        if any(r.get(c) is not None for c in ("running", "waiting", "kv_usage", "gen_tps")):
            ev.add_stats(r)


def _whole(ev: Evidence, buckets: dict, sums: dict, counters: dict, lifetime: bool) -> None:
    """The figures a live Prometheus reads off a histogram's or counter's increase over the whole
    window (quantiles, means, ratios, requests finished) — or, from one scrape, off the totals
    since the server started (`lifetime_*`)."""
    prefix = "lifetime" if lifetime else "window"
    per_inst: dict[str, dict] = {}

    def order(d: dict) -> list:
        return [v for _, v in sorted(d.items(), key=lambda kv: (kv[0][0], kv[0][1] or datetime.min))]

    def grown(points: list[float]) -> float:
        return points[-1] if lifetime else _increase(points)

    for (fam, inst), per_scrape in buckets.items():
        kind = HISTOGRAMS.get(fam) or STAGE_HISTOGRAMS[fam]
        les = sorted({le for cur in per_scrape.values() for le in cur})
        cells = order(per_scrape)
        inc = [(le, grown([c.get(le, [0.0])[0] for c in cells])) for le in les]
        put_window(per_inst.setdefault(inst, {}), prefix, kind, quantiles(inc))
    for (fam, inst, part), per_scrape in sums.items():
        if part != "count":
            continue
        total = sums.get((fam, inst, "sum"))
        n = grown(order(per_scrape))
        kind = HISTOGRAMS.get(fam) or STAGE_HISTOGRAMS[fam]
        vals = per_inst.setdefault(inst, {})
        if total is not None and n > 0:
            vals[f"{prefix}_{kind}_mean"] = [grown(order(total)) / n]
        if kind in ("e2e", "ttft"):     # requests that finished (or got a first token) in the window
            vals[f"{prefix}_requests"] = [max(n, (vals.get(f"{prefix}_requests") or [0])[0])]
    # ratios of two counters over the window (prefix-cache hits, prompt length)
    grow: dict = {}
    for (name, labels), pts in counters.items():
        inst = instance_of(dict(labels))
        pts = sorted(pts, key=lambda p: (p[1], p[0] or datetime.min))
        grow[(name, inst)] = grow.get((name, inst), 0.0) + grown([p[2] for p in pts])
    for (num, den), (col, scale) in RATIOS.items():
        for (name, inst), d in grow.items():
            if name == den and (num, inst) in grow and d > 0:
                per_inst.setdefault(inst, {})[f"{prefix}_{col}"] = [grow[(num, inst)] / d * scale]
    # finished requests (by reason where the engine labels them), aborted requests
    for (name, labels), pts in counters.items():
        if name not in WINDOW_COUNTERS:
            continue
        key, label = WINDOW_COUNTERS[name]
        labels = dict(labels)
        pts = sorted(pts, key=lambda p: (p[1], p[0] or datetime.min))
        n = grown([p[2] for p in pts])
        put_count(per_inst.setdefault(instance_of(labels), {}), prefix, key, labels.get(label) if label else None, n)
    for inst, vals in per_inst.items():
        ev.instance_values.setdefault(inst, {}).update(vals)
        if len(ev.instances) <= 1:
            ev.values.update(vals)


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus's own estimate: cumulative bucket counts, linear inside the bucket that holds
    the rank; the +Inf bucket answers with the highest finite bound."""
    if not buckets:
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in buckets:
        if c >= rank:
            if le == float("inf"):
                return prev_le
            if c == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = (le if le != float("inf") else prev_le), c
    return prev_le


def _family(name: str) -> str:
    for suf in ("_bucket", "_sum", "_count", "_created"):
        if name.endswith(suf):
            return name[: -len(suf)]
    return name


def _cache_config(labels: dict, source: str, line: int, ev: Evidence) -> None:
    text = "vllm:cache_config_info{" + ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))[:300] + "}"
    def num(k):
        try:
            x = float(labels[k])
        except (KeyError, ValueError):
            return None
        return x if math.isfinite(x) else None    # `num_gpu_blocks="inf"`: int() raised
    if num("gpu_memory_utilization") is not None:
        ev.set_fact("gpu_memory_utilization", num("gpu_memory_utilization"), source, line, text)
    if num("num_gpu_blocks") is not None:
        ev.set_fact("num_gpu_blocks", int(num("num_gpu_blocks")), source, line, text)
        if num("block_size"):
            ev.set_fact("block_size", int(num("block_size")), source, line, text)
    if labels.get("enable_prefix_caching") in ("True", "False"):
        ev.set_fact("prefix_caching", labels["enable_prefix_caching"] == "True", source, line, text)
    if labels.get("cache_dtype"):
        ev.set_fact("kv_cache_dtype", labels["cache_dtype"], source, line, text)
    ev.set_fact("engine", "vllm", override=False)


# -- live server ----------------------------------------------------------------------------------
class PromError(Exception):
    """The server is down, slow, refuses, or answers garbage: one line for the user."""


_API_CODE = lazy(r"HTTP Status Code (?P<code>\d{3})\b")
# prometheus-api-client's message: `HTTP Status Code 400 (b'{"status":"error",…}')`, the body a bytes repr
_API_BODY = lazy(r"HTTP Status Code \d{3} \((?P<body>b(?P<q>['\"]).*(?P=q))\)\s*$", re.S)
# Where in the expression Prometheus met the problem (`1:46: `): a place in the query diagnose
# built, not in anything the user typed.
_POSITION = lazy(r'^(?:invalid parameter "query": )?\d+:\d+: ')


def api_error_text(e: Exception) -> str:
    """prometheus-api-client's exception as one readable line: `HTTP 400 bad_data: parse error:
    unexpected "=" …` rather than the response body's bytes repr."""
    import ast
    text = str(e) or type(e).__name__
    c, m = _API_CODE.search(text), _API_BODY.search(text)
    if c and m:
        try:
            body = ast.literal_eval(m.group("body")).decode("utf-8", "replace")
        except (ValueError, SyntaxError, MemoryError):
            body = ""
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("error"), str):
            error = _POSITION.sub("", " ".join(doc["error"].split()))
            kind = doc.get("errorType") if isinstance(doc.get("errorType"), str) else "error"
            return printable_line(f"HTTP {c.group('code')} {kind}: {error}", 300)
        # not Prometheus' JSON (a proxy's page): its first words
        return printable_line(f"HTTP {c.group('code')}: {' '.join(body.split())}" if body.strip() else f"HTTP {c.group('code')}", 160)
    return printable_line(text.splitlines()[0] if text.strip() else type(e).__name__, 160)


def printable_line(text: str, most: int) -> str:
    """One line of at most `most` characters, without control characters."""
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return text if len(text) <= most else text[: most - 1] + "…"


# `scheme://user:password@host…`: the userinfo runs to the LAST `@` before any `?` or `#` (a
# password with an unencoded `@` or `/` stays whole, and never shows). The scheme is optional so
# that `user:pass@host:9090`, refused for its missing scheme, is not shown with its password.
# Everything up to the last `@` is the userinfo: a password may hold `#`, `?`, `/` or `@`
# (urlsplit stops at the first `#` or `?`, and the password was printed whole in an error).
_USERINFO = lazy(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)?(?P<userinfo>[^@]*@(?:[^@]*@)*)")


def display_url(url: str) -> str:
    """The URL as reports, notes and error lines show it: without its `user:password@`."""
    return _USERINFO.sub(lambda m: m.group("scheme") or "", url, count=1)


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """`http://user:p%40ss@host:9090` → (`http://host:9090`, ("user", "p@ss")): the URL to request
    and to show, and the basic-auth pair it carried (percent-decoded; None without one)."""
    from urllib.parse import unquote
    m = _USERINFO.match(url)
    if not m:
        return url, None
    user, _, password = m.group("userinfo")[:-1].partition(":")
    return display_url(url), (unquote(user), unquote(password))


# The most one answer may hold: it is parsed whole (JSON numbers as strings take ~7 times their
# size in memory), and a real query's answer is at most 11,000 points per series.
MAX_ANSWER_BYTES = 16 << 20
# All of a run's queries together: this many times --timeout, unless --deadline says.
DEADLINE_TIMES = 4


class AnswerTooBig(Exception):
    """An answer larger than MAX_ANSWER_BYTES (read no further)."""


class OutOfTime(Exception):
    """A request not answered in full within its time (kind: "silent": not even headers came,
    "request": the answer did not finish, "deadline": the pass's queries ran out of time)."""

    def __init__(self, kind: str, seconds: float) -> None:
        super().__init__(kind, seconds)
        self.kind, self.seconds = kind, seconds


class BoundedSession:
    """What PrometheusConnect sends requests through: each request, its answer read to the end,
    within `timeout` seconds (a socket read timeout alone lets a server that sends a byte a second
    keep a run going for ever); all of them within `deadline` seconds of the first; no answer
    larger than MAX_ANSWER_BYTES. The request runs on a worker thread that the caller stops
    waiting for at the deadline (it ends at its next read, or with its socket's timeout)."""

    def __init__(self, timeout: float, deadline: float) -> None:
        import requests
        self._session = requests.Session()
        self.timeout, self.deadline = timeout, deadline
        self._end = None

    def __getattr__(self, name):            # verify, cert, proxies, mount…: the real session's
        return getattr(self._session, name)

    def __setattr__(self, name, value):
        if name in ("verify", "cert", "proxies", "headers", "auth", "trust_env"):
            setattr(self._session, name, value)
        else:
            object.__setattr__(self, name, value)

    def request(self, method, url, **kw):
        import threading
        import time
        now = time.monotonic()
        if self._end is None:
            self._end = now + self.deadline
        left = self._end - now
        if left <= 0:
            raise OutOfTime("deadline", self.deadline)
        limit, kind = (self.timeout, "request") if self.timeout <= left else (left, "deadline")
        stop = threading.Event()
        done: dict = {}

        def run():
            try:
                done["r"] = self._fetch(method, url, kw, limit, stop, done)
            except BaseException as e:       # reported by the caller's thread
                done["e"] = e
        t = threading.Thread(target=run, daemon=True, name="diagnose-prometheus")
        t.start()
        t.join(limit)
        if t.is_alive():
            stop.set()
            if kind == "request" and "answered" not in done:
                kind = "silent"         # not even the answer's headers came
            raise OutOfTime(kind, self.deadline if kind == "deadline" else self.timeout)
        if "e" in done:
            raise done["e"]
        return done["r"]

    def _fetch(self, method, url, kw, limit, stop, done):
        kw = dict(kw, stream=True, timeout=limit)
        r = self._session.request(method, url, **kw)
        done["answered"] = True
        try:
            size = int(r.headers.get("Content-Length") or 0)
        except ValueError:
            size = 0
        if size > MAX_ANSWER_BYTES:
            r.close()
            raise AnswerTooBig()
        parts, size = [], 0
        for chunk in r.iter_content(1 << 16):
            if stop.is_set():
                r.close()
                return r
            size += len(chunk)
            if size > MAX_ANSWER_BYTES:
                r.close()
                raise AnswerTooBig()
            parts.append(chunk)
        r._content = b"".join(parts)        # what response.json() reads
        r._content_consumed = True
        return r


def _request_error(e: Exception, url: str, timeout: float) -> PromError:
    """A failed HTTP request → one line saying what went wrong: a read timeout, an untrusted TLS
    certificate, a refused connection… (with retries off, urllib3 wraps each of them in a
    MaxRetryError that requests turns into a plain ConnectionError)."""
    import ssl
    import requests
    from urllib3 import exceptions as u3
    if isinstance(e, AnswerTooBig):
        return PromError(f"{url}: an answer larger than {MAX_ANSWER_BYTES >> 20} MiB (not read further): "
                         f"narrow the window (--since), widen --step, or --match fewer series")
    if isinstance(e, OutOfTime):
        if e.kind == "deadline":
            return PromError(f"{url}: the queries took more than {e.seconds:g} s in all (--deadline); "
                             f"--partial reports what was fetched by then")
        if e.kind == "silent":
            return PromError(f"{url}: no answer within {e.seconds:g} s")
        return PromError(f"{url}: no complete answer within {e.seconds:g} s (--timeout)")
    reason = e.args[0] if e.args else None
    reason = getattr(reason, "reason", None) or reason          # MaxRetryError → what urllib3 met
    text = str(e)
    if isinstance(e, getattr(requests.exceptions, "JSONDecodeError", ())):
        return PromError(f"{url}: the answer is not Prometheus JSON (an HTML page or a proxy error?)")
    if isinstance(e, requests.exceptions.SSLError):
        inner = next((a for a in getattr(reason, "args", ()) if isinstance(a, ssl.SSLError)), None)
        if isinstance(inner, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in text:
            why = getattr(inner, "verify_message", None) or "certificate verify failed"
            return PromError(f"{url}: TLS certificate not trusted ({why}); pass --insecure to skip verification")
        why = getattr(inner, "reason", None) or "handshake failed"
        hint = ": is it a plain http:// server?" if "WRONG_VERSION_NUMBER" in text or "wrong version number" in text else ""
        return PromError(f"{url}: TLS handshake failed ({str(why).lower().replace('_', ' ')}){hint}")
    # NewConnectionError (refused, unknown host) is a ConnectTimeoutError to urllib3: it goes first.
    if isinstance(reason, getattr(u3, "NameResolutionError", ())) or "Failed to resolve" in text \
            or "Name or service not known" in text:
        return PromError(f"{url}: cannot connect (host name not found)")
    if isinstance(reason, u3.NewConnectionError):
        why = "connection refused: " if "refused" in text.lower() else ""
        return PromError(f"{url}: cannot connect ({why}is Prometheus running?)")
    if isinstance(e, requests.exceptions.ConnectTimeout) or isinstance(reason, u3.ConnectTimeoutError):
        return PromError(f"{url}: cannot connect within {timeout:g} s (no answer to the connection attempt)")
    if isinstance(e, requests.exceptions.Timeout) or isinstance(reason, (u3.ReadTimeoutError, u3.TimeoutError)):
        return PromError(f"{url}: no answer within {timeout:g} s")
    if isinstance(reason, u3.ProtocolError):
        return PromError(f"{url}: the server closed the connection without answering")
    if isinstance(e, requests.exceptions.ConnectionError):
        return PromError(f"{url}: cannot connect (is Prometheus running?)")
    if isinstance(e, (requests.exceptions.MissingSchema, requests.exceptions.InvalidSchema,
                      requests.exceptions.InvalidURL)):
        return PromError(f"{url}: not a usable URL (it needs http:// or https:// and a host)")
    return PromError(f"{url}: request failed ({e.__class__.__name__})")


# -- live server: the queries, as small producers -----------------------------------------------
# Each producer declares the families it reads and what it makes (stats columns, facts, window
# figures); `fetch` runs them in order. Series producers add range queries to the plan (one
# column per step and instance); window producers ask one instant query each over the whole window.
PRODUCERS: list[tuple[str, str, str, str]] = []      # (name, kind "series"|"window", reads, makes)


def _producer(kind: str, reads: str, makes: str):
    def mark(fn):
        PRODUCERS.append((fn.__name__.lstrip("_"), kind, reads, makes))
        return fn
    return mark


class _Live:
    """One fetch: the client, the window, the selector, and what has been fetched so far."""

    def __init__(self, pc, url: str, start: datetime, end: datetime, step: str, match: str, timeout: float) -> None:
        self.pc, self.url, self.start, self.end, self.step, self.timeout = pc, url, start, end, step, timeout
        self.match = match
        sel = match.strip()
        self.inner = sel[1:-1].strip() if sel.startswith("{") and sel.endswith("}") else sel
        self.by = "instance"
        self.names: set = set()
        self.notes: list[str] = []
        self.fetched: dict[str, Evidence] = {}
        self.counted: set = set()           # columns a counter measures (a gauge of them is the fallback)
        self.span = (end - start).total_seconds()
        self.step_s, self.win, self.hwin = 15, "60s", "300s"

    def sel(self, metric: str) -> str:
        return f"{metric}{{{self.inner}}}" if self.inner else metric

    def range(self, expr: str):
        try:
            return self.pc.custom_query_range(expr, start_time=self.start, end_time=self.end, step=self.step)
        except Exception as e:
            raise _api_failure(e, self.url, self.timeout, "query failed") from None

    def instant(self, expr: str) -> list:
        try:
            return self.pc.custom_query(expr, params={"time": f"{self.end.timestamp():.3f}"}) or []
        except Exception:             # the series above still stand; this figure stays unknown
            return []

    def per_instance(self, expr: str):
        """(instance, value) of an instant query's answer, for the instances fetched."""
        for series in self.instant(expr):
            labels = series.get("metric", {})
            inst, val = instance_of(labels) or "all", _finite((series.get("value") or [None, None])[1])
            if inst in self.fetched and val is not None:
                yield inst, val, labels

    def resolution(self) -> None:
        """Query resolution: Prometheus refuses more than 11,000 points per series, so a long window
        gets a wider step (said in a note) instead of an error. Rate windows hold at least four
        scrapes (a [1m] window over a 60 s scrape interval holds one sample, and rate() then has
        nothing to say) and at least one step, as Grafana's $__rate_interval does."""
        step_s = max(1, int(parse_since(self.step).total_seconds()))
        if self.span / step_s > MAX_POINTS:
            step_s = math.ceil(self.span / MAX_POINTS)
            self.notes.append(f"step widened to {step_s}s: {self.span / 3600:.3g} h at --step {self.step} is more than "
                              f"Prometheus' 11,000 points per query")
        self.step, self.step_s = f"{step_s}s", step_s
        interval = _scrape_interval(self.pc, self.names, self.sel, self.end) or DEFAULT_SCRAPE_S
        self.win = f"{int(max(4 * interval, step_s + interval))}s"
        self.hwin = f"{int(max(300, 4 * interval, step_s))}s"
        # A counter's rate is the column; a gauge of the same column (`gauge:` in the plan) only for
        # an instance that has no such counter (in a mixed fleet one replica may have either).
        self.counted = {col for m, (col, how) in COUNTERS.items() if how == "rate" and m in self.names} | \
            {col for (num, den), (col, _) in RATIOS.items() if num in self.names and den in self.names}


def _api_failure(e: Exception, url: str, timeout: float, what: str) -> PromError:
    """A failed API call → one line: the request's own failure, a body that is not JSON, a refusal
    (401/403), or what Prometheus said."""
    import requests
    if isinstance(e, PromError):
        return e
    if isinstance(e, (requests.exceptions.RequestException, AnswerTooBig, OutOfTime)):   # before ValueError: InvalidURL is both
        return _request_error(e, url, timeout)
    if isinstance(e, ValueError):          # prometheus-api-client raises on non-JSON bodies
        return PromError(f"{url}: the answer is not Prometheus JSON (an HTML page or a proxy error?)")
    msg = api_error_text(e)                # PrometheusApiClientException carries the HTTP status
    if "401" in msg or "403" in msg:
        return PromError(f"{url}: access refused ({msg}); pass --prometheus-token-file or credentials")
    return PromError(f"{url}: {what} ({msg})")


def _client(url: str, token, user, password, insecure: bool, timeout: float, deadline):
    """(PrometheusConnect, the URL as shown): credentials in the URL are sent as basic auth and
    never shown; no silent retries; every request within `timeout`, all within `deadline`."""
    from prometheus_api_client import PrometheusConnect
    url, url_auth = split_credentials(url)
    if user is None and url_auth:
        user, password = url_auth
    if not url.lower().startswith(("http://", "https://")):
        raise PromError(f"{url}: not a usable URL (it needs http:// or https:// and a host)")
    if not timeout > 0:
        raise PromError(f"--timeout must be > 0 (got {timeout:g})")
    headers = {"Authorization": f"Bearer {token}"} if token else None
    if user is not None and not token:      # basic auth as a header: every prometheus-api-client sends it
        import base64
        pair = base64.b64encode(f"{user}:{password or ''}".encode("utf-8")).decode("ascii")
        headers = {"Authorization": f"Basic {pair}"}
    if insecure:     # the user asked for it: not one InsecureRequestWarning per query
        import warnings
        from urllib3.exceptions import InsecureRequestWarning
        warnings.filterwarnings("ignore", category=InsecureRequestWarning)
    from urllib3.util.retry import Retry
    # No silent retries: a hanging or failing server must answer within --timeout, once.
    no_retry = Retry(total=0, connect=0, read=0, status=0, raise_on_status=False)
    session = BoundedSession(timeout, deadline if deadline is not None else DEADLINE_TIMES * timeout)
    session.verify = not insecure
    try:
        pc = PrometheusConnect(url=url, headers=headers, disable_ssl=insecure, auth=None, timeout=timeout, retry=no_retry,
                               session=session)
    except TypeError:      # older prometheus-api-client without `timeout`
        pc = PrometheusConnect(url=url, headers=headers, disable_ssl=insecure, session=session)
    return pc, url


# -- series producers: range queries, one stats column per step and instance ----------------------
@_producer("series", "engine gauges (GAUGES, LABELLED_GAUGES)",
           "running, waiting, kv_usage, swapped, prefix_hit, spec_accept; gauge:<col> fallbacks of counted columns")
def _plan_gauges(L: _Live) -> list:
    plan = []
    for m, (col, scale, how) in GAUGES.items():
        if m in L.names and col:
            # `>= 0`: -1 is "no data yet" (vLLM V0's hit rate), not a measurement
            plan.append((("gauge:" if col in L.counted else "") + col, f"{how} by ({L.by}) ({L.sel(m)} >= 0) * {scale}", m))
    for (m, lab), (col, scale, how) in LABELLED_GAUGES.items():
        if m in L.names:
            sel = f"{m}{{{L.inner + ',' if L.inner else ''}{lab}}}"
            plan.append((col, f"{how} by ({L.by}) ({sel} >= 0) * {scale}", m))
    return plan


@_producer("series", "one gauge per engine (the probe), up, process_start_time_seconds",
           "facts engine, model, node_role; last_seen; down all the window; restart events and notes")
def _plan_probes(L: _Live) -> list:
    # One probe per engine (and per shared family): in a mixed fleet each replica's model, up
    # and restarts come from its own engine's series, not from the first engine's.
    probes: dict[str, str] = {}
    for m in [*GAUGES, *(m for m, _ in LABELLED_GAUGES)]:
        if m in L.names:
            probes.setdefault(engine_of(m) or m.partition("_")[0], m)
    plan, by = [], L.by
    for probe in probes.values():
        # The served model of each instance: the aggregations above drop its label.
        plan.append(("label:model", f"count by ({by}, model_name, model, name, engine_type) ({L.sel(probe)})", probe))
        # When each instance was really last scraped: a range query repeats the last sample for
        # Prometheus' 5-minute lookback, which hid a replica gone for 7 minutes.
        plan.append(("seen:", f"max by ({by}) (timestamp({L.sel(probe)}))", probe))
    if "up" in L.names and probes:
        # Targets Prometheus scraped and found down: one down for the whole window has no
        # engine series at all, and would vanish from the fleet without this. Only the jobs
        # that scrape engines (not node exporters and the like).
        up_sel = f"up{{{L.inner}}}" if L.inner else "up"
        jobs = " or ".join(f"count by (job) ({L.sel(p_)})" for p_ in probes.values())
        plan.append(("up:", f"max by ({by}) ({up_sel} and on (job) ({jobs}))", "up"))
    if "process_start_time_seconds" in L.names and probes:
        # Restarts: the process start time of each engine's instance changes (counters began
        # again at zero there; a gap before it is a restart, not a replica lost).
        st_sel = f"process_start_time_seconds{{{L.inner}}}" if L.inner else "process_start_time_seconds"
        groups = " or ".join(f"group by ({by}) ({L.sel(p_)})" for p_ in probes.values())
        plan.append(("start:", f"max by ({by}) ({st_sel} and on ({by}) ({groups}))", "process_start_time_seconds"))
    return plan


@_producer("series", "engine counters (COUNTERS, RATIOS)",
           "gen_tps, prompt_tps (rates); preemptions (counts); prefix_hit, prompt_len, spec_accept (ratios)")
def _plan_counters(L: _Live) -> list:
    plan = []
    for m, (col, how) in COUNTERS.items():
        if m in L.names:
            if how == "rate":
                plan.append((col, f"sum by ({L.by}) (rate({L.sel(m)}[{L.win}]))", m))
            else:
                # Counts (preemptions, retractions): the raw counter per series, differenced
                # here step by step (resets handled). Summing increase(...[W]) sampled every
                # step counts each event W/step times; one difference per step counts it once.
                plan.append(("count:" + col, L.sel(m), m))
    for (num, den), (col, scale) in RATIOS.items():
        if num in L.names and den in L.names:    # 0/0 (nothing asked in a step) is NaN: unknown, skipped
            plan.append((col, f"sum by ({L.by}) (rate({L.sel(num)}[{L.win}])) / "
                              f"sum by ({L.by}) (rate({L.sel(den)}[{L.win}])) * {scale}", num))
    return plan


@_producer("series", "KV-usage gauges", "kv_spread (data-parallel engines of one instance)")
def _plan_kv_spread(L: _Live) -> list:
    # Data-parallel engines each fill their own cache: how far apart the fullest and the emptiest
    # are (only where an instance has more than one engine).
    return [("kv_spread", f"(max by ({L.by}) ({L.sel(m)}) - min by ({L.by}) ({L.sel(m)})) * {scale}"
                          f" and on ({L.by}) (count by ({L.by}) ({L.sel(m)}) > 1)", m)
            for m, (col, scale, how) in GAUGES.items() if m in L.names and col == "kv_usage"]


@_producer("series", "latency histograms (HISTOGRAMS)", "ttft_p50/p95/p99, itl_p50/p95/p99 (rolling quantiles)")
def _plan_histograms(L: _Live) -> list:
    return [(f"{kind}_{qn}", f"histogram_quantile({qv}, sum by (le, {L.by}) (rate({L.sel(fam + '_bucket')}[{L.hwin}])))", fam)
            for fam, kind in HISTOGRAMS.items() if fam + "_bucket" in L.names
            for qn, qv in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))]


@_producer("series", "configuration gauges (FACT_GAUGES), vllm:cache_config_info",
           "facts max_num_seqs, kv_cache_tokens, max_model_len, …; block_size, num_gpu_blocks, prefix_caching, kv_cache_dtype")
def _plan_facts(L: _Live) -> list:
    plan = [(f"fact:{fact}", f"max by ({L.by}) ({L.sel(m)})", m) for m, fact in FACT_GAUGES.items() if m in L.names]
    if "vllm:cache_config_info" in L.names:
        plan.append(("info:cache_config", L.sel("vllm:cache_config_info"), "vllm:cache_config_info"))
    return plan


SERIES_PRODUCERS = (_plan_gauges, _plan_probes, _plan_counters, _plan_kv_spread, _plan_histograms, _plan_facts)


class _Rows:
    """What the range queries gave: stats rows by (instance, time), when each instance was last
    really scraped, and the instances scraped as down all the window."""

    def __init__(self) -> None:
        self.rows: dict = {}
        self.seen: dict[str, float] = {}       # instance -> time of its last real sample (epoch s)
        self.down_all: set[str] = set()         # instances scraped as down (up == 0) all the window

    def row(self, L: _Live, inst: str, when: datetime) -> dict:
        return self.rows.setdefault((inst, when), {"time": when, "source": L.url, "line": None, "engine_idx": 0})


def _labels_of(L: _Live, col: str, metric: str, labels: dict) -> tuple[str, Evidence]:
    """The instance a series belongs to, its Evidence, and what its labels say: engine, model,
    node role, speculative decoding configured."""
    inst = instance_of(labels) or "all"
    ev = L.fetched.setdefault(inst, Evidence())
    ev.clock_zone = "UTC"
    eng = engine_of(metric)
    if eng:
        ev.set_fact("engine", eng, override=False)
    model = model_of(metric, labels)
    if model:
        ev.set_fact("model", model, L.url, None, f"model label ({metric})", override=False)
    _role(labels, inst, ev, L.url, None, metric)
    if col.rpartition(":")[2] == SPEC_COL:
        ev.set_fact("speculative", True, L.url, None, f"{metric}: speculative-decoding metrics", override=False)
    return inst, ev


def _finite_values(series: dict) -> list[float]:
    return [x for _, v in series.get("values", []) if (x := _finite(v)) is not None]


def _take_status(L: _Live, col: str, inst: str, ev: Evidence, series: dict, got: _Rows) -> None:
    """up (down all the window), process start time (restarts), last real sample (last seen)."""
    xs = _finite_values(series)
    if col == "up:":
        if xs and max(xs) == 0:
            got.down_all.add(inst)
    elif col == "start:":
        for before, after in zip(xs, xs[1:]):
            if after > before + 1:          # a new process (clock jitter is not one)
                when = datetime.fromtimestamp(after, tz=timezone.utc).replace(tzinfo=None)
                ev.add_event("restart", L.url, None, f"{inst}: process_start_time_seconds {before:.0f} → {after:.0f}", when)
                L.notes.append(f"{inst} restarted at {clock_at(when)} (its process start "
                               f"time changed): counters began again at zero, and warm-up follows")
    elif col == "seen:" and xs:
        got.seen[inst] = max(got.seen.get(inst, 0.0), max(xs))


def _take(L: _Live, col: str, metric: str, series: dict, got: _Rows) -> None:
    """One series of a range query's answer into the rows (or facts) of its instance."""
    labels = series.get("metric", {})
    inst, ev = _labels_of(L, col, metric, labels)
    if col.startswith("info:"):
        _cache_config(labels, L.url, 1, ev)
        return
    if col.startswith("label:"):          # the model fact was set above
        return
    if col in ("up:", "start:", "seen:"):
        _take_status(L, col, inst, ev, series, got)
        return
    if col.startswith("count:"):
        for when, inc in _increments(series.get("values", [])):
            row = got.row(L, inst, when)
            row[col[6:]] = row.get(col[6:], 0.0) + inc
        return
    for ts, val in series.get("values", []):
        try:
            v = float(val)
        except (TypeError, ValueError):
            continue
        if not math.isfinite(v):      # NaN: histogram_quantile with no data; ±Inf: no value either
            continue
        try:
            when = datetime.fromtimestamp(float(ts), tz=timezone.utc).replace(tzinfo=None)
        except (TypeError, ValueError, OverflowError, OSError):
            continue
        if col.startswith("fact:"):
            f = col[5:]
            ev.set_fact(f, int(v) if f in INT_FACTS else v, L.url, None, f"{metric} = {v:g}")
            continue
        got.row(L, inst, when)[col] = v


def _run_plan(L: _Live, plan: list, partial: bool) -> _Rows:
    got = _Rows()
    for col, expr, metric in plan:
        try:
            result = L.range(expr)
        except PromError:
            if partial and got.rows:
                L.notes.append(f"partial data (--partial): {metric} and later queries could not be fetched; "
                               f"the report uses what was fetched")
                break
            raise
        for series in result:
            _take(L, col, metric, series, got)
    return got


def _finish_instances(L: _Live, got: _Rows) -> None:
    """Rows → each instance's stats (a gauge of a counted column only where no counter measured
    it), instances down all the window, last real sample."""
    measured = {(inst, c) for (inst, _), row in got.rows.items() for c in L.counted if row.get(c) is not None}
    for (inst, when), row in sorted(got.rows.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        for c in L.counted:
            x = row.pop("gauge:" + c, None)
            if x is not None and (inst, c) not in measured:
                row[c] = x
        finish_row(row)
        L.fetched[inst].add_stats(row)
        L.fetched[inst].last_seen = when
    for inst in got.down_all:
        ev = L.fetched[inst]
        if not ev.stats_rows:              # no engine series: down since before the window
            ev.counters["scrape_down_all_window"] = 1
            eng = next((e for p_, e in ENGINE_OF for m in L.names if m.startswith(p_)), None)
            if eng:
                ev.set_fact("engine", eng, override=False)
        else:
            ev.counters.pop("scrape_down_all_window", None)
    for inst in [i for i, e in L.fetched.items() if not e.stats_rows and not e.counters.get("scrape_down_all_window")]:
        del L.fetched[inst]                  # only the `up` series, and it was up: nothing to say
    for inst, ts in got.seen.items():
        if inst in L.fetched:
            L.fetched[inst].last_seen = datetime.fromtimestamp(ts, tz=timezone.utc).replace(tzinfo=None)


# -- window producers: one instant query each, over the whole window ------------------------------
def _whole_window(L: _Live) -> str:
    return f"{max(int(L.span), 60)}s"


def _window_ratio(L: _Live, num: str, den: str, key: str, scale: float = 1) -> None:
    """One counter's increase over the window divided by another's, per instance: a histogram's
    mean (sum / count), a hit rate, a prompt length."""
    w = _whole_window(L)
    for inst, val, _ in L.per_instance(f"sum by ({L.by}) (increase({L.sel(num)}[{w}])) / "
                                       f"sum by ({L.by}) (increase({L.sel(den)}[{w}])) * {scale}"):
        L.fetched[inst].values[f"window_{key}"] = [val]


@_producer("window", "latency and stage histograms (HISTOGRAMS, STAGE_HISTOGRAMS), iteration_tokens",
           "window_<kind>_mean/p50/p95/p99 (with their bounds), window_requests")
def _window_histograms(L: _Live) -> None:
    """Latency quantiles of the whole window, from each histogram's increase over it (what a
    dashboard's "p95 over the last 2 h" means), beside the rolling 5-minute series; and where a
    request's time goes (queue, prefill, decode, end to end), over the window."""
    w = _whole_window(L)
    for fam, kind in {**HISTOGRAMS, **STAGE_HISTOGRAMS}.items():
        if fam + "_bucket" not in L.names or not L.fetched:
            continue
        if fam + "_sum" in L.names and fam + "_count" in L.names:
            _window_ratio(L, fam + "_sum", fam + "_count", f"{kind}_mean")
        if kind in ("ttft", "e2e") and fam + "_count" in L.names:
            # Requests that finished (or got a first token) in the window: work, whatever
            # the gauges said at the moments they were scraped.
            for inst, val, _ in L.per_instance(f"sum by ({L.by}) (increase({L.sel(fam + '_count')}[{w}]))"):
                have = L.fetched[inst].values.get("window_requests") or [0.0]
                L.fetched[inst].values["window_requests"] = [max(val, have[0])]
        # One query for the buckets' increase; the three quantiles are read off it here.
        per_inst: dict[str, list] = {}
        for series in L.instant(f"sum by (le, {L.by}) (increase({L.sel(fam + '_bucket')}[{w}]))"):
            labels = series.get("metric", {})
            le, c = _finite(labels.get("le")), _finite((series.get("value") or [None, None])[1])
            if le is None and labels.get("le") == "+Inf":
                le = math.inf
            if le is not None and c is not None:
                per_inst.setdefault(instance_of(labels) or "all", []).append((le, c))
        for inst, buckets in per_inst.items():
            if inst in L.fetched:      # a bound where the rank is in the lowest or the +Inf bucket
                put_window(L.fetched[inst].values, "window", kind, quantiles(buckets))


@_producer("window", "counter pairs (RATIOS)", "window_prefix_hit, window_prompt_len, window_spec_accept")
def _window_ratios(L: _Live) -> None:
    # Totals divided, not a mean of per-step ratios: a quiet step weighs what it asked.
    for (num, den), (col, scale) in RATIOS.items():
        if num in L.names and den in L.names and L.fetched:
            _window_ratio(L, num, den, col, scale)


@_producer("window", "request counters (WINDOW_COUNTERS)", "window_finished, window_finished:<reason>, window_aborted")
def _window_counters(L: _Live) -> None:
    for m, (key, label) in WINDOW_COUNTERS.items():
        if m not in L.names or not L.fetched:
            continue
        split = f", {label}" if label else ""
        for inst, val, labels in L.per_instance(f"sum by ({L.by}{split}) (increase({L.sel(m)}[{_whole_window(L)}]))"):
            put_count(L.fetched[inst].values, "window", key, labels.get(label) if label else None, val)


WINDOW_PRODUCERS = (_window_histograms, _window_ratios, _window_counters)


def fetch(url: str, start: datetime, end: datetime, step: str = "15s", match: str = "", token: str | None = None,
          user: str | None = None, password: str | None = None, insecure: bool = False, timeout: float = 30.0,
          partial: bool = False, deadline: float | None = None) -> tuple[dict[str, Evidence], list[str]]:
    """Range-query every known family; returns ({instance: Evidence}, notes). Raises PromError.
    `timeout`: the most one request may take, answer read to its end; `deadline`: the most all of
    them may take together (default DEADLINE_TIMES × timeout)."""
    # From here on `url` is the URL without credentials (every message, note and evidence row names it).
    pc, url = _client(url, token, user, password, insecure, timeout, deadline)
    L = _Live(pc, url, start, end, step, match, timeout)
    try:
        try:
            L.names = set(pc.all_metrics())
        except Exception as e:
            raise _api_failure(e, url, timeout, "cannot list metric names") from None
        if L.inner:
            _check_match(pc, match, L.inner, url, timeout)
        L.resolution()
        plan = [item for produce in SERIES_PRODUCERS for item in produce(L)]
        if not plan:
            raise PromError(f"{url}: no vLLM, SGLang, TensorRT-LLM (trtllm-serve, Triton), Dynamo or forge metrics found"
                            + (f" matching {match}" if match else ""))
        _finish_instances(L, _run_plan(L, plan, partial))
        for produce in WINDOW_PRODUCERS:
            produce(L)
    except PromError:
        if partial and L.fetched:
            L.notes.append("partial data (--partial): the server failed part-way; the report uses what was fetched")
            return L.fetched, L.notes
        raise
    return L.fetched, L.notes


def _check_match(pc, match: str, inner: str, url: str, timeout: float) -> None:
    """A --match Prometheus cannot parse (`{job=}`, a bad regex), said as such, once, before any
    query built around it: `--match '{job=}': parse error: unexpected "}" …` (the position
    Prometheus gives is in the query diagnose wrote, so it is left out)."""
    try:
        pc.custom_query(f"count(up{{{inner}}})")
    except Exception as e:
        err = _api_failure(e, url, timeout, "query failed")
        text = str(err)             # `URL: query failed (HTTP 400 bad_data: …)`
        if " bad_data: " in text and text.endswith(")"):
            raise PromError(f"--match {printable_line(match, 120)}: not a label selector Prometheus accepts "
                            f"({text.split(' bad_data: ', 1)[1][:-1]})") from None
        raise err from None


MAX_POINTS = 10_000            # per range query; Prometheus' own limit is 11,000
DEFAULT_SCRAPE_S = 60.0        # when the samples do not tell: a window sized for 60 s still works at 15 s


def _scrape_interval(pc, names: set, sel_for, end: datetime) -> float | None:
    """The scrape interval, read off the raw samples of one gauge over the last 10 minutes of the
    window (the median spacing): rate windows are sized from it."""
    # Every known gauge at once: the first one the server has may belong to another engine than
    # the one --match selects (its answer empty, the interval then guessed at 60 s).
    present = [m for m in GAUGES if m in names]
    if not present:
        return None
    sel = sel_for("__x__").replace("__x__{", "{").replace("__x__", "{}")
    sel = sel[:-1] + ("," if sel != "{}" else "") + f'__name__=~"{"|".join(present)}"}}'
    try:
        result = pc.custom_query(f"{sel}[10m]", params={"time": f"{end.timestamp():.3f}"})
    except Exception:          # a failure here is reported by the range queries that follow
        return None
    gaps = []
    for series in result or []:
        ts = [float(t) for t, _ in series.get("values", [])]
        gaps += [b - a for a, b in zip(ts, ts[1:]) if b > a]
    if not gaps:
        return None
    gaps.sort()
    return gaps[len(gaps) // 2]


def _increments(values: list) -> list[tuple[datetime, float]]:
    """A counter's raw values at each step → (time, increase since the previous step). A drop is
    a restart: the counter began again at zero, so the new value is the increase."""
    out, prev = [], None
    for ts, val in values:
        v = _finite(val)
        try:
            when = datetime.fromtimestamp(float(ts), tz=timezone.utc).replace(tzinfo=None)
        except (TypeError, ValueError, OverflowError, OSError):
            continue
        if v is None:
            continue
        if prev is not None:
            out.append((when, v - prev if v >= prev else v))
        prev = v
    return out


def parse_since(text: str) -> timedelta:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd])", text.strip())
    if not m:
        raise ValueError(f"not a duration: {text!r} (e.g. 30m, 2h, 1d)")
    n, unit = float(m.group(1)), m.group(2)
    return timedelta(seconds=n * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit])
