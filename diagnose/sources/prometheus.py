"""Prometheus → evidence: saved `/metrics` scrapes (one or several, with or without timestamps),
saved `query_range` JSON, and a live server through prometheus-api-client.

Every engine's metric families map onto the same stats columns the log parsers fill; each
`instance` (or `pod`) becomes its own deployment, so a fleet is diagnosed replica by replica.
"""
from __future__ import annotations

import json
import math
import re
from datetime import datetime, timedelta, timezone

from ..evidence.model import Evidence, InputInfo
from .reader import InputError

# Gauges: metric → (stats column, scale, how instances' engines combine)
GAUGES = {
    "vllm:num_requests_running": ("running", 1, "sum"), "vllm:num_requests_waiting": ("waiting", 1, "sum"),
    "vllm:kv_cache_usage_perc": ("kv_usage", 100, "avg"), "vllm:gpu_cache_usage_perc": ("kv_usage", 100, "avg"),
    "vllm:num_requests_swapped": ("swapped", 1, "sum"),
    "sglang:num_running_reqs": ("running", 1, "sum"), "sglang:num_queue_reqs": ("waiting", 1, "sum"),
    "sglang:token_usage": ("kv_usage", 100, "avg"), "sglang:gen_throughput": ("gen_tps", 1, "sum"),
    "sglang:cache_hit_rate": ("prefix_hit", 100, "avg"),
    "trtllm_num_requests_running": ("running", 1, "sum"), "trtllm_num_requests_waiting": ("waiting", 1, "sum"),
    "trtllm_kv_cache_utilization": ("kv_usage", 100, "avg"),
    "nv_trt_llm_request_metrics": (None, 1, "sum"),
    "forge_active_sessions": ("running", 1, "sum"), "forge_queue_depth": ("waiting", 1, "sum"),
}
# Counters → per-second rates (or per-step increases)
COUNTERS = {
    "vllm:generation_tokens_total": ("gen_tps", "rate"), "vllm:prompt_tokens_total": ("prompt_tps", "rate"),
    "vllm:num_preemptions_total": ("preemptions", "increase"),
    "sglang:generation_tokens_total": ("gen_tps", "rate"), "sglang:prompt_tokens_total": ("prompt_tps", "rate"),
    "sglang:num_retracted_reqs": ("preemptions", "increase"),
    "trtllm_generation_tokens_total": ("gen_tps", "rate"), "trtllm_prompt_tokens_total": ("prompt_tps", "rate"),
}
# Histograms → quantiles
HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": "ttft", "vllm:inter_token_latency_seconds": "itl",
    "vllm:time_per_output_token_seconds": "itl", "sglang:time_to_first_token_seconds": "ttft",
    "sglang:inter_token_latency_seconds": "itl", "sglang:time_per_output_token_seconds": "itl",
    "trtllm_time_to_first_token_seconds": "ttft", "trtllm_time_per_output_token_seconds": "itl",
    "forge_ttft_seconds": "ttft",
}
# Single values that are configuration facts
FACT_GAUGES = {"sglang:max_total_num_tokens": "kv_cache_tokens", "sglang:max_running_requests": "max_num_seqs",
               "sglang:context_len": "max_model_len", "forge_max_sessions": "max_sessions",
               "forge_max_queue_depth": "max_queue_depth", "trtllm_max_num_active_requests": "max_num_seqs"}
ENGINE_OF = (("vllm:", "vllm"), ("sglang:", "sglang"), ("sglang_", "sglang"), ("trtllm", "trtllm"),
             ("nv_trt_llm", "trtllm"), ("nv_inference", "trtllm"))
METRIC_LINE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+(?P<ts>-?\d+(?:\.\d+)?))?\s*$")
MAX_TS = 32503680000.0     # year 3000, in seconds: later sample times are damage, not dates
FAMILIES = ("vllm:", "sglang:", "sglang_", "trtllm_", "nv_trt_llm_", "nv_inference_", "forge_")


def sniff_prometheus(head: bytes) -> str | None:
    text = head[:65536].decode("utf-8", "replace")
    s = text.lstrip()
    if s.startswith("{") and '"resultType"' in text and '"result"' in text:
        return "query_range"
    if re.search(r"^(?:vllm:|sglang:|sglang_|trtllm_|nv_trt_llm_|nv_inference_|forge_)\w*(?:\{|\s)", text, re.M):
        return "exposition"
    return None


