"""JSON lines: one JSON object per line. Three kinds are told apart by their keys:

- an envelope around a log line: docker's json-file driver (`{"log": "INFO …\\n", "stream":
  "stderr", "time": "2025-…Z"}`), Kubernetes/fluentd exports (`log`, `message`), structured
  loggers (`{"timestamp": …, "level": "INFO", "message": "…"}`, Rust tracing's `fields.message`):
  the line inside is read as any log line is, with the record's time;
- a benchmark result per line (SGLang `bench_serving`): a point of a load sweep;
- anything else: JSON, understood as such, of no use here.
"""
from __future__ import annotations

import json
import re

MESSAGE_KEYS = ("log", "message", "msg", "MESSAGE", "text")
TIME_KEYS = ("time", "timestamp", "ts", "@timestamp", "asctime", "__REALTIME_TIMESTAMP")
MAX_LINE = 1 << 20      # a JSON line longer than this is not decoded (bounded work per line)
_TAG = re.compile(r"\[[A-Za-z][\w-]{0,30}\] (?=\{\")")


def decode(text: str):
    """The object a JSON line holds (after a short tag such as NVIDIA Dynamo's `[DYNAMO] `), or None."""
    s = text.strip()
    if not s.endswith("}") or len(s) > MAX_LINE:
        return None
    if not s.startswith("{"):
        m = _TAG.match(s)       # a bare tag only: a log header before a dict is a log line
        if not m:
            return None
        s = s[m.end():]
    try:
        obj = json.loads(s)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def envelope(obj: dict) -> tuple[str, str | None] | None:
    """(the log line inside, its ISO time or None) when the record wraps a log line."""
    msg = None
    for k in MESSAGE_KEYS:
        v = obj.get(k)
        if isinstance(v, str):
            msg = v
            break
    if msg is None and isinstance(obj.get("fields"), dict) and isinstance(obj["fields"].get("message"), str):
        msg = obj["fields"]["message"]          # Rust tracing (NVIDIA Dynamo's frontend)
    if msg is None:
        return None
    when = None
    for k in TIME_KEYS:
        v = obj.get(k)
        if isinstance(v, str) and len(v) >= 19 and v[4:5] == "-" and v[10:11] in "T ":
            when = v
            break
    return msg.rstrip("\r\n"), when


def bench_record(obj: dict) -> bool:
    return "output_throughput" in obj or any(isinstance(k, str) and k.endswith("_ttft_ms") for k in obj)
