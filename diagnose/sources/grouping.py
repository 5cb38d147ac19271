"""Several inputs, several deployments: inputs written by different engines are analysed apart."""
from __future__ import annotations

from ..evidence.model import Evidence
from .engines import ENGINES
from .formats.gpu import sniff_gpu
from .loading import load_one, load
from .prometheus import ENGINE_OF, sniff_prometheus
from .readers.files import Input, InputError
from .sniff import SNIFF_BYTES
from .formats.structured import sniff
from .readers.unreadable import blank_unreadable

def load_groups(inputs: list[Input], year: int | None = None, **kw) -> list[Evidence]:
    """One Evidence per deployment: inputs are grouped by the engine that wrote them.

    Inputs of no engine (NCCL-only excerpts, configs without engine keys) join the only engine
    group when there is one."""
    if len(inputs) <= 1:
        return [load(inputs, year, **kw)]
    by_engine: dict[str | None, list[Input]] = {}
    for inp in inputs:
        by_engine.setdefault(sniff_engine(inp, year), []).append(inp)
    engines = [e for e in by_engine if e is not None]
    if len(engines) <= 1:
        return [load(inputs, year, **kw)]
    groups = [by_engine[e] for e in engines]
    if None in by_engine:
        groups.append(by_engine[None])
    return [load(g, year, **kw) for g in groups]


def sniff_engine(inp: Input, year) -> str | None:
    if inp.path == "-":
        return None
    try:
        probe = Evidence()
        head = next(iter(inp.blocks()), b"")[:SNIFF_BYTES]
        clean = blank_unreadable(head)[0]
        if sniff_gpu(clean):
            return None
        pk = sniff_prometheus(clean)
        if pk:
            for prefix, eng in ENGINE_OF:
                if prefix.encode() in head:
                    return eng
            return None
        kind = sniff(clean)
        if kind:
            return next((e.name for e in ENGINES.values() if any(m in head for m in e.file_markers)), None)
        cut = Input.__new__(Input)
        cut.path, cut.display = inp.path, inp.display
        cut.blocks = lambda: iter([head[: head.rfind(b"\n") + 1] or head])
        return load_one(cut, probe, year, sniffing=True).engine
    except InputError:
        return None
