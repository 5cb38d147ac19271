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

from types import MappingProxyType

_EMPTY = MappingProxyType({})      # read-only: a default shared by every engine


class Header:
    """What an engine's logger header says: its format, where the message starts, level, time and
    tags. `stamp` is (month, day, "HH:MM:SS") for headers without a year; `date` is "YYYY-MM-DD"
    where the header has one. (A plain class: a NamedTuple costs 1–2 ms to create, every run.)"""
    __slots__ = ("fmt", "end", "level", "stamp", "date", "hms", "tags")

    def __init__(self, fmt: str, end: int, level: str | None = None, stamp: tuple | None = None,
                 date: str | None = None, hms: str | None = None, tags: str = "") -> None:
        self.fmt, self.end, self.level, self.stamp = fmt, end, level, stamp
        self.date, self.hms, self.tags = date, hms, tags


class Engine:
    """An engine's spec: `Engine(name=..., ...)`; what is not given keeps the defaults below.
    A plain class, not a dataclass: it is built on every run, and a frozen dataclass of this
    size costs 4 ms to create."""
    name = ""                   # as rule files and reports name it
    header = None               # header.match: text -> Header | None
    formats = ()                # the header formats (lineprefix's Line.fmt) its lines carry
    keywords = ()               # every line its parser acts on holds one of these (scanner)
    file_markers = ()           # bytes that make a whole-file input (JSON, YAML) this engine's
    # Launches (sources/launches.py): a line that starts a server, once per launch (`launch`) or
    # once per process of one launch (`process_start`: each data-parallel engine, each MPI rank).
    launch = None               # regex source, searched in a line's message
    process_start = None
    launch_hints = ()           # literal text one of those lines holds (the regexes run only there)
    # Coverage (sources/coverage.py): phrases of lines its parser always reads (a line holding one
    # that no parser took shows a format the parser does not know yet), and its logger header as
    # found anywhere in a raw line (for lines the parsers never see).
    expects = ()
    shape = None                # regex source
    # An orderly stop in its own words (engines/common.py: errors after it are the stop's, not a
    # crash), and literal text each of those lines holds.
    stopping = None             # regex source
    stop_hints = ()
    # Prometheus: metric-name prefixes that say which engine a scrape is from, and its metrics by
    # kind, in the shapes sources/prometheus.py documents for each table
    metric_prefixes = ()
    gauges = _EMPTY
    labelled_gauges = _EMPTY
    counters = _EMPTY
    ratios = _EMPTY
    histograms = _EMPTY
    stage_histograms = _EMPTY
    fact_gauges = _EMPTY
    # counters judged over the whole window only (their increase): metric -> (key, label whose
    # values split it, or None) — finished requests by reason, aborted requests
    window_counters = _EMPTY
    # The launch command: how it starts, flag spellings that mean the same, and the facts that
    # become flags when only a config dump is known: (fact, flag, default)
    command = ""
    model_flag = ""             # the flag before the model, where it is not the first argument
    flag_sep = "-"              # `--max-num-seqs`; trtllm-serve spells its flags with `_`
    aliases = _EMPTY
    flags_from_facts = ()
    # How a fix a rule states by fact (`[fix.facts] set = { max_num_seqs = "64" }`) is spelled on
    # this engine's command line: fact -> flag taking the value, or (flag, value it means when
    # present) for a switch (`("--enforce-eager", True)`: present means the fact is true). Facts of
    # `flags_from_facts` with a flag taking a value are included.
    fact_flags = _EMPTY
    # A fact's value as this engine's flag spells it, where it differs: fact -> {value: spelling}
    # (`{"kv_cache_dtype": {"fp8": "fp8_e4m3"}}`).
    fact_values = _EMPTY

    def flag_for(self, fact: str):
        spec = self.fact_flags.get(fact)
        if spec is not None:
            return spec
        for f, flag, default in self.flags_from_facts:
            if f == fact and not isinstance(default, bool):
                return flag
        return None

    def __init__(self, **spec) -> None:
        for k, v in spec.items():
            if not hasattr(Engine, k) or k.startswith("_"):
                raise TypeError(f"Engine: unknown field `{k}`")
            setattr(self, k, v)

    def parser(self):
        """A new line parser for one input (imported on first use: lines.py needs lineprefix,
        which needs every engine's header). Each launch gets its own: the class is looked up once."""
        cls = self.__dict__.get("_parser_class")
        if cls is None:
            import importlib
            cls = self._parser_class = importlib.import_module(f"{__name__}.{self.name}.lines").Parser
        parser = cls()
        parser.engine = self.name       # the name is the registry's: declared once, here
        return parser


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
