"""Secrets and personal data never reach a shareable report (issue 34): each shape alone through
redact(), and all of them in lines a report cites (a vLLM crash line, vLLM `Received request`
prompts, SGLang `Receive: obj=GenerateReqInput(…)` lines), in every shareable format. The same run
with `--no-redact` shows each of them (so these tests can fail, and redaction is what removed
them), and ordinary log text is left as it was."""
from __future__ import annotations

import html
import json
import re
import time

import pytest

from conftest import FIXTURES, run_cli
from diagnose.redact import redact, redact_setting

# shape: (the text as a log holds it, the part that must not show, the log it is put in:
#         "crash": the exception line engine-crash cites; "request": a vLLM prompt that
#         prefix-caching-off cites; "sglang": an SGLang request line prefix-caching-off cites)
SHAPES = {
    "hf-token": ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOp", "crash"),
    "hf-token-glued": ("HF_TOKEN_hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210", "ZyXwVuTsRqPoNm", "crash"),
    "basic-auth": ("Authorization: Basic dXNlcjpzM2NyZXRwYXNzd29yZA==", "dXNlcjpzM2NyZXRw", "crash"),
    "basic-auth-eq": ("authorization=Basic YWRtaW46aHVudGVyMg==", "YWRtaW46aHVudGVy", "crash"),
    "basic-auth-dict": ("headers={'authorization': 'Basic c3ZjOnRvcHNlY3JldDk5'}", "c3ZjOnRvcHNlY3Jl", "crash"),
    "url-credentials": ("postgresql://svc:Sup3rS3cretPw@db:5432/app", "Sup3rS3cretPw", "crash"),
    "url-credentials-odd": ("redis://admin:pa#ss?w/rd@cache:6379", "pa#ss?w/rd", "crash"),
    "url-credentials-pct": ("amqp://guest:g%40st%2Fpw@mq/vhost", "g%40st%2Fpw", "crash"),
    "aws-key-id": ("AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE", "crash"),
    "aws-session-key-id": ("ASIAY34FZKBOKMUTVV7A", "Y34FZKBOKMUTVV7A", "crash"),
    "aws-secret": ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI", "crash"),
    "aws-secret-env": ("AWS_SECRET_ACCESS_KEY=je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY", "je7MtGbClwBF", "crash"),
    "slack-bot": ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "1234567890123-AbCd", "crash"),
    "slack-user": ("xoxp-2718281828-3141592653-QwErTyUiOpAsDf", "3141592653-QwEr", "crash"),
    "google-key": ("https://maps.example.com/api?key=AIzaSyA1234567890abcdefghijklmnopqrstuv", "SyA1234567890abc", "crash"),
    "private-key": ("-----BEGIN RSA PRIVATE KEY-----MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"
                    "-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEAu1SU1", "crash"),
    "card": ("my card is 4111 1111 1111 1111 exp 12/29", "4111 1111 1111 1111", "crash"),
    "card-dashed": ("card 5500-0000-0000-0004 declined", "5500-0000-0000-0004", "crash"),
    "card-amex-bare": ("amex 378282246310005 declined", "378282246310005", "crash"),
    "ssn": ("ssn 078-05-1120 on file", "078-05-1120", "crash"),
    "phone": ("call me at (415) 555-0132 or +44 20 7946 0958", "555-0132", "crash"),
    "phone-intl": ("or +1 415 555 0199", "415 555 0199", "crash"),
    "phone-dashed": ("or 212-555-0147", "212-555-0147", "crash"),
    "token-ids": ("input_ids=[128000, 9906, 11, 856, 836, 374], output_ids=[40, 1097]", "9906, 11, 856", "crash"),
    # last in the crash line: a BEGIN without its END takes the rest of the line with it
    "private-key-begin-only": ("-----BEGIN OPENSSH PRIVATE KEY-----b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB",
                               "b3BlbnNzaC1rZXktdjEAAAAABG5v", "crash"),
    # what users wrote, in the prompts of vLLM's `Received request` lines
    "prompt-card": ("card 6011 0009 9013 9424", "6011 0009 9013 9424", "request"),
    "prompt-ssn": ("ssn 219-09-9999", "219-09-9999", "request"),
    "prompt-phone": ("phone (628) 555-0174", "555-0174", "request"),
    # SGLang's request lines: token ids decode back to the prompt
    "sglang-input-ids": ("input_ids=[1, 615243, 384921, 2]", "615243, 384921", "sglang"),
    "sglang-origin-input-ids": ("origin_input_ids=[1, 615244, 384922]", "615244, 384922", "sglang"),
    "sglang-output-ids": ("output_ids: [271828, 182845]", "271828, 182845", "sglang"),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_shape_alone_is_redacted(shape):
    text, secret, _ = SHAPES[shape]
    out = redact(f"ERROR 01-02 03:04:05 [x.py:1] failed: {text} (retrying)")
    assert secret not in out, out
    assert out.startswith("ERROR 01-02 03:04:05 [x.py:1] failed: ")
    if shape != "private-key-begin-only":           # the rest of that line goes with the key
        assert out.endswith(" (retrying)"), out
    assert redact(out) == out                        # redacting twice changes nothing more


