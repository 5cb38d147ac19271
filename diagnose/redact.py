"""Redaction of user content in evidence: prompts, token ids, outputs, secrets, e-mail addresses,
client IP addresses.

Applied when evidence text is recorded, so no report format can leak it; `--no-redact`
switches it off for the whole run. `sources.load()` also passes every kept event and fact text
through `redact()` and secret-named settings through `redact_setting()`, so a parser that cites a
raw line (an engine-crash line carrying request headers) cannot leak either.
"""
from __future__ import annotations

import re

from .lazyre import lazy
from .memo import MISS, Memo

ENABLED = True

_PROMPT = lazy(r"(prompt: |output: |text=|prompt=)('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", re.S)
_PROMPT_OPEN = lazy(r"(prompt: |output: )(['\"]).*$", re.S)  # truncated line: quote never closed
# Token ids decode back to the prompt: vLLM's `prompt_token_ids`, SGLang's `input_ids=[…]`,
# `output_ids=`, `origin_input_ids=`, `'output_ids': [`, `input_ids: tensor([…], device=…)`. The
# list is the run of what token lists hold (digits, `,`, `.`, `-`, blanks, nested brackets) up to
# its last `]`; a list cut off with its line goes to the end of the run.
_TOKEN_IDS = lazy(r"((?:token_ids|input_ids|output_ids|fill_ids)['\"]?\s*[:=]\s*(?:tensor\()?)(\[[\d\s,.\[\]-]*)")
# `Authorization: Bearer …`, `?api_key=…`, `'x-api-key': '…'`, `token=…`, `password=…`: the key,
# an optional quote, `:` or `=`, then a value of 8+ characters with a letter in it (so SGLang's
# `#token: 12345678` stays).
_BEARER_KEY = (r"(bearer\s+|(?:authorization|api[_-]?key|access[_-]?token|token|secret|password|passwd)['\"]?\s*[=:]"
               r"\s*['\"]?(?:bearer\s+)?)")
