"""Reading `key=value, key=value` dumps (vLLM config, argparse Namespace, dataclass reprs)
and python dict reprs, with values turned into Python values where that is safe."""
from __future__ import annotations

import ast
import json
import re
import shlex
import warnings
from functools import lru_cache

from ... import redact as _redaction
from ...redact import redact
from ...memo import MISS, Memo, fresh


# The characters split_top acts on: it jumps from one to the next (a config dump's line is tens of
# kilobytes; stepping through it a character at a time in Python took ~7 ms a dump).
_SPECIAL = re.compile(r"[\\'\"()\[\]{},]")


def split_top(s: str) -> list[str]:
    """Split on commas at nesting depth 0, outside quotes. Tolerates a truncated tail."""
    out, depth, quote, start, skip = [], 0, None, 0, -1
    for m in _SPECIAL.finditer(s):
        i = m.start()
        if i < skip:                # the character after a backslash inside quotes
            continue
        c = s[i]
        if quote:
            if c == "\\":
                skip = i + 2
            elif c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(s[start:i])
            start = i + 1
    out.append(s[start:])
    return [p.strip() for p in out if p.strip()]


_PLAIN = re.compile(r"(?P<int>-?(?:0|[1-9]\d*))|(?P<float>-?\d+\.\d*(?:[eE][+-]?\d+)?)|'[^'\\]*'|\"[^\"\\]*\"")


def value(v: str):
    v = v.strip()
    if v in ("True", "true"):
        return True
    if v in ("False", "false"):
        return False
    if v in ("None", "null"):
        return None
    if v.startswith("torch."):
        return v[len("torch."):]
    # Plain numbers and quoted strings, most of a dump's values, without literal_eval (which
    # compiles each one: a megabyte dict line of 150 000 values took 6 s).
    m = _PLAIN.fullmatch(v)
    if m:
        try:
            return int(v) if m.group("int") else float(v) if m.group("float") else v[1:-1]
        except ValueError:      # an int of more than 4300 digits: kept as text, as literal_eval did
            return v
    if v[:1] == "{" and v.endswith("}"):
        try:
            return json.loads(v)
        except (ValueError, RecursionError):   # RecursionError: `{"a":{"a":…` nested 100 000 deep
            pass
    try:
        return _literal(v)   # literals only: never evaluates code
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return v


def _literal(text: str):
    # A logged string such as 'C:\s' holds an escape Python does not know: literal_eval warns
    # (DeprecationWarning, SyntaxWarning from 3.12) and the warning reached the user's stderr.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.literal_eval(text)


# A launch's config dump and argument dict repeat verbatim at every launch of a restart loop, and
# parsing one (literal_eval compiles its reprs) cost ~4 ms. Kept by text (memo.py), bounded: 32
# dumps of up to 64 KB each, 256 K characters in all (a dump is ~5 KB; its parsed values take a
# few times its text); each caller gets containers of its own (memo.fresh).
DUMP_ENTRIES = 32
DUMP_LONGEST = 64 * 1024
DUMP_BUDGET = 256 * 1024
_PAIRS = Memo(DUMP_ENTRIES, DUMP_LONGEST, DUMP_BUDGET)
_DICTS = Memo(DUMP_ENTRIES, DUMP_LONGEST, DUMP_BUDGET)


def _kept(memo: Memo, parse, text: str) -> dict:
    got = memo.get(text)
    if got is MISS:
        got = parse(text)
        memo.put(text, got)
    try:
        return fresh(got)
    except RecursionError:      # a value nested too deep to copy: parsed again, as it was
        return parse(text)


def parse_pairs(body: str) -> dict:
    """`a=1, b='x', c={"k":1}` → dict. Keys without `=` (a quirk, or a cut line) are skipped."""
    return _kept(_PAIRS, parse_pairs_plain, body)


def parse_pairs_plain(body: str) -> dict:
    out = {}
    for part in split_top(body):
        # v0.6.3 quirk: `chunked_prefill_enabled=False multi_step_stream_outputs=True`
        for piece in _split_missing_comma(part):
            k, eq, v = piece.partition("=")
            k = k.strip()
            if eq and k.isidentifier():
                out[k] = value(v)
    return out


SIMPLE_PAIR = re.compile(r"^\w+=[\w.\-]+$")


def _split_missing_comma(part: str) -> list[str]:
    # Only plain `key=value key=value` runs; never reprs such as `SpeculativeConfig(method='eagle', …)`.
    if part.count("=") > 1 and " " in part:
        bits = part.split(" ")
        if all(SIMPLE_PAIR.match(b) for b in bits):
            return bits
    return [part]


