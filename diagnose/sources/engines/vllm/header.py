"""vLLM's logger header: `INFO 01-02 03:04:05 [file.py:12] ` (V1 adds the brackets; some
versions add milliseconds)."""
from __future__ import annotations

import re

from .. import Header

HEADER = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<mon>\d\d)-(?P<day>\d\d) "
    r"(?P<hms>\d\d:\d\d:\d\d)(?:\.\d+)? \[?(?P<file>[\w./<>-]+(?:\.\.\./[\w./-]+)?):(?P<lineno>\d+)\] "
)


def match(text: str) -> Header | None:
    if text[:1] not in "DIWEC":
        return None
    m = HEADER.match(text)
    if not m:
        return None
    level, mon, day, hms = m.group("level", "mon", "day", "hms")      # every line: one call, not four
    return Header("vllm", m.end(), level, (int(mon), int(day), hms))
