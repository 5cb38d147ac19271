"""`--format markdown`: a ticket for GitHub or Jira. Headline, verdict, findings table,
evidence folded in <details>, and the corrected launch command as a code block."""
from __future__ import annotations

from .common import evidence_line, fix_lines, sparkline, summary_rows, window_rows, TIMELINE


def _cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def render(data: dict, timeline: dict | None = None) -> str:
    dep = data["deployment"]
    findings = data["findings"]
    v = data["verdict"] or {}
    model = dep.get("model") or "unknown model"
    if data.get("instance") == "fleet":
        title = f"# diagnose: fleet of {len(v.get('ranking') or [])} replicas — {len(findings)} fleet finding(s)"
    elif data.get("instance"):
        title = f"# diagnose: replica {data['instance']} — {len(findings)} finding(s) for {model}"
    else:
        title = f"# diagnose: {len(findings)} finding(s) for {model} ({dep.get('engine') or 'unknown engine'})"
    out = [title, ""]
    also = f" (also: {', '.join(v.get('also') or [])})" if v.get("also") else ""
    out.append(f"**Bottleneck verdict: `{v.get('bottleneck')}`**{also}")
    out += [f"- {s}" for s in v.get("signals", [])]
    if v.get("window"):
        out.append(f"- {_cell(v['window'])}")
    if v.get("ranking"):
        out.append(f"- replicas, worst first: {', '.join(f'`{r}`' for r in v['ranking'])}")
    out.append("")
    input_notes = [f"- `{i['path']}`: {_cell(e)}" for i in data["inputs"] for e in i.get("errors") or []]
    if input_notes:                 # what the verdict rests on: `partial data (--partial): …`, a widened step
        out += ["## Notes on the inputs", ""] + input_notes + [""]
    rows = summary_rows(dep)
    if rows:
        out += ["## Deployment", "", "| setting | value |", "|---|---|"]
        out += [f"| {_cell(k)} | `{_cell(val)}` |" for k, val in rows]
        out.append("")
    rows = window_rows(data.get("signals"))
    if rows:
        out += ["## Over the whole window", "", "| figure | value |", "|---|---|"]
        out += [f"| {_cell(k)} | {_cell(val)} |" for k, val in rows]
        out.append("")
    if findings:
        out += ["## Findings", "", "| # | severity | rule | what is wrong | fix |", "|---|---|---|---|---|"]
        for i, f in enumerate(findings, 1):
            fx = ", ".join(f"`{x}`" for x in fix_lines(f["fix"])) or _cell(f["fix"].get("note") or f["fix_title"])
            out.append(f"| {i} | {f['severity']} | `{f['id']}` | {_cell(f['title'])} | {fx} |")
        out.append("")
        for i, f in enumerate(findings, 1):
            out.append(f"### {i}. `{f['id']}` — {f['title']}")
            out.append("")
            out.append(f"**{f['fix_title']}.** Severity {f['severity']}, confidence {f['confidence']}.")
            if f["impact"]:
                out.append(f"Impact: {f['impact']}")
            if f["fix"].get("note"):
                out.append(f"Note: {f['fix']['note']}")
            if f["fix_risk"]:
                out.append(f"Fix risk: {f['fix_risk']}")
            out += ["", "<details><summary>Evidence</summary>", "", "```"]
            out += [evidence_line(e) for e in f["evidence"]] or ["(derived from the signals above)"]
            out += ["```", "", "</details>", ""]
    else:
        out += ["No findings.", ""]
    fix = data.get("fix")
    if fix and fix.get("command"):
        out += ["## Corrected launch command", "", "```bash", fix["command"], "```", ""]
    if timeline:
        out += ["## Timeline", "", "```"]
        out += [f"{label:>13} {sparkline(timeline.get(key, []))}" for key, label in TIMELINE if timeline.get(key)]
        out += ["```", ""]
    notes = []
    for i in data["inputs"]:
        notes.append(f"`{i['path']}`: {i['lines']} lines, {i['recognised_lines']} recognised, "
                     f"{i['unrecognised_lines']} not recognised" + (f", {i['unreadable_lines']} unreadable" if i["unreadable_lines"] else ""))
    out += ["<sub>" + "; ".join(notes) + f" · {len(data['not_applicable'])} rule(s) not applicable · diagnose {data['tool']['version']}</sub>", ""]
    return "\n".join(out)


def render_comparison(c: dict) -> str:
    out = ["", "## Compared with the baseline", ""]
    if c["config_changes"]:
        out += ["**Configuration changes** (these usually explain the rest):", "", "| setting | before | after |", "|---|---|---|"]
        out += [f"| {_cell(x['key'])} | `{_cell(x['before'])}` | `{_cell(x['after'])}` |" for x in c["config_changes"]]
        out.append("")
    out.append(f"Findings — fixed: {', '.join(f'`{i}`' for i in c['fixed']) or 'none'}; "
               f"new: {', '.join(f'`{i}`' for i in c['new']) or 'none'}; unchanged: {', '.join(f'`{i}`' for i in c['unchanged']) or 'none'}.")
    out += ["", "| signal | before | after | change | verdict |", "|---|---|---|---|---|"]
    for name, s in c["signals"].items():
        ch = f"{s['change'] * 100:+.0f} %" if s.get("change") is not None else ""
        out.append(f"| {name} | {s['before']} | {s['after']} | {ch} | **{s['verdict']}**"
                   + (f" ({_cell(s['reason'])})" if s.get("reason") else "") + " |")
    out += ["", f"<sub>Verdict rule: {c['rule']}.</sub>", ""]
    return "\n".join(out)
