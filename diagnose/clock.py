"""How the times of metric samples are shown. Prometheus inputs carry Unix times, kept as naive UTC
inside (rates and gaps are computed on them, so a daylight-saving change never bends a rate); a
report shows them in the machine's local zone, or in UTC under `--utc`, and names the zone it
used. A log's own clock has no zone and is shown as written."""
from __future__ import annotations

from datetime import datetime, timezone

USE_UTC = False         # --utc


def shown(when: datetime) -> tuple[datetime, str]:
    """A naive UTC time → (the same instant as wall-clock time in the zone shown, that zone's
    name: `UTC`, `CET`, `EDT`…). The local zone's rules for that date (time.localtime), so
    a window across a daylight-saving change is shown right at both ends."""
    if USE_UTC:
        return when, "UTC"
    local = when.replace(tzinfo=timezone.utc).astimezone()
    name = local.tzname() or local.strftime("UTC%z")
    return local.replace(tzinfo=None), name


def span(t0: datetime, t1: datetime, first: str = "%m-%d %H:%M:%S", last: str = "%H:%M:%S") -> str:
    """`11-29 09:33:30–09:53:15 CET` for two naive UTC times (both zones named if they differ)."""
    a, za = shown(t0)
    b, zb = shown(t1)
    return f"{a:{first}} {za}–{b:{last}} {zb}" if za != zb else f"{a:{first}}–{b:{last}} {za}"


def at(when: datetime, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    """One naive UTC time as shown, with its zone: `2026-11-29 09:40:00 CET`."""
    t, z = shown(when)
    return f"{t:{fmt}} {z}"
