"""A big log named on the command line starts being read before the rest of the program is imported.

Importing the CLI, its option parser and the pipeline is ~0.1 s on one core, in which the other
cores would wait. So the program (cli.py, before it imports typer) looks at its arguments: the
first one that names a big plain file (at least bulk.FAST_MIN_BYTES, not gzip) gets the C reader
started on it now. Nothing is decided here: `loading.start_scans` takes the run over when that
file is the big log the options and inputs say to read first, and stops it otherwise (an option's
value such as `--baseline old.log`, `--follow`, a capture that is not a log). A guess that was
wrong costs the CPU of the scan until then, and reads nothing the user gave any differently.
"""
from __future__ import annotations

import os
import stat

_held = None        # (path, the file's identity when started, its Producer)


def _identity(st: os.stat_result) -> tuple:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def start(argv: list[str]) -> bool:
    """Start the C reader on the first argument naming a big plain file; True when started."""
    global _held
    if "--follow" in argv:
        return False        # a followed file is read its own way (sources/following.py)
    from . import bulk
    for a in argv:
        if a.startswith("-"):
            continue
        try:
            # Only a regular file is opened (a FIFO would lose what this read takes, or wait
            # for a writer); then what the run's own check (loading.big_logs) asks of the file it
            # starts the C reader on: big, not gzip (read through Python's zlib), text.
            st = os.stat(a)
            if not stat.S_ISREG(st.st_mode) or not bulk.usable(a, bulk.read_head(a, 65536)):
                continue
        except (OSError, ValueError):
            continue
        from . import native
        lib = native.load()
        if lib is None:
            return False        # the run says so, when it reads the file
        from .native import stream
        try:
            _held = (a, _identity(st), stream.Producer(lib, path=a, display=a))
        except Exception:       # whatever it was, the run meets it again and says it properly
            return False
        return True
    return False


def take(path: str):
    """The run started on `path` (the same file, unchanged since), or None; it is the caller's then."""
    global _held
    if _held is None or _held[0] != path:
        return None
    try:
        same = _identity(os.stat(path)) == _held[1]
    except OSError:
        same = False
    if not same:
        return None
    producer, _held = _held[2], None
    return producer


def drop() -> None:
    """Stop a run nobody took, and wait for its threads (a folder is read by forked processes
    only where no other thread runs)."""
    global _held
    if _held is None:
        return
    producer, _held = _held[2], None
    producer.close()
    producer.join()