def instance_of(labels: dict) -> str:
    return labels.get("instance") or labels.get("pod") or labels.get("hostname") or labels.get("Hostname") or ""


# -- saved files ----------------------------------------------------------------------------
def load_exposition(text: str, source: str, ev: Evidence) -> InputInfo:
    """One or several scrapes of `/metrics`. Without timestamps a new scrape starts when a series
    repeats; counters then become rates only if the scrapes carry times."""
    from prometheus_client.parser import text_string_to_metric_families
    info = InputInfo(path=source, kind="prometheus-scrape", lines=text.count("\n") + 1)
    scrape = 0
    seen: set = set()
    samples = []      # (scrape, ts, name, labels, value, line)
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith(("$", ">")):
            if line.startswith("#"):
                info.recognised_lines += 1
            continue
        m = METRIC_LINE.match(re.sub(r'",\s+', '",', line))
        if not m:
            continue
        try:
            fams = list(text_string_to_metric_families(m.group(0) + "\n"))
        except (ValueError, TypeError):
            info.errors.append(f"line {i}: unreadable sample") if len(info.errors) < 20 else None
            continue
        for fam in fams:
            for s in fam.samples:
                key = (s.name, tuple(sorted(s.labels.items())))
                if key in seen and m.group("ts") is None:
                    scrape += 1
                    seen = set()
                seen.add(key)
                samples.append((scrape, s.timestamp, s.name, dict(s.labels), s.value, i))
        info.recognised_lines += 1
    if not samples:
        raise InputError(f"{source}: no Prometheus samples could be read")
    info.unrecognised_lines = max(0, info.lines - info.recognised_lines)
    _from_samples(samples, source, ev, info)
    return info


def load_query_range(text: str, source: str, ev: Evidence) -> InputInfo:
    info = InputInfo(path=source, kind="prometheus-query-range", lines=text.count("\n") + 1)
    try:
        doc = json.loads(text)
        result = doc["data"]["result"]
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        raise InputError(f"{source}: not a Prometheus query_range response ({e})") from None
    samples = []
    for series in result:
        labels = dict(series.get("metric", {}))
        name = labels.pop("__name__", "")
        for ts, val in series.get("values", []) or ([series["value"]] if "value" in series else []):
            try:
                samples.append((0, float(ts), name, labels, float(val), 1))
            except (TypeError, ValueError):
                continue
    info.recognised_lines = info.lines
    _from_samples(samples, source, ev, info)
    return info


