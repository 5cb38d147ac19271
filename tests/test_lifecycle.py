"""What a log says of the server's life beyond its stats: a start-up that stalled until the
server was stopped (the verdict says so, with the last line before the silence), and the shapes
that are not one."""
from __future__ import annotations

from conftest import FIXTURES, analyze

STALLED = FIXTURES / "real" / "trtllm-nvidia-srtslurm-glm52-dynamo-decode-tp8-2node-starthang.log"


def _verdict_text(path) -> str:
    return " ".join(analyze(path)["verdict"]["signals"])


def test_a_start_up_that_stalls_until_it_is_stopped_is_said_in_the_verdict(tmp_path):
    """A real log: eight TensorRT-LLM ranks start bootstrapping NCCL at 08:02:17, then nothing
    until Slurm cancels the job at 08:47:26. The verdict says the server never said it was ready,
    how long nothing was logged, and the last line before the silence (file line 1687)."""
    got = _verdict_text(STALLED)
    assert "never said it was ready: nothing was logged for 45 min before it was stopped" in got
    assert "line 1687:" in got and "bootstrapping NCCL WORLD group" in got
    lines = STALLED.read_text(encoding="utf-8").splitlines(keepends=True)
    stop = lines[1687:]
    variants = {
        # the same stop after five minutes: an operator giving up on a slow start-up, no stall
        "five minutes": lines[:1687] + [ln.replace("T08:47:", "T08:07:").replace("08:47:26", "08:07:26") for ln in stop],
        # the server said it was ready, then sat idle until stopped
        "ready, then idle": lines[:1687] + ["INFO:     Application startup complete.\n"] + stop,
        # the log goes on after the silence for longer than the stop's tail
        "log goes on": lines[:1687] + ["[10/07/2026-08:47:20] [TRT-LLM] [I] [_torch][RANK 0] rendezvous done\n",
                                       "[10/07/2026-08:55:00] [TRT-LLM] [I] [_torch][RANK 0] loading weights\n"]
                       + [ln.replace("T08:47:", "T08:55:").replace("08:47:26", "08:55:26") for ln in stop],
        # no stop at the end: a log copied while the server was still starting
        "no stop": lines[:1687],
    }
    for name, body in variants.items():
        p = tmp_path / f"{name.replace(' ', '-').replace(',', '')}.log"
        p.write_text("".join(body), encoding="utf-8")
        assert "never said it was ready" not in _verdict_text(p), name
