"""Hostile and failing inputs at the command line (issue 9): damaged real samples, files that
vanish, grow or cannot be read, and reports that cannot be written. Each gives the documented
exit code (0 diagnosed, 1 a finding at --fail-on, 2 input or usage error) with one line on
stderr, never a traceback; `--output` never leaves a half-written file."""
from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, SAMPLES_DIR, run_cli, one, report

SAMPLES = sorted(p for p in SAMPLES_DIR.rglob("*") if p.is_file() and p.suffix != ".md")
LOG = FIXTURES / "scenarios" / "healthy.log"
FORMATS = ["json", "markdown", "sarif", "junit", "terminal"]
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def env():
    return dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", COLUMNS="120")


def one_line_error(p, *names):
    err = p.stderr.decode()
    assert p.returncode == 2, (p.returncode, err)
    assert "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    for n in names:
        assert n in err, err
    return err


# -- every real sample, truncated and with random bytes spliced in -----------------------------------
# Eight random offsets per sample, fixed seed: the file cut at each, with 1-64 random bytes spliced in
# at a random place before the cut; the five report formats take turns. (Every offset of small
# files, without splicing, is in test_fuzz.py, in-process.)
def variants(path: Path) -> list[bytes]:
    data = path.read_bytes()
    rng = random.Random(f"issue-9:{path.name}")
    out = []
    for _ in range(3):          # three damaged copies, each through another report format
        cut = data[: rng.randrange(len(data) + 1)]
        at = rng.randrange(len(cut) + 1)
        out.append(cut[:at] + rng.randbytes(rng.randint(1, 64)) + cut[at:])
    return out


# A fresh interpreter per variant would take minutes (~0.4 s of start-up each, about 300 variants):
# one child process runs `diagnose.cli.main()` — what the `diagnose` script runs — on each in turn,
# with argv, stdout and stderr of its own, and reports the exit status and stderr of every run.
DRIVER = r"""
import contextlib, io, json, sys, traceback
from diagnose.cli import main
cases_file, results_file = sys.argv[1:3]
cases = json.load(open(cases_file))
results = []
for args in cases:
    out, err = io.StringIO(), io.StringIO()
    sys.argv = ["diagnose", *args]
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else repr(e.code))
        except BaseException:
            code = "escaped"
            err.write(traceback.format_exc())
    results.append({"code": code, "stderr": err.getvalue(), "stdout": out.getvalue()})
with open(results_file, "w") as fh:
    json.dump(results, fh)
"""


