"""Every attack the "bounded on any input" work was measured with: `python bench/hostile.py [--only NAME…] [--keep]`.

Each attack runs the CLI as a user would (a new process; stdin from a pipe where the attack is a
stream) and prints its exit code, wall time and peak RSS (the process and what it waited for,
from wait4), and whether it met its goal: peak RSS ≤ 256 MiB, a wall time under the attack's
limit, the exit code it should give, and what its check looks at (nothing leaked, nothing
overwritten, a note said). Inputs are generated in a temporary folder (a few GB of sparse or
streamed data, nothing kept unless --keep). Exit status: 0 when every attack met its goal.

Attacks:
  gzip-bomb-10g       10 GB of NUL bytes in a 10 MB .gz (ten 1 GB members)
  gzip-nul-1g         1 GB of NUL bytes in one .gz member
  nul-file-2g         a 2 GB file of NUL bytes
  stdin-3g-one-line   `yes A | tr -d '\\n' | head -c 3G | diagnose -`
  stdin-endless       the same without `head`: an endless stream without a newline
  line-500m-in-log    a real log with a 500 MB line in the middle (cut, counted, said)
  line-500m-alone     a file that is one 500 MB line
  gz-scrape           a .gz Prometheus scrape of 5 million distinct series
  gzip-text-bomb      12 GB of one short log line repeated, in a .gz (expands ~1000 times)
  dmon-128m           a 128 MB `nvidia-smi dmon` capture (8 GPUs, 1.5 million samples)
  json-iterations     a 15 MB TensorRT-LLM iteration-stats JSON array (the biggest whole document read)
  json-too-big        a 60 MB one (refused)
  yaml-alias-bomb     a 500-byte YAML document of nested aliases (a billion-laughs)
  prom-huge-answer    a Prometheus whose answer is 200 MB
  prom-drip           a Prometheus that sends one byte every 2 s, --timeout 5
  prom-slow-queries   a Prometheus that answers every query in 4 s, --timeout 5 (the deadline ends it)
  rule-bomb-condition a user rule whose condition is `str(9**64) * 9**8 * 2 == 1`
  rule-bomb-title     the same in a rule's title
  escape-file-name    a log named with an OSC 52 clipboard write, holding one in a line
  markdown-model      a model name holding a link, a remote image and an @mention
  output-mode         -o over a 0600 report keeps 0600
  output-is-input     -o naming the input log is refused, the log untouched
  sigint-follow       SIGINT 0.3 s into `--follow`: a clean exit, no traceback
  sigterm-run         SIGTERM 0.3 s into a run on a 300 MB log: a clean exit, no traceback
  truncated-while-read a 300 MB log cut to half while it is read: a note says so
  secrets             a log holding every secret shape, in all five shareable formats
"""
from __future__ import annotations

import argparse
import gzip
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
LIMIT_MB = 256
HEALTHY = ROOT / "fixtures" / "scenarios" / "healthy.log"
ENV = dict(os.environ, PYTHONPATH=str(ROOT), NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
           COLUMNS="120")

SECRETS = {
    "hf": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "basic": "Authorization: Basic dXNlcjpzM2NyZXRwYXNzd29yZA==",
    "dburl": "postgresql://svc:Sup3rS3cretPw@db:5432/app",
    "akia": "AKIAIOSFODNN7EXAMPLE",
    "aws": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "slack": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "google": "key=AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "pem": "-----BEGIN RSA PRIVATE KEY-----MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun-----END RSA PRIVATE KEY-----",
}
# What must not show for each: the secret part (a shape's key word may stay).
SECRET_PARTS = {"hf": "AbCdEfGhIjKlMnOp", "basic": "dXNlcjpzM2NyZXRw", "dburl": "Sup3rS3cretPw", "akia": "IOSFODNN7",
                "aws": "wJalrXUtnFEMI", "slack": "1234567890123-AbCd", "google": "SyA1234567890abc",
                "pem": "MIIEowIBAAKCAQEAu1SU1"}


class Result:
    def __init__(self, code, wall, rss_mb, out=b"", err=b""):
        self.code, self.wall, self.rss_mb, self.out, self.err = code, wall, rss_mb, out, err


