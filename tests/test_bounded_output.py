"""Bounded on any input: what a file name or a log line holds never reaches a terminal or a
ticket as anything but text; `-o` is written atomically, keeps a replaced report's mode and never
overwrites an input; SIGINT/SIGTERM at any moment give the final report or a clean, documented
exit (130 / 143), never a traceback or `internal error`."""
from __future__ import annotations

import json
import os
import re
import selectors
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, report, run_cli

SEED = FIXTURES / "seed003" / "realtime.log"
OSC52 = "\x1b]52;c;aGk=\x07"                     # a clipboard write: ESC ] 52 ; c ; base64 BEL
EVIL_MODEL = "[click](https://evil.example) ![x](https://evil.example/p.png) @everyone"
EVIL_NAME = f"x{OSC52}\u009b2J[bold]y.log"        # an OSC 52, a one-byte CSI, rich markup


def _env(**extra) -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", COLUMNS="120", **extra)


def _evil_log(folder: Path) -> Path:
    """seed003's log served under a hostile model name, with a line holding an OSC 52 and a
    screen clear, in a file whose name holds them too."""
    text = SEED.read_text(encoding="utf-8").replace("Qwen/Qwen3-VL-2B-Instruct", EVIL_MODEL)
    text += f"(APIServer pid=1) ERROR 10-28 14:20:00 [core.py:1] EngineCore failed to start. {OSC52} \x1b[2J [bold]x\n"
    path = folder / EVIL_NAME
    path.write_text(text, encoding="utf-8")
    return path


def _no_escape_sequence(raw: bytes, where: str) -> None:
    for bad in (b"\x1b]", b"\x07", b"\x1b[2J", "\u009b".encode()):
        assert bad not in raw, f"{bad!r} reached {where}: {raw[max(0, raw.find(bad) - 80):raw.find(bad) + 40]!r}"


