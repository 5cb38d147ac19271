"""Secrets and personal data never reach a shareable report (issue 34): each shape alone through
redact(), and all of them in a crash line a report cites, in every shareable format. `--no-redact`
shows them (so these tests can fail), and ordinary log text is left as it was."""
from __future__ import annotations

import pytest

from conftest import FIXTURES, run_cli
from diagnose.redact import redact

# shape: (the text as a log holds it, the part that must not show)
SHAPES = {
    "hf-token": ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOp"),
    "basic-auth": ("Authorization: Basic dXNlcjpzM2NyZXRwYXNzd29yZA==", "dXNlcjpzM2NyZXRw"),
    "url-credentials": ("postgresql://svc:Sup3rS3cretPw@db:5432/app", "Sup3rS3cretPw"),
    "url-credentials-odd": ("redis://admin:pa#ss?w/rd@cache:6379", "pa#ss?w/rd"),
    "aws-key-id": ("AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    "aws-secret": ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    "slack": ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "1234567890123-AbCd"),
    "google-key": ("https://maps.example.com/api?key=AIzaSyA1234567890abcdefghijklmnopqrstuv", "SyA1234567890abc"),
    "private-key": ("-----BEGIN RSA PRIVATE KEY-----MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"
                    "-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEAu1SU1"),
    "card": ("my card is 4111 1111 1111 1111 exp 12/29", "4111 1111 1111 1111"),
    "ssn": ("ssn 078-05-1120 on file", "078-05-1120"),
    "phone": ("call me at (415) 555-0132 or +44 20 7946 0958", "555-0132"),
    "token-ids": ("input_ids=[128000, 9906, 11, 856, 836, 374], output_ids=[40, 1097]", "9906, 11, 856"),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_shape_alone_is_redacted(shape):
    text, secret = SHAPES[shape]
    out = redact(f"ERROR 01-02 03:04:05 [x.py:1] failed: {text} (retrying)")
    assert secret not in out, out
    assert out.startswith("ERROR 01-02 03:04:05 [x.py:1] failed: ") and out.endswith(" (retrying)")


FORMATS = ["json", "markdown", "html", "sarif", "junit"]


def _crash_log(tmp_path):
    """A healthy start, then an engine crash whose exception line (cited by engine-crash) holds
    every shape."""
    text = (FIXTURES / "scenarios" / "healthy.log").read_text()
    every = " | ".join(t for t, _ in SHAPES.values())
    text += ("ERROR 01-02 03:10:00 [core.py:700] EngineCore encountered a fatal error.\n"
             "ERROR 01-02 03:10:00 [core.py:700] Traceback (most recent call last):\n"
             'ERROR 01-02 03:10:00 [core.py:700]   File "/x/core.py", line 1, in run\n'
             f"ERROR 01-02 03:10:00 [core.py:700] RuntimeError: request failed: {every}\n")
    f = tmp_path / "crash.log"
    f.write_text(text)
    return f


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    log = _crash_log(tmp_path_factory.mktemp("secrets"))
    out = {}
    for fmt in FORMATS:
        p = run_cli("--format", fmt, log)
        assert p.returncode == 0, p.stderr.decode()
        out[fmt] = (p.stdout + p.stderr).decode()
    out["no-redact"] = run_cli("--format", "json", "--no-redact", log).stdout.decode()
    return out


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_no_shape_reaches_a_shareable_report(reports, fmt, shape):
    out = reports[fmt]
    assert "RuntimeError: request failed" in out          # the crash line itself is cited…
    secret = SHAPES[shape][1]
    for variant in {secret, secret.replace("/", "\\/"), secret.replace("#", "&#x23;")}:
        assert variant not in out, f"{shape} leaked in {fmt}"   # …without what it carried


def test_no_redact_shows_them(reports):
    out = reports["no-redact"]
    assert "Sup3rS3cretPw" in out and "AbCdEfGhIjKlMnOp" in out and "4111 1111 1111 1111" in out


def test_ordinary_log_lines_are_left_as_they_were():
    """Timestamps, versions, throughput, graph sizes, request ids, ports and counts are no secrets."""
    lines = (FIXTURES / "scenarios" / "healthy.log").read_text().splitlines()
    lines += ["INFO 01-02 03:04:05 [loggers.py:1] Avg prompt throughput: 1234.5 tokens/s, Running: 12 reqs",
              "cudagraph sizes [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128]",
              "Received request chatcmpl-0123456789abcdef0123456789abcdef: params",
              "[2025-01-02 03:04:05] #running-req: 12, #token: 123456, token usage: 0.45, gen throughput (token/s): 2041.11",
              "Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)", "pid=1234567 took 1700000000123 ms",
              "version 0.10.1.1", "git commit 2f5c3a9e8d7b6c5a4f3e2d1c0b9a8f7e6d5c4b3a"]
    changed = [ln for ln in lines if redact(ln) != ln and "<ip>" not in redact(ln)]
    assert changed == []


@pytest.mark.parametrize("url,secret", [("http://u:pa#ss@host:bad", "pa#ss"), ("http://u:p?ss@h:badport", "p?ss"),
                                        ("http://u:p/w@d@h:99999999", "p/w@d")])
def test_a_prometheus_url_error_never_shows_its_password(url, secret):
    p = run_cli("--prometheus", url)
    err = p.stderr.decode()
    assert p.returncode == 2 and err.startswith("diagnose: --prometheus"), err
    assert secret not in err and "ss@" not in err, err
