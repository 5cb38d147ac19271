"""A saved Prometheus `query_range` (or instant query) answer: JSON with `resultType` and
`result`, one series per object. Read whole; the series arithmetic is a live server's."""
from __future__ import annotations

import json

from ...evidence.model import Evidence, InputInfo
from ..readers.files import InputError


def sniff(head: bytes) -> bool:
    s = head[:65536].lstrip()
    return s[:1] == b"{" and b'"resultType"' in head[:65536] and b'"result"' in head[:65536]


def load(text: str, source: str, ev: Evidence) -> InputInfo:
    from ..prometheus import from_samples
    info = InputInfo(path=source, kind="prometheus-query-range", lines=text.count("\n") + 1)
    try:
        doc = json.loads(text)
        result = doc["data"]["result"]
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        raise InputError(f"{source}: not a Prometheus query_range response ({e})") from None
    samples = []
    for series in result:
        labels = dict(series.get("metric", {}))
        name = labels.pop("__name__", "")
        for ts, val in series.get("values", []) or ([series["value"]] if "value" in series else []):
            try:
                samples.append((0, float(ts), name, labels, float(val), 1))
            except (TypeError, ValueError):
                continue
    info.recognised_lines = info.lines
    from_samples(samples, source, ev, info)
    return info
