"""The literal text a regex cannot match without: a cheap `in` test before a search.

Python's re scans fast only for a pattern that starts with a literal; one that starts with `\\b`, a
class or an alternation is tried at every position of the line (~20 µs on a log line). Most lines
hold none of a parser's phrases, so testing for the phrase first skips nearly every search.

`needles(rx)` reads the pattern with the standard library's own parser and returns strings at
least one of which every match contains, or None when it cannot say (case-insensitive patterns,
constructs it does not follow): then the search simply always runs.
"""
from __future__ import annotations

import re

from ..lazyre import LazyPattern

try:                                    # the parser re compiles with (3.11+: re._parser)
    from re import _parser as _sre
    from re import _constants as _c
except ImportError:                     # pragma: no cover - Python 3.10
    import sre_parse as _sre            # type: ignore[no-redef]
    import sre_constants as _c          # type: ignore[no-redef]

MIN_NEEDLE = 3          # shorter literals are in most lines: no filter worth its test
_CACHE: dict = {}


def needles(rx: re.Pattern) -> tuple[str, ...] | None:
    got = _CACHE.get(rx, _CACHE)
    if got is _CACHE:
        got = _CACHE[rx] = KEPT.needles(rx)
    return got


class KeptNeedles:
    """needles() of the patterns met, kept between runs in the cache directory (cachedir.py):
    reading a pattern with the parser costs about what compiling it does, ~6 ms for the tables a
    log's lines are routed through. Keyed by each pattern and its flags; the whole file by the
    Python version (its parser) and this module's source, so an edit to either reads them anew.
    Only this user's own file is read back; a run that met nothing new writes nothing."""

    def __init__(self) -> None:
        self.entries: dict | None = None        # "flags:pattern" -> [needle, …] or None
        self.new = False
        self.version = ""

    @staticmethod
    def path():
        from ..cachedir import cache_dir
        return cache_dir() / "needles-v1.json"

    def _load(self) -> dict:
        import json
        import sys
        import zlib
        from ..cachedir import read_back
        try:
            with open(__file__, "rb") as fh:
                src = fh.read()
            self.version = f"{sys.version}|{zlib.crc32(src):08x}{zlib.adler32(src):08x}{len(src):x}"
        except OSError:
            self.version = sys.version
        try:
            doc = json.loads(read_back(self.path()) or "{}")
            if isinstance(doc, dict) and doc.get("version") == self.version and isinstance(doc.get("needles"), dict):
                return doc["needles"]
        except (OSError, ValueError, TypeError):
            pass
        return {}

    def needles(self, rx: re.Pattern) -> tuple[str, ...] | None:
        if not isinstance(rx.pattern, str):
            return _needles(rx)
        if self.entries is None:
            self.entries = self._load()
        # A lazy pattern by the flags it was given (its compiled flags would compile it), in an
        # entry of its own (its literal start counts: _needles).
        key = f"lazy:{rx._flags}:{rx.pattern}" if isinstance(rx, LazyPattern) else f"{rx.flags}:{rx.pattern}"
        hit = self.entries.get(key, self)
        if hit is None or (isinstance(hit, list) and all(isinstance(x, str) for x in hit)):
            return tuple(hit) if hit is not None else None
        got = _needles(rx)
        self.entries[key] = list(got) if got is not None else None
        if not self.new:
            self.new = True
            import atexit
            atexit.register(self.save)
        return got

    def save(self) -> None:
        if not self.new or self.entries is None:
            return
        self.new = False
        import json
        from ..cachedir import write_whole
        doc = {"version": self.version, "needles": self.entries}
        write_whole(self.path(), lambda fh: json.dump(doc, fh))


KEPT = KeptNeedles()


def _needles(rx: re.Pattern):
    if rx.flags & re.IGNORECASE or not isinstance(rx.pattern, str):
        return None
    try:
        parsed = _sre.parse(rx.pattern, rx.flags)
        # A pattern that opens with a literal is scanned for it by re itself, as fast as `in`; but
        # a lazy one (lazyre.py) is not compiled until a line holds that literal.
        if (not isinstance(rx, LazyPattern) and len(parsed) >= MIN_NEEDLE
                and all(op is _c.LITERAL for op, _ in list(parsed)[:MIN_NEEDLE])):
            return None
        found = _seq(parsed)
    except Exception:           # an unfamiliar construct: no filter, never a wrong one
        return None
    if not found or min(len(x) for x in found) < MIN_NEEDLE:
        return None
    return tuple(sorted(found, key=len))


def _seq(items) -> set[str] | None:
    """Literals one of which any match of this sequence contains: its longest run of literal
    characters, or the best set an item of it requires."""
    best: set[str] | None = None
    run: list[str] = []

    def consider(cand):
        nonlocal best
        if cand and (best is None or min(map(len, cand)) > min(map(len, best))):
            best = cand

    for op, av in items:
        if op is _c.LITERAL:
            run.append(chr(av))
            continue
        if run:
            consider({"".join(run)})
            run = []
        consider(_item(op, av))
    if run:
        consider({"".join(run)})
    return best


def _item(op, av) -> set[str] | None:
    if op is _c.SUBPATTERN:
        # (group, add_flags, del_flags, pattern): a flag set inside the group may change matching
        if av[1] & re.IGNORECASE:
            return None
        return _seq(av[3])
    if op is _c.BRANCH:
        out: set[str] = set()
        for alt in av[1]:
            got = _seq(alt)
            if not got:
                return None         # one branch needs nothing: the whole needs nothing
            out |= got
        return out
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None)):
        lo, _hi, item = av
        return _seq(item) if lo >= 1 else None
    if op is getattr(_c, "ATOMIC_GROUP", None):
        return _seq(av)
    return None                 # classes, anchors, lookarounds, backreferences: need nothing


def search(rx: re.Pattern, text: str):
    """rx.search(text), skipped when the text lacks every literal the pattern needs."""
    n = needles(rx)
    if n is not None and not any(x in text for x in n):
        return None
    return rx.search(text)
