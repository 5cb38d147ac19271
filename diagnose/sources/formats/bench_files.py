"""Load-test results, recognised by content: each run becomes one point of a sweep (ev.bench_points).

- `vllm bench serve --save-result` / `benchmark_serving.py` JSON, every version: one run per file
  (`max_concurrency`, `request_rate`, `completed`, `failed`, `output_throughput`,
  `mean/median/p99_ttft_ms`, `…_tpot_ms`, `…_itl_ms`, `…_e2el_ms`); old files say
  `"request_goodput:"` and lack `failed`; `vllm bench sweep serve` adds `run=N.json` files and a
  `summary.json` list of runs.
- SGLang `bench_serving --output-file` JSONL: one run per line, the same key style (older builds:
  medians only, `median_e2e_latency_ms`).
- GuideLLM report JSON: `benchmarks[]`, each with `config.strategy` (the load) and
  `metrics.<name>.successful.{mean,median,percentiles}`.
- GenAI-Perf / AIPerf `profile_export_*.json`: metric objects `{unit, avg, p50, p99, …}`, the load in
  `input_config` (`perf_analyzer.stimulus` or `loadgen`).
- AIPerf sweep summary CSV (`profile_export_aiperf_sweep.csv`): one row per load level,
  `<metric>_mean` columns, followed by free-text sections.
- GenAI-Perf / AIPerf per-run CSV (`profile_export_genai_perf.csv`): a `Metric,avg,min,max,p99,…`
  table, then `Metric,Value` (throughputs, request count). It does not say its load: the artifact
  folder's name does (`…-concurrency16`, `…-request_rate4`).

Per-request arrays (generated texts, prompts) are never kept: only the run's aggregates.
"""
from __future__ import annotations

import csv
import io
import json
import math
import re

from ...evidence.model import Evidence, InputInfo
from ..readers.files import Input, InputError
from ...lazyre import lazy

MAX_BYTES = 16 * 1024 * 1024     # parsed whole: a JSON document takes ~7 times its size in memory
# What a point holds (all optional but the load): the JSON report's `sweep.points[]` and more.
POINT_FIELDS = ("tool", "source", "line", "model", "workload", "backend", "started", "duration_s", "concurrency", "request_rate", "burst", "completed", "failed",
                "output_tps", "request_tps", "ttft_mean_ms", "ttft_p50_ms", "ttft_p99_ms", "tpot_mean_ms",
                "tpot_p50_ms", "tpot_p99_ms", "itl_mean_ms", "itl_p50_ms", "itl_p99_ms", "e2e_p50_ms",
                "input_len_mean", "output_len_mean", "max_num_seqs")

_VLLM_KEYS = (b'"burstiness"', b'"output_throughput"', b'"request_throughput"')
_TTFT_KEY = lazy(rb'"(?:mean|median|p99)_ttft_ms"')


def sniff_bench(head: bytes) -> str | None:
    """'json', 'jsonl' or 'csv' when `head` (the file's first bytes) is a load-test result."""
    s = head.lstrip()
    if s[:1] == b"{" or s[:2] == b"[{" or re.match(rb"\[\s*\{", s):
        first_line = s.split(b"\n", 1)[0]
        vllm_like = (any(k in head for k in _VLLM_KEYS) and (_TTFT_KEY.search(head) or b'"num_prompts"' in head
                                                              or b'"backend"' in head))
        perf = b'"time_to_first_token"' in head and (b'"output_token_throughput"' in head or b'"request_throughput"' in head)
        guide = b'"benchmarks"' in head and (b'"time_to_first_token_ms"' in head or b'guidellm' in head)
        if not (vllm_like or perf or guide):
            return None
        rest = s[len(first_line):].lstrip()
        if vllm_like and first_line.rstrip().endswith(b"}") and rest[:1] == b"{":
            return "jsonl"
        return "json"
    first = s.split(b"\n", 1)[0]
    if first.startswith(b"Metric,avg,") and (b"Time To First Token" in head or b"Output Token Throughput" in head):
        return "csv-run"
    if (first.startswith((b"concurrency,", b"request_rate,")) and b"_mean" in first
            and (b"output_token_throughput" in first or b"time_to_first_token" in first)):
        return "csv"
    return None


