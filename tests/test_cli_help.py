"""What `diagnose --help` shows a user: the subcommands and --version, -h as well as --help, and a
real metavar (FILE, URL, SECONDS, ...) for every argument and option, never a type name."""
from __future__ import annotations

import re

import pytest

from conftest import run_cli

COMMANDS = [[], ["rules"], ["gpu"], ["capacity"]]


def _help(*args: str) -> str:
    p = run_cli(*args)
    assert p.returncode == 0, p.stderr.decode()
    assert p.stderr == b""
    return p.stdout.decode()


def test_main_help_lists_the_subcommands_and_version():
    text = _help("--help")
    assert text.startswith("Usage: diagnose ")
    commands = text[text.index("Commands:"):]
    for name in ("rules", "gpu", "capacity"):
        line = next((ln for ln in commands.splitlines() if ln.split()[:1] == [name]), None)
        assert line is not None, f"{name} not listed:\n{commands}"
        assert len(line.split()) > 3, f"{name} has no description: {line!r}"
    assert re.search(r"^\s+-V, --version\s+\S", text, re.M), text
    assert re.search(r"^\s+-h, --help\s", text, re.M), text
    assert "diagnose COMMAND -h" in text


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: " ".join(c) or "diagnose")
def test_dash_h_is_help_and_shows_no_type_names(cmd):
    long = _help(*cmd, "--help")
    assert _help(*cmd, "-h") == long
    assert long.startswith("Usage: " + " ".join(["diagnose", *cmd]) + " ")
    for bad in ("<str>", "<int>", "<float>", "<text>", "<integer>", "<path>"):
        assert bad not in long, f"{bad} in `diagnose {' '.join(cmd)} --help`:\n{long}"
    # every option that takes a value names it: `--opt METAVAR`, or `<choice|...>` for an enum
    for m in re.finditer(r"^\s+(?:-\w, )?(--[\w-]+)(?: (\S+))?", long, re.M):
        opt, metavar = m.groups()
        if metavar is not None:
            assert re.fullmatch(r"[A-Z][A-Z_|,.\[\]]*|<[a-z0-9|]+>", metavar), (opt, metavar)


def test_each_value_option_has_its_metavar():
    main = _help("--help")
    for opt, metavar in [("--baseline", "FILE"), ("--rules", "DIR"), ("--ignore", "RULE_ID"),
                         ("--prometheus", "URL"), ("--since", "DURATION"), ("--start", "TIME"),
                         ("--end", "TIME"), ("--timeout", "SECONDS"), ("--model", "MODEL"),
                         ("--gpu-name", "GPU"), ("--output", "FILE"), ("--config", "FILE")]:
        assert re.search(rf"{opt} {re.escape(metavar)}\b", main), (opt, metavar)
    cap = _help("capacity", "-h")
    for opt, metavar in [("--model", "MODEL"), ("--gpu", "GPU"), ("--tp", "N"), ("--context", "TOKENS"),
                         ("--model-config", "FILE")]:
        assert f"{opt} {metavar}" in cap, (opt, metavar)
    assert "--seconds SECONDS" in _help("gpu", "-h")
    assert "[RULE_ID]" in _help("rules", "-h")


def test_version_anywhere_on_the_line():
    for args in (["--version"], ["--format", "json", "--version"]):
        p = run_cli(*args)
        assert p.returncode == 0 and p.stdout.decode().startswith("diagnose "), p.stderr.decode()
