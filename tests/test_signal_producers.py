"""Signal producers declare what they make; the catalogue rules are checked against is written from
those declarations (scripts/signal-catalogue), and no producer writes a signal it did not declare."""
from __future__ import annotations

import ast
import re
import runpy
import subprocess
import sys

from conftest import ROOT

from diagnose.ruleset.rules import load_rules, signal_catalogue
from diagnose.signals import producers


def _names_rules_use() -> set[str]:
    from diagnose.ruleset.expr import FUNCS, SPECIAL
    from diagnose.ruleset.sustained import COLUMNS, NAMES
    used: set[str] = set()
    for r in load_rules():
        trees = [r.condition, *(t for _, t, _ in r.lets), *r.templates.values(), *(t for t, _ in r.severity_if),
                 *(t for t, _ in r.confidence_if)]
        if r.sustained is not None:
            trees.append(r.sustained["when"])
        names = {n.id for t in trees for n in ast.walk(t) if isinstance(n, ast.Name)} | set(r.requires)
        names -= set(r.params) | {name for name, _, _ in r.lets}     # a rule's own names are no signals
        if r.sustained is not None:
            names -= set(NAMES) | set(COLUMNS)      # a sample's columns are judged per sample
        used |= names
    return used - set(FUNCS) - set(SPECIAL)


def test_every_signal_a_rule_names_has_a_producer():
    declared = producers.catalogue()
    used = _names_rules_use()
    assert used, "the rules name no signal: the walk above is broken"
    assert not sorted(used - set(declared)), sorted(used - set(declared))


def test_the_signal_catalogue_is_what_the_declarations_say():
    """diagnose/data/signals.toml is generated, not edited: a new declaration without a rerun of
    scripts/signal-catalogue fails here."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "signal-catalogue"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    cat = signal_catalogue()
    assert cat["all_idle"] == {"unit": "true/false", "source": "engine log / metrics"}
    assert cat["gpu_util_mean"]["source"] == "GPU samples" and cat["ttft_p95_s"]["unit"] == "s"
    assert cat["tensor_parallel_size"]["source"].startswith("fact")


def test_no_producer_writes_a_signal_it_does_not_declare():
    """Every fixture diagnosed (and the inputs only a live Prometheus, a targets file or a sweep
    give) with each producer's writes compared with its declaration; and every signal a run ends
    with is in the catalogue."""
    collect = runpy.run_path(str(ROOT / "scripts" / "signal-catalogue"))["collect"]
    producers.FOUND.clear()
    producers.CHECK = "collect"
    try:
        names = {n for n in collect(skip=("real", "samples")) if re.fullmatch(r"[a-z_][a-z0-9_]*", n)}
    finally:
        producers.CHECK = False
    assert not producers.FOUND, producers.FOUND
    assert len(names) > 250, "the fixtures gave few signals: collect() is broken"
    missing = sorted(names - set(signal_catalogue()))
    assert not missing, f"not declared by any producer: {missing}"


def test_the_check_catches_an_undeclared_write():
    from diagnose.signals.derive import Signals

    @producers.produces("declared_one")
    def sloppy(ev, s):
        s.values["declared_one"] = 1.0
        s.values["not_declared"] = 2.0

    try:
        producers.CHECK = True
        s = Signals()
        try:
            sloppy(None, s)
        except producers.Undeclared as e:
            assert "not_declared" in str(e) and "declared_one" not in str(e)
        else:
            raise AssertionError("an undeclared write passed the check")
    finally:
        producers.CHECK = False
        producers.PRODUCERS[:] = [p for p in producers.PRODUCERS if not p.name.endswith("sloppy")]


def test_signal_producers_are_of_a_size_one_can_read():
    long = []
    for path in sorted((ROOT / "diagnose" / "signals").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 100:
                long.append(f"{path.name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not long, long
