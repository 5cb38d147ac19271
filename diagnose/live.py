"""`--follow` (growing logs) and `--watch` (a live Prometheus): the diagnosis again every interval.

--follow reads the files by name each time one of them changed (size, inode or modification
time), so it survives rotation and truncation as `tail -F` does: after a rotation the new file
is what is diagnosed. Each file is read once; a pass then reads only what was appended to it
(sources/following.py keeps the reading open between passes, bounded as any reading is) and
diagnoses a copy of it. Where a pass still costs much (a huge log's copy, a file read whole at each
pass: gzip, a JSON document), the wait after it grows (`pace`), so following never takes more
than CPU_SHARE of a core; the view says when the refresh has slowed, and JSON lines carry
`interval_s`. --watch re-queries the same sliding window (`--since`) ending
now.

On a terminal the view is redrawn in place: verdict, findings, timeline. Otherwise (or with
`--format json`) each interval writes one JSON report as a line (JSON Lines), with
`"changes": {"new": [...], "cleared": [...]}` against the previous interval.

Ctrl-C (SIGINT) or SIGTERM ends it. The signal only sets a flag (`Stop`): nothing is raised
inside an analysis, where a broad `except` could take it for an error. The loop reads the flag
after each pass and while it waits, so a signal during a pass lets that pass finish and its
result is the final report; then exit 0, or 1 under --fail-on. A second signal while a pass runs
stops at once: the last finished pass is the final report, or, before any pass finished,
`diagnose: interrupted` and exit 130 (SIGINT) / 143 (SIGTERM). Stopped while no pass could run
(a followed file not there yet, Prometheus down): "stopped before any diagnosis", exit 130 / 143.
"""
from __future__ import annotations

import gc
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


def exit_code(signum: int) -> int:
    """The exit status of a run a signal stopped before it had a report: 128 + the signal's number,
    as a shell reports a command the signal killed (130 SIGINT, 143 SIGTERM)."""
    return 128 + int(signum)


