"""The project file `.diagnose.toml` (working directory) or `--config FILE`:

    [[ignore]]
    id = "access-log-noise"
    reason = "probes are scraped on purpose"
    expires = 2026-12-31            # optional; after this date the rule reports again

    [rules.client-bound]
    severity = "low"                # override the rule's severity
    params = { kv_low_pct = 30 }    # override the rule's thresholds (see `diagnose rules ID`)

    [targets]                       # SLO targets (read by the slo-* rules)
"""
from __future__ import annotations

import datetime as dt
import os
import tomllib
from dataclasses import dataclass, field


class ConfigError(ValueError):
    """A config file that cannot be used: `file:line: what`."""


@dataclass
class Config:
    path: str | None = None
    ignores: list = field(default_factory=list)        # [{"id", "reason", "expires", "status"}]
    rules: dict = field(default_factory=dict)          # id → {"severity", "params"}
    targets: dict = field(default_factory=dict)

    def active_ignores(self) -> set[str]:
        return {i["id"] for i in self.ignores if i["status"] == "active"}


def load_config(path: str | None, today: dt.date | None = None) -> Config:
    if path is None:
        path = ".diagnose.toml" if os.path.isfile(".diagnose.toml") else None
        if path is None:
            return Config()
    try:
        with open(path, "rb") as fh:
            d = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None
    today = today or dt.date.today()
    cfg = Config(path=path, targets=d.get("targets", {}))
    raw_ignores = d.get("ignore", [])
    if isinstance(raw_ignores, list) and all(isinstance(x, str) for x in raw_ignores):
        raw_ignores = [{"id": x} for x in raw_ignores]
    for item in raw_ignores:
        if not isinstance(item, dict) or "id" not in item:
            raise ConfigError(f"{path}: each [[ignore]] needs an `id`")
        exp = item.get("expires")
        if isinstance(exp, str):
            try:
                exp = dt.date.fromisoformat(exp)
            except ValueError:
                raise ConfigError(f"{path}: ignore `{item['id']}`: expires must be a date (YYYY-MM-DD)") from None
        if isinstance(exp, dt.datetime):
            exp = exp.date()
        status = "expired" if exp is not None and exp < today else "active"
        cfg.ignores.append({"id": item["id"], "reason": item.get("reason", ""),
                            "expires": exp.isoformat() if exp else None, "status": status})
    for rid, spec in (d.get("rules") or {}).items():
        if not isinstance(spec, dict):
            raise ConfigError(f"{path}: [rules.{rid}] must be a table")
        cfg.rules[rid] = {"severity": spec.get("severity"), "params": dict(spec.get("params") or {})}
    return cfg
