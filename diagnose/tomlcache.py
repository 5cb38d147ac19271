"""TOML files as parsed, kept between runs in the cache directory (cachedir.py): the rule files
and the package's data tables are read on every run, and tomllib is slow enough to matter there."""
from __future__ import annotations

import atexit
import json
import zlib
from pathlib import Path

from . import _compat
from .cachedir import cache_dir, read_back, write_whole


class ParsedFiles:
    """TOML files (rules, the package's data tables) as tomllib parsed them, kept between runs in
    $XDG_CACHE_HOME/diagnose and keyed by a digest of each file's text, so an edited file is parsed
    anew: parsing is half the time of loading the rules, ~25 ms of every run, and the model table
    another ~20 ms. Where the cache cannot be read or written, or is not this user's alone (cachedir.private_file), files are parsed
    every time. Entries are kept by last use: a hit moves its entry to the end, and a run that
    parsed something new writes the file with the KEEP most recently used (a run with only hits
    writes nothing: its uses are recorded by the next run that writes)."""

    KEEP = 1000     # entries: the built-in rules of a few versions, and the user's own

    def __init__(self) -> None:
        self.entries: dict[str, str] | None = None     # digest -> the parsed file, as JSON
        self.new = False

    @staticmethod
    def path() -> Path:
        return cache_dir() / "parsed-toml-v1.json"

    def loads(self, raw: str) -> dict:
        if self.entries is None:
            try:
                self.entries = dict(json.loads(read_back(self.path()) or "{}"))
            except (ValueError, TypeError):
                self.entries = {}
        # Two checksums and the length: an edit that keeps all three is not a real risk, and
        # zlib is loaded already (hashlib would load OpenSSL: 10 ms of every run).
        b = raw.encode("utf-8", "surrogatepass")
        key = f"{zlib.crc32(b):08x}{zlib.adler32(b):08x}{len(b):x}"
        hit = self.entries.pop(key, None)
        if isinstance(hit, str):
            self.entries[key] = hit         # last used: to the end
            return json.loads(hit)          # fresh objects each time: rules may be changed after
        d = _compat.tomllib.loads(raw)
        try:
            self.entries[key] = json.dumps(d)
            self.new = True
        except (TypeError, ValueError):     # TOML dates do not go into JSON: parsed every run
            pass
        return d

    def save(self) -> None:
        if not self.new or self.entries is None:
            return
        self.new = False
        keep = dict(list(self.entries.items())[-self.KEEP:])
        write_whole(self.path(), lambda fh: json.dump(keep, fh))


parsed = ParsedFiles()
atexit.register(parsed.save)     # what a run parsed anew, kept for the next (a no-op when nothing was)


def read_toml(path: Path) -> dict:
    """A TOML file shipped with the package, parsed once and kept between runs."""
    return parsed.loads(path.read_text(encoding="utf-8"))
