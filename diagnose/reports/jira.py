"""`--format jira`: the markdown ticket in Jira wiki markup (Jira Server / Data Center, and Cloud's
wiki-markup editor): `h2.` headings, `||` header rows and `|` rows, `{{code}}`, `{code}` and
`{noformat}` blocks. Jira has no folding, so the evidence is a `{noformat}` block under its
finding."""
from __future__ import annotations

import re

from .. import __version__
from .common import (TIMELINE, stop_mark, run_heading, coverage_detail, deployment_label, differences, evidence_line, fix_lines,
                     input_warnings, launches_text, nothing_read_hint, printable, skipped_lines, sparkline,
                     summary_rows, window_rows)

# Text from a log must stay text in a ticket: no link (`[x|url]`, a bare URL), no image (`!x.png!`),
# no macro (`{html}`, `{color}`), no mention (`[~user]`), no table break (`|`), no emphasis. Every
# markup character is backslash-escaped; a backslash itself is an entity (`\\` is a line break in
# Jira); `??` (citation) gets its second `?` escaped, and what an escape cannot stop (autolinks) is
# broken by a zero-width space in `://` and after `www` and `@`.
_JIRA_TEXT = re.compile(r"[\[\]{}|*_+^~!]|\\|\?\?|://|@|\bwww\.|(?:^|(?<=[\s(-]))-", re.I)
_JIRA_REPL = {"\\": "&#92;", "??": "?\\?", "://": ":\u200b//", "@": "@\u200b"}
# at the start of a line or cell: a numbered item, a heading (`h1.`), a quote (`bq.`)
_LINE_START = re.compile(r"^(\s*)(#|h[1-6]\.|bq\.)")
_TICKS = re.compile(r"`([^`]+)`")


def _jira_escape(m: re.Match) -> str:
    t = m.group()
    if t in _JIRA_REPL:
        return _JIRA_REPL[t]
    return "\\" + t if len(t) == 1 else t[:3] + "\u200b" + t[3:]       # www.


def _inert(s: str) -> str:
    # `-` only where it could open a strike-through (`-x-`) or make a dash (`--`): after a space or
    # another `-`, or first
    s = _JIRA_TEXT.sub(_jira_escape, s)
    return _LINE_START.sub(lambda m: m.group(1) + ("\\#" if m.group(2) == "#" else m.group(2)[0] + "\u200b" + m.group(2)[1:]), s)


def _text(s) -> str:
    """Text from a log outside a block: inert, one line (headings, list items, table cells). A
    `code span` (rule texts mark flags so) becomes monospace, as markdown shows it."""
    s = printable(str(s).replace("\r", " ").replace("\n", " "))
    parts = _TICKS.split(s)         # text, code, text, code, ...
    return "".join(_inert(p) if i % 2 == 0 else "{{" + _inert(p) + "}}" for i, p in enumerate(parts))


def _code(s) -> str:
    """Monospace (`{{…}}`): Jira still reads markup inside, so the text is escaped as any other."""
    s = _inert(printable(str(s).replace("\r", " ").replace("\n", " ")))
    return "{{" + s + "}}" if s.strip() else s


def _block(lines: list[str], kind: str = "noformat") -> list[str]:
    """A `{noformat}` or `{code:bash}` block: literal inside, and no line in it can close it (a zero-width
    space after the `{` of any `{noformat` / `{code` it holds)."""
    name = kind.split(":")[0]
    lines = [re.sub(r"\{(?=(noformat|code)\b)", "{\u200b", printable(x), flags=re.I) for x in lines]
    return ["{" + kind + "}", *lines, "{" + name + "}"]


def _row(cells: list[str], header: bool = False) -> str:
    sep = "||" if header else "|"
    return sep + sep.join(c if c.strip() else " " for c in cells) + sep       # an empty cell: one space


