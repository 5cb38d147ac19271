"""`--format markdown`: a ticket for GitHub or Jira. Headline, verdict, findings table,
evidence folded in <details>, and the corrected launch command as a code block."""
from __future__ import annotations

import re

from .. import __version__
from .common import (TIMELINE, stop_mark, run_heading, coverage_detail, deployment_label, differences, evidence_line, fix_lines,
                     input_warnings, launches_text, nothing_read_hint, printable, skipped_lines, sparkline,
                     summary_rows, window_rows)


# Text from a log outside code must stay text wherever the ticket is pasted: no link (`[x](url)`, a
# bare URL GitHub would link), no remote image (`![x](url)`), no HTML (`<img>`), no @mention, no table
# break. Markdown punctuation is backslash-escaped (`<` as `&lt;`: no tag can open); what an escape
# cannot stop (autolinks, mentions, e-mail links) is broken by a zero-width space after `@`, in `://`
# and after `www`.
_MD_TEXT = re.compile(r"[\\\[\]!<>@|]|\(|://|\bwww\.", re.I)
_MD_REPL = {"\\": "\\\\", "[": "\\[", "]": "\\]", "!": "\\!", "<": "&lt;", "@": "@\u200b", "|": "\\|",
            "://": ":\u200b//"}


def _md_escape(m: re.Match) -> str:
    t = m.group()
    if t == "(":        # only a `(` right after a `]` could open a link's target
        return "\\(" if m.start() and m.string[m.start() - 1] == "]" else "("
    if t == ">":        # a quote only at the start of a line; elsewhere `2>&1` reads better as it is
        return "\\>" if m.start() == 0 else ">"
    return _MD_REPL.get(t) or t[:3] + "\u200b" + t[3:]          # www.


# In code, Markdown makes nothing live; still, `](` and `![` never belong in a value or a log line and
# a ticket tracker that is not CommonMark may read them: a zero-width space between the two.
_CODE_LINKS = re.compile(r"(?<=\])(?=\()|(?<=!)(?=\[)")


def _cell(s) -> str:
    """Text from a log outside code: inert (no HTML, link, image or mention), no table break, one
    line (headings, list items, table cells). Backticks stay: rule texts mark flags with them, and
    a code span only makes text more literal."""
    s = printable(str(s).replace("\r", " ").replace("\n", " "))
    return _MD_TEXT.sub(_md_escape, s)


