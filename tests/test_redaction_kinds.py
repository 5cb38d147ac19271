"""Redaction, kind by kind (issue 9): prompts, completions, prompt_token_ids, API keys in headers
and URLs, bearer tokens, e-mail addresses, client IPs in access lines, credentials among launch
arguments. None reaches terminal, markdown, JSON, SARIF or JUnit output unless --no-redact.

Fixtures: fixtures/requests/secrets-vllm.log and secrets-sglang.log. Every secret there sits in a
line some rule cites (access-log-noise, queue-full-rejections, engine-crash, prefix-caching-off),
and each test checks that the carrying line is in the report too — a redaction test that passes
because nothing was cited proves nothing.
"""
from __future__ import annotations

import html
import json

import pytest

from conftest import FIXTURES, run_cli, one

from diagnose import redact as R

VLLM = FIXTURES / "requests" / "secrets-vllm.log"
SGLANG = FIXTURES / "requests" / "secrets-sglang.log"
FORMATS = ["terminal", "markdown", "json", "sarif", "junit"]

# kind → (fixture, secrets that must not appear, a piece of the cited line that must appear)
KINDS = {
    "prompt": (VLLM, ["PROMPT-SECRET", "HelpDesk for Initech", "invoice 7781"], "Received request"),
    "prompt_token_ids": (VLLM, ["731337", "904417"], "Received request"),
    "completion": (VLLM, ["COMPLETION-SECRET", "refund of 912"], None),   # never cited: must not leak either
    "email": (VLLM, ["maria.rossi@example.org", "bob.jones@example.net"], "AsyncEngineDeadError"),
    "bearer-header": (VLLM, ["sk-hdr-3Jk9Lq2Wz8Xv5Bn7Mc4", "eyJhbGciOiJIUzI1NiJ9"], "AsyncEngineDeadError"),
    "api-key-header": (VLLM, ["xk-hdr-6Tn4Rm8Qp1Ls3Dv9"], "AsyncEngineDeadError"),
    "api-key-in-url": (VLLM, ["sk-query-Hq8Zt3Lm5Pw2Vn7R", "sk-429-Pz5Xc8Vb1Nm4Kj7H"], "GET /metrics?api_key="),
    "token-in-url": (VLLM, ["tok_live_9sD4kF7hJ2mQ8xZ1"], "GET /health?token="),
    "ipv4-access-line": (VLLM, ["203.0.113.77", "198.51.100.23"], "GET /health HTTP/1.1"),
    "ipv6-access-line": (VLLM, ["2001:db8::42", "2001:db8:85a3::8a2e:370:7334"], '429 Too Many Requests'),
    "api-key-launch-arg": (VLLM, ["sk-cli-7Fq2WmZ9xR4tLp8vKd3N"], None),
    "sglang-api-key-server-args": (SGLANG, ["sk-sglang-4Gh7Jk2Lm9Np3Qr6"], "disable_radix_cache=True"),
    "sglang-crash-line": (SGLANG, ["sk-sgl-hdr-8Hj3Kl6Zx9Cv2Bn5", "maria.rossi@example.org", "203.0.113.77"],
                          "Scheduler hit an exception"),
    "sglang-access-line": (SGLANG, ["198.51.100.23", "sk-query-Hq8Zt3Lm5Pw2Vn7R"], "GET /health HTTP/1.1"),
}
EXPECTED_FINDINGS = {VLLM: {"access-log-noise", "queue-full-rejections", "engine-crash", "prefix-caching-off"},
                     SGLANG: {"access-log-noise", "engine-crash", "prefix-caching-off"}}


@pytest.fixture(scope="module")
def outputs():
    """One run per fixture and format (plus --no-redact), shared by every test below."""
    out = {}
    for fx in (VLLM, SGLANG):
        for fmt in FORMATS:
            p = run_cli("--format", fmt, "--verbose", fx)
            assert p.returncode == 0, p.stderr.decode()
            text = p.stdout.decode()
            out[fx, fmt] = html.unescape(text) if fmt == "junit" else text    # XML writes < as &lt;
        p = run_cli("--format", "json", "--no-redact", fx)
        assert p.returncode == 0, p.stderr.decode()
        out[fx, "no-redact"] = p.stdout.decode()
    return out


def test_fixtures_cite_the_lines_that_carry_secrets(outputs):
    for fx, ids in EXPECTED_FINDINGS.items():
        d = one(outputs[fx, "json"])
        assert ids <= {f["id"] for f in d["findings"]}, fx.name


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_redacted_by_default(kind, fmt, outputs):
    fx, secrets, carrier = KINDS[kind]
    out = outputs[fx, fmt]
    for s in secrets:
        assert s not in out, f"{kind}: {s!r} in --format {fmt}"
    if carrier and fmt in ("json", "markdown", "junit"):     # formats that print every cited line in full
        assert carrier in out, f"{kind}: the line carrying it is not cited in --format {fmt}"


