"""Fleet signals: how the replicas behind one balancer compare (from their own signals)."""
from __future__ import annotations

import statistics


def fleet_signals(analyses: list, end=None) -> dict:
    """`analyses`: per-instance Analysis objects. Returns signal values for the fleet rules."""
    v: dict = {"fleet_instances": len(analyses)}
    names = [a.instance or f"#{i}" for i, a in enumerate(analyses)]
    for col, key in (("running_mean", "running"), ("kv_usage_mean", "kv")):
        # A replica that served nothing in the window (all samples idle) has no steady-window mean,
        # yet it is the coldest of all: it counts as 0, it does not drop out.
        vals = [(n, 0.0 if a.signals.values.get("all_idle") and a.signals.values.get(col) is None
                 else a.signals.values.get(col)) for n, a in zip(names, analyses)]
        vals = [(n, x) for n, x in vals if x is not None]
        if len(vals) >= 2:
            xs = [x for _, x in vals]
            mean = statistics.fmean(xs)
            v[f"fleet_{key}_cv"] = round(statistics.pstdev(xs) / mean, 3) if mean else 0.0
            hot = max(vals, key=lambda p: p[1])
            cold = min(vals, key=lambda p: p[1])
            v[f"fleet_{key}_hottest"] = f"{hot[0]} ({hot[1]:.3g})"
            v[f"fleet_{key}_coolest"] = f"{cold[0]} ({cold[1]:.3g})"
            v[f"fleet_{key}_ratio"] = round(hot[1] / cold[1], 2) if cold[1] else (float("inf") if hot[1] else 1.0)
            v[f"fleet_{key}_spread"] = round(hot[1] - cold[1], 3)
    # A replica whose series stop while the others go on.
    last = [(n, a.evidence.last_seen or _last_time(a)) for n, a in zip(names, analyses)]
    known = [t for _, t in last if t is not None]
    if len(known) >= 2:
        newest = end or max(known)
        gap = 300   # seconds: five scrape intervals at 60 s, twenty at 15 s
        down = [n for n, t in last if t is not None and (newest - t).total_seconds() > gap]
        v["fleet_down"] = ", ".join(down) if down else None
        v["fleet_down_count"] = len(down)
    return v


def _last_time(a):
    rows = [r["time"] for r in a.evidence.stats_rows if r.get("time") is not None]
    return max(rows) if rows else None