def load_bench(kind: str, inp: Input, ev: Evidence) -> InputInfo:
    data = b"".join(inp.blocks())
    if len(data) > MAX_BYTES:
        raise InputError(f"{inp.display}: benchmark result larger than {MAX_BYTES // 2**20} MiB")
    text = data.decode("utf-8", "replace")
    info = InputInfo(path=inp.display, kind="bench", lines=text.count("\n") + (not text.endswith("\n")))
    points: list[dict] = []
    if kind == "jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)          # Python reads the bare Infinity/NaN SGLang writes
            except ValueError as e:
                info.unrecognised_lines += 1
                info.errors.append(f"{inp.display}:{n}: not a JSON line ({str(e)[:80]})")
                continue
            points += _points(obj, inp.display, n)
    elif kind == "json":
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise InputError(f"{inp.display}:{getattr(e, 'lineno', 1)}: not valid JSON ({str(e)[:120]})") from None
        items = obj if isinstance(obj, list) else [obj]
        lines = _item_lines(text) if len(items) > 1 else []
        for i, item in enumerate(items):
            points += _points(item, inp.display, lines[i] if i < len(lines) else 1)
    elif kind == "csv-run":
        points = _perf_csv(text, inp.display, info, str(inp.path))
    else:
        points = _csv_points(text, inp.display, info)
    if not points:
        raise InputError(f"{inp.display}: looks like a benchmark result but holds no run with throughput or latency")
    for p in points:
        ev.bench_points.append({k: p.get(k) for k in POINT_FIELDS})
        if p.get("model"):
            ev.set_fact("model", p["model"], inp.display, p.get("line"), override=False)
    info.kind = f"bench:{points[0]['tool']}"
    info.recognised_lines = info.lines - info.unrecognised_lines
    return info


def _item_lines(text: str) -> list[int]:
    """The line where each object of a top-level JSON list starts (for evidence), in one pass."""
    depth, out, line, at = 0, [], 1, 0
    for m in re.finditer(r'[{}\[\]"]|\\.', text):
        c = m.group()
        if c == "{":
            if depth == 1:
                line += text.count("\n", at, m.start())
                at = m.start()
                out.append(line)
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
    return out


def _num(x) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, str):
        try:
            x = float(x)
        except ValueError:
            return None
    try:
        if isinstance(x, (int, float)) and math.isfinite(x):
            return float(x)
    except OverflowError:       # an int of 400 digits: no float holds it, no measurement is that big
        return None
    return None


def points_of(obj, source: str, line: int) -> list[dict]:
    """The sweep points one JSON object holds (a result record printed into a log), as kept."""
    return [{k: p.get(k) for k in POINT_FIELDS} for p in _points(obj, source, line)]


def _points(obj, source: str, line: int) -> list[dict]:
    if not isinstance(obj, dict):
        return []
    if isinstance(obj.get("benchmarks"), list):
        return [p for i, b in enumerate(obj["benchmarks"]) for p in _guidellm(b, source, line)]
    if isinstance(obj.get("time_to_first_token"), dict) or isinstance(obj.get("output_token_throughput"), dict):
        return _perf_analyzer(obj, source, line)
    if "output_throughput" in obj or any(k.endswith("_ttft_ms") for k in obj):
        return [_vllm_sglang(obj, source, line)]
    return []


def _vllm_sglang(d: dict, source: str, line: int) -> dict:
    rate = d.get("request_rate")
    rate_v = None if isinstance(rate, str) and rate.strip().lower() in ("inf", "infinity") else _num(rate)
    completed = _num(d.get("completed"))
    p = {"tool": "sglang-bench-serving" if str(d.get("backend", "")).startswith("sglang") or "median_e2e_latency_ms" in d
         else "vllm-bench-serve",
         "source": source, "line": line, "model": d.get("model_id") if isinstance(d.get("model_id"), str) else None,
         "concurrency": _num(d.get("max_concurrency")), "request_rate": rate_v, "completed": completed,
         "failed": _num(d.get("failed")), "output_tps": _num(d.get("output_throughput")),
         "request_tps": _num(d.get("request_throughput")), "max_num_seqs": _num(d.get("max_num_seqs"))}
    for metric in ("ttft", "tpot", "itl"):
        p[f"{metric}_mean_ms"] = _num(d.get(f"mean_{metric}_ms"))
        p[f"{metric}_p50_ms"] = _num(d.get(f"median_{metric}_ms"))
        p[f"{metric}_p99_ms"] = _num(d.get(f"p99_{metric}_ms"))
    p["e2e_p50_ms"] = _num(d.get("median_e2el_ms", d.get("median_e2e_latency_ms")))
    p["backend"] = _engine_of(d.get("backend"))
    # When the run happened (the client's clock, as a log's): vLLM writes `date` as %Y%m%d-%H%M%S.
    if isinstance(d.get("date"), str) and _num(d.get("duration")):
        from datetime import datetime
        try:
            p["started"], p["duration_s"] = datetime.strptime(d["date"], "%Y%m%d-%H%M%S"), _num(d["duration"])
        except ValueError:
            pass
    # SGLang writes every run of a session to one file, datasets mixed: the workload tells sweeps apart.
    if isinstance(d.get("dataset_name"), str):
        p["workload"] = d["dataset_name"] + (f" {d.get('random_input_len')}/{d.get('random_output_len')}"
                                             if d["dataset_name"] == "random" else "")
    if rate_v is None and p["concurrency"] is None and _num(d.get("num_prompts")):
        # Every prompt sent at once, no limit: the offered concurrency is the number of prompts.
        p["concurrency"], p["burst"] = _num(d["num_prompts"]), True
    if completed:
        if _num(d.get("total_input_tokens")) is not None:
            p["input_len_mean"] = round(d["total_input_tokens"] / completed, 1)
        if _num(d.get("total_output_tokens")) is not None:
            p["output_len_mean"] = round(d["total_output_tokens"] / completed, 1)
    if completed == 0:      # an all-failed run reports 0.0 for every latency: unknown, not instant
        for k in list(p):
            if k.endswith("_ms"):
                p[k] = None
    return p


