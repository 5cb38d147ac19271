"""The expert Prometheus families as signals: how requests finished, aborts, the draft
acceptance of speculative decoding, tokens per engine step, swapped requests
(sources/prometheus.py reads the families into `window_*` / `lifetime_*` values and stats columns).
"""
from __future__ import annotations

import statistics

from ..evidence.model import Evidence
from .producers import produces

FINISH_REASONS = ("stop", "length", "abort")


@produces("requests_finished", "finished_stop_pct", "finished_length_pct", "finished_abort_pct",
          "requests_aborted", "aborted_pct", "spec_acceptance_mean", "iteration_tokens_mean", "iteration_tokens_p50",
          "iteration_tokens_p95", "iteration_tokens_p99", "swapped_mean", "swapped_max")
def expert(ev: Evidence, s) -> None:
    """The expert Prometheus families, over the whole window (or, from one scrape, the server's
    life): how requests finished, aborts, draft acceptance, tokens per engine step, swapped
    requests. Each stays unknown (None, no key_stats entry) where the input lacks its family."""
    v = s.values
    over = next((o for o in ("window", "lifetime") if any(k.startswith(o + "_") for k in ev.values)), None)
    said = {"window": "the whole window (counter increase)", "lifetime": "since the server started (one scrape)"}.get(over)

    def val(key):
        x = ev.values.get(f"{over}_{key}") if over else None
        return x[0] if x else None

    def put(name, value, digits=1):
        v[name] = None if value is None else round(value, digits)
        if value is not None:
            s.key_stats[f"{name}_{over}"] = {"value": round(value, digits), "over": said}

    finished = val("finished")
    put("requests_finished", finished, 0)
    split = finished is not None and any(k.startswith(f"{over}_finished:") for k in ev.values)
    for r in FINISH_REASONS:         # a reason the engine labels no request with: none finished so
        put(f"finished_{r}_pct", (val(f"finished:{r}") or 0.0) / finished * 100 if split and finished > 0 else None)
    aborted = val("aborted")
    if aborted is None and split:
        aborted = val("finished:abort") or 0.0
    put("requests_aborted", aborted, 0)
    put("aborted_pct", aborted / finished * 100 if aborted is not None and finished else None)
    acc = [x for r in ev.stats_rows if (x := r.get("spec_accept")) is not None]
    whole = val("spec_accept")
    spec = whole if whole is not None else (statistics.fmean(acc) if acc else None)
    if v.get("spec_acceptance_mean") is None:       # the log's SpecDecoding lines come first
        v["spec_acceptance_mean"] = None if spec is None else round(spec, 1)
    if spec is not None:
        s.key_stats[f"spec_acceptance_{over or 'window'}"] = {
            "value": round(spec, 1), "over": said if whole is not None else "the mean of the samples (gauge)"}
    for qn in ("mean", "p50", "p95", "p99"):
        put(f"iteration_tokens_{qn}", val(f"iteration_tokens_{qn}"))
    sw = [x for r in ev.stats_rows if (x := r.get("swapped")) is not None]
    v["swapped_mean"] = round(statistics.fmean(sw), 2) if sw else None
    v["swapped_max"] = max(sw) if sw else None
