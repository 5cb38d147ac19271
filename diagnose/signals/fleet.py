"""Fleet signals: how the replicas behind one balancer compare (from their own signals)."""
from __future__ import annotations

from .producers import produces

import statistics


@produces("fleet_down_count", "fleet_instances", "fleet_kv_cv", "fleet_kv_ratio", "fleet_kv_spread",
          "fleet_running_cv", "fleet_running_ratio", "fleet_running_spread", texts=("fleet_down",
          "fleet_kv_coolest", "fleet_kv_hottest", "fleet_replaced", "fleet_running_coolest",
          "fleet_running_hottest"))
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
            # against an idle replica the ratio has no bound: 999 stands for it (JSON has no infinity)
            v[f"fleet_{key}_ratio"] = min(999.0, round(hot[1] / cold[1], 2)) if cold[1] else (999.0 if hot[1] else 1.0)
            v[f"fleet_{key}_spread"] = round(hot[1] - cold[1], 3)
    # A replica whose series stop while the others go on (or, with the window's end known, a lone
    # server that fell silent). A replica replaced by a new one that came up within REPLACED_S of
    # its last sample is a rolling restart, not an outage; one scraped as down (up == 0) for the
    # whole window never had a series and is down from the start.
    last = [(n, a.evidence.last_seen or _row_time(a, max)) for n, a in zip(names, analyses)]
    first = {n: _row_time(a, min) for n, a in zip(names, analyses)}
    known = [t for _, t in last if t is not None]
    dead = [n for n, a in zip(names, analyses) if a.evidence.counters.get("scrape_down_all_window")]
    if len(known) >= 2 or (end is not None and (known or dead)):
        newest = end or max(known)
        stale = [(n, t) for n, t in last if t is not None and (newest - t).total_seconds() > DOWN_S]
        replaced = [n for n, t in stale
                    if any(m != n and f is not None and -REPLACED_S <= (f - t).total_seconds() <= REPLACED_S
                           and (newest - (dict(last).get(m) or newest)).total_seconds() <= DOWN_S
                           for m, f in first.items())]
        down = [n for n, _ in stale if n not in replaced] + dead
        v["fleet_down"] = ", ".join(down) if down else None
        v["fleet_down_count"] = len(down)
        v["fleet_replaced"] = ", ".join(replaced) if replaced else None
    return v


DOWN_S = 300       # seconds without a sample: five scrape intervals at 60 s, twenty at 15 s
REPLACED_S = 180   # a new replica up within this of an old one's last sample: a rolling restart


def _row_time(a, pick):
    """The first (pick=min) or last (pick=max) stats row time of a replica, or None."""
    return pick((r["time"] for r in a.evidence.stats_rows if r.get("time") is not None), default=None)
