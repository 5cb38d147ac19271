"""`--format terminal` (default): verdict line, deployment summary, ranked findings with their
evidence and a fix block, and a compact timeline.

Every string of the report passes `printable` first (no control character, so no escape sequence
from a file name or a log line reaches the terminal) and rich's `escape` where it is printed (a
`[bold]` in a file name is text, not markup)."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

# The width of a console that wraps nothing (stdout a pipe or a file, no COLUMNS): boxes fit their text.
UNWRAPPED = 100_000

from .common import (TIMELINE, stop_mark, coverage_summary, evidence_line, fix_lines, input_warnings, launches_text,
                     nothing_read_hint, printable, printable_tree, sparkline, summary_rows, window_rows)

COLOURS = {"critical": "bold white on red", "high": "bold red", "medium": "yellow", "low": "cyan", "info": "dim"}


def _safe(data: dict) -> dict:
    """The report with every string printable; the launch command keeps its line breaks."""
    command = (data.get("fix") or {}).get("command")
    out = printable_tree(data)
    if command:
        out["fix"] = dict(out["fix"], command=printable(command, newlines=True))
    return out


def render(data: dict, console: Console, timeline: dict | None = None, verbose: bool = False) -> None:
    data = _safe(data)
    v = data["verdict"] or {}
    dep = data["deployment"]
    for w in input_warnings(data["inputs"]):       # first: what of the input was not read
        console.print(f"[bold yellow]⚠ {escape(w)}[/bold yellow]")
    also = f"  [dim](also: {escape(', '.join(v.get('also') or []))})[/dim]" if v.get("also") else ""
    console.print(f"[bold]Bottleneck:[/bold] [bold magenta]{escape(str(v.get('bottleneck')))}[/bold magenta]{also}")
    for s in v.get("signals", []):
        console.print(f"  · {escape(s)}")
    if v.get("window"):
        console.print(f"  [dim]· {escape(v['window'])}[/dim]")
    where = launches_text(data)
    if where:
        console.print(f"  [dim]· {escape(where)}[/dim]")
    several = len(data["inputs"]) > 1
    for inp in data["inputs"]:      # what the verdict rests on: `partial data (--partial): …`, a widened step
        for note in inp.get("errors") or []:
            console.print(f"  [yellow]note:[/yellow] {escape(inp['path'] + ': ' if several else '')}{escape(note)}")
    rows = summary_rows(dep)
    if rows:
        t = Table(show_header=False, box=None, padding=(0, 1), title="Deployment", title_justify="left")
        for k, val in rows:
            t.add_row(f"[dim]{escape(k)}[/dim]", escape(val))
        console.print(t)
    rows = window_rows(data.get("signals"))
    if rows:
        t = Table(show_header=False, box=None, padding=(0, 1), title="Over the whole window", title_justify="left")
        for k, val in rows:
            t.add_row(f"[dim]{escape(k)}[/dim]", escape(val))
        console.print(t)
    if data.get("sweep"):
        from .common import sweep_table
        header, srows, notes = sweep_table(data["sweep"])
        t = Table(title="Load sweep", title_justify="left", box=None, padding=(0, 1))
        for i, h in enumerate(header):
            t.add_column(escape(h), justify="right" if 0 < i < len(header) - 1 else "left")
        for r in srows:
            t.add_row(*[escape(c) for c in r])
        console.print(t)
        for n in notes:
            console.print(f"  [dim]· {escape(n)}[/dim]")
    findings = data["findings"]
    if not findings:
        hint = nothing_read_hint(data)
        console.print(f"[yellow]{escape(hint)}[/yellow]" if hint else "[green]No findings.[/green]")
    for i, f in enumerate(findings, 1):
        head = (f"[{COLOURS[f['severity']]}]{f['severity'].upper()}[/] [bold]{escape(f['id'])}[/bold] "
                f"[dim]({escape(str(f['confidence']))} confidence)[/dim]")
        body = [escape(f["title"])]
        for e in f["evidence"][:6]:
            body.append(f"  [dim]│[/dim] {escape(evidence_line(e)[:300])}")
        fx = fix_lines(f["fix"])
        body.append(f"[green]→ {escape(f['fix_title'])}[/green]" + (f": [bold]{escape(' '.join(fx))}[/bold]" if fx else ""))
        if f["fix"].get("note"):
            body.append(f"  [dim]{escape(f['fix']['note'])}[/dim]")
        if f["impact"]:
            body.append(f"  impact: {escape(f['impact'])}")
        if f["fix_risk"]:
            body.append(f"  [dim]risk: {escape(f['fix_risk'])}[/dim]")
        # The title as Text without emoji codes (a str title is read with them, and their table
        # costs ~3 ms to import): an id, a severity and a confidence hold no `:name:`.
        title = Text.from_markup(f"{i}. {head}", emoji=False)
        console.print(Panel("\n".join(body), title=title, title_align="left", expand=console.width < UNWRAPPED))
    fix = data.get("fix")
    if fix and fix.get("command"):
        console.print("[bold]Corrected launch command[/bold]")
        console.print(escape(fix["command"]), soft_wrap=True)
    if timeline and any(timeline.values()):
        console.print("[bold]Timeline[/bold] [dim](each stats sample; idle included)[/dim]")
        for key, label in TIMELINE:
            if timeline.get(key):
                console.print(f"  {label:>13} {sparkline(timeline[key])}  [dim]max {max(timeline[key]):g}[/dim]")
        mark = stop_mark(data)
        if mark:
            console.print(f"  {'end':>13} {escape(mark)}")
    for inp in data["inputs"]:
        console.print(f"[dim]{escape(coverage_summary(inp))}[/dim]")
    if data["errors"]:
        for e in data["errors"]:
            console.print(f"[red]rule error[/red] {escape(str(e['id']))}: {escape(e['error'])}")
    for sup in data.get("suppressions") or []:
        if sup["status"] == "expired":
            console.print(f"[yellow]suppression of {escape(str(sup['id']))} expired on {escape(str(sup['expires']))}: "
                          "it reports again[/yellow]")
    if verbose:
        st = v.get("stopped") or {}
        for x in st.get("errors_after_examples") or []:
            console.print(f"[dim]after the stop (not a crash): {escape(x[:300])}[/dim]")
        for na in data["not_applicable"]:
            console.print(f"[dim]not applicable: {escape(str(na['id']))} — {escape(na['reason'])}[/dim]")
    else:
        console.print(f"[dim]{len(data['not_applicable'])} rule(s) not applicable (--verbose lists them)[/dim]")


def render_comparison(c: dict, console: Console) -> None:
    c = printable_tree(c)
    console.print("[bold]Compared with the baseline[/bold]")
    for x in c["config_changes"]:
        console.print(f"  config {escape(str(x['key']))}: {escape(str(x['before']))} → {escape(str(x['after']))}")
    console.print(escape(f"  fixed: {', '.join(c['fixed']) or 'none'} · new: {', '.join(c['new']) or 'none'}"
                         f" · unchanged: {', '.join(c['unchanged']) or 'none'}"))
    colour = {"better": "green", "worse": "red", "unchanged": "dim", "inconclusive": "yellow"}
    for name, s in c["signals"].items():
        ch = f"{s['change'] * 100:+.0f} %" if s.get("change") is not None else ""
        why = f" [dim]({escape(s['reason'])})[/dim]" if s.get("reason") else ""
        figures = f"  {name:>22} {s['before']!s:>10} → {s['after']!s:<10} {ch:>7}  "
        console.print(f"{escape(figures)}[{colour[s['verdict']]}]{s['verdict']}[/]{why}")
    if c.get("sweep"):
        sw = c["sweep"]
        console.print(f"  load sweep knee ({sw['axis'].replace('_', ' ')}): {sw['knee_before']} → {sw['knee_after']}")
    console.print(f"[dim]  verdict rule: {escape(c['rule'])}[/dim]")
