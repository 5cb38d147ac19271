"""The cache in $XDG_CACHE_HOME/diagnose (diagnose/cachedir.py): the C scanner's library and the
parsed rule files. Entries go by last use; only this user's own files are loaded; a relative
XDG_CACHE_HOME is ignored; the slower path without the C scanner is said once, where it matters.
Every test uses a temporary cache, never ~/.cache."""
from __future__ import annotations

import os
import pty
import select
import stat
import subprocess
import sys
import time

import pytest

from conftest import FIXTURES, ROOT

SEED = FIXTURES / "seed003" / "realtime.log"
DAY = 86400


def _env(cache, **kw) -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", XDG_CACHE_HOME=str(cache), **kw)


def _native(env) -> str:
    p = subprocess.run([sys.executable, "-m", "diagnose.sources.native"], env=env, cwd=ROOT,
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode()


def _lib_of(out: str):
    assert out.startswith("C scanner: /"), out
    from pathlib import Path
    return Path(out.split(": ", 1)[1].strip())


@pytest.fixture
def need_cc():
    from diagnose.sources import native
    if native.load() is None:
        pytest.skip(f"C scanner not available here: {native.why_not}")


def _age(path, days: float) -> None:
    t = time.time() - days * DAY
    os.utime(path, (t, t))


# (1) last use -------------------------------------------------------------------------------

def test_a_library_in_use_is_marked_used_and_outlives_the_next_build(tmp_path, need_cc):
    from diagnose.sources import native
    env = _env(tmp_path)
    lib = _lib_of(_native(env))
    ino = lib.stat().st_ino
    _age(lib, 40)                                   # built long ago, and used again now:
    assert _lib_of(_native(env)) == lib
    assert lib.stat().st_ino == ino                 # loaded, not rebuilt
    assert lib.stat().st_mtime > time.time() - 600  # and marked as used
    cache = lib.parent
    stale, leftover = cache / "scan-00000000000000ff.so", cache / ".scan-abandoned.so"
    for f in (stale, leftover):
        f.write_bytes(b"x")
        _age(f, native.STALE_DAYS + 1)
    # another compiler command is another library: a build, which removes what went unused
    other = _lib_of(_native(dict(env, CC=" ".join(native._compiler()) + " -DDIAGNOSE_CACHE_TEST")))
    assert other != lib and other.exists()
    assert lib.exists(), "a library used today was removed"
    assert not stale.exists() and not leftover.exists()


def test_a_used_library_is_marked_at_most_once_a_day(tmp_path, need_cc):
    env = _env(tmp_path)
    lib = _lib_of(_native(env))
    _age(lib, 0.5)
    before = lib.stat().st_mtime_ns
    _native(env)
    assert lib.stat().st_mtime_ns == before         # no write on every run


def test_parsed_rules_are_kept_by_last_use(tmp_path, monkeypatch):
    from diagnose.engine import rules
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(rules._ParsedFiles, "KEEP", 3)
    texts = {k: f'id = "{k}"\n' for k in "abcd"}
    first = rules._ParsedFiles()
    for k in "abc":
        first.loads(texts[k])
    first.save()
    second = rules._ParsedFiles()
    assert second.loads(texts["a"]) == {"id": "a"}  # a hit: a is the most recently used now
    second.loads(texts["d"])                        # something new: the file is written
    second.save()
    import json
    kept = [json.loads(v)["id"] for v in json.loads(rules._ParsedFiles.path().read_text()).values()]
    assert kept == ["c", "a", "d"]                  # b, unused longest, went; a, the oldest entry, stayed


# (2) only this user's own files ---------------------------------------------------------------

def _st(mode: int, uid: int) -> os.stat_result:
    return os.stat_result((mode, 1, 1, 1, uid, 0, 0, 0, 0, 0))


def test_private_means_owned_by_this_user_and_not_writable_by_others():
    from diagnose.cachedir import private
    me = os.getuid()
    assert private(_st(stat.S_IFREG | 0o755, me))
    assert private(_st(stat.S_IFDIR | 0o700, me))
    assert not private(_st(stat.S_IFREG | 0o775, me))    # group-writable
    assert not private(_st(stat.S_IFREG | 0o757, me))    # world-writable
    assert not private(_st(stat.S_IFREG | 0o755, me + 1))  # someone else's


def test_a_cached_library_others_can_write_is_not_loaded_but_rebuilt(tmp_path, need_cc):
    env = _env(tmp_path)
    cache = tmp_path / "diagnose"
    cache.mkdir(mode=0o700)
    # planted where the library goes: not an ELF file, so loading it would fail
    _native(env)
    lib = next(cache.glob("scan-*.so"))
    lib.write_bytes(b"not a library")
    os.chmod(lib, 0o666)
    assert _lib_of(_native(env)) == lib             # loaded: it was built again in its place
    assert lib.read_bytes()[:4] == b"\x7fELF"
    assert not lib.stat().st_mode & 0o022
    # a damaged library of this user's own is built again too
    lib.write_bytes(b"damaged")
    os.chmod(lib, 0o755)
    assert _lib_of(_native(env)) == lib and lib.read_bytes()[:4] == b"\x7fELF"


def test_a_group_writable_cache_dir_of_ones_own_is_tightened(tmp_path, need_cc):
    cache = tmp_path / "diagnose"
    cache.mkdir()
    os.chmod(cache, 0o775)                          # made under umask 002 by an earlier version
    lib = _lib_of(_native(_env(tmp_path)))
    assert lib.parent == cache and not cache.stat().st_mode & 0o022


def test_a_cache_dir_of_someone_else_is_not_used(tmp_path, monkeypatch, need_cc):
    """Built for the run in a private temporary directory instead; nothing is read from or written
    to the cache."""
    from diagnose.sources import native
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setattr(native, "where", None)
    monkeypatch.setattr(native, "private_dir", lambda d, create=True: False)
    assert native.load() is not None
    assert "temporary directory" in native.where and str(tmp_path / "diagnose") in native.where
    assert not list(tmp_path.rglob("*.so"))


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to give a directory away")
def test_a_cache_dir_owned_by_another_user_is_not_used(tmp_path, need_cc):
    cache = tmp_path / "diagnose"
    cache.mkdir(mode=0o755)
    (cache / "planted.txt").write_text("x")
    os.chown(cache, 65534, 65534)
    out = _native(_env(tmp_path))
    assert out.startswith("C scanner: built for this run in a temporary directory"), out
    assert sorted(p.name for p in cache.iterdir()) == ["planted.txt"]


def test_parsed_rules_from_a_file_others_can_write_are_not_used(tmp_path, monkeypatch):
    import json
    from diagnose.engine import rules
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    text = 'id = "x"\n'
    first = rules._ParsedFiles()
    first.loads(text)
    first.save()
    path = rules._ParsedFiles.path()
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({k: json.dumps({"id": "forged"}) for k in doc}))
    assert rules._ParsedFiles().loads(text) == {"id": "forged"}     # this user's own file: used
    os.chmod(path, 0o666)
    assert rules._ParsedFiles().loads(text) == {"id": "x"}          # writable by others: parsed anew


