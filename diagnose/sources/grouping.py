"""Deployments: which launches, of which inputs, are one server.

Every input is read into pieces (launches.py: one per launch and stream), and the pieces are
grouped by what identifies a server — its engine, model and launch settings — and by time:
- another engine, model or setting: another server, another deployment; facts never mix;
- the same identity in one input, or one launch after another across inputs: one server
  restarted — one deployment, its launches listed (a crash-and-restart loop is one finding);
- the same identity at the same time: the processes of one server (ranks, nodes, a worker's log
  beside the API server's) when at most one of them printed engine stats, else replicas, each
  its own deployment;
- what is no server's log (a config or iteration-stats file, a scrape, GPU samples, topology, SLO
  targets, a load sweep) joins the server of its own input, else the only one (of its engine),
  else the one of its model or whose time it shares; else it stands with its engine's, or alone.
With several inputs, one that cannot be read (empty, binary, damaged) or that is not an input (a
document, a file of no known format) is skipped with a note; the others are diagnosed.
"""
from __future__ import annotations

from ..evidence.finish import finish
from ..values import model_id
from ..evidence.model import Evidence
from .launches import IDENTITY, Piece, compatible, identity  # noqa: F401  (IDENTITY: the reports' import)
from .loading import Read, read_inputs
from .readers.files import Input, InputError

class Skipped:
    """An input left out of a run of several, and why (one line for the reports)."""
    __slots__ = ("path", "reason")

    def __init__(self, path: str, reason: str) -> None:
        self.path, self.reason = path, reason

    def to_json(self) -> dict:
        return {"path": self.path, "reason": self.reason}


def load_groups(inputs: list[Input], year: int | None = None, gpu_start=None, gpu_interval: float = 1.0) -> list[Evidence]:
    """One Evidence per deployment, in the order they first appear. Each carries `parts` (its
    launches: where they are and how they ended) and `skipped` (the run's skipped inputs)."""
    reads: list[Read] = []
    skipped: list[Skipped] = []
    for inp, r in zip(inputs, read_inputs(inputs, year)):
        if isinstance(r, InputError):
            if len(inputs) == 1:
                raise r
            skipped.append(Skipped(inp.display, _reason(str(r), inp.display)))
            continue
        why = not_an_input(r)
        if why and len(inputs) == 1:
            if why.startswith("a document"):    # quoted log text in prose is no server's evidence
                raise InputError(f"{inp.display}: {why}")
            why = None                          # named alone: reported, with what of it was read
        if why:
            skipped.append(Skipped(inp.display, why))
            continue
        reads.append(r)
    if not reads:
        raise InputError("nothing to diagnose: " + "; ".join(f"{s.path}: {s.reason}" for s in skipped))
    out = []
    order = {id(r): i for i, r in enumerate(reads)}
    for pieces, dep_reads in assemble(reads, skipped):
        # in the order the inputs were given (a directory's: sorted), as one reader would have read them
        at = {id(q): order[id(r)] for r in dep_reads for q in r.pieces}
        pieces = sorted(pieces, key=lambda q: (at[id(q)], q.index))
        dep_reads = sorted(dep_reads, key=lambda r: order[id(r)])
        ev = merge(pieces)
        ev.inputs = [r.info for r in dep_reads]
        finish(ev, gpu_start, gpu_interval)
        ev.skipped = skipped
        out.append(ev)
    return out


def _reason(message: str, display: str) -> str:
    return message[len(display) + 2:] if message.startswith(display + ": ") else message


def not_an_input(r: Read) -> str | None:
    """Why a text input of a run of several is no input: a document, or nothing in a known format."""
    info = r.info
    cov = info.coverage
    if cov is None or info.kind not in ("log", "text log", "other"):
        return None
    evs = [p.ev for p in r.pieces]
    if any(ev.stats_rows or ev.gpu_rows or ev.bench_points or ev.targets or ev.topology for ev in evs):
        return None
    from .engines import ENGINES
    if any(reg[0] not in ("other", "text log", "log", "mixed", *ENGINES) and reg[3] >= 3 for reg in cov.regions):
        return None         # a capture, a scrape, a result block: data, whatever surrounds it
    engine = cov.engine_lines()
    if cov.markdown >= 3 and cov.markdown >= engine:
        return f"a document (Markdown: {cov.markdown} heading, list, table or fence lines), not a log"
    if engine == 0 and cov.understood == 0:
        return f"no line in a format diagnose reads ({info.lines} lines)"
    return None


class _Dep:
    def __init__(self, piece: Piece, r: Read) -> None:
        self.pieces = [piece]
        self.reads = [r]
        self.engine = piece.ev.fact("engine")
        self.identity = identity(piece.ev)
        self.t0, self.t1 = piece.span()
        self.stats = bool(piece.ev.stats_rows) and bool(piece.engine_lines)

    def add(self, piece: Piece, r: Read) -> None:
        self.pieces.append(piece)
        if r not in self.reads:
            self.reads.append(r)
        self.engine = self.engine or piece.ev.fact("engine")
        for k, v in identity(piece.ev).items():
            self.identity.setdefault(k, v)
        lo, hi = piece.span()
        if lo is not None:
            self.t0 = lo if self.t0 is None else min(self.t0, lo)
            self.t1 = hi if self.t1 is None else max(self.t1, hi)
        self.stats = self.stats or (bool(piece.ev.stats_rows) and bool(piece.engine_lines))

    def overlaps(self, piece: Piece) -> bool:
        lo, hi = piece.span()
        if None in (self.t0, self.t1, lo, hi):
            return False
        return lo <= self.t1 and self.t0 <= hi


