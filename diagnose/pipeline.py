"""One way through: sources → evidence → signals → rules → findings → reports."""
from __future__ import annotations

from dataclasses import dataclass

from . import __version__
from .engine.rules import Rule, load_rules
from .engine.runner import run_rules
from .evidence.model import FACT_NAMES, EXTRA_FACTS, Evidence
from .findings.model import Result
from .findings.reconcile import reconcile
from .findings.verdict import decide
from .signals.derive import Signals, derive
from .sources import load_groups, resolve

SCHEMA_VERSION = 1


@dataclass
class Analysis:
    evidence: Evidence
    signals: Signals
    result: Result
    rules: list

    def deployment(self) -> dict:
        ev = self.evidence
        d = {name: ev.fact(name) for name in FACT_NAMES}
        extra = {name: ev.fact(name) for name in EXTRA_FACTS if ev.fact(name) is not None}
        d.update(extra)
        for k in ("model_params_b", "weights_gib_replica", "weights_fraction_of_gpu", "world_size"):
            if self.signals.values.get(k) is not None:
                d[k] = self.signals.values[k]
        d["settings"] = _jsonable(ev.settings)
        return d

    def to_json(self) -> dict:
        r = self.result
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "diagnose", "version": __version__},
            "inputs": [i.to_json() for i in self.evidence.inputs],
            "deployment": self.deployment(),
            "verdict": r.verdict,
            "findings": [f.to_json() for f in r.findings],
            "fix": r.combined_fix.to_json() if r.combined_fix and not r.combined_fix.empty() else None,
            "signals": self.signals.key_stats,
            "not_applicable": r.not_applicable,
            "passed": r.passed,
            "errors": r.errors,
        }


def analyze(paths: list[str], rule_dirs: list[str] | None = None, ignore: set[str] = frozenset(),
            year: int | None = None) -> Analysis:
    """The single-deployment entry point (tests, library use): the first group."""
    return analyze_all(paths, rule_dirs, ignore, year)[0]


def analyze_all(paths: list[str], rule_dirs: list[str] | None = None, ignore: set[str] = frozenset(),
                year: int | None = None, gpu_start=None, gpu_interval: float = 1.0,
                gpu_name: str | None = None, overrides: dict | None = None) -> list[Analysis]:
    """One Analysis per deployment: inputs from different engines are diagnosed separately."""
    rules = load_rules(rule_dirs)
    groups = load_groups(resolve(paths), year=year, gpu_start=gpu_start, gpu_interval=gpu_interval)
    if gpu_name:
        for ev in groups:
            ev.set_fact("gpu_name", gpu_name, text="(--gpu-name)")
    return [analyze_evidence(ev, rules, ignore, overrides) for ev in groups]


def combined_json(analyses: list[Analysis]) -> dict:
    """JSON for a run: schema v1 as is for one deployment; several under `analyses`."""
    if len(analyses) == 1:
        return analyses[0].to_json()
    return {"schema_version": SCHEMA_VERSION, "tool": {"name": "diagnose", "version": __version__},
            "analyses": [a.to_json() for a in analyses]}


def analyze_evidence(ev: Evidence, rules: list[Rule], ignore: set[str] = frozenset(),
                     overrides: dict | None = None) -> Analysis:
    sig = derive(ev)
    result = run_rules(rules, ev, sig, ignore, overrides)
    facts = {k: f.value for k, f in ev.facts.items()}
    reconcile(result, {r.id: r for r in rules}, ev.settings, facts)
    result.verdict = decide(sig.values, result.findings)
    return Analysis(ev, sig, result, rules)


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set)):
        return [_jsonable(v) for v in x]
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return str(x)
