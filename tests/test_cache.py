"""The cache in $XDG_CACHE_HOME/diagnose (diagnose/cachedir.py): the parsed rule files and data tables. Entries go
by last use; only this user's own files are read back; a relative XDG_CACHE_HOME is ignored. The
slower path without the C scanner is said once, where it matters (the C scanner itself is built at
install: tests/test_packaging.py). Every test uses a temporary cache, never ~/.cache."""
from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT, on_a_terminal

SEED = FIXTURES / "seed003" / "realtime.log"


def _env(cache, **kw) -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", XDG_CACHE_HOME=str(cache), **kw)


@pytest.fixture
def need_cc():
    from diagnose.sources.readers import native
    if native.load() is None:
        pytest.skip(f"C scanner not available here: {native.why_not}")


# (1) last use -------------------------------------------------------------------------------

def test_parsed_toml_files_are_kept_by_last_use(tmp_path, monkeypatch):
    from diagnose import tomlcache
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(tomlcache.ParsedFiles, "KEEP", 3)
    texts = {k: f'id = "{k}"\n' for k in "abcd"}
    first = tomlcache.ParsedFiles()
    for k in "abc":
        first.loads(texts[k])
    first.save()
    second = tomlcache.ParsedFiles()
    assert second.loads(texts["a"]) == {"id": "a"}  # a hit: a is the most recently used now
    second.loads(texts["d"])                        # something new: the file is written
    second.save()
    import json
    kept = [json.loads(v)["id"] for v in json.loads(tomlcache.ParsedFiles.path().read_text()).values()]
    assert kept == ["c", "a", "d"]                  # b, unused longest, went; a, the oldest entry, stayed


def _rule_dir(tmp_path):
    d = tmp_path / "myrules"
    d.mkdir()
    (d / "a.toml").write_text((ROOT / "rules" / "config" / "chunked-prefill-off.toml").read_text())
    return d


def test_loaded_rules_are_kept_and_an_edit_or_a_code_change_loads_them_anew(tmp_path, monkeypatch):
    from diagnose.ruleset import rules
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    d = _rule_dir(tmp_path)
    first = rules.LoadedRules()
    (p, r), = first.rules_of(d)
    first.save()
    assert first.new is False and rules.LoadedRules.path().exists()
    second = rules.LoadedRules()
    (p2, r2), = second.rules_of(d)
    assert not second.new and r2 is not r and (p2, r2.id, r2.severity, r2.condition_text) == (p, r.id, r.severity, r.condition_text)
    import ast
    assert ast.dump(r2.condition) == ast.dump(r.condition) and r2.condition.names == r.condition.names
    (d / "a.toml").write_text((d / "a.toml").read_text().replace('severity = "', 'severity = "critical"\nx_severity = "', 1))
    with pytest.raises(rules.RuleError, match="unknown key `x_severity`"):     # an edit is read, and its error said
        list(rules.LoadedRules().rules_of(d))
    with pytest.raises(rules.RuleError, match="unknown key `x_severity`"):     # every time: an error is never kept
        list(rules.LoadedRules().rules_of(d))
    (d / "a.toml").write_text((ROOT / "rules" / "config" / "chunked-prefill-off.toml").read_text())
    third = rules.LoadedRules()
    third._code = b"the loader's sources as edited"
    list(third.rules_of(d))
    assert third.new                                                        # another loader: loaded anew


def test_loaded_rules_from_a_file_others_can_write_are_not_used(tmp_path, monkeypatch):
    import pickle
    from diagnose.ruleset import rules
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    d = _rule_dir(tmp_path)
    first = rules.LoadedRules()
    list(first.rules_of(d))
    first.save()
    path = rules.LoadedRules.path()
    entries = pickle.loads(path.read_bytes())
    forged = {}
    for k, v in entries.items():
        pairs = pickle.loads(v)
        pairs[0][1].title = "forged"
        forged[k] = pickle.dumps(pairs)
    path.write_bytes(pickle.dumps(forged))
    assert [r.title for _, r in rules.LoadedRules().rules_of(d)] == ["forged"]     # this user's own file: used
    os.chmod(path, 0o666)
    assert [r.title for _, r in rules.LoadedRules().rules_of(d)] != ["forged"]     # writable by others: loaded anew


