"""What of an input was understood: its regions, and the share of its lines in a known format.

Every line gets a kind: an engine's (its logger header, or a line its parser read), `shared` (NCCL,
uvicorn, Ray, CUDA errors: lines every engine's log holds), `traceback`, `progress` (bars a
terminal redraws), a line format's (`gpu-dmon`, `prometheus-scrape`, `bench-result`, …), or none.
A run of lines of one kind is a region; a short run of lines of no known kind inside a region
(a warning, a traceback's code lines) stays part of it. Lines the parsers never see (a big log's
lines without any keyword) are judged by their shape alone (`classify`); on a big log read by
the bulk readers, from a sample of each segment.

A line holding a phrase an engine's parser always reads (`Engine.expects`) that no parser took is
*unread*: the sign of a format drift (a new version's stats line), shown with its first examples.
"""
from __future__ import annotations

import re

from ..redact import redact
from .engines import ENGINES

# Runs of lines of no known kind shorter than this stay inside the region around them.
OTHER_RUN = 8
MAX_REGIONS = 100
EXAMPLES = 3
ENGINE_KINDS = tuple(ENGINES)
SHARED = "shared"
FREE_KINDS = frozenset(ENGINE_KINDS + ("shared", "traceback", "progress", "log"))
_ENGINES = frozenset(ENGINE_KINDS)

# Shapes of lines every engine's log holds (searched in a line's first 200 characters).
# (uvicorn access, NCCL, Python warnings, PyTorch's own C++ log lines `[W1028 14:02:15.5 File.cpp:981]`)
# uvicorn's own lines (`INFO:     Started server process`), UCX's, torch.distributed's Gloo, and whatever an engine's process
# prints under its `(APIServer pid=1)` prefix (stripped before the shapes are tried: `_PREFIX`).
_SHARED = (r"INFO: +[\w.:\[\]-]+:\d+ - \"[A-Z]+ |^INFO: {2,}\S|NCCL (?:INFO|WARN)|UCX +(?:WARN|ERROR|INFO)"
           r"|(?<!\w)[A-Za-z_]\w*Warning: |^\s*warnings\.warn\(|^(?:\[rank\d+\]:)?\[[WIEF]\d{4} \d\d:\d\d:\d\d\.\d+ "
           # glog (C++ libraries in the engine's process: Mooncake, NIXL, Triton), ROCm's aiter and friends
           r"|^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w.]+:\d+\] |^WARNING: Logging before InitGoogleLogging"
           r"|^\[(?:aiter|Gloo|c10d|transformers|flashinfer|quark|torch|ROCm|HIP)\] "
           # Ray's own C++ log lines (`[2025-05-26 18:58:10,599 E 629624 629624] logging.cc:496: …`)
           r"|^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [IWEF] \d+ \d+\] "
           # Python libraries' own loggers in the server's process (`[2026-07-27 13:54:14,280] LMCache INFO: …`)
           r"|^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\] [\w.]+ (?:DEBUG|INFO|WARNING|ERROR|CRITICAL):"
           # UCX's (`[1791360125.52] [host:101347:0]  gdaki.c:1338 UCX DIAG …` and its tables)
           r"|^\[\d{9,}\.\d+\] \[[\w.-]+:\d+:\w+\] ")
# What collectors and process managers put before a line: ANSI colour, a compose service, an RFC
# 3339 stamp, `(Name pid=N)` process prefixes, DDP's `[rank0]: `.
_PREFIX = re.compile(r"^(?:\x1b\[[0-9;]*[A-Za-z])*(?:[A-Za-z0-9][\w.-]*?[-_]\d+\s+\| )?"
                     r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)? )?"
                     r"(?P<proc>(?:\(?[\w ]*pid=\d+(?:, ip=[\d.:a-f]+)?\) )+)?(?:\[rank\d+\]: ?)?")
_TRACEBACK = (r"^\s*Traceback \(most recent call last\)|^\s*File \"[^\"]+\", line \d+|^During handling of the above exception"
              r"|^\s*@\s+0x[0-9a-f]+\s"        # a native stack frame (glog, Ray)
              r"|^[╭╰│][^\n]*[│╮╯]\s*$"      # rich's boxed traceback
              r"|^frame #\d+: "                 # PyTorch's C++ backtrace
              r"|^The above exception was the direct cause|^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit)\b"
              r"|^\s*\^[\^~ ]*$|^\s*~+\^+~*\s*$")
