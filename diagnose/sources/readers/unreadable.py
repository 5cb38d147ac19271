"""Lines that are not text (invalid UTF-8, NUL bytes) in inputs read whole (scrapes, GPU samples):
emptied, so line numbers hold, and counted, as the log readers count theirs."""
from __future__ import annotations

from ...evidence.model import InputInfo


def blank_unreadable(data: bytes) -> tuple[bytes, int]:
    """Scrapes and GPU samples are read whole: a line with NUL bytes or invalid UTF-8 is emptied
    (line numbers hold) and counted, as the log scanner skips and counts it: parsed, they would
    carry U+FFFD into values and go uncounted."""
    if b"\x00" not in data:
        try:
            data.decode("utf-8")
            return data, 0
        except UnicodeDecodeError:
            pass
    lines = data.split(b"\n")
    bad = 0
    for i, raw in enumerate(lines):
        if not raw:
            continue
        try:
            raw.decode("utf-8")
            ok = b"\x00" not in raw
        except UnicodeDecodeError:
            ok = False
        if not ok:
            lines[i] = b""
            bad += 1
    return b"\n".join(lines), bad

def note_unreadable(info: InputInfo, bad: int) -> InputInfo:
    if bad:
        info.unreadable_lines = bad
        info.unrecognised_lines = max(0, info.unrecognised_lines - bad)
        info.errors.append(f"{bad} unreadable line(s) (invalid UTF-8 or NUL bytes) skipped")
    return info
