"""The project file `.diagnose.toml` (working directory) or `--config FILE`:

    [[ignore]]
    id = "access-log-noise"
    reason = "probes are scraped on purpose"
    expires = 2026-12-31            # optional; after this date the rule reports again

    [rules.client-bound]
    severity = "low"                # override the rule's severity
    params = { kv_low_pct = 30 }    # override the rule's thresholds (see `diagnose rules ID`)

    [targets.default]               # SLO targets (read by the slo-* rules), as in a --targets
    ttft_p50_ms = 500               # file: [default] etc. bare, or under [targets] (targets.py)
"""
from __future__ import annotations

import datetime as dt
import math
import os
import re
from diagnose import _compat
from dataclasses import dataclass, field


class ConfigError(ValueError):
    """A config file that cannot be used: `file:line: what`."""


@dataclass
class Config:
    path: str | None = None
    ignores: list = field(default_factory=list)        # [{"id", "reason", "expires", "status"}]
    rules: dict = field(default_factory=dict)          # id → {"severity", "params"}
    targets: dict = field(default_factory=dict)
    text: str = field(default="", repr=False)          # the file's text, for line numbers

    def active_ignores(self) -> set[str]:
        return {i["id"] for i in self.ignores if i["status"] == "active"}


def load_config(path: str | None, today: dt.date | None = None) -> Config:
    if path is None:
        path = ".diagnose.toml" if os.path.isfile(".diagnose.toml") else None
        if path is None:
            return Config()
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        text = raw.decode("utf-8")
        d = _compat.tomllib.loads(text)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except _compat.tomllib.TOMLDecodeError as e:
        m = re.search(r" \(at line (\d+), column \d+\)", str(e))
        where = f"{path}:{m.group(1)}" if m else path
        raise ConfigError(f"{where}: invalid TOML: {str(e).replace(m.group(0), '') if m else e}") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None
    _check(d, path, text)
    today = today or dt.date.today()
    from .targets import is_target_key, target_tables
    cfg = Config(path=path, targets=target_tables({k: v for k, v in d.items() if is_target_key(k)}), text=text)
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


from .values import SEVERITIES  # noqa: E402


def _check(d: dict, path: str, text: str) -> None:
    """Unknown keys and wrong value types: one line naming the file (and the line of the key)."""
    def fail(key: str, what: str, table: str | None = None):
        raise ConfigError(f"{_where(path, text, key, table)}: {what}")

    from .targets import TargetsError, is_target_key, target_tables
    for key in d:
        if key not in ("ignore", "rules") and not is_target_key(key):
            fail(key, f"unknown key `{key}` (expected [[ignore]], [rules.RULE_ID], or targets: [targets.default] "
                      f"or [default], [skus.GPU], [deployments.\"MODEL\"])")
    ignores = d.get("ignore", [])
    if not isinstance(ignores, list):
        fail("ignore", "`ignore` must be a list of [[ignore]] tables or of rule ids")
    for item in ignores:
        if isinstance(item, str):
            continue
        if not isinstance(item, dict):
            fail("ignore", f"each [[ignore]] must be a table or a rule id, not {item!r}")
        for k, v in item.items():
            if k not in ("id", "reason", "expires"):
                fail(k, f"[[ignore]]: unknown key `{k}` (expected id, reason, expires)")
            if k in ("id", "reason") and not isinstance(v, str):
                fail(k, f"[[ignore]]: `{k}` must be a string, not {v!r}")
            if k == "expires" and not isinstance(v, (dt.date, str)):
                fail(k, f"[[ignore]]: `expires` must be a date (YYYY-MM-DD), not {v!r}")
    rules = d.get("rules", {})
    if not isinstance(rules, dict):
        fail("rules", "`rules` must be tables: [rules.RULE_ID]")
    for rid, spec in rules.items():
        if not isinstance(spec, dict):
            fail(rid, f"[rules.{rid}] must be a table")
        for k, v in spec.items():
            if k not in ("severity", "params"):
                fail(k, f"[rules.{rid}]: unknown key `{k}` (expected severity, params)", f"rules.{rid}")
        sev = spec.get("severity")
        if sev is not None and sev not in SEVERITIES:
            fail("severity", f"[rules.{rid}]: severity must be one of {', '.join(SEVERITIES)}, not {sev!r}", f"rules.{rid}")
        params = spec.get("params", {})
        if not isinstance(params, dict):
            fail("params", f"[rules.{rid}]: params must be a table, e.g. params = {{ name = 1.5 }}", f"rules.{rid}")
        for k, v in params.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
                fail(k, f"[rules.{rid}]: params.{k} must be a number, not {v!r}", f"rules.{rid}")
    try:
        target_tables({k: v for k, v in d.items() if is_target_key(k)})
    except TargetsError as e:
        # a message about the [targets] table itself names it already; one about a profile gets the prefix
        fail(e.key, str(e) if str(e).startswith(("targets", "`targets`")) else f"targets: {e}")


def _where(path: str, text: str, key: str, table: str | None = None) -> str:
    """`path:line` of `key =` or `[key…` (after the header of `table`, when given), else `path`."""
    h = re.search(rf"(?m)^[ \t]*\[[ \t]*{re.escape(table)}[ \t]*\]", text) if table else None
    pat = rf"(?m)^[ \t]*(?:\[\[?[ \t]*(?:[\w-]+\.)?)?[\"']?{re.escape(str(key))}[\"']?[ \t]*[=\].]"
    m = (re.compile(pat).search(text, h.end() if h else 0) or re.search(rf"[{{,][ \t]*{re.escape(str(key))}[ \t]*=", text)
         or re.search(rf"[\"']{re.escape(str(key))}[\"']", text))
    return f"{path}:{text.count(chr(10), 0, m.start()) + 1}" if m else path


def check_rule_ids(cfg: Config, rules: list, retired=()) -> str | None:
    """A rule id or a threshold name the rules do not have (a typo would silently do nothing)."""
    if not cfg.path:
        return None
    by_id = {r.id: r for r in rules}
    for i in cfg.ignores:
        if i["id"] not in by_id and i["id"] not in retired:
            return f"{_where(cfg.path, cfg.text, i['id'])}: [[ignore]]: unknown rule id `{i['id']}` (see `diagnose rules`)"
    for rid, spec in cfg.rules.items():
        if rid not in by_id:
            if rid in retired:
                continue
            return f"{_where(cfg.path, cfg.text, rid)}: [rules.{rid}]: unknown rule id (see `diagnose rules`)"
        for k in spec["params"]:
            if k not in by_id[rid].params:
                known = ", ".join(by_id[rid].params) or "none"
                return (f"{_where(cfg.path, cfg.text, k, f'rules.{rid}')}: [rules.{rid}]: unknown param `{k}` "
                        f"(this rule's params: {known})")
    return None