def _code(s) -> str:
    """An inline code span that holds any text: fenced with a backtick run longer than any inside
    (CommonMark), padded when the text starts or ends with one, and `|` escaped for GFM tables."""
    s = printable(str(s).replace("\r", " ").replace("\n", " ")).replace("|", "\\|")
    s = _CODE_LINKS.sub("\u200b", s)
    run = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (run + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _fence(lines: list[str], info: str = "") -> list[str]:
    """A fenced block no line inside can close: the fence is longer than any backtick run."""
    lines = [_CODE_LINKS.sub("\u200b", printable(x)) for x in lines]
    run = max((len(m) for x in lines for m in re.findall(r"`{3,}", x)), default=0)
    fence = "`" * max(3, run + 1)
    return [fence + info, *lines, fence]


def render(data: dict, timeline: dict | None = None) -> str:
    dep = data["deployment"]
    findings = data["findings"]
    v = data["verdict"] or {}
    model = dep.get("model") or "unknown model"
    if data.get("instance") == "fleet":
        title = f"# diagnose: fleet of {len(v.get('ranking') or [])} replicas — {len(findings)} fleet finding(s)"
    elif data.get("instance"):
        title = f"# diagnose: replica {_cell(data['instance'])} — {len(findings)} finding(s) for {_cell(model)}"
    else:
        title = f"# diagnose: {len(findings)} finding(s) for {_cell(model)} ({_cell(dep.get('engine') or 'unknown engine')})"
    out = [title, ""]
    warnings = input_warnings(data["inputs"])
    if warnings:                    # first: what of the input was not read
        out += [f"> ⚠ {_cell(w)}" for w in warnings] + [""]
    also = f" (also: {', '.join(v.get('also') or [])})" if v.get("also") else ""
    out.append(f"**Bottleneck verdict: `{v.get('bottleneck')}`**{also}")
    out += [f"- {_cell(s)}" for s in v.get("signals", [])]
    if v.get("window"):
        out.append(f"- {_cell(v['window'])}")
    where = launches_text(data)
    if where:
        out.append(f"- {_cell(where)}")
    if v.get("ranking"):
        out.append(f"- replicas, worst first: {', '.join(_code(r) for r in v['ranking'])}")
    out.append("")
    input_notes = [f"- {_code(i['path'])}: {_cell(e)}" for i in data["inputs"] for e in i.get("errors") or []]
    if input_notes:                 # what the verdict rests on: `partial data (--partial): …`, a widened step
        out += ["## Notes on the inputs", ""] + input_notes + [""]
    rows = summary_rows(dep)
    if rows:
        out += ["## Deployment", "", "| setting | value |", "|---|---|"]
        out += [f"| {_cell(k)} | {_code(val)} |" for k, val in rows]
        out.append("")
    rows = window_rows(data.get("signals"))
    if rows:
        out += ["## Over the whole window", "", "| figure | value |", "|---|---|"]
        out += [f"| {_cell(k)} | {_cell(val)} |" for k, val in rows]
        out.append("")
    if data.get("sweep"):
        out += _sweep(data["sweep"])
    if findings:
        out += ["## Findings", "", "| # | severity | rule | what is wrong | fix |", "|---|---|---|---|---|"]
        for i, f in enumerate(findings, 1):
            fx = ", ".join(_code(x) for x in fix_lines(f["fix"])) or _cell(f["fix"].get("note") or f["fix_title"])
            out.append(f"| {i} | {f['severity']} | `{f['id']}` | {_cell(f['title'])} | {fx} |")
        out.append("")
        for i, f in enumerate(findings, 1):
            out.append(f"### {i}. `{f['id']}` — {_cell(f['title'])}")
            out.append("")
            out.append(f"**{_cell(f['fix_title'])}.** Severity {f['severity']}, confidence {f['confidence']}.")
            if f["impact"]:
                out.append(f"Impact: {_cell(f['impact'])}")
            if f["fix"].get("note"):
                out.append(f"Note: {_cell(f['fix']['note'])}")
            if f["fix_risk"]:
                out.append(f"Fix risk: {_cell(f['fix_risk'])}")
            out += ["", "<details><summary>Evidence</summary>", ""]
            out += _fence([evidence_line(e) for e in f["evidence"]] or ["(derived from the signals above)"])
            out += ["", "</details>", ""]
    else:
        hint = nothing_read_hint(data)
        out += [_cell(hint) if hint else "No findings.", ""]
    fix = data.get("fix")
    if fix and fix.get("command"):
        out += ["## Corrected launch command", ""] + _fence(fix["command"].split("\n"), "bash") + [""]
    if timeline:
        out += ["## Timeline", "", "```"]
        out += [f"{label:>13} {sparkline(timeline.get(key, []))}" for key, label in TIMELINE if timeline.get(key)]
        mark = stop_mark(data)
        out += ([f"{'end':>13} {mark}"] if mark else []) + ["```", ""]
    noise = ((data.get("verdict") or {}).get("stopped") or {}).get("errors_after_examples")
    if noise:
        out += ["<details><summary>Errors printed while the server stopped (not a crash)</summary>", ""]
        out += _fence(noise) + ["", "</details>", ""]
    notes = [f"{_code(i['path'])}: {_cell(coverage_detail(i))}" for i in data["inputs"]]
    out += ["<sub>" + "; ".join(notes) + f" · {len(data['not_applicable'])} rule(s) not applicable · diagnose {__version__}</sub>", ""]
    return "\n".join(out)


def render_run_head(parts: list[dict], skipped: list[dict]) -> str:
    """Before the deployments: the inputs left out, and with several deployments one row each."""
    out = []
    if len(parts) > 1:
        first = parts[0]["deployment"]
        heading = run_heading(parts)
        if heading.startswith(f"{len(parts)} deployments"):
            out += [f"# diagnose: {len(parts)} deployments", "",
                    "Different servers, or one server with different settings: each is diagnosed on its own below.", ""]
        else:                   # one disaggregated deployment: the system, then its nodes
            out += [f"# diagnose: {_cell(heading.split(' — ')[0])}", "", _cell(heading), ""]
        out += ["| # | deployment | verdict | findings | differs from 1 in |", "|---|---|---|---|---|"]
        for i, d in enumerate(parts, 1):
            f = d["findings"]
            out.append(f"| {i} | {_cell(deployment_label(d))} | `{(d['verdict'] or {}).get('bottleneck')}` | "
                       f"{len(f)}{' (' + _code(f[0]['id']) + ')' if f else ''} | {_cell(differences(first, d['deployment']) if i > 1 else '')} |")
        out.append("")
    if skipped:
        out += ["**Inputs left out:**", ""] + [f"- {_cell(x)}" for x in skipped_lines(skipped)] + [""]
    return "\n".join(out) + ("\n---\n\n" if out else "")


def render_comparison(c: dict) -> str:
    out = ["", "## Compared with the baseline", ""]
    if c["config_changes"]:
        out += ["**Configuration changes** (these usually explain the rest):", "", "| setting | before | after |", "|---|---|---|"]
        out += [f"| {_cell(x['key'])} | {_code(x['before'])} | {_code(x['after'])} |" for x in c["config_changes"]]
        out.append("")
    out.append(f"Findings — fixed: {', '.join(f'`{i}`' for i in c['fixed']) or 'none'}; "
               f"new: {', '.join(f'`{i}`' for i in c['new']) or 'none'}; unchanged: {', '.join(f'`{i}`' for i in c['unchanged']) or 'none'}.")
    if c.get("sweep"):
        sw = c["sweep"]
        out += ["", f"Load sweep knee ({sw['axis'].replace('_', ' ')}): {sw['knee_before']} → {sw['knee_after']}."]
    out += ["", "| signal | before | after | change | verdict |", "|---|---|---|---|---|"]
    for name, s in c["signals"].items():
        ch = f"{s['change'] * 100:+.0f} %" if s.get("change") is not None else ""
        out.append(f"| {name} | {s['before']} | {s['after']} | {ch} | **{s['verdict']}**"
                   + (f" ({_cell(s['reason'])})" if s.get("reason") else "") + " |")
    out += ["", f"<sub>Verdict rule: {c['rule']}.</sub>", ""]
    return "\n".join(out)


def _sweep(sw: dict) -> list[str]:
    from .common import sweep_table
    header, rows, notes = sweep_table(sw)
    out = ["## Load sweep", "", "| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---:|" * (len(header) - 1) + "---|"]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return out + [""] + [f"- {_cell(n)}" for n in notes] + [""]
