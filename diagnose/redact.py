"""Redaction of user content in evidence: prompts, token ids, outputs, secrets, e-mail addresses.

Applied when evidence text is recorded, so no report format can leak it; `--no-redact`
switches it off for the whole run.
"""
from __future__ import annotations

import re

ENABLED = True

_PROMPT = re.compile(r"(prompt: |output: |text=|prompt=)('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", re.S)
_PROMPT_OPEN = re.compile(r"(prompt: |output: )(['\"]).*$", re.S)  # truncated line: quote never closed
_TOKEN_IDS = re.compile(r"(prompt_token_ids: |token_ids=|prompt_token_ids=)\[[^\]]*\]?")
_BEARER = re.compile(r"(?i)(bearer\s+|authorization:\s*|api[_-]?key[=:]\s*|token=)[A-Za-z0-9._~+/\-]{8,}=*")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
_SK = re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")


def redact(text: str) -> str:
    if not ENABLED or not text:
        return text
    t = _PROMPT.sub(lambda m: f"{m.group(1)}<redacted {len(m.group(2)) - 2} chars>", text)
    t = _PROMPT_OPEN.sub(lambda m: f"{m.group(1)}<redacted>", t)
    t = _TOKEN_IDS.sub(lambda m: f"{m.group(1)}[<redacted>]", t)
    t = _BEARER.sub(lambda m: f"{m.group(1)}<redacted>", t)
    t = _SK.sub("<redacted-key>", t)
    t = _EMAIL.sub("<redacted-email>", t)
    return t
