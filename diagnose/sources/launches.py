"""Launches: where a server's start begins in an input, read into an Evidence of its own.

A file can hold several launches (a restart, a crash-and-restart loop, a before and an after with
other flags, two servers a script started one after the other) and several servers at once
(`docker compose logs` or `kubectl logs --prefix`: a stream per container). Each launch of each
stream is a Piece with its own Evidence and parsers, so facts of two launches never mix;
sources/grouping.py decides which pieces are one deployment.

A line that starts a launch (each engine declares its wordings: `Engine.launch`, once per
launch; `Engine.process_start`, once per process of a launch, such as each data-parallel engine or
MPI rank) begins a new piece when the piece at hand
- has started already and was stopped, died, or served (stats, requests, "ready"), or
- already holds this line (a launch line twice; a process line twice from one process), or a
  launch line comes after an engine process started (a launch's own lines come first), or
- last logged ten minutes or more before it;
and otherwise belongs to it: a job's banner, `nvidia-smi` table and environment dump before the
server's first line are that launch's. GPU rows read before a launch in the same piece were
taken before the server started: they name the boards but are no samples of its run.
"""
from __future__ import annotations

import re
from datetime import timedelta

from ..evidence.model import Evidence
from ..values import model_id
from .engines import ENGINES
from .engines.common import finish_lifecycle

GAP = timedelta(minutes=10)
# A silence this long, ended by a stop (SIGTERM, a scheduler's cancel): a start-up that stalled
# (an NCCL rendezvous, a placement group) when the server never said it was ready.
QUIET_S = 600

# Launch settings that tell two servers apart (normalized fact names).
IDENTITY = ("model", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_num_seqs",
            "max_num_batched_tokens", "max_model_len", "gpu_memory_utilization", "cuda_graphs", "kv_cache_dtype",
            "quantization", "speculative", "port")


def identity(ev: Evidence) -> dict:
    d = {}
    for k in IDENTITY:
        v = ev.fact(k)
        if v is None and k == "port":
            v = (ev.settings.get("launch_args") or {}).get("port") if isinstance(ev.settings.get("launch_args"), dict) else None
        if v is None:
            continue
        if k == "model":
            v = model_id(v).rsplit("/", 1)[-1].lower()
        elif isinstance(v, float) and v.is_integer():
            v = int(v)
        d[k] = v
    return d


def compatible(a: dict, b: dict) -> bool:
    return all(a[k] == b[k] for k in a.keys() & b.keys())


def _engine(p: "Piece"):
    """A piece's engine: its fact once finished, else the engine most of its lines were read by."""
    return p.ev.fact("engine") or (max(p.engine_lines, key=p.engine_lines.get) if p.engine_lines else None)


def fold_target(pieces: list, done: "Piece") -> "Piece | None":
    """The earlier launch of the same stream that `done` belongs with, as grouping.assemble would
    decide: the one before it when `done` never launched (lines after a launch), else the first of
    the same engine whose settings agree with its (unknowns agree with anything)."""
    engine, ident = _engine(done), identity(done.ev)
    mine = [p for p in pieces if p is not done and p.stream == done.stream and p.engine_lines and p.index < done.index]
    if not done.launched and mine:
        mine = mine[-1:]
    for p in mine:
        e = _engine(p)
        if (not e or not engine or e == engine) and compatible(ident, identity(p.ev)):
            return p
    return None


# (engine, compiled pattern, once per launch?)
MARKERS = tuple((name, re.compile(src), per_launch) for name, e in ENGINES.items()
                for src, per_launch in ((e.launch, True), (e.process_start, False)) if src)


HINTS = tuple(dict.fromkeys(h for e in ENGINES.values() for h in e.launch_hints))
_HINTS_RE = re.compile("|".join(map(re.escape, HINTS)))


def marker(msg: str):
    """(engine, key, once per launch) when the message starts a launch or one of its processes
    (its wording is at the start of the message: a request line quoting it is none)."""
    if not _HINTS_RE.search(msg, 0, 80):
        return None
    for name, rx, per_launch in MARKERS:
        m = rx.search(msg)
        if m:
            return name, m.group(0)[:14], per_launch
    return None


