"""What every line format is: a reader per input that opens regions, reads them, and ends them.

A text input is a sequence of regions. The log loop (sources/loading.py) offers each line to the
open region first; when the region does not take it, the region ends and the line is offered to
every format's `open` (only lines holding one of the format's `keywords`, or any line where the
format is `armed`: rows of a capture that a server's lines interrupted), then to the engines.
"""
from __future__ import annotations


class LineFormat:
    """A line format: its name in the coverage report, the literal text its opening lines hold
    (the scanners hand such lines to Python on big logs too), and a reader for one input."""
    kind = ""
    keywords: tuple[str, ...] = ()

    def reader(self, src: str, info) -> "FormatReader":
        raise NotImplementedError


class FormatReader:
    """One input's reader of one format. `open` reads a region's first line; `more` each next line
    (False: the line is not the region's, which then ends: `end`); `finish` at the input's end."""
    kind = ""
    armed = False       # a line without any keyword may still open a region (see LineFormat)

    def open(self, n: int, text: str, ev) -> bool:
        raise NotImplementedError

    def more(self, n: int, text: str) -> bool:
        return False

    def end(self) -> None:
        pass

    def finish(self) -> None:
        pass
