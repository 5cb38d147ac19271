"""The launch command as the log shows it, and the same command with fixes applied."""
from __future__ import annotations

import json
import shlex

# Launch arguments that are not serving flags, or must not be echoed back.
SKIP = {"model", "model_tag", "api_key", "subparser", "dispatch_function", "func", "ssl_keyfile",
        "ssl_certfile", "hf_token"}
# When only the config dump is known, these facts become flags if they differ from defaults.
FROM_FACTS = {"tensor_parallel_size": 1, "pipeline_parallel_size": 1, "data_parallel_size": 1,
              "enforce_eager": False, "kv_cache_dtype": "auto", "quantization": None}


def base_command(settings: dict, facts: dict) -> list[tuple[str, object]] | None:
    """Ordered (flag, value) pairs; value True means a bare flag. None when unknown."""
    model = facts.get("model")
    if not model:
        return None
    args = settings.get("launch_args")
    pairs: list[tuple[str, object]] = [("__model__", model)]
    if args:
        for k, v in args.items():
            if k in SKIP or v is None:
                continue
            if k.startswith("--"):
                k = k[2:]
            pairs.append(("--" + k.replace("_", "-"), v))
    else:
        for k, default in FROM_FACTS.items():
            v = facts.get(k)
            if v is not None and v != default:
                pairs.append(("--" + k.replace("_", "-"), v))
    return pairs


def apply_fix(base: list, fix) -> str:
    remove = set(fix.remove)
    out, seen = [], set()
    for flag, v in base:
        if flag in remove:
            continue
        if flag in fix.set:
            v = fix.set[flag]
            seen.add(flag)
        out.append((flag, v))
    for flag, v in fix.set.items():
        if flag not in seen:
            out.append((flag, v))
    return render(out, fix.engine)


def render(pairs, engine: str) -> str:
    head = {"vllm": "vllm serve", "sglang": "python -m sglang.launch_server --model-path",
            "trtllm": "trtllm-serve"}.get(engine, "vllm serve")
    parts = [head]
    for flag, v in pairs:
        if flag == "__model__":
            parts.append(shlex.quote(str(v)))
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
        else:
            parts.append(f"{flag} {shlex.quote(str(v))}")
    return " \\\n  ".join(parts) if len(parts) > 3 else " ".join(parts)
