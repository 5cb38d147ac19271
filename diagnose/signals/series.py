"""Time series for plots (the HTML report): engine stats and GPU samples on one time axis.

Long inputs are downsampled for drawing with LTTB (largest-triangle-three-buckets, which keeps the
shape), and every series' own minimum and maximum are kept on top of it: a spike is what an
operator looks for. Engine stats of several data-parallel engines at one tick are summed (counts
and rates) or maxed (KV usage), as the verdict reads them.
"""
from __future__ import annotations

import math
from datetime import timezone

MAX_POINTS = 1500
SUMMED = ("running", "waiting", "swapped", "prompt_tps", "gen_tps", "preemptions")
MAXED = ("kv_usage", "ttft_p50", "itl_p50", "spec_accept")
# (panel title, unit, [(column, label)])
ENGINE_PANELS = [("Requests", "", [("running", "running"), ("waiting", "waiting"), ("swapped", "swapped")]),
                 ("KV cache usage", "%", [("kv_usage", "KV usage")]),
                 ("Throughput", "tokens/s", [("prompt_tps", "prompt"), ("gen_tps", "generation")]),
                 ("Preemptions", "per interval", [("preemptions", "preemptions")]),
                 ("Latency", "s", [("ttft_p50", "TTFT p50"), ("itl_p50", "ITL p50")]),
                 # (a panel, or a line, only where the input has the family: never drawn as 0)
                 ("Speculative decoding", "% of drafted tokens accepted", [("spec_accept", "draft acceptance")])]
GPU_PANELS = [("GPU SM utilisation", "%", "util"), ("GPU memory controller", "%", "mem_util"), ("GPU power", "W", "power_w")]


def _epoch(t, metric: bool = False) -> float:
    # Log times carry no zone: shown as written (the report displays UTC wall-clock). A metric's
    # (Unix) time is drawn as the text shows it: in the local zone, or UTC under --utc (clock.py).
    if metric and t.tzinfo is None:
        from ..clock import shown
        t = shown(t)[0]
    return (t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t).timestamp()


def lttb(xs: list, ys: list, n: int) -> list[int]:
    """Indices of `n` points that keep the curve's shape (Steinarsson 2013); None values count as 0."""
    m = len(xs)
    if m <= n or n < 3:
        return list(range(m))
    y = [v or 0.0 for v in ys]
    out = [0]
    every = (m - 2) / (n - 2)
    a = 0
    for i in range(n - 2):
        lo, hi = int(i * every) + 1, int((i + 1) * every) + 1
        nlo, nhi = hi, min(int((i + 2) * every) + 1, m)
        ax, ay = xs[a], y[a]
        cx = sum(xs[nlo:nhi]) / max(nhi - nlo, 1)
        cy = sum(y[nlo:nhi]) / max(nhi - nlo, 1)
        best, area = lo, -1.0
        for j in range(lo, min(hi, m)):
            ar = abs((ax - cx) * (y[j] - ay) - (ax - xs[j]) * (cy - ay))
            if ar > area:
                best, area = j, ar
        out.append(best)
        a = best
    out.append(m - 1)
    return out


def _thin(xs: list, cols: list[list]) -> tuple[list, list[list]]:
    cols = [[v if isinstance(v, (int, float)) and math.isfinite(v) else None for v in c] for c in cols]
    if len(xs) <= MAX_POINTS:
        return xs, cols
    keep = set(lttb(xs, cols[0], MAX_POINTS))
    for c in cols:
        known = [i for i, v in enumerate(c) if v is not None]
        if known:
            keep.add(max(known, key=lambda i: c[i]))
            keep.add(min(known, key=lambda i: c[i]))
    idx = sorted(keep)
    return [xs[i] for i in idx], [[c[i] for i in idx] for c in cols]