def run(args, stdin_cmd: str | None = None, timeout: float = 120, cwd=None, on_start=None) -> Result:
    """The CLI in a new process (stdin from a shell pipeline when given); peak RSS from wait4,
    which counts the process and the children it waited for."""
    cmd = [sys.executable, "-m", "diagnose", *args]
    t = time.monotonic()
    feeder = None
    stdin = subprocess.DEVNULL
    if stdin_cmd:
        feeder = subprocess.Popen(["sh", "-c", stdin_cmd], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        stdin = feeder.stdout
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdin=stdin, stdout=out, stderr=err, env=ENV, cwd=cwd or ROOT)
        if feeder:
            feeder.stdout.close()
        if on_start:
            threading.Thread(target=on_start, args=(p,), daemon=True).start()
        killer = threading.Timer(timeout, lambda: p.kill())
        killer.start()
        _, status, ru = os.wait4(p.pid, 0)
        killer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        if feeder:
            feeder.kill()
            feeder.wait()
        wall = time.monotonic() - t
        out.seek(0)
        err.seek(0)
        return Result(p.returncode, wall, ru.ru_maxrss / 1024, out.read(), err.read())


def _gz_of(path: Path, member: bytes, times: int) -> None:
    with open(path, "wb") as fh:
        for _ in range(times):
            fh.write(member)


def _zeros_member(n: int) -> bytes:
    import zlib
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\0" * (1 << 24)
    parts = [c.compress(block) for _ in range(n >> 24)]
    return b"".join(parts) + c.flush()


# ---- attacks: each returns (Result, [(goal, met)]) ----

def a_gzip_bomb(d):
    p = d / "bomb.gz"
    _gz_of(p, _zeros_member(1 << 30), 10)
    r = run([str(p)])
    return r, [("exit 2", r.code == 2), ("says binary", b"binary" in r.err), ("≤ 20 s", r.wall <= 20)]


def a_gzip_nul(d):
    p = d / "z1g.gz"
    _gz_of(p, _zeros_member(1 << 30), 1)
    r = run([str(p)])
    return r, [("exit 2", r.code == 2), ("≤ 20 s", r.wall <= 20)]


def a_nul_file(d):
    p = d / "nul.bin"
    with open(p, "wb") as fh:
        fh.truncate(2 << 30)        # sparse: reads as NUL bytes, takes no disk
    r = run([str(p)])
    return r, [("exit 2", r.code == 2), ("≤ 20 s", r.wall <= 20)]


def a_stdin_3g(d):
    r = run(["-"], stdin_cmd="yes A | tr -d '\\n' | head -c 3G")
    return r, [("exit 2", r.code == 2), ("says no line end", b"no line end" in r.err), ("≤ 60 s", r.wall <= 60)]


def a_stdin_endless(d):
    r = run(["-"], stdin_cmd="yes A | tr -d '\\n'", timeout=120)
    return r, [("exit 2", r.code == 2), ("≤ 60 s", r.wall <= 60)]


