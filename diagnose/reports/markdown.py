"""`--format markdown`: a ticket for GitHub or GitLab (reports/ticket.py writes it; here, how
Markdown writes each part). Headline, verdict, findings table, evidence folded in <details>, and the
corrected launch command as a code block."""
from __future__ import annotations

import re

from functools import partial

from . import ticket
from .common import printable
from .ticket import Markup


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


class MarkdownMarkup(Markup):
    rule = "---"

    text = staticmethod(_cell)
    code = staticmethod(_code)

    def ident(self, s) -> str:
        return f"`{s}`"             # an id or a verdict: words and dashes

    def heading(self, level: int, s: str) -> str:
        return "#" * level + " " + s

    def bullet(self, s: str) -> str:
        return "- " + s

    def warn(self, s: str) -> str:
        return "> ⚠ " + s

    def bold(self, s: str) -> str:
        return f"**{s}**"

    def table(self, header, rows, numeric=False):
        sep = "|" + "---:|" * (len(header) - 1) + "---|" if numeric else "|" + "---|" * len(header)
        return ["| " + " | ".join(header) + " |", sep] + ["| " + " | ".join(r) + " |" for r in rows]

    def block(self, lines, lang=""):
        return _fence(lines, lang)

    def folded(self, summary, lines):
        return [f"<details><summary>{summary}</summary>", ""] + _fence(lines) + ["", "</details>", ""]

    def small(self, s: str) -> str:
        return f"<sub>{s}</sub>"

    def footer(self, s: str) -> list[str]:
        return [self.small(s)]


MARKUP = MarkdownMarkup()
render = partial(ticket.render, MARKUP)
render_run_head = partial(ticket.render_run_head, MARKUP)
render_comparison = partial(ticket.render_comparison, MARKUP)
