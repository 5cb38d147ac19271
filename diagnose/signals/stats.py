"""Small statistics the producers share: unknowns (None) are left out, never counted as 0."""
from __future__ import annotations

import math
import re
import statistics
import sys
from collections import Counter
from fractions import Fraction
from itertools import groupby, repeat
from operator import mul, sub


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
    values), each an integer over one power of two, then the same correctly rounded root of the
    same exact variance."""
    if len(xs) < 2:
        return None
    if _SQRT_OF_FRAC is None:
        return statistics.stdev(xs)
    counts = Counter(xs)
    sums = _scaled_sums(counts) if set(map(type, counts)) <= _FLOAT else None
    if sums is None:
        sums = _ratio_sums(counts)
    if sums is None:
        return statistics.stdev(xs)         # a Decimal, a Fraction, a bool, NaN: the library's own way
    sx, sxx, den = sums
    n = len(xs)
    mss = Fraction(n * sxx - sx * sx, n * (n - 1) * den * den)
    return _SQRT_OF_FRAC(mss.numerator, mss.denominator)


_FLOAT = {float}


def _scaled_sums(counts: Counter) -> tuple | None:
    """Σx and Σx² of floats as integers over one power of two, den, in C (a rate has thousands of
    distinct values: as_integer_ratio and a loop a value took longer than the rest of the run's
    statistics): x · 2^(53 - e), e the binary exponent of the smallest magnitude, is an integer for
    every x, and exact (a power of two moves only the exponent). den is a multiple of the largest
    denominator _ratio_sums takes: the same variance once Fraction reduces it. None where a value
    is not finite or the product overflows."""
    tiny = min(map(abs, filter(None, counts)), default=1.0)
    den = 2 ** max(0, 53 - math.frexp(tiny)[1])
    try:
        ints = list(map(int, map(mul, counts, repeat(float(den)))))
    except (ValueError, OverflowError):     # NaN, an infinity, or past the largest float
        return None
    cs = counts.values()
    return sum(map(mul, ints, cs)), sum(map(mul, map(mul, ints, ints), cs)), den


def _ratio_sums(counts: Counter) -> tuple | None:
    """Σx and Σx² as integers over the largest denominator among the values' ratios (floats and
    ints); None for anything else, NaN or an infinity."""
    if not all(x.__class__ is float or x.__class__ is int for x in counts):
        return None
    try:
        ratios = [(x.as_integer_ratio(), c) for x, c in counts.items()]
    except (ValueError, OverflowError):
        return None
    den = max(d for (_, d), _ in ratios)        # every denominator a power of two: each divides it
    sx = sxx = 0
    for (a, d), c in ratios:
        a *= den // d
        sx += c * a
        sxx += c * a * a
    return sx, sxx, den


# Python 3.11's statistics.linear_regression and correlation: the same centred sums, each made by
# a generator, twice over. Other versions compute them otherwise (3.10 squares by ** 2.0, 3.12
# by sumprod): there trend() calls the library.
_TREND_SUMS = sys.version_info[:2] == (3, 11)


def trend(x: list, y: list) -> tuple[float, float | None]:
    """statistics.linear_regression(x, y).slope and statistics.correlation(x, y), the same floats
    (None for a correlation with a constant); on Python 3.11 from one set of the library's sums,
    made in C (fsum's exact sum does not depend on the order). x must not be constant."""
    if not _TREND_SUMS:
        slope = statistics.linear_regression(x, y).slope
        try:
            return slope, statistics.correlation(x, y)
        except statistics.StatisticsError:
            return slope, None
    n = len(x)
    if len(y) != n or n < 2:
        raise statistics.StatisticsError("trend requires two inputs of the same length, at least two points")
    dx = list(map(sub, x, repeat(math.fsum(x) / n, n)))
    dy = list(map(sub, y, repeat(math.fsum(y) / n, n)))
    sxy, sxx, syy = math.fsum(map(mul, dx, dy)), math.fsum(map(mul, dx, dx)), math.fsum(map(mul, dy, dy))
    try:
        r = sxy / math.sqrt(sxx * syy)
    except ZeroDivisionError:
        r = None
    return sxy / sxx, r


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
