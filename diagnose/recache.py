"""Regular expressions as compiled, kept between runs in the cache directory (cachedir.py).

Why: every run compiles the ~160 patterns a small log needs (the line tables, the header shapes,
redaction, typer's and rich's own), and the re module's parser and code generator are pure
Python: ~20 ms of a ~140 ms run on a small log. What they produce is a list of ints for the C
matcher (`_sre.compile`, which checks that code before it takes it); that list is kept, keyed by
the pattern's text and flags, and the next run hands it straight to `_sre.compile`.

How: `install()` wraps `re`'s compile step (`re._compiler.compile`, `sre_compile.compile` before
3.11) and, inside it, the call to `_sre.compile` whose arguments are what is kept. Kept per exact
Python build (`sys.version`, `_sre.MAGIC`, `_sre.CODESIZE`): the code's format is the
interpreter's own. Where anything of this is missing or differs, nothing is installed and `re`
compiles as ever; a kept entry `_sre.compile` refuses is compiled afresh. Only this user's own
cache file is read (cachedir.read_back), as for the parsed rules: a forged pattern could change
what a line is taken for. A run that compiled something new writes the file at exit, with the
KEEP most recently used entries (what a run only read is recorded by the next that writes).
"""
from __future__ import annotations

import marshal
import re
import sys
from pathlib import Path

from .cachedir import cache_dir, read_back, write_whole

KEEP = 3000             # entries: diagnose's own patterns, those of what it imports, a user's rules'
MAX_BYTES = 8 << 20     # a bigger file is not read (not one this module wrote)


class _Kept:
    def __init__(self, compiler, sre) -> None:
        self.compiler, self.sre = compiler, sre
        self.compile = compiler.compile         # the library's own step, for what is not kept
        self.version = (sys.version, sre.MAGIC, sre.CODESIZE)
        self.entries: dict | None = None
        self.new = False
        self.pending = None                     # the key being compiled by the library, if any

    @staticmethod
    def path() -> Path:
        return cache_dir() / "compiled-re-v1.marshal"

    def _load(self) -> dict:
        entries: dict = {}
        raw = read_back(self.path(), binary=True)
        if raw and len(raw) <= MAX_BYTES:
            try:
                doc = marshal.loads(raw)
                if isinstance(doc, tuple) and len(doc) == 2 and doc[0] == self.version and isinstance(doc[1], dict):
                    entries = doc[1]
            except (EOFError, ValueError, TypeError):
                pass
        return entries

    def __call__(self, p, flags=0):
        if not isinstance(p, (str, bytes)) or flags & re.DEBUG:   # a parsed pattern; a debug print: as ever
            return self.compile(p, flags)
        if self.entries is None:
            self.entries = self._load()
        key = (p, int(flags))
        got = self.entries.pop(key, None)
        if got is not None:
            try:
                rx = self.sre.compile(p, *got)
                self.entries[key] = got         # last used: to the end
                return rx
            except Exception:       # noqa: BLE001  (code this build refuses: compiled afresh)
                pass
        self.pending = key
        try:
            return self.compile(p, flags)
        finally:
            self.pending = None

    def sre_compile(self, pattern, flags, code, groups, groupindex, indexgroup):
        rx = self.sre.compile(pattern, flags, code, groups, groupindex, indexgroup)
        key = self.pending
        # (?L): bytes matched by the locale of the time, not kept
        if key is not None and key[0] is pattern and not flags & re.LOCALE:
            self.entries[key] = (int(flags), list(map(int, code)), int(groups), dict(groupindex), tuple(indexgroup))
            self.new = True
            self.pending = None
        return rx

    def save(self) -> None:
        if not self.new or self.entries is None:
            return
        self.new = False
        keep = dict(list(self.entries.items())[-KEEP:])
        try:
            data = marshal.dumps((self.version, keep))
        except ValueError:
            return
        write_whole(self.path(), lambda fh: fh.write(data), binary=True)


class _SreShim:
    """`_sre` as re's compiler sees it: its `compile` goes through _Kept, the rest is _sre's."""

    def __init__(self, sre, kept: _Kept) -> None:
        self._sre, self.compile = sre, kept.sre_compile

    def __getattr__(self, name):
        return getattr(self._sre, name)


_installed: _Kept | None = None


def install() -> None:
    """Keep compiled patterns between runs from now on (once per process; a no-op where this
    Python's re is not built as expected)."""
    global _installed
    if _installed is not None:
        return
    try:
        import _sre
        if sys.version_info >= (3, 11):
            import re._compiler as compiler
        else:
            import sre_compile as compiler
        if compiler._sre is not _sre or not callable(compiler.compile):
            return
        kept = _Kept(compiler, _sre)
    except (ImportError, AttributeError):
        return
    compiler._sre = _SreShim(_sre, kept)
    compiler.compile = kept
    _installed = kept
    import atexit
    atexit.register(kept.save)