@pytest.mark.parametrize("kind", sorted(k for k in KINDS if k != "completion"))
def test_no_redact_shows_them(kind, outputs):
    fx, secrets, _ = KINDS[kind]
    out = outputs[fx, "no-redact"]
    assert any(s in out for s in secrets), f"{kind}: --no-redact shows none of {secrets}"


def test_redacted_evidence_keeps_the_rest_of_the_line(outputs):
    d = one(outputs[VLLM, "json"])
    lines = [e["text"] for f in d["findings"] for e in f["evidence"] if "text" in e]
    assert any(t.startswith('INFO:     <ip>:41000 - "GET /metrics?api_key=<redacted> HTTP/1.1" 200 OK') for t in lines)
    assert any("prompt: <redacted" in t and "params: SamplingParams(n=1" in t and "prompt_token_ids: [<redacted>]" in t
               for t in lines)
    assert any("'authorization': 'Bearer <redacted>'" in t and "'x-user-email': '<redacted-email>'" in t for t in lines)
    assert d["deployment"]["settings"]["launch_args"]["api_key"] == "<redacted>"
    assert d["deployment"]["settings"]["launch_args"]["port"] == 8000


# -- redact() itself, kind by kind ------------------------------------------------------------
@pytest.fixture(autouse=True)
def _enabled():
    old = R.ENABLED
    R.ENABLED = True
    yield
    R.ENABLED = old


@pytest.mark.parametrize("text,secret", [
    ("Received request x: prompt: 'tell me about ACME', params: …", "ACME"),
    ('Received request x: prompt: "say \\"hi\\" to Bob", params: …', "Bob"),
    ("Received request x: prompt: 'cut off by the paste here", "cut off"),
    ("Generated response x: output: 'the answer is 42', output_token_ids: [1]", "answer is 42"),
    ("prompt_token_ids: [101, 2023, 2003], lora_request: None", "2023"),
    ("GenerateReqInput(text='secret plan', input_ids=None)", "secret plan"),
    ("token_ids=[5, 6, 7]", "5, 6, 7"),
])
def test_prompt_kinds(text, secret):
    assert secret not in R.redact(text)


@pytest.mark.parametrize("text,secret", [
    ("Authorization: Bearer abcdefgh12345678", "abcdefgh12345678"),
    ("authorization: sometoken12345678", "sometoken12345678"),
    ("{'authorization': 'Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig'}", "eyJhbGciOiJIUzI1NiJ9"),
    ("{'x-api-key': 'xk-abcdef123456'}", "xk-abcdef123456"),
    ('"GET /v1/models?api_key=abc123def456 HTTP/1.1"', "abc123def456"),
    ('"GET /v1/models?foo=1&access_token=ya29.a0AfH6SM HTTP/1.1"', "ya29.a0AfH6SM"),
    ("password=hunter2hunter2", "hunter2hunter2"),
    ("key sk-proj-abcdefghijklmnop1234 leaked", "sk-proj-abcdefghijklmnop1234"),
])
def test_credential_kinds(text, secret):
    assert secret not in R.redact(text)


@pytest.mark.parametrize("text", ["mail jane.doe+ops@mail.example.co.uk now", "<jane@example.com>"])
def test_email(text):
    assert "@" not in R.redact(text)


@pytest.mark.parametrize("text,secret", [
    ('INFO:     10.2.0.7:50000 - "POST /v1/completions HTTP/1.1" 200 OK', "10.2.0.7"),
    ('INFO:     ::1:53422 - "GET /health HTTP/1.1" 200 OK', "::1"),
    ('INFO:     2001:db8::42:41001 - "GET /health HTTP/1.1" 200 OK', "2001:db8::42"),
    ('INFO:     [2001:db8:85a3::8a2e:370:7334]:41002 - "GET / HTTP/1.1" 200 OK', "8a2e:370:7334"),
    ("INFO:     fe80::1ff:fe23:4567:890a%eth0:8000 - ", "fe80::1ff"),
    ("2001:0db8:0000:0000:0000:ff00:0042:8329 connected", "0042:8329"),
    ("bad request from 192.168.1.254, closing", "192.168.1.254"),
])
def test_ip_addresses(text, secret):
    out = R.redact(text)
    assert secret not in out and "<ip>" in out


def test_ip_redaction_keeps_the_rest_of_the_line():
    assert R.redact('INFO:     10.2.0.7:50000 - "POST /v1/completions HTTP/1.1" 200 OK') == \
        'INFO:     <ip>:50000 - "POST /v1/completions HTTP/1.1" 200 OK'