# (each number starts where no digit is before it: linear on a line of digits)
_PROGRESS = r"(?<![\d.])\d+%\s*\|[^|]*\||(?<!\d)\d+/\d+ \[\d\d:\d\d|it/s\]|s/it\]|(?<![\d.])\d+(?:\.\d+)?%\s+Completed"
# Literals each of these shapes holds: a line without them skips the shape (Python's re tries a
# shape at every position of the line; the digit-led ones cost ~5 µs a line each, on lines that
# mostly cannot hold them).
_GATES = {r"(?<![\d.])\d+%\s*\|[^|]*\|": ("%", "|"), r"(?<!\d)\d+/\d+ \[\d\d:\d\d": ("/", " ["),
          r"(?<![\d.])\d+(?:\.\d+)?%\s+Completed": ("Completed",), r"(?<!\w)[A-Za-z_]\w*Warning: ": ("Warning: ",)}


def _alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of a regex (outside groups and classes)."""
    out, depth, in_class, start, i = [], 0, False, 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c in "()":
            depth += 1 if c == "(" else -1
        elif c == "|" and depth == 0:
            out.append(pattern[start:i])
            start = i + 1
        i += 1
    return out + [pattern[start:]]


def _kinds() -> list[tuple[str, str]]:
    return ([(name, e.shape) for name, e in ENGINES.items() if e.shape]
            + [("traceback", _TRACEBACK), ("progress", _PROGRESS), ("shared", _SHARED)])


def _classifier():
    return re.compile("|".join(f"(?P<{name}>{shape})" for name, shape in _kinds()))


_CLASSIFY = _classifier()
# Past the line's first character only the shapes not anchored at its start can match. Each is
# searched on its own (an alternation of them is ~3× slower: re's literal-prefix scan works only
# for a lone pattern), in the order of _CLASSIFY, keeping the leftmost match and, at one place,
# the first kind — what one search of _CLASSIFY gives.
_FLOATING = tuple((name, re.compile(a), _GATES.get(a, ())) for name, shape in _kinds()
                  for a in _alternatives(shape) if not a.startswith("^"))


def _leftmost(rest: str):
    """(start, kind) of the leftmost floating shape in `rest` past its first character, or None."""
    best = None
    for name, rx, gate in _FLOATING:
        if gate and not all(g in rest for g in gate):
            continue
        m = rx.search(rest, 1)
        if m is not None and (best is None or m.start() < best[0]):
            best = (m.start(), name)
            if best[0] == 1:
                break
    return best


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Headings, fences, tables, lists and links: a document, not a log (a folder's README).
_MD_FIRST = frozenset("#`|-*0123456789")
_MARKDOWN = re.compile(r"^(?:#{1,6} \S|```|\|(?:[^|\n]*\|){2,}\s*$|[-*] \S|\d+\. \S|[^\n]*\]\([^)\s]+\))")
_EXPECTS = tuple((p, name) for name, e in ENGINES.items() for p in e.expects)


def classify(text: str) -> str | None:
    """A line's kind by its shape alone (no parser asked): an engine's name, `traceback`,
    `progress`, `shared`, or None."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    head = text[:240]
    p = _PREFIX.match(head)
    rest = head[p.end():] if p else head
    m = _CLASSIFY.match(rest)
    if m is not None:
        return m.lastgroup
    found = _leftmost(rest) if len(rest) > 1 else None
    if found is None:
        return SHARED if p and p.group("proc") and rest.strip() else None   # an engine process's own output
    return found[1]


def expected_by(text: str) -> str | None:
    """The engine whose parser always reads a line holding this text, when it holds such a phrase."""
    for phrase, name in _EXPECTS:
        if phrase in text:
            return name
    return None


def family(kind: str) -> str:
    """Kinds that make one region: an engine's lines with the shared lines, tracebacks and
    progress bars between them."""
    return "log" if kind in (SHARED, "traceback", "progress") else kind


