"""One folder per engine: what makes vLLM, SGLang and TensorRT-LLM each themselves.

Each `engines/<name>/` holds
- `__init__.py`: the engine's `ENGINE` spec — its name, the header formats its lines carry, the
  scanner keywords its lines hold, its Prometheus metric names, its flag names and how its
  launch command starts;
- `header.py`: the shape of its logger's line header (`match(text)`), peeled by lineprefix;
- `lines.py`: its line parser (`Parser`), offered every line that matters.

Adding an engine is one folder like these plus one entry in _registry() below; the rest of the
package (the readers, the Prometheus loader, the command builder, rule files' `engines`) reads
this registry.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import NamedTuple


class Header(NamedTuple):
    """What an engine's logger header says: its format, level, time, tags, and where the
    message starts. `stamp` is (month, day, "HH:MM:SS") for headers without a year; `date`
    is "YYYY-MM-DD" where the header has one."""
    fmt: str
    end: int
    level: str | None = None
    stamp: tuple | None = None
    date: str | None = None
    hms: str | None = None
    tags: str = ""


@dataclass(frozen=True)
class Engine:
    name: str                       # as rule files and reports name it
    header: object = None           # header.match: text -> Header | None
    formats: tuple = ()             # the header formats (lineprefix's Line.fmt) its lines carry
    keywords: tuple = ()            # every line its parser acts on holds one of these (scanner)
    # Prometheus: metric-name prefixes that say which engine a scrape is from, and its metrics by
    # kind, in the shapes sources/prometheus.py documents for each table
    metric_prefixes: tuple = ()
    gauges: dict = field(default_factory=dict)
    labelled_gauges: dict = field(default_factory=dict)
    counters: dict = field(default_factory=dict)
    ratios: dict = field(default_factory=dict)
    histograms: dict = field(default_factory=dict)
    stage_histograms: dict = field(default_factory=dict)
    fact_gauges: dict = field(default_factory=dict)
    # The launch command: how it starts, flag spellings that mean the same, and the facts that
    # become flags when only a config dump is known: (fact, flag, default)
    command: str = ""
    model_flag: str = ""            # the flag before the model, where it is not the first argument
    flag_sep: str = "-"             # `--max-num-seqs`; trtllm-serve spells its flags with `_`
    aliases: dict = field(default_factory=dict)
    flags_from_facts: tuple = ()

    def parser(self):
        """A new line parser for one input (imported on first use: lines.py needs lineprefix,
        which needs every engine's header)."""
        return importlib.import_module(f"{__name__}.{self.name}.lines").Parser()


def _registry() -> dict[str, Engine]:
    from . import sglang, trtllm, vllm
    # The order is the order parsers are offered a line whose header says nothing.
    return {e.name: e for e in (vllm.ENGINE, sglang.ENGINE, trtllm.ENGINE)}


ENGINES: dict[str, Engine] = _registry()
NAMES = tuple(ENGINES)


def merged(table: str) -> dict:
    """One Prometheus table over every engine (`gauges`, `counters`, …)."""
    out: dict = {}
    for e in ENGINES.values():
        out.update(getattr(e, table))
    return out
