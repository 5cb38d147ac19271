"""Bad input: one clear line naming it, exit 2 — never a traceback; partly readable files are
diagnosed with a count of what could not be read; nothing the user gave is modified."""
from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli, one, report

SEED = FIXTURES / "seed003" / "realtime.log"


def one_line_error(p, name):
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert name in err
    return err


def test_empty_file(tmp_path):
    f = tmp_path / "empty.log"
    f.write_bytes(b"")
    assert "empty" in one_line_error(run_cli(f), "empty.log")


def test_binary_file(tmp_path):
    f = tmp_path / "core.bin"
    f.write_bytes(bytes(range(256)) * 200)
    assert "binary" in one_line_error(run_cli(f), "core.bin")


def test_directory(tmp_path):
    assert "directory" in one_line_error(run_cli(tmp_path), str(tmp_path))


def test_missing_path(tmp_path):
    assert "no such file" in one_line_error(run_cli(tmp_path / "nope.log"), "nope.log")


def test_non_utf8_file(tmp_path):
    f = tmp_path / "latin1.log"
    f.write_bytes("Journal d'exécution: démarrage du serveur, paramètres réglés\n".encode("latin-1") * 50)
    assert "UTF-8" in one_line_error(run_cli(f), "latin1.log")


def test_partly_readable_file_is_diagnosed_with_a_count(tmp_path):
    f = tmp_path / "damaged.log"
    data = SEED.read_bytes().splitlines(keepends=True)
    data[5] = b"\xff\xfe garbage \x00\x01\n"
    data[9] = b"\xc3\x28 broken utf8\n"
    f.write_bytes(b"".join(data))
    p = run_cli("--format", "json", f)
    assert p.returncode == 0, p.stderr.decode()
    d = one(p.stdout)
    assert d["inputs"][0]["unreadable_lines"] == 2
    assert d["inputs"][0]["errors"]
    assert "tp-for-small-model" in {x["id"] for x in d["findings"]}


def test_gzip_stdin_and_glob_give_the_same_findings(tmp_path):
    ids = lambda p: [f["id"] for f in one(p.stdout)["findings"]]
    plain = run_cli("--format", "json", SEED)
    gz = tmp_path / "realtime.log.gz"
    gz.write_bytes(gzip.compress(SEED.read_bytes()))
    assert ids(run_cli("--format", "json", gz)) == ids(plain)
    assert ids(run_cli("--format", "json", "-", input=SEED.read_bytes())) == ids(plain)
    shutil.copy(SEED, tmp_path / "a.log")
    assert ids(run_cli("--format", "json", str(tmp_path / "*.log"))) == ids(plain)


def test_utf16_and_bom_files_read_like_utf8(tmp_path):
    """Windows PowerShell's `>` writes UTF-16 with a byte-order mark, Notepad a UTF-8 one: both
    are text logs, diagnosed like the plain file (gzipped and from stdin too), cited by line."""
    out = lambda p: one(p.stdout)
    plain = out(run_cli("--format", "json", SEED))
    text = SEED.read_text(encoding="utf-8")
    variants = {"le.log": text.encode("utf-16"), "be.log": b"\xfe\xff" + text.encode("utf-16-be"),
                "bom8.log": b"\xef\xbb\xbf" + text.encode("utf-8")}
    for name, data in variants.items():
        f = tmp_path / name
        f.write_bytes(data)
        gz = tmp_path / (name + ".gz")
        gz.write_bytes(gzip.compress(data))
        for p in (run_cli("--format", "json", f), run_cli("--format", "json", gz),
                  run_cli("--format", "json", "-", input=data)):
            assert p.returncode == 0, (name, p.stderr.decode())
            d = out(p)
            assert [x["id"] for x in d["findings"]] == [x["id"] for x in plain["findings"]], name
            assert d["inputs"][0]["unreadable_lines"] == 0, name
            lines = [e["line"] for x in d["findings"] for e in x.get("evidence", []) if e.get("line")]
            assert lines == [e["line"] for x in plain["findings"] for e in x.get("evidence", []) if e.get("line")], name


def test_glob_matching_nothing(tmp_path):
    one_line_error(run_cli(str(tmp_path / "*.log")), "matches no file")


def test_input_is_not_modified(tmp_path):
    f = tmp_path / "x.log"
    shutil.copy(SEED, f)
    before = hashlib.sha256(f.read_bytes()).hexdigest()
    run_cli(f)
    run_cli("--format", "markdown", "--output", tmp_path / "out.md", f)
    assert hashlib.sha256(f.read_bytes()).hexdigest() == before


def test_unknown_ignore_id_is_a_usage_error():
    one_line_error(run_cli("--ignore", "no-such-rule", SEED), "no-such-rule")


