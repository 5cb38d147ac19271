"""One way through: sources → evidence → signals → rules → findings → reports."""
from __future__ import annotations

import json
from dataclasses import dataclass

from . import __version__
from .ruleset.rules import Rule, load_rules
from .ruleset.runner import run_rules
from .evidence.facts import DERIVED_DEPLOYMENT
from .evidence.model import FACT_NAMES, EXTRA_FACTS, Evidence
from .ruleset.result import Result
from .findings.reconcile import reconcile
from .findings.verdict import decide
from .signals.derive import Signals, derive
from .values import fmt, model_id
from .sources import load_groups, resolve, start_scans

SCHEMA_VERSION = 2      # 2: one shape for every run (`analyses`, views beside); 1 read as a baseline


@dataclass
class Analysis:
    evidence: Evidence
    signals: Signals
    result: Result
    rules: list
    instance: str | None = None      # a fleet replica (Prometheus instance), or "fleet" for the whole

    def deployment(self) -> dict:
        ev = self.evidence
        d = {name: ev.fact(name) for name in FACT_NAMES}
        extra = {name: ev.fact(name) for name in EXTRA_FACTS if ev.fact(name) is not None}
        d.update(extra)
        for k in DERIVED_DEPLOYMENT:        # computed from the facts (the catalogue's `derived`)
            if self.signals.values.get(k) is not None:
                d[k] = self.signals.values[k]
        d["settings"] = _jsonable(ev.settings)
        return d

    def to_json(self) -> dict:
        r = self.result
        if self.instance == "fleet":
            return {"instance": "fleet",
                    "signals_fleet": {k: v for k, v in self.signals.values.items() if v is not None},
                    "verdict": r.verdict, "findings": [f.to_json() for f in r.findings],
                    "not_applicable": r.not_applicable, "passed": r.passed, "errors": r.errors,
                    "inputs": [i.to_json() for i in self.evidence.inputs],
                    # what every replica is (engine, model), when they agree
                    "deployment": {k: self.evidence.fact(k) for k in ("engine", "model") if self.evidence.fact(k) is not None}}
        return {
            "instance": self.instance,
            "inputs": [i.to_json() for i in self.evidence.inputs],
            "launches": list(getattr(self.evidence, "parts", []) or []),
            "deployment": self.deployment(),
            "verdict": r.verdict,
            "findings": [f.to_json() for f in r.findings],
            "fix": r.combined_fix.to_json() if r.combined_fix and not r.combined_fix.empty() else None,
            "signals": self.signals.key_stats,
            "not_applicable": r.not_applicable,
            "passed": r.passed,
            "errors": r.errors,
            **({"sweep": _sweep_json(self.signals.sweep)} if self.signals.sweep else {}),
        }


def _sweep_json(sweep) -> dict:
    from .signals.sweep import sweep_json       # a sweep's module, only where there is one
    return sweep_json(sweep)


def analyze(paths: list[str], rule_dirs: list[str] | None = None, ignore: set[str] = frozenset(),
            year: int | None = None) -> Analysis:
    """The single-deployment entry point (tests, library use): the first group (the fleet view
    when the input holds several replicas)."""
    return analyze_all(paths, rule_dirs, ignore, year)[0]


def analyze_all(paths: list[str], rule_dirs: list[str] | None = None, ignore: set[str] = frozenset(),
                year: int | None = None, gpu_start=None, gpu_interval: float = 1.0,
                gpu_name: str | None = None, overrides: dict | None = None, targets: dict | None = None,
                prometheus: dict | None = None) -> list[Analysis]:
    """One Analysis per deployment: inputs from different engines are diagnosed separately."""
    inputs = resolve(paths) if paths else []
    start_scans(inputs)     # big logs: C reads them on the other cores while the rules load
    rules = load_rules(rule_dirs)
    groups = load_groups(inputs, year=year, gpu_start=gpu_start, gpu_interval=gpu_interval) if paths else []
    out: list[Analysis] = []
    for ev in groups:
        if gpu_name:
            ev.set_fact("gpu_name", gpu_name, text="(--gpu-name)")
        replicas = split_instances(ev)
        if len(replicas) > 1:
            out += fleet_or_system(replicas, rules, ignore, overrides, targets=targets)
        else:
            out.append(analyze_evidence(ev, rules, ignore, overrides, targets))
    if prometheus:
        out += analyze_prometheus(prometheus, rules, ignore, overrides, targets)
    return disaggregated(out, rules, ignore, overrides)


