"""Redaction of user content in evidence: prompts, token ids, outputs, secrets, e-mail addresses,
client IP addresses.

Applied when evidence text is recorded, so no report format can leak it; `--no-redact`
switches it off for the whole run. `sources.load()` also passes every kept event and fact text
through `redact()` and secret-named settings through `redact_setting()`, so a parser that cites a
raw line (an engine-crash line carrying request headers) cannot leak either.
"""
from __future__ import annotations

import re

ENABLED = True

_PROMPT = re.compile(r"(prompt: |output: |text=|prompt=)('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", re.S)
_PROMPT_OPEN = re.compile(r"(prompt: |output: )(['\"]).*$", re.S)  # truncated line: quote never closed
# Token ids decode back to the prompt: vLLM's `prompt_token_ids`, SGLang's `input_ids=[…]`,
# `output_ids=`, `origin_input_ids=`.
_TOKEN_IDS = re.compile(r"((?:prompt_token_ids|token_ids|input_ids|output_ids)(?:: |=|': |\": ))\[[^\]]*\]?")
# `Authorization: Bearer …`, `?api_key=…`, `'x-api-key': '…'`, `token=…`, `password=…`: the key,
# an optional quote, `:` or `=`, then a value of 8+ characters with a letter in it (so SGLang's
# `#token: 12345678` stays).
_BEARER = re.compile(
    r"(?i)(bearer\s+|(?:authorization|api[_-]?key|access[_-]?token|token|secret|password|passwd)['\"]?\s*[=:]\s*['\"]?"
    r"(?:bearer\s+)?)(?=[A-Za-z0-9._~+/\-]*[A-Za-z])[A-Za-z0-9._~+/\-]{8,}=*")
# Starts only where a run of address characters starts (else each of its characters was a new, long try).
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+\.[\w.-]+")
_SK = re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")
# Keys with a shape of their own, whatever surrounds them.
_KEYS = {
    "hf_": re.compile(r"\bhf_[A-Za-z0-9]{30,}"),                         # Hugging Face
    "AKIA": re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),                # AWS access key id
    "ASIA": re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    "xox": re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),                 # Slack
    "AIza": re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"),                     # Google API key
    "ghp_": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}"),                  # GitHub
}
_AWS_SECRET = re.compile(r"(?i)(aws_secret_access_key['\"]?\s*[=:]\s*['\"]?)[A-Za-z0-9/+=]{20,}")
_BASIC = re.compile(r"(?i)\b(basic\s+)[A-Za-z0-9+/]{8,}={0,2}")
# `scheme://user:password@host`: everything up to the last `@` of the address is the
# userinfo, whatever the password holds (`#`, `?`, `/`, `@`).
_URL_CREDENTIALS = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^\s:@/]*:\S*@(?=[^\s@]*(?:\s|$))")
_PRIVATE_KEY = re.compile(r"(-----BEGIN [A-Z ]*PRIVATE KEY-----).*?(-----END [A-Z ]*PRIVATE KEY-----|$)")
# Personal data in what users wrote: card numbers (13-19 digits, grouped or not, Luhn-valid), US
# social security numbers, phone numbers in their written shapes (a bare 10-digit number is
# usually a count in a log, so only separated or `+`-prefixed forms).
_CARD = re.compile(r"(?<![\d.-])\d(?:[ -]?\d){12,18}(?![\d.-])")
_SSN = re.compile(r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])")
_PHONE = re.compile(r"(?<![\w+])(?:\+\d{1,3}(?:[ .-]\(?\d{1,4}\)?){2,4}|\(\d{3}\) ?\d{3}[-.]\d{4}|\d{3}[-.]\d{3}[-.]\d{4})(?![\w-])")
# Client addresses (uvicorn access lines, error messages naming the caller). IPv4: four octets
# not inside a longer dotted run, and not a version (`version 0.10.1.1`, `v0.10.1.1`). IPv6: a
# hex-and-colon run with `::` or 6+ groups (so `12:34:56` times stay); `[…]` and a trailing
# `:port` of uvicorn's `host:port` go with it.
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = re.compile(rf"(?<![\w.])(?<!version )(?:{_OCTET}\.){{3}}{_OCTET}(?![\w.]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:.])\[?(?=[0-9a-fA-F:]*::|(?:[0-9a-fA-F]{1,4}:){5}[0-9a-fA-F]{1,4})"
                   r"[0-9a-fA-F:]{2,45}(?:%\w+)?(?:\](?::\d{1,5})?)?(?![\w:])")