@pytest.mark.parametrize("text", [
    "vLLM API server version 0.10.1.1",
    "Initializing a V1 LLM engine (v0.10.1.1) with config: model='m'",
    "INFO 06-02 09:00:10 [loggers.py:123] Engine 000: Avg prompt throughput: 1.5 tokens/s",
    "[2025-01-06 02:58:40 TP0] Decode batch. #running-req: 1, #token: 12345678, token usage: 0.27",
    "max_num_batched_tokens=8192, tokenizer='meta-llama/Llama-3.1-8B', tokens_per_block=32",
    "NCCL INFO Channel 00/02 : 0[0] -> 1[1] via P2P/IPC",
    "GPU KV cache size: 620,944 tokens; 1.2.3 release notes",
])
def test_what_is_not_redacted(text):
    assert R.redact(text) == text


def test_settings():
    s = {"api_key": "plain-secret-value", "hf_token": "hf_abc", "host": "0.0.0.0", "port": 8000,
         "max_num_batched_tokens": 8192, "tokenizer": "org/m", "ssl_keyfile_password": "pw",
         "served_model_name": "ops@example.com", "middleware": ["Bearer abcdefgh12345678"], "api_key_unset": None}
    r = R.redact_setting(None, s)
    assert r["api_key"] == r["hf_token"] == r["ssl_keyfile_password"] == "<redacted>"
    assert r["host"] == "0.0.0.0" and r["port"] == 8000 and r["max_num_batched_tokens"] == 8192 and r["tokenizer"] == "org/m"
    assert "@" not in r["served_model_name"] and "abcdefgh12345678" not in r["middleware"][0]


def test_switched_off():
    R.ENABLED = False
    t = 'INFO:     10.2.0.7:1 - "GET /?api_key=abcdefgh123 HTTP/1.1" 200 prompt: \'x\' a@b.co'
    assert R.redact(t) == t
    assert R.redact_setting("api_key", "s3cret-value") == "s3cret-value"


def test_redaction_is_idempotent():
    t = ('INFO:     10.2.0.7:1 - "GET /?api_key=abcdefgh123 HTTP/1.1" 200 prompt: \'x\', prompt_token_ids: [1, 2] '
         "a@b.co Authorization: Bearer abcdefgh12345678 ::1")
    once = R.redact(t)
    assert R.redact(once) == once


def test_the_quick_checks_skip_a_pattern_only_where_it_cannot_match():
    """redact() runs _BEARER only where its lower-case twin matches (ASCII text) and _IPV4 only
    where four dotted numbers are: over random texts built of the pieces they match on and of every
    real log's lines, neither check ever says no where the pattern would match."""
    import random

    from conftest import FIXTURES
    rng = random.Random(11)
    pieces = ["Authorization", "AUTHORIZATION", "api_key", "Api-Key", "APIKEY", "access_token", "Token", "secret",
              "PassWord", "passwd", "Bearer ", "bearer\t", "basic ", "'", '"', ":", "=", " ", "  ", "abcdefgh", "XYZ12345",
              "1234", "._~+/-", "é", "K", "ſ", "10.2.0.7", "192.168.1.254", "0.10.1.1", "1.2.3", "255.255.255.255",
              ".", "..", "9", "version ", "v", "\n"]
    texts = [" ".join(p.read_text(errors="replace").splitlines()[:4000]) for p in sorted((FIXTURES / "real").glob("*.log"))]
    texts += ["".join(rng.choices(pieces, k=rng.randint(1, 14))) for _ in range(20_000)]
    bearer = dotted = 0
    for t in texts:
        if R._BEARER.search(t):
            bearer += 1
            assert R._may_bear(t, t.lower()), t
        elif t.isascii():
            assert not R._BEARER_LOW.search(t.lower()), t
        if R._IPV4.search(t):
            dotted += 1
            assert R._DOTTED_QUAD.search(t), t
    assert bearer > 500 and dotted > 500


def test_a_text_redacted_again_comes_from_the_memo_as_it_was_made(monkeypatch):
    """Each text is redacted once a run (kept texts repeat); what comes back again is what
    redacting it afresh gives, and the memo stays within its bounds."""
    from conftest import FIXTURES
    monkeypatch.setattr(R, "_DONE", R.Memo(64, 4096, 20_000))
    lines = [x for p in sorted((FIXTURES / "requests").glob("secrets-*.log")) for x in p.read_text().splitlines()]
    assert any(R._redacted(x) != x for x in lines)
    for x in lines * 3:
        assert R.redact(x) == R._redacted(x), x
        assert len(R._DONE.data) <= 64 and R._DONE.size <= 20_000