class Coverage:
    """One input's coverage, filled line by line in order (`line`), or in bulk (`add`)."""

    def __init__(self) -> None:
        self.by_kind: dict[str, int] = {}
        self.blank = 0
        self.other = 0
        self.other_examples: list[tuple[int, str]] = []
        self.unread = 0
        self.unread_examples: list[tuple[int, str, str]] = []
        self.regions: list[list] = []       # [kind, first line, last line, lines of the kind]
        self._run = None                    # (first, last, count) of lines of no known kind not yet placed
        self.sampled = 0                    # lines judged from a sample (big logs), not one by one
        self.envelope = None                # lines were JSON records (docker json-file, …)
        self.markdown = 0                   # lines of no known kind shaped as Markdown (a document)
        self._prev = None
        # Between an engine's first and last line: what was read there (a wrapper around a
        # server's log lowers the file's share, not how well the server's own lines were read).
        self.span_known = self.span_other = 0
        self._pend_known = self._pend_other = 0
        self._engine_seen = False
        self._read_regions: set[int] = set()    # id() of regions where an engine's parser read a line

    # Copied (each pass of a followed file finishes a copy: following.py) or pickled: the regions an
    # engine read are kept by id(), new in the copy, so by position in between.
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_read_regions"] = [i for i, reg in enumerate(self.regions) if id(reg) in self._read_regions]
        return state

    def __setstate__(self, state: dict) -> None:
        read = state.pop("_read_regions")
        self.__dict__.update(state)
        self._read_regions = {id(self.regions[i]) for i in read}

    # -- filling ------------------------------------------------------------------------
    def line(self, n: int, kind: str | None, text: str = "", read: bool = False) -> None:
        """`read`: an engine's parser understood the line (not its header alone)."""
        self._line(n, kind, text)
        if read and self.regions:
            self._read_regions.add(id(self.regions[-1]))

    def read_lines(self, kind: str, ns: list) -> None:
        """Lines `ns` (in order, nothing told between them) an engine's parser read: line(n, kind,
        read=True) of each, the lines after the first that go on its region counted at once."""
        self.line(ns[0], kind, read=True)
        cur = self.regions[-1] if self.regions else None
        if (len(ns) > 1 and cur is not None and cur[0] == kind and kind in _ENGINES and self._run is None
                and not self._pend_known and not self._pend_other):
            m = len(ns) - 1     # what _line's going-on branch does to each
            self.by_kind[kind] += m
            cur[2] = ns[-1]
            cur[3] += m
            self.span_known += m
            return
        for n in ns[1:]:
            self.line(n, kind, read=True)

    def _line(self, n: int, kind: str | None, text: str = "") -> None:
        prev, self._prev = self._prev, kind
        if kind is None:
            if not text.strip():
                self.blank += 1
                return
            if prev in FREE_KINDS and text[:1] in " \t":
                kind = self._prev = prev        # a multi-line record's continuation (a traceback, a warning, a dump)
        # Markdown shapes among free text (not inside a capture: an `nvidia-smi` table's rows are
        # `| … |` too): a document quoting log lines is still a document.
        if (kind is None or kind in FREE_KINDS) and text and (text[0] in _MD_FIRST or "](" in text) and _MARKDOWN.match(text):
            self.markdown += 1
        if kind is None:
            self.other += 1
            self._pend_other += 1
            if len(self.other_examples) < EXAMPLES:
                self.other_examples.append((n, _cut(text)))
            r = self._run
            self._run = (n, n, 1) if r is None else (r[0], n, r[2] + 1)
            return
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        self._pend_known += 1
        cur = self.regions[-1] if self.regions else None
        if cur is not None and cur[0] == kind and self._run is None:
            cur[2] = n          # the region at hand goes on (most lines): nothing else to do
            cur[3] += 1
            if kind in _ENGINES:
                self.span_known += self._pend_known
                self.span_other += self._pend_other
                self._pend_known = self._pend_other = 0
            return
        if kind in _ENGINES:
            if self._engine_seen:
                self.span_known += self._pend_known
                self.span_other += self._pend_other
            else:
                self.span_known += 1
            self._engine_seen = True
            self._pend_known = self._pend_other = 0
        fam = family(kind)
        r, self._run = self._run, None
        cur = self.regions[-1] if self.regions else None
        if r is not None and r[2] >= OTHER_RUN:
            self._region("other", r[0], r[1], r[2])
            cur = None
        if cur is not None and (cur[0] == fam or fam == "log" and cur[0] in ENGINE_KINDS):
            cur[2] = n
            cur[3] += 1
        elif cur is not None and cur[0] == "log" and fam in ENGINE_KINDS:
            cur[0], cur[2], cur[3] = fam, n, cur[3] + 1      # shared lines first, then the engine's
        else:
            self._region(fam, n, n, 1)

    def _region(self, kind, first, last, count) -> None:
        if len(self.regions) >= MAX_REGIONS:
            cur = self.regions[-1]
            cur[0], cur[2], cur[3] = "mixed", last, cur[3] + count
            return
        self.regions.append([kind, first, last, count])

    def unread_line(self, n: int, engine: str, text: str) -> None:
        self.unread += 1
        if len(self.unread_examples) < EXAMPLES:
            self.unread_examples.append((n, engine, _cut(text)))

    def add(self, kind: str | None, count: int) -> None:
        """Lines counted, not seen one by one (a big log's access and request lines)."""
        if count <= 0:
            return
        if kind is None:
            self.other += count
        else:
            self.by_kind[kind] = self.by_kind.get(kind, 0) + count
            if self.regions:
                self.regions[-1][3] += count

    def rename(self, kind: str, to: str) -> None:
        """What a format's lines turned out to be (a scrape of a DCGM exporter: GPU samples)."""
        if kind in self.by_kind:
            self.by_kind[to] = self.by_kind.get(to, 0) + self.by_kind.pop(kind)
        for reg in self.regions:
            if reg[0] == kind:
                reg[0] = to

    def close(self, last_line: int) -> None:
        r, self._run = self._run, None
        if r is not None and r[2] >= OTHER_RUN:
            self._region("other", r[0], r[1], r[2])
        if self.regions and self.regions[-1][0] != "other" and r is not None and r[2] < OTHER_RUN:
            self.regions[-1][2] = max(self.regions[-1][2], r[1])
        # A region of "log" (shared lines only) inside an engine's log is that engine's.
        for reg in self.regions:
            if reg[0] == "log":
                reg[0] = "text log"
        # Lines in one engine's header shape of which that engine read nothing, in a file whose
        # lines another engine read, are another library's logger with the same shape
        # (`[2025-12-20 04:19:59] INFO config.py:54: …` before a TensorRT-LLM log): not that engine's.
        read = {reg[0] for reg in self.regions if id(reg) in self._read_regions}
        if read:
            for reg in self.regions:
                if reg[0] in ENGINE_KINDS and reg[0] not in read and id(reg) not in self._read_regions:
                    self.by_kind[reg[0]] = self.by_kind.get(reg[0], 0) - reg[3]
                    if self.by_kind[reg[0]] <= 0:
                        del self.by_kind[reg[0]]
                    self.by_kind[SHARED] = self.by_kind.get(SHARED, 0) + reg[3]
                    reg[0] = "text log"

    # -- reading ---------------------------------------------------------------------------
    @property
    def understood(self) -> int:
        return sum(self.by_kind.values())

    @property
    def share(self) -> float | None:
        total = self.understood + self.other
        return self.understood / total if total else None

    @property
    def server_share(self) -> float | None:
        """The share read between an engine's first and last line (None without engine lines)."""
        total = self.span_known + self.span_other
        return self.span_known / total if total and self._engine_seen else None

    def engine_lines(self) -> int:
        return sum(self.by_kind.get(k, 0) for k in ENGINE_KINDS)

    def to_json(self) -> dict:
        share = self.share
        return {
            "understood_lines": self.understood, "other_lines": self.other, "blank_lines": self.blank,
            "share": None if share is None else round(share, 4),
            "server_share": None if self.server_share is None else round(self.server_share, 4),
            "by_kind": dict(sorted(self.by_kind.items(), key=lambda kv: -kv[1])),
            "regions": [{"kind": k, "first_line": a, "last_line": b, "lines": c} for k, a, b, c in self.regions],
            "unread_engine_lines": self.unread,
            "unread_examples": [{"line": n, "engine": e, "text": t} for n, e, t in self.unread_examples],
            "other_examples": [{"line": n, "text": t} for n, t in self.other_examples],
            "sampled_lines": self.sampled,
            **({"envelope": self.envelope} if self.envelope else {}),
        }


def _cut(text: str) -> str:
    text = _ANSI.sub("", text).strip()
    return redact(text[:200] + ("…" if len(text) > 200 else ""))


def whole_file(info) -> None:
    """A whole-file input's coverage: one region of its kind (what it recognised of it)."""
    cov = Coverage()
    if info.lines:
        cov.by_kind[info.kind] = info.recognised_lines or info.lines
        cov.other = max(0, info.lines - (info.recognised_lines or info.lines))
        cov.regions.append([info.kind, 1, info.lines, info.recognised_lines or info.lines])
    info.coverage = cov
