"""Running rules over signals: applicability, condition, evidence, fix values.

Lighthouse's contract: a rule whose inputs are missing is *not applicable* (never a silent
pass); a rule that raises becomes an error entry and the run goes on.
"""
from __future__ import annotations

from ..evidence.model import Evidence
from .result import Finding, Fix, Result
from ..signals.derive import Signals
from ..values import fmt, is_unknown
from .expr import evaluate
from .rules import TEMPLATE, Rule

MAX_EVENT_LINES = 3


def run_rules(rules: list[Rule], ev: Evidence, sig: Signals, ignore: set[str] = frozenset(),
              overrides: dict | None = None) -> Result:
    """`overrides`: rule id → {"severity": …, "params": {…}} from the project config."""
    engine = sig.values.get("engine") or "vllm"
    overrides = overrides or {}
    findings, na, errors, passed = [], [], [], []
    for rule in rules:
        if rule.id in ignore:
            continue
        if engine not in rule.engines:
            na.append({"id": rule.id, "reason": f"does not apply to {engine}"})
            continue
        role = sig.values.get("node_role")
        if role in ("prefill", "decode") and role not in rule.roles:
            na.append({"id": rule.id, "reason": f"advice for {' and '.join(r for r in rule.roles if r != 'both')} "
                                                f"nodes; this is a {role} node (disaggregated serving)"})
            continue
        missing = [r for r in rule.requires if sig.values.get(r) is None]
        if missing:
            na.append({"id": rule.id, "reason": "missing input: " + ", ".join(missing)})
            continue
        ov = overrides.get(rule.id, {})
        names = {**sig.values, **rule.params, **{k: v for k, v in (ov.get("params") or {}).items() if k in rule.params}}
        try:
            if rule.sustained is not None:         # per stats sample: how long, how often, the peak
                from .sustained import evaluate_sustained
                names.update(evaluate_sustained(rule.sustained, names, sig.samples))
            for name, tree, _ in rule.lets:        # named sub-expressions, in order: a later one may use an earlier
                x = evaluate(tree, names)
                names[name] = None if is_unknown(x) else x
            hit = evaluate(rule.condition, names)
            if is_unknown(hit):
                na.append({"id": rule.id, "reason": _unknown_reason(rule, names)})
                continue
            if not hit:
                passed.append(rule.id)
                continue
            f = _finding(rule, ev, sig, engine, names)
            if ov.get("severity") in ("critical", "high", "medium", "low", "info"):
                f.severity = ov["severity"]
            findings.append(f)
        except Exception as e:  # a broken rule must not break the run
            errors.append({"id": rule.id, "error": f"{type(e).__name__}: {e}"})
    return Result(findings=findings, not_applicable=na, errors=errors, passed=passed)


def render(rule: Rule, text: str, values: dict) -> str:
    def sub(m):
        v = evaluate(rule.templates[m.group(1)], values)
        return fmt(v)
    return TEMPLATE.sub(sub, text or "").replace("{{", "{").replace("}}", "}")


def _flag_values(rule: Rule, spec: dict, vals: dict) -> dict:
    """Flag → value. `true` means a bare flag; a value that evaluates to None or unknown
    drops the flag (a conditional recommendation)."""
    out = {}
    for flag, v in spec.items():
        if v is True:
            out[flag] = True
            continue
        text = str(v)
        m = TEMPLATE.fullmatch(text)
        if m:
            x = evaluate(rule.templates[m.group(1)], vals)
            if x is None or is_unknown(x):
                continue
            out[flag] = True if x is True else fmt(x)
        else:
            out[flag] = render(rule, text, vals)
    return out


def _fact_flags(engine: str, values: dict, cleared: list) -> tuple[dict, list, list]:
    """A fix stated by fact in the engine's flags: (flags to set, flags to remove, facts it has no flag for)."""
    from ..sources.engines import ENGINES
    eng = ENGINES.get(engine)
    out, remove, unspelled = {}, [], []
    for fact, value in list(values.items()) + [(f, False) for f in cleared]:
        spec = eng.flag_for(fact) if eng is not None else None
        if spec is None:
            unspelled.append((fact, value))
        elif isinstance(spec, tuple):          # a switch: present means `spec[1]`
            want = value if isinstance(value, bool) else str(value).lower() in ("true", "1")
            if want == spec[1]:
                out[spec[0]] = True
            else:
                remove.append(spec[0])
        else:
            out[spec] = eng.fact_values.get(fact, {}).get(str(value), value)
    return out, remove, unspelled


def _first_true(pairs: list, vals: dict, default: str) -> str:
    """The value of the first (condition, value) pair whose condition is known and true."""
    for cond, value in pairs:
        r = evaluate(cond, vals)
        if not is_unknown(r) and r:
            return value
    return default


