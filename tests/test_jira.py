"""`--format jira`: the ticket in Jira wiki markup — a snapshot of a real log's report, tables whose
rows keep their columns, blocks that close, and input text that stays text."""
from __future__ import annotations

import os
import re

from conftest import FIXTURES, ROOT, run_cli

REAL = FIXTURES / "real" / "vllm-jyngjeon-qwen3-14b-tp4-pcie-client.log"
SEED = FIXTURES / "seed003" / "realtime.log"
BLOCK = re.compile(r"^\{(noformat|code(:\w+)?)\}$\n.*?^\{(noformat|code)\}$", re.M | re.S)


def _jira(*args) -> str:
    p = run_cli("--format", "jira", *args)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode()


def _outside_blocks(text: str) -> str:
    return BLOCK.sub("", text)


def _cells(row: str) -> list[str]:
    sep = r"(?<!\\)\|\|" if row.startswith("||") else r"(?<!\\)\|"
    return re.split(sep, row)[1:-1]


def test_jira_snapshot_of_a_real_log():
    """Snapshot of a real server's report: any change in what the user sees shows up here.
    Regenerate with UPDATE_SNAPSHOTS=1 after checking the new output by eye."""
    snap = ROOT / "tests" / "snapshots" / f"{REAL.stem}.jira"
    text = _jira(REAL.relative_to(ROOT))                        # relative: the same in every clone
    if os.environ.get("UPDATE_SNAPSHOTS"):
        snap.write_text(text)
    assert snap.exists(), "no snapshot yet: run with UPDATE_SNAPSHOTS=1 and review it"
    assert text == snap.read_text()


def test_jira_markup_is_jiras_not_markdown():
    text = _jira(REAL)
    assert text.startswith("h1. diagnose: ") and "\nh2. Findings\n" in text and "\nh2. Deployment\n" in text
    assert "<details>" not in text and "```" not in text and "|---" not in text and "\n# " not in text
    assert "{code:bash}\nvllm serve" in text                    # the corrected command, as a code block
    assert text.count("{noformat}") % 2 == 0 and text.count("{noformat}") >= 2
    # every table row has its header's columns, and no cell is empty (`||` would start a header)
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("||"):
            width = len(_cells(line))
            for row in lines[i + 1:]:
                if not row.startswith("|"):
                    break
                assert len(_cells(row)) == width and all(c.strip() for c in _cells(row)), row


def test_input_text_stays_text_in_a_jira_ticket(tmp_path):
    """A model name and a log line made of Jira markup: a link, an image, a mention, a macro, a
    table break, emphasis, and a line that would close the evidence block."""
    evil = "[click|https://evil.example] !https://evil.example/p.png! [~admin] {html}<b>x</b>{html} *loud* a|b"
    log = tmp_path / "server.log"
    log.write_text(SEED.read_text(encoding="utf-8").replace("Qwen/Qwen3-VL-2B-Instruct", evil)
                   + "(APIServer pid=1) ERROR 10-28 14:20:00 [core.py:1] EngineCore failed to start. {noformat} h1. x\n",
                   encoding="utf-8")
    text = _jira(log)
    outside = _outside_blocks(text)
    assert "://" not in outside and "[~admin]" not in outside and "{html}" not in outside
    assert not re.search(r"(?<!\\)[\[\]!]", outside), re.findall(r".{20}(?<!\\)[\[\]!].{20}", outside)[:5]
    assert not re.search(r"(?<![\\{])\{(?![{])", outside.replace("{{", "").replace("}}", ""))
    assert "*loud*" not in outside and "\\*loud\\*" in outside                         # still there, as text
    row = next(x for x in text.splitlines() if x.startswith("|model|"))
    assert len(_cells(row)) == 2, row
    # the cited line keeps its `{noformat}`, and the block still closes after it
    blocks = BLOCK.findall(text)
    assert blocks and not re.search(r"^\{noformat\}$", _outside_blocks(text), re.M)
    assert "failed to start. {\u200bnoformat} h1. x" in text


def test_a_folder_and_a_comparison_in_jira():
    text = _jira(FIXTURES / "mixed")
    assert re.match(r"h1\. diagnose: \d+ deployments\n", text)
    assert "||#||deployment||verdict||findings||differs from 1 in||" in text
    after = FIXTURES / "rules" / "cuda-graphs-disabled" / "quiet.log"
    cmp = _jira(after, "--baseline", FIXTURES / "rules" / "cuda-graphs-disabled" / "fires.log")
    assert "h2. Compared with the baseline" in cmp and "||signal||before||after||change||verdict||" in cmp
