"""`--format json`: the versioned schema (schema_version 1), findings in ranked order."""
from __future__ import annotations

import json


def render(data: dict) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"