def _unknown_reason(rule: Rule, names: dict) -> str:
    """Which of the condition's inputs are unknown: the signals, not the whole expression."""
    from .expr import FUNCS, SPECIAL, names_of
    lets = {name: tree for name, tree, _ in rule.lets}

    def inputs(tree, seen=()):
        for n in names_of(tree):
            if n in FUNCS or n in SPECIAL or n in ("True", "False", "None"):
                continue
            if n in lets and n not in seen:     # a named sub-expression: the signals it reads
                yield from inputs(lets[n], (*seen, n))
            elif n not in lets:
                yield n
    used = sorted(set(inputs(rule.condition)))
    unknown = [n for n in used if names.get(n) is None]
    return "inputs unknown: " + (", ".join(unknown) if unknown else rule.condition_text)


def _finding(rule: Rule, ev: Evidence, sig: Signals, engine: str, vals: dict) -> Finding:
    sev = _first_true(rule.severity_if, vals, rule.severity)
    conf = _first_true(rule.confidence_if, vals, rule.confidence)
    own = rule.fixes.get(engine)
    facts = rule.fixes.get("facts")
    fx = own or rule.fixes.get("any") or {"remove": [], "set": {}, "note": ""}
    removes = [r for r in (render(rule, x, vals) for x in fx["remove"]) if r and r != "?"]
    flags = _flag_values(rule, fx["set"], vals)
    note = render(rule, fx["note"], vals)
    if facts is not None and (own is None or not (own["set"] or own["remove"])):
        # Stated by fact, spelled by the engine (an engine's own table adds its note, or replaces
        # the flags where its advice differs in kind).
        f_set, f_remove, unspelled = _fact_flags(engine, _flag_values(rule, facts["set"], vals), facts["remove"])
        flags, removes = {**f_set, **flags}, removes + [r for r in f_remove if r not in removes]
        extra = "; ".join(f"set {k} = {v}" for k, v in unspelled) if own is None else ""
        # the facts' note says what holds for every engine; an engine's own note adds to it
        note = " ".join(x for x in (render(rule, facts["note"], vals), note, extra and f"({extra} in this engine's settings)") if x)
    fix = Fix(engine=engine, remove=removes, set=flags, note=note)
    score = 0.0
    if rule.impact_score is not None:
        s = evaluate(rule.impact_score, vals)
        score = 0.0 if is_unknown(s) else float(s)
    return Finding(
        id=rule.id, severity=sev, confidence=conf, title=render(rule, rule.title, vals),
        fix_title=render(rule, rule.fix_title, vals), evidence=_evidence(rule, ev, sig),
        fix=fix, impact=render(rule, rule.impact, vals), impact_score=score,
        fix_risk=rule.fix_risk, domain=rule.domain)


def _evidence(rule: Rule, ev: Evidence, sig: Signals) -> list:
    out = []
    for ref in rule.evidence:
        kind, _, name = ref.partition(":")
        if kind == "event":
            for e in ev.events.get(name, [])[:MAX_EVENT_LINES]:
                out.append({"source": e.source, "line": e.line, "text": e.text})
            more = ev.event_counts.get(name, 0) - MAX_EVENT_LINES
            if more > 0:
                out.append({"metric": "similar lines", "window": "whole input", "value": more, "more": True})
        elif kind == "fact":
            f = ev.facts.get(name)
            if f is None:
                continue
            if f.source and f.line:
                # one citation per line: several facts often come from one config dump
                if not any(o.get("source") == f.source and o.get("line") == f.line for o in out):
                    out.append({"source": f.source, "line": f.line, "text": f.text})
            else:
                out.append({"metric": name, "window": f.text or "derived", "value": fmt(f.value)})
        elif kind == "metric":
            p = sig.provenance.get(name)
            if p:
                out.append({"metric": p["metric"], "window": p["window"], "value": p["value"]})
        elif kind == "sweep":
            out += _sweep_evidence(sig, name)
        elif kind == "signal":
            v = sig.values.get(name)
            if v is not None:
                out.append({"metric": name, "window": "derived", "value": fmt(v)})
    return out


def _sweep_evidence(sig: Signals, which: str) -> list:
    """The benchmark runs a sweep finding rests on, cited by file and line: `knee` (the knee and the
    run at twice its load), `failed` (the first run with failures), `lightest`, `last` (the last
    doubling)."""
    sw = sig.sweep
    if not sw:
        return []
    pts, v = sw["points"], sig.values
    picks = []
    if which == "knee" and v.get("sweep_knee") is not None:
        picks = [p for p in pts if p["load"] in (v["sweep_knee"], v.get("sweep_knee_next"))]
    elif which == "failed":
        picks = [next((p for p in pts if (p.get("failed") or 0) > 0 or p.get("completed") == 0), None)]
    elif which == "lightest":
        picks = pts[:1]
    elif which == "last":
        picks = [p for p in pts if p["load"] in (v.get("sweep_last_from"), pts[-1]["load"])]
    from ..signals.sweep import describe
    return [{"source": p["source"], "line": p["line"], "text": describe(p, sw)} for p in picks if p]