# Settings whose value is a credential, whatever it looks like.
# (`api_key`, `hf_token`, `ssl_keyfile_password`; not `max_num_batched_tokens` nor `tokenizer`)
_SECRET_KEY = re.compile(r"(?i)(?:^|[_-])(?:api[_-]?key|token|secret|password|passwd|authorization|credentials?)$")


def redact(text: str) -> str:
    if not ENABLED or not text:
        return text
    t = text
    # Each pattern only where its literal part occurs: config dumps are long and cited often.
    if "prompt" in t or "output: " in t or "text=" in t:
        t = _PROMPT.sub(lambda m: f"{m.group(1)}<redacted {len(m.group(2)) - 2} chars>", t)
        t = _PROMPT_OPEN.sub(lambda m: f"{m.group(1)}<redacted>", t)
    if "_ids" in t:
        t = _TOKEN_IDS.sub(lambda m: f"{m.group(1)}[<redacted>]", t)
    t = _secrets(t)
    if "." in t:
        t = _IPV4.sub("<ip>", t)
    if "::" in t or t.count(":") >= 5:
        t = _IPV6.sub("<ip>", t)
    return t


_CREDENTIAL_WORDS = ("bearer", "authoriz", "key", "token", "secret", "passw")


def _secrets(t: str) -> str:
    if "PRIVATE KEY" in t:
        t = _PRIVATE_KEY.sub(lambda m: f"{m.group(1)}<redacted>{m.group(2)}", t)
    if "://" in t and "@" in t:
        t = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}<redacted>@", t)
    low = t.lower()
    if "basic" in low:
        t = _BASIC.sub(lambda m: f"{m.group(1)}<redacted>", t)
    if "aws_secret" in low:
        t = _AWS_SECRET.sub(lambda m: f"{m.group(1)}<redacted>", t)
    if any(w in low for w in _CREDENTIAL_WORDS):
        t = _BEARER.sub(lambda m: f"{m.group(1)}<redacted>", t)
    if "sk-" in t:
        t = _SK.sub("<redacted-key>", t)
    for lit, pat in _KEYS.items():
        if lit in t:
            t = pat.sub("<redacted-key>", t)
    if "@" in t:
        t = _EMAIL.sub("<redacted-email>", t)
    return _personal(t)


def _luhn(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = ord(c) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card(m: re.Match) -> str:
    text = m.group()
    digits = text.replace(" ", "").replace("-", "")
    grouped = len(digits) != len(text)
    # Luhn-valid, and written as cards are: in groups, or 15-16 digits (a bare 13-digit number
    # that passes Luhn is as likely a count or an id)
    if _luhn(digits) and (grouped or len(digits) in (15, 16)) and len(set(digits)) > 1:
        return "<redacted-card>"
    return text


def _personal(t: str) -> str:
    if not any(c.isdigit() for c in t[:4096]) and not any(c.isdigit() for c in t[4096:]):
        return t
    t = _CARD.sub(_card, t)
    if "-" in t:
        t = _SSN.sub("<redacted-ssn>", t)
    t = _PHONE.sub(_phone, t)
    return t


def _phone(m: re.Match) -> str:
    digits = sum(c.isdigit() for c in m.group())
    return "<redacted-phone>" if 8 <= digits <= 15 else m.group()


def redact_setting(key, value):
    """A launch argument or config value kept verbatim under `deployment.settings` (and used to
    write the fix command): a credential by name (`api_key`, `hf_token`, …) is replaced whole; in
    other strings, bearer tokens, `sk-` keys and e-mail addresses. Host addresses stay: `--host
    0.0.0.0` is configuration, not a client's."""
    if not ENABLED:
        return value
    if isinstance(key, str) and _SECRET_KEY.search(key) and value not in (None, False, True, "", "None"):
        return "<redacted>"
    if isinstance(value, str):
        return _secrets(value)
    if isinstance(value, dict):
        return {k: redact_setting(k, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_setting(None, v) for v in value)
    return value
