"""SGLang's logger header: `[2025-01-06 02:58:44 TP5] `, `[04:40:55 TP0] `,
`[2025-05-14 09:31:43.123 DP0 TP0 EP0] `, sglang-diffusion's `[02-15 22:58:13] `."""
from __future__ import annotations

import re

from .. import Header

HEADER = re.compile(
    r"^\[(?:(?P<date>\d{4}-\d\d-\d\d) |(?P<mon>\d\d)-(?P<day>\d\d) )?(?P<hms>\d\d:\d\d:\d\d)(?:[.,]\d+)?(?P<tags>(?: [A-Z][A-Z_]*\d+)*)\] "
    # `[stamp] LMCache INFO: …`: another Python library's logger in the same job, not SGLang's
    r"(?![\w.]+ (?:DEBUG|INFO|WARNING|ERROR|CRITICAL):)")


def match(text: str) -> Header | None:
    if text[:1] != "[":
        return None
    m = HEADER.match(text)
    if not m:
        return None
    if m.group("mon"):          # sglang-diffusion: `[02-15 22:58:13] ` (no year)
        return Header("sglang", m.end(), stamp=(int(m.group("mon")), int(m.group("day")), m.group("hms")),
                      tags=m.group("tags").strip())
    return Header("sglang", m.end(), date=m.group("date"), hms=m.group("hms"), tags=m.group("tags").strip())
