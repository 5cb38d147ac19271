"""Prompts and user text from request logs never reach a report unless --no-redact is given."""
from __future__ import annotations

import pytest

from conftest import FIXTURES, run_cli

LOG = FIXTURES / "requests" / "repeated-prompts.log"
SECRETS = ["jane.doe@example.com", "SupportBot for ACME", "charged twice", "1984, 1117"]


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "json"])
def test_prompts_are_redacted_in_every_format(fmt):
    p = run_cli("--format", fmt, "--verbose", LOG)
    assert p.returncode == 0, p.stderr.decode()
    out = p.stdout.decode()
    assert "prefix-caching-off" in out and "Received request" in out   # the request lines are cited…
    assert "<redacted" in out
    for s in SECRETS:                                                    # …but not what users wrote
        assert s not in out


def test_no_redact_shows_them():
    out = run_cli("--format", "json", "--no-redact", LOG).stdout.decode()
    assert "SupportBot for ACME" in out