def _from_samples(samples: list, source: str, ev: Evidence, info: InputInfo) -> None:
    """Raw samples of one file → stats rows (one per scrape/time) and facts."""
    rows: dict = {}
    counters: dict = {}
    buckets: dict = {}
    engines = set()
    for scrape, ts, name, labels, value, line in samples:
        # A damaged scrape can say `NaN`, `+Inf`, `1e309` or 400 digits for a value, or carry a timestamp no
        # clock reaches (fromtimestamp() raised): no measurement, and no time, respectively.
        if not -1e300 < value < 1e300:     # NaN and ±Inf compare false; math.isfinite(10**400) raised
            continue
        if ts is not None and not (0 < ts < MAX_TS):
            ts = None
        fam = _family(name)
        for prefix, eng in ENGINE_OF:
            if name.startswith(prefix):
                engines.add(eng)
        when = datetime.fromtimestamp(ts, tz=timezone.utc).replace(tzinfo=None) if ts else None
        inst = instance_of(labels)
        if inst:
            ev.instances.add(inst)
        key = (scrape, when, inst)
        row = rows.setdefault(key, {"time": when, "source": source, "line": line, "engine_idx": 0, "instance": inst})
        model = labels.get("model_name") or (labels.get("name") if name.startswith("sglang") else None) \
            or (labels.get("model") if name.startswith(("nv_", "trtllm")) else None)
        if model:
            ev.set_fact("model", model, source, line, f"model label on {name}", override=False)
        if name.endswith("cache_config_info"):
            _cache_config(labels, source, line, ev)
            continue
        if name in GAUGES and GAUGES[name][0]:
            col, scale, how = GAUGES[name]
            row[col] = (row.get(col) or 0) + value * scale if how == "sum" else value * scale
        elif name in FACT_GAUGES:
            ev.set_fact(FACT_GAUGES[name], value if FACT_GAUGES[name] != "max_num_seqs" else int(value), source, line,
                        f"{name} = {value:g}")
        elif name in COUNTERS:
            counters.setdefault((name, tuple(sorted(labels.items()))), []).append((when, scrape, value, key))
        elif fam in HISTOGRAMS and name.endswith("_bucket") and "le" in labels:
            rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
            try:
                le = float(labels["le"])   # "+Inf" included; a damaged label (`+Inv`) drops the bucket
            except ValueError:
                continue
            if le != le:
                continue
            buckets.setdefault((fam, rest), {}).setdefault((scrape, when), {})[le] = (value, key)
    # counters → rates between consecutive scrapes that carry times
    for (name, _), pts in counters.items():
        col, how = COUNTERS[name]
        pts.sort(key=lambda p: (p[1], p[0] or datetime.min))
        for (t0, _, v0, _), (t1, _, v1, key1) in zip(pts, pts[1:]):
            if v1 < v0:      # counter reset
                continue
            if how == "increase":
                rows[key1][col] = (rows[key1].get(col) or 0) + (v1 - v0)
            elif t0 and t1 and t1 > t0:
                rows[key1][col] = (rows[key1].get(col) or 0) + (v1 - v0) / (t1 - t0).total_seconds()
    # histogram buckets → quantiles of what happened between consecutive scrapes
    for (fam, _), per_scrape in buckets.items():
        kind = HISTOGRAMS[fam]
        ordered = sorted(per_scrape.items(), key=lambda kv: (kv[0][0], kv[0][1] or datetime.min))
        for (_, prev), (_, cur) in zip(ordered, ordered[1:]):
            deltas = sorted((le, cur[le][0] - prev.get(le, (0, None))[0]) for le in cur)
            key1 = next(iter(cur.values()))[1]
            for qn, qv in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
                x = histogram_quantile(qv, deltas)
                if x is not None:
                    rows[key1][f"{kind}_{qn}"] = x
    for key in sorted(rows, key=lambda k: (k[2], k[0], k[1] or datetime.min)):
        r = rows[key]
        if any(r.get(c) is not None for c in ("running", "waiting", "kv_usage", "gen_tps")):
            ev.add_stats(r)
    if len(rows) <= 1:
        info.errors.append("a single scrape: configuration and current state only, no trends or rates")
        ev.counters["single_scrape"] = 1
    if engines:
        info.engine = sorted(engines)[0] if len(engines) == 1 else sorted(engines)[0]
        ev.set_fact("engine", info.engine, override=False)


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