def _long_line_log(path: Path, before: bool) -> None:
    head = HEALTHY.read_bytes()
    with open(path, "wb") as fh:
        if before:
            fh.write(head[: len(head) // 2])
        chunk = b"A" * (1 << 20)
        fh.write(b"INFO 01-02 03:04:05 [x.py:1] ")
        for _ in range(500):
            fh.write(chunk)
        fh.write(b"\n")
        if before:
            fh.write(head[len(head) // 2:])


def a_line_in_log(d):
    p = d / "long-line.log"
    _long_line_log(p, True)
    r = run([str(p), "--format", "json"])
    return r, [("exit 0 or 1", r.code in (0, 1)), ("says cut", b"cut" in r.out), ("≤ 60 s", r.wall <= 60)]


def a_line_alone(d):
    p = d / "one-line.log"
    _long_line_log(p, False)
    r = run([str(p)])
    return r, [("exit 2", r.code == 2), ("says no line end", b"no line end" in r.err), ("≤ 60 s", r.wall <= 60)]


def a_gz_scrape(d):
    p = d / "scrape.txt.gz"
    subprocess.run(["sh", "-c", "{ echo '# TYPE vllm:num_requests_running gauge'; "
                    "seq 1 5000000 | sed 's/.*/vllm:num_requests_running{model_name=\"m\",engine=\"&\"} 1/'; } "
                    f"| gzip -1 > {p}"], check=True)
    r = run([str(p)], timeout=300)
    return r, [("exit 0, 1 or 2", r.code in (0, 1, 2)), ("≤ 240 s", r.wall <= 240)]


def a_gzip_text_bomb(d):
    import zlib
    p = d / "text-bomb.log.gz"
    line = b"INFO 01-02 03:04:05 [loggers.py:1] Engine 000: Avg prompt throughput: 0.0 tokens/s, " \
           b"Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%\n"
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = line * ((1 << 24) // len(line))
    with open(p, "wb") as fh:
        for _ in range(12 * 64):
            fh.write(c.compress(block))
        fh.write(c.flush())
    r = run([str(p)], timeout=300)
    return r, [("exit 2", r.code == 2), ("says bomb", b"expands" in r.err), ("≤ 60 s", r.wall <= 60)]


def a_dmon(d):
    p = d / "dmon.txt"
    head = "# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk\n" \
           "# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz\n"
    rows = "".join(f"    {g}    {300 + g}     60      -     {90 - g}     40      0      0      0      0   2619   1980\n"
                   for g in range(8))
    block = (head + rows * 40).encode()
    with open(p, "wb") as fh:
        for _ in range((128 << 20) // len(block)):
            fh.write(block)
    r = run([str(p), "--format", "json"], timeout=300)
    return r, [("exit 0 or 1", r.code in (0, 1)), ("≤ 120 s", r.wall <= 120)]


def _iterations(path: Path, mb: int) -> None:
    import json
    it = {"iter": 0, "iterLatencyMS": 12.5, "numActiveRequests": 8, "numQueuedRequests": 0, "maxNumActiveRequests": 64,
          "gpuMemUsage": 123456789, "kvCacheStats": {"maxNumBlocks": 1000, "freeNumBlocks": 500, "usedNumBlocks": 500,
                                                     "tokensPerBlock": 32}}
    with open(path, "w") as fh:
        fh.write("[")
        i = 0
        while fh.tell() < mb << 20:
            it["iter"] = i
            fh.write(("," if i else "") + json.dumps(it))
            i += 1
        fh.write("]")


def a_json_iterations(d):
    p = d / "iterations.json"
    _iterations(p, 15)
    r = run([str(p), "--format", "json"])
    return r, [("exit 0 or 1", r.code in (0, 1)), ("≤ 30 s", r.wall <= 30)]


def a_json_too_big(d):
    p = d / "iterations.json"
    _iterations(p, 60)
    r = run([str(p)])
    return r, [("exit 2", r.code == 2), ("says larger than", b"larger than" in r.err), ("≤ 10 s", r.wall <= 10)]


def a_yaml_bomb(d):
    p = d / "bomb.yaml"
    lines = ["model: x", "backend: pytorch", 'a0: &a0 ["lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    p.write_text("\n".join(lines) + "\n")
    r = run([str(p)], timeout=120)
    return r, [("exit 0, 1 or 2", r.code in (0, 1, 2)), ("no internal error", b"internal error" not in r.err),
               ("≤ 10 s", r.wall <= 10)]


def _bad_server(mode, **kw):
    from prom_harness import BadServer
    return BadServer(mode, **kw)


def a_prom_huge(d):
    with _bad_server("huge", huge_mb=200) as s:
        r = run(["--prometheus", s.url, "--timeout", "30"])
    return r, [("exit 2", r.code == 2), ("says too large", b"larger than" in r.err), ("≤ 30 s", r.wall <= 30)]


def a_prom_drip(d):
    with _bad_server("drip", drip_s=2.0) as s:
        r = run(["--prometheus", s.url, "--timeout", "5"])
    return r, [("exit 2", r.code == 2), ("≤ 8 s", r.wall <= 8)]


def a_prom_slow(d):
    with _bad_server("slow", delay_s=4.0) as s:
        r = run(["--prometheus", s.url, "--timeout", "5"])
    return r, [("exit 2", r.code == 2), ("says deadline", b"deadline" in r.err), ("≤ 25 s", r.wall <= 25)]


def _rule_bomb(d, field):
    rules = d / f"rules-{field}"
    (rules / "custom").mkdir(parents=True, exist_ok=True)
    cond = "str(9**64) * 9**8 * 2 == 1" if field == "condition" else "True"
    title = '"x"' if field == "condition" else "str(9**64) * 9**8 * 2"
    (rules / "custom" / "bomb.toml").write_text(
        f'id = "custom-bomb"\nseverity = "medium"\ncondition = "{cond}"\n'
        f'title = \'{{{title}}}\'\nfix_title = "f"\n')
    r = run([str(HEALTHY), "--rules", str(rules)], timeout=120)
    return r, [("no internal error", b"internal error" not in r.err), ("exit 0 or 1", r.code in (0, 1)),
               ("the rule's failure said", b"custom-bomb" in r.out + r.err), ("≤ 10 s", r.wall <= 10)]


def a_rule_condition(d):
    return _rule_bomb(d, "condition")


def a_rule_title(d):
    return _rule_bomb(d, "title")


def a_escape_name(d):
    p = d / "x\x1b]52;c;aGk=\x07.log"
    p.write_bytes(HEALTHY.read_bytes() + b"INFO 01-02 03:04:05 [x.py:1] Error \x1b]52;c;aGk=\x07 in line\n")
    r = run([str(p)])
    missing = run([str(d / "y\x1b]52;c;aGk=\x07.log")])
    clean = all(b"\x1b]52" not in x and b"\x07" not in x for x in (r.out, r.err, missing.out, missing.err))
    return r, [("exit 0 or 1", r.code in (0, 1)), ("no escape reaches the terminal", clean)]


def a_markdown_model(d):
    p = d / "model.log"
    bad = "[click](https://evil.example) ![x](https://evil.example/p.png) @everyone"
    text = HEALTHY.read_text().replace("model='", f"model='{bad}", 1).replace("'model': '", f"'model': '{bad}", 1)
    p.write_text(text)
    r = run([str(p), "--format", "markdown"])
    import re
    out = r.out.decode("utf-8", "replace")
    prose = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", out, flags=re.S))    # code renders nothing live
    return r, [("exit 0 or 1", r.code in (0, 1)), ("the model is named", "evil.example" in out),
               ("no live link or image", "](https://evil" not in out and "![" not in out),
               ("no mention outside code", "@everyone" not in prose)]


def a_output_mode(d):
    out = d / "report.md"
    out.write_text("old")
    os.chmod(out, 0o600)
    r = run([str(HEALTHY), "--format", "markdown", "-o", str(out)])
    mode = os.stat(out).st_mode & 0o777
    return r, [("exit 0 or 1", r.code in (0, 1)), ("mode 0600 kept", mode == 0o600), ("written", out.read_text() != "old")]


def a_output_is_input(d):
    p = d / "in.log"
    shutil.copy(HEALTHY, p)
    before = p.read_bytes()
    r = run([str(p), "-o", str(p)])
    return r, [("exit 2", r.code == 2), ("input untouched", p.read_bytes() == before)]


def _big_log(path: Path, mb: int) -> None:
    block = HEALTHY.read_bytes()
    stats = [ln for ln in block.splitlines(keepends=True) if b"throughput" in ln][:1] or [block]
    with open(path, "wb") as fh:
        fh.write(block)
        filler = stats[0] * max(1, (1 << 22) // len(stats[0]))
        for _ in range(mb // 4):
            fh.write(filler)


def a_sigint_follow(d):
    p = d / "follow.log"
    shutil.copy(HEALTHY, p)

    def later(proc):
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
    r = run([str(p), "--follow"], on_start=later, timeout=60)
    return r, [("exit 0, 1 or 130", r.code in (0, 1, 130)), ("no internal error", b"internal error" not in r.err),
               ("no traceback", b"Traceback" not in r.err)]


def a_sigterm_run(d):
    p = d / "big.log"
    _big_log(p, 300)

    def later(proc):
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
    r = run([str(p)], on_start=later, timeout=60)
    return r, [("exit 143", r.code == 143), ("no traceback", b"Traceback" not in r.err)]


def a_truncated(d):
    p = d / "shrinks.log"
    _big_log(p, 300)
    half = p.stat().st_size // 2

    def later(proc):
        time.sleep(0.05)
        os.truncate(p, half)
    r = run([str(p), "--format", "json"], on_start=later, timeout=120)
    return r, [("exit 0 or 1", r.code in (0, 1)), ("says it shrank", b"shrank" in r.out or b"truncated" in r.out)]


def a_secrets(d):
    p = d / "secrets.log"
    every = " | ".join(SECRETS.values())
    p.write_text(HEALTHY.read_text()
                 + "ERROR 01-02 03:10:00 [core.py:700] EngineCore encountered a fatal error.\n"
                 + "ERROR 01-02 03:10:00 [core.py:700] Traceback (most recent call last):\n"
                 + f"ERROR 01-02 03:10:00 [core.py:700] RuntimeError: request failed: {every}\n")
    shown = run([str(p), "--format", "json", "--no-redact"])
    goals, first = [("the crash line is cited (--no-redact shows the secrets)",
                     all(part.encode() in shown.out for part in SECRET_PARTS.values()))], None
    for fmt in ("json", "markdown", "html", "sarif", "junit"):
        r = run([str(p), "--format", fmt])
        first = first or r
        text = r.out + r.err
        leaked = [n for n, part in SECRET_PARTS.items() if part.encode() in text]
        goals.append((f"{fmt}: nothing leaked" + (f" ({', '.join(leaked)})" if leaked else ""), not leaked))
    return first, goals


ATTACKS = {
    "gzip-bomb-10g": a_gzip_bomb, "gzip-nul-1g": a_gzip_nul, "nul-file-2g": a_nul_file,
    "stdin-3g-one-line": a_stdin_3g, "stdin-endless": a_stdin_endless,
    "line-500m-in-log": a_line_in_log, "line-500m-alone": a_line_alone, "gz-scrape": a_gz_scrape,
    "gzip-text-bomb": a_gzip_text_bomb, "dmon-128m": a_dmon, "json-iterations": a_json_iterations,
    "json-too-big": a_json_too_big, "yaml-alias-bomb": a_yaml_bomb,
    "prom-huge-answer": a_prom_huge, "prom-drip": a_prom_drip, "prom-slow-queries": a_prom_slow,
    "rule-bomb-condition": a_rule_condition, "rule-bomb-title": a_rule_title,
    "escape-file-name": a_escape_name, "markdown-model": a_markdown_model,
    "output-mode": a_output_mode, "output-is-input": a_output_is_input,
    "sigint-follow": a_sigint_follow, "sigterm-run": a_sigterm_run, "truncated-while-read": a_truncated,
    "secrets": a_secrets,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="attack names (default: all)")
    ap.add_argument("--keep", action="store_true", help="keep the generated inputs (their folder is printed)")
    args = ap.parse_args()
    names = args.only or list(ATTACKS)
    unknown = [n for n in names if n not in ATTACKS]
    if unknown:
        ap.error(f"unknown attack(s): {', '.join(unknown)} (known: {', '.join(ATTACKS)})")
    d = Path(tempfile.mkdtemp(prefix="diagnose-hostile-"))
    width = max(len(n) for n in names)
    print(f"{'attack':<{width}}  exit  {'seconds':>7}  {'peak MB':>7}  goal")
    failed = 0
    try:
        for name in names:
            sub = d / name
            sub.mkdir()
            try:
                r, goals = ATTACKS[name](sub)
            except Exception as e:      # the bench's own failure: said, counted
                print(f"{name:<{width}}  bench error: {type(e).__name__}: {e}")
                failed += 1
                continue
            goals = [(f"≤ {LIMIT_MB} MB", r.rss_mb <= LIMIT_MB)] + goals
            missed = [g for g, ok in goals if not ok]
            failed += bool(missed)
            verdict = "ok" if not missed else "MISS: " + ", ".join(missed)
            print(f"{name:<{width}}  {r.code:>4}  {r.wall:>7.1f}  {r.rss_mb:>7.0f}  {verdict}", flush=True)
            if missed and r.err:
                print(f"{'':<{width}}  stderr: {r.err.decode('utf-8', 'replace').strip()[-300:]!r}")
            if not args.keep:
                shutil.rmtree(sub, ignore_errors=True)
    finally:
        if args.keep:
            print(f"inputs kept in {d}")
        else:
            shutil.rmtree(d, ignore_errors=True)
    print(f"{len(names) - failed} of {len(names)} attacks met their goal")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
