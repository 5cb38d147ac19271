"""`--follow` (growing logs) and `--watch` (a live Prometheus): the diagnosis again every interval.

--follow reads the files by name each time one of them changed (size, inode or modification
time), so it survives rotation and truncation as `tail -F` does: after a rotation the new file
is what is diagnosed. Nothing is kept between intervals but the last set of findings, so memory
stays flat however long it runs; each pass reads the whole file (the C scanner makes that cheap
for logs up to a few hundred MB). A log that grows for hours makes each pass longer: the wait
after a pass grows with it (`pace`), so following never takes more than CPU_SHARE of a core; the
view says when the refresh has slowed, and JSON lines carry `interval_s`. --watch re-queries the same sliding window (`--since`) ending
now.

On a terminal the view is redrawn in place: verdict, findings, timeline. Otherwise (or with
`--format json`) each interval writes one JSON report as a line (JSON Lines), with
`"changes": {"new": [...], "cleared": [...]}` against the previous interval. Ctrl-C (SIGINT) or
SIGTERM ends it: the final full report, then exit 0, or 1 under --fail-on.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from datetime import datetime, timezone


def _stamp(paths: list[str]) -> tuple:
    out = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((p, st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((p, None))
    return tuple(out)


class _Stop(Exception):
    pass


CPU_SHARE = 0.08        # of one core, on average over a pass and the wait after it


def pace(interval_s: float, pass_cpu_s: float, pass_wall_s: float) -> float:
    """Seconds to wait after a pass: the interval, or longer where the pass cost so much CPU that
    waiting only the interval would take more than CPU_SHARE of a core."""
    return max(interval_s, pass_cpu_s / CPU_SHARE - pass_wall_s)


def run(files: list[str], prom: dict | None, kw: dict, interval_s: float, as_json: bool, since,
        fail_limit: int | None, verbose: bool) -> int:
    """Loop until SIGINT/SIGTERM; returns the exit code of the final report."""
    from .pipeline import analyze_all, combined_json
    from .sources import InputError
    from .sources.prometheus import PromError
    from .ruleset.rules import RuleError

    # Every pass reads the whole file: the bulk path (the C scanner) from the first megabyte, not
    # only for big logs, so a log growing by 10,000 lines/s costs a few % of a core, not a third.
    from .sources.readers import bulk
    if "DIAGNOSE_BULK_MIN_BYTES" not in os.environ:
        bulk.FAST_MIN_BYTES = min(bulk.FAST_MIN_BYTES, 1 << 20)

    def stop(*_):
        raise _Stop()
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    console = None
    if not as_json:
        from rich.console import Console
        console = Console(highlight=False, emoji=False)
    previous: set | None = None
    analyses = None
    stamp = None
    note = None
    wait = interval_s
    try:
        while True:
            now = _stamp(files) if files else None
            if prom is None and now == stamp and analyses is not None:
                time.sleep(interval_s)
                continue
            if prom is not None:
                end = datetime.now(timezone.utc)
                prom = dict(prom, end=end, start=end - since)
            cpu0, wall0 = time.process_time(), time.monotonic()
            try:
                analyses = analyze_all(files, prometheus=prom, **kw)
                note = None
            except (InputError, PromError) as e:       # a followed file not there yet, a Prometheus restarting
                if str(e) != note:
                    note = str(e)
                    _say(console, as_json, {"note": note, "time": _now()})
                stamp = now
                time.sleep(interval_s)
                continue
            stamp = now
            # process_time counts every thread: the C scanner's workers too
            wait = pace(interval_s, time.process_time() - cpu0, time.monotonic() - wall0)
            docs = [a.to_json() for a in analyses]
            ids = {f["id"] for d in docs for f in d["findings"]}
            changes = {"new": sorted(ids - (previous or set())), "cleared": sorted((previous or set()) - ids)}
            first, previous = previous is None, ids
            if as_json:
                doc = combined_json(analyses)
                doc["time"], doc["changes"], doc["interval_s"] = _now(), changes, round(wait, 1)
                _line(doc)
            else:
                from .reports.terminal import render
                console.clear()
                every = f"every {interval_s:g}s" if wait <= interval_s else \
                    f"every {wait:.0f}s (slowed from {interval_s:g}s to stay under {CPU_SHARE:.0%} of a core)"
                console.print(f"[dim]diagnose --{'watch' if prom else 'follow'} · {_now()} · {every} · "
                              f"Ctrl-C for the final report[/dim]")
                if not first and (changes["new"] or changes["cleared"]):
                    console.print(f"[bold]changes:[/bold] new {', '.join(changes['new']) or 'none'} · "
                                  f"cleared {', '.join(changes['cleared']) or 'none'}")
                for a, d in zip(analyses, docs):
                    render(d, console, a.signals.timeline, verbose)
            time.sleep(wait)
    except _Stop:
        pass
    except RuleError as e:
        sys.stderr.write(f"diagnose: {e}\n")
        return 2
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if analyses is None:
        _say(console, as_json, {"note": "stopped before any diagnosis", "final": True})
        return 0
    docs = [a.to_json() for a in analyses]
    if as_json:
        doc = combined_json(analyses)
        doc["time"], doc["final"] = _now(), True
        _line(doc)
    else:
        from .reports.terminal import render
        console.print("[bold]final report[/bold]")
        for a, d in zip(analyses, docs):
            render(d, console, a.signals.timeline, verbose)
    if fail_limit is not None:
        from .values import SEVERITIES
        if any(SEVERITIES.index(f["severity"]) <= fail_limit for d in docs for f in d["findings"]):
            return 1
    return 0


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _line(doc: dict) -> None:
    sys.stdout.write(json.dumps(doc, default=str) + "\n")
    sys.stdout.flush()


def _say(console, as_json: bool, msg: dict) -> None:
    if as_json:
        _line(msg)
    else:
        console.print(f"[yellow]{msg.get('note')}[/yellow]")
