"""SLO targets, as operators write them: per GPU model (SKU) and per deployment, latency and
throughput KPIs. One schema wherever targets are given — a `--targets FILE` (TOML or YAML), a
targets file among the inputs, or `.diagnose.toml` — in either form, bare or under `[targets]`:

    [default]                     # or [targets.default]: applies when nothing more specific matches
    ttft_p50_ms = 500
    ttft_p99_ms = 2000
    tpot_ms = 50                  # inter-token latency
    output_tps = 60               # output tokens/s per request
    max_sessions = 20
    max_queue_depth = 10
    gpu_util_min_pct = 80

    [deployments."meta-llama/Llama-3.1-8B-Instruct"]   # by model name (substring)
    ttft_p50_ms = 300

    [skus.jetson_thor]            # by GPU name (words of the key, e.g. "jetson thor")
    ttft_p50_ms = 500

`target_tables` reads both forms, for every one of those places.
"""
from __future__ import annotations

import re

from diagnose import _compat

KEYS = {"ttft_p50_ms": ("target_ttft_p50_s", 1e-3), "ttft_p99_ms": ("target_ttft_p99_s", 1e-3),
        "tpot_ms": ("target_tpot_s", 1e-3), "itl_ms": ("target_tpot_s", 1e-3),
        "output_tps": ("target_output_tps", 1), "max_sessions": ("max_sessions", 1),
        "max_queue_depth": ("max_queue_depth", 1), "gpu_util_min_pct": ("target_gpu_util_min", 1)}


class TargetsError(ValueError):
    def __init__(self, msg: str, key: str | None = None):
        super().__init__(msg)
        self.key = key          # the key at fault, for a `file:line` where the caller has the text


WRAPPER = "targets"             # [targets.default], as .diagnose.toml has always written it
PROFILES = ("default", "skus", "deployments")


def is_target_key(key: str) -> bool:
    """A top-level key that belongs to the targets (bare form, or the [targets] table itself)."""
    return key == WRAPPER or key in PROFILES or key in KEYS


def target_tables(d: dict) -> dict:
    """The targets of `d` in the bare form ([default], [skus.GPU], [deployments."MODEL"], or
    target keys at the top level), whichever form it was written in: `[targets.…]` is unwrapped.
    Both forms at once are refused (which one is meant?); so is anything check_targets refuses."""
    if WRAPPER in d:
        inner = d[WRAPPER]
        if not isinstance(inner, dict):
            raise TargetsError("`targets` must be a table: [targets.default]", WRAPPER)
        bare = [k for k in d if k != WRAPPER]
        if bare:
            raise TargetsError(f"targets given twice, under [targets] and as `{bare[0]}` at the top level: "
                               f"write them one way ([targets.default] or [default])", bare[0])
        d = inner
    err = check_targets(d)
    if err:
        raise TargetsError(err[1], err[0])
    return d


def load_targets(path: str) -> dict:
    try:
        if path.endswith((".yaml", ".yml")):
            import yaml
            with open(path, encoding="utf-8") as fh:
                d = yaml.safe_load(fh) or {}
        else:
            with open(path, "rb") as fh:
                d = _compat.tomllib.load(fh)
    except FileNotFoundError:
        raise TargetsError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TargetsError(f"{path}: is a directory, not a targets file") from None
    except Exception as e:     # TOML or YAML syntax
        mark = getattr(e, "problem_mark", None)     # YAML: where the parser stopped (0-based)
        toml_at = re.search(r" \(at line (\d+), column \d+\)", str(e))
        where = f"{path}:{mark.line + 1}" if mark is not None else f"{path}:{toml_at.group(1)}" if toml_at else path
        msg = str(e).replace(toml_at.group(0), "") if toml_at else str(e)
        msg = msg.splitlines()[0][:160] if msg.strip() else type(e).__name__
        raise TargetsError(f"{where}: not valid targets ({msg})") from None
    if not isinstance(d, dict):
        raise TargetsError(f"{path}: expected a table of targets")
    try:
        return target_tables(d)
    except TargetsError as e:
        raise TargetsError(f"{path}: {e}", e.key) from None


def check_targets(d: dict) -> tuple[str, str] | None:
    """(key, what is wrong) for an unknown key or a value that is not a number, else None."""
    def profile(where: str, t) -> tuple[str, str] | None:
        if not isinstance(t, dict):
            return where, f"{where} must be a table of targets, not {t!r}"
        for k, v in t.items():
            if k not in KEYS:
                return k, f"{where}: unknown target `{k}` (known: {', '.join(KEYS)})"
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                return k, f"{where}: `{k}` must be a number ≥ 0, not {v!r}"
        return None

    for key, v in d.items():
        if key == "default":
            err = profile("[default]", v)
        elif key in ("skus", "deployments"):
            if not isinstance(v, dict):
                return key, f"[{key}] must be a table of profiles, e.g. [{key}.NAME]"
            err = next((e for name, t in v.items() if (e := profile(f'[{key}."{name}"]', t))), None)
        elif key in KEYS:                 # the flat form: target keys at the top level
            err = profile("top level", {key: v})
        else:
            return key, (f"unknown key `{key}` (expected [default], [skus.GPU], [deployments.\"MODEL\"] "
                         f"or target keys: {', '.join(KEYS)}; each may also be under [targets])")
        if err:
            return err
    return None


def select(targets: dict, values: dict) -> dict:
    """default < matching SKU < matching deployment (model)."""
    chosen = dict(targets.get("default") or {k: v for k, v in targets.items() if k in KEYS})
    gpu = " ".join(str(x) for x in (values.get("gpu_name"), values.get("gpu_board")) if x).lower()
    for sku, t in (targets.get("skus") or {}).items():
        words = str(sku).lower().replace("_", " ").split()
        if gpu and all(w in gpu for w in words):
            chosen.update(t)
    model = str(values.get("model") or "").lower()
    for name, t in (targets.get("deployments") or {}).items():
        if model and str(name).lower() in model:
            chosen.update(t)
    return chosen


def apply_targets(values: dict, targets: dict) -> None:
    for k, v in select(targets, values).items():
        if k in KEYS and isinstance(v, (int, float)):
            name, scale = KEYS[k]
            if name in ("max_sessions", "max_queue_depth") and values.get(name) is not None:
                continue      # the deployment's own configured limit wins
            values[name] = v * scale
    values["targets_given"] = True
