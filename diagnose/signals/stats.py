"""Small statistics the producers share: unknowns (None) are left out, never counted as 0."""
from __future__ import annotations

import math
import re
import statistics


def known(xs) -> list:
    return [x for x in xs if x is not None]


def quantile(xs: list, q: float) -> float:
    """The sorted value at rank (n-1)·q, the rank rounded half up ("nearest", as polars does):
    a p95 is a value that was logged, never one interpolated between two."""
    xs = sorted(xs)
    pos = (len(xs) - 1) * q
    i = math.floor(pos)
    if pos - i >= 0.5:
        i += 1
    return xs[min(i, len(xs) - 1)]


def stdev(xs: list) -> float | None:
    return statistics.stdev(xs) if len(xs) > 1 else None


def share(flags: list) -> float:
    return sum(flags) / len(flags)


def longest_run(flags: list) -> int:
    best = cur = 0
    for f in flags:
        cur = cur + 1 if f else 0
        best = max(best, cur)
    return best


def summary(xs: list) -> dict:
    """mean, std, n, p50, p95 of known values: what a later run's comparison reads."""
    return {"mean": round(statistics.fmean(xs), 3), "std": round(stdev(xs) or 0.0, 3),
            "n": len(xs), "p50": round(quantile(xs, 0.5), 3), "p95": round(quantile(xs, 0.95), 3)}


def version_at_least(ver, want: tuple) -> bool:
    if not ver:
        return False
    nums = [int(x) for x in re.findall(r"\d+", str(ver))[:3]]
    return tuple(nums + [0] * (3 - len(nums))) >= want
