"""The ticket formats, `--format markdown` and `--format jira`: one report in two markups. What a
ticket says and in which order is here; markdown.py and jira.py say how their markup writes a
heading, a table, a block and text from a log (escaped so that it stays text)."""
from __future__ import annotations

from .. import __version__
from .common import (TIMELINE, coverage_detail, deployment_label, differences, evidence_line, fix_lines,
                     input_warnings, launches_text, nothing_read_hint, run_heading, skipped_lines, sparkline,
                     stop_mark, summary_rows, window_rows)


class Markup:
    """How one markup writes each part of a ticket. `text` (one line of text from a log, inert),
    `code` (inline monospace of any text) and `ident` (a rule id or verdict, monospace) escape;
    the others are given escaped text."""

    rule = "---"                    # between the run's head and each deployment

    def text(self, s) -> str:
        raise NotImplementedError

    def code(self, s) -> str:
        raise NotImplementedError

    def ident(self, s) -> str:
        return self.code(s)

    def heading(self, level: int, s: str) -> str:
        raise NotImplementedError

    def bullet(self, s: str) -> str:
        raise NotImplementedError

    def warn(self, s: str) -> str:
        raise NotImplementedError

    def bold(self, s: str) -> str:
        raise NotImplementedError

    def table(self, header: list[str], rows: list[list[str]], numeric: bool = False) -> list[str]:
        """`numeric`: every column but the last holds numbers (right-aligned where the markup can)."""
        raise NotImplementedError

    def block(self, lines: list[str], lang: str = "") -> list[str]:
        """Literal lines (printable, nothing inside can close the block)."""
        raise NotImplementedError

    def folded(self, summary: str, lines: list[str]) -> list[str]:
        """A block under its summary, folded where the markup can fold."""
        raise NotImplementedError

    def small(self, s: str) -> str:
        return s

    def footer(self, s: str) -> list[str]:
        raise NotImplementedError


def render(mk: Markup, data: dict, timeline: dict | None = None) -> str:
    dep = data["deployment"]
    findings = data["findings"]
    v = data["verdict"] or {}
    model = dep.get("model") or "unknown model"
    t = mk.text
    if data.get("instance") == "fleet":
        title = f"diagnose: fleet of {len(v.get('ranking') or [])} replicas — {len(findings)} fleet finding(s)"
    elif data.get("instance"):
        title = f"diagnose: replica {t(data['instance'])} — {len(findings)} finding(s) for {t(model)}"
    else:
        title = f"diagnose: {len(findings)} finding(s) for {t(model)} ({t(dep.get('engine') or 'unknown engine')})"
    out = [mk.heading(1, title), ""]
    warnings = input_warnings(data["inputs"])
    if warnings:                    # first: what of the input was not read
        out += [mk.warn(t(w)) for w in warnings] + [""]
    also = f" (also: {', '.join(t(x) for x in v.get('also') or [])})" if v.get("also") else ""
    out.append(mk.bold(f"Bottleneck verdict: {mk.ident(v.get('bottleneck'))}") + also)
    out += [mk.bullet(t(s)) for s in v.get("signals", [])]
    if v.get("window"):
        out.append(mk.bullet(t(v["window"])))
    where = launches_text(data)
    if where:
        out.append(mk.bullet(t(where)))
    if v.get("ranking"):
        out.append(mk.bullet(f"replicas, worst first: {', '.join(mk.code(r) for r in v['ranking'])}"))
    out.append("")
    # what the verdict rests on: `partial data (--partial): …`, a widened step
    input_notes = [mk.bullet(f"{mk.code(i['path'])}: {t(e)}") for i in data["inputs"] for e in i.get("errors") or []]
    if input_notes:
        out += [mk.heading(2, "Notes on the inputs"), ""] + input_notes + [""]
    rows = summary_rows(dep)
    if rows:
        out += [mk.heading(2, "Deployment"), ""] + mk.table(["setting", "value"], [[t(k), mk.code(val)] for k, val in rows])
        out.append("")
    rows = window_rows(data.get("signals"))
    if rows:
        out += [mk.heading(2, "Over the whole window"), ""] + mk.table(["figure", "value"], [[t(k), t(val)] for k, val in rows])
        out.append("")
    if data.get("sweep"):
        out += _sweep(mk, data["sweep"])
    if findings:
        table = []
        for i, f in enumerate(findings, 1):
            fx = ", ".join(mk.code(x) for x in fix_lines(f["fix"])) or t(f["fix"].get("note") or f["fix_title"])
            table.append([str(i), f["severity"], mk.ident(f["id"]), t(f["title"]), fx])
        out += [mk.heading(2, "Findings"), ""] + mk.table(["#", "severity", "rule", "what is wrong", "fix"], table)
        out.append("")
        for i, f in enumerate(findings, 1):
            out += [mk.heading(3, f"{i}. {mk.ident(f['id'])} — {t(f['title'])}"), ""]
            out.append(f"{mk.bold(t(f['fix_title']) + '.')} Severity {f['severity']}, confidence {f['confidence']}.")
            if f["impact"]:
                out.append(f"Impact: {t(f['impact'])}")
            if f["fix"].get("note"):
                out.append(f"Note: {t(f['fix']['note'])}")
            if f["fix_risk"]:
                out.append(f"Fix risk: {t(f['fix_risk'])}")
            out += [""] + mk.folded("Evidence", [evidence_line(e) for e in f["evidence"]]
                                    or ["(derived from the signals above)"])
    else:
        hint = nothing_read_hint(data)
        out += [t(hint) if hint else "No findings.", ""]
    fix = data.get("fix")
    if fix and fix.get("command"):
        out += [mk.heading(2, "Corrected launch command"), ""] + mk.block(fix["command"].split("\n"), "bash") + [""]
    if timeline:
        lines = [f"{label:>13} {sparkline(timeline.get(key, []))}" for key, label in TIMELINE if timeline.get(key)]
        mark = stop_mark(data)
        out += [mk.heading(2, "Timeline"), ""] + mk.block(lines + ([f"{'end':>13} {mark}"] if mark else [])) + [""]
    noise = ((data.get("verdict") or {}).get("stopped") or {}).get("errors_after_examples")
    if noise:
        out += mk.folded("Errors printed while the server stopped (not a crash)", noise)
    notes = [f"{mk.code(i['path'])}: {t(coverage_detail(i))}" for i in data["inputs"]]
    out += mk.footer("; ".join(notes) + f" · {len(data['not_applicable'])} rule(s) not applicable · diagnose {__version__}")
    out.append("")
    return "\n".join(out)


