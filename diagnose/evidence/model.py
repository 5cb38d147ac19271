"""The normalized evidence model every source fills, whatever the engine.

Parsers write here; signals read from here. Nothing downstream looks at raw lines
except through the provenance (file, line, text) kept on facts and events.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# Deployment facts under the same names for every engine, and those rules use beside them: the
# fact catalogue (data/facts.toml, evidence/facts.py) declares each once.
from .facts import EXTRA_FACTS, FACT_NAMES  # noqa: E402,F401  (re-exported: the layers import them from here)

# How many example lines of each event kind to keep; counts are always exact.
EVENT_KEEP = 20
VALUES_KEEP = 10_000

_INF = float("inf")


def _finite(x) -> float | None:
    try:
        f = float(x)
    except (TypeError, ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None


_NONE_OR_FLOAT = {type(None), float}


def _finite_floats(col: list) -> bool:
    """Whether every value is None or a finite float (as parsers give them): a column that
    stats_columns keeps as it is. Checked in C, not value by value: a NaN or an infinity makes the
    sum NaN or infinite (so does an overflow of finite values, which then only takes the long way)."""
    return set(map(type, col)) <= _NONE_OR_FLOAT and math.isfinite(sum(filter(None, col)))

# Engine stats columns, by kind: f number, i integer, b boolean, s text, t time.
STATS_COLUMNS = {
    "time": "t", "source": "s", "line": "i", "engine_idx": "i",
    "prompt_tps": "f", "gen_tps": "f", "running": "f", "waiting": "f", "swapped": "f", "kv_usage": "f",
    "prefix_hit": "f", "kv_spread": "f", "preemptions": "f", "kv_tokens_used": "f", "prompt_len": "f", "graph": "b",
    "ctx_tokens": "f", "paused": "f", "kind": "s", "spec_accept": "f",
    "ttft_p50": "f", "ttft_p95": "f", "ttft_p99": "f", "itl_p50": "f", "itl_p95": "f", "itl_p99": "f",
}


@dataclass(slots=True)
class Fact:
    value: Any
    source: str | None = None
    line: int | None = None
    text: str | None = None


@dataclass(slots=True)
class Event:
    kind: str
    source: str
    line: int
    text: str
    time: datetime | None = None
    data: dict = field(default_factory=dict)


@dataclass
class InputInfo:
    path: str
    kind: str = "log"
    engine: str | None = None
    engine_version: str | None = None
    lines: int = 0
    recognised_lines: int = 0
    unrecognised_lines: int = 0
    unreadable_lines: int = 0
    errors: list[str] = field(default_factory=list)
    coverage: Any = None            # sources/coverage.py: regions and the share of lines understood
    launches: int = 0               # server launches the input holds

    def to_json(self) -> dict:
        return {
            "path": self.path, "kind": self.kind, "engine": self.engine,
            "engine_version": self.engine_version, "lines": self.lines,
            "recognised_lines": self.recognised_lines,
            "unrecognised_lines": self.unrecognised_lines,
            "unreadable_lines": self.unreadable_lines, "errors": list(self.errors),
            "launches": self.launches,
            "coverage": self.coverage.to_json() if self.coverage is not None else None,
        }


# Samples an Evidence holds: a day of 10 s engine stats is 8,640 rows, an hour of 8 GPUs sampled
# each second 28,800; a row takes ~1 KB. Past these, rows are thinned (Rows), never unbounded.
MAX_STATS_ROWS = 50_000
MAX_GPU_ROWS = 60_000


class Rows(list):
    """Samples (dicts) in time order, bounded: past `cap` rows, every other row of each series
    (`key`: an engine's stats, one GPU) is dropped and from then on each series keeps one row in
    `stride`, so what is kept stays evenly spread over the whole input (means and percentiles
    hold; a year of one-second samples does not take all memory). The newest row is always last,
    kept or not yet decided, as parsers amend it (a prefix-cache line after its stats line)."""

    def __init__(self, cap: int, key) -> None:
        super().__init__()
        self.cap, self.key = cap, key
        self.stride = 1
        self.seen: dict = {}        # series -> rows appended so far
        self.order: dict = {}       # id(row) -> its number in its series (only once thinning began)
        self.dropped = 0
        self._pending = False       # the last row is off the stride: replaced by the next one
        # The Rows that share `cap` with this one (the launches of one input: share()), None while
        # alone: a list holding the Rows itself would make every Rows a reference cycle, which only
        # the collector frees (and a run goes without it: each folded launch's rows stayed).
        self.shared: list | None = None
        # Replaced whenever rows other than the newest may change place (thinning, a parser's
        # sort or filter): what was worked out of these rows under one token holds for them, the
        # newest aside, while the token is the same (finish._plausible, a --follow pass).
        self.token = object()
        self.memo = None            # what finish._plausible and stats_columns made of a copy's first rows
        self.copied_from = None     # on a copy (_copy): (the Rows, its token, its length) then

    def __iadd__(self, other):
        self.extend(other)
        return self

    def share(self, other: "Rows") -> None:
        """Hold `other`'s rows and these within one cap: an input's launches, read one after the
        other, take no more memory together than one launch may (the largest is thinned first)."""
        if other.shared is not None and other.shared is self.shared:
            return
        if self.shared is None:
            self.shared = [self]
        theirs = other.shared if other.shared is not None else [other]
        self.shared.extend(theirs)
        for r in theirs:
            r.shared = self.shared

    def leave(self) -> None:
        """No longer held within the shared cap (its rows were taken by another Evidence)."""
        group = self.shared
        if group is not None:
            # by identity: Rows are lists, and list.remove() takes the first *equal* one (two
            # launches of one log copied twice hold equal rows: the wrong one left the cap)
            group[:] = [r for r in group if r is not self]
            self.shared = None
            if len(group) == 1:     # the one left is alone again
                group[0].shared = None

    def _used(self) -> int:
        return len(self) if self.shared is None else sum(map(len, self.shared))

    def append(self, row) -> None:
        if self.stride == 1 and self._used() < self.cap:
            list.append(self, row)
            return
        if self._pending:
            self.order.pop(id(list.pop(self)), None)
            self.dropped += 1
        if self.stride == 1 or self._used() >= self.cap:
            victim = max(self.shared, key=len) if self.shared is not None else self
            if victim is not self and len(victim) > len(self):
                victim._thin()      # an earlier launch's rows, evenly thinned: this one goes on as it was
                if self.stride == 1:
                    list.append(self, row)
                    return
            else:
                self._thin()        # before the new row goes in: it stays last whatever is dropped
        k = self.key(row)
        n = self.seen.get(k, 0)
        self.seen[k] = n + 1
        self.order[id(row)] = n
        list.append(self, row)
        self._pending = n % self.stride != 0

    def extend(self, rows) -> None:
        # Rows that all fit under the cap go in at once: each append would have taken its first
        # branch (a folded launch's rows, each append summing the lengths of every launch's Rows).
        if self.stride == 1 and isinstance(rows, list) and rows is not self and self._used() + len(rows) <= self.cap:
            src = getattr(rows, "copied_from", None)
            if not self and src is not None and rows.token is src[1]:
                # a merge's first rows, those of an unchanged copy, in their places: what was
                # worked out of them holds here (finish._plausible)
                self.copied_from, self.token = src, rows.token
            list.extend(self, rows)
            return
        for r in rows:
            self.append(r)

    # Pickled whole (an input read in another process comes back so): the rows, the state, and
    # each row's number in its series by position, as `order` is keyed by id() (new ids on load).
    def __reduce__(self):
        if _COPIES is not None:     # copied outside pickle (rows_copied): only its token is pickled
            if id(self) not in _COPIES:
                _COPIES[id(self)] = (self, self._copy())
            return _rows_copied, (id(self),)
        state = dict(self.__dict__)
        state["order"] = [self.order.get(id(r)) for r in self] if self.order else None
        state["memo"] = state["copied_from"] = None     # of this process's rows only
        return _rows_restore, (self.cap, self.key), (list(self), state)

    def __setstate__(self, st) -> None:
        rows, state = st
        order = state.pop("order")
        self.__dict__.update(state)
        list.extend(self, rows)
        self.order = {id(r): n for r, n in zip(rows, order) if n is not None} if order else {}

    def drops(self, k) -> bool:
        """Whether a row of series `k` appended now would be off the stride: taken out again by the
        next append, whatever it is. A reader with more rows to come in a run counts such a row by
        dropped_one() instead of making it (loading._c_stats_run): the same rows, numbers and
        counts as appending it. Never for the last row of a run: parsers amend the newest row."""
        return self.stride > 1 and self.seen.get(k, 0) % self.stride != 0

    def dropped_one(self, k) -> None:
        """What appending a row drops() told of, and the next append taking it out, leave."""
        self.seen[k] = self.seen.get(k, 0) + 1
        self.dropped += 1

    def _thin(self) -> None:
        self.token = object()
        if self.stride == 1:        # numbers for the rows kept so far, in order per series
            self.seen = {}
            for r in self:
                k = self.key(r)
                self.order[id(r)] = self.seen.get(k, 0)
                self.seen[k] = self.order[id(r)] + 1
        self.stride *= 2
        keep = [r for r in self if self.order.get(id(r), 0) % self.stride == 0]
        self.dropped += len(self) - len(keep)
        self.order = {id(r): self.order.get(id(r), 0) for r in keep}
        self[:] = keep
        self._pending = False

    def _copy(self) -> "Rows":
        """A copy whose rows are new dicts with the same values: numbers, strings, times, None
        (nothing a reader or finish() changes but a row's own items). `shared` is relinked by
        rows_copied."""
        c = Rows(self.cap, self.key)
        rows = list(map(dict.copy, self))
        list.extend(c, rows)
        c.__dict__.update(self.__dict__)
        c.seen = dict(self.seen)
        c.memo, c.copied_from = None, (self, self.token, len(rows))
        order = self.order
        if not order:
            c.order = {}
            return c
        try:    # once thinning began every row has its number: the map in C, no step per row
            c.order = dict(zip(map(id, rows), map(order.__getitem__, map(id, self))))
        except KeyError:
            c.order = {id(n): order[id(o)] for o, n in zip(self, rows) if id(o) in order}
        return c


def _moving(name: str):
    """list's own `name`, replacing the Rows' token first: it may move rows other than the newest
    (appending, and the pending row replaced by the next, do not)."""
    base = getattr(list, name)

    def method(self, *a, **kw):
        self.token = object()
        return base(self, *a, **kw)
    method.__name__ = method.__qualname__ = name
    return method


for _name in ("__setitem__", "__delitem__", "sort", "reverse", "insert", "remove", "pop", "clear"):
    setattr(Rows, _name, _moving(_name))


# While rows_copied() is on: id(Rows) -> (that Rows, its copy).
_COPIES: dict | None = None


@contextmanager
def rows_copied():
    """`with rows_copied(): copy = pickle.loads(pickle.dumps(x))` copies the Rows in x by
    Rows._copy, not through pickle (~7 times faster: a --follow pass copies its reading's state,
    loading.LineRead.snapshot); the copies share caps as the originals do."""
    global _COPIES
    _COPIES = made = {}
    try:
        yield
    finally:
        _COPIES = None
    relinked: dict = {}
    for orig, _copy in list(made.values()):
        if orig.shared is None or id(orig.shared) in relinked:
            continue
        group = []
        for r in orig.shared:       # a member pickle did not reach is copied too
            if id(r) not in made:
                made[id(r)] = (r, r._copy())
            group.append(made[id(r)][1])
        for c in group:
            c.shared = group
        relinked[id(orig.shared)] = group


def _rows_copied(token: int) -> Rows:
    return _COPIES[token][1]


def _rows_restore(cap: int, key) -> Rows:
    return Rows(cap, key)


def _stats_series(row: dict):
    return row.get("source"), row.get("engine_idx"), row.get("kind")


def _gpu_series(row: dict):
    return row.get("source"), row.get("gpu")


class Evidence:
    """Everything the sources found, normalized. One instance per analysed deployment."""

    def __init__(self) -> None:
        self.inputs: list[InputInfo] = []
        self.facts: dict[str, Fact] = {}
        self.settings: dict[str, Any] = {}      # the engine's own settings, verbatim
        self.events: dict[str, list[Event]] = {}
        self.event_counts: dict[str, int] = {}
        self.stats_rows: list[dict] = Rows(MAX_STATS_ROWS, _stats_series)   # periodic engine stats, one dict per line
        self.counters: dict[str, int] = {}       # cheap aggregate counts (access codes, paths…)
        self.prompt_prefixes: dict[int, int] = {}  # hash of prompt head → times seen (never the text)
        self.values: dict[str, list] = {}        # per-event numbers (requested context lengths …), bounded
        self.hosts: set[str] = set()             # host names in NCCL lines
        self.ray_ips: set[str] = set()           # remote Ray worker addresses (`ip=` in prefixes)
        self.gpu_rows: list[dict] = Rows(MAX_GPU_ROWS, _gpu_series)  # one dict per GPU per sample (dmon, query CSV, NVML …)
        self.gpu_info: dict[int, dict] = {}      # per GPU index: name, power_limit_w, sm_clock_max_mhz …
        self.topology: dict = {}                 # {"gpus": [...], "links": {(a, b): "NV18"}, "lines": {...}}
        self.year_guessed: dict[str, int] = {}   # source → year assumed for its year-less timestamps
        self.last_seen = None                    # newest sample time (live Prometheus: replica-down)
        self.clock_zone: str | None = None       # "UTC" where sample times came from Unix timestamps (metrics); a log's own clock has no zone
        self.instances: set[str] = set()         # Prometheus `instance` labels seen in this input
        self.instance_roles: dict[str, str] = {}  # instance -> prefill / decode (SGLang's `engine_type` label)
        self.instance_facts: dict[str, dict] = {}   # instance -> its own engine and model (from its series)
        self.instance_values: dict[str, dict] = {}  # instance -> its whole-window figures (window_*, lifetime_*)
        self.targets: dict = {}                  # SLO targets given as an input file
        self.bench_points: list[dict] = []       # load-test runs (sources/formats/bench_files.py), one per load level and file
        self.nccl_comms: dict[int, int] = {}    # NCCL communicator size (nRanks) → most nodes it spans (nNodes)
        self.lifecycle: dict = {}               # source → engines.common.Life: launched, stopping, died
        self.parts: list[dict] = []             # the launches it was read from (sources/grouping.py)
        self.skipped: list = []                 # inputs of the run left out, and why
        self._gpu_series = None
        self._stats_kept = None                  # the stats rows' columns as finish() read them

    # -- writing (sources) -------------------------------------------------
    def set_fact(self, name: str, value: Any, source: str | None = None,
                 line: int | None = None, text: str | None = None, *, override: bool = True) -> None:
        if value is None:
            return
        if not override and name in self.facts:
            return
        self.facts[name] = Fact(value, source, line, text)

    def add_event(self, kind: str, source: str, line: int, text,
                  time: datetime | None = None, **data: Any) -> None:
        """`text` may be a callable: it is only called for the examples kept (redaction is costly)."""
        self.event_counts[kind] = self.event_counts.get(kind, 0) + 1
        bucket = self.events.setdefault(kind, [])
        if len(bucket) < EVENT_KEEP:
            bucket.append(Event(kind, source, line, text() if callable(text) else text, time, data))

    def add_value(self, key: str, x: float) -> None:
        """A number an event carried, for distributions; the first VALUES_KEEP per key."""
        xs = self.values.setdefault(key, [])
        if len(xs) < VALUES_KEEP:
            xs.append(x)

    def count(self, key: str, n: int = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n

    def add_stats(self, row: dict) -> None:
        self.stats_rows.append(row)

    def absorb_facts(self, other: "Evidence") -> None:
        """Facts and settings another piece of the same deployment alone has (first come first)."""
        for k, f in other.facts.items():
            self.facts.setdefault(k, f)
        for k, v in other.settings.items():
            self.settings.setdefault(k, v)

    def absorb(self, other: "Evidence", facts: bool = True) -> None:
        """Take in another piece of the same deployment (another launch or process of one server):
        facts and settings it alone has, and all it counted and kept, bounded as when read."""
        if facts:
            self.absorb_facts(other)
        for kind, bucket in other.events.items():
            mine = self.events.setdefault(kind, [])
            mine.extend(bucket[: max(0, EVENT_KEEP - len(mine))])
        for kind, n in other.event_counts.items():
            self.event_counts[kind] = self.event_counts.get(kind, 0) + n
        self.stats_rows.extend(other.stats_rows)
        for k, n in other.counters.items():
            self.counters[k] = self.counters.get(k, 0) + n
        for k, n in other.prompt_prefixes.items():
            self.prompt_prefixes[k] = self.prompt_prefixes.get(k, 0) + n
        for k, xs in other.values.items():
            mine = self.values.setdefault(k, [])
            mine.extend(xs[: max(0, VALUES_KEEP - len(mine))])
        self.hosts |= other.hosts
        self.ray_ips |= other.ray_ips
        self.instances |= other.instances
        self.instance_roles.update(other.instance_roles)
        for inst, d in other.instance_facts.items():
            self.instance_facts.setdefault(inst, {}).update(d)
        for inst, d in other.instance_values.items():
            self.instance_values.setdefault(inst, {}).update(d)
        self.gpu_rows.extend(other.gpu_rows)
        for i, d in other.gpu_info.items():
            self.gpu_info.setdefault(i, {}).update({k: v for k, v in d.items() if v is not None})
        for k, v in other.topology.items():
            if isinstance(v, dict):
                self.topology.setdefault(k, {}).update(v)
            else:
                self.topology.setdefault(k, v)
        self.year_guessed.update(other.year_guessed)
        for k, v in other.targets.items():
            self.targets.setdefault(k, v)
        self.bench_points.extend(other.bench_points)
        for k, v in other.nccl_comms.items():
            self.nccl_comms[k] = max(self.nccl_comms.get(k, 0), v)
        self.clock_zone = self.clock_zone or other.clock_zone
        if other.last_seen is not None and (self.last_seen is None or other.last_seen > self.last_seen):
            self.last_seen = other.last_seen

    # -- reading (signals) ---------------------------------------------------
    def fact(self, name: str, default: Any = None) -> Any:
        f = self.facts.get(name)
        return default if f is None else f.value

    def has_event(self, kind: str) -> bool:
        return self.event_counts.get(kind, 0) > 0

    def first_event(self, kind: str) -> Event | None:
        b = self.events.get(kind)
        return b[0] if b else None

    @property
    def gpu_series(self):
        """GPU samples as a polars DataFrame, one row per GPU per sample."""
        if self._gpu_series is None:
            import polars as pl
            schema = {"time": pl.Datetime, "gpu": pl.Int64, "cycle": pl.Int64, "source": pl.Utf8, "line": pl.Int64,
                      "util": pl.Float64, "mem_util": pl.Float64, "power_w": pl.Float64, "sm_clock_mhz": pl.Float64,
                      "mem_clock_mhz": pl.Float64, "temp_c": pl.Float64, "mem_used_mib": pl.Float64,
                      "throttled": pl.Boolean}
            # Column by column: a copy of every row as a dict would double the peak on long runs.
            cols = {k: [r.get(k) for r in self.gpu_rows] for k in schema if k != "throttled"}
            cols["throttled"] = [bool(r.get("reasons")) if "reasons" in r else None for r in self.gpu_rows]
            self._gpu_series = pl.DataFrame(cols, schema=schema)
        return self._gpu_series

    def stats_columns(self) -> dict[str, list]:
        """Engine stats column by column: numbers as floats, None where a line did not say (NaN and
        infinities are not measurements). Plain lists, not polars: one row per stats interval (a few
        thousand a day), for which importing polars costs more than all the arithmetic."""
        cols: dict[str, list] = {}
        rows = self.stats_rows
        raw = self._kept_stats_columns()
        # The columns no row has (most of them, for any one engine's lines) without a pass each.
        present = raw.keys() if raw is not None else set().union(*rows) if rows else set()
        # A --follow pass: the numbers of the first rows as the last pass made them, where those
        # rows stayed in place (finish._plausible, Rows.memo); each value is made alone, so the
        # last pass's hold for them.
        memo, made, m = None, None, 0
        src = getattr(rows, "copied_from", None) if raw is not None else None
        if src is not None:
            memo = src[0].memo
            if memo is not None and memo["token"] is src[1] and rows.token is src[1]:
                made = memo["made"]
                if made is not None:
                    m = max(0, min(made[0], src[2]) - 1)
            else:
                memo = None
        for k, kind in STATS_COLUMNS.items():
            if kind == "t" or (kind != "f" and raw is None):    # times read afresh: finish() re-years them
                got = [r.get(k) for r in rows]
            elif k not in present:
                cols[k] = [None] * len(rows)
                continue
            else:
                got = raw[k] if raw is not None else [r.get(k) for r in rows]
            if kind == "f":     # parsers give floats: most columns are kept as they are, else each
                # value tested inline, the rest converted. A float is copied as it is read (x * 1.0 is
                # x, bit for bit, -0.0 too): the copies lie one after another, where the rows' own are
                # scattered over the heap among their dicts, and the analysis reads each column a
                # dozen times over (a cache miss a value was most of its time on a day's samples).
                before = made[1].get(k) if m else None
                part = got[m:] if before is not None else got
                col = [x * 1.0 if x.__class__ is float else x for x in part]
                if not _finite_floats(col):
                    col = [x if x is None or (x.__class__ is float and -_INF < x < _INF) else _finite(x) for x in col]
                cols[k] = before[:m] + col if before is not None else col
            elif kind == "b":
                cols[k] = [None if x is None else bool(x) for x in got]
            else:
                cols[k] = got if raw is None or kind == "t" else list(got)
        if memo is not None:
            n = src[2]
            memo["made"] = (n, {k: cols[k][:n] for k, kind in STATS_COLUMNS.items() if kind == "f" and k in present})
        return cols

    def keep_stats_columns(self, cols: dict[str, list]) -> None:
        """The stats rows' values by key, as finish() read them to check them (each key's value per
        row, None where a row lacks it): stats_columns() starts from their numbers while the rows
        are those (the same list, as long, the same first and last row: signals never change a
        row; a reader that goes on adds rows, and a copy is another list). Times are not taken
        from them: finish() moves them afterwards where GPU samples date the log (timeline.py)."""
        rows = self.stats_rows
        self._stats_kept = (rows, len(rows), id(rows[0]) if rows else None, id(rows[-1]) if rows else None, cols)

    def _kept_stats_columns(self) -> dict | None:
        kept = getattr(self, "_stats_kept", None)       # an Evidence pickled by an older build lacks it
        if kept is None:
            return None
        rows, n, first, last, cols = kept
        r = self.stats_rows
        self._stats_kept = None         # used once: not held beside the columns made from it
        if rows is r and len(r) == n and (not r or (id(r[0]) == first and id(r[-1]) == last)):
            return cols
        return None