def disaggregated(out: list[Analysis], rules: list[Rule], ignore=frozenset(), overrides=None) -> list[Analysis]:
    """Prefill and decode nodes of one engine and model are one disaggregated deployment: the
    system view first (its pools side by side, rules of scope `disaggregated`), then each node,
    diagnosed for its role (prefill nodes first)."""
    groups: dict[tuple, list[Analysis]] = {}
    for a in out:
        v = a.signals.values
        if a.instance in (None,) and v.get("node_role") in ("prefill", "decode"):
            groups.setdefault((v.get("engine"), model_id(str(v.get("model") or ""))), []).append(a)
    for (engine, model), nodes in groups.items():
        if {a.signals.values["node_role"] for a in nodes} != {"prefill", "decode"}:
            continue
        nodes.sort(key=lambda a: a.signals.values["node_role"] != "prefill")
        at = out.index(nodes[0]) if nodes[0] in out else len(out)
        for a in nodes:
            out.remove(a)
        counts = {r: 0 for r in ("prefill", "decode")}
        for a in nodes:
            role = a.signals.values["node_role"]
            counts[role] += 1
            a.instance = f"{role} node {counts[role]}"
        out[min(at, len(out)):min(at, len(out))] = [analyze_system(nodes, rules, ignore, overrides)] + nodes
    return out


def analyze_system(nodes: list[Analysis], rules: list[Rule], ignore=frozenset(), overrides=None) -> Analysis:
    from .signals.disaggregated import pd_signals
    sev = Evidence()
    sev.inputs = [i for a in nodes for i in a.evidence.inputs]
    sev.clock_zone = next((a.evidence.clock_zone for a in nodes if a.evidence.clock_zone), None)
    for name in ("engine", "model"):
        val = nodes[0].evidence.fact(name)
        if val is not None:
            sev.set_fact(name, val, None, None, "the nodes' " + name)
    sig = Signals()
    sig.values.update({"engine": nodes[0].signals.values.get("engine"), "model": nodes[0].signals.values.get("model")})
    sig.values.update(pd_signals(nodes))
    result = run_rules([r for r in rules if r.scope == "disaggregated"], sev, sig, ignore, overrides)
    reconcile(result, {r.id: r for r in rules}, {}, {})
    v = sig.values
    said = [f"{a.instance}: {(a.result.verdict or {}).get('bottleneck')}"
            + (f" ({len(a.result.findings)} finding(s), first `{a.result.findings[0].id}`)" if a.result.findings else "")
            for a in nodes]
    pools = [f"{role} pool: running {fmt(v[role + '_running_mean'])}"
             + (f" of {fmt(v[role + '_running_cap'])} admitted" if v.get(role + "_running_cap") else "")
             + f", waiting {fmt(v[role + '_waiting_mean'])} (means summed over its nodes)"
             for role in ("prefill", "decode") if v.get(role + "_running_mean") is not None]
    first = result.findings[0].id if result.findings else None
    result.verdict = {"bottleneck": first or "disaggregated",
                      "signals": [f"{v['prefill_nodes']} prefill + {v['decode_nodes']} decode node(s) (P:D {v['pd_ratio']})"]
                      + pools + ([f"{v['kv_transfer_failure_count_all']} KV transfer failure line(s) across the nodes "
                                  "(`kv-transfer-failures` on the nodes that logged them)"]
                                 if v.get("kv_transfer_failure_count_all") else []) + said,
                      "basis": "per-node analyses", "also": [], "nodes": [a.instance for a in nodes],
                      "roles": [a.signals.values.get("node_role") for a in nodes]}
    return Analysis(sev, sig, result, rules, instance="disaggregated")


def analyze_prometheus(p: dict, rules, ignore, overrides, targets) -> list[Analysis]:
    """Live attach: every instance is a replica; one instance is a plain analysis."""
    from .evidence.model import InputInfo
    from .sources.prometheus import display_url, fetch
    fetched, notes = fetch(**p)
    url = display_url(p["url"])         # a user:password in the URL is sent, never shown
    if not fetched:
        from .sources.prometheus import PromError
        raise PromError(f"{url}: no series in the window" + (f" matching {p.get('match')}" if p.get("match") else ""))
    for inst, ev in fetched.items():
        info = InputInfo(path=f"{url} instance={inst}", kind="prometheus", engine=ev.fact("engine"),
                         lines=len(ev.stats_rows), recognised_lines=len(ev.stats_rows))
        info.errors.extend(notes)
        ev.inputs.append(info)
        from .evidence.finish import finish
        finish(ev)
    end = p.get("end")
    if end is not None and end.tzinfo is not None:     # the evidence's times are naive UTC
        from datetime import timezone
        end = end.astimezone(timezone.utc).replace(tzinfo=None)
    # One fleet per served model: replicas of different models behind one job or namespace are
    # different deployments, and comparing their loads says nothing.
    groups: dict[str, dict[str, Evidence]] = {}
    for inst, ev in fetched.items():
        groups.setdefault(str(ev.fact("model") or ""), {})[inst] = ev
    out: list[Analysis] = []
    for _model, members in sorted(groups.items()):
        if len(members) == 1 and not _silent(next(iter(members.values())), end):
            inst, ev = next(iter(members.items()))
            a = analyze_evidence(ev, rules, ignore, overrides, targets)
            a.instance = inst
            out.append(a)
        else:
            out += fleet_or_system(members, rules, ignore, overrides, end=end, targets=targets)
    return out


