"""Where diagnose keeps what it parses between runs: the parsed rule files and data tables
(tomlcache.py), the rules as loaded (ruleset/rules.py: LoadedRules), the literal text each
routed pattern needs (sources/literals.py: KeptNeedles) and the regular expressions' code as re
compiled it (recache.py). (The C scanner is built at install, beside its source: no machine code
is kept here.)

The directory is $XDG_CACHE_HOME/diagnose when XDG_CACHE_HOME is an absolute path, else
~/.cache/diagnose: the XDG Base Directory spec says a relative path there is invalid and must be
ignored (it would make the cache depend on the directory diagnose was started from).

What is read back from it must be this user's alone: a file or directory owned by someone else,
or writable by group or others, could have been replaced by someone else (a forged rule changes
the advice). `private()` says whether a stat result passes. Only os and stat: this module is
on every run's path (the parsed TOML cache)."""
from __future__ import annotations

import os
import stat
from pathlib import Path


def cache_dir() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "diagnose"


def private(st: os.stat_result) -> bool:
    """Owned by this user and not writable by group or others."""
    if not hasattr(os, "getuid"):       # no owners to compare (Windows): nothing to check
        return True
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def private_dir(d: Path, create: bool = True) -> bool:
    """Whether `d` is a directory only this user can write. With `create`: made (mode 0700) when
    missing, and when it is this user's own but group-writable (made under umask 002 by an earlier
    version) it loses that bit; what it holds is still checked file by file (`private_file`)."""
    try:
        if create:
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(d)
        if create and stat.S_ISDIR(st.st_mode) and not private(st) and st.st_uid == getattr(os, "getuid", int)():
            os.chmod(d, stat.S_IMODE(st.st_mode) & ~(stat.S_IWGRP | stat.S_IWOTH))
            st = os.stat(d)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and private(st)


def private_file(p: Path) -> bool:
    """Whether `p` is a regular file (not a link) only this user can write, in such a directory."""
    try:
        st = os.lstat(p)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and private(st) and private_dir(p.parent, create=False)



def read_back(p: Path, binary: bool = False):
    """A cache file's content (bytes or text), or None when it is missing, unreadable or not this
    user's alone (private_file)."""
    try:
        if not private_file(p):
            return None
        return p.read_bytes() if binary else p.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None


def write_whole(p: Path, write, binary: bool = False) -> None:
    """Write a cache file by `write(fh)` into a temporary file beside it, then put it in place: two
    runs writing at once each leave a whole file. Nothing is written where the directory is not
    this user's alone (private_dir), and a failure to write only loses what the next run re-reads."""
    if not private_dir(p.parent):
        return
    import tempfile     # only when something is written: ~10 ms to import
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + p.stem + "-", dir=p.parent)
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8") as fh:
            write(fh)
        os.replace(tmp, p)
    except (OSError, ValueError):
        if tmp is not None:     # not left behind, one a run (something not a file in the way, a full disk)
            try:
                os.unlink(tmp)
            except OSError:
                pass
