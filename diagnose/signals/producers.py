"""Signal producers declare the signals they make, as recording rules name their expressions.

    @produces("running_mean", "kv_usage_p95", flags=("all_idle",), texts=("stopped_text",))
    def levels(ev, s, w): ...

Positional names are numbers whose unit the name's ending says (the project's naming convention,
`UNITS`); `flags` are true/false, `texts` text. The declarations are the signal catalogue:
scripts/signal-catalogue writes diagnose/data/signals.toml from them, rules are checked against
it when they load, and tests run every fixture with `CHECK` on, so a producer that writes a signal
it does not declare fails there rather than reaching a rule unannounced.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# What a signal's source says, by the module that makes it (the rest: the engine's own evidence).
SOURCE_OF_MODULE = {
    "diagnose.signals.gpu": "GPU samples",
    "diagnose.signals.fleet": "fleet (several replicas)",
    "diagnose.signals.disaggregated": "disaggregated system (prefill + decode nodes)",
    "diagnose.signals.sweep": "load sweep (benchmark results)",
    "diagnose.targets": "--targets",
    "facts": "fact (log, launch arguments or config)",
}
DEFAULT_SOURCE = "engine log / metrics"
# Unit by the name's ending, first match wins.
_UNIT_NAMES = [(r"_s$", "s"), (r"_ms$", "ms"), (r"(^|_)tps(_|$)|_tps_", "tokens/s"), (r"_gib", "GiB"), (r"_mhz$", "MHz"),
               (r"_w$", "W"), (r"(^|_)(share|frac|ratio|cv|corr|r2)(_|$)", "fraction 0-1"),
               (r"kv_usage|util|_pct|prefix_hit|spread", "%"), (r"_b$", "billion parameters"), (r"_x$", "×"),
               (r"(count|total|samples|run_max|_lines|size|seqs|tokens|len|engines|nodes|instances|replicas|"
                r"peak|rejections|sequences|blocks|_max|_mean|_p\d+)", "number")]
UNITS = [(re.compile(rx), u) for rx, u in _UNIT_NAMES]     # ~2,000 names a run: no cache lookup each


@dataclass(frozen=True)
class Producer:
    name: str              # module.function
    module: str
    makes: dict            # signal -> unit
    said: str | None = None   # where its signals come from, when not its module's

    @property
    def source(self) -> str:
        return self.said or SOURCE_OF_MODULE.get(self.module, DEFAULT_SOURCE)


PRODUCERS: list[Producer] = []
# On in tests (and scripts/signal-catalogue --check): each producer's writes are compared with
# its declaration. Off in a run: a diagnosis pays nothing for it.
CHECK = False
FOUND: dict = {}       # CHECK == "collect": producer -> {signal: type name} written but not declared


class Undeclared(AssertionError):
    pass


def unit_of(name: str) -> str:
    for rx, u in UNITS:
        if rx.search(name):
            return u
    return "number"


def declare(name: str, module: str, numbers=(), flags=(), texts=(), units: dict | None = None,
            source: str | None = None) -> Producer:
    """Declares a producer that cannot carry the decorator (a lower layer's function, a dict copy)."""
    makes = {n: unit_of(n) for n in numbers}
    makes.update({n: "true/false" for n in flags})
    makes.update({n: "text" for n in texts})
    makes.update(units or {})
    p = Producer(name, module, makes, source)
    PRODUCERS.append(p)
    return p


def produces(*numbers: str, flags=(), texts=(), units: dict | None = None, source: str | None = None):
    """Registers the function as the producer of these signals. The function writes into the
    values of the `Signals` given as its second argument, or returns a dict of signal values."""
    def wrap(fn):
        p = declare(f"{fn.__module__}.{fn.__qualname__}", fn.__module__, numbers, flags, texts, units, source)

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            if not CHECK:
                return fn(*args, **kwargs)
            target = args[1] if len(args) > 1 and isinstance(args[1], dict) else \
                getattr(args[1], "values", None) if len(args) > 1 else None
            before = dict(target) if isinstance(target, dict) else None
            out = fn(*args, **kwargs)
            after = out if isinstance(out, dict) else target
            if isinstance(after, dict):
                wrote = [k for k, x in after.items() if before is None or k not in before or before[k] is not x]
                extra = sorted(k for k in wrote if k not in p.makes)
                if CHECK == "collect":
                    for k in extra:
                        if after[k] is not None or k not in FOUND.get(p.name, {}):
                            FOUND.setdefault(p.name, {})[k] = type(after[k]).__name__
                elif extra:
                    raise Undeclared(f"{p.name} writes signals it does not declare: {', '.join(extra)}")
            return out
        checked.producer = p
        return checked
    return wrap


def catalogue() -> dict[str, dict]:
    """Every declared signal: name -> {unit, source}; the first producer to declare a name gives
    its source (the producers import in pipeline order, the engine's evidence first)."""
    _import_all()
    out: dict[str, dict] = {}
    for p in PRODUCERS:
        for name, unit in p.makes.items():
            out.setdefault(name, {"unit": unit, "source": p.source})
    return out


def _import_all() -> None:
    # the modules whose producers are the catalogue, in the order a diagnosis runs them
    from . import derive, gpu, sweep, fleet, disaggregated   # noqa: F401
