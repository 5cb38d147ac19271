"""Bounded memos of work that depends only on a message's text.

A log that restarts a server thousands of times (or repeats a warning for hours) hands the parsers
the same message bodies again and again, once the prefixes and the header with its time are
peeled: which pattern of an engine's table a body matches, whether a shared-line branch can act on
it, and a config dump's parsed pairs are the same each time (and a kept text's redaction: redact.py).
A memo keeps them, bounded so that no
input can make it big: only bodies up to a length are kept, so many and so many characters in all,
and a memo that fills is emptied and starts again (an input of lines all different pays one
dictionary look-up and store per line, nothing more). Each memo is held equal to the plain work
by tests/test_memos.py, over every line of the real logs.
"""
from __future__ import annotations

MISS = object()         # what `get` returns for a text not kept


class Memo:
    """text -> value, at most `entries` texts of at most `longest` characters each and `budget`
    characters in all: its memory is bounded by the budget (4 bytes a character at worst) and the
    entries' values (each caller bounds those)."""
    __slots__ = ("data", "entries", "longest", "budget", "size")

    def __init__(self, entries: int, longest: int, budget: int) -> None:
        self.data: dict = {}
        self.entries, self.longest, self.budget = entries, longest, budget
        self.size = 0           # characters of the texts kept

    def get(self, key: str):
        return self.data.get(key, MISS)

    def put(self, key: str, value) -> None:
        n = len(key)
        if n > self.longest:
            return
        data = self.data
        if len(data) >= self.entries or self.size + n > self.budget:
            data.clear()        # simpler than an LRU, and as bounded: repeats fill it again at once
            self.size = 0
        data[key] = value
        self.size += n


def fresh(v):
    """A copy of a parsed value whose containers are new (the memo's copy stays as it was parsed,
    whatever a caller does with what it is given): dicts, lists and sets rebuilt, the rest shared
    (str, numbers, None, tuples of those are immutable)."""
    t = type(v)
    if t is dict:
        return {k: fresh(x) for k, x in v.items()}
    if t is list:
        return [fresh(x) for x in v]
    if t is tuple:
        return tuple(fresh(x) for x in v)
    if t is set:
        return set(v)       # members of a set are hashable: immutable here
    return v
