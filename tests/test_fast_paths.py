"""Per-line fast paths give what their plain form gives: a line's kind by shape (one search of every
shape at once, as coverage.classify did before it searched the floating shapes one by one, gated by
their literals) and a config dump split at its top-level commas (a character at a time)."""
from __future__ import annotations

import random

from conftest import FIXTURES

from diagnose.sources import coverage
from diagnose.sources.engines.kv import split_top


def _every_line():
    for path in sorted((FIXTURES / "real").glob("*.log")) + sorted((FIXTURES / "rules").glob("*/*.log")):
        yield from path.read_text(encoding="utf-8", errors="replace").split("\n")


def _classify_plain(text: str):
    if "\x1b" in text:
        text = coverage._ANSI.sub("", text)
    head = text[:240]
    p = coverage._PREFIX.match(head)
    rest = head[p.end():] if p else head
    m = coverage._CLASSIFY.search(rest)
    if m is None:
        return coverage.SHARED if p and p.group("proc") and rest.strip() else None
    return m.lastgroup


def test_a_lines_kind_is_what_one_search_of_every_shape_gives():
    lines = list(_every_line())
    assert len(lines) > 100_000
    kinds = {}
    for text in lines:
        got, want = coverage.classify(text), _classify_plain(text)
        assert got == want, (text, got, want)
        kinds[got] = kinds.get(got, 0) + 1
    # the corpus holds every kind: the comparison covered each shape
    assert {"vllm", "sglang", "trtllm", "traceback", "progress", "shared", None} <= set(kinds), kinds


def test_made_up_lines_with_shapes_late_in_the_line_keep_their_kind():
    cases = {"some text 45%|█████     | 9/20 [00:03<00:04]": "progress",
             "model.py:12: UserWarning: something": "shared",
             "prefix NCCL INFO Channel 00": "shared",
             "xx [TensorRT-LLM][INFO] Engine version": "trtllm",
             "Loading safetensors: 100% Completed | 4/4": "progress",
             "nothing known here at all": None}
    for text, kind in cases.items():
        assert coverage.classify(text) == kind == _classify_plain(text), text


def _split_plain(s: str) -> list[str]:
    out, depth, quote, start, i = [], 0, None, 0, 0
    while i < len(s):
        c = s[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(s[start:i])
            start = i + 1
        i += 1
    out.append(s[start:])
    return [p.strip() for p in out if p.strip()]


def test_a_dump_splits_at_its_top_level_commas_as_a_character_walk_does():
    rng = random.Random(7)
    alphabet = "ab,'\"()[]{}\\ =1"
    for _ in range(50_000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert split_top(s) == _split_plain(s), s
    dumps = [x for x in _every_line() if len(x) > 2000 and "=" in x]
    assert dumps
    for x in dumps:
        assert split_top(x) == _split_plain(x)
    assert split_top("a=1, b=[1, 2], c='x, y', d={'k': (1, 2)}") == ["a=1", "b=[1, 2]", "c='x, y'", "d={'k': (1, 2)}"]


def test_a_parsers_phrase_test_never_skips_a_line_its_pattern_matches():
    """dispatch() skips a pattern's search when the line lacks every literal the pattern needs
    (literals.needles): over every real line, no line a pattern matches is skipped."""
    import importlib

    from diagnose.sources.engines import NAMES
    from diagnose.sources.literals import needles
    lines = list(_every_line())[::3]        # every third line: the patterns' phrases are on many
    gated = 0
    for engine in NAMES:
        table = importlib.import_module(f"diagnose.sources.engines.{engine}.lines").Parser._simple
        for rx, _ in table:
            n = needles(rx)
            if n is None:
                continue
            gated += 1
            for text in lines:
                if not any(x in text for x in n):
                    assert rx.search(text) is None, (rx.pattern, n, text)
    assert gated >= 15


def test_needles_of_made_up_patterns():
    import re

    from diagnose.sources.literals import needles
    assert needles(re.compile(r"\bworld_size=(?P<n>\d+)")) == ("world_size=",)
    assert set(needles(re.compile(r"(?:GPU|CUDA) blocks: (?P<n>\d+)"))) == {" blocks: "}
    assert set(needles(re.compile(r"\w+ (?:Out of memory|KV cache is full)"))) == {"Out of memory", "KV cache is full"}
    assert needles(re.compile(r"Engine version (\d+)")) is None           # re scans a literal start itself
    assert needles(re.compile(r"\d+ (?:a|bc)")) is None                    # nothing long enough is required
    assert needles(re.compile(r"(?i)\bout of memory")) is None             # case-insensitive: no filter
    assert needles(re.compile(r"\d(?:abc)?xyz?")) is None                  # optional parts need nothing
