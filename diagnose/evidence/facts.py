"""The fact catalogue (diagnose/data/facts.toml): each fact declared once — type, where it is
reported, its label — and every list the other layers use derived from it."""
from __future__ import annotations

from pathlib import Path

from ..tomlcache import read_toml

_DOC = read_toml(Path(__file__).resolve().parent.parent / "data" / "facts.toml")
CATALOGUE: dict[str, dict] = _DOC["facts"]


def _names(report: str) -> tuple:
    return tuple(n for n, f in CATALOGUE.items() if f["report"] == report)


# `deployment` in JSON schema v1: these always (null when unknown), in this order ...
FACT_NAMES = _names("always")
# ... these when known (rules use them too)
EXTRA_FACTS = _names("known")
# read by rules and signals, not reported
SIGNAL_FACTS = _names("signal")
# computed by the signals layer, reported under `deployment` when known
DERIVED_DEPLOYMENT = _names("derived")
# numbers: a value that is not one is dropped (evidence/finish.py)
INT_FACTS = frozenset(n for n, f in CATALOGUE.items() if f["type"] == "int" and f["report"] != "derived")
FLOAT_FACTS = frozenset(n for n, f in CATALOGUE.items() if f["type"] == "float" and f["report"] != "derived")
# the settings a --baseline compares (findings/compare.py)
CONFIG_KEYS = tuple(n for n, f in CATALOGUE.items() if f.get("compare"))
# the Deployment table: (name, label), in its order
SUMMARY_FACTS = [(n, CATALOGUE[n]["label"]) for n in _DOC["summary"]]
