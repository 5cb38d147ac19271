"""Whole-file inputs recognised by content: JSON (trtllm-serve `/metrics` IterationStats arrays,
LLM API options) and YAML (`extra_llm_api_options`, per-SKU profiles)."""
from __future__ import annotations

import json
import re

from ...evidence.model import Evidence, InputInfo
from ..readers.files import Input, InputError
from ...lazyre import lazy

MAX_BYTES = 16 * 1024 * 1024     # parsed whole: a JSON document takes ~7 times its size in memory
# (TOML_HEADER and LOG_LEVEL_KEY are lazy: a log's head seldom reaches them.)
# `key = value` with spaces, as TOML is written; logfmt (`time="…" level=info`) has none.
TOML_HEADER = lazy(rb"^\[\[?\s*[\w\"'-]+(?:\s*\.\s*[\w\"'/. -]+)*\s*\]\]?\s*(?:#.*)?\r?$")
TOML_LINE = re.compile(rb"^\s*(?:\[[^\]]+\]|[\w.\"'-]+ = \S.*)\s*$")
YAML_LINE = re.compile(rb"^\s*(?:-\s+)?[\"']?[\w.\-/]+[\"']?\s*:(?:\s|$)")
# `INFO:     10.0.0.1:5000 - "POST …` (uvicorn's access lines) has YAML's shape: a log level as the
# key is a log line, so a log whose first lines are all access lines stays a log.
LOG_LEVEL_KEY = lazy(rb"^\s*(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|TRACE):")
TRT_HINTS = ("kv_cache_config", "tensorrt_llm", "enable_chunked_context", "scheduler_config",
             "cuda_graph_config", "free_gpu_memory_fraction", "max_num_tokens", "tokens_per_block",
             "use_paged_kv_cache", "print_iter_log", "enable_iter_perf_stats", "backend")


def sniff(head: bytes) -> str | None:
    s = head.lstrip()
    if s[:1] in (b"[", b"{"):
        # A log line can start with `[` too (SGLang, TRT-LLM headers): JSON needs `[{` or `{"`; TOML
        # a first line that is a table header and nothing else (`[default]`, `[targets.default]`),
        # then the TOML test below.
        if re.match(rb"\[\s*(\{|\])|\{\s*\"", s):
            return "json"
        if not TOML_HEADER.match(s.split(b"\n", 1)[0]):
            return None
    lines = [ln for ln in head.splitlines()[:40] if ln.strip() and not ln.lstrip().startswith(b"#")]
    if len(lines) >= 2 and sum((bool(YAML_LINE.match(ln)) and not LOG_LEVEL_KEY.match(ln)) or ln.lstrip().startswith(b"- ")
                               for ln in lines) >= 0.8 * len(lines):
        return "yaml"
    if len(lines) >= 2 and sum(bool(TOML_LINE.match(ln)) for ln in lines) >= 0.9 * len(lines) and any(b"=" in ln for ln in lines):
        return "toml"
    return None


def parses(kind: str, data: bytes) -> bool:
    """Whether the text is a YAML or TOML document at all (a job's output can begin like one)."""
    text = data.decode("utf-8", "replace")
    try:
        if kind == "toml":
            from diagnose._compat import tomllib
            tomllib.loads(text)
        else:
            import yaml
            yaml.safe_load(text)
    except Exception:       # yaml.YAMLError, tomllib.TOMLDecodeError, RecursionError
        return False
    return True


def load_structured(kind: str, inp: Input, ev: Evidence) -> InputInfo:
    data = b"".join(inp.blocks())
    if len(data) > MAX_BYTES:
        raise InputError(f"{inp.display}: {kind.upper()} input larger than {MAX_BYTES // 2**20} MiB")
    text = data.decode("utf-8", "replace")
    info = InputInfo(path=inp.display, kind=kind, lines=text.count("\n") + (not text.endswith("\n")))
    try:
        if kind == "toml":
            from diagnose._compat import tomllib
            obj = tomllib.loads(text)
        elif kind == "json":
            try:
                obj = json.loads(text, strict=False)
            except ValueError:
                obj, note = _salvage_json(text)
                if obj is None:
                    raise
                info.errors.append(note)
        else:
            import yaml   # PyYAML: safe_load builds plain data only, never objects
            obj = yaml.safe_load(text)
            if _expanded(obj) > MAX_VALUES:
                raise InputError(f"{inp.display}: YAML whose aliases (*name) make it more than {MAX_VALUES:,} values "
                                 f"(not read)")
    except InputError:
        raise
    except (ValueError, Exception) as e:   # yaml.YAMLError has no common import-free base
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        where = f":{line + 1}" if line is not None else (f":{e.lineno}" if hasattr(e, "lineno") else "")
        raise InputError(f"{inp.display}{where}: not valid {kind.upper()} ({str(e).splitlines()[0][:120]})") from None
    items = obj if isinstance(obj, list) else [obj]
    if items and all(isinstance(x, dict) and ("iter" in x or "iterLatencyMS" in x or "Active Request Count" in x) for x in items):
        info.kind = "trtllm-iteration-stats"
        from ..engines.trtllm.lines import add_iteration     # TensorRT-LLM's line table: only for its files
        lines = _item_lines(text)
        for i, it in enumerate(items):
            add_iteration(it, ev, inp.display, lines[i] if i < len(lines) else 1)
        info.recognised_lines = info.lines
        info.engine = "trtllm"
        return info
    from ...targets import PROFILES, KEYS as TARGET_KEYS, TargetsError, target_tables
    if isinstance(obj, dict) and (set(obj) & {*PROFILES, *TARGET_KEYS} or set(obj) == {"targets"} and isinstance(obj["targets"], dict)):
        try:                          # SLO targets given as an input file: bare or under [targets]
            ev.targets.update(target_tables(obj))
        except TargetsError as e:
            raise InputError(f"{inp.display}: not valid targets: {e}") from None
        info.kind = "targets"
        info.recognised_lines = info.lines
        return info
    if isinstance(obj, dict):
        n = _config(obj, text, inp.display, ev)
        if n:
            info.kind = "config"
            info.engine = "trtllm" if _is_trt(obj) else None
            info.recognised_lines = n
            info.unrecognised_lines = max(0, info.lines - n)
            return info
    raise InputError(f"{inp.display}: {kind.upper()} file with no known engine settings or iteration stats")


