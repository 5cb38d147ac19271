"""Patterns compiled when first used: `lazy(pattern, flags)` stands for `re.compile(pattern, flags)`.

Every run imports the line tables of all three engines, the shared lines' wordings and the
redaction patterns, and compiling a regex is pure Python (~0.2 ms each): most of these patterns
are only ever tried on the lines that hold their literal text (an OOM wording, a TensorRT-LLM
line, an e-mail address), and a log that has none of them never needs them compiled. A lazy
pattern compiles on the first use of anything beyond its `pattern`, then answers through the
compiled pattern's own methods (kept on the object: ~0.1 µs a call more than a compiled one, so
it is for the patterns that are not tried on every line). `pattern` may also be a function that
makes it, for a pattern whose text is itself costly to build: called at the first use too.
"""
from __future__ import annotations

import re

# What is taken over from the compiled pattern at its first use.
_TAKEN = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner",
          "flags", "groups", "groupindex")


class LazyPattern:
    def __init__(self, pattern, flags: int = 0) -> None:
        if callable(pattern):
            self._build = pattern
        else:
            self.pattern = pattern
        self._flags = flags

    def compiled(self) -> re.Pattern:
        return re.compile(self.pattern, self._flags)

    def __getattr__(self, name: str):
        # Only for what the object does not hold yet: the first use compiles and keeps it all.
        if name == "pattern" and "_build" in self.__dict__:
            self.pattern = self._build()
            return self.pattern
        if name.startswith("__") or name in ("pattern", "_flags", "_build"):
            raise AttributeError(name)
        rx = self.compiled()
        for n in _TAKEN:
            setattr(self, n, getattr(rx, n))
        return getattr(rx, name)

    def __reduce__(self):           # pickled or copied as what it stands for (a followed file's copy)
        return (LazyPattern, (self.pattern, self._flags))

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r})"


def lazy(pattern, flags: int = 0) -> LazyPattern:
    return LazyPattern(pattern, flags)
