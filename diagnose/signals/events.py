"""Event signals: counts of what the log said happened (OOMs, dead engines, NCCL errors, stops),
the access and request lines, start-up phases, and how the last launch ended."""
from __future__ import annotations

from ..evidence.model import Evidence
from .producers import produces


@produces("access_lines", "access_probe_lines", "access_probe_share", "allreduce_no_p2p_count",
          "allreduce_pcie_count", "eager_mode_count", "engine_dead_count", "failure_after_stop_count",
          "http_429_count", "http_5xx_count", "kv_capacity_error_count", "kv_no_memory_count",
          "kv_pool_exhausted_count", "kv_transfer_failure_count", "kv_transfer_requests_failed",
          "nccl_error_count", "oom_count", "preemption_count", "repeated_prefix_share", "request_lines",
          "requests_logged", "requests_served", "spec_acceptance_mean", "startup_silence_min",
          "stop_noise_count", "stop_requested_count", "total_lines", "traceback_count",
          "uncaught_exception_count", flags=("server_ready", "stopped", "warmup_logged"),
          texts=("startup_breakdown", "startup_silence_after", "stop_noise", "stopped_at", "stopped_text",
          "stopped_where", "uncaught_exception_type"))
def events(ev: Evidence, s) -> None:
    v = s.values
    c = ev.event_counts
    for k in ("oom", "engine_dead", "nccl_error", "kv_capacity_error", "kv_no_memory", "kv_pool_exhausted", "preemption",
              "eager_mode", "allreduce_pcie", "allreduce_no_p2p", "traceback", "uncaught_exception",
              "stop_requested", "failure_after_stop", "kv_transfer_failure"):
        v[f"{k}_count"] = c.get(k, 0)
    failed = [e.data["requests"] for e in ev.events.get("kv_transfer_failure", ()) if e.data.get("requests")]
    v["kv_transfer_requests_failed"] = sum(failed) if failed else None
    first = ev.first_event("uncaught_exception")
    v["uncaught_exception_type"] = first.data.get("exception") if first else None
    _stop(ev, v)
    v["http_5xx_count"] = sum(n for k, n in ev.counters.items() if k.startswith("status_5"))
    v["http_429_count"] = ev.counters.get("status_429", 0)
    total = sum(i.lines for i in ev.inputs) or 0
    v["total_lines"] = total
    v["access_lines"] = ev.counters.get("access_lines", 0)
    v["access_probe_lines"] = ev.counters.get("access_probe_lines", 0)
    v["access_probe_share"] = round(v["access_probe_lines"] / total, 3) if total else None
    v["request_lines"] = ev.counters.get("request_lines", 0)
    overflow = ev.counters.get("prompt_prefixes_overflow", 0)
    n = sum(ev.prompt_prefixes.values()) + overflow
    v["requests_logged"] = n
    # Share of requests whose first 256 characters were seen before: repeated prefixes.
    distinct = len(ev.prompt_prefixes) + overflow
    v["repeated_prefix_share"] = round(1 - distinct / n, 3) if n >= 20 else None
    acc = [e.data.get("acceptance") for e in ev.events.get("spec_decode", []) if e.data.get("acceptance") is not None]
    v["spec_acceptance_mean"] = round(sum(acc) / len(acc), 1) if acc else None
    labels = [("load_seconds", "weights load"), ("compile_seconds", "torch.compile"),
              ("capture_seconds", "CUDA graph capture"), ("startup_seconds", "engine init (profile, KV cache, warm-up)")]
    parts = [f"{label} {v[k]:.3g} s" for k, label in labels if v.get(k) is not None]
    if parts:
        v["startup_breakdown"] = ", ".join(parts)
    v["warmup_logged"] = any(ev.has_event(k) for k in ("startup_init", "startup_compile", "startup_load", "cuda_graph_capture"))
    # Ready and stopped (or cut) without stats: how many requests the log shows it served.
    ready = ev.first_event("server_ready")
    v["server_ready"] = ready is not None
    v["requests_served"] = (v["access_lines"] - v["access_probe_lines"]) + v["request_lines"] if ready is not None else None
    # A long silence the stop ended, where the server never said it was ready: a stalled start-up.
    quiet = ev.first_event("quiet_before_stop")
    if quiet is not None and not ev.has_event("server_ready") and not ev.stats_rows:
        v["startup_silence_min"] = quiet.data.get("minutes")
        text = quiet.text if len(quiet.text) <= 160 else quiet.text[:159] + "…"
        v["startup_silence_after"] = f"line {quiet.line}: {text}"


def _stop(ev: Evidence, v: dict) -> None:
    """How the server's last launch ended, when it was stopped: where and when the stop began
    (the first stop line of that launch), and how many failures after it were the stop's."""
    last = {}
    for p in ev.parts:              # the last launch of each file: an earlier one's stop is history
        last[p["source"]] = p
    ends = [p for p in last.values() if p.get("ending")]
    if not ends or any(p["ending"] != "stopped" for p in ends):
        return
    stops = [e for e in ev.events.get("stop_requested", ())
             if any(e.source == p["source"] and p["first_line"] <= e.line <= p["last_line"] for p in ends)]
    if not stops:
        return
    e = min(stops, key=lambda x: (x.time is None, x.time or 0, x.line))
    v["stopped"] = True
    if e.time is not None:
        v["stopped_at"] = e.time.strftime("%m-%d %H:%M:%S" if e.source in ev.year_guessed or e.time.year == 1900
                                          else "%Y-%m-%d %H:%M:%S")
    v["stopped_where"] = f"{e.source}:{e.line}"
    text = " ".join((e.data.get("msg") or e.text).split())
    v["stopped_text"] = text if len(text) <= 120 else text[:119] + "…"
    v["stop_noise_count"] = ev.event_counts.get("failure_after_stop", 0)
    v["stop_noise"] = [f"{x.source}:{x.line}: {x.text}" for x in ev.events.get("failure_after_stop", ())[:10]]