# The most values a YAML document may hold once its aliases are expanded: an alias is a reference
# to a shared node, so nine nested levels of nine aliases (500 bytes) are 9**9 values to any walk
# of the document (a "billion laughs").
MAX_VALUES = 100_000


def _expanded(obj) -> int:
    """How many values `obj` holds with every shared (aliased) node counted each time it is used;
    stops counting past MAX_VALUES. Each node is sized once."""
    sizes: dict[int, int] = {}

    def size(x) -> int:
        if not isinstance(x, (dict, list)):
            return 1
        known = sizes.get(id(x))
        if known is not None:
            return known
        sizes[id(x)] = MAX_VALUES + 1        # a node that holds itself: as good as endless
        n = 1
        for v in (x.values() if isinstance(x, dict) else x):
            n += size(v)
            if n > MAX_VALUES:
                break
        sizes[id(x)] = n
        return n
    try:
        return size(obj)
    except RecursionError:
        return MAX_VALUES + 1


NUM_PAIR = lazy(r'"(\w[\w ]*)"\s*:\s*(-?[\d.]+(?:[eE][-+]?\d+)?|"[^"\n]*")')


def _salvage_json(text: str):
    """A pasted, truncated or elided (`...`) stats array: keep every object that decodes, and
    from a damaged one the `"key": value` pairs that can still be read."""
    dec = json.JSONDecoder(strict=False)
    start = text.find("[")
    if start < 0:
        return None, ""
    items, pos, damaged = [], start + 1, 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] != "{":
            break
        try:
            obj, pos = dec.raw_decode(text, pos)
            items.append(obj)
        except ValueError:
            nxt = text.find("\n    {", pos + 1)
            chunk = text[pos: nxt if nxt > 0 else len(text)]
            pairs = {k: json.loads(v) if v.startswith('"') else float(v) for k, v in NUM_PAIR.findall(chunk)}
            if pairs:
                items.append(pairs)
            damaged += 1
            if nxt < 0:
                break
            pos = nxt
    if not items:
        return None, ""
    return items, f"damaged or truncated JSON: {len(items)} object(s) read, {damaged} only partly"


def _is_trt(obj: dict) -> bool:
    flat = _flatten(obj)
    return any(h in k for k in flat for h in TRT_HINTS)


def _flatten(obj, prefix=""):
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict):
                out.update(_flatten(v, key + "."))
            out[key] = v
    return out


SKU = lazy(r"thor|spark|gb10|[hb]\d00|a100|a10g?|l40s?|l4|rtx|jetson|orin", re.I)


def _config(obj: dict, text: str, source: str, ev: Evidence) -> int:
    """Map known keys to facts; returns how many settings were recognised."""
    from ..engines.trtllm.lines import CONFIG_KEYS
    flat = _flatten(obj)
    n = 0
    # A per-SKU profile names its GPU in the section key: `jetson_thor:`, `rtx_4000_pro:`.
    skus = [k for k, v in obj.items() if isinstance(v, dict) and SKU.search(str(k))]
    if len(skus) == 1:
        line = _line_of_key(text, skus[0])
        ev.set_fact("gpu_name", skus[0].replace("_", " ").title(), source, line, f"{skus[0]}: (SKU profile section)")
    for key, v in flat.items():
        parts = key.split(".")
        name = CONFIG_KEYS.get(key) or CONFIG_KEYS.get(".".join(parts[-2:])) or CONFIG_KEYS.get(parts[-1])
        line = _line_of_key(text, parts[-1])
        cite = text.splitlines()[line - 1].strip() if line else key
        if parts[-1] == "cuda_graph_config":
            ev.set_fact("cuda_graphs", v is not None, source, line, cite)
            n += 1
        elif parts[-1] == "use_cuda_graph":
            ev.set_fact("cuda_graphs", bool(v), source, line, cite)
            n += 1
        elif name and not isinstance(v, dict):
            if name == "kv_cache_dtype" and isinstance(v, str):
                v = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}.get(v.lower(), v.lower())
            if name == "scheduler_policy" and isinstance(v, str):
                v = v.upper()
            ev.set_fact(name, v, source, line, cite)
            n += 1
        ev.settings.setdefault("config_file", {})[key] = v if not isinstance(v, dict) else "{…}"
    return n


def _line_of_key(text: str, key: str) -> int | None:
    m = re.search(rf"(?m)^\s*[\"']?{re.escape(key)}[\"']?\s*:", text)
    return text.count("\n", 0, m.start()) + 1 if m else None


def _item_lines(text: str) -> list[int]:
    """The line where each top-level object of a JSON array starts (none for a one-line array:
    line 1), counted in one pass."""
    if text.count("\n") < 2:
        return []
    out, line, at = [], 1, 0
    for m in re.finditer(r"(?m)^\s{0,4}\{", text):
        line += text.count("\n", at, m.start())
        at = m.start()
        out.append(line)
    return out
