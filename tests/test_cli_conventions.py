"""Command-line conventions a user expects: -V, -q, -o with a one-line summary, no wrapping on a
pipe, `diagnose gpu FILE`, --follow waiting for a file as `tail -F` does."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import diagnose
from conftest import FIXTURES, ROOT, run_cli, one

LOG = FIXTURES / "seed003" / "realtime.log"
DMON = FIXTURES / "seed003" / "dmon.txt"


def test_short_version_flag():
    p = run_cli("-V")
    assert p.returncode == 0 and p.stdout.decode().strip() == f"diagnose {diagnose.__version__}"


def test_quiet_prints_nothing_and_the_exit_code_still_gates(tmp_path):
    p = run_cli("-q", LOG)
    assert p.returncode == 0 and p.stdout == b""
    p = run_cli("--quiet", "--fail-on", "high", LOG)          # tp-for-small-model is HIGH
    assert p.returncode == 1 and p.stdout == b""
    p = run_cli("-q", tmp_path / "missing.log")               # errors still say what is wrong
    assert p.returncode == 2 and b"missing.log" in p.stderr
    out = tmp_path / "r.json"
    p = run_cli("-q", "-f", "json", "-o", out, LOG)
    assert p.stdout == b"" and one(out.read_text())["findings"]


def test_output_file_gets_the_report_and_stdout_one_line(tmp_path):
    for fmt in ("terminal", "markdown", "json"):
        out = tmp_path / f"r.{fmt}"
        p = run_cli("-f", fmt, "-o", out, LOG)
        lines = p.stdout.decode().splitlines()
        assert p.returncode == 0 and len(lines) == 1, lines
        assert str(out) in lines[0] and "finding(s)" in lines[0] and "verdict client-bound" in lines[0]
        assert "tp-for-small-model" in out.read_text()


def test_a_pipe_without_columns_gets_unwrapped_lines():
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    env.pop("COLUMNS", None)
    p = subprocess.run([sys.executable, "-m", "diagnose", LOG], capture_output=True, env=env, cwd=ROOT, timeout=120)
    text = p.stdout.decode()
    # the steady-window line is longer than 80 columns and stays one line; a path is never split
    line = next(x for x in text.splitlines() if "steady window" in x)
    assert len(line) > 80 and "start-up excluded" in line
    assert any(str(LOG) in x and "lines," in x for x in text.splitlines())


GPU_INPUTS = {"nvidia-smi dmon": [DMON], "nvidia-smi --query-gpu CSV": [FIXTURES / "gpu" / "throttling-query.csv"],
              "nvidia-smi topo -m": [FIXTURES / "gpu" / "topo-nvlink-8xh100.txt"],
              "several, with --fail-on": ["--fail-on", "info", FIXTURES / "gpu" / "host-bound-query.csv",
                                          FIXTURES / "gpu" / "topo-nvlink-8xh100.txt"]}


@pytest.mark.parametrize("args", GPU_INPUTS.values(), ids=GPU_INPUTS)
def test_gpu_command_reads_captured_samples_like_the_main_command(args):
    a = run_cli("-f", "json", *args)
    b = run_cli("gpu", "-f", "json", *args)
    assert a.returncode == b.returncode and a.returncode in (0, 1), b.stderr.decode()
    ra, rb = json.loads(a.stdout), json.loads(b.stdout)
    assert [i["kind"] for i in rb["inputs"]] == [i["kind"] for i in ra["inputs"]]
    assert rb["inputs"][0]["recognised_lines"] > 0
    da, db = one(a.stdout), one(b.stdout)
    assert da["verdict"] == db["verdict"] and da["findings"] == db["findings"]


def test_gpu_command_without_live_or_files_says_how_to_use_it(tmp_path):
    p = run_cli("gpu")                                        # neither --live nor a file
    assert p.returncode == 2 and b"gpu FILE" in p.stderr
    p = run_cli("gpu", tmp_path / "nope.csv")                 # a file that is not there: named, exit 2
    assert p.returncode == 2 and b"nope.csv" in p.stderr and b"unexpected extra argument" not in p.stderr


@pytest.mark.parametrize("start,says", [("missing", "to appear"), ("empty", "to be written to")])
def test_follow_waits_for_a_file_that_is_not_there_yet(tmp_path, start, says):
    log = tmp_path / "later.log"
    if start == "empty":
        log.touch()
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    proc = subprocess.Popen([sys.executable, "-m", "diagnose", "--follow", "--interval", "1s", "-f", "json", str(log)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    try:
        time.sleep(2)
        assert proc.poll() is None, proc.stderr.read().decode()      # waiting, not refused
        log.write_bytes(LOG.read_bytes())
        first = proc.stdout.readline()                               # the first pass, once it is there
        assert one(first)["deployment"]["model"] == "Qwen/Qwen3-VL-2B-Instruct"
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert err.decode().count("waiting for") == 1 and says in err.decode()      # said once


def test_follow_stopped_while_waiting_exits_as_interrupted(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    proc = subprocess.Popen([sys.executable, "-m", "diagnose", "--follow", str(tmp_path / "never.log")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and out == b"" and b"waiting for" in err


def test_shell_completion_script_and_answers():
    # the script --show-completion prints for bash (it detects the shell from its parent: asked for
    # bash directly here, whatever shell runs the suite)
    env = dict(os.environ, PYTHONPATH=str(ROOT), _DIAGNOSE_COMPLETE="source_bash")
    p = subprocess.run([sys.executable, "-m", "diagnose"], capture_output=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 0 and b"_DIAGNOSE_COMPLETE" in p.stdout and b"complete " in p.stdout
    env = dict(os.environ, PYTHONPATH=str(ROOT), COMP_WORDS="diagnose --fail", COMP_CWORD="1",
               _DIAGNOSE_COMPLETE="complete_bash")
    q = subprocess.run([sys.executable, "-m", "diagnose"], capture_output=True, env=env, cwd=ROOT, timeout=60)
    assert q.stdout.decode().split() == ["--fail-on", "--fail-on-regression"]


def test_install_completion_then_tab_in_bash_completes_the_options(tmp_path):
    """What a user does: `diagnose --install-completion` from bash, a new bash, then TAB."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "diagnose").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m diagnose "$@"\n')
    (bin_dir / "diagnose").chmod(0o755)
    env = dict(os.environ, HOME=str(tmp_path), SHELL="/bin/bash", PYTHONPATH=str(ROOT),
               PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    # (`; exit $?`: bash stays the program's parent, not exec'd away, so that the shell detected is
    # bash whatever shell runs the suite: under `sh -c '… pytest'` it was sh, which typer refuses)
    p = subprocess.run(["bash", "--norc", "-c", "diagnose --install-completion; exit $?"], capture_output=True, env=env,
                       cwd=tmp_path, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    tab = ("source ~/.bashrc; COMP_WORDS=(diagnose --fail); COMP_CWORD=1; _diagnose_completion diagnose; "
           "printf '%s\\n' \"${COMPREPLY[@]}\"")
    q = subprocess.run(["bash", "--norc", "-c", tab], capture_output=True, env=env, cwd=tmp_path, timeout=60)
    assert q.stdout.decode().split() == ["--fail-on", "--fail-on-regression"], q.stderr.decode()
