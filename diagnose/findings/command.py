"""The launch command as the log shows it, and the same command with fixes applied — in each
engine's own flag names. TensorRT-LLM settings that live in the YAML options file (dotted keys,
e.g. `kv_cache_config.dtype`) are rendered as the YAML to change instead."""
from __future__ import annotations

import json
import shlex

from ..sources.engines import ENGINES

# Launch arguments that are not serving flags, or must not be echoed back.
SKIP = {"model", "model_tag", "model_path", "api_key", "subparser", "dispatch_function", "func",
        "ssl_keyfile", "ssl_certfile", "hf_token"}
# Each engine's command, flag spellings that mean the same thing (normalized so a fix replaces
# rather than duplicates), and the facts that become flags when only a config dump is known (when
# they differ from the default): declared in its folder, sources/engines/<name>/.
HEADS = {e.name: e.command for e in ENGINES.values()}
ALIASES = {e.name: dict(e.aliases) for e in ENGINES.values()}
FROM_FACTS = {e.name: list(e.flags_from_facts) for e in ENGINES.values()}


def base_command(settings: dict, facts: dict, engine: str = "vllm") -> list[tuple[str, object]] | None:
    """Ordered (flag, value) pairs; value True means a bare flag. None when unknown."""
    # Without a model name (Triton logs, excerpts) the command still shows the flags to change.
    model = facts.get("model") or "MODEL"
    engine = engine if engine in HEADS else "vllm"
    aliases = ALIASES[engine]
    args = settings.get("launch_args")
    pairs: list[tuple[str, object]] = [("__model__", model)]
    if args:
        for k, v in args.items():
            if k in SKIP or v is None:
                continue
            flag = k if k.startswith("-") else "--" + k.replace("_", ENGINES[engine].flag_sep)
            pairs.append((aliases.get(flag, flag), v))
    else:
        for fact, flag, default in FROM_FACTS[engine]:
            v = facts.get(fact)
            if v is not None and v != default:
                pairs.append((flag, v))
    return pairs


def apply_fix(base: list, fix) -> str:
    remove = set(fix.remove)
    cli = {k: v for k, v in fix.set.items() if k.startswith("-")}
    yaml_keys = {k: v for k, v in fix.set.items() if not k.startswith("-")}
    out, seen = [], set()
    for flag, v in base:
        if flag in remove:
            continue
        if flag in cli:
            v = cli[flag]
            seen.add(flag)
        out.append((flag, v))
    for flag, v in cli.items():
        if flag not in seen:
            out.append((flag, v))
    text = render(out, fix.engine)
    if yaml_keys:
        text += "\n# and in the --extra_llm_api_options / --config YAML:\n" + render_yaml(yaml_keys)
    return text


def render(pairs, engine: str) -> str:
    parts = [HEADS.get(engine, "vllm serve")]
    for flag, v in pairs:
        if flag == "__model__":
            e = ENGINES.get(engine)
            parts.append(f"{e.model_flag} {shlex.quote(str(v))}" if e and e.model_flag else shlex.quote(str(v)))
            continue
        if v is True:
            parts.append(flag)
        elif v is False:
            # BooleanOptionalAction flags (--no-enable-prefix-caching); plain store_true flags
            # set to False are just the default and need no mention.
            if flag.startswith("--enable-"):
                parts.append("--no-" + flag[2:])
        elif isinstance(v, (dict, list)):
            parts.append(f"{flag} {shlex.quote(json.dumps(v))}")
        elif isinstance(v, str) and (cfg := _config_repr(v)) is not None:
            parts.append(f"{flag} {shlex.quote(json.dumps(cfg))}")
        else:
            parts.append(f"{flag} {shlex.quote(str(v))}")
    return " \\\n  ".join(parts) if len(parts) > 3 else " ".join(parts)


# Fields a config object's repr carries that are per process, not settings (a fresh one each start).
_PER_PROCESS = frozenset({"engine_id"})


def _config_repr(text: str) -> dict | None:
    """vLLM logs config flags as their Python repr (`KVTransferConfig(kv_connector='Nixl…', kv_role=
    'kv_both', …)`), which the flag does not accept: the JSON it does, with unset fields left out."""
    if not (text.endswith(")") and "Config(" in text[:60]):
        return None
    import ast
    try:
        node = ast.parse(text, mode="eval").body
        if not isinstance(node, ast.Call) or node.args:
            return None
        out = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None
    return {k: v for k, v in out.items() if v is not None and k not in _PER_PROCESS}


def render_yaml(keys: dict) -> str:
    """{'kv_cache_config.dtype': 'fp8', 'enable_chunked_prefill': 'true'} → nested YAML text."""
    tree: dict = {}
    for dotted, v in keys.items():
        node = tree
        *path, leaf = dotted.split(".")
        for p in path:
            node = node.setdefault(p, {})
        node[leaf] = v

    def emit(node, indent=0):
        lines = []
        for k, v in node.items():
            if isinstance(v, dict):
                lines.append(" " * indent + f"{k}:")
                lines += emit(v, indent + 2)
            else:
                lines.append(" " * indent + f"{k}: {v if v is not True else 'true'}")
        return lines
    return "\n".join(emit(tree))