def plot_series(ev) -> list[dict]:
    """Panels to draw: {"title", "unit", "time": bool, "x": [...], "series": [{"label", "y": [...]}]}."""
    panels = []
    rows = ev.stats_rows
    timed = bool(rows) and all(r.get("time") is not None for r in rows)
    metric = getattr(ev, "clock_zone", None) == "UTC"
    ticks: dict = {}
    for i, r in enumerate(rows):
        agg = ticks.setdefault(_epoch(r["time"], metric) if timed else i, {})
        for k in SUMMED:
            if r.get(k) is not None:
                agg[k] = agg.get(k, 0.0) + r[k]
        for k in MAXED:
            if r.get(k) is not None:
                agg[k] = max(agg.get(k, r[k]), r[k])
    xs = sorted(ticks)
    for title, unit, cols in ENGINE_PANELS:
        got = [(c, label) for c, label in cols if any(ticks[x].get(c) is not None for x in xs)]
        if not got:
            continue
        px, ys = _thin(xs, [[ticks[x].get(c) for x in xs] for c, _ in got])
        panels.append({"title": title, "unit": unit, "time": timed, "x": px,
                       "series": [{"label": label, "y": y} for (_, label), y in zip(got, ys)]})
    gpu = [r for r in ev.gpu_rows if r.get("time") is not None]
    if gpu and (timed or not rows):
        ids = sorted({r.get("gpu", 0) for r in gpu})
        by = {}
        for r in gpu:
            by.setdefault(_epoch(r["time"]), {})[r.get("gpu", 0)] = r
        gx = sorted(by)
        for title, unit, col in GPU_PANELS:
            cols = [[(by[t].get(g) or {}).get(col) for t in gx] for g in ids]
            if not any(v is not None for c in cols for v in c):
                continue
            if len(ids) <= MAX_GPU_LINES:
                px, ys = _thin(gx, cols)
                panels.append({"title": title, "unit": unit, "time": True, "x": px,
                               "series": [{"label": f"GPU {g}", "y": y} for g, y in zip(ids, ys)]})
                continue
            # Many GPUs drawn as lines are a tangle: their mean, and a band from the lowest to the
            # highest GPU at each sample (a GPU apart from the others shows as a wide band).
            mean, lo, hi = _across(cols)
            px, ys = _thin(gx, [mean, lo, hi])
            panels.append({"title": title, "unit": unit, "time": True, "x": px, "band": [2, 3],
                           "series": [{"label": f"mean of {len(ids)} GPUs", "y": ys[0]},
                                      {"label": "lowest GPU", "y": ys[1]}, {"label": "highest GPU", "y": ys[2]}]})
    return panels


MAX_GPU_LINES = 3       # up to this many GPUs a line each; more: their mean and a min–max band


def _across(cols: list[list]) -> tuple[list, list, list]:
    """Mean, min and max over the GPUs at each sample, of the GPUs sampled then (none: unknown)."""
    mean, lo, hi = [], [], []
    for at in zip(*cols):
        known = [v for v in at if isinstance(v, (int, float)) and math.isfinite(v)]
        mean.append(round(sum(known) / len(known), 3) if known else None)
        lo.append(min(known) if known else None)
        hi.append(max(known) if known else None)
    return mean, lo, hi


def plot_marks(ev, sig, findings: list[dict]) -> dict:
    """What to mark on the plots: the steady window the runtime findings rest on (a band), and
    each finding's evidence lines that carry a time (crashes, OOMs, preemptions, stats lines)."""
    when: dict = {}
    for evs in ev.events.values():
        for e in evs:
            if getattr(e, "time", None) is not None:
                when[(e.source, e.line)] = e.time
    for r in ev.stats_rows:
        if r.get("time") is not None:
            when[(r.get("source"), r.get("line"))] = r["time"]
    marks, seen = [], set()
    metric = getattr(ev, "clock_zone", None) == "UTC"
    for f in findings:
        for e in f.get("evidence", []):
            t = when.get((e.get("source"), e.get("line")))
            if t is not None and (f["id"], t) not in seen:
                seen.add((f["id"], t))
                marks.append({"t": _epoch(t, metric), "label": f["id"]})
    band = None
    if getattr(sig, "steady_range", None) and all(x is not None for x in sig.steady_range):
        band = [_epoch(sig.steady_range[0], metric), _epoch(sig.steady_range[1], metric)]
    return {"band": band, "marks": marks[:50]}