def test_a_pipe_on_stdin_is_widened_and_read_whole():
    """`kubectl logs … | diagnose -`: the pipe's buffer is raised to 1 MB (fewer wake-ups between
    writer and reader), and every byte written is still read."""
    import fcntl
    import os
    import subprocess
    import sys
    import time
    from conftest import ROOT
    if not hasattr(fcntl, "F_GETPIPE_SZ"):
        pytest.skip("pipe sizes are a Linux feature")
    if int(Path("/proc/sys/fs/pipe-max-size").read_text()) < 1 << 20:
        pytest.skip("this kernel caps pipes below 1 MB")
    r, w = os.pipe()
    assert fcntl.fcntl(w, fcntl.F_GETPIPE_SZ) < 1 << 20
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    p = subprocess.Popen([sys.executable, "-m", "diagnose", "--format", "json", "-"], stdin=r,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    os.close(r)
    data = SEED.read_bytes()
    os.write(w, data[:100])     # the reader has begun once the pipe has grown
    deadline = time.monotonic() + 30
    while fcntl.fcntl(w, fcntl.F_GETPIPE_SZ) < 1 << 20 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.02)
    size = fcntl.fcntl(w, fcntl.F_GETPIPE_SZ)
    with os.fdopen(w, "wb") as fw:
        fw.write(data[100:])
    out, err = p.communicate(timeout=120)
    assert size >= 1 << 20
    assert p.returncode == 0, err.decode()
    assert report(out)["inputs"][0]["lines"] == data.count(b"\n")


# -- hard-wrapped pastes --------------------------------------------------------------------------
def _fold(data: bytes, width: int) -> bytes:
    """What `fold -w WIDTH` (or a terminal pasted as shown) does to a log: every line longer than
    the width broken into pieces of exactly that many characters."""
    out = []
    for line in data.decode("utf-8").split("\n"):
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return "\n".join(out).encode("utf-8")


def _diag(path) -> dict:
    p = run_cli("--format", "json", path)
    assert p.returncode == 0, p.stderr.decode()
    return one(p.stdout)


FACTS = ("tensor_parallel_size", "gpu_memory_utilization", "model", "engine_version", "kv_cache_tokens",
         "max_model_len", "enforce_eager", "max_num_seqs")


@pytest.mark.parametrize("name,width", [("vllm-dawnboy-r1-32b-fp8-conc101.log", 120),
                                        ("sglang-loosp258-qwen25-7b-pd-decode-v100-eager.log", 90)])
def test_a_hard_wrapped_log_reads_as_the_original(tmp_path, name, width):
    """A real log broken at a fixed width (a terminal, `fold`, a paste box) reads as the original:
    the `non-default args` dict and the config dumps are re-joined (a wrapped run read as TP 1 with
    the default memory fraction and an empty model name), the same findings come out, the note says what was done,
    and every cited line number still points at the line in the user's file."""
    original = FIXTURES / "real" / name
    wrapped = tmp_path / name
    wrapped.write_bytes(_fold(original.read_bytes(), width))
    a, b = _diag(original), _diag(wrapped)
    assert {k: b["deployment"].get(k) for k in FACTS} == {k: a["deployment"].get(k) for k in FACTS}
    assert [f["id"] for f in b["findings"]] == [f["id"] for f in a["findings"]]
    assert any("hard-wrapped lines re-joined" in e for e in b["inputs"][0]["errors"]), b["inputs"]
    assert b["inputs"][0]["lines"] == wrapped.read_bytes().count(b"\n") + (0 if wrapped.read_bytes().endswith(b"\n") else 1)
    lines = wrapped.read_bytes().decode("utf-8").split("\n")       # not read_text: tqdm's \r are not line ends
    cited = [e for f in b["findings"] for e in f["evidence"] if e.get("line")]
    assert cited
    import re
    plain = lambda x: re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", x).strip()  # noqa: E731
    for e in cited:      # the record begins on the cited line of the wrapped file (its header, at least)
        start = plain(lines[e["line"] - 1])
        assert plain(e["text"])[:15] == start[:15], (e, start)


def test_fixed_format_logs_are_not_taken_for_wrapped():
    """Logs whose longest lines are one fixed-format record (glog, NCCL, SGLang's short prefix,
    uniform stats lines) look like a wrap by length alone; none of the real logs or samples is
    changed."""
    from diagnose.sources.readers.unwrap import unwrap
    changed = []
    for f in sorted((FIXTURES / "real").glob("*.log")) + sorted((FIXTURES / "samples").rglob("*.log")):
        if unwrap(f.read_bytes())[1]:
            changed.append(f.name)
    assert not changed, changed


def test_the_wrap_check_given_the_whole_text_answers_as_line_by_line():
    """wrap_width and the lengths it counts skip, given the text joined, what no line holds (CR,
    colour, non-ASCII): over random lines of every such mix and the real logs, the same answer
    and lengths as the line-by-line way."""
    import random

    from diagnose.sources.readers.unwrap import _lengths, wrap_width
    rng = random.Random(5)
    parts = [b"INFO 11-20 09:04:07 [a.py:1] ", b"x" * 30, b" ", b"\t", b"\r", b"\x1b[1;36m", b"\x1b[0m", "é".encode(),
             b"\xff", b"\x0b", b"  ", b"y" * 80, b"z" * 7]
    texts = [p.read_bytes() for p in sorted((FIXTURES / "real").glob("*.log"))]
    for _ in range(400):
        lines = [b"".join(rng.choices(parts, k=rng.randint(0, 6))) for _ in range(rng.randint(0, 40))]
        if rng.random() < 0.3:      # a wrapped paste: many lines of one width
            lines += [b"w" * 72] * rng.randint(3, 12)
        texts.append(b"\n".join(lines))
    for data in texts:
        lines = data.split(b"\n")
        assert wrap_width(lines, data) == wrap_width(lines), data[:200]
        for visible in (True, False):
            assert _lengths(lines, visible, data) == _lengths(lines, visible), data[:200]