def assemble(reads: list[Read], skipped: list[Skipped] | None = None) -> list[tuple[list[Piece], list[Read]]]:
    """The pieces of each deployment and the inputs they come from, in the order deployments
    first appear. Servers are the pieces an engine's log lines made; everything else (a config
    or iteration-stats file, a scrape, GPU samples, a load sweep, targets) is attached to one;
    settings that fit none of several servers are put in `skipped`."""
    deps: list[_Dep] = []
    attached: list[tuple[Read, Piece]] = []
    for r in reads:
        prev: _Dep | None = None
        for p in r.pieces:
            if not p.engine_lines:
                attached.append((r, p))
                continue
            engine = p.ev.fact("engine")
            ident = identity(p.ev)
            dep = None
            if prev is not None and not p.launched and (not prev.engine or prev.engine == engine) \
                    and compatible(ident, prev.identity):
                dep = prev          # an input's lines after a launch that no new launch claims
            if dep is None:
                dep = _find(deps, p, r, engine, ident)
            if dep is None:
                dep = _Dep(p, r)
                deps.append(dep)
            else:
                dep.add(p, r)
            prev = dep
    servers = len(deps)
    # what names an engine first (it may stand for a server: a scrape, an options file), then the rest
    attached.sort(key=lambda rp: rp[1].ev.fact("engine") is None)
    targets = []
    for r, p in attached:
        if _only_targets(p.ev):
            targets.append((r, p))
            continue
        engine = p.ev.fact("engine")
        dep = _home(deps[:servers] if servers else deps, r, p) if (servers or engine is None) else None
        if dep is None and engine is not None:     # no server for it: with what else names its engine
            dep = next((d for d in deps[servers:] if d.engine == engine), None)
        if dep is None and engine is None and servers and skipped is not None and _only_settings(p.ev) \
                and len(r.pieces) == 1:
            # settings of no named engine beside servers' logs, fitting none of them (another run's
            # config, a model's config.json): no server to lint. (An options file that names its
            # engine stands as that engine's deployment: a config to lint.)
            model = p.ev.fact("model")
            skipped.append(Skipped(r.info.path, "settings that match none of the servers' logs given with it"
                                   + (f" (model {model})" if model else "") + "; not diagnosed"))
            continue
        if dep is None:
            dep = _Dep(p, r)
            deps.append(dep)
        else:
            dep.add(p, r)
    out = [(d.pieces, d.reads) for d in deps]
    for r, p in targets:        # SLO targets are the user's for every deployment
        if not out:
            out.append(([p], [r]))
        for pieces, rs in out:
            if p not in pieces:
                pieces.append(p)
                rs.append(r)
    return out


def _only_settings(ev: Evidence) -> bool:
    return not (ev.stats_rows or ev.gpu_rows or ev.bench_points or ev.targets or ev.topology
                or ev.counters.get("access_lines") or ev.event_counts)


def _only_targets(ev: Evidence) -> bool:
    return bool(ev.targets) and not (ev.stats_rows or ev.gpu_rows or ev.bench_points or ev.facts)


def _find(deps: list[_Dep], p: Piece, r: Read, engine, ident) -> _Dep | None:
    """The deployment a launch belongs to: the same server restarted, or another process of it."""
    for d in deps:
        if (d.engine and engine and d.engine != engine) or not compatible(ident, d.identity):
            continue
        if r in d.reads:
            return d            # the same server again in one input: a restart
        if not d.overlaps(p):
            return d            # one after the other: a restart, from another input
        if not (d.stats and p.ev.stats_rows):
            return d            # at the same time, one of them printing no stats: ranks of one server
    return None


def _home(deps: list[_Dep], r: Read, p: Piece) -> _Dep | None:
    """The server a piece that is not one belongs to: of its own input; else the only one, or the
    only one of its engine; else the one of its engine and model, or whose time it shares."""
    own = [d for d in deps if r in d.reads]
    if own:
        # the launch nearest before it in its own input (a capture after the server's lines)
        before = [d for d in own if any(q.src == p.src and q.index < p.index for q in d.pieces)]
        return (before or own)[-1]
    engine = p.ev.fact("engine")
    mine = [d for d in deps if not engine or not d.engine or d.engine == engine]
    if len(mine) == 1:
        return mine[0]
    ident = identity(p.ev)
    if ident.get("model"):
        same = [d for d in mine if d.identity.get("model") == ident["model"]]
        if len(same) == 1:
            return same[0]
    times = [row["time"] for row in p.ev.gpu_rows if row.get("time") is not None] + \
            [row["time"] for row in p.ev.stats_rows if row.get("time") is not None]
    if times:
        lo, hi = min(times), max(times)
        for d in mine:
            if d.t0 is not None and d.t1 is not None and lo <= d.t1 and d.t0 <= hi:
                return d
    return None


def merge(pieces: list[Piece]) -> Evidence:
    """One Evidence of a deployment's pieces, facts first come first (a restart's are the same)."""
    ev = pieces[0].ev if len(pieces) == 1 else Evidence()
    if len(pieces) > 1:
        # facts: what the server's own log says first, then what configs and scrapes add
        for p in sorted(pieces, key=lambda q: not q.engine_lines):
            ev.absorb_facts(p.ev)
        for p in pieces:
            ev.absorb(p.ev, facts=False)
    # the server's own pieces (its launches, its processes' logs); configs, scrapes and captures
    # attached to it are its inputs, not launches
    parts = [d for p in pieces if p.first is not None and (p.engine_lines or len(pieces) == 1) for d in p.parts()]
    # launches folded into an earlier one (loading.FOLD_AFTER) back in their place in their input
    at = {}
    for d in parts:
        at.setdefault(d["source"], len(at))
    ev.parts = sorted(parts, key=lambda d: (at[d["source"]], d["first_line"] or 0))
    return ev
