"""The ground floor every layer may use: the unknown value and how a value is shown.

A signal that cannot be derived is None or UNKNOWN, never 0 (rules that need it are then not
applicable); `fmt` is how any number reaches a report. The rule runner (ruleset/), findings and reports all
import these from here, so no layer reaches up into the rule runner for them."""
from __future__ import annotations

import re

SEVERITIES = ("critical", "high", "medium", "low", "info")      # most severe first: --fail-on compares indices


class _Unknown:
    _inst = None

    def __new__(cls):
        if cls._inst is None:
            cls._inst = super().__new__(cls)
        return cls._inst

    def __repr__(self):
        return "UNKNOWN"

    def __bool__(self):
        raise TypeError("UNKNOWN has no truth value")


UNKNOWN = _Unknown()


def is_unknown(x) -> bool:
    return x is UNKNOWN or x is None


def fmt(v) -> str:
    if is_unknown(v):
        return "?"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


_HEX_ID = re.compile(r"^[0-9a-f]{32,64}$")


def model_id(model) -> str:
    """The model a served path names: `…/hub/models--Qwen--Qwen2.5-3B-Instruct/snapshots/<commit>`
    (the Hugging Face cache) is `Qwen/Qwen2.5-3B-Instruct`; a trailing commit hash, `snapshots`
    or `/` is no part of the name (its hex digits read as a size: `…ed015b…` is not 15 B)."""
    s = str(model or "").strip().rstrip("/")
    parts = [p for p in s.replace("\\", "/").split("/") if p]
    for p in parts:
        if p.startswith("models--") and p.count("--") >= 2:
            return p[len("models--"):].replace("--", "/", 1)
    while len(parts) > 1 and (_HEX_ID.match(parts[-1]) or parts[-1] in ("snapshots", "main")):
        parts.pop()
    return "/".join(parts[-2:]) if len(parts) >= 2 and not s.startswith(("/", ".", "~")) else (parts[-1] if parts else s)


# What may not reach a terminal raw: C0 controls but tab (ESC starts every escape sequence, BEL
# ends an OSC such as the clipboard write `ESC ] 52`), DEL, C1 controls (U+009B is a one-character
# CSI), and the Unicode controls that reorder or break what a reader sees (bidi overrides and
# isolates, line and paragraph separators).
_UNPRINTABLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNPRINTABLE_KEEP_NL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _visible(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text, newlines: bool = False) -> str:
    """Text from an input (a file name, a log line, a model name) made safe for a terminal or a
    report: every control character but tab shown as its escape (`ESC` as `\\x1b`), so no escape
    sequence (an OSC 52 clipboard write, a screen clear, a one-byte CSI) reaches the terminal and no
    line can be rewritten by a carriage return. `newlines` keeps line feeds (multi-line text such as
    a whole rendered report or a launch command)."""
    s = text if isinstance(text, str) else str(text)
    return (_UNPRINTABLE_KEEP_NL if newlines else _UNPRINTABLE).sub(_visible, s)
