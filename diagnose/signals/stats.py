"""Small statistics the producers share: unknowns (None) are left out, never counted as 0."""
from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from fractions import Fraction
from itertools import groupby


def known(xs) -> list:
    return [x for x in xs if x is not None]


def quantile(xs: list, q: float) -> float:
    """The sorted value at rank (n-1)·q, the rank rounded half up ("nearest", as polars does):
    a p95 is a value that was logged, never one interpolated between two."""
    return ranked(sorted(xs), q)


def ranked(xs: list, q: float) -> float:
    """quantile() of a list sorted already: one sort serves every quantile of a column."""
    pos = (len(xs) - 1) * q
    i = math.floor(pos)
    if pos - i >= 0.5:
        i += 1
    return xs[min(i, len(xs) - 1)]


# statistics.stdev's own correctly rounded square root of a fraction (Python 3.11+); where it is
# missing, stdev() is statistics.stdev itself.
_SQRT_OF_FRAC = getattr(statistics, "_float_sqrt_of_frac", None)


def stdev(xs: list) -> float | None:
    """statistics.stdev, the same float, without a Fraction per sample (50,000 samples took a
    quarter of a second): the exact sums over the distinct values (a gauge repeats a few hundred
    values), each an integer over the largest power-of-two denominator among them, then the same
    correctly rounded root of the same exact variance."""
    if len(xs) < 2:
        return None
    if _SQRT_OF_FRAC is None:
        return statistics.stdev(xs)
    counts = Counter(xs)
    if not all(x.__class__ is float or x.__class__ is int for x in counts):
        return statistics.stdev(xs)         # a Decimal, a Fraction, a bool: the library's own way
    try:
        ratios = [(x.as_integer_ratio(), c) for x, c in counts.items()]
    except (ValueError, OverflowError):     # NaN or an infinity: the library's way (outside this handler)
        ratios = None
    if ratios is None:
        return statistics.stdev(xs)
    den = max(d for (_, d), _ in ratios)        # every denominator a power of two: each divides it
    sx = sxx = 0
    for (a, d), c in ratios:
        a *= den // d
        sx += c * a
        sxx += c * a * a
    n = len(xs)
    mss = Fraction(n * sxx - sx * sx, n * (n - 1) * den * den)
    return _SQRT_OF_FRAC(mss.numerator, mss.denominator)


def share(flags: list) -> float:
    return sum(flags) / len(flags)


def longest_run(flags: list) -> int:
    """The most consecutive true flags."""
    return max((len(list(run)) for f, run in groupby(flags, key=bool) if f), default=0)


def summary(xs: list, ordered: list | None = None) -> dict:
    """mean, std, n, p50, p95 of known values: what a later run's comparison reads. `ordered`:
    xs sorted already, where the caller has it."""
    s = sorted(xs) if ordered is None else ordered
    return {"mean": round(statistics.fmean(xs), 3), "std": round(stdev(xs) or 0.0, 3),
            "n": len(xs), "p50": round(ranked(s, 0.5), 3), "p95": round(ranked(s, 0.95), 3)}


def version_at_least(ver, want: tuple) -> bool:
    if not ver:
        return False
    nums = [int(x) for x in re.findall(r"\d+", str(ver))[:3]]
    return tuple(nums + [0] * (3 - len(nums))) >= want