def fleet_or_system(replicas: dict[str, Evidence], rules: list[Rule], ignore=frozenset(), overrides=None,
                    end=None, targets: dict | None = None) -> list[Analysis]:
    """Replicas of one model: a fleet — or, when some are prefill and some decode nodes (SGLang's
    `engine_type` label), one disaggregated deployment: the system view and each node (comparing a
    prefill node's load with a decode node's says nothing)."""
    roles = {inst: ev.fact("node_role") for inst, ev in replicas.items()}
    if not {"prefill", "decode"} <= set(roles.values()):
        return analyze_fleet(replicas, rules, ignore, overrides, end=end, targets=targets)
    nodes = []
    for inst, ev in sorted(replicas.items(), key=lambda kv: (roles[kv[0]] != "prefill", kv[0])):
        a = analyze_evidence(ev, rules, ignore, overrides, targets)
        a.instance = f"{roles[inst] or 'unknown-role'} node {inst}"
        nodes.append(a)
    return [analyze_system(nodes, rules, ignore, overrides)] + nodes


def _silent(ev: Evidence, end) -> bool:
    """A lone instance whose samples stop well before the window's end (or that was scraped as
    down all along): it goes through the fleet view, where replica-down says so."""
    from .signals.fleet import DOWN_S
    if ev.counters.get("scrape_down_all_window"):
        return True
    last = ev.last_seen
    return end is not None and last is not None and (end - last).total_seconds() > DOWN_S


def split_instances(ev: Evidence) -> dict[str, Evidence]:
    """Saved scrapes of several replicas: one Evidence per `instance`, facts shared."""
    if len(ev.instances) <= 1:
        return {}
    out = {}
    for inst in sorted(ev.instances):
        e = Evidence()
        e.inputs = ev.inputs
        e.facts = dict(ev.facts)
        e.facts.pop("node_role", None)          # each replica its own role, when its series say one
        if inst in ev.instance_roles:
            e.set_fact("node_role", ev.instance_roles[inst], None, None, "engine_type label")
        # Its own engine and model, from its own series (a mixed fleet's SGLang replica is not vLLM's).
        for k, val in (ev.instance_facts.get(inst) or {}).items():
            e.facts.pop(k, None)
            e.set_fact(k, val, None, None, f"{k} of {inst}'s series")
        e.values.update(ev.instance_values.get(inst) or {})
        if ev.counters.get("single_scrape"):
            e.counters["single_scrape"] = 1
        e.settings = ev.settings
        e.targets = ev.targets
        e.clock_zone = ev.clock_zone
        for r in ev.stats_rows:
            if r.get("instance") == inst:
                e.add_stats(r)
        out[inst] = e
    return out


def analyze_fleet(replicas: dict[str, Evidence], rules: list[Rule], ignore=frozenset(), overrides=None,
                  end=None, targets: dict | None = None) -> list[Analysis]:
    """Each replica on its own, plus the fleet view (fleet rules) first."""
    from .signals.fleet import fleet_signals
    per = []
    for inst, ev in replicas.items():
        a = analyze_evidence(ev, [r for r in rules if r.scope == "replica"], ignore, overrides, targets)
        a.instance = inst
        per.append(a)
    fev = Evidence()
    fev.inputs = next(iter(replicas.values())).inputs
    fev.clock_zone = next((ev.clock_zone for ev in replicas.values() if ev.clock_zone), None)
    for k in ("model", "engine"):
        seen = {ev.fact(k) for ev in replicas.values()} - {None}
        if len(seen) == 1:
            fev.set_fact(k, seen.pop(), None, None, f"the replicas' {k}")
    sig = Signals()
    sig.values.update(fleet_signals(per, end))
    result = run_rules([r for r in rules if r.scope == "fleet"], fev, sig, ignore, overrides)
    reconcile(result, {r.id: r for r in rules}, {}, {})
    ranked = sorted(per, key=lambda a: [f.rank_key() for f in a.result.findings][:1] or [(9, 9, 0)])
    grouped: dict[str, int] = {}
    for a in per:
        for f in a.result.findings:
            grouped[f.id] = grouped.get(f.id, 0) + 1
    result.verdict = {"bottleneck": "fleet", "signals": [f"{len(per)} replicas"] + [
        f"{n} of {len(per)} replicas: `{i}`" for i, n in sorted(grouped.items(), key=lambda kv: -kv[1])][:3],
        "basis": "per-replica analyses", "also": [], "ranking": [a.instance for a in ranked],
        "grouped": [{"id": i, "count": n, "of": len(per)} for i, n in sorted(grouped.items(), key=lambda kv: -kv[1])]}
    fleet = Analysis(fev, sig, result, rules, instance="fleet")
    return [fleet] + ranked


