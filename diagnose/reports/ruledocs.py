"""Rule documentation generated from the rule files themselves, so docs cannot drift."""
from __future__ import annotations

SECTIONS = [("what", "What it detects"), ("why", "Why it hurts"), ("evidence", "Evidence"),
            ("fix", "Fix"), ("fix_risk", "Fix risk"), ("false_positives", "Known false positives"),
            ("references", "References")]


def rule_table(rules) -> str:
    rows = sorted(rules, key=lambda r: (r.domain, r.id))
    w = max(len(r.id) for r in rows)
    out = [f"{'id':<{w}}  {'severity':<8}  {'domain':<9}  {'engines':<20}  summary"]
    for r in rows:
        out.append(f"{r.id:<{w}}  {r.severity:<8}  {r.domain:<9}  {','.join(r.engines):<20}  {r.docs.get('summary') or r.fix_title}")
    return "\n".join(out) + "\n"


def rule_doc(r) -> str:
    out = [f"# {r.id}", "", f"{r.docs.get('summary', '')}".strip(), "",
           f"Severity: {r.severity} · Engines: {', '.join(r.engines)} · Domain: {r.domain}"
           + (f" · Disaggregated nodes: {', '.join(x for x in r.roles if x != 'both')} only" if len(r.roles) < 3 else ""),
           f"Needs: {', '.join(r.requires) or '(nothing beyond the log)'}",
           f"Condition: {r.condition_text}"] + [f"  where {name} = {text}" for name, _, text in r.lets] + (
        [f"  where sustained = `{r.sustained['text']}` on each stats sample, "
         + " and ".join(x for x in (f"{r.sustained['for_samples']} samples in a row" if r.sustained["for_samples"] else "",
                                    f"{r.sustained['for_seconds']:g} s in a row" if r.sustained["for_seconds"] else "",
                                    f"in {r.sustained['share']:.0%} of the window" if r.sustained["share"] else "") if x)]
        if r.sustained else [])
    if r.params:
        out.append("Thresholds (override in .diagnose.toml under [rules." + r.id + "] params): "
                   + ", ".join(f"{k} = {v}" for k, v in r.params.items()))
    out.append("")
    for key, title in SECTIONS:
        val = r.docs.get(key)
        if not val:
            continue
        out.append(f"## {title}")
        if isinstance(val, list):
            out += [f"- {x}" for x in val]
        else:
            out.append(str(val).strip())
        out.append("")
    for eng, fx in r.fixes.items():
        flags = [f"remove {x}" for x in fx["remove"]] + [f"{k} {v}" for k, v in fx["set"].items()]
        out.append(f"Fix ({eng}): " + ("; ".join(flags) or fx["note"]))
    return "\n".join(out).rstrip() + "\n"