def parse_dict(text: str) -> dict:
    """A python dict repr → dict; falls back to top-level `'key': value` pairs if it has reprs."""
    return _kept(_DICTS, parse_dict_plain, text)


def parse_dict_plain(text: str) -> dict:
    text = text.strip()
    if text.startswith("{") and text.endswith("}") and ('": ' in text or '":' in text):
        try:        # JSON (sglang-diffusion's `server_args: {"model_path": …, "trust_remote_code": false}`)
            d = json.loads(text)
            if isinstance(d, dict):
                return d
        except (ValueError, RecursionError):
            pass
    try:
        # Only a whole dict can be one literal: a cut one (a line a paste or a buffer truncated)
        # went through compile() for nothing, 0.2 s a megabyte.
        d = _literal(text) if text.endswith("}") else None
        if isinstance(d, dict):
            return d
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    body = text[1:-1] if text.startswith("{") else text
    out = {}
    for part in split_top(body):
        k, colon, v = part.partition(":")
        if colon:
            k = k.strip().strip("'\"")
            if k.isidentifier():
                out[k] = value(v)
    return out


def parse_cmdline(args: str, positional_model: bool = False) -> dict:
    """`--tp 2 --model-path m --enforce-eager` → {"tp": 2, "model_path": "m", "enforce_eager": True}.
    With `positional_model`, the first bare argument with a `/` is the model (`vllm serve org/m`)."""
    try:
        toks = shlex.split(args)
    except ValueError:
        toks = args.split()
    d, i = {}, 0
    while i < len(toks):
        t = toks[i]
        if t.startswith("--"):
            key, eq, val = t[2:].partition("=")
            key = key.replace("-", "_")
            if eq:
                d[key] = value(val)
            elif i + 1 < len(toks) and not toks[i + 1].startswith("--"):
                d[key] = value(toks[i + 1])
                i += 1
            else:
                d[key] = True
        elif positional_model and "model" not in d and not t.startswith("-") and "/" in t:
            d["model"] = t
        i += 1
    return d


def balanced(s: str) -> bool:
    """Brackets closed and no quote left open: a dump that a paste did not cut or wrap."""
    depth, quote = balance(s)
    return depth <= 0 and quote is None


def balance(s: str, state: tuple = (0, None)) -> tuple:
    """(bracket depth, open quote) after `s`, continuing from `state`: a dump wrapped over many
    lines is checked line by line instead of re-scanning all of it for every line."""
    depth, quote = state
    for c in s:
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
    return depth, quote


class WrappedDump:
    """A dump that a paste wrapped over several lines (SGLang's `ServerArgs(`, a Triton stats
    JSON): the parser opens it on its first line, the loader hands it every following line
    (`wants_more`/`more`) until `step` says it has closed or `limit` lines have come, then `done`
    gets the joined body. `step(text, state) -> (state, closed)` carries its count line by line:
    re-scanning the whole joined dump for every new line was quadratic. `done(owner, body, line,
    ev)`: a function, the parser that owns the dump given at each call (a bound method held here
    made every parser a reference cycle, which a run without the collector never freed: a
    restart loop of thousands kept each launch's parser)."""

    def __init__(self, step, limit: int, done) -> None:
        self.step, self.limit, self.done = step, limit, done
        self.parts: list[str] | None = None
        self.line = None
        self.state = None

    def open(self, text: str, line, state) -> None:
        self.parts, self.line, self.state = [text], line, state

    def wants_more(self) -> bool:
        return self.parts is not None

    def more(self, owner, text: str, ev) -> None:
        text = text.rstrip("\r\n")
        self.parts.append(text)
        self.state, closed = self.step(text, self.state)
        if closed or len(self.parts) > self.limit:
            self.finish(owner, ev)

    def finish(self, owner, ev) -> None:
        """Also at the end of input with the dump still open (a truncated paste): use what came."""
        if self.parts is not None:
            body, line = "".join(self.parts), self.line    # pastes break mid-token: join as is
            self.parts = None
            self.done(owner, body, line, ev)


@lru_cache(maxsize=4)
def _redacted(raw: str, enabled: bool) -> str:
    return redact(raw)      # one config line gives many facts: redact it once, not per key


def excerpt(raw: str, key: str, width: int = 160) -> str:
    """A long config line cut down to the part around `key`, so evidence shows what matters."""
    # Redacted before it is cut: a cut can drop the `api_key=` that tells a credential from text.
    raw = _redacted(raw, _redaction.ENABLED)
    if len(raw) <= width:
        return raw
    i = raw.find(key)
    if i < 0:
        return raw[:width] + " …"
    head = raw[: raw.find("]") + 1] if "] " in raw[:120] else ""
    start = max(len(head), i - 30)
    return f"{head} … {raw[start:start + width - len(head)]} …"
