"""The Python reader on every core: a big plain file's blocks classified by worker processes.

Where the C reader was not built, a big log is read by scanner.segments, one block at a time in
this process, and its regex passes (scanner._tally_block) are most of the time: half of it, while
the parsers take the other half in the same process. Here the blocks are cut into runs of whole
lines here (scanner.line_runs, as ever), and a run within one block is classified by a worker
process, which reads those bytes from the file itself (nothing is sent but where they are) and
sends back its Segment without them; this process gives the Segment its own copy of the bytes
and the parsers go on with the next one meanwhile. Runs are handed back in order, a few ahead
(memory: DEPTH blocks). The lines that join two blocks (a run of their own) and small runs are
classified here. The segments are those scanner.segments makes (tests/test_spread.py).

Only for a plain file (the bytes at an offset of the file are those of the blocks), and only where
fork is at hand and no other thread runs yet (a fork copies no other thread). A worker that reads
other bytes than this process has (the file rewritten meanwhile: checked by samples of the run) sends
nothing back, and the run is classified here.
"""
from __future__ import annotations

import os
from collections import deque

from ...evidence.model import EVENT_KEEP
from .scanner import _KW, _segment, line_runs

SPREAD_MIN_BYTES = 64 << 20     # a smaller file is read before the workers would have started
RUN_MIN_BYTES = 256 << 10       # a smaller run is classified here: sending it costs more than it takes
WORKERS_MAX = 4
DEPTH = 3                       # runs in flight per worker
PROBE = 64                      # bytes compared at the start, middle and end of a run


def workers_for(path: str, size: int) -> int:
    """How many worker processes read `path` (0: read here, scanner.segments)."""
    env = os.environ.get("DIAGNOSE_JOBS", "")
    limit = int(env) if env.isdigit() else WORKERS_MAX      # DIAGNOSE_JOBS=1: one process, as for a folder
    if size < SPREAD_MIN_BYTES or limit < 2:
        return 0
    import multiprocessing
    import sys
    import threading
    if not sys.platform.startswith("linux") or threading.active_count() > 1 or multiprocessing.current_process().daemon:
        return 0                # (a daemon process, a folder's reader among them, may start none)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return min(limit, cores) if cores >= 2 else 0


class Workers:
    """Worker processes forked now (before any thread of this run starts), each reading `path` and
    serving runs in the order it was sent them: run k goes to worker k mod n, so the answers are
    taken back in order, from one pipe at a time, with no thread of this process in between."""

    def __init__(self, path: str, n: int) -> None:
        import multiprocessing
        ctx = multiprocessing.get_context("fork")
        self.conns, self.procs = [], []
        for _ in range(n):
            here, there = ctx.Pipe()
            p = ctx.Process(target=_serve, args=(path, there), daemon=True, name="diagnose-reader")
            p.start()
            there.close()
            self.conns.append(here)
            self.procs.append(p)
        self.n = n

    def close(self) -> None:
        for c in self.conns:
            try:
                c.send(None)
                c.close()
            except OSError:
                pass
        for p in self.procs:
            p.join(2)
            if p.is_alive():
                p.kill()
                p.join(2)


def segments(blocks, pool: Workers, keep: int = EVENT_KEEP, display: str = "input"):
    """scanner.segments(blocks) of a plain file, its runs classified by `pool`'s workers, which
    are stopped when the segments end (or their reading stops)."""
    where = [None, 0]                   # the block line_runs cuts now, and its offset in the file

    def located():
        at = 0
        for b in blocks:
            where[0], where[1] = b, at
            at += len(b)
            yield b

    pending: deque = deque()
    sent = 0
    try:
        for buf, start, end, cut in line_runs(located(), display):
            block = buf[start:end] if start or end != len(buf) else buf
            if buf is where[0] and not cut and end - start >= RUN_MIN_BYTES:
                n = len(block)
                conn = pool.conns[sent % pool.n]
                sent += 1
                try:
                    conn.send((where[1] + start, n, keep, (block[:PROBE], block[n // 2:n // 2 + PROBE], block[-PROBE:])))
                    pending.append((conn, block, cut))
                except OSError:         # a worker gone: classified here
                    pending.append((None, _segment(block, keep, True, _KW), cut))
            else:
                pending.append((None, _segment(block, keep, True, _KW), cut))
            while len(pending) > DEPTH * pool.n or (pending and pending[0][0] is None):
                yield _done(*pending.popleft(), keep)
        while pending:
            yield _done(*pending.popleft(), keep)
    finally:
        pool.close()


def _done(conn, got, cut: int, keep: int):
    if conn is None:
        seg = got
    else:
        try:
            seg = conn.recv()
        except (OSError, EOFError):     # a worker gone
            seg = None
        if seg is None:                 # it read other bytes, failed or is gone: classified here
            seg = _segment(got, keep, True, _KW)
        elif seg.buf is None:
            seg.buf = got
    seg.cut = cut
    return seg


# -- in a worker process -------------------------------------------------------------------------

def quiet_worker() -> None:
    """A forked worker's signals: Ctrl-C reaches the whole process group, and the parent alone
    answers it (it stops its workers, says one line and exits 130); SIGTERM ends the worker at
    once. The handlers inherited from the command (cli._interrupt) would raise in the worker
    (a traceback on the terminal) and then ignore every further signal, SIGTERM too: a worker
    left waiting forever, and the parent's exit waiting for it."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _serve(path: str, conn) -> None:
    quiet_worker()
    fd = os.open(path, os.O_RDONLY)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        try:
            got = _classify(fd, *job)
        except Exception:       # noqa: BLE001  (the parent classifies the run itself)
            got = None
        conn.send(got)


def _classify(fd: int, at: int, n: int, keep: int, probe: tuple):
    """The Segment of the file's n bytes at `at`, without them (the parent has them); None where
    they are not the bytes the parent has."""
    parts, got = [], 0
    while got < n:
        b = os.pread(fd, n - got, at + got)
        if not b:
            return None
        parts.append(b)
        got += len(b)
    block = parts[0] if len(parts) == 1 else b"".join(parts)
    if (block[:PROBE], block[n // 2:n // 2 + PROBE], block[-PROBE:]) != probe:
        return None
    seg = _segment(block, keep, True, _KW)
    if seg.buf is block:
        seg.buf = None
    return seg
