"""One fact catalogue (diagnose/data/facts.toml): every fact a parser sets by name is declared
there, once, and the lists the layers use come from it (the deployment's keys, the numbers checked,
the settings a baseline compares, the Deployment table). tests/test_prefilter.py checks the facts
every real log and fixture actually gives against it."""
from __future__ import annotations

import re

from conftest import ROOT, run_one, FIXTURES


def test_every_fact_a_parser_names_is_declared_once():
    from diagnose.evidence.facts import CATALOGUE
    named = set()
    for p in (ROOT / "diagnose").rglob("*.py"):
        named |= set(re.findall(r"set_fact\(\"([a-z_0-9]+)\"", p.read_text(encoding="utf-8")))
    assert named - set(CATALOGUE) == set(), sorted(named - set(CATALOGUE))
    text = (ROOT / "diagnose" / "data" / "facts.toml").read_text(encoding="utf-8")
    for name in CATALOGUE:
        assert text.count(f"[facts.{name}]") == 1, name
    for name, f in CATALOGUE.items():
        assert f["type"] in ("int", "float", "bool", "text") and f["report"] in ("always", "known", "signal", "internal", "derived"), name


def test_the_layers_lists_come_from_the_catalogue():
    from diagnose.evidence import facts, finish, model
    from diagnose.findings import compare
    from diagnose.reports import common
    assert model.FACT_NAMES is facts.FACT_NAMES and model.EXTRA_FACTS is facts.EXTRA_FACTS
    assert finish.INT_FACTS is facts.INT_FACTS and finish.FLOAT_FACTS is facts.FLOAT_FACTS
    assert compare.CONFIG_KEYS is facts.CONFIG_KEYS and common.SUMMARY_FACTS is facts.SUMMARY_FACTS
    assert all(label for _, label in facts.SUMMARY_FACTS)


def test_what_a_user_sees_follows_the_catalogue():
    """The JSON deployment holds every `always` fact (null when unknown) and no `signal` one; a
    fact declared a number with a damaged value is dropped, not passed on."""
    from diagnose.evidence.facts import CATALOGUE
    d = run_one(FIXTURES / "seed003" / "realtime.log")["deployment"]
    for name, f in CATALOGUE.items():
        if f["report"] == "always":
            assert name in d, name
        if f["report"] in ("signal", "internal"):
            assert name not in d, name