def _engine_of(backend) -> str | None:
    """The engine a benchmark's `backend` names (its API client), when it names one."""
    b = str(backend or "").lower()
    return ("sglang" if b.startswith("sglang") else "vllm" if b.startswith("vllm")
            else "trtllm" if b.startswith(("tensorrt", "trt")) else None)


def _stat(m, *path):
    for k in path:
        if not isinstance(m, dict):
            return None
        m = m.get(k)
    return _num(m)


def _guidellm(b, source: str, line: int) -> list[dict]:
    if not isinstance(b, dict) or not isinstance(b.get("metrics"), dict):
        return []
    m = b["metrics"]
    strat = ((b.get("config") or {}).get("strategy") or b.get("args", {}).get("strategy") or {})
    kind = str(strat.get("type_") or strat.get("type") or "")
    conc = 1.0 if kind == "synchronous" else _num(strat.get("streams")) or _num(strat.get("max_concurrency"))
    rate = _num(strat.get("rate")) if kind in ("constant", "poisson", "async") else None
    totals = m.get("request_totals") or {}
    p = {"tool": "guidellm", "source": source, "line": line,
         "model": ((b.get("config") or {}).get("backend") or {}).get("model") if isinstance((b.get("config") or {}).get("backend"), dict) else None,
         "concurrency": conc if rate is None else None, "request_rate": rate,
         "completed": _num(totals.get("successful")), "failed": _num(totals.get("errored")),
         "output_tps": _stat(m, "output_tokens_per_second", "successful", "mean"),
         "request_tps": _stat(m, "requests_per_second", "successful", "mean"),
         "input_len_mean": _stat(m, "prompt_token_count", "successful", "mean"),
         "output_len_mean": _stat(m, "output_token_count", "successful", "mean")}
    for metric, name in (("ttft", "time_to_first_token_ms"), ("tpot", "time_per_output_token_ms"), ("itl", "inter_token_latency_ms")):
        p[f"{metric}_mean_ms"] = _stat(m, name, "successful", "mean")
        p[f"{metric}_p50_ms"] = _stat(m, name, "successful", "median")
        p[f"{metric}_p99_ms"] = _stat(m, name, "successful", "percentiles", "p99")
    p["e2e_p50_ms"] = (lambda s: s * 1000 if s is not None else None)(_stat(m, "request_latency", "successful", "median"))
    return [p]


def _perf_analyzer(d: dict, source: str, line: int) -> list[dict]:
    cfg = d.get("input_config") if isinstance(d.get("input_config"), dict) else {}
    stim = ((cfg.get("perf_analyzer") or {}).get("stimulus") or {}) if isinstance(cfg.get("perf_analyzer"), dict) else {}
    load = cfg.get("loadgen") if isinstance(cfg.get("loadgen"), dict) else {}
    conc = _num(stim.get("concurrency")) or _num(load.get("concurrency"))
    rate = _num(stim.get("request_rate")) or _num(load.get("request_rate"))
    models = (cfg.get("model_names") or (cfg.get("endpoint") or {}).get("model_names") or [None])
    aiperf = "loadgen" in cfg or "error_request_count" in d or "time_to_first_output_token" in d

    def v(name, stat):
        return _stat(d, name, stat)

    errors = d.get("error_request_count")
    p = {"tool": "aiperf" if aiperf else "genai-perf", "source": source, "line": line,
         "model": models[0] if models and isinstance(models[0], str) else None,
         "concurrency": conc if conc is not None or rate is None else None, "request_rate": rate if conc is None else None,
         "completed": v("request_count", "avg"),
         "failed": _num(errors.get("avg")) if isinstance(errors, dict) else _num(errors),
         "output_tps": v("output_token_throughput", "avg"), "request_tps": v("request_throughput", "avg"),
         "input_len_mean": v("input_sequence_length", "avg"), "output_len_mean": v("output_sequence_length", "avg")}
    for metric, name in (("ttft", "time_to_first_token"), ("itl", "inter_token_latency")):
        p[f"{metric}_mean_ms"] = v(name, "avg")
        p[f"{metric}_p50_ms"] = v(name, "p50")
        p[f"{metric}_p99_ms"] = v(name, "p99")
    lat = v("request_latency", "p50")
    p["e2e_p50_ms"] = lat
    return [p]