# (3) a relative XDG_CACHE_HOME ---------------------------------------------------------------

def test_a_relative_xdg_cache_home_is_ignored(tmp_path, monkeypatch):
    from diagnose.cachedir import cache_dir
    from diagnose.engine.rules import _ParsedFiles
    from diagnose.sources import native
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    home_cache = tmp_path / "home" / ".cache" / "diagnose"
    assert cache_dir() == home_cache
    assert native.library_path().parent == home_cache and _ParsedFiles.path().parent == home_cache
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert cache_dir() == home_cache
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "abs"))
    assert cache_dir() == tmp_path / "abs" / "diagnose"


def test_a_run_with_a_relative_xdg_cache_home_writes_nothing_where_it_was_started(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    env = _env("relative/cache", HOME=str(tmp_path / "home"))
    p = subprocess.run([sys.executable, "-m", "diagnose", "rules"], env=env, cwd=work, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    assert list(work.iterdir()) == []
    assert (tmp_path / "home" / ".cache" / "diagnose" / "rules-parsed-v1.json").exists()


# (4) the slower path, said once ------------------------------------------------------------------

def _on_a_terminal(args, env) -> tuple[int, str]:
    """Run diagnose with stderr on a pseudo-terminal: (exit code, what the terminal got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "diagnose", *map(str, args)], cwd=ROOT, env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        r, _, _ = select.select([master], [], [], 120)
        if not r:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:         # the child closed the terminal
            chunk = b""
        if not chunk:
            break
        seen += chunk
    os.close(master)
    return p.wait(timeout=120), seen.decode("utf-8", "replace")


def _two_logs(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_bytes(SEED.read_bytes())
    b.write_bytes(SEED.read_bytes())
    return a, b


def test_the_slower_path_is_said_once_per_run_on_a_terminal(tmp_path):
    env = _env(tmp_path / "cache", CC="false", DIAGNOSE_BULK_MIN_BYTES="0")
    rc, term = _on_a_terminal(["--format", "json", *_two_logs(tmp_path)], env)
    assert rc in (0, 1), term
    notes = [ln for ln in term.splitlines() if "note:" in ln]
    assert len(notes) == 1, term
    assert "polars" in notes[0] and "the C compiler failed" in notes[0] and "DIAGNOSE_NATIVE=0" in notes[0]


def test_the_slower_path_keeps_stderr_clean_for_small_inputs_in_a_pipe(tmp_path):
    env = _env(tmp_path / "cache", CC="false", DIAGNOSE_BULK_MIN_BYTES="0")
    p = subprocess.run([sys.executable, "-m", "diagnose", "--format", "json", *_two_logs(tmp_path)], env=env,
                       cwd=ROOT, capture_output=True, timeout=120)
    assert p.returncode in (0, 1) and p.stderr == b"", p.stderr.decode()


def test_nothing_is_said_when_polars_is_chosen_or_the_c_scanner_works(tmp_path, need_cc):
    logs = _two_logs(tmp_path)
    for extra in ({"CC": "false", "DIAGNOSE_NATIVE": "0"}, {}):
        rc, term = _on_a_terminal(["--format", "json", *logs],
                                  _env(tmp_path / "cache", DIAGNOSE_BULK_MIN_BYTES="0", **extra))
        assert rc in (0, 1) and "note:" not in term, (extra, term)


def test_a_big_input_is_told_even_in_a_pipe_and_only_once(monkeypatch, capsys):
    from diagnose.sources import native
    monkeypatch.setattr(native, "_noted", False)
    monkeypatch.setattr(native, "why_not", "no C compiler (cc)")
    monkeypatch.delenv("DIAGNOSE_NATIVE", raising=False)
    native.note_fallback(False)                 # a small input, stderr not a terminal: quiet
    assert capsys.readouterr().err == ""
    native.note_fallback(True)
    native.note_fallback(True)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("diagnose: note: ") and "no C compiler (cc)" in err