class Interrupted(BaseException):
    """SIGINT or SIGTERM that ends the run now. A BaseException, as KeyboardInterrupt is: no
    `except Exception` in the analysis takes it for an error of the input."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = int(signum)

    @property
    def code(self) -> int:
        return exit_code(self.signum)


class Stop:
    """The signal handler of --follow/--watch. The first SIGINT/SIGTERM asks for the final report:
    a flag, read between passes and while waiting. A second one while a pass runs raises
    Interrupted (stop now); any later one is ignored, so the final report is not cut short."""

    SLICE_S = 0.1       # how soon a wait notices the flag

    def __init__(self) -> None:
        self.signum: int | None = None
        self.busy = False       # a pass is running
        self.forced = False

    def __call__(self, signum, frame) -> None:
        if self.signum is None:
            self.signum = signum
            if self.busy:       # os.write: safe in a handler, whatever the main thread was printing
                again = "Ctrl-C again" if signum == signal.SIGINT else "a second signal"
                _write_fd(2, f"diagnose: stopping after this pass ({again} to stop now)\n")
            return
        if self.busy and not self.forced:
            self.forced = True
            raise Interrupted(signum)

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def install(self) -> "Stop":
        # Even where SIGINT was ignored (a job a script started in the background): the loop only
        # ends on a signal, and ending it is what a signal sent to it asks for.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self)
        return self

    def wait(self, seconds: float) -> None:
        """Sleep `seconds`, or less when a stop is asked for. (Not threading.Event.wait: setting
        an Event from a signal handler can deadlock on the Event's own lock; a sleep in slices
        of SLICE_S cannot.)"""
        end = time.monotonic() + seconds
        while self.signum is None:
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, self.SLICE_S))


def _write_fd(fd: int, text: str) -> None:
    try:
        os.write(fd, text.encode("utf-8", "replace"))
    except OSError:
        pass


def begin() -> Stop:
    """Before the first pass of --follow/--watch: the signal handler (Stop) installed, and every
    pass, the first too, reading the whole file by the bulk path (the C scanner) from the first
    megabyte, not only for big logs, so a log growing by 10,000 lines/s costs a few % of a core,
    not a third."""
    from .sources.readers import bulk
    if "DIAGNOSE_BULK_MIN_BYTES" not in os.environ:
        bulk.FAST_MIN_BYTES = min(bulk.FAST_MIN_BYTES, 1 << 20)
    return Stop().install()


def wait_for_files(files: list[str], every_s: float, stop: Stop) -> bool:
    """--follow on a file that does not exist yet or is still empty waits for it, as `tail -F` does,
    saying so once on stderr. Globs, directories and stdin are not waited for. False when a
    signal came first."""
    import glob as _glob
    told: set = set()
    while True:
        missing = [f for f in files if f != "-" and not _glob.has_magic(f) and not os.path.isdir(f)
                   and not (os.path.isfile(f) and os.path.getsize(f) > 0)]
        if not missing:
            return True
        for f in missing:
            if f not in told:
                told.add(f)
                what = "to appear" if not os.path.exists(f) else "to be written to"
                _write_fd(2, f"diagnose: waiting for {f} {what} (Ctrl-C to stop)\n")
        waited = 0.0
        while waited < every_s:
            if stop.requested:
                return False
            time.sleep(Stop.SLICE_S)
            waited += Stop.SLICE_S


CPU_SHARE = 0.08        # of one core, on average over a pass and the wait after it


def pace(interval_s: float, pass_cpu_s: float, pass_wall_s: float) -> float:
    """Seconds to wait after a pass: the interval, or longer where the pass cost so much CPU that
    waiting only the interval would take more than CPU_SHARE of a core."""
    return max(interval_s, pass_cpu_s / CPU_SHARE - pass_wall_s)


def run(files: list[str], prom: dict | None, kw: dict, interval_s: float, as_json: bool, since,
        fail_limit: int | None, verbose: bool, stop: Stop | None = None, first: tuple | None = None,
        sample=None) -> int:
    """Loop until SIGINT/SIGTERM; returns the exit code of the final report (130 / 143 when
    stopped before any pass finished). `stop`: the handler, installed before the command's own first
    pass; `first`: that pass, as (analyses, file stamps taken before it, its CPU s, its wall s);
    `sample`: with --scrape --watch, adds one scrape of the endpoint to the files before each pass."""
    from .pipeline import analyze_all, combined_json
    from .sources import InputError
    from .sources.prometheus import PromError
    from .ruleset.rules import RuleError

    stop = stop or begin()
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
            if first is not None:               # the command's own first pass, made before the loop
                new, now, cpu, wall = first
                first = None
            else:
                if stop.requested:
                    break
                if sample is not None:
                    try:
                        sample()
                    except (PromError, OSError) as e:     # the endpoint restarting: said once, tried again
                        if str(e) != note:
                            note = str(e)
                            _say(console, as_json, {"note": note, "time": _now()})
                        stop.wait(interval_s)
                        continue
                now = _stamp(files) if files else None
                if prom is None and now == stamp and analyses is not None:
                    stop.wait(interval_s)
                    continue
                if prom is not None:
                    end = datetime.now(timezone.utc)
                    prom = dict(prom, end=end, start=end - since)
                cpu0, wall0 = time.process_time(), time.monotonic()
                stop.busy = True
                try:
                    new = analyze_all(files, prometheus=prom, **kw)
                except (InputError, PromError) as e:       # a followed file not there yet, a Prometheus restarting
                    new = e
                finally:
                    stop.busy = False
                if isinstance(new, Exception):
                    if str(new) != note:
                        note = str(new)
                        _say(console, as_json, {"note": note, "time": _now()})
                    stamp = now
                    stop.wait(interval_s)
                    continue
                note = None
                # process_time counts every thread: the C scanner's workers too
                cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
            analyses, stamp = new, now
            # The last pass's result is let go: its copies of what was read hold reference cycles
            # (Rows.shared), which only the collector frees, and an analysis runs without it
            # (cli._main). Without this, memory grew by a pass's copies (tens of MB on a day's
            # log) every pass.
            gc.collect()
            if stop.requested:                  # asked during this pass: its result is the final report
                break
            # the first pass reads every followed file whole, the next ones what was appended: the
            # first one's cost says nothing of theirs
            wait = interval_s if previous is None and files else pace(interval_s, cpu, wall)
            docs = [a.to_json() for a in analyses]
            ids = {f["id"] for d in docs for f in d["findings"]}
            changes = {"new": sorted(ids - (previous or set())), "cleared": sorted((previous or set()) - ids)}
            first_view, previous = previous is None, ids
            if as_json:
                doc = combined_json(analyses)
                doc["time"], doc["changes"], doc["interval_s"] = _now(), changes, round(wait, 1)
                _line(doc)
            else:
                from .reports.terminal import render
                console.clear()
                every = f"every {interval_s:g}s" if wait <= interval_s else \
                    f"every {wait:.0f}s (slowed from {interval_s:g}s to stay under {CPU_SHARE:.0%} of a core)"
                console.print(f"[dim]diagnose --{'watch' if prom or sample else 'follow'} · {_now()} · {every} · "
                              f"Ctrl-C for the final report[/dim]")
                if not first_view and (changes["new"] or changes["cleared"]):
                    console.print(f"[bold]changes:[/bold] new {', '.join(changes['new']) or 'none'} · "
                                  f"cleared {', '.join(changes['cleared']) or 'none'}")
                for a, d in zip(analyses, docs):
                    render(d, console, a.signals.timeline, verbose)
            stop.wait(wait)
    except Interrupted:
        if analyses is None:                    # a second signal before any pass finished
            raise
        # a second signal stopped a pass: the last finished one is the final report
    except RuleError as e:
        from .reports.common import printable
        sys.stderr.write(f"diagnose: {printable(e)}\n")
        return 2
    if analyses is None:
        _say(console, as_json, {"note": "stopped before any diagnosis", "final": True})
        return exit_code(stop.signum or signal.SIGINT)
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
        from rich.markup import escape
        from .reports.common import printable
        console.print(f"[yellow]{escape(printable(msg.get('note')))}[/yellow]")
