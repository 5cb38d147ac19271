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
    # The terminal wraps long evidence lines inside a box (where depends on the checkout's path).
    flat = " ".join(out.replace("│", " ").split())
    assert "prefix-caching-off" in out and "Received request" in flat   # the request lines are cited…
    assert "<redacted" in out
    for s in SECRETS:                                                    # …but not what users wrote
        assert s not in out and s not in flat                            # (nor split by a wrap)


def test_no_redact_shows_them():
    out = run_cli("--format", "json", "--no-redact", LOG).stdout.decode()
    assert "SupportBot for ACME" in out