def fetch(url: str, start: datetime, end: datetime, step: str = "15s", match: str = "", token: str | None = None,
          user: str | None = None, password: str | None = None, insecure: bool = False, timeout: float = 30.0,
          partial: bool = False) -> tuple[dict[str, Evidence], list[str]]:
    """Range-query every known family; returns ({instance: Evidence}, notes). Raises PromError."""
    from prometheus_api_client import PrometheusConnect
    import requests
    headers = {"Authorization": f"Bearer {token}"} if token else None
    auth = (user, password) if user else None
    from urllib3.util.retry import Retry
    # No silent retries: a hanging or failing server must answer within --timeout, once.
    no_retry = Retry(total=0, connect=0, read=0, status=0, raise_on_status=False)
    try:
        pc = PrometheusConnect(url=url, headers=headers, disable_ssl=insecure, auth=auth, timeout=timeout, retry=no_retry)
    except TypeError:      # older prometheus-api-client without `timeout`
        pc = PrometheusConnect(url=url, headers=headers, disable_ssl=insecure)
    sel = match.strip()
    inner = sel[1:-1].strip() if sel.startswith("{") and sel.endswith("}") else sel
    notes: list[str] = []
    fetched: dict[str, Evidence] = {}

    def q(expr: str):
        try:
            return pc.custom_query_range(expr, start_time=start, end_time=end, step=step)
        except requests.exceptions.Timeout:
            raise PromError(f"{url}: no answer within {timeout:g} s") from None
        except requests.exceptions.ConnectionError:
            raise PromError(f"{url}: cannot connect (is Prometheus running?)") from None
        except requests.exceptions.RequestException as e:
            raise PromError(f"{url}: request failed ({e.__class__.__name__})") from None
        except ValueError as e:     # prometheus-api-client raises on non-JSON bodies
            raise PromError(f"{url}: the answer is not Prometheus JSON (an HTML page or a proxy error?)") from None
        except Exception as e:      # PrometheusApiClientException carries the HTTP status
            msg = str(e).splitlines()[0][:160]
            if "401" in msg or "403" in msg:
                raise PromError(f"{url}: access refused ({msg}); pass --prometheus-token-file or credentials") from None
            raise PromError(f"{url}: query failed ({msg})") from None

    def sel_for(metric: str) -> str:
        return f'{metric}{{{inner}}}' if inner else metric

    try:
        try:
            names = set(pc.all_metrics())
        except ValueError:
            raise PromError(f"{url}: the answer is not Prometheus JSON (an HTML page or a proxy error?)") from None
        except requests.exceptions.Timeout:
            raise PromError(f"{url}: no answer within {timeout:g} s") from None
        except requests.exceptions.ConnectionError:
            raise PromError(f"{url}: cannot connect (is Prometheus running?)") from None
        except Exception as e:
            msg = str(e).splitlines()[0][:160]
            if "401" in msg or "403" in msg:
                raise PromError(f"{url}: access refused ({msg}); pass --prometheus-token-file or credentials") from None
            raise PromError(f"{url}: cannot list metric names ({msg})") from None
        by = "instance"
        plan = []
        for m, (col, scale, how) in GAUGES.items():
            if m in names and col:
                agg = "sum" if how == "sum" else "avg"
                plan.append((col, f"{agg} by ({by}) ({sel_for(m)}) * {scale}", m))
        for m, (col, how) in COUNTERS.items():
            if m in names:
                fn = "rate" if how == "rate" else "increase"
                plan.append((col, f"sum by ({by}) ({fn}({sel_for(m)}[1m]))", m))
        for fam, kind in HISTOGRAMS.items():
            if fam + "_bucket" in names:
                for qn, qv in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
                    plan.append((f"{kind}_{qn}", f"histogram_quantile({qv}, sum by (le, {by}) (rate({sel_for(fam + '_bucket')}[5m])))", fam))
        for m, fact in FACT_GAUGES.items():
            if m in names:
                plan.append((f"fact:{fact}", f"max by ({by}) ({sel_for(m)})", m))
        if "vllm:cache_config_info" in names:
            plan.append(("info:cache_config", sel_for("vllm:cache_config_info"), "vllm:cache_config_info"))
        if not plan:
            raise PromError(f"{url}: no vLLM, SGLang, TensorRT-LLM or forge metrics found" + (f" matching {match}" if match else ""))
        rows: dict = {}
        for col, expr, metric in plan:
            try:
                result = q(expr)
            except PromError:
                if partial and rows:
                    notes.append(f"partial data (--partial): {metric} and later queries could not be fetched; the report uses what was fetched")
                    break
                raise
            for series in result:
                labels = series.get("metric", {})
                inst = instance_of(labels) or "all"
                ev = fetched.setdefault(inst, Evidence())
                eng = next((e for p, e in ENGINE_OF if metric.startswith(p)), None)
                if eng:
                    ev.set_fact("engine", eng, override=False)
                if labels.get("model_name"):
                    ev.set_fact("model", labels["model_name"], url, None, f"model_name label ({metric})", override=False)
                if col.startswith("info:"):
                    _cache_config(labels, url, 1, ev)
                    continue
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
                        ev.set_fact(f, int(v) if f in ("max_num_seqs", "kv_cache_tokens", "max_model_len", "max_sessions", "max_queue_depth") else v,
                                    url, None, f"{metric} = {v:g}")
                        continue
                    row = rows.setdefault((inst, when), {"time": when, "source": url, "line": None, "engine_idx": 0})
                    row[col] = v
        for (inst, when), row in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            fetched[inst].add_stats(row)
            fetched[inst].last_seen = when
    except PromError:
        if partial and fetched:
            notes.append("partial data (--partial): the server failed part-way; the report uses what was fetched")
            return fetched, notes
        raise
    return fetched, notes


def parse_since(text: str) -> timedelta:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd])", text.strip())
    if not m:
        raise ValueError(f"not a duration: {text!r} (e.g. 30m, 2h, 1d)")
    n, unit = float(m.group(1)), m.group(2)
    return timedelta(seconds=n * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit])