@pytest.fixture(scope="module")
def damaged_sample_runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("damaged-samples")
    cases, where = [], []
    for k, s in enumerate(SAMPLES):
        for i, v in enumerate(variants(s)):
            f = d / f"{s.stem}.{i}{s.suffix}"
            f.write_bytes(v)
            fmt = FORMATS[(k + i) % len(FORMATS)]          # every format, across the samples
            cases.append(["--format", fmt, str(f)])
            where.append((s.name, i, fmt, f))
    jobs = max(1, min(4, os.cpu_count() or 1))
    procs = []
    for j in range(jobs):
        (d / f"cases{j}.json").write_text(json.dumps(cases[j::jobs]))
        procs.append(subprocess.Popen([sys.executable, "-c", DRIVER, str(d / f"cases{j}.json"), str(d / f"results{j}.json")],
                                      env=env(), cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    parts = []
    for j, p in enumerate(procs):
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err.decode()[-3000:]
        parts.append(json.loads((d / f"results{j}.json").read_text()))
    results = [parts[i % jobs][i // jobs] for i in range(len(cases))]
    by_sample: dict[str, list] = {}
    for (name, i, fmt, f), r in zip(where, results):
        by_sample.setdefault(name, []).append((i, fmt, f, r))
    return by_sample


@pytest.mark.parametrize("sample", SAMPLES, ids=[p.name for p in SAMPLES])
def test_damaged_sample_gives_an_exit_code_and_no_traceback(sample, damaged_sample_runs):
    for i, fmt, f, r in damaged_sample_runs[sample.name]:
        what = f"{f.name} (truncated + spliced, --format {fmt})"
        assert r["code"] in (0, 1, 2), f"{what}: exit {r['code']}\n{r['stderr']}"
        assert "Traceback" not in r["stderr"], f"{what}:\n{r['stderr']}"
        if r["code"] == 2:
            lines = r["stderr"].strip().splitlines()
            assert len(lines) == 1 and f.name in lines[0], f"{what}: {r['stderr']!r}"
        elif fmt == "json":
            report(r["stdout"])
        elif fmt == "sarif":
            json.loads(r["stdout"])


def test_damaged_samples_through_the_real_command(tmp_path):
    """The same, a few through `python -m diagnose` itself (the driver above stands in for the rest)."""
    picked = [s for s in SAMPLES if s.suffix in (".log", ".prom", ".txt", ".csv")][::13][:5]
    for s in picked:
        f = tmp_path / f"cut-{s.name}"
        f.write_bytes(variants(s)[1])
        p = run_cli("--format", "json", f)
        err = p.stderr.decode()
        assert p.returncode in (0, 1, 2) and "Traceback" not in err, err
        if p.returncode == 2:
            assert len(err.strip().splitlines()) == 1 and f.name in err


# -- files that vanish, grow, or cannot be read ---------------------------------------------------
def _cli_async(*args):
    return subprocess.Popen([sys.executable, "-m", "diagnose", *map(str, args)], env=env(), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _writer(path, chunks, delay=0.0, unlink_after=None):
    """Open `path` for writing (a FIFO: blocks until diagnose opens it), write the chunks."""
    def run():
        with open(path, "wb") as fh:
            for i, c in enumerate(chunks):
                if unlink_after is not None and i == unlink_after:
                    os.unlink(path)
                fh.write(c)
                fh.flush()
                if delay:
                    time.sleep(delay)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")


@needs_fifo
def test_file_removed_mid_read(tmp_path):
    """The path is unlinked while diagnose is half-way through reading it: what was opened is read
    to the end (POSIX keeps an open file alive), and the diagnosis covers all of it."""
    data = LOG.read_bytes()
    fifo = tmp_path / "vanishing.log"
    os.mkfifo(fifo)
    p = _cli_async("--format", "json", fifo)
    half = data.rfind(b"\n", 0, len(data) // 2) + 1
    t = _writer(fifo, [data[:half], data[half:]], delay=0.2, unlink_after=1)
    out, err = p.communicate(timeout=120)
    t.join(5)
    assert not fifo.exists()
    assert p.returncode == 0, err.decode()
    d = one(out)
    assert d["inputs"][0]["lines"] == data.count(b"\n")


def test_file_removed_between_listing_and_reading(tmp_path):
    """Removed after the command line was checked and before it was opened: one line, exit 2."""
    from diagnose.sources import InputError, load, resolve
    f = tmp_path / "gone.log"
    f.write_bytes(LOG.read_bytes())
    inputs = resolve([str(f)])
    f.unlink()
    with pytest.raises(InputError) as e:
        load(inputs)
    assert str(e.value) == f"{f}: no such file"


@needs_fifo
def test_file_growing_while_read_fifo(tmp_path):
    """A log still being written (a pipe from `kubectl logs -f`, a FIFO): read until the writer
    closes, every line counted, the last one cut mid-line included."""
    lines = LOG.read_bytes().splitlines(keepends=True)
    chunks = [b"".join(lines[i:i + 25]) for i in range(0, len(lines), 25)]
    chunks[-1] = chunks[-1].rstrip(b"\n")[:-7]        # the writer dies mid-line
    fifo = tmp_path / "growing.log"
    os.mkfifo(fifo)
    p = _cli_async("--format", "json", fifo)
    t = _writer(fifo, chunks, delay=0.02)
    out, err = p.communicate(timeout=120)
    t.join(5)
    assert p.returncode == 0, err.decode()
    d = one(out)
    assert d["inputs"][0]["lines"] == len(lines)


def test_regular_file_growing_while_read(tmp_path):
    """A regular file appended to while diagnose reads it (the server is still running): what was
    there when the read reached the end is diagnosed; a half-written last line does no harm."""
    data = LOG.read_bytes()
    f = tmp_path / "growing.log"
    f.write_bytes(data[: data.rfind(b"\n", 0, 4000) + 1])
    start = f.read_bytes().count(b"\n")
    stop = threading.Event()

    def append():
        rest = data[len(f.read_bytes()):]
        with open(f, "ab") as fh:
            for i in range(0, len(rest), 333):        # 333-byte pieces: lines cut anywhere
                if stop.is_set():
                    break
                fh.write(rest[i:i + 333])
                fh.flush()
                time.sleep(0.005)
    t = threading.Thread(target=append, daemon=True)
    t.start()
    p = run_cli("--format", "json", f)
    stop.set()
    t.join(5)
    assert p.returncode == 0, p.stderr.decode()
    lines = report(p.stdout)["inputs"][0]["lines"]
    assert start <= lines <= data.count(b"\n") + 1


def test_file_truncated_while_read(tmp_path):
    """logrotate's copytruncate empties the file under the reader: no traceback either way."""
    f = tmp_path / "rotated.log"
    f.write_bytes(LOG.read_bytes() * 20)
    p = _cli_async("--format", "json", f)
    time.sleep(0.3)
    os.truncate(f, 0)
    out, err = p.communicate(timeout=120)
    assert p.returncode in (0, 1, 2) and b"Traceback" not in err, err.decode()
    if p.returncode == 2:
        assert len(err.decode().strip().splitlines()) == 1


DROP = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search"]


def unprivileged_cli(*args):
    """run_cli, but where file permissions hold: as root, with the capabilities that bypass them
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) dropped through setpriv; skipped when that fails."""
    if not IS_ROOT:
        return run_cli(*args)
    if not shutil.which("setpriv"):
        pytest.skip("running as root and no setpriv to drop CAP_DAC_OVERRIDE: root reads anything")
    p = subprocess.run([*DROP, sys.executable, "-m", "diagnose", *map(str, args)], env=env(), cwd=ROOT,
                       capture_output=True, timeout=120)
    if p.stderr.startswith(b"setpriv:"):
        pytest.skip(f"setpriv cannot drop capabilities here: {p.stderr.decode().strip()}")
    return p


def test_permission_denied(tmp_path):
    f = tmp_path / "secret.log"
    f.write_bytes(LOG.read_bytes())
    f.chmod(0)
    try:
        assert "permission denied" in one_line_error(unprivileged_cli(f), "secret.log")
    finally:
        f.chmod(0o644)


def test_permission_denied_inside_a_directory(tmp_path):
    """One unreadable file in a folder costs the report on the others nothing: it is skipped with
    a note naming it and why; the readable one is diagnosed."""
    (tmp_path / "a.log").write_bytes(LOG.read_bytes())
    f = tmp_path / "b.log"
    f.write_bytes(LOG.read_bytes())
    f.chmod(0)
    try:
        p = unprivileged_cli(tmp_path)
        out = p.stdout.decode()
        assert p.returncode == 0, p.stderr.decode()
        assert "skipped " in out and "b.log: permission denied" in out, out[:400]
        assert "a.log:" in out and "Bottleneck:" in out
    finally:
        f.chmod(0o644)


def test_permission_denied_when_opening(tmp_path, monkeypatch):
    """Runs as root too: the open itself refused (an ACL, an NFS export, SELinux) after the
    access check passed."""
    from diagnose.sources import InputError, load, resolve
    from diagnose.sources.readers import files as reader
    f = tmp_path / "acl.log"
    f.write_bytes(LOG.read_bytes())
    inputs = resolve([str(f)])

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(reader, "open", refuse, raising=False)
    with pytest.raises(InputError) as e:
        load(inputs)
    assert str(e.value) == f"{f}: permission denied"


def test_read_error_mid_file(tmp_path, monkeypatch):
    """EIO half-way (a dying disk, a stale NFS handle): one line naming the file."""
    from diagnose.sources import InputError, load, resolve
    from diagnose.sources.readers import files as reader
    f = tmp_path / "eio.log"
    f.write_bytes(LOG.read_bytes())
    real_open = open

    class Failing:
        def __init__(self, fh):
            self.fh, self.n = fh, 0

        def read(self, n=-1):
            self.n += 1
            if self.n > 1:
                raise OSError(5, "Input/output error")
            return self.fh.read(1000)

        def peek(self, n=0):
            return self.fh.peek(n)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.fh.close()
    monkeypatch.setattr(reader, "open", lambda p, mode="r", *a, **k: Failing(real_open(p, mode)), raising=False)
    with pytest.raises(InputError) as e:
        load(resolve([str(f)]))
    assert str(e.value) == f"{f}: read failed (Input/output error)"


# -- writing --output ------------------------------------------------------------------------------
def leftovers(d: Path) -> list[str]:
    return [n for n in os.listdir(d) if n.startswith(".diagnose-") or n.endswith(".tmp")]


def test_output_into_a_missing_directory(tmp_path):
    target = tmp_path / "no" / "such" / "dir" / "report.json"
    one_line_error(run_cli("--format", "json", "--output", target, LOG), "report.json")
    assert not target.exists() and not target.parent.exists()


def test_output_into_a_read_only_directory(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    try:
        one_line_error(unprivileged_cli("--format", "json", "--output", d / "report.json", LOG), "report.json")
        assert os.listdir(d) == []
    finally:
        d.chmod(0o755)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc")
def test_output_where_no_file_can_be_created():
    """/proc takes no new files, not even from root."""
    one_line_error(run_cli("--format", "json", "--output", "/proc/diagnose-report.json", LOG), "diagnose-report.json")
    assert not os.path.exists("/proc/diagnose-report.json")


def _no_fsize_limit_then(limit):
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # inherited: a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return pre


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="no RLIMIT_FSIZE")
def test_output_write_fails_half_way(tmp_path):
    """The disk fills up half-way through the report (here: a 200-byte file-size limit, so the
    write fails after 200 bytes): one line, exit 2, no partial report and no temporary file."""
    target = tmp_path / "report.json"
    p = subprocess.run([sys.executable, "-m", "diagnose", "--format", "json", "--output", str(target), str(LOG)],
                       env=env(), cwd=ROOT, capture_output=True, timeout=120, preexec_fn=_no_fsize_limit_then(200))
    one_line_error(p, "report.json")
    assert not target.exists()
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="no RLIMIT_FSIZE")
def test_failed_write_keeps_the_previous_report(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("previous report\n")
    p = subprocess.run([sys.executable, "-m", "diagnose", "--format", "json", "--output", str(target), str(LOG)],
                       env=env(), cwd=ROOT, capture_output=True, timeout=120, preexec_fn=_no_fsize_limit_then(200))
    one_line_error(p, "report.json")
    assert target.read_text() == "previous report\n"
    assert leftovers(tmp_path) == []


def _full_device(tmp_path) -> Path:
    """A private twin of /dev/full (same device numbers) in tmp_path: writing to it fails with
    ENOSPC. The test never names /dev/full itself — see below why."""
    dev = tmp_path / "full"
    try:
        os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except (PermissionError, OSError) as e:
        pytest.skip(f"cannot create a device node here ({e.strerror})")
    return dev


def test_output_to_a_full_device(tmp_path):
    dev = _full_device(tmp_path)
    p = run_cli("--format", "json", "--output", dev, LOG)
    try:
        one_line_error(p, str(dev))
    finally:
        kept = stat.S_ISCHR(os.stat(dev).st_mode)
    assert kept, "the device node was replaced by a regular file"


# -- text from a log stays text in the markdown ticket ------------------------------------------------
def test_markdown_keeps_hostile_log_text_inert(tmp_path):
    """A model name with a pipe, an HTML tag and a backtick, and an error line holding `<script>` and
    a ``` fence: rendered as GitHub would (CommonMark with raw HTML allowed, GFM tables), no tag
    comes through, the deployment table keeps its two columns, the heading names the model, and the
    evidence block is not closed early by the fence inside it."""
    import re
    from markdown_it import MarkdownIt
    evil = "evil|col</td><img src=x onerror=alert(1)>`x"
    log = tmp_path / "evil.log"
    log.write_text(
        "INFO 10-11 06:51:31 [api_server.py:1] vLLM API server version 0.8.2\n"
        f"INFO 10-11 06:51:31 [cli_args.py:1] non-default args: {{'model': '{evil}', 'tensor_parallel_size': 4}}\n"
        "ERROR 10-11 06:51:40 [core.py:1] EngineCore failed to start. ``` <script>alert(2)</script> </details>\n",
        encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "diagnose", "--format", "markdown", str(log)], capture_output=True,
                       env=env(), timeout=120)
    md = p.stdout.decode()
    assert p.returncode in (0, 1), p.stderr.decode()
    out = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    for tag in ("<img", "<script", "</td><img"):
        assert tag not in out, f"{tag} came through:\n{out[:3000]}"
    heading = md.splitlines()[0]
    assert heading.startswith("# diagnose:") and "evil" in heading and "onerror" in heading
    rows = [x for x in md.splitlines() if x.startswith("| model |")]
    assert len(rows) == 1
    cells = re.split(r"(?<!\\)\|", rows[0].strip().strip("|"))
    assert len(cells) == 2, rows[0]
    assert "EngineCore failed to start." in md and "<details><summary>Evidence</summary>" in md
    # the evidence block holds the whole line: its fence is longer than the ``` inside
    block = md.split("<details><summary>Evidence</summary>", 1)[1]
    fence = re.search(r"^(`{3,})\s*$", block, re.M).group(1)
    assert len(fence) >= 4 and "alert(2)" in block.split(fence)[1], block[:500]


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_an_endless_binary_device_ends_with_one_line(device):
    """`diagnose /dev/zero` read until it was killed: a device whose first block is binary is no
    log, and may never end: exit 2 naming it, within seconds."""
    import time
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "diagnose", device], capture_output=True, env=env(), timeout=30)
    assert time.monotonic() - t0 < 10
    one_line_error(p, device, "binary")


def test_binary_on_stdin_ends_with_one_line():
    p = subprocess.run([sys.executable, "-m", "diagnose", "-"], input=os.urandom(200_000) + b"\x00" * 10,
                       capture_output=True, env=env(), timeout=30)
    one_line_error(p, "<stdin>", "binary")