def test_needles_are_kept_and_read_back_as_found(tmp_path, monkeypatch):
    import re
    from diagnose.sources import literals
    from diagnose.sources.engines.vllm.lines import Parser
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    table = [rx for rx, _ in Parser._simple] + [re.compile(r"(?i)case|blind"), re.compile(r"\d+ tokens? left")]
    first = literals.KeptNeedles()
    found = [first.needles(rx) for rx in table]
    assert found == [literals._needles(rx) for rx in table] and any(found) and None in found
    first.save()
    second = literals.KeptNeedles()
    monkeypatch.setattr(literals, "_needles", lambda rx: pytest.fail("read back, not parsed again"))
    assert [second.needles(rx) for rx in table] == found and not second.new
    path = literals.KeptNeedles.path()
    import json
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "version": "another Python"}))
    assert literals.KeptNeedles()._load() == {}         # another parser, another module: found anew


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


def _rules_run(cache, cwd) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "diagnose", "rules"], env=_env(cache), cwd=cwd, capture_output=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    return p


def test_a_group_writable_cache_dir_of_ones_own_is_tightened(tmp_path):
    cache = tmp_path / "diagnose"
    cache.mkdir()
    os.chmod(cache, 0o775)                          # made under umask 002 by an earlier version
    _rules_run(tmp_path, tmp_path)
    assert (cache / "parsed-toml-v1.json").exists() and not cache.stat().st_mode & 0o022


def test_a_cache_dir_of_someone_else_is_not_written(tmp_path, monkeypatch):
    from diagnose import cachedir, tomlcache
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(cachedir, "private_dir", lambda d, create=True: False)
    parsed = tomlcache.ParsedFiles()
    assert parsed.loads('id = "x"\n') == {"id": "x"}
    parsed.save()
    assert not list(tmp_path.rglob("*.json"))


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to give a directory away")
def test_a_cache_dir_owned_by_another_user_is_not_used(tmp_path):
    cache = tmp_path / "diagnose"
    cache.mkdir(mode=0o755)
    (cache / "planted.txt").write_text("x")
    os.chown(cache, 65534, 65534)
    _rules_run(tmp_path, tmp_path)
    assert sorted(p.name for p in cache.iterdir()) == ["planted.txt"]


def test_parsed_rules_from_a_file_others_can_write_are_not_used(tmp_path, monkeypatch):
    import json
    from diagnose import tomlcache
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    text = 'id = "x"\n'
    first = tomlcache.ParsedFiles()
    first.loads(text)
    first.save()
    path = tomlcache.ParsedFiles.path()
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({k: json.dumps({"id": "forged"}) for k in doc}))
    assert tomlcache.ParsedFiles().loads(text) == {"id": "forged"}     # this user's own file: used
    os.chmod(path, 0o666)
    assert tomlcache.ParsedFiles().loads(text) == {"id": "x"}          # writable by others: parsed anew


# (3) a relative XDG_CACHE_HOME ---------------------------------------------------------------

def test_a_relative_xdg_cache_home_is_ignored(tmp_path, monkeypatch):
    from diagnose.cachedir import cache_dir
    from diagnose.tomlcache import ParsedFiles
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    home_cache = tmp_path / "home" / ".cache" / "diagnose"
    assert cache_dir() == home_cache
    assert ParsedFiles.path().parent == home_cache
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
    assert (tmp_path / "home" / ".cache" / "diagnose" / "parsed-toml-v1.json").exists()


# (4) the slower path, said once ------------------------------------------------------------------

