"""Pieces every report format shares: sparklines, the deployment summary, evidence lines."""
from __future__ import annotations

from ..values import fmt

BARS = "▁▂▃▄▅▆▇█"
SUMMARY_FACTS = [
    ("engine", "engine"), ("engine_version", "version"), ("model", "model"), ("dtype", "dtype"),
    ("tensor_parallel_size", "TP"), ("pipeline_parallel_size", "PP"), ("data_parallel_size", "DP"),
    ("gpu_count", "GPUs"), ("nodes", "nodes"), ("gpu_name", "GPU"), ("gpu_memory_gib", "GPU memory GiB"),
    ("cuda_graphs", "CUDA graphs"), ("max_num_seqs", "max_num_seqs"),
    ("max_num_batched_tokens", "max_num_batched_tokens"), ("gpu_memory_utilization", "gpu_memory_utilization"),
    ("kv_cache_dtype", "kv_cache_dtype"), ("prefix_caching", "prefix caching"),
    ("chunked_prefill", "chunked prefill"), ("quantization", "quantization"),
    ("max_model_len", "max_model_len"), ("kv_cache_tokens", "KV cache tokens"),
    ("max_concurrency", "max concurrency (full-length requests)"),
    ("weights_gib_replica", "weights per replica GiB"), ("model_params_b", "parameters (B)"),
    ("gpu_board", "GPU (board table)"),
    ("decode_bound_tps", "expected decode bound, tokens/s per sequence"),
    ("prefill_bound_tps", "expected prefill bound, tokens/s"),
    ("est_max_sequences", "estimated max sequences (KV memory)"),
    ("decode_vs_bound", "measured decode / expected bound"),
    ("kv_tokens_estimated", "KV cache tokens estimated from the model shape"),
    ("kv_estimate_note", "log vs estimate"),
]
TIMELINE = [("running", "running"), ("waiting", "waiting"), ("kv_usage", "KV usage %"),
            ("gen_tps", "gen tokens/s")]


def sparkline(values: list, width: int = 48) -> str:
    if not values:
        return ""
    if len(values) > width:   # downsample by taking the max of each bucket: peaks matter
        step = len(values) / width
        values = [max(values[int(i * step): max(int((i + 1) * step), int(i * step) + 1)]) for i in range(width)]
    hi = max(values)
    if hi <= 0:
        return BARS[0] * len(values)
    return "".join(BARS[min(len(BARS) - 1, int(v / hi * (len(BARS) - 1) + 0.5))] for v in values)


# Figures of the whole window, as a dashboard shows them (Prometheus histograms and counters).
WINDOW_FIGURES = [("ttft", "time to first token"), ("itl", "inter-token latency"), ("queue_time", "queue time"),
                  ("prefill_time", "prefill time"), ("decode_time", "decode time"), ("e2e", "end-to-end latency")]


def window_rows(signals: dict | None) -> list[tuple[str, str]]:
    """Latency by stage, prompt length and prefix-cache hit rate over the whole window; a quantile
    that fell in the lowest bucket is shown as the bound it is ("≤ 0.3")."""
    sig = signals or {}
    rows = []
    for kind, label in WINDOW_FIGURES:
        parts = []
        for qn in ("mean", "p50", "p95", "p99"):
            e = sig.get(f"{kind}_{qn}_window")
            if e and e.get("value") is not None:
                parts.append(f"{qn} {'≤ ' if e.get('at_most') else ''}{fmt(e['value'])}")
        if parts:
            rows.append((label, " · ".join(parts) + " s"))
    e = sig.get("prompt_tokens_per_request_window")
    if e:
        rows.append(("prompt length", f"{fmt(e['value'])} tokens per request"))
    e = sig.get("prefix_cache_hit_window")
    if e:
        rows.append(("prefix-cache hit rate", f"{fmt(e['value'])} % of prompt tokens"))
    return rows


def summary_rows(deployment: dict) -> list[tuple[str, str]]:
    rows = []
    for key, label in SUMMARY_FACTS:
        v = deployment.get(key)
        if v is not None:
            rows.append((label, fmt(v)))
    return rows


def evidence_line(e: dict) -> str:
    if e.get("more"):
        return f"… and {e['value']} more line(s) like these"
    if "source" in e:
        return f"{e['source']}:{e['line']}: {e['text']}"
    return f"{e['metric']} = {e['value']} ({e['window']})"


def fix_lines(fix: dict) -> list[str]:
    out = [f"remove {f}" for f in fix["flags"]["remove"]]
    for k, v in fix["flags"]["set"].items():
        if not k.startswith("-"):                       # a YAML key (TensorRT-LLM options file)
            out.append(f"{k}: {'true' if v is True else v}")
        else:
            out.append(k if v is True else f"{k} {v}")
    return out


def sweep_table(sweep: dict) -> tuple[list[str], list[list[str]], list[str]]:
    """The JSON `sweep` object as a table: (header, rows, notes), one row per load level."""
    conc = sweep["axis"] == "concurrency"
    pts = sweep["points"]

    def first(*keys):
        return next(((k, n) for k, n in keys if any(p.get(k) is not None for p in pts)), (None, None))
    ttft = first(("ttft_p99_ms", "p99 TTFT ms"), ("ttft_p50_ms", "median TTFT ms"), ("ttft_mean_ms", "mean TTFT ms"))
    tpot = first(("tpot_p50_ms", "median TPOT ms"), ("itl_p50_ms", "median ITL ms"), ("itl_mean_ms", "mean ITL ms"))
    knee = sweep["knee_concurrency"] if conc else sweep["knee_request_rate"]
    rec = sweep["recommended_concurrency"] if conc else sweep["recommended_request_rate"]
    header = ["concurrency" if conc else "request rate", "output tok/s", "requests/s"]
    header += [n for _, n in (ttft, tpot) if n] + ["failed", ""]
    rows = []
    for p in pts:
        load = p["concurrency"] if conc else p["request_rate"]
        mark = (["◀ knee"] if load == knee else []) + (["★ recommended"] if load == rec else [])
        mark += ["misses targets"] if p.get("meets_targets") is False else []
        row = [fmt(load), "–" if p["output_tps"] is None else f"{p['output_tps']:,.0f}",
               "–" if p["request_tps"] is None else fmt(p["request_tps"])]
        row += ["–" if p.get(k) is None else f"{p[k]:,.1f}" for k, _ in (ttft, tpot) if k]
        row += ["?" if p["failed"] is None else str(p["failed"]), ", ".join(mark)]
        rows.append(row)
    unit = "" if conc else " req/s"
    notes = [sweep["rule"] + ("" if knee is not None else ": no knee in this sweep")]
    if sweep.get("burst"):
        notes.append("every prompt was sent at once (no rate, no concurrency limit): the load is the number of prompts")
    if rec is not None:
        notes.append(f"recommended: {fmt(rec)}{unit} "
                     + ("(the highest load that meets the targets)" if sweep["recommended_basis"] == "targets"
                        else "(the knee; --targets chooses by SLO)"))
    if sweep.get("limit"):
        notes.append(f"what limits it: {sweep['limit']}")
    if sweep.get("other_runs"):
        notes.append(f"{sweep['other_runs']} run(s) of another workload or model are not part of this sweep")
    return header, rows, notes
