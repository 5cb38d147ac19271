"""Issue 8: a progress bar on stderr for big inputs, only when stderr is a terminal, and never in
what a pipe or a CI log receives. The thresholds are lowered through the environment so a small
generated log stands in for a 100 MB one."""
from __future__ import annotations

import gzip
import importlib
import os
import pty
import re
import select
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    p = tmp_path_factory.mktemp("progress") / "busy.log"
    importlib.import_module("generate_log").generate(str(p), 2_000_000, seed=3)
    gz = p.with_name("busy.log.gz")
    gz.write_bytes(gzip.compress(p.read_bytes(), compresslevel=1))
    return p, gz


def _env(bulk_min: int) -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), DIAGNOSE_PROGRESS_MIN_BYTES="1000",
                DIAGNOSE_BULK_MIN_BYTES=str(bulk_min), COLUMNS="100", TERM="xterm")


def _stderr_on_a_terminal(path, bulk_min: int) -> tuple[int, str, bytes]:
    """Run diagnose with stderr on a pseudo-terminal; return (exit code, what the terminal got, stdout)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "diagnose", "--format", "json", str(path)], cwd=ROOT,
                         env=_env(bulk_min), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    out = b""
    while True:
        r, _, _ = select.select([master, p.stdout], [], [], 60)
        if not r:
            break
        if master in r:
            try:
                chunk = os.read(master, 65536)
            except OSError:          # the child closed the terminal
                chunk = b""
            seen += chunk
        if p.stdout in r:
            chunk = p.stdout.read1(65536)
            if not chunk and p.poll() is not None:
                break
            out += chunk
    p.wait(60)
    os.close(master)
    return p.returncode, seen.decode("utf-8", "replace"), out


@pytest.mark.parametrize("which,bulk_min", [("plain", 0), ("plain", 10**15), ("gzip", 0), ("gzip", 10**15)],
                         ids=["plain-bulk", "plain-scanner", "gzip-bulk", "gzip-scanner"])
def test_a_bar_on_a_terminal(log, which, bulk_min):
    path = log[0] if which == "plain" else log[1]
    rc, term, out = _stderr_on_a_terminal(path, bulk_min)
    assert rc in (0, 1)
    assert path.name in term                          # the bar names the input
    assert "━" in term or "█" in term                 # and draws a bar
    done = re.findall(r"([\d.]+)/([\d.]+) [kMG]?B", term)
    assert done and done[-1][0] == done[-1][1]          # that ends full (a gzip file: compressed bytes)
    assert b"\x1b" not in out and out.lstrip().startswith(b"{")   # stdout stays clean JSON


def test_no_bar_when_stderr_is_not_a_terminal(log):
    p = subprocess.run([sys.executable, "-m", "diagnose", "--format", "json", str(log[0])], cwd=ROOT,
                       env=_env(0), capture_output=True, timeout=120)
    assert p.returncode == 0
    assert p.stderr == b""
