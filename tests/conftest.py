"""Shared helpers: run diagnose the way a user does (a subprocess), or in-process for speed."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
# Real excerpts from public bug reports (a copy of the team's ../shared/samples, with their
# MANIFEST.md provenance): in the repository so that a fresh clone runs every test.
SAMPLES_DIR = FIXTURES / "samples"

# One temporary folder for the whole session, removed at its end: the tests' scratch files and a
# private XDG_CACHE_HOME (parsed rules), so that a test run neither reads nor
# leaves anything in the real ~/.cache. Set before any test imports diagnose or starts it.
TEST_TMP = Path(tempfile.mkdtemp(prefix="diagnose-tests-"))
os.environ["XDG_CACHE_HOME"] = str(TEST_TMP / "cache")
# What several test files compute alike (the small-log path's reading of a fixture), kept once for
# the whole run: the first process to load this file (the run's, before its workers start, which
# inherit the environment) names the folder, inside its own TEST_TMP, removed with it.
SHARED = Path(os.environ.setdefault("DIAGNOSE_TESTS_SHARED", str(TEST_TMP / "shared")))


def _native_library_in_the_checkout() -> None:
    """The tests import diagnose from this checkout: its C scanner is built here when missing, or
    older than scan.c (an edit), as `pip install -e .` would. Where no compiler works, the C
    scanner's tests skip and say why; diagnose itself never compiles at run time."""
    from diagnose.sources.readers.native import build
    lib = build.LIBRARY
    # the key of the scan.c it was built from is a string in the file (read, not loaded: a library
    # loaded here would stay the process's one after a rebuild)
    if lib.exists() and build.source_key(build.SOURCE.read_bytes()).encode() in lib.read_bytes():
        return
    try:
        build.build()
    except build.BuildError:
        pass


_native_library_in_the_checkout()

# The tests start diagnose as a user does, hundreds of times. Where the environment forbids
# bytecode (PYTHONDONTWRITEBYTECODE, set by some containers), each start would compile ~100
# modules first, which no installed copy does (pip writes the bytecode at install): compiled once
# here, and the child processes may use it.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    import compileall
    compileall.compile_dir(str(ROOT / "diagnose"), quiet=2)


