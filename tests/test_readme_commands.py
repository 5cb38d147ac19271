"""The README opens with exactly two commands that do all the set-up; CI runs the second one; the
first, run in a copy of this checkout, installs diagnose into a virtual environment (never into the
system Python, which Debian and Ubuntu refuse: PEP 668) and diagnoses the bundled example."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.match(r"# diagnose\n\n```bash\n(.*?)\n```\n", text, re.S)
    assert m, "the README must open with a ```bash block right under its title"
    return m.group(1).splitlines()


def test_readme_opens_with_exactly_two_commands():
    cmds = readme_commands()
    assert len(cmds) == 2 and all(c.strip() and not c.startswith("#") for c in cmds), cmds
    assert "fixtures/seed003/realtime.log" in cmds[0] and "pytest" in cmds[1]


def test_ci_runs_the_readme_test_command():
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert readme_commands()[1] in run, ".ci/run must call the README's test command verbatim"
    # and nothing in it can turn a failed install into a green run
    assert not any("|| true" in line for line in run)


def test_bootstrap_refuses_an_unknown_option_and_a_missing_python(tmp_path):
    p = subprocess.run(["sh", str(ROOT / "scripts" / "bootstrap"), "--bogus"], capture_output=True)
    assert p.returncode == 2 and b"usage: sh scripts/bootstrap [--test]" in p.stderr
    env = dict(os.environ, PYTHON=str(tmp_path / "no-such-python"))
    p = subprocess.run(["sh", str(ROOT / "scripts" / "bootstrap")], capture_output=True, env=env)
    assert p.returncode == 1
    assert p.stderr.decode().strip() == f"bootstrap: {tmp_path / 'no-such-python'} not found: install Python 3.10 or " \
                                       "newer (Debian/Ubuntu: apt-get install python3)"


def test_bootstrap_refuses_a_python_older_than_supported(tmp_path):
    old = tmp_path / "python3.9"
    old.write_text("#!/bin/sh\ncase \"$1\" in -V) echo 'Python 3.9.18';; *) exit 1;; esac\n")
    old.chmod(0o755)
    p = subprocess.run(["sh", str(ROOT / "scripts" / "bootstrap")], capture_output=True,
                       env=dict(os.environ, PYTHON=str(old)))
    assert p.returncode == 1
    assert "diagnose needs Python 3.10 or newer" in p.stderr.decode() and "Python 3.9.18" in p.stderr.decode()


def test_readme_first_command_in_a_fresh_copy(tmp_path):
    """Command 1 as written, in a copy of the checkout (its .venv and caches left out): it makes
    .venv, installs the package there (not into the interpreter that runs the tests) and prints the
    diagnosis of the bundled log."""
    copy = tmp_path / "diagnose"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".venv", ".venv-*", "__pycache__",
                                                               ".pytest_cache", "incoming", "*.egg-info"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # python3 on PATH is the interpreter running the tests, as a user's would be
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", NO_COLOR="1", COLUMNS="120")
    p = subprocess.run(["sh", "-c", readme_commands()[0]], cwd=copy, capture_output=True, env=env, timeout=900)
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert "bootstrap: ready:" in p.stderr.decode()
    assert (copy / ".venv" / "bin" / "diagnose").exists()
    assert "Bottleneck:" in out and "--enforce-eager" in out and "--tensor-parallel-size 1" in out
    # the package in .venv is a real install, not a path back into the checkout
    q = subprocess.run([str(copy / ".venv" / "bin" / "python"), "-c", "import diagnose; print(diagnose.__file__)"],
                       capture_output=True, cwd=tmp_path, env=env)
    assert "site-packages" in q.stdout.decode() and str(copy / "diagnose") not in q.stdout.decode()
