"""Peeling what collectors and process managers put in front of an engine's own message.

Order of layers, outermost first: ANSI colour, markdown quote `> `, a container's name
(`docker compose logs`: `vllm-1  | `; `kubectl logs --prefix`: `[pod/name/container] `: the
line's stream, one server's lines among others), docker/kubectl RFC 3339 timestamp or journald prefix, nested process prefixes `(Name pid=N[, ip=A])`, then the
engine's logger header (vLLM: `LEVEL MM-DD HH:MM:SS [file:line] `; each engine's in
engines/<name>/header.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..engines import ENGINES

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
COLLECTOR = re.compile(
    r"^(?:(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?) "
    r"|[A-Za-zа-я]{3,4}\.? +\d{1,2} \d\d:\d\d:\d\d \S+ [\w.\-/]+(?:\[\d+\])?: "
    # Slurm's own lines (`[2026-10-07T08:47:26.273] error: *** STEP … CANCELLED …`): local time,
    # as the engine's stamps are, so it is the line's time (a collector's RFC 3339 stamp is UTC).
    r"|\[(?P<date>\d{4}-\d\d-\d\d)T(?P<hms>\d\d:\d\d:\d\d)(?:\.\d+)?\] )"
)
# `docker compose logs` (v2 `name-1  | `, v1 `name_1  | `) and `kubectl logs --prefix`.
STREAM = re.compile(r"^(?:(?P<svc>[A-Za-z0-9][\w.-]*?[-_]\d+)\s+\| |\[pod/(?P<pod>[^/\]\s]+)/(?P<ctr>[^\]\s]+)\] )")
# `(APIServer pid=1) `, `(RayWorkerWrapper pid=1463574, ip=192.168.10.60) `; a paste may lose
# the opening parenthesis of the first one.
PROC = re.compile(r"^\(?(?:(?P<name>[^()]*?) )?pid=(?P<pid>\d+)(?:, ip=(?P<ip>[\d.:a-f]+))?\) ")
REPEATED = re.compile(r" \[repeated (\d+)x across cluster\]\s*$")
# A harness relaying a child server's lines under its own logger header: `[ts] [its.logger] [INFO]
# [worker_0] ` and then the server's own header and message. The tags name the child: its stream.
RELAY = re.compile(r"(?:\[[\w.\-]{1,80}\] ){1,4}")
RELAY_TAG = re.compile(r"\[([\w.\-]+)\] ")
LEVELS = frozenset(("DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL", "FATAL"))
# Each engine's logger header is declared in its folder (engines/<name>/header.py) and tried
# in the registry's order.
HEADERS = tuple(e.header for e in ENGINES.values() if e.header)


@dataclass(slots=True)
class Line:
    source: str
    lineno: int
    raw: str            # the line as read (ANSI stripped), for evidence
    msg: str            # the message after every prefix
    proc: str | None = None
    ip: str | None = None
    level: str | None = None
    stamp: tuple | None = None   # (month, day, "HH:MM:SS") without a year
    iso: str | None = None       # collector timestamp with a year, when present
    repeat: int = 1
    dt: datetime | None = None   # full timestamp when the header carries a year
    fmt: str | None = None       # which header shape matched: vllm, sglang, trtllm, triton
    tags: str = ""               # SGLang rank tags, e.g. "TP0" or "DP0 TP0 EP0"
    stream: str | None = None    # the container a collector named (compose service, kubectl pod)


def visible(text: str) -> str:
    """A line as a terminal shows it: no colour, no line end, and of a progress bar redrawn with
    CRs before the log line, only what was written after the last CR. Every reader keeps lines in
    this form (the bulk readers' example lines too)."""
    if "\x1b" in text:
        text = ANSI.sub("", text)
    text = text.rstrip("\r\n ")
    if "\r" in text:
        text = text[text.rfind("\r") + 1:]
    return text


def peel(source: str, lineno: int, text: str) -> Line:
    text = visible(text)
    raw = text
    if text.startswith("> "):
        text = text[2:]
    stream = None
    if "| " in text[:80] or text.startswith("[pod/"):
        m = STREAM.match(text)
        if m:
            stream = m.group("svc") or f"{m.group('pod')}/{m.group('ctr')}"
            text = text[m.end():]
    iso = dt = None
    m = COLLECTOR.match(text)
    if m:
        iso = m.group("iso")
        if m.group("date"):
            dt = _dt(m.group("date"), m.group("hms"))
        text = text[m.end():]
    proc = ip = None
    while "pid=" in text:       # the regex alone walks a whole line that has no prefix
        m = PROC.match(text)
        if not m:
            break
        proc = proc or (m.group("name") or "").strip() or None
        ip = ip or m.group("ip")
        text = text[m.end():]
    repeat = 1
    if text.endswith("cluster]"):
        m = REPEATED.search(text)
        if m:
            repeat = int(m.group(1))
            text = text[: m.start()]
    level = stamp = fmt = None
    tags = ""
    h = _header(text)
    if h is None and ("it/s]" in text or "s/it]" in text):
        # A tqdm bar the log line was written after, without a newline between them
        # (`Warmup iterations:  80%|████  | 4/5 [00:04<00:01,  1.06s/it]INFO 08-07 …`).
        cut = max(text.rfind("it/s]"), text.rfind("s/it]"))
        at = text.find("]", cut) + 1
        h = _header(text[at:]) if at > 0 else None
        if h is not None:
            text = text[at:]
    if h is not None:
        text = text[h.end:]
        if text[:1] == "[":
            m = RELAY.match(text)
            inner = _header(text[m.end():]) if m else None
            if inner is not None:
                names = [t for t in RELAY_TAG.findall(m.group(0)) if t.upper() not in LEVELS and "." not in t]
                stream = stream or (names[-1] if names else None)
                text = text[m.end():]
                h, text = inner, text[inner.end:]
        fmt, level, stamp, tags = h.fmt, h.level, h.stamp, h.tags
        if h.date:
            dt = _dt(h.date, h.hms)
    return Line(source, lineno, raw, text, proc, ip, level, stamp, iso, repeat, dt, fmt, tags, stream)


def _header(text: str):
    """The engine logger header `text` opens with (the first engine's that matches), or None."""
    for match in HEADERS:
        h = match(text)
        if h is not None:
            return h
    return None


def _dt(date: str, hms: str) -> datetime | None:
    try:
        return datetime.fromisoformat(f"{date} {hms}")
    except ValueError:
        return None


LATE_LINE = timedelta(hours=1)     # how late a line written before New Year can arrive after it


class Clock:
    """Turns year-less `MM-DD HH:MM:SS` stamps into datetimes that order across a new year."""

    def __init__(self, year: int | None = None) -> None:
        self.year = year or datetime.now().year
        self.guessed = year is None      # no year given: GPU samples with dates may correct it
        self.base_year = self.year
        self._last: tuple[int, int] | None = None
        self._last_dt: datetime | None = None
        # The stamp the last call turned into _last_dt: lines of one second share it, and the same
        # stamp again gives the same time (nothing else changed the state since).
        self._stamp = None

    def at(self, line: Line) -> datetime | None:
        stamp = line.stamp
        if line.dt is None and stamp is not None and stamp == self._stamp:
            return self._last_dt
        self._stamp = None
        if line.dt is not None:
            self.year = line.dt.year
            self.guessed = False
            self._last = (line.dt.month, line.dt.day)
            return line.dt
        if line.iso and self._last is None:
            try:
                self.year = int(line.iso[:4])
                self.guessed = False
            except ValueError:
                pass
        if stamp is None:
            return None
        return self._stamped(stamp)

    def at_hms(self, mon: int, day: int, h: int, mi: int, s: int) -> datetime | None:
        """at() of a line stamped `MM-DD HH:MM:SS` with no other time (no year, no collector's
        time), its stamp given as numbers (the C reader read them)."""
        key = (mon, day, h, mi, s)       # never equal to a stamp of text: each shape caches its own
        if key == self._stamp:
            return self._last_dt
        self._stamp = None
        return self._time(mon, day, h, mi, s, key)

    def _stamped(self, stamp: tuple) -> datetime | None:
        mon, day, hms = stamp
        try:
            h, mi, s = map(int, hms.split(":"))
        except ValueError:
            self._last = (mon, day)
            return None
        return self._time(mon, day, h, mi, s, stamp)

    def _time(self, mon: int, day: int, h: int, mi: int, s: int, stamp: tuple) -> datetime | None:
        try:
            if self._last is not None and (mon, day) < self._last and self._last[0] - mon >= 6:
                self.year += 1   # December → January: a new year began
            elif self._last_dt is not None and mon - self._last[0] >= 6:
                # December after January. A line from just before midnight that arrives after the
                # first line of the new year (several processes write one file) belongs to the old
                # year: taken as this one it jumped 11 months ahead, and the next January line
                # began yet another year. A real gap of months stays as it was.
                late = datetime(self.year - 1, mon, day, h, mi, s)
                if timedelta(0) <= self._last_dt - late <= LATE_LINE:
                    return late
            self._last = (mon, day)
            self._last_dt = datetime(self.year, mon, day, h, mi, s)
            self._stamp = stamp
            return self._last_dt
        except ValueError:
            self._last = (mon, day)
            return None
