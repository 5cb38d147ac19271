"""`--format jira`: the markdown ticket in Jira wiki markup (reports/ticket.py writes it; here, how
the wiki markup writes each part) (Jira Server / Data Center, and Cloud's
wiki-markup editor): `h2.` headings, `||` header rows and `|` rows, `{{code}}`, `{code}` and
`{noformat}` blocks. Jira has no folding, so the evidence is a `{noformat}` block under its
finding."""
from __future__ import annotations

import re

from functools import partial

from . import ticket
from .common import printable
from .ticket import Markup

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


class JiraMarkup(Markup):
    rule = "----"

    text = staticmethod(_text)
    code = staticmethod(_code)

    def heading(self, level: int, s: str) -> str:
        return f"h{level}. {s}"

    def bullet(self, s: str) -> str:
        return "* " + s

    def warn(self, s: str) -> str:
        return "bq. (!) " + s

    def bold(self, s: str) -> str:
        return f"*{s}*"

    def table(self, header, rows, numeric=False):
        return [_row(header, header=True)] + [_row(r) for r in rows]

    def block(self, lines, lang=""):
        return _block(lines, f"code:{lang}" if lang else "noformat")

    def folded(self, summary, lines):
        return [f"{summary}:"] + _block(lines) + [""]      # Jira has no folding

    def footer(self, s: str) -> list[str]:
        return ["----", s]


MARKUP = JiraMarkup()
render = partial(ticket.render, MARKUP)
render_run_head = partial(ticket.render_run_head, MARKUP)
render_comparison = partial(ticket.render_comparison, MARKUP)