class Piece:
    """One launch of one server in one input (or what an input holds that no launch claims)."""

    def __init__(self, src: str, index: int, stream: str | None = None, ev: Evidence | None = None) -> None:
        self.src, self.index, self.stream = src, index, stream
        self.ev = ev if ev is not None else Evidence()
        self.parsers = [e.parser() for e in ENGINES.values()]
        self.orders = {fmt: [p] + [q for q in self.parsers if q is not p]
                       for p, e in zip(self.parsers, ENGINES.values()) for fmt in e.formats}
        self.followers = [p for p in self.parsers if hasattr(p, "wants_more")]
        self.engine_lines: dict[str, int] = {}
        self.first_engine = None        # line number of its first engine line
        self.markers: set = set()
        self.processes = False          # an engine process of it has started (a process_start line)
        self.launch_line = None         # (line number, text) of its first launch line
        self.first = self.last = None   # line numbers
        self.t_first = self.t_last = None
        self.last_t = None              # (time, line, text) of the last line with a time
        self.quiet = None               # the latest silence of QUIET_S or more: (last_t before it, when it ended)
        self.finished = False
        # Launches of the same server folded into this one (a restart loop of thousands: loading.FOLD_AFTER):
        # where each was, and the time all of them span.
        self.folded: list[dict] = []
        self.folded_launches = 0
        self.t_lo = self.t_hi = None

    # -- state ------------------------------------------------------------------------------
    @property
    def launched(self) -> bool:
        return self.launch_line is not None

    def wants_more(self) -> bool:
        for p in self.followers:
            if p.wants_more():
                return True
        return False

    def over(self, hard: bool = False) -> bool:
        """Stopped or dead. `hard`: only what no process line of the same launch follows (an
        exception not yet known fatal does not end a start-up another engine process goes on with)."""
        ev = self.ev
        life = ev.lifecycle.get(self.src)
        if life is not None and life.stopping:
            return True
        if ev.event_counts.get("engine_dead") or ev.event_counts.get("uncaught_exception"):
            return True
        return not hard and life is not None and life.pending is not None

    def serving(self) -> bool:
        ev = self.ev
        if ev.stats_rows or ev.counters.get("request_lines"):
            return True
        if self.first_engine is not None and self._own_ready():
            return True
        return (ev.counters.get("access_lines", 0) - ev.counters.get("access_probe_lines", 0)) > 0

    def _own_ready(self) -> list:
        """uvicorn's ready lines after the engine's first line: a side server of the same job
        (LMCache's, a router's) says the same words before the engine has started."""
        first = self.first_engine if self.first_engine is not None else float("inf")
        return [e for e in self.ev.events.get("server_ready", ()) if e.line > first]

    def starts_new(self, key: str, per_launch: bool, proc: str | None, when) -> bool:
        """Whether a launch line (`key`, from process `proc`, at `when`) begins a new piece."""
        if not self.launched:
            return self.serving() or self.over()
        if self.serving() or self.over(hard=not per_launch):
            return True
        if per_launch and self.processes:
            return True         # a launch's own lines come before its engine processes start
        if (key, None if per_launch else proc) in self.markers:
            return True
        return bool(when is not None and self.t_last is not None and when - self.t_last >= GAP)

    # -- writing ----------------------------------------------------------------------------
    def mark(self, key: str, per_launch: bool, proc: str | None, n: int, raw: str) -> None:
        self.markers.add((key, None if per_launch else proc))
        if not per_launch:
            self.processes = True
        if self.launch_line is None:
            self.launch_line = (n, raw)
            self._drop_rows_before()

    def _drop_rows_before(self) -> None:
        """GPU rows read before this launch started: idle boards before the server, no samples."""
        ev = self.ev
        before = [r for r in ev.gpu_rows if r.get("before")]
        if not before:
            return
        ev.gpu_rows[:] = [r for r in ev.gpu_rows if not r.get("before")]
        gpus = len({r.get("gpu") for r in before})
        ev.add_event("gpu_before_start", self.src, before[0].get("line") or 1,
                     f"{len(before)} GPU reading(s) of {gpus} GPU(s) taken before the server started: "
                     "they name the boards, they are not samples of its run")
        kept = [e for e in ev.events.get("gpu_samples", ()) if not e.data.get("before")]
        dropped = len(ev.events.get("gpu_samples", ())) - len(kept)
        if dropped:
            ev.events["gpu_samples"] = kept
            ev.event_counts["gpu_samples"] -= dropped

    def saw(self, n: int, when, raw: str) -> None:
        if self.first is None:
            self.first = n
        self.last = n
        if when is not None:
            if self.t_first is None:
                self.t_first = when
            if self.last_t is not None and (when - self.last_t[0]).total_seconds() >= QUIET_S:
                self.quiet = (self.last_t, when)
            self.last_t = (when, n, raw)
            self.t_last = when

    def span(self) -> tuple:
        """The time this piece and the launches folded into it cover."""
        lo = min((t for t in (self.t_first, self.t_lo) if t is not None), default=None)
        hi = max((t for t in (self.t_last, self.t_hi) if t is not None), default=None)
        return lo, hi

    def fold(self, done: "Piece") -> None:
        """Take in a finished launch of the same server: its evidence (bounded as when read, see
        Evidence.absorb), its place among the launches, its time; the piece itself is dropped."""
        self.ev.absorb(done.ev)
        done.ev.stats_rows.leave()
        done.ev.gpu_rows.leave()
        self.folded.extend(done.parts())
        self.folded_launches += int(done.launched) + done.folded_launches
        for e, n in done.engine_lines.items():
            self.engine_lines[e] = self.engine_lines.get(e, 0) + n
        lo, hi = done.span()
        if lo is not None:
            self.t_lo = lo if self.t_lo is None else min(self.t_lo, lo)
            self.t_hi = hi if self.t_hi is None else max(self.t_hi, hi)

    def parts(self) -> list[dict]:
        return [self.describe()] + self.folded

    def finish(self, clock_guessed: bool, base_year: int) -> None:
        ev, src = self.ev, self.src
        if self.finished:           # finished early, to be folded into an earlier launch
            if clock_guessed:
                ev.year_guessed[src] = base_year
            return
        self.finished = True
        for r in ev.gpu_rows:           # no launch came: a capture alone, its rows are samples
            r.pop("before", None)
        if self.quiet is not None:
            self._quiet_before_stop()
        ready = ev.events.get("server_ready")
        if ready:
            own = self._own_ready()
            if len(own) < len(ready):
                ev.events["server_ready"] = own
                ev.event_counts["server_ready"] -= len(ready) - len(own)
                if not own:
                    del ev.events["server_ready"], ev.event_counts["server_ready"]
        finish_lifecycle(ev, src)
        for p in self.parsers:
            if hasattr(p, "finish"):
                p.finish(ev)
        if clock_guessed:
            ev.year_guessed[src] = base_year
        if self.engine_lines:
            engine = max(self.engine_lines, key=self.engine_lines.get)
            ev.set_fact("engine", engine, override=False)
            for p in self.parsers:
                if p.engine == engine and getattr(p, "version", None):
                    ev.set_fact("engine_version", p.version, override=False)

    def _quiet_before_stop(self) -> None:
        """A stop that ended a long silence (the log had little more after it): kept as an event
        with the last line before the silence; the signals say whether the server was ready."""
        ev, src = self.ev, self.src
        (t0, n0, raw0), end = self.quiet
        if self.last_t is None or (self.last_t[0] - end).total_seconds() > 300:
            return              # the log went on after the silence: not what the stop ended
        if ev.counters.get("access_lines") or ev.counters.get("request_lines"):
            return              # it answered requests: it was up
        if any(e.source == src and e.line > n0 for e in ev.events.get("stop_requested", ())):
            ev.add_event("quiet_before_stop", src, n0, raw0, t0, minutes=round((end - t0).total_seconds() / 60))

    def describe(self) -> dict:
        """Where it is and how it ended, for the reports."""
        ev = self.ev
        life = ev.lifecycle.get(self.src)
        ending = ("crashed" if ev.event_counts.get("engine_dead") or ev.event_counts.get("uncaught_exception")
                  else "stopped" if life is not None and life.stopping else None)
        return {"source": self.src, "first_line": self.first, "last_line": self.last, "stream": self.stream,
                "started": self.t_first.isoformat(sep=" ") if self.t_first else None,
                "ended": self.t_last.isoformat(sep=" ") if self.t_last else None,
                "launch_line": self.launch_line[0] if self.launch_line else None, "ending": ending}