def _csv_points(text: str, source: str, info: InputInfo) -> list[dict]:
    """AIPerf's sweep summary: the table ends at the first blank line (free-text sections follow)."""
    lines = text.splitlines()
    end = next((i for i, ln in enumerate(lines) if not ln.strip()), len(lines))
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[:end]))))
    axis = "concurrency" if lines[0].startswith("concurrency,") else "request_rate"
    out = []
    for n, r in enumerate(rows, 2):
        load = _num(r.get(axis))
        if load is None:
            info.unrecognised_lines += 1
            info.errors.append(f"{source}:{n}: no {axis} value")
            continue

        def col(name):
            return _num(r.get(f"{name}_mean"))
        out.append({"tool": "aiperf", "source": source, "line": n, "concurrency": load if axis == "concurrency" else None,
                    "request_rate": load if axis == "request_rate" else None,
                    "completed": col("request_count"), "failed": col("error_request_count"),
                    "output_tps": col("output_token_throughput"), "request_tps": col("request_throughput"),
                    "ttft_mean_ms": col("time_to_first_token"), "itl_mean_ms": col("inter_token_latency"),
                    "e2e_p50_ms": None, "input_len_mean": col("input_sequence_length"),
                    "output_len_mean": col("output_sequence_length")})
    return out


_LOAD_IN_PATH = lazy(r"(concurrency|request[_-]?rate)[_=-]?(\d+(?:\.\d+)?)", re.I)
# `[^()]*`, and the name's trailing spaces stripped by the caller: with `[^)]*` and `\s*` after
# the lazy name, each of its steps scanned the rest of a header full of `(` or spaces.
_UNIT = lazy(r"^(.*?)\(([^()]*)\)\s*$")
_TO_MS = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1000.0}


def _perf_csv(text: str, source: str, info: InputInfo, path: str) -> list[dict]:
    """GenAI-Perf's per-run CSV: statistics per metric, then single values; the load from the path."""
    stats: dict[str, dict] = {}
    single: dict[str, float | None] = {}
    header: list[str] | None = None
    for n, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row or not any(c.strip() for c in row):
            header = None
            continue
        if row[0].strip() == "Metric":
            header = [c.strip() for c in row[1:]]
            continue
        if header is None:
            info.unrecognised_lines += 1
            continue
        m = _UNIT.match(row[0].strip())
        name, unit = (m.group(1), m.group(2)) if m else (row[0].strip(), "")
        scale = _TO_MS.get(unit.strip().lower(), 1.0)
        vals = [_num(c.replace(",", "")) for c in row[1:]]
        key = name.strip().lower()
        if header == ["Value"]:
            single[key] = vals[0] if vals else None
        else:
            stats[key] = {h: (x * scale if x is not None else None) for h, x in zip(header, vals)}

    def st(name, stat):
        return (stats.get(name) or {}).get(stat)
    load = None
    for load in _LOAD_IN_PATH.finditer(path):
        pass
    if load is None:
        info.errors.append(f"{source}: the load of this run is not in the file or its folder's name "
                           f"(GenAI-Perf names it …-concurrencyN): not placed in a sweep")
    is_rate = bool(load) and not load.group(1).lower().startswith("concurrency")
    value = float(load.group(2)) if load else None
    return [{"tool": "aiperf" if "aiperf" in path.lower() else "genai-perf", "source": source, "line": 1,
             "concurrency": None if is_rate else value, "request_rate": value if is_rate else None,
             "completed": single.get("request count"), "failed": None,
             "output_tps": single.get("output token throughput"), "request_tps": single.get("request throughput"),
             "ttft_mean_ms": st("time to first token", "avg"), "ttft_p50_ms": st("time to first token", "p50"),
             "ttft_p99_ms": st("time to first token", "p99"), "itl_mean_ms": st("inter token latency", "avg"),
             "itl_p50_ms": st("inter token latency", "p50"), "itl_p99_ms": st("inter token latency", "p99"),
             "e2e_p50_ms": st("request latency", "p50"),
             "input_len_mean": (stats.get("input sequence length") or stats.get("num input token") or {}).get("avg"),
             "output_len_mean": (stats.get("output sequence length") or stats.get("num output token") or {}).get("avg")}]
