"""Reports: the same analyses rendered for a terminal, a ticket (markdown for GitHub, Jira wiki markup), a machine (JSON, SARIF,
JUnit) or a browser (HTML).

Every file format is one entry of RENDERERS, all with one signature: `render(run) -> str`, where
`run` (ReportRun) holds everything a report may show. The terminal view is the default when no
file format is asked for (reports/terminal.py prints to a rich Console). A new format is one module
here and one line in RENDERERS."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ReportRun:
    analyses: list                      # pipeline.Analysis, one per deployment / replica
    parts: list                         # (the analysis as JSON, its timeline), same order
    doc: dict                           # the combined JSON document (schema version 2)
    rules: list                         # every rule loaded
    comparison: dict | None = None      # --baseline
    suppressions: list = field(default_factory=list)
    before: object | None = None        # the baseline's Analysis, when it was diagnosed in this run


def _json(run: ReportRun) -> str:
    from .json_report import render
    doc = dict(run.doc, suppressions=run.suppressions)
    if run.comparison is not None:
        doc["comparison"] = run.comparison
    return render(doc)


def _ticket(run: ReportRun, mk) -> str:
    from . import ticket
    text = ticket.render_run_head(mk, [d for d, _ in run.parts], run.doc.get("skipped") or [])
    text += f"\n{mk.rule}\n\n".join(ticket.render(mk, d, t) for d, t in run.parts)
    return text + (ticket.render_comparison(mk, run.comparison) if run.comparison is not None else "")


def _markdown(run: ReportRun) -> str:
    from .markdown import MARKUP
    return _ticket(run, MARKUP)


def _jira(run: ReportRun) -> str:
    from .jira import MARKUP
    return _ticket(run, MARKUP)


def _sarif(run: ReportRun) -> str:
    from .sarif import render
    return render(run.analyses, run.rules, run.doc.get("skipped") or [])


def _junit(run: ReportRun) -> str:
    from .junit import render
    return render(run.analyses, run.rules, {i["id"]: i["reason"] for i in run.suppressions if i["status"] == "active"},
                  run.doc.get("skipped") or [])


def _html(run: ReportRun) -> str:
    from ..signals.series import plot_marks, plot_series
    from .html import render
    return render([(d, plot_series(a.evidence), plot_marks(a.evidence, a.signals, d["findings"]))
                   for (d, _), a in zip(run.parts, run.analyses)], run.comparison,
                  before=plot_series(run.before.evidence) if run.before is not None else None,
                  skipped=run.doc.get("skipped") or [])


RENDERERS = {"json": _json, "markdown": _markdown, "jira": _jira, "sarif": _sarif, "junit": _junit, "html": _html}