def render_run_head(mk: Markup, parts: list[dict], skipped: list[dict]) -> str:
    """Before the deployments: the inputs left out, and with several deployments one row each."""
    out = []
    t = mk.text
    if len(parts) > 1:
        first = parts[0]["deployment"]
        heading = run_heading(parts)
        if heading.startswith(f"{len(parts)} deployments"):
            out += [mk.heading(1, f"diagnose: {len(parts)} deployments"), "",
                    "Different servers, or one server with different settings: each is diagnosed on its own below.", ""]
        else:                   # one disaggregated deployment: the system, then its nodes
            out += [mk.heading(1, f"diagnose: {t(heading.split(' — ')[0])}"), "", t(heading), ""]
        rows = []
        for i, d in enumerate(parts, 1):
            f = d["findings"]
            rows.append([str(i), t(deployment_label(d)), mk.ident((d["verdict"] or {}).get("bottleneck")),
                         f"{len(f)}{' (' + mk.code(f[0]['id']) + ')' if f else ''}",
                         t(differences(first, d["deployment"]) if i > 1 else "")])
        out += mk.table(["#", "deployment", "verdict", "findings", "differs from 1 in"], rows)
        out.append("")
    if skipped:
        out += [mk.bold("Inputs left out:"), ""] + [mk.bullet(t(x)) for x in skipped_lines(skipped)] + [""]
    return "\n".join(out) + (f"\n{mk.rule}\n\n" if out else "")


def render_comparison(mk: Markup, c: dict) -> str:
    t = mk.text
    out = ["", mk.heading(2, "Compared with the baseline"), ""]
    if c["config_changes"]:
        out += [mk.bold("Configuration changes") + " (these usually explain the rest):", ""]
        out += mk.table(["setting", "before", "after"],
                        [[t(x["key"]), mk.code(x["before"]), mk.code(x["after"])] for x in c["config_changes"]])
        out.append("")
    ids = lambda xs: ", ".join(mk.ident(i) for i in xs) or "none"
    out.append(f"Findings — fixed: {ids(c['fixed'])}; new: {ids(c['new'])}; unchanged: {ids(c['unchanged'])}.")
    if c.get("sweep"):
        sw = c["sweep"]
        out += ["", f"Load sweep knee ({sw['axis'].replace('_', ' ')}): {sw['knee_before']} → {sw['knee_after']}."]
    rows = []
    for name, s in c["signals"].items():
        ch = f"{s['change'] * 100:+.0f} %" if s.get("change") is not None else ""
        rows.append([t(name), t(s["before"]), t(s["after"]), ch,
                     mk.bold(s["verdict"]) + (f" ({t(s['reason'])})" if s.get("reason") else "")])
    out += [""] + mk.table(["signal", "before", "after", "change", "verdict"], rows)
    out += ["", mk.small(f"Verdict rule: {t(c['rule'])}."), ""]
    return "\n".join(out)


def _sweep(mk: Markup, sw: dict) -> list[str]:
    from .common import sweep_table
    header, rows, notes = sweep_table(sw)
    out = [mk.heading(2, "Load sweep"), ""]
    out += mk.table([mk.text(h) for h in header], [[mk.text(c) for c in r] for r in rows], numeric=True)
    return out + [""] + [mk.bullet(mk.text(n)) for n in notes] + [""]
