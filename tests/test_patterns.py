"""Every regular expression the package compiles at module level stays linear on hostile lines.

A log line is text from anywhere: a pattern that backtracks (a lazy `.*?` before `\\s*$`, two
`\\s*` around an optional part, a search tried at every character of a long run) turns one
damaged line into minutes. Each pattern is run against 20 000-character lines made of the
characters that make patterns backtrack, after each of its own literal words (so the line gets
past its prefix). Linear patterns take milliseconds here; the quadratic ones this found took 4 to
30 seconds. The bound is a hang detector, not a speed goal (speed is measured in bench/).
"""
from __future__ import annotations

import importlib
import pkgutil
import re
import time

import diagnose
from diagnose.lazyre import LazyPattern

N = 20_000
FILLS = [" ", "0", "a", ".", ",", "=", "'", "(", "[", "{", ":", "/", "-", "a ", "0.", "1,", "'a': 1, ",
         "x=1, ", "\\", '"', "%", " |", "\t", "a-", "<", "#a: ", "0x"]
BOUND_S = 1.0
_LAZY: dict = {}        # id of a lazy pattern -> its compiled pattern (one per object, as for the compiled ones)


def _patterns():
    seen = {}
    for m in pkgutil.walk_packages(diagnose.__path__, "diagnose."):
        if m.name.endswith(".libscan"):
            continue        # the C scanner's shared object, not a module
        mod = importlib.import_module(m.name)
        for name, v in vars(mod).items():
            items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, (list, tuple)) else [(None, v)]
            for k, x in items:
                for y in (x if isinstance(x, tuple) else (x,)):
                    if isinstance(y, LazyPattern):      # compiled on first use (lazyre.py): checked all the same
                        y = _LAZY.setdefault(id(y), y.compiled())
                    if isinstance(y, re.Pattern):
                        seen.setdefault(id(y), (f"{mod.__name__}.{name}" + (f"[{k}]" if k is not None else ""), y))
    return list(seen.values())


def test_the_package_has_patterns_to_check():
    names = {n for n, _ in _patterns()}
    assert len(names) > 100 and "diagnose.redact._EMAIL" in names and "diagnose.sources.engines.sglang.lines.GRAPH_OFF" in names


def test_no_pattern_backtracks_on_a_long_hostile_line():
    slow = []
    for name, p in _patterns():
        text = p.pattern if isinstance(p.pattern, str) else p.pattern.decode("latin-1")
        for prefix in [""] + re.findall(r"[A-Za-z][A-Za-z _:#]{3,}", text)[:3]:
            for f in FILLS:
                line = prefix + f * (N // len(f)) + "\x01"
                subject = line if isinstance(p.pattern, str) else line.encode("latin-1", "replace")
                t = time.perf_counter()
                p.search(subject)
                took = time.perf_counter() - t
                if took > BOUND_S:
                    slow.append(f"{name} after {prefix!r} on {f!r}×{N // len(f)}: {took:.1f} s")
                    break
    assert not slow, "\n".join(slow)


def test_no_code_tells_a_match_pattern_by_identity():
    """A match's `.re` is the compiled pattern, never the lazy one a module holds (lazyre): `m.re is
    SPEC_COUNTS` was never true once SPEC_COUNTS became lazy, and a counts-only SpecDecoding line
    ended the run with an internal error. Patterns are told apart by their text or their groups."""
    from pathlib import Path
    root = Path(diagnose.__file__).parent
    found = [f"{p.relative_to(root)}:{i}" for p in sorted(root.rglob("*.py"))
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\.re\s+(?:is|==|!=|in)\b", line.split("#", 1)[0])]
    assert not found, found
