"""One time axis for engine stats and GPU samples.

vLLM timestamps carry no year; `nvidia-smi dmon -o DT` and the query CSV do. When a log's year
was only assumed, the GPU samples' dates correct it. A dmon capture without times is placed by
`--gpu-start` and the sampling interval; without that it cannot be fused and says so.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from .model import Evidence


def align_gpu(ev: Evidence, gpu_start: datetime | None = None, interval: float = 1.0) -> None:
    if not ev.gpu_rows:
        return
    if gpu_start is not None:
        for r in ev.gpu_rows:
            if r.get("time") is None:
                r["time"] = gpu_start + timedelta(seconds=(r.get("cycle", 1) - 1) * interval)
    dated = [r["time"] for r in ev.gpu_rows if r.get("time") is not None and r["time"].year > 1900]
    stats_times = [r["time"] for r in ev.stats_rows if r.get("time") is not None]
    # `-o T` captures: a time of day only; borrow the date from the log's stats.
    if stats_times and any(r.get("time") is not None and r["time"].year == 1900 for r in ev.gpu_rows):
        day = min(stats_times).date()
        prev = None
        for r in ev.gpu_rows:
            t = r.get("time")
            if t is not None and t.year == 1900:
                if prev is not None and t.time() < prev:
                    day = day + timedelta(days=1)     # past midnight
                prev = t.time()
                r["time"] = datetime.combine(day, t.time())
        dated = [r["time"] for r in ev.gpu_rows if r.get("time") is not None]
    if dated and ev.year_guessed:
        year = min(dated).year

        def reyear(t, source):
            base = ev.year_guessed.get(source)
            if base is None or t is None or year == base:
                return t
            try:
                return t.replace(year=t.year - base + year)
            except ValueError:      # 29 February in a year without one
                return t.replace(year=t.year - base + year, day=28)
        for r in ev.stats_rows:
            r["time"] = reyear(r.get("time"), r.get("source"))
        # the log's events (crashes, OOMs, start-up lines) move with its stats: one year per log
        for evs in ev.events.values():
            for e in evs:
                e.time = reyear(e.time, e.source)
    ev.gpu_rows.sort(key=lambda r: (r.get("time") or datetime.min, r.get("gpu", 0)))
    ev._gpu_series = None
    ev.counters["gpu_aligned"] = int(bool(dated) and bool(stats_times))
