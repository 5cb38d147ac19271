"""SQLFluff-style: every rule's own [[cases]] become tests, so `pytest -k kv-cache-pressure`
runs one rule. A firing case must fire (with the expected flags); a quiet case must be
*evaluated* and stay silent — a quiet result from a missing input proves nothing."""
from __future__ import annotations

import pytest

from conftest import ROOT, analyze
from diagnose.ruleset.rules import load_rules

RULES = load_rules()
CASES = [(r.id, i, c) for r in RULES for i, c in enumerate(r.cases)]


def test_every_rule_has_a_firing_and_a_quiet_case():
    for r in RULES:
        kinds = {c.get("expect") for c in r.cases}
        assert {"fires", "quiet"} <= kinds, f"{r.id}: needs a firing and a quiet case"
        for c in r.cases:
            assert (ROOT / c["input"]).exists(), f"{r.id}: missing fixture {c['input']}"


@pytest.mark.parametrize("rule_id,n,case", CASES, ids=[f"{rid}-{c['expect']}-{n}" for rid, n, c in CASES])
def test_rule_case(rule_id, n, case):
    data = analyze(ROOT / case["input"])
    fired = {f["id"]: f for f in data["findings"]}
    if case["expect"] == "fires":
        assert rule_id in fired, f"{rule_id} did not fire; not applicable: {data['not_applicable']}"
        flags = fired[rule_id]["fix"]["flags"]
        for flag, value in case.get("set", {}).items():
            assert str(flags["set"].get(flag)) == str(value), f"{flag}: {flags}"
        for flag in case.get("remove", []):
            assert flag in flags["remove"], flags
        for ev in fired[rule_id]["evidence"]:
            assert ("source" in ev and ev["line"] >= 1 and ev["text"]) or ("metric" in ev and "value" in ev)
    elif case["expect"] == "not_applicable":     # the input lacks what the rule needs: said, not passed
        assert rule_id not in fired, f"{rule_id} fired: {fired[rule_id]['title']}"
        assert rule_id in [na["id"] for na in data["not_applicable"]], f"{rule_id} was evaluated: {data['passed']}"
    else:
        assert rule_id not in fired, f"{rule_id} fired: {fired[rule_id]['title']}"
        assert rule_id in data["passed"], (
            f"{rule_id} was not evaluated: "
            + str([na for na in data["not_applicable"] if na["id"] == rule_id]))