def _two_logs(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_bytes(SEED.read_bytes())
    b.write_bytes(SEED.read_bytes())
    return a, b


def test_nothing_is_said_when_the_python_reader_is_chosen_or_the_c_scanner_works(tmp_path, need_cc):
    logs = _two_logs(tmp_path)
    for extra in ({"DIAGNOSE_NATIVE": "0"}, {}):
        rc, term = on_a_terminal([sys.executable, "-m", "diagnose", "--format", "json", *logs],
                                 _env(tmp_path / "cache", DIAGNOSE_BULK_MIN_BYTES="0", **extra))
        assert rc in (0, 1) and "note:" not in term, (extra, term)


def test_a_big_input_is_told_even_in_a_pipe_and_only_once(monkeypatch, capsys):
    from diagnose.sources.readers import native
    monkeypatch.setattr(native, "_noted", False)
    monkeypatch.setattr(native, "why_not", "no C compiler (cc)")
    monkeypatch.delenv("DIAGNOSE_NATIVE", raising=False)
    native.note_fallback(False)                 # a small input, stderr not a terminal: quiet
    assert capsys.readouterr().err == ""
    native.note_fallback(True)
    native.note_fallback(True)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("diagnose: note: ") and "no C compiler (cc)" in err


# (4) compiled patterns ------------------------------------------------------------------------

_COMPILE = """
import json, re, sys
from diagnose import recache
recache.install()
if sys.argv[1] == "parser-off":         # a run that must find every pattern kept
    def refuse(*a, **k):
        raise AssertionError("compiled afresh")
    recache._installed.compile = refuse     # the library's own compile step
rx = re.compile(r"(?P<n>\\d+) tokens/s(?i:, Running)?")
loose = re.compile(rb"ab+c", re.I)
m = rx.search("Avg 812 tokens/s, RUNNING: 3")
print(json.dumps([m.group("n"), m.span(), rx.groupindex["n"], rx.groups, rx.flags,
                  bool(loose.fullmatch(b"ABBC")), rx.pattern]))
"""


def _compile_run(cache, mode):
    return subprocess.run([sys.executable, "-c", _COMPILE, mode], capture_output=True, text=True,
                          env=_env(cache), cwd=str(ROOT), timeout=60)


def test_compiled_patterns_are_kept_and_the_next_run_matches_alike_without_compiling(tmp_path):
    """A run keeps the code of what it compiled (recache.py); the next run hands it to the matcher
    without re's own compile step (here made to fail), and every match, group, span and flag is the
    same."""
    first = _compile_run(tmp_path, "plain")
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "diagnose" / "compiled-re-v1.marshal").is_file()
    second = _compile_run(tmp_path, "parser-off")
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    assert '"812"' in first.stdout


def test_a_damaged_forged_or_foreign_compiled_pattern_file_is_compiled_afresh(tmp_path):
    """Garbage, another Python's entries, code the matcher refuses, and a file others may write are
    not used: the run compiles anew and matches as ever (and the parser-off run then fails, which
    shows the file was not what it matched with)."""
    import marshal
    f = tmp_path / "diagnose" / "compiled-re-v1.marshal"
    want = _compile_run(tmp_path, "plain").stdout
    good = f.read_bytes()
    version, entries = marshal.loads(good)
    refused = {k: (v[0], [999999] * 4, *v[2:]) for k, v in entries.items()}     # code _sre refuses
    for raw in (b"\x00garbage", marshal.dumps((("another python",) + version[1:], entries)),
                marshal.dumps((version, refused))):
        f.write_bytes(raw)
        got = _compile_run(tmp_path, "plain")
        assert got.returncode == 0 and got.stdout == want, got.stderr
    f.write_bytes(good)
    os.chmod(f, 0o622)                      # writable by others: not read back
    assert _compile_run(tmp_path, "parser-off").returncode != 0
    os.chmod(f, 0o600)
    assert _compile_run(tmp_path, "parser-off").returncode == 0


def test_a_cache_file_that_cannot_be_put_in_place_leaves_no_temporary_file(tmp_path):
    """Something other than a file where a cache file goes (here a directory): the run works, and
    the temporary file it wrote first is removed, not left behind run after run."""
    d = tmp_path / "diagnose"
    d.mkdir(mode=0o700)
    (d / "compiled-re-v1.marshal").mkdir()
    for _ in range(2):
        p = subprocess.run([sys.executable, "-c", _COMPILE, "plain"], capture_output=True, text=True,
                           env=_env(tmp_path), cwd=str(ROOT), timeout=60)
        assert p.returncode == 0, p.stderr
    assert sorted(x.name for x in d.iterdir() if x.name.startswith(".")) == []