_BEARER = lazy(r"(?i)" + _BEARER_KEY + r"(?=[A-Za-z0-9._~+/\-]*[A-Za-z])[A-Za-z0-9._~+/\-]{8,}=*")
# Starts only where a run of address characters starts (else each of its characters was a new, long try).
_EMAIL = lazy(r"(?<![\w.+-])[\w.+-]+@[\w-]+\.[\w.-]+")
_SK = lazy(r"\bsk-[A-Za-z0-9_\-]{16,}")
# Keys with a shape of their own, whatever surrounds them.
# (Not after a letter or digit: `_hf_…` and `HF_TOKEN:hf_…` are keys, `xhf_…` is a word.)
_AWS_KEY_ID = lazy(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])")
_KEYS = {
    "hf_": lazy(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}"),           # Hugging Face
    "AKIA": _AWS_KEY_ID,                                                # AWS access key id
    "ASIA": _AWS_KEY_ID,
    "xox": lazy(r"(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9-]{10,}"),  # Slack
    "AIza": lazy(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}"),      # Google API key
}
_GITHUB = lazy(r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{36,}")     # GitHub
_KEYS.update((f"gh{c}_", _GITHUB) for c in "pousr")
_AWS_SECRET = lazy(r"(?i)(aws_secret_access_key['\"]?\s*[=:]\s*['\"]?)[A-Za-z0-9/+=]{20,}")
# `Basic <base64>`: after `Authorization` anywhere in the line, any 8+ base64 characters; elsewhere
# only what looks encoded (a digit, `+/=`, or a capital past the first letter: "basic arithmetic"
# in a completion stays).
_BASIC = lazy(r"(?i)\b(basic\s+)([A-Za-z0-9+/]{8,}={0,2})")
_PRIVATE_KEY = lazy(r"(-----BEGIN [A-Z ]*PRIVATE KEY-----).*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S)
_PRIVATE_KEY_END = lazy(r"-----END [A-Z ]{0,40}PRIVATE KEY-----")
_BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\\")
_BLANK = lazy(r"\s")
# Personal data in what users wrote: card numbers (Luhn-valid, written as cards are), US social
# security numbers, phone numbers in their written shapes (a bare 10-digit number is usually a
# count in a log, so only separated or `+`-prefixed forms). Not inside a word, a decimal or a
# dotted/dashed run (request ids, hashes, versions, floats). (Each starts with its first character
# and looks behind it after: a pattern that starts with a lookbehind is tried at every character.)
_DIGIT_RUN = lazy(r"\d(?<![\w.+-]\d)(?=[\d -]{12})\d*(?:[ -]\d+)*(?![\w-]|\.\d)")
_GROUP_SEP = lazy(r"([ -])")
_SSN = lazy(r"\d(?<![\w.-]\d)\d\d-\d\d-\d{4}(?![\w-]|\.\d)")
_PHONE = lazy(r"(?:\+(?<![\w+.-]\+)(?:\d{1,3}(?:[ .-]\(?\d{1,4}\)?){2,4}|[1-9]\d{9,14})"
              r"|\((?<![\w+.-]\()\d{3}\) ?\d{3}[-.]\d{4}|\d(?<![\w+.-]\d)\d\d[-.]\d{3}[-.]\d{4})(?![\w-]|\.\d)")
# Client addresses (uvicorn access lines, error messages naming the caller). IPv4: four octets
# not inside a longer dotted run, and not a version (`version 0.10.1.1`, `v0.10.1.1`). IPv6: a
# hex-and-colon run with `::` or 6+ groups (so `12:34:56` times stay); `[…]` and a trailing
# `:port` of uvicorn's `host:port` go with it.
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = lazy(rf"(?<![\w.])(?<!version )(?:{_OCTET}\.){{3}}{_OCTET}(?![\w.]|\.\d)")
# What every IPv4 address holds, found from its first digit (_IPV4 opens with look-behinds, so a
# search of it tries every character): most texts hold none, and _IPV4 is not run over them.
_DOTTED_QUAD = lazy(r"\d\.\d{1,3}\.\d{1,3}\.\d")
_IPV6 = lazy(r"(?<![\w:.])\[?(?=[0-9a-fA-F:]*::|(?:[0-9a-fA-F]{1,4}:){5}[0-9a-fA-F]{1,4})"
             r"[0-9a-fA-F:]{2,45}(?:%\w+)?(?:\](?::\d{1,5})?)?(?![\w:])")
# Settings whose value is a credential, whatever it looks like.
# (`api_key`, `hf_token`, `ssl_keyfile_password`; not `max_num_batched_tokens` nor `tokenizer`)
_SECRET_KEY = lazy(r"(?i)(?:^|[_-])(?:api[_-]?key|token|secret|password|passwd|authorization|credentials?"
                   r"|secret[_-]access[_-]key)$")


# Kept texts repeat (a folder's launches of one server cite the same config dump, warnings and
# error lines): each text is redacted once per run. Bounded as the parsers' memos are.
_DONE = Memo(8192, 64 * 1024, 2 * 1024 * 1024)


def redact(text: str) -> str:
    if not ENABLED or not text:
        return text
    done = _DONE.get(text)
    if done is MISS:
        done = _redacted(text)
        _DONE.put(text, done)
    return done


def _redacted(text: str) -> str:
    t = text
    # Each pattern only where its literal part occurs: config dumps are long and cited often.
    if "prompt" in t or "output: " in t or "text=" in t:
        t = _PROMPT.sub(lambda m: f"{m.group(1)}<redacted {len(m.group(2)) - 2} chars>", t)
        t = _PROMPT_OPEN.sub(lambda m: f"{m.group(1)}<redacted>", t)
    if "_ids" in t:
        t = _TOKEN_IDS.sub(_token_ids, t)
    t = _secrets(t)
    if "." in t and _DOTTED_QUAD.search(t):
        t = _IPV4.sub("<ip>", t)
    if "::" in t or t.count(":") >= 5:
        t = _IPV6.sub("<ip>", t)
    return t


def _token_ids(m: re.Match) -> str:
    run = m.group(2)
    last = run.rfind("]")
    if not any(c.isdigit() for c in (run[:last] if last >= 0 else run)):
        return m.group()                     # `stop_token_ids=[]`, `[<redacted>]`: nothing to hide
    rest = run[last + 1:] if last >= 0 else run[len(run.rstrip()):]
    return f"{m.group(1)}[<redacted>]{rest}"


def redact_secrets(text: str) -> str:
    """Credentials and personal data only (no prompts, no addresses): for error lines naming what
    the user typed (`--prometheus URL`), where the host is theirs to see."""
    return _secrets(text) if ENABLED and text else text


_CREDENTIAL_WORDS = ("bearer", "authoriz", "key", "token", "secret", "passw")
# _BEARER's shape in lower case, without (?i): on an ASCII text's lower case it finds a match just
# where _BEARER finds one in the text (case folds nothing else there), ~4 times faster. Config dumps
# name `max_num_batched_tokens` and `tokenizer`: most texts _BEARER is asked about hold none.
_BEARER_LOW = lazy(_BEARER_KEY + r"(?=[a-z0-9._~+/\-]*[a-z])[a-z0-9._~+/\-]{8,}")


def _may_bear(t: str, low: str) -> bool:
    """Whether _BEARER may match in `t` (`low`: its lower case); False only where it cannot."""
    return not t.isascii() or _BEARER_LOW.search(low) is not None


def _secrets(t: str) -> str:
    if "PRIVATE KEY" in t:
        t = _PRIVATE_KEY.sub(lambda m: f"{m.group(1)}<redacted>{m.group(2)}", t)
        t = _key_body_before_end(t)
    if "://" in t and "@" in t:
        t = _url_credentials(t)
    t0, low = t, t.lower()
    if "basic" in low:
        auth = "authoriz" in low
        t = _BASIC.sub(lambda m: f"{m.group(1)}<redacted>" if auth or _encoded(m.group(2)) else m.group(), t)
    if "aws_secret" in low:
        t = _AWS_SECRET.sub(lambda m: f"{m.group(1)}<redacted>", t)
    if any(w in low for w in _CREDENTIAL_WORDS) and _may_bear(t, low if t is t0 else t.lower()):
        t = _BEARER.sub(lambda m: f"{m.group(1)}<redacted>", t)
    if "sk-" in t:
        t = _SK.sub("<redacted-key>", t)
    for lit, pat in _KEYS.items():
        if lit in t:
            t = pat.sub("<redacted-key>", t)
    if "@" in t:
        t = _EMAIL.sub(_email, t)
    return _personal(t)


def _email(m: re.Match) -> str:
    # a domain ends in letters: `repo@v1.2.3` (a pip requirement, a tag) is a version
    last = m.group().rstrip(".-").rsplit(".", 1)[-1]
    return "<redacted-email>" if any(c.isalpha() for c in last) else m.group()


_ENCODED = lazy(r"[0-9+/=A-Z]")


def _encoded(s: str) -> bool:
    return s[0] in "0123456789+/=" or _ENCODED.search(s, 1) is not None


def _url_credentials(t: str) -> str:
    """`scheme://user:password@host…` → `scheme://<redacted>@host…`. The userinfo is everything
    from `://` to the last `@` of the run of non-blanks holding it, whatever the password holds
    (`#`, `?`, `/`, `%`, `@`) and whatever the host looks like (`db:5432`). Without a `:` it is a
    user or a token alone (`https://TOKEN@host`) unless it holds a path (`git+https://h/repo@v1`).
    An image digest (`…/image@sha256:…`) is not a host. Each run is looked at once (linear)."""
    out, pos = [], 0
    i = t.find("://")
    while i >= 0:
        start = i + 3
        blank = _BLANK.search(t, start)
        end = blank.start() if blank else len(t)
        at = t.rfind("@", start, end)
        while at > start and t.startswith(("sha256:", "sha512:"), at + 1):
            at = t.rfind("@", start, at)
        if at > start:
            userinfo = t[start:at]
            if ":" in userinfo or not any(c in userinfo for c in "/?#"):
                out += [t[pos:start], "<redacted>"]
                pos = at
        i = t.find("://", end)
    return "".join(out) + t[pos:] if out else t


def _key_body_before_end(t: str) -> str:
    """The base64 body just before an `-----END … PRIVATE KEY-----` whose BEGIN is on another line."""
    out, pos = [], 0
    for m in _PRIVATE_KEY_END.finditer(t):
        j = m.start()
        while j > pos and t[j - 1] in _BASE64:
            j -= 1
        if m.start() - j >= 16:
            out += [t[pos:j], "<redacted>"]
            pos = m.start()
    return "".join(out) + t[pos:] if out else t


def _luhn(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = ord(c) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _is_card(digits: str) -> bool:
    # an issuer's first digit (2-6), not one digit repeated, Luhn-valid
    return digits[0] in "23456" and len(set(digits)) > 1 and _luhn(digits)


def _cards(m: re.Match) -> str:
    """A run of digit groups (`4111 1111 1111 1111`, `3782-822463-10005`, `1 2 3 4`): card numbers
    in it are either 15-16 digits alone, or groups written as cards are: a first group of 4, then
    3-6 digits a group, 13-19 digits in all (a bare 13-digit number that passes Luhn is as likely
    a count or an id; `1 2 3 … 13` is a list)."""
    text = m.group()
    if len(text) < 13 or text.count(" ") + text.count("-") > 64:
        return text                     # (64 groups of numbers in a row are a table, not a card)
    parts = _GROUP_SEP.split(text)
    groups, seps = parts[0::2], parts[1::2]
    out, i, hit = [], 0, False
    while i < len(groups):
        g = groups[i]
        end = i + 1 if len(g) in (15, 16) and _is_card(g) else 0
        if len(g) == 4:
            digits, j = g, i + 1
            while j < len(groups) and 3 <= len(groups[j]) <= 6 and len(digits) + len(groups[j]) <= 19:
                digits += groups[j]
                j += 1
                if len(digits) >= 13 and _is_card(digits):
                    end = j
        lead = seps[i - 1] if i else ""
        if end:
            out.append(lead + "<redacted-card>")
            hit, i = True, end
        else:
            out.append(lead + g)
            i += 1
    return "".join(out) if hit else text


def _personal(t: str) -> str:
    if not any(c.isdigit() for c in t[:4096]) and not any(c.isdigit() for c in t[4096:]):
        return t
    t = _DIGIT_RUN.sub(_cards, t)
    if "-" in t:
        t = _SSN.sub(_ssn, t)
    t = _PHONE.sub(_phone, t)
    return t


def _ssn(m: re.Match) -> str:
    area, group, serial = m.group().split("-")
    # never issued: area 000, 666, 9xx; group 00; serial 0000
    if area in ("000", "666") or area[0] == "9" or group == "00" or serial == "0000":
        return m.group()
    return "<redacted-ssn>"


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