def render(data: dict, timeline: dict | None = None) -> str:
    dep = data["deployment"]
    findings = data["findings"]
    v = data["verdict"] or {}
    model = dep.get("model") or "unknown model"
    if data.get("instance") == "fleet":
        title = f"h1. diagnose: fleet of {len(v.get('ranking') or [])} replicas — {len(findings)} fleet finding(s)"
    elif data.get("instance"):
        title = f"h1. diagnose: replica {_text(data['instance'])} — {len(findings)} finding(s) for {_text(model)}"
    else:
        title = f"h1. diagnose: {len(findings)} finding(s) for {_text(model)} ({_text(dep.get('engine') or 'unknown engine')})"
    out = [title, ""]
    warnings = input_warnings(data["inputs"])
    if warnings:                    # first: what of the input was not read
        out += [f"bq. (!) {_text(w)}" for w in warnings] + [""]
    also = f" (also: {', '.join(_text(x) for x in v.get('also') or [])})" if v.get("also") else ""
    out.append(f"*Bottleneck verdict: {_code(v.get('bottleneck'))}*{also}")
    out += [f"* {_text(s)}" for s in v.get("signals", [])]
    if v.get("window"):
        out.append(f"* {_text(v['window'])}")
    where = launches_text(data)
    if where:
        out.append(f"* {_text(where)}")
    if v.get("ranking"):
        out.append(f"* replicas, worst first: {', '.join(_code(r) for r in v['ranking'])}")
    out.append("")
    input_notes = [f"* {_code(i['path'])}: {_text(e)}" for i in data["inputs"] for e in i.get("errors") or []]
    if input_notes:
        out += ["h2. Notes on the inputs", ""] + input_notes + [""]
    rows = summary_rows(dep)
    if rows:
        out += ["h2. Deployment", "", _row(["setting", "value"], header=True)]
        out += [_row([_text(k), _code(val)]) for k, val in rows]
        out.append("")
    rows = window_rows(data.get("signals"))
    if rows:
        out += ["h2. Over the whole window", "", _row(["figure", "value"], header=True)]
        out += [_row([_text(k), _text(val)]) for k, val in rows]
        out.append("")
    if data.get("sweep"):
        out += _sweep(data["sweep"])
    if findings:
        out += ["h2. Findings", "", _row(["#", "severity", "rule", "what is wrong", "fix"], header=True)]
        for i, f in enumerate(findings, 1):
            fx = ", ".join(_code(x) for x in fix_lines(f["fix"])) or _text(f["fix"].get("note") or f["fix_title"])
            out.append(_row([str(i), f["severity"], _code(f["id"]), _text(f["title"]), fx]))
        out.append("")
        for i, f in enumerate(findings, 1):
            out += [f"h3. {i}. {_code(f['id'])} — {_text(f['title'])}", ""]
            out.append(f"*{_text(f['fix_title'])}.* Severity {f['severity']}, confidence {f['confidence']}.")
            if f["impact"]:
                out.append(f"Impact: {_text(f['impact'])}")
            if f["fix"].get("note"):
                out.append(f"Note: {_text(f['fix']['note'])}")
            if f["fix_risk"]:
                out.append(f"Fix risk: {_text(f['fix_risk'])}")
            out += ["", "Evidence:"]
            out += _block([evidence_line(e) for e in f["evidence"]] or ["(derived from the signals above)"]) + [""]
    else:
        hint = nothing_read_hint(data)
        out += [_text(hint) if hint else "No findings.", ""]
    fix = data.get("fix")
    if fix and fix.get("command"):
        out += ["h2. Corrected launch command", ""] + _block(fix["command"].split("\n"), "code:bash") + [""]
    if timeline:
        lines = [f"{label:>13} {sparkline(timeline.get(key, []))}" for key, label in TIMELINE if timeline.get(key)]
        mark = stop_mark(data)
        out += ["h2. Timeline", ""] + _block(lines + ([f"{'end':>13} {mark}"] if mark else [])) + [""]
    noise = ((data.get("verdict") or {}).get("stopped") or {}).get("errors_after_examples")
    if noise:
        out += ["Errors printed while the server stopped (not a crash):"] + _block(noise) + [""]
    notes = [f"{_code(i['path'])}: {_text(coverage_detail(i))}" for i in data["inputs"]]
    out += ["----", "; ".join(notes) + f" · {len(data['not_applicable'])} rule(s) not applicable · diagnose {__version__}", ""]
    return "\n".join(out)


def render_run_head(parts: list[dict], skipped: list[dict]) -> str:
    """Before the deployments: the inputs left out, and with several deployments one row each."""
    out = []
    if len(parts) > 1:
        first = parts[0]["deployment"]
        heading = run_heading(parts)
        if heading.startswith(f"{len(parts)} deployments"):
            out += [f"h1. diagnose: {len(parts)} deployments", "",
                    "Different servers, or one server with different settings: each is diagnosed on its own below.", ""]
        else:                   # one disaggregated deployment: the system, then its nodes
            out += [f"h1. diagnose: {_text(heading.split(' — ')[0])}", "", _text(heading), ""]
        out.append(_row(["#", "deployment", "verdict", "findings", "differs from 1 in"], header=True))
        for i, d in enumerate(parts, 1):
            f = d["findings"]
            out.append(_row([str(i), _text(deployment_label(d)), _code((d["verdict"] or {}).get("bottleneck")),
                             f"{len(f)}{' (' + _code(f[0]['id']) + ')' if f else ''}",
                             _text(differences(first, d["deployment"]) if i > 1 else "")]))
        out.append("")
    if skipped:
        out += ["*Inputs left out:*", ""] + [f"* {_text(x)}" for x in skipped_lines(skipped)] + [""]
    return "\n".join(out) + ("\n----\n\n" if out else "")


def render_comparison(c: dict) -> str:
    out = ["", "h2. Compared with the baseline", ""]
    if c["config_changes"]:
        out += ["*Configuration changes* (these usually explain the rest):", "",
                _row(["setting", "before", "after"], header=True)]
        out += [_row([_text(x["key"]), _code(x["before"]), _code(x["after"])]) for x in c["config_changes"]]
        out.append("")
    ids = lambda xs: ", ".join(_code(i) for i in xs) or "none"
    out.append(f"Findings — fixed: {ids(c['fixed'])}; new: {ids(c['new'])}; unchanged: {ids(c['unchanged'])}.")
    if c.get("sweep"):
        sw = c["sweep"]
        out += ["", f"Load sweep knee ({sw['axis'].replace('_', ' ')}): {sw['knee_before']} → {sw['knee_after']}."]
    out += ["", _row(["signal", "before", "after", "change", "verdict"], header=True)]
    for name, s in c["signals"].items():
        ch = f"{s['change'] * 100:+.0f} %" if s.get("change") is not None else ""
        out.append(_row([_text(name), _text(s["before"]), _text(s["after"]), ch,
                         f"*{s['verdict']}*" + (f" ({_text(s['reason'])})" if s.get("reason") else "")]))
    out += ["", f"Verdict rule: {_text(c['rule'])}.", ""]
    return "\n".join(out)


def _sweep(sw: dict) -> list[str]:
    from .common import sweep_table
    header, rows, notes = sweep_table(sw)
    out = ["h2. Load sweep", "", _row([_text(h) for h in header], header=True)]
    out += [_row([_text(c) for c in r]) for r in rows]
    return out + [""] + [f"* {_text(n)}" for n in notes] + [""]