# The suite runs on two workers, a test file at a time each (`--dist loadfile`), in collection
# order: the longest files first, so that neither worker is left with one of them at the end.
SLOW_FIRST = ("test_fuzz.py", "test_hostile_inputs.py", "test_readers_agree.py", "test_packaging.py",
              "test_prometheus_live.py", "test_real_corpus.py", "test_metrics_one_way.py", "test_readme_commands.py",
              "test_action.py", "test_prefilter.py", "test_signal_producers.py", "test_rule_cases.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))      # stable: each file's own order kept


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(TEST_TMP, ignore_errors=True)


def run_cli(*args, input: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", COLUMNS="120")
    return subprocess.run([sys.executable, "-m", "diagnose", *map(str, args)], input=input,
                          capture_output=True, cwd=cwd or ROOT, env=env, timeout=120)


REPORT_SCHEMA = json.loads((ROOT / "diagnose" / "data" / "report.schema.json").read_text(encoding="utf-8"))


def report(text) -> dict:
    """A `--format json` report as a test reads it: parsed, and valid against the schema that
    ships in the package (`diagnose schema`), or the test fails with the first violation."""
    import jsonschema
    doc = json.loads(text)
    jsonschema.Draft202012Validator(REPORT_SCHEMA).validate(doc)
    return doc


def one(text) -> dict:
    """The analysis of a report of one deployment (a report of several fails here)."""
    doc = report(text)
    assert len(doc["analyses"]) == 1, [a.get("instance") for a in doc["analyses"]]
    return doc["analyses"][0]


def run_json(*args) -> dict:
    p = run_cli("--format", "json", *args)
    assert p.returncode == 0, p.stderr.decode()
    return report(p.stdout)


def run_one(*args) -> dict:
    """`run_json` for one deployment: its analysis."""
    doc = run_json(*args)
    assert len(doc["analyses"]) == 1, [a.get("instance") for a in doc["analyses"]]
    return doc["analyses"][0]


@pytest.fixture(scope="session")
def rules():
    from diagnose.ruleset.rules import load_rules
    return load_rules()


def analyze(*paths, **kw):
    from diagnose.pipeline import analyze as run
    return run([str(p) for p in paths], **kw).to_json()


@pytest.fixture(params=["native", "python"])
def bulk_engine(request, monkeypatch):
    """Run a test on both readers of big logs: C, and Python (used where no C compiler was)."""
    from diagnose.sources.readers import bulk, native
    if request.param == "native" and native.load() is None:
        pytest.skip(f"C scanner not available here: {native.why_not}")
    monkeypatch.setattr(bulk, "USE_NATIVE", request.param == "native")
    return request.param


def on_a_terminal(cmd: list, env: dict, cwd: Path = ROOT) -> tuple[int, str]:
    """Run a command with stderr on a pseudo-terminal: (exit code, what the terminal got)."""
    import pty
    import select
    master, slave = pty.openpty()
    p = subprocess.Popen([str(c) for c in cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=slave)
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


def engine_env(engine: str) -> dict:
    """The environment that makes a `diagnose` subprocess use `engine` for big inputs."""
    return {"DIAGNOSE_NATIVE": "1" if engine == "native" else "0"}


def wrapped_dump_log(tmp_path: Path) -> tuple[Path, list[str]]:
    """SGLang's `ServerArgs(...)` as a paste wraps it: cut into 70-character lines, most holding no
    keyword, which only a parser's `follow` reaches. Returns the file (three copies) and one copy's
    lines."""
    out: list[str] = []
    for line in (ROOT / "fixtures" / "mixed" / "sglang.log").read_text(encoding="utf-8").splitlines(keepends=True):
        if "ServerArgs(" in line:
            body = line.rstrip("\n")
            out += [body[i:i + 70] + "\n" for i in range(0, len(body), 70)]
        else:
            out.append(line)
    p = tmp_path / "wrapped.log"
    p.write_text("".join(out) * 3, encoding="utf-8")
    return p, out


def small_path_reading(path: Path):
    """How the small-log path (every line looked at: the reference of the other readers) reads one
    fixture: `evidence_summary`, the share understood ("share") and the line each launch begins at
    ("launches"); or the input error's text. Read once a run, whichever worker asks first
    (tests/test_readers_agree.py and tests/test_prefilter.py both compare with it)."""
    import pickle
    key = SHARED / (str(path.relative_to(FIXTURES)).replace(os.sep, "__") + ".pickle")
    try:
        return pickle.loads(key.read_bytes())
    except (OSError, EOFError, pickle.UnpicklingError):
        pass
    from diagnose.sources import InputError, load, resolve
    from diagnose.sources.loading import read_input
    from diagnose.sources.readers import bulk
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bulk, "FAST_MIN_BYTES", 10**15)
        try:
            ev = load(resolve([str(path)]))
            # a reader that counted a segment's access lines before its launch lines were read
            # split launches the others did not: where each launch begins is compared too
            launches = [p.launch_line[0] if p.launch_line else None for inp in resolve([str(path)])
                        for p in read_input(inp).pieces]
            got = {**evidence_summary(ev), "launches": launches, "share": coverage_share(ev)}
        except InputError as e:
            got = str(e)
    SHARED.mkdir(parents=True, exist_ok=True)
    tmp = key.with_name(f".{key.name}.{os.getpid()}")
    tmp.write_bytes(pickle.dumps(got))
    os.replace(tmp, key)            # two workers writing at once each leave a whole file
    return got


def coverage_share(ev) -> float:
    return ev.inputs[0].coverage.share or 0.0


def evidence_summary(ev) -> dict:
    """What a reader made of one input, for comparing readers: every count, fact, event and row.
    (Not the share of lines understood: the readers of big logs estimate it from samples of the
    lines they never hand on; `coverage_share` gives it, to compare within a tolerance.)"""
    info = ev.inputs[0]
    return {
        "lines": info.lines, "unreadable": info.unreadable_lines,
        "facts": {k: f.value for k, f in ev.facts.items()},
        "counters": dict(sorted(ev.counters.items())),
        "event_counts": dict(sorted(ev.event_counts.items())),
        "events": {k: [(e.line, e.text) for e in v] for k, v in sorted(ev.events.items())},
        "stats": [{k: v for k, v in r.items()} for r in ev.stats_rows],
        # Same heads, same keys (engines.common.head_key; the C scanner computes the same).
        "prefixes": dict(sorted(ev.prompt_prefixes.items())),
    }
