"""Sustained conditions (a rule's `[sustained]` table), as Prometheus alerting rules say `for:`.

`when` is judged on each stats sample of the steady window (the sample's own columns — running,
waiting, kv_usage, gen_tps, prompt_tps, preemptions, the batch of one engine rank_running_max — and
the run's signals and the rule's params), and the rule's expressions get:

- `sustained`: the longest run of consecutive samples where `when` held is at least `for` samples
  (an integer) or seconds (`"90s"`, `"5m"`), and where `share` is given, `when` held in at least that
  share of the window's samples;
- `sustained_samples`, `sustained_seconds`, `sustained_share`, `sustained_from`, `sustained_to`, and
  `sustained_peak`: the highest `peak` column inside the longest run.

Without a steady window (too few samples) they are unknown: the rule says *not applicable*.
"""
from __future__ import annotations

import itertools
import re
from bisect import bisect_right
from datetime import timedelta
from operator import sub

from ..values import is_unknown
from ..lazyre import lazy
from .expr import evaluate, names_of

# The names a rule's expressions get from its `[sustained]` table.
NAMES = ("sustained", "sustained_samples", "sustained_seconds", "sustained_share", "sustained_from",
         "sustained_to", "sustained_peak")
# Per-sample columns `when` may name (evidence.model.STATS_COLUMNS plus the batch of one engine).
COLUMNS = ("prompt_tps", "gen_tps", "running", "waiting", "swapped", "kv_usage", "prefix_hit", "kv_spread",
           "preemptions", "kv_tokens_used", "prompt_len", "ctx_tokens", "paused", "ttft_p50", "ttft_p95",
           "ttft_p99", "itl_p50", "itl_p95", "itl_p99", "rank_running_max", "rank_running_mean")
_NO_STEP = timedelta(0)
# lazy: read when rules are loaded anew, not from the loaded-rules cache
_DURATION = lazy(r"^(\d+(?:\.\d+)?)(s|m|h)$")


def parse_for(x) -> tuple[int | None, float | None]:
    """`for = 3` (samples) or `for = "90s"` (seconds): (samples, seconds); ValueError otherwise."""
    if isinstance(x, bool):
        raise ValueError("`for` is a number of samples or a duration such as \"90s\"")
    if isinstance(x, int) and x >= 1:
        return x, None
    m = _DURATION.match(str(x).strip())
    if not m:
        raise ValueError("`for` is a number of samples (>= 1) or a duration such as \"90s\", \"5m\"")
    return None, float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]


def evaluate_sustained(spec: dict, names: dict, samples: dict | None) -> dict:
    """The `sustained_*` names for one rule, from the steady window's samples (column -> list)."""
    out = dict.fromkeys(NAMES)
    n = len(samples.get("running") or ()) if samples else 0
    if not n:
        return out
    times = samples.get("time") or [None] * n
    row = dict(names)               # one copy of the signals; each sample overwrites its columns
    used = _columns_of(spec["when"])
    for c in COLUMNS:
        if c not in used:
            row[c] = None           # a column `when` does not name: what it is does not matter
    cols = [(c, samples.get(c)) for c in used]
    # `when` is a pure function of the sample's columns it names: samples alike are judged once
    # (a day of stats is thousands of samples, most of them repeating a few values), in the order
    # they first appear, and each sample's flag looked up in C (map), not in a loop a sample.
    # Each sample's values of those columns: the tuples made by zip.
    if cols and all(col is None or len(col) == n for _, col in cols):
        keys = list(zip(*[col if col is not None else itertools.repeat(None, n) for _, col in cols]))
    else:
        keys = [tuple(col[i] if col is not None else None for _, col in cols) for i in range(n)]
    seen = dict.fromkeys(keys)
    for key in seen:
        for (c, _), v in zip(cols, key):
            row[c] = v
        x = evaluate(spec["when"], row)
        seen[key] = not is_unknown(x) and bool(x)
    flags = list(map(seen.__getitem__, keys))
    a, b = _longest(flags)
    run = b - a
    seconds = None
    if run and times[a] is not None and times[b - 1] is not None:
        seconds = (times[b - 1] - times[a]).total_seconds() + _interval(times)
    share = sum(flags) / n
    holds = True
    if spec.get("for_samples") is not None:
        holds = run >= spec["for_samples"]
    if spec.get("for_seconds") is not None:
        holds = holds and seconds is not None and seconds >= spec["for_seconds"]
    if spec.get("share") is not None:
        holds = holds and share >= spec["share"]
    out.update(sustained=holds, sustained_samples=run, sustained_seconds=round(seconds, 1) if seconds is not None else None,
               sustained_share=round(share, 3))
    if run:
        if times[a] is not None and times[b - 1] is not None:
            out["sustained_from"], out["sustained_to"] = f"{times[a]:%H:%M:%S}", f"{times[b - 1]:%H:%M:%S}"
            if names.get("sample_clock") == "UTC":      # metric times: in the zone the report shows, named
                from ..clock import shown
                (t0, _), (t1, zone) = shown(times[a]), shown(times[b - 1])
                out["sustained_from"], out["sustained_to"] = f"{t0:%H:%M:%S}", f"{t1:%H:%M:%S} {zone}"
        col = samples.get(spec.get("peak") or "")
        if col is not None:
            out["sustained_peak"] = max((x for x in col[a:b] if x is not None), default=None)
    return out


def _columns_of(tree) -> tuple:
    """The sample columns an expression names (a few nodes: walked once per rule and window)."""
    names = set(names_of(tree))
    return tuple(c for c in COLUMNS if c in names)


_TRUE_RUN = re.compile(rb"\x01+")


def _longest(flags: list) -> tuple[int, int]:
    """(start, end) of the first longest run of true flags; (0, 0) without one. The flags as bytes,
    their runs found by a regex: in C, not a step a sample."""
    best = (0, 0)
    for m in _TRUE_RUN.finditer(bytes(flags)):
        a, b = m.span()
        if b - a > best[1] - best[0]:
            best = (a, b)
    return best


def _interval(times: list) -> float:
    """One sample's span (the median step forward): a run of one sample lasted that long, not zero.
    The steps are sorted as timedeltas, in C, and only the median one made seconds (total_seconds
    keeps the order: the same median)."""
    try:
        steps = sorted(map(sub, times[1:], times))
    except TypeError:       # a sample without a time: the steps between timed neighbours
        steps = sorted(b - a for a, b in zip(times, times[1:]) if a is not None and b is not None and b > a)
    steps = steps[bisect_right(steps, _NO_STEP):]       # forward steps only
    return steps[len(steps) // 2].total_seconds() if steps else 0.0
