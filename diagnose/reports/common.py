"""Pieces every report format shares: sparklines, the deployment summary, evidence lines."""
from __future__ import annotations

import re

from ..values import _UNPRINTABLE_KEEP_NL, fmt, model_id, printable  # noqa: F401 (printable: re-exported)

def printable_tree(obj, newlines: bool = False):
    """`printable` applied to every string in a JSON-like document (dicts, lists, strings); a
    copy, the document itself is left as it was."""
    if isinstance(obj, str):
        return printable(obj, newlines)
    if isinstance(obj, dict):
        return {printable_tree(k, newlines) if isinstance(k, str) else k: printable_tree(v, newlines)
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(printable_tree(x, newlines) for x in obj)
    return obj


def json_safe(text: str) -> str:
    """A JSON document written with ensure_ascii=False holds C1 and bidi control characters raw
    inside its strings (json escapes only C0): written as `\\u009b` escapes, the same JSON."""
    return _UNPRINTABLE_KEEP_NL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


BARS = "▁▂▃▄▅▆▇█"
from ..evidence.facts import SUMMARY_FACTS  # noqa: E402  (the fact catalogue's table rows)
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
    # A quantile past the top bucket is known only to exceed it ("> top bucket 30").
    for over, said in (("window", ""), ("lifetime", " (since the server started)")):
        for kind, label in WINDOW_FIGURES:
            parts = []
            for qn in ("mean", "p50", "p95", "p99"):
                e = sig.get(f"{kind}_{qn}_{over}")
                if e and e.get("value") is not None:
                    bound = "≤ " if e.get("at_most") else "> top bucket " if e.get("above_top_bucket") else ""
                    parts.append(f"{qn} {bound}{fmt(e['value'])}")
            if parts:
                rows.append((label + said, " · ".join(parts) + " s"))
        e = sig.get(f"prompt_tokens_per_request_{over}")
        if e:
            rows.append(("prompt length" + said, f"{fmt(e['value'])} tokens per request"))
        e = sig.get(f"prefix_cache_hit_{over}")
        if e:
            rows.append(("prefix-cache hit rate" + said, f"{fmt(e['value'])} % of prompt tokens"))
        # the expert families (sources/prometheus.py WINDOW_COUNTERS, spec decode, iteration tokens)
        parts = [f"{r} {fmt(sig[k]['value'])} %" for r in ("stop", "length", "abort") if (k := f"finished_{r}_pct_{over}") in sig]
        if parts:
            rows.append(("requests finished by" + said, " · ".join(parts)))
        if f"requests_aborted_{over}" in sig:
            share = sig.get(f"aborted_pct_{over}")
            rows.append(("requests aborted" + said, fmt(sig[f"requests_aborted_{over}"]["value"])
                         + (f" ({fmt(share['value'])} % of those finished)" if share else "")))
        e = sig.get(f"spec_acceptance_{over}")
        if e:
            rows.append(("draft acceptance" + said, f"{fmt(e['value'])} % of drafted tokens"))
        parts = [f"{qn} {fmt(sig[k]['value'])}" for qn in ("mean", "p50", "p95", "p99") if (k := f"iteration_tokens_{qn}_{over}") in sig]
        if parts:
            rows.append(("tokens per engine step" + said, " · ".join(parts)))
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


# -- what was understood of each input (sources/coverage.py) -------------------------------------
LOW_SHARE = 0.5         # below this share of its lines understood, an input is said to be poorly read
REGION_NAMES = {"vllm": "vLLM log", "sglang": "SGLang log", "trtllm": "TensorRT-LLM log", "text log": "log lines",
                "gpu-dmon": "nvidia-smi dmon", "gpu-query": "nvidia-smi --query-gpu CSV", "gpu-table": "nvidia-smi table",
                "gpu-topo": "nvidia-smi topo -m", "gpu-nvlink": "nvidia-smi nvlink", "gpu-dcgm": "DCGM scrape",
                "prometheus-scrape": "Prometheus scrape", "bench-result": "benchmark result", "json": "JSON lines",
                "other": "lines of no known format", "mixed": "mixed lines"}


def _n(x: int) -> str:
    return f"{x:,}"


def regions_text(cov: dict, limit: int = 6) -> str:
    """`vLLM log 6–3,272; nvidia-smi --query-gpu CSV 1–5`: an input's regions in order, the biggest
    `limit`; a short run of unknown lines inside a log is no region of its own here."""
    allr = cov.get("regions") or []
    total = sum(r["lines"] for r in allr) or 1
    merged: list[dict] = []
    for r in allr:
        if r["kind"] == "other" and r["lines"] < max(20, 0.05 * total) and merged:
            continue
        # a stray generic line (a uvicorn line, a bare warning) among a job's output is no region either
        if r["kind"] in ("text log", "mixed") and r["lines"] < 5 and len(allr) > 1:
            continue
        if merged and merged[-1]["kind"] == r["kind"]:
            merged[-1] = {**merged[-1], "last_line": r["last_line"], "lines": merged[-1]["lines"] + r["lines"]}
        else:
            merged.append(dict(r))
    regs = sorted(merged, key=lambda r: -r["lines"])[:limit]
    regs.sort(key=lambda r: r["first_line"])
    out = [f"{REGION_NAMES.get(r['kind'], r['kind'])} {_n(r['first_line'])}–{_n(r['last_line'])}" for r in regs]
    more = len(merged) - len(regs)
    return "; ".join(out) + (f"; {more} more" if more > 0 else "")


def coverage_summary(inp: dict) -> str:
    """One line per input, for the foot of a report: its path, lines, the share read, the regions."""
    return f"{inp['path']}: {coverage_detail(inp)}"


def coverage_detail(inp: dict) -> str:
    """`3,272 lines, 99 % read — vLLM log 6–3,272; …`: coverage_summary without the path."""
    cov = inp.get("coverage")
    # A live Prometheus gives series sampled at each step, not lines.
    text = f"{_n(inp['lines'])} " + ("time steps of its series" if inp.get("kind") == "prometheus" else "lines")
    if cov and cov.get("share") is not None:
        text += f", {round(cov['share'] * 100)} % read" + (" (estimated from samples)" if cov.get("sampled_lines") else "")
        regs = regions_text(cov)
        if regs:
            text += f" — {regs}"
    if inp.get("unreadable_lines"):
        text += f", {_n(inp['unreadable_lines'])} unreadable"
    if (inp.get("launches") or 0) > 1:
        text += f"; {inp['launches']} server launches"
    return text


def input_warnings(inputs: list[dict]) -> list[str]:
    """What the reports say first about an input: most of it was not read, or lines that look like
    an engine's were not read (a format this version does not know), with the first such lines."""
    out = []
    for inp in inputs:
        cov = inp.get("coverage")
        if not cov:
            continue
        share = cov.get("share")
        seen = cov.get("understood_lines", 0) + cov.get("other_lines", 0)
        # A server's lines well read inside a job's other output (pip, banners, a client): no alarm;
        # the foot of the report gives the regions.
        wrapped = (cov.get("server_share") or 0) >= 0.8
        # (a few lines of a job's stderr beside the server's log are no alarm: the foot lists them)
        if share is not None and share < LOW_SHARE and (seen >= 20 or len(inputs) == 1 and seen >= 5) and not wrapped:
            first = "; ".join(f"line {_n(e['line'])}: {e['text']}" for e in cov.get("other_examples", [])[:2])
            regs = regions_text({"regions": [r for r in cov.get("regions") or [] if r["kind"] != "other"]})
            out.append(f"{inp['path']}: only {round(share * 100)} % of its {_n(inp['lines'])} lines are in a format "
                       f"diagnose reads" + (f" ({regs})" if regs else " (none)")
                       + (f"; the first others — {first}" if first else ""))
        if cov.get("unread_engine_lines"):
            ex = cov.get("unread_examples") or []
            engines = sorted({e["engine"] for e in ex}) or ["an engine"]
            out.append(f"{inp['path']}: {_n(cov['unread_engine_lines'])} line(s) that look like {', '.join(engines)}'s "
                       f"were not read (a format this version does not know)"
                       + (" — " + "; ".join(f"line {_n(e['line'])}: {e['text']}" for e in ex[:2]) if ex else ""))
    return out


def nothing_read_hint(data: dict) -> str | None:
    """Said beside "No findings" when most of an input was not read: what that means, what to try."""
    low = [i for i in data.get("inputs") or [] if (i.get("coverage") or {}).get("share") is not None
           and i["coverage"]["share"] < LOW_SHARE and (i["coverage"].get("server_share") or 0) < 0.8]
    if not low:
        return None
    names = ", ".join(i["path"] for i in low)
    return (f"No findings — but most of {names} was not read, so this says little. If it is an inference "
            "server's log, check that the engine's own lines are in it (its stderr captured: `2>&1`), or give "
            "the server's log file itself; lines of a format diagnose does not know are listed above.")


def skipped_lines(skipped: list[dict]) -> list[str]:
    return [f"skipped {s['path']}: {s['reason']}" for s in skipped or []]


def _by_source(parts: list[dict]) -> dict:
    out: dict = {}
    for p in parts:
        out.setdefault(p["source"], []).append(p)
    return out


SPANS_SHOWN = 6      # launches of one input listed before "… N more …" (and its last two)


def launches_text(data: dict) -> str | None:
    """`4 launches — a.log lines 10–155, 157–331 (stopped), …`: where a deployment was read from,
    when that is not simply its inputs whole."""
    parts = data.get("launches") or []
    if len(parts) <= 1 and not any(p.get("stream") for p in parts):
        return None
    launched = [p for p in parts if p.get("launch_line")]
    if len(launched) > 1:
        parts = launched        # a piece without its launch (a client's stray line) is no launch of it
    out = []
    for src, ps in _by_source(parts).items():
        shown = ps if len(ps) <= SPANS_SHOWN + 2 else ps[:SPANS_SHOWN] + ps[-2:]
        spans = [f"{_n(p['first_line'])}–{_n(p['last_line'])}" + (f" [{p['stream']}]" if p.get("stream") else "")
                 + (f" ({p['ending']})" if p.get("ending") else "") for p in shown]
        if len(shown) < len(ps):        # a restart loop of thousands: its first launches and its last
            spans[SPANS_SHOWN:SPANS_SHOWN] = [f"… {_n(len(ps) - len(shown))} more …"]
        spans = ", ".join(spans)
        out.append(f"{src} lines {spans}")
    if len(launched) > 1:
        return f"{len(parts)} launches of this server — " + "; ".join(out)
    return "read from " + "; ".join(out)


# Settings that tell deployments apart, as the overview names them.
DIFFERENCES = (("model", "model"), ("tensor_parallel_size", "TP"), ("pipeline_parallel_size", "PP"),
               ("data_parallel_size", "DP"), ("max_num_seqs", "max_num_seqs"), ("max_num_batched_tokens", "max_num_batched_tokens"),
               ("max_model_len", "max_model_len"), ("gpu_memory_utilization", "gpu_memory_utilization"),
               ("cuda_graphs", "CUDA graphs"), ("kv_cache_dtype", "kv_cache_dtype"), ("quantization", "quantization"))


def differences(first: dict, other: dict) -> str:
    """`gpu_memory_utilization 0.8 → 0.9`: the settings in which one deployment differs from another."""
    out = []
    for k, label in DIFFERENCES:
        a, b = first.get(k), other.get(k)
        if k == "model" and a is not None and b is not None:
            a, b = model_id(a), model_id(b)
        if a is not None and b is not None and a != b:
            out.append(f"{label} {fmt(a)} → {fmt(b)}")
    return ", ".join(out)


def deployment_label(data: dict) -> str:
    """`vllm · Qwen/Qwen3-8B · a.log lines 1–520 (2 launches)`: a deployment in one line, for
    headings and overviews."""
    dep = data.get("deployment") or {}
    if data.get("instance") == "disaggregated":     # the system view: what it is made of, not where
        nodes = (data.get("verdict") or {}).get("nodes") or []
        bits = [f"disaggregated deployment of {len(nodes)} nodes ({', '.join(nodes)})", dep.get("engine") or "unknown engine"]
        return " · ".join(bits + ([model_id(dep["model"])] if dep.get("model") else []))
    if data.get("instance") == "fleet":            # the fleet view: what its replicas are
        n = len((data.get("verdict") or {}).get("ranking") or [])
        return " · ".join([f"fleet of {n} replicas", dep.get("engine") or "unknown engine"]
                          + ([model_id(dep["model"])] if dep.get("model") else []))
    bits = [dep.get("engine") or "unknown engine"]
    inst = data.get("instance")
    if inst and inst.startswith(("prefill node", "decode node")):
        bits.append(inst)                          # a disaggregated deployment's node: its role and which one
    elif inst and not any(inst in (i.get("path") or "") for i in data.get("inputs") or []):
        bits.append(inst)                          # a replica of a saved fleet scrape: which one
    if dep.get("node_role") in ("prefill", "decode") and not (inst or "").startswith(("prefill node", "decode node")):
        bits.append(f"{dep['node_role']} node")
    if dep.get("model"):
        bits.append(model_id(dep["model"]))
    parts = data.get("launches") or []
    if parts:
        srcs = []
        for src, ps in _by_source(parts).items():
            srcs.append(f"{src} lines {_n(min(p['first_line'] for p in ps))}–{_n(max(p['last_line'] for p in ps))}"
                        + (f" ({len(ps)} launches)" if len(ps) > 1 else ""))
        bits.append(", ".join(srcs[:3]) + (f" and {len(srcs) - 3} more" if len(srcs) > 3 else ""))
    else:
        bits.append(", ".join(i["path"] for i in data.get("inputs") or []))
    return " · ".join(bits)


def stop_mark(data: dict) -> str | None:
    """`stopped 09-13 07:27:55 (line 136)`: where the timeline ends because the server was stopped."""
    st = (data.get("verdict") or {}).get("stopped")
    if not st:
        return None
    return "stopped " + (f"{st['at']} " if st.get("at") else "") + f"(line {st['line']})"


def run_heading(parts: list[dict]) -> str:
    """What several analyses are: one disaggregated deployment's system and nodes, or several deployments."""
    systems = [d for d in parts if d.get("instance") == "disaggregated"]
    if len(systems) == 1 and len(parts) == 1 + len((systems[0].get("verdict") or {}).get("nodes") or []):
        nodes = systems[0]["verdict"]["nodes"]
        roles = systems[0]["verdict"].get("roles") or [n.split(" node")[0] for n in nodes]
        return (f"1 disaggregated deployment: {roles.count('prefill')} prefill + {roles.count('decode')} decode node(s)"
                " — the system first (its pools side by side), then each node, diagnosed for its role")
    fleets = [d for d in parts if d.get("instance") == "fleet"]
    if len(fleets) == 1 and parts[0] is fleets[0] and len(parts) == 1 + len((fleets[0].get("verdict") or {}).get("ranking") or []):
        return (f"1 {deployment_label(fleets[0])}"
                " — the fleet view first (replicas side by side), then each replica")
    return f"{len(parts)} deployments (different servers, or different settings: each diagnosed on its own below)"
