"""Adding an engine is one folder plus one registry line (README: "Adding an engine").

The steps the README gives are done here to a copy of the package, for a made-up engine whose
lines look like `TOY 2026-01-02 03:04:05 | serving acme/toy-7b, max_batch=64`: its header is
peeled (the line's time is read), its keyword brings the line to its parser on every reader, its
facts reach the report, its flag names make the corrected command, and rule files may name it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, one

TOY_INIT = '''"""A made-up engine for the test: one folder, as the README describes."""
from .. import Engine
from . import header

ENGINE = Engine(name="toy", header=header.match, formats=("toy",), keywords=("max_batch=",),
                metric_prefixes=("toy:",), gauges={"toy:running": ("running", 1, "sum")},
                command="toy-serve", flags_from_facts=(("max_num_seqs", "--max-batch", None),),
                fact_flags={"enforce_eager": ("--eager", True), "max_num_batched_tokens": "--max-tokens"})
'''
TOY_HEADER = '''import re

from .. import Header

HEADER = re.compile(r"^TOY (?P<date>\\d{4}-\\d\\d-\\d\\d) (?P<hms>\\d\\d:\\d\\d:\\d\\d) \\| ")


def match(text):
    m = HEADER.match(text) if text.startswith("TOY ") else None
    return Header("toy", m.end(), date=m.group("date"), hms=m.group("hms")) if m else None
'''
TOY_LINES = '''import re

SERVING = re.compile(r"serving (?P<model>\\S+), max_batch=(?P<n>\\d+)(?P<eager>, eager)?")


class Parser:
    def __init__(self):
        self.version = None

    def feed(self, line, ev, when):
        m = SERVING.search(line.msg)
        if not m:
            return False
        ev.set_fact("model", m.group("model"), line.source, line.lineno, line.raw)
        ev.set_fact("max_num_seqs", int(m.group("n")), line.source, line.lineno, line.raw)
        if m.group("eager"):
            ev.set_fact("enforce_eager", True, line.source, line.lineno, line.raw)
            ev.set_fact("cuda_graphs", False, line.source, line.lineno, line.raw)
        return True
'''


@pytest.fixture(scope="module")
def with_toy(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    shutil.copytree(ROOT / "diagnose", root / "diagnose", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "rules", root / "rules")
    folder = root / "diagnose" / "sources" / "engines" / "toy"
    folder.mkdir()
    (folder / "__init__.py").write_text(TOY_INIT)
    (folder / "header.py").write_text(TOY_HEADER)
    (folder / "lines.py").write_text(TOY_LINES)
    registry = root / "diagnose" / "sources" / "engines" / "__init__.py"
    text = registry.read_text()
    entry = "    from . import sglang, trtllm, vllm\n"
    assert entry in text and "(vllm.ENGINE, sglang.ENGINE, trtllm.ENGINE)" in text
    registry.write_text(text.replace(entry, entry + "    from . import toy\n")
                        .replace("(vllm.ENGINE, sglang.ENGINE, trtllm.ENGINE)", "(vllm.ENGINE, sglang.ENGINE, trtllm.ENGINE, toy.ENGINE)"))
    log = root / "toy.log"
    log.write_text("TOY 2026-01-02 03:04:05 | starting\n"
                   "TOY 2026-01-02 03:04:06 | serving acme/toy-7b, max_batch=64\n"
                   + "TOY 2026-01-02 03:04:07 | nothing to see\n" * 3)
    return root, log


def _run(root, *args):
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.run([sys.executable, "-m", "diagnose", *map(str, args)], cwd=root, env=env,
                           capture_output=True, timeout=120)


def test_a_new_engine_folder_is_read_end_to_end(with_toy):
    root, log = with_toy
    p = _run(root, "--format", "json", log)
    assert p.returncode == 0, p.stderr.decode()
    out = one(p.stdout)
    assert out["inputs"][0]["engine"] == "toy" and out["inputs"][0]["recognised_lines"] == 1
    assert out["deployment"]["model"] == "acme/toy-7b" and out["deployment"]["max_num_seqs"] == 64


def test_every_reader_brings_the_new_engines_lines_to_its_parser(with_toy, tmp_path):
    root, log = with_toy
    big = tmp_path / "big.log"
    big.write_bytes(log.read_bytes() * 20_000)      # over the bulk threshold below
    code = ("import json, sys; from diagnose.sources import load, resolve; from diagnose.sources.readers import bulk; bulk.FAST_MIN_BYTES = int(sys.argv[2]);"
            "ev = load(resolve([sys.argv[1]])); print(json.dumps([ev.inputs[0].engine, ev.inputs[0].recognised_lines]))")
    env = dict(os.environ, PYTHONPATH=str(root))
    got = {m: json.loads(subprocess.run([sys.executable, "-c", code, str(big), str(m)], cwd=root, env=env,
                                        capture_output=True, check=True).stdout) for m in (10**15, 0)}
    assert got[10**15] == got[0] == ["toy", 20_000]


def test_the_shipped_rules_advise_the_new_engine_in_its_own_flags(with_toy, tmp_path):
    """Nothing in rules/ names the toy engine: a rule that states its fix by fact (cuda-graphs-disabled:
    `enforce_eager = false`) is spelled with the toy folder's flag, and its corrected command is built."""
    root, _ = with_toy
    assert _tree(root / "rules") == _tree(ROOT / "rules")       # the shipped rules, untouched
    log = tmp_path / "eager.log"
    log.write_text("TOY 2026-01-02 03:04:06 | serving acme/toy-7b, max_batch=64, eager\n")
    p = _run(root, "--format", "json", log)
    assert p.returncode == 0, p.stderr.decode()
    out = one(p.stdout)
    f = {x["id"]: x for x in out["findings"]}["cuda-graphs-disabled"]
    assert f["fix"]["flags"]["remove"] == ["--eager"]
    p = _run(root, "rules", "concurrency-cap")
    assert p.returncode == 0 and "toy" in p.stdout.decode(), p.stderr.decode()
    code = ("from diagnose.findings.command import base_command, render;"
            "print(render(base_command({}, {'model': 'acme/toy-7b', 'max_num_seqs': 64}, 'toy'), 'toy'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=dict(os.environ, PYTHONPATH=str(root)),
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith("toy-serve") and "--max-batch 64" in out.stdout


def _tree(d) -> dict:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}