@pytest.mark.parametrize("text,secret", [
    ("input_ids: tensor([128000, 9906, 11], device='cuda:0', dtype=torch.int64)", "9906"),   # TRT-LLM/SGLang debug
    ("'input_ids': [128000, 9906, 11], 'text': 'x'", "9906"),
    ("input_ids = [128000, 9906, 11]", "9906"),
    ("token_ids=[[128000, 9906], [11, 856]]", "856"),                                        # nested
    ("input_ids=[128000, 9906, 11, 8", "9906"),                                              # cut off
    ("MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0t\\n-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEA"),
    ("-----BEGIN EC PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1Lf\n-----END EC PRIVATE KEY-----", "MIIEowIBAAKCAQEA"),
    ("https://x-access-token:ghs_16C7e42F292c6912E7710c838347Ae178B4a@github.com/o/r", "ghs_16C7e42F"),
    ("https://ghp_16C7e42F292c6912E7710c838347Ae178B4a@github.com/o/r", "ghp_16C7e42F"),
    ("postgresql://svc:p@ss@w0rd@db/x", "ss@w0rd"),                                           # `@` in the password
    ("+14155550123", "4155550123"),
])
def test_more_spellings_are_redacted(text, secret):
    out = redact(f"ERROR x: {text} end")
    assert secret not in out, out
    assert redact(out) == out


def test_a_setting_value_gets_the_same_treatment():
    assert redact_setting("database_url", "postgresql://svc:pa#ss@db:5432/x") == "postgresql://<redacted>@db:5432/x"
    assert redact_setting("aws_secret_access_key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY") == "<redacted>"
    for value, secret in [("hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEf"), ("Basic dXNlcjpwYXNzd29yZA==", "dXNlcj"),
                          (["--x", "AKIAIOSFODNN7EXAMPLE"], "IOSFODNN7"), ({"header": "xoxb-1234567890-abcdefghijkl"}, "abcdefgh")]:
        assert secret not in repr(redact_setting("extra", value))
    for value in [8000, "0.0.0.0", "meta-llama/Llama-3.1-8B-Instruct", [1, 2, 4, 8], "http://prom:9090"]:
        assert redact_setting("x", value) == value


FORMATS = ["json", "markdown", "html", "sarif", "junit"]
# a piece of each log's cited line that must be in every report (a redaction test that passes
# because nothing was cited proves nothing)
CITED = {"crash": "RuntimeError: request failed", "request": "Received request",
         "sglang": "Receive: obj=GenerateReqInput"}