def combined_json(analyses: list[Analysis]) -> dict:
    """JSON for a run (schema version 2, one shape for every run): `analyses`, one object per
    deployment (a fleet's replicas ranked worst first, a disaggregated system's nodes), with the
    views over several of them beside it: `fleet` (`fleets` when several models), `disaggregated`
    (`disaggregated_systems`), `sweep` (`sweeps`: each names its analysis by index)."""
    skipped = next(([s.to_json() for s in a.evidence.skipped] for a in analyses if getattr(a.evidence, "skipped", None)), [])
    every = [a.to_json() for a in analyses]
    inputs = list({json.dumps(i, sort_keys=True, default=str): i for d in every for i in d.get("inputs", [])}.values())
    doc = {"schema_version": SCHEMA_VERSION, "tool": {"name": "diagnose", "version": __version__},
           "inputs": inputs, "skipped": skipped,
           "analyses": [d for d in every if d.get("instance") not in ("fleet", "disaggregated")]}
    for kind, one, several in (("fleet", "fleet", "fleets"), ("disaggregated", "disaggregated", "disaggregated_systems")):
        views = [d for d in every if d.get("instance") == kind]
        if len(views) == 1:
            doc[one] = views[0]
        elif views:
            doc[several] = views
    sweeps = [dict(d.pop("sweep"), analysis=i) for i, d in enumerate(doc["analyses"]) if d.get("sweep")]
    if len(sweeps) == 1:
        doc["sweep"] = sweeps[0]
    elif sweeps:
        doc["sweeps"] = sweeps
    return doc


def baseline_analysis(doc: dict) -> dict:
    """The first deployment of a saved JSON report, as --baseline compares it: schema 2 (its
    sweep, kept beside the analyses, back in it) or 1 (a single deployment at the top, or several
    under `analyses`)."""
    if doc.get("schema_version") == 1:
        return doc["analyses"][0] if "analyses" in doc else doc
    first = dict(doc["analyses"][0] if doc.get("analyses") else doc.get("fleet") or doc.get("disaggregated") or {})
    sweep = doc.get("sweep") or next((s for s in doc.get("sweeps", []) if s.get("analysis") == 0), None)
    if sweep and sweep.get("analysis", 0) == 0:
        first["sweep"] = {k: v for k, v in sweep.items() if k != "analysis"}
    return first


def analyze_evidence(ev: Evidence, rules: list[Rule], ignore: set[str] = frozenset(),
                     overrides: dict | None = None, targets: dict | None = None) -> Analysis:
    sig = derive(ev)
    if targets or ev.targets:
        from .targets import apply_targets
        apply_targets(sig.values, {**ev.targets, **(targets or {})})
    if ev.bench_points:     # the recommended load depends on the targets: after them
        from .signals.sweep import sweep_signals
        sweep_signals(ev, sig)
    result = run_rules([r for r in rules if r.scope == "replica"], ev, sig, ignore, overrides)
    facts = {k: f.value for k, f in ev.facts.items()}
    reconcile(result, {r.id: r for r in rules}, ev.settings, facts)
    result.verdict = decide(sig.values, result.findings)
    window = steady_window_line(sig)
    if window:
        result.verdict["window"] = window
    return Analysis(ev, sig, result, rules)


def steady_window_line(sig: Signals) -> str | None:
    """What the runtime judgement rests on: the steady window, and what start-up it left out."""
    v = sig.values
    start = v.get("startup_breakdown")
    if sig.window:
        return sig.window + (f"; start-up excluded ({start})" if start else "")
    if start:
        return f"start-up only: {start}"
    return None


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set)):
        return [_jsonable(v) for v in x]
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return str(x)