# -- 1. no escape sequence from an input reaches the terminal ------------------------------------------
@pytest.mark.parametrize("colour", [False, True], ids=["plain", "FORCE_COLOR"])
def test_terminal_report_and_stderr_carry_no_escape_sequence_from_the_input(tmp_path, colour):
    log = _evil_log(tmp_path)
    env = _env(FORCE_COLOR="1") if colour else _env()
    if colour:
        env.pop("NO_COLOR")
    p = subprocess.run([sys.executable, "-m", "diagnose", str(log)], capture_output=True, env=env, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    _no_escape_sequence(p.stdout, "stdout")
    _no_escape_sequence(p.stderr, "stderr")
    out = p.stdout.decode()
    assert "\\x1b]52;c;aGk=\\x07" in out                   # the file name, shown escaped
    assert "[bold]y.log" in out                            # markup in a name is text
    if colour:
        assert "\x1b[" in out                              # rich's own colours still get through


def test_every_format_on_stdout_carries_no_escape_sequence(tmp_path):
    log = _evil_log(tmp_path)
    for fmt in ("markdown", "jira", "json", "sarif", "junit", "html"):
        p = run_cli("--format", fmt, log)
        assert p.returncode == 0, (fmt, p.stderr.decode())
        _no_escape_sequence(p.stdout + p.stderr, f"--format {fmt}")
        if fmt in ("json", "sarif"):
            doc = report(p.stdout) if fmt == "json" else json.loads(p.stdout)    # still JSON: the escapes are JSON's
            if fmt == "json":
                assert str(log) in {i["path"] for i in doc["inputs"]}


def test_error_and_skip_lines_on_stderr_are_escaped_and_one_line(tmp_path):
    missing = tmp_path / f"gone{OSC52}\nsecond line.log"
    p = run_cli(missing)
    assert p.returncode == 2
    _no_escape_sequence(p.stderr, "stderr")
    err = p.stderr.decode()
    assert err.count("\n") == 1 and err.startswith("diagnose: ") and "\\x1b]52" in err and "\\x0asecond line" in err
    # a directory with a binary file of a hostile name beside a log: the skip line names it escaped
    folder = tmp_path / "run"
    folder.mkdir()
    _evil_log(folder)
    (folder / f"core{OSC52}.bin").write_bytes(os.urandom(4096) + b"\x00" * 64)
    p = run_cli(folder)
    assert p.returncode == 0, p.stderr.decode()
    _no_escape_sequence(p.stdout + p.stderr, "a folder's skip lines")
    assert "core\\x1b]52;c;aGk=\\x07.bin" in p.stdout.decode()


def test_follow_view_and_json_lines_carry_no_escape_sequence(tmp_path):
    log = _evil_log(tmp_path)
    for fmt in ("terminal", "json"):
        p = subprocess.Popen([sys.executable, "-m", "diagnose", "--follow", str(log), "--interval", "0.3s", "--format", fmt],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=ROOT)
        _first_line(p)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err.decode()
        _no_escape_sequence(out + err, f"--follow --format {fmt}")


# -- Markdown: input text stays text in a ticket -----------------------------------------------------------
def _outside_code(md: str) -> str:
    """The Markdown without its fenced blocks and code spans (where nothing is ever live)."""
    md = re.sub(r"^(`{3,})[^\n]*\n.*?^\1\s*$", "", md, flags=re.M | re.S)
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", md)


def test_markdown_makes_no_link_image_or_mention_of_input_text(tmp_path):
    from markdown_it import MarkdownIt
    log = _evil_log(tmp_path)
    p = run_cli("--format", "markdown", log)
    assert p.returncode == 0, p.stderr.decode()
    md = p.stdout.decode()
    assert "](http" not in md and "![" not in md, md[:2000]
    text = _outside_code(md)
    assert not re.search(r"(?<![\w`])@everyone", text), text[:2000]
    assert not re.search(r"https?://evil", text), "a bare URL GitHub would link"
    assert "click" in md.splitlines()[0] and "everyone" in md.splitlines()[0]     # still named, as text
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    assert "<a " not in html and "<img" not in html, html[:3000]
    visible = re.sub(r"<(pre|code)>.*?</\1>", "", html, flags=re.S)
    assert "@everyone" not in visible
    # the deployment table keeps its two columns
    row = next(x for x in md.splitlines() if x.startswith("| model |"))
    assert len(re.split(r"(?<!\\)\|", row.strip().strip("|"))) == 2, row


def test_markdown_cell_escapes_what_would_be_live():
    from diagnose.reports.markdown import _cell, _code, _fence
    cell = _cell("a\\[b](http://x) ![i](https://y/p.png) <img> @team www.z.example | > q")
    assert "](" not in cell and "![" not in cell and "<img" not in cell and "@team" not in cell
    assert "://" not in cell and "www." not in cell and re.search(r"(?<!\\)\|", cell) is None
    assert _cell("> quoted").startswith("\\>") and "2>&1" in _cell("run it with `2>&1`")
    assert "](" not in _code("[a](http://x)") and "![" not in _code("![a](b)")
    assert _fence(["``` ```` x"])[0] == "`````"            # no line inside closes the block


def test_html_report_escapes_input_text(tmp_path):
    log = _evil_log(tmp_path)
    p = run_cli("--format", "html", log)
    assert p.returncode == 0, p.stderr.decode()
    page = p.stdout.decode()
    assert '<a href="https://evil' not in page and '<img src="https://evil' not in page
    assert "[bold]x" in page and "<bold>" not in page
    _no_escape_sequence(p.stdout, "the HTML report")


# -- 2. -o: atomic, the mode kept, never an input ----------------------------------------------------------
def test_output_keeps_a_replaced_reports_mode_and_a_new_one_gets_the_umask(tmp_path):
    out = tmp_path / "report.md"
    out.write_text("old\n")
    out.chmod(0o600)
    p = run_cli("--format", "markdown", "-o", out, SEED)
    assert p.returncode == 0, p.stderr.decode()
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and out.read_text().startswith("# diagnose:")
    new = tmp_path / "new.md"
    p = subprocess.run([sys.executable, "-m", "diagnose", "--format", "markdown", "-o", str(new), str(SEED)],
                       capture_output=True, env=_env(), cwd=ROOT, timeout=120, preexec_fn=lambda: os.umask(0o027))
    assert p.returncode == 0, p.stderr.decode()
    assert stat.S_IMODE(new.stat().st_mode) == 0o640
    # through a symbolic link: the file it names is replaced, the link stays
    link = tmp_path / "link.md"
    link.symlink_to(out.name)
    assert run_cli("--format", "json", "-o", link, SEED).returncode == 0
    assert link.is_symlink() and out.read_text().startswith("{")
    assert not [x for x in os.listdir(tmp_path) if x.startswith(".diagnose-")]


@pytest.mark.parametrize("how", ["file", "relative", "directory", "glob", "symlink", "baseline", "stdin"])
def test_output_naming_an_input_is_refused_and_the_input_untouched(tmp_path, how):
    folder = tmp_path / "logs"
    folder.mkdir()
    log = folder / "server.log"
    log.write_bytes(SEED.read_bytes())
    (tmp_path / "alias.log").symlink_to(log)
    before = (log.read_bytes(), log.stat().st_mtime_ns)
    args, out, stdin = {
        "file": ([log], log, None),
        "relative": ([log], "logs/./server.log", None),
        "directory": ([folder], log, None),
        "glob": ([str(folder / "*.log")], log, None),
        "symlink": ([tmp_path / "alias.log"], log, None),
        "baseline": ([SEED, "--baseline", log], log, None),
        "stdin": (["-"], log, log),
    }[how]
    if stdin is not None:
        with open(stdin, "rb") as fh:
            p = subprocess.run([sys.executable, "-m", "diagnose", "-o", str(out), *map(str, args)], stdin=fh,
                               capture_output=True, env=_env(), cwd=tmp_path, timeout=120)
    else:
        p = run_cli("-o", out, *args, cwd=tmp_path)
    err = p.stderr.decode()
    assert p.returncode == 2 and err == f"diagnose: -o {out}: is one of the inputs; not overwritten\n", err
    assert (log.read_bytes(), log.stat().st_mtime_ns) == before
    assert not [x for x in os.listdir(folder) if x.startswith(".diagnose-")]


def test_write_atomic_removes_its_temporary_file_on_any_failure(tmp_path, monkeypatch):
    from diagnose import cli
    from diagnose.live import Interrupted
    out = tmp_path / "r.txt"
    out.write_text("previous\n")
    for exc in (Interrupted(signal.SIGTERM), KeyboardInterrupt()):
        def boom(*a, exc=exc):
            raise exc
        monkeypatch.setattr(cli.os, "replace", boom)
        with pytest.raises(type(exc)):
            cli._write_atomic(str(out), "new\n")
        assert out.read_text() == "previous\n"
        assert os.listdir(tmp_path) == ["r.txt"]


# -- 3. signals --------------------------------------------------------------------------------------------
def _first_line(p: subprocess.Popen, timeout: float = 60) -> bytes:
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    assert sel.select(timeout=timeout), "no report within the time"
    line = p.stdout.readline()
    assert line, p.stderr.read().decode()[-2000:]
    return line


def _clean_end(p: subprocess.Popen, sig: int, out: bytes, err: bytes, want_final: bool, fail_code: int = 0):
    """The documented ends: the final report (exit 0, or 1 under --fail-on), or, before any pass
    finished, 128 + the signal's number with one line — never a traceback or an internal error."""
    text = err.decode()
    assert "Traceback" not in text and "internal error" not in text, text
    lines = out.decode().splitlines()
    if lines:
        last = json.loads(lines[-1])
        assert last.get("final") is True, lines[-1][:300]
        if "stopped before any diagnosis" in lines[-1]:
            assert p.returncode == 128 + sig
        else:
            assert p.returncode == fail_code, (p.returncode, text)
    else:
        assert not want_final, f"no final report: {p.returncode} {text}"
        assert p.returncode == 128 + sig and text.endswith("diagnose: interrupted\n"), (p.returncode, text)


def _follow(log, *extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "diagnose", "--follow", str(log), "--interval", "0.3s", "--format", "json",
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=ROOT)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("when", [0.2, 1.0, "after the first report"])
def test_follow_ends_cleanly_on_a_signal_at_any_moment(tmp_path, sig, when):
    log = tmp_path / "server.log"
    log.write_bytes(SEED.read_bytes())
    p = _follow(log)
    first = b""
    if when == "after the first report":
        first = _first_line(p)
    else:
        time.sleep(when)
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    _clean_end(p, sig, first + out, err, want_final=bool(first))     # by 0.2 s or 1 s it may still be starting


def test_follow_final_report_under_fail_on_exits_1(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(SEED.read_bytes())
    p = _follow(log, "--fail-on", "high")
    first = _first_line(p)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    _clean_end(p, signal.SIGTERM, first + out, err, want_final=True, fail_code=1)


def _big_log(path: Path, mb: int) -> Path:
    lines = SEED.read_text(encoding="utf-8").splitlines(keepends=True)
    body = "".join(lines[100:])
    with path.open("w", encoding="utf-8") as fh:
        fh.write("".join(lines))
        for _ in range(mb * 1024 * 1024 // len(body.encode())):
            fh.write(body)
    return path


@pytest.fixture(scope="module")
def big_log(tmp_path_factory) -> Path:
    return _big_log(tmp_path_factory.mktemp("big") / "server.log", 40)


def _wait_until_reading(p: subprocess.Popen, path: Path, timeout: float = 30) -> None:
    """Until the process has `path` open: its analysis is under way (signal handlers installed).
    Without /proc, a fixed wait."""
    if not os.path.isdir(f"/proc/{p.pid}/fd"):
        time.sleep(2.0)
        return
    end = time.monotonic() + timeout
    while time.monotonic() < end and p.poll() is None:
        try:
            if any(os.readlink(f"/proc/{p.pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{p.pid}/fd")):
                time.sleep(0.1)
                return
        except OSError:
            pass
        time.sleep(0.01)
    raise AssertionError(f"{path} never opened: {p.poll()}")


def test_a_second_signal_during_the_first_pass_stops_at_once(big_log):
    """The first signal lets the pass under way finish (it says so); a second one stops it: before
    any pass finished, `diagnose: interrupted` and 130, promptly."""
    p = subprocess.Popen([sys.executable, "-m", "diagnose", "--follow", str(big_log), "--format", "json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(DIAGNOSE_NATIVE="0"), cwd=ROOT)
    _wait_until_reading(p, big_log)
    p.send_signal(signal.SIGINT)
    time.sleep(0.5)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert time.monotonic() - t0 < 15
    text = err.decode()
    assert "stopping after this pass" in text and text.endswith("diagnose: interrupted\n"), text
    assert p.returncode == 130 and out == b""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_plain_run_stopped_by_a_signal_exits_128_plus_it_with_one_line(big_log, tmp_path, sig):
    report = tmp_path / "report.json"
    p = subprocess.Popen([sys.executable, "-m", "diagnose", "--format", "json", "-o", str(report), str(big_log)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(DIAGNOSE_NATIVE="0"), cwd=ROOT)
    _wait_until_reading(p, big_log)
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig, err.decode()
    assert err == b"diagnose: interrupted\n" and out == b""
    assert os.listdir(tmp_path) == []                     # no report, no temporary file


# -- the loop itself, in-process: a signal is a flag, never an exception inside an analysis ------------
class _Analysis:
    def __init__(self, ids):
        self.ids = ids
        self.signals = type("S", (), {"timeline": {}})()

    def to_json(self):
        return {"findings": [{"id": i, "severity": "high"} for i in self.ids]}


@pytest.fixture
def handlers():
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def _run_loop(tmp_path, monkeypatch, passes):
    """live.run over a file, the command's first pass given, each later pass one of `passes`."""
    from diagnose import live, pipeline
    log = tmp_path / "x.log"
    log.write_text("x\n")
    calls = iter(passes)
    monkeypatch.setattr(pipeline, "analyze_all", lambda *a, **k: next(calls)())
    monkeypatch.setattr(pipeline, "combined_json", lambda analyses: {"ids": [i for a in analyses for i in a.ids]})
    stop = live.Stop().install()
    first = ([_Analysis(["first"])], None, 0.0, 0.0)      # stamp None: the file "changed", a pass runs
    limit = ["critical", "high", "medium", "low", "info"].index("high")      # --fail-on high
    return live.run([str(log)], None, {}, 0.05, True, None, limit, False, stop=stop, first=first)


def test_a_signal_during_a_pass_makes_that_pass_the_final_report(tmp_path, monkeypatch, capsys, handlers):
    def second_pass():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        return [_Analysis(["second"])]
    code = _run_loop(tmp_path, monkeypatch, [second_pass])
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[-1]["final"] is True and lines[-1]["ids"] == ["second"]
    assert code == 1                                       # a `high` finding under --fail-on high


def test_a_second_signal_during_a_later_pass_gives_the_last_finished_report(tmp_path, monkeypatch, capsys, handlers):
    def stopped_pass():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)               # raises live.Interrupted here, inside the "analysis"
        time.sleep(0.05)
        raise AssertionError("not stopped")
    code = _run_loop(tmp_path, monkeypatch, [stopped_pass])
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[-1]["final"] is True and lines[-1]["ids"] == ["first"]
    assert code == 1


# -- the documented exit codes ------------------------------------------------------------------------------
def test_every_exit_code_is_in_the_help_and_the_readme():
    from diagnose.cli import EXIT_CODES
    assert set(EXIT_CODES) == {0, 1, 2, 3, 130, 143}
    help_text = run_cli("--help").stdout.decode()
    section = help_text[help_text.index("Exit codes:"):]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for code in EXIT_CODES:
        assert re.search(rf"^\s+{code}\s+\S", section, re.M), (code, section)
        assert f"| **{code}** |" in readme, code


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads a process's memory from /proc")
def test_following_a_log_for_many_passes_keeps_memory_flat(tmp_path):
    """Each --follow pass makes a copy of what was read (its report is made from it); the last
    pass's copy is let go, reference cycles included (Rows.shared: only the collector frees
    them, and an analysis runs without it). Without that, memory grew by a pass's copies (~15 MB
    here, tens of MB on a day's log) every pass, until the process was killed."""
    src = FIXTURES / "real" / "vllm-leadawon-lambo-qwen35-27b-tp4-toc-maxseqs1.log"    # ~8,000 stats lines
    lines = src.read_bytes().splitlines(keepends=True)
    log = tmp_path / "server.log"
    log.write_bytes(b"".join(lines) * 4)
    p = _follow(log)
    try:
        _first_line(p)
        rss = []
        for i in range(9):
            with log.open("ab") as fh:
                fh.writelines(lines[-200:])
            _first_line(p)
            rss.append(_rss_mb(p.pid))
        assert rss[-1] - rss[1] < 25, rss
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    assert "Traceback" not in err.decode()