def _logs(tmp_path):
    def of(kind):
        return [t for t, _, k in SHAPES.values() if k == kind]
    crash = (FIXTURES / "scenarios" / "healthy.log").read_text()
    crash += ("ERROR 01-02 03:10:00 [core.py:700] EngineCore encountered a fatal error.\n"
              "ERROR 01-02 03:10:00 [core.py:700] Traceback (most recent call last):\n"
              'ERROR 01-02 03:10:00 [core.py:700]   File "/x/core.py", line 1, in run\n'
              f"ERROR 01-02 03:10:00 [core.py:700] RuntimeError: request failed: {' | '.join(of('crash'))}\n")
    # every prompt shares the record (so the repeated prefix is still there for prefix-caching-off)
    request = (FIXTURES / "requests" / "repeated-prompts.log").read_text().replace(
        "Customer record follows.", f"Customer record follows: {', '.join(of('request'))}.")
    sglang = re.sub(r"input_ids=\[1, 731337, 904417, (\d+)\]",
                    lambda m: ", ".join(of("sglang")).replace(", 2]", f", {m.group(1)}]"),
                    (FIXTURES / "requests" / "secrets-sglang.log").read_text())
    paths = {}
    for kind, text in (("crash", crash), ("request", request), ("sglang", sglang)):
        paths[kind] = tmp_path / f"{kind}.log"
        paths[kind].write_text(text)
    return paths


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Each log in each format, redacted and with --no-redact: 30 runs shared by every test."""
    out = {}
    for kind, log in _logs(tmp_path_factory.mktemp("secrets")).items():
        for fmt in FORMATS:
            for flags in ((), ("--no-redact",)):
                p = run_cli("--format", fmt, *flags, log)
                assert p.returncode == 0, p.stderr.decode()
                out[kind, fmt, bool(flags)] = (p.stdout + p.stderr).decode()
    return out


def _spellings(secret):
    """The secret as each format may write it (JSON, HTML and XML escapes)."""
    return {secret, html.escape(secret), html.escape(secret, quote=False), json.dumps(secret)[1:-1],
            secret.replace("/", "\\/"), secret.replace("#", "&#x23;"), secret.replace("#", "\\#")}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_no_shape_reaches_a_shareable_report(reports, fmt, shape):
    _, secret, kind = SHAPES[shape]
    out, shown = reports[kind, fmt, False], reports[kind, fmt, True]
    assert CITED[kind] in out and CITED[kind] in shown          # the carrying line is cited…
    assert any(s in shown for s in _spellings(secret)), f"{shape} is not in the --no-redact {fmt} report"
    leaked = [s for s in _spellings(secret) if s in out]
    assert not leaked, f"{shape} leaked in {fmt}: {leaked}"     # …without what it carried


def test_ordinary_log_lines_are_left_as_they_were():
    """Timestamps, versions, throughput, graph sizes, request ids, hashes, ports and counts are no
    secrets, nor personal data (these lines were, before: a Prometheus sample's millisecond
    timestamp, a revision hash, a request id and a benchmark's date passed the Luhn check)."""
    lines = (FIXTURES / "scenarios" / "healthy.log").read_text().splitlines()
    lines += ["INFO 01-02 03:04:05 [loggers.py:1] Avg prompt throughput: 1234.5 tokens/s, Running: 12 reqs",
              "cudagraph sizes [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128]",
              "Received request chatcmpl-0123456789abcdef0123456789abcdef: params",
              "[2025-01-02 03:04:05] #running-req: 12, #token: 123456, token usage: 0.45, gen throughput (token/s): 2041.11",
              "Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)", "pid=1234567 took 1700000000123 ms",
              "version 0.10.1.1", "git commit 2f5c3a9e8d7b6c5a4f3e2d1c0b9a8f7e6d5c4b3a",
              "2025-01-02 03:04:05,123 - INFO - started at 2025-01-02T03:04:05+08:00",
              "GPU KV cache size: 1,234,567 tokens; model weights took 14.9851 GiB; 79.19 GiB total",
              'vllm:num_requests_running{model_name="meta-llama/Llama-3.1-8B-Instruct"} 56 1763100030000',
              "revision=1cfa9a7208912126459214e8b0432160, tokenizer_revision=1cfa9a7208912126459214e8b0432160",
              "Reqid: chatcmpl-28bf7ba223934532867000b25a88e25e", '{"date": "20261125-120000", "backend": "vllm"}',
              "rank=[74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93]", "id='133279068015072'>",
              "SamplingParams(n=1, stop=[], stop_token_ids=[], bad_words=[], max_tokens=512)",
              "First, the basic arithmetic approach", "pip install git+https://github.com/org/repo@v1.2.3",
              "image registry:5000/vllm/vllm-openai@sha256:0123abcd", "sizes 512 504 496 488 480 472 464",
              "seq 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17", "ports 8000 8001 8002 8003 8004",
              "uuid 123e4567-e89b-12d3-a456-426614174000", "throughput 0.4111111111111111", "+0800 +12345"]
    changed = [(ln, redact(ln)) for ln in lines if redact(ln) != ln and "<ip>" not in redact(ln)]
    assert changed == []


@pytest.mark.parametrize("name,line", [
    ("a", "a" * 1_000_000), ("digits", "7" * 1_000_000), ("dashes", "-" * 1_000_000),
    ("digit-dash", "1-" * 500_000), ("digit-blank", "4111 " * 200_000), ("phones", "415-555-0100 " * 77_000),
    ("schemes", "a://b:" * 166_000 + " @"), ("token-lists", "input_ids=[1, 2" * 66_000),
    ("key-ends", ("A" * 100 + "-----END RSA PRIVATE KEY-----") * 7_700)])
def test_a_megabyte_line_takes_well_under_a_second(name, line):
    took = min(_timed(line) for _ in range(2))        # (the better of two: a busy machine is no hang)
    assert took < 1.0, f"{name}: {took:.2f} s"


def _timed(line):
    t = time.perf_counter()
    redact(line)
    return time.perf_counter() - t


@pytest.mark.parametrize("url,secret", [("http://u:pa#ss@host:bad", "pa#ss"), ("http://u:p?ss@h:badport", "p?ss"),
                                        ("http://u:p/w@d@h:99999999", "p/w@d"),
                                        ("http://h:9o90/?api_key=sk-live-0123456789abcdefXYZ", "0123456789abcdef")])
def test_a_prometheus_url_error_never_shows_its_password(url, secret):
    p = run_cli("--prometheus", url)
    err = p.stderr.decode()
    assert p.returncode == 2 and err.startswith("diagnose: --prometheus"), err
    assert secret not in err and "ss@" not in err, err
